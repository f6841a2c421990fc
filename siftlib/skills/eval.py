"""Selection and no-match accuracy on labelled queries (skills.md §9), per search mode.

    catalog = choose_catalog(fixtures_path, skills_dirs=[], cwd=Path.cwd())  # fixtures.py
    sets = load_sets(fixtures_path, catalog)
    print(render_report(catalog, sets, 5, evaluate_modes(catalog, sets, ...)))  # report.py

The command is `sift rerank-skills eval` (`siftlib.commands.rerank_skills_eval`):

    sift rerank-skills eval --fixtures testdata/skills/eval [--max-requests N] [--json]
    sift rerank-skills eval --fixtures testdata/skills/eval/dev.jsonl

A fixtures file holds one `{"query": "…", "expect": "<skill name>" | null}` object per line.
`--fixtures` names one file, or a folder whose `*.jsonl` files are sets reported side by side
(ours: `dev*.jsonl`, the development sets the scorer is tuned on, and `heldout*.jsonl`,
written by other methods and never tuned on) and together. The catalog is the `--skills-dir`
folders, or else the `catalog/` folder beside the fixtures file (inside the fixtures folder);
only skills under those folders count (the user's and the project's skill folders are left
out, so figures do not depend on the machine). With neither, it is the catalog a search from
`--cwd` would use.

`--fixtures` may also name a folder of catalogs: each subfolder holds one catalog (`catalog/`
or `catalog.json`, a list of `{"name", "description"}` as `../shared/realdata/skills` ships)
and its sets, one per writer. The report then gives each catalog's sets, each writer's
figures over every catalog, and everything together, so a decision tuned for one catalog or
one writer's phrasing shows where it does not carry (ours: `testdata/skills/writers/`). A
catalog whose `catalog.json` links to data the clone lacks is skipped with a warning.

Every query runs in keyword mode, in local mode (spec §10) and, when the global config opts
in and `TYPESAFE_API_KEY` is set, in reranked mode too, with one session (and so one cache)
for the whole run. Figures per mode: selection accuracy (the first match is the expected
skill, over queries that expect one), no-match accuracy (no match at all, over queries that
expect none), p50/p90 latency of the whole search (nearest-rank percentiles) and the provider
tokens reported. `--max-requests N` is a hard ceiling on provider requests over the whole run:
a search makes at most one, so the reranked run stops before the search that could exceed it,
and says so.

A reranked search whose provider call failed (timeout, HTTP error, malformed answer, …)
returns the keyword baseline to its caller, but here it counts as a failure: a miss in both
accuracies, counted in the `failed` column with its reasons, so a failing provider can never
borrow the keyword fallback's accuracy for the reranked row.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from siftlib.skills.catalog import Catalog
from siftlib.skills.consent import RerankSettings, api_key
from siftlib.skills.decide import Decision
from siftlib.skills.fixtures import Fixture
from siftlib.skills.keyword import SkillResult, keyword_search
from siftlib.skills.local import local_search
from siftlib.skills.observe import Attempt, AttemptEvent, Observer, SearchObservation
from siftlib.skills.rerank import SystemOneReranker


@dataclass
class ModeReport:
    """The figures of one mode over the queries it ran."""

    mode: str
    selection_hits: int = 0
    selection_total: int = 0
    no_match_hits: int = 0
    no_match_total: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    decisions: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    stopped_at_ceiling: bool = False

    @property
    def queries(self) -> int:
        """How many queries this mode ran."""
        return self.selection_total + self.no_match_total

    @property
    def selection_accuracy(self) -> float | None:
        """Share of queries expecting a skill whose first match is that skill."""
        return self.selection_hits / self.selection_total if self.selection_total else None

    @property
    def no_match_accuracy(self) -> float | None:
        """Share of queries expecting no skill that got no match."""
        return self.no_match_hits / self.no_match_total if self.no_match_total else None

    def percentile_ms(self, p: float) -> float | None:
        """Return the nearest-rank percentile `p` (0–100) of the latencies."""
        if not self.latencies_ms:
            return None
        ordered = sorted(self.latencies_ms)
        return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]

    @classmethod
    def combined(cls, mode: str, reports: Sequence[ModeReport]) -> ModeReport:
        """Return the figures of `reports` (one mode over several sets) added up."""
        total = cls(mode)
        for r in reports:
            total.selection_hits += r.selection_hits
            total.selection_total += r.selection_total
            total.no_match_hits += r.no_match_hits
            total.no_match_total += r.no_match_total
            total.latencies_ms += r.latencies_ms
            total.requests += r.requests
            total.input_tokens += r.input_tokens
            total.output_tokens += r.output_tokens
            total.decisions += r.decisions
            total.failures += r.failures
            total.stopped_at_ceiling |= r.stopped_at_ceiling
        return total

    def to_json(self) -> dict[str, Any]:
        """Return the figures as a JSON object."""
        return {
            "mode": self.mode,
            "queries": self.queries,
            "selection_accuracy": self.selection_accuracy,
            "selection": [self.selection_hits, self.selection_total],
            "no_match_accuracy": self.no_match_accuracy,
            "no_match": [self.no_match_hits, self.no_match_total],
            "p50_ms": self.percentile_ms(50),
            "p90_ms": self.percentile_ms(90),
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "decisions": dict(sorted(self.decisions.items())),
            "failures": sum(self.failures.values()),
            "failure_reasons": dict(sorted(self.failures.items())),
            "stopped_at_ceiling": self.stopped_at_ceiling,
        }


def evaluate(
    mode: str,
    catalog: Catalog,
    sets: Mapping[str, Sequence[Fixture]],
    *,
    limit: int,
    rerank: Callable[[Sequence[Observer]], SystemOneReranker] | None = None,
    max_requests: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, ModeReport]:
    """Run every set in `mode` (keyword, local, or reranked by `rerank(observers)`)."""
    reports = {name: ModeReport(mode) for name in sets}
    observer = _Observer()
    reranker = None if rerank is None else rerank([observer])
    try:
        used = 0
        for name, fixtures in sets.items():
            report = observer.report = reports[name]
            left = None if max_requests is None else max_requests - used
            _run_fixtures(report, catalog, fixtures, limit, reranker, left, clock)
            used += report.requests
            if report.stopped_at_ceiling:
                break
    finally:
        if reranker is not None:
            reranker.close()
    return reports


def _run_fixtures(
    report: ModeReport,
    catalog: Catalog,
    fixtures: Sequence[Fixture],
    limit: int,
    reranker: SystemOneReranker | None,
    max_requests: int | None,
    clock: Callable[[], float],
) -> None:
    for fixture in fixtures:
        if reranker is not None and max_requests is not None and report.requests >= max_requests:
            report.stopped_at_ceiling = True
            break
        failed_before = sum(report.failures.values())
        started = clock()
        result = _search(report.mode, catalog, fixture.query, limit, reranker)
        report.latencies_ms.append((clock() - started) * 1000.0)
        # A failed provider call served the keyword baseline: a miss here, not its answer.
        failed = sum(report.failures.values()) > failed_before
        if fixture.expect is None:
            report.no_match_total += 1
            report.no_match_hits += not failed and not result.matches
        else:
            report.selection_total += 1
            first = result.matches[0].name if result.matches else None
            report.selection_hits += not failed and first == fixture.expect


def _search(
    mode: str, catalog: Catalog, query: str, limit: int, reranker: SystemOneReranker | None
) -> SkillResult:
    if mode == "local":
        return local_search(catalog, query, limit)
    result = keyword_search(catalog, query, limit)
    if reranker is not None:
        result = reranker.search(catalog, query, limit, result)
    return result


class _Observer:
    """Counts requests, decisions and tokens from the reranker's observations."""

    def __init__(self) -> None:
        self.report = ModeReport("reranked")

    def __call__(self, event: Attempt | SearchObservation) -> None:
        report = self.report
        if isinstance(event, Attempt):
            report.requests += event.event is AttemptEvent.STARTED
            return
        report.decisions[event.decision.value] += 1
        if event.decision is Decision.FAILURE:
            report.failures[event.reason.value] += 1
        report.input_tokens += event.input_tokens or 0
        report.output_tokens += event.output_tokens or 0


Modes = Mapping[str, Mapping[str, ModeReport]]


def evaluate_modes(
    catalog: Catalog,
    sets: Mapping[str, Sequence[Fixture]],
    *,
    limit: int,
    settings: RerankSettings,
    max_requests: int | None = None,
) -> dict[str, dict[str, ModeReport]]:
    """Run keyword and local mode and, when opted in with a key set, the reranked mode."""
    modes = {mode: evaluate(mode, catalog, sets, limit=limit) for mode in ("keyword", "local")}
    key = api_key(settings)
    if settings.enabled and key:
        secret = key

        def rerank(observers: Sequence[Observer]) -> SystemOneReranker:
            return SystemOneReranker(settings, secret, observers=observers)

        modes["reranked"] = evaluate(
            "reranked", catalog, sets, limit=limit, rerank=rerank, max_requests=max_requests
        )
    return modes
