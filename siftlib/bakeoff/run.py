"""`sift bakeoff run`: every query through every configuration, measured.

    searcher = Searcher(config, secrets, store=open_store(config.db))
    plan = read_query_set(Path("search_queries.txt"), Path("search_targets.txt"))
    meta = run_bakeoff(searcher, plan, out=Path("runs/2026-11-30"), k=8, max_credits=200)

Configurations 1–3 go through `Searcher.search` restricted to their sources, with the cache
bypassed (`use_cache=False`); the daily caps still apply. `tavily-direct` is `direct.py`.
Each query × configuration is one line of `results.jsonl`, written as soon as it is measured;
`meta.json` is written last. Latency is the wall-clock time of the whole call, read from an
injectable clock (`time.perf_counter`).

A configuration that cannot run — one of its sources disabled, missing its key or refused by
the SSRF boundary — is recorded in `meta.json` with the reason (`source disabled: tavily`,
`missing key: tavily`), writes no lines, and the others still run.

`--max-credits` is a hard ceiling on paid calls for the run, counted as Tavily credits plus
Brave calls. Before each line, its paid cost is bounded from above (Brave: one call; Tavily:
one credit — sift and the agent-style call both use basic search): if what is spent plus that
bound would pass the ceiling, the line is not run and says `"skipped": "max credits"`, and so
is every later line that uses a paid source. A configuration mixing free and paid sources is
skipped whole: running its free part alone would record a different configuration under its
name. SearXNG alone keeps running to the end. A paid call that timed out counts one against
the ceiling (the provider may have charged it), though the line records no credits for it.
The same bound, summed over every line, is the worst-case spend `worst_case_spend` reports
before the run starts.

Targets are optional: without them no `targets.txt` is saved, and the report's target hit
rate is n/a.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from siftlib import __version__
from siftlib.bakeoff import CONFIGS
from siftlib.bakeoff.rundir import (
    META,
    QUERIES,
    RESULTS,
    TARGETS,
    Line,
    dump_json,
    make_private_dir,
    open_private,
    write_private,
)
from siftlib.bakeoff.score import parse_target
from siftlib.config import PAID_SOURCES
from siftlib.errors import BakeoffError, NoResultsError, QueryError
from siftlib.hits import Hit
from siftlib.query import MAX_QUERY_CHARS
from siftlib.search.pipeline import Searcher, SearchRequest

SKIPPED = "max credits"
_WHY = {"disabled": "source disabled"}

Progress = Callable[[int, int, int, int], None]


@dataclass(frozen=True)
class QuerySet:
    """The queries of a run and their line-aligned targets, when there are targets."""

    queries: list[str]
    targets: list[str] | None = None


def read_query_set(queries: Path, targets: Path | None = None) -> QuerySet:
    """Read and check the query and targets files; refuse them before any search is made."""
    query_lines = _read_lines(queries)
    target_lines = query_lines if targets is None else _read_lines(targets)
    if targets is not None and len(query_lines) != len(target_lines):
        raise BakeoffError(
            f"{targets} has {len(target_lines)} lines but {queries} has {len(query_lines)}: "
            "the targets must be line-aligned with the queries"
        )
    if not query_lines:
        raise BakeoffError(f"{queries} holds no queries")
    for number, query in enumerate(query_lines, 1):
        if not query.strip():
            raise BakeoffError(f"{queries} line {number} is blank")
        if len(" ".join(query.split())) > MAX_QUERY_CHARS:
            raise BakeoffError(f"{queries} line {number} is over {MAX_QUERY_CHARS} characters")
    if targets is None:
        return QuerySet(queries=[q.strip() for q in query_lines])
    for number, target in enumerate(target_lines, 1):
        try:
            parse_target(target)
        except ValueError as exc:
            raise BakeoffError(f"{targets} line {number}: {exc}") from None
    return QuerySet(
        queries=[q.strip() for q in query_lines], targets=[t.strip() for t in target_lines]
    )


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise BakeoffError(f"{path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BakeoffError(f"{path} cannot be read ({type(exc).__name__})") from None


def why_not(searcher: Searcher, config: str) -> str | None:
    """Say why a configuration cannot run (`missing key: tavily`), or None when it can."""
    reasons = []
    for source in CONFIGS[config]:
        why = searcher.unavailable(source)
        if why:
            reasons.append(f"{_WHY.get(why, why)}: {source}")
    return "; ".join(reasons) or None


def runnable_configs(searcher: Searcher) -> list[str]:
    """Return the configurations that can run, in run order."""
    return [config for config in CONFIGS if why_not(searcher, config) is None]


def worst_case_spend(configs: list[str], queries: int) -> dict[str, int]:
    """Return the most a run can spend per paid source: one call or credit per line using it."""
    return {
        source: queries * sum(source in CONFIGS[config] for config in configs)
        for source in PAID_SOURCES
    }


def run_bakeoff(
    searcher: Searcher,
    plan: QuerySet,
    *,
    out: Path,
    k: int,
    max_credits: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run every query through every configuration that can run; write RUN_DIR; return meta."""
    make_private_dir(out)
    for name in (RESULTS, META):
        if (out / name).exists():
            raise BakeoffError(f"{out / name} exists: choose a new --out directory for a new run")
    date = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    reasons = {config: why_not(searcher, config) for config in CONFIGS}
    runnable = [config for config, why in reasons.items() if why is None]
    write_private(out / QUERIES, "".join(f"{q}\n" for q in plan.queries))
    if plan.targets is not None:
        write_private(out / TARGETS, "".join(f"{t}\n" for t in plan.targets))

    spent, ceiling = 0, False
    with open_private(out / RESULTS, exclusive=True) as results:
        for index, query in enumerate(plan.queries):
            for number, config in enumerate(runnable, 1):
                if progress is not None:
                    progress(index + 1, len(plan.queries), number, len(runnable))
                bound = sum(source in PAID_SOURCES for source in CONFIGS[config])
                if bound and (ceiling or (max_credits is not None and spent + bound > max_credits)):
                    ceiling = True
                    line = Line(query_index=index, query=query, config=config, skipped=SKIPPED)
                else:
                    line = measure(searcher, config, index, query, k=k, clock=clock)
                    spent += charged(line)
                results.write(line.to_json() + "\n")
                results.flush()

    meta = {
        "date": date,
        "k": k,
        "sift_version": __version__,
        "configs": {config: {"ran": why is None, "reason": why} for config, why in reasons.items()},
    }
    write_private(out / META, dump_json(meta), exclusive=True)
    if not runnable:
        raise BakeoffError(
            f"no configuration can run ({'; '.join(sorted(set(filter(None, reasons.values()))))}); "
            "enable and key the sources in the config (see meta.json)"
        )
    return meta


def charged(line: Line) -> int:
    """Return what a line counts against `--max-credits`: its credits, plus timed-out paid calls."""
    timed_out = sum(f"{source}: timeout" in line.warnings for source in PAID_SOURCES)
    return sum(line.credits.values()) + timed_out


def measure(
    searcher: Searcher,
    config: str,
    index: int,
    query: str,
    *,
    k: int,
    clock: Callable[[], float] = time.perf_counter,
) -> Line:
    """Run one query through one configuration and time it."""
    from siftlib.bakeoff.direct import search_direct

    credits = {"tavily": 0, "brave_llm": 0}
    started = clock()
    if config == "tavily-direct":
        answer = search_direct(searcher, query, k=k)
        hits, warnings = answer.hits, answer.warnings
        credits["tavily"] = answer.credits
    else:
        request = SearchRequest(
            query=query, k=k, caller="bakeoff", use_cache=False, sources=CONFIGS[config]
        )
        try:
            response = searcher.search(request)
            hits, warnings = response.results, response.warnings
            credits.update(response.credits)
        except NoResultsError as exc:
            hits, warnings = [], [*exc.warnings, str(exc)]
        except QueryError as exc:
            hits, warnings = [], [str(exc)]
    latency_ms = round((clock() - started) * 1000)
    return Line(
        query_index=index,
        query=query,
        config=config,
        hits=hit_records(hits[:k]),
        latency_ms=latency_ms,
        credits=credits,
        warnings=warnings,
    )


def hit_records(hits: list[Hit]) -> list[dict[str, Any]]:
    """Return hits as results.jsonl records: rank, URL, title, snippet."""
    return [
        {"rank": rank, "url": hit.url, "title": hit.title, "snippet": hit.snippet}
        for rank, hit in enumerate(hits, 1)
    ]
