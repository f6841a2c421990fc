"""Selection and no-match accuracy on labelled queries (skills.md §9), per search mode.

    catalog = choose_catalog(fixtures_path, skills_dirs=[], cwd=Path.cwd())
    sets = load_sets(fixtures_path, catalog)
    print(render_report(catalog, sets, 5, evaluate_modes(catalog, sets, ...)))

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

import json
import math
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from siftlib.errors import ToolError
from siftlib.skills.catalog import Catalog, Skill, discover
from siftlib.skills.consent import RerankSettings, api_key
from siftlib.skills.decide import Decision
from siftlib.skills.keyword import SkillResult, keyword_search, query_terms
from siftlib.skills.local import local_search
from siftlib.skills.rerank import (
    Attempt,
    AttemptEvent,
    Observer,
    SearchObservation,
    SystemOneReranker,
)


@dataclass(frozen=True)
class Fixture:
    """One labelled query: the skill it should find, or None when no skill fits."""

    query: str
    expect: str | None


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


def load_fixtures(path: Path, catalog: Catalog) -> list[Fixture]:
    """Read the labelled queries; raise `ToolError` naming the first bad line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"cannot read fixtures {path}: {exc.__class__.__name__}") from None
    names = {skill.name for skill in catalog.skills}
    fixtures = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            item = json.loads(line)
        except ValueError:
            raise ToolError(f"{where}: not a JSON object") from None
        if not isinstance(item, dict) or set(item) != {"query", "expect"}:
            raise ToolError(f'{where}: expected {{"query": …, "expect": …}}')
        query, expect = item["query"], item["expect"]
        if not isinstance(query, str) or not query_terms(query):
            raise ToolError(f"{where}: the query has no search terms")
        if expect is not None and not isinstance(expect, str):
            raise ToolError(f"{where}: expect must be a skill name or null")
        if expect is not None and expect not in names:
            raise ToolError(f"{where}: expected skill {expect!r} is not in the catalog")
        fixtures.append(Fixture(query, expect))
    if not fixtures:
        raise ToolError(f"{path}: no labelled queries")
    return fixtures


def load_catalog(folders: Sequence[Path]) -> Catalog:
    """Discover the skills under `folders` only."""
    roots = [Path(os.path.abspath(folder)) for folder in folders]
    for root in roots:
        if not root.is_dir():
            raise ToolError(f"skills directory {root} not found")
    found = discover(skills_dirs=roots, cwd=roots[0], home=roots[0])
    inside = tuple(s for s in found.skills if any(s.base_dir.is_relative_to(r) for r in roots))
    return Catalog(skills=inside, diagnostics=found.diagnostics)


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


def fixture_files(path: Path) -> list[Path]:
    """Return the fixtures files `path` names: itself, or a folder's `*.jsonl` files."""
    if not path.is_dir():
        return [path]
    files = sorted(path.glob("*.jsonl"))
    if not files:
        raise ToolError(f"{path}: no *.jsonl fixtures files")
    return files


def choose_catalog(fixtures_path: Path, skills_dirs: Sequence[Path], cwd: Path) -> Catalog:
    """Return the catalog to evaluate on: `skills_dirs`, else `catalog/` or `catalog.json`
    beside the fixtures, else the catalog a search from `cwd` would use."""
    beside = (fixtures_path if fixtures_path.is_dir() else fixtures_path.parent) / "catalog"
    if skills_dirs:
        return load_catalog(skills_dirs)
    if beside.is_dir():
        return load_catalog([beside])
    listed = beside.with_suffix(".json")
    if listed.is_file():
        return load_catalog_json(listed)
    if listed.is_symlink():  # e.g. a link to ../shared, which a clone may lack
        raise ToolError(f"{listed} links to a catalog that is not there")
    return discover(cwd=cwd)


def load_catalog_json(path: Path) -> Catalog:
    """Read a catalog listed as JSON, `[{"name", "description", "disable_model_invocation"?}]`
    (the form of `../shared/realdata/skills/catalog.json`), as discovery would see it: the
    first skill of a name wins and disabled ones are left out. Paths point beside the file."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ToolError(f"cannot read catalog {path}: {exc.__class__.__name__}") from None
    if not isinstance(entries, list):
        raise ToolError(f"{path}: expected a list of skills")
    root = Path(os.path.abspath(path.parent))
    first: dict[str, tuple[Skill, bool]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(key), str) and entry[key] for key in ("name", "description")
        ):
            raise ToolError(f"{path}: each skill needs a name and a description")
        folder = root / entry["name"]
        skill = Skill(entry["name"], entry["description"], folder / "SKILL.md", folder)
        first.setdefault(skill.name, (skill, entry.get("disable_model_invocation") is True))
    return Catalog(skills=tuple(skill for skill, disabled in first.values() if not disabled))


@dataclass(frozen=True)
class Suite:
    """One catalog and its labelled sets, each set a writer's, named by its file's stem."""

    catalog: Catalog
    sets: dict[str, list[Fixture]]


def catalog_folders(path: Path) -> list[Path]:
    """Return the subfolders of `path` that hold fixtures when `path` itself holds none (a
    folder of catalogs), else nothing."""
    if not path.is_dir() or any(path.glob("*.jsonl")):
        return []
    return sorted(sub for sub in path.iterdir() if sub.is_dir() and any(sub.glob("*.jsonl")))


def load_suites(folders: Sequence[Path], cwd: Path) -> tuple[dict[str, Suite], list[str]]:
    """Read each catalog folder's catalog and sets; return them by folder name, and a warning
    for each catalog that is not there (a link to shared data a clone lacks)."""
    suites: dict[str, Suite] = {}
    warnings: list[str] = []
    for folder in folders:
        try:
            catalog = choose_catalog(folder, [], cwd)
        except ToolError as exc:
            warnings.append(f"{folder.name}: skipped: {exc}")
            continue
        suites[folder.name] = Suite(catalog, load_sets(folder, catalog))
    if not suites:
        raise ToolError("no catalog of the fixtures folder could be read")
    return suites, warnings


def load_sets(fixtures_path: Path, catalog: Catalog) -> dict[str, list[Fixture]]:
    """Read every fixtures file `fixtures_path` names, each a set named by its file's stem."""
    return {path.stem: load_fixtures(path, catalog) for path in fixture_files(fixtures_path)}


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


def report_json(
    catalog: Catalog, sets: Mapping[str, Sequence[Fixture]], limit: int, modes: Modes
) -> dict[str, Any]:
    """Return the whole evaluation as one JSON object: all sets together, then each set."""
    everything = [fixture for fixtures in sets.values() for fixture in fixtures]
    return {
        "skills": len(catalog.skills),
        **_counts(everything),
        "limit": limit,
        "modes": {
            mode: ModeReport.combined(mode, list(by_set.values())).to_json()
            for mode, by_set in modes.items()
        },
        "sets": {
            name: {
                **_counts(fixtures),
                "modes": {mode: by_set[name].to_json() for mode, by_set in modes.items()},
            }
            for name, fixtures in sets.items()
        },
    }


def render_report(
    catalog: Catalog, sets: Mapping[str, Sequence[Fixture]], limit: int, modes: Modes
) -> str:
    """Return the evaluation as small tables, one row per mode: each set, then all together."""
    everything = [fixture for fixtures in sets.values() for fixture in fixtures]
    lines = [f"{len(catalog.skills)} skills, limit {limit}"]
    tables = [
        (name, fixtures, {m: by_set[name] for m, by_set in modes.items()})
        for name, fixtures in sets.items()
    ]
    if len(sets) > 1:
        combined = {m: ModeReport.combined(m, list(by_set.values())) for m, by_set in modes.items()}
        tables.append(("all sets", everything, combined))
    for name, fixtures, reports in tables:
        counts = _counts(fixtures)
        lines += [
            "",
            f"{name}: {counts['queries']} labelled queries ({counts['expect_skill']} expect a"
            f" skill, {counts['expect_none']} expect none)",
            f"{'mode':<9}{'queries':>8}{'selection':>11}{'no-match':>10}{'failed':>8}"
            f"{'p50 ms':>9}{'p90 ms':>9}{'requests':>10}{'tokens in':>11}{'tokens out':>12}",
        ]
        for r in reports.values():
            lines.append(
                f"{r.mode:<9}{r.queries:>8}{_percent(r.selection_accuracy):>11}"
                f"{_percent(r.no_match_accuracy):>10}{sum(r.failures.values()):>8}"
                f"{_ms(r.percentile_ms(50)):>9}"
                f"{_ms(r.percentile_ms(90)):>9}{r.requests:>10}{r.input_tokens:>11}"
                f"{r.output_tokens:>12}"
            )
    reranked = modes.get("reranked")
    if reranked is None:
        lines.append(
            "\nreranked: not run (reranking is not enabled in the global config,"
            " or TYPESAFE_API_KEY is not set)"
        )
    else:
        r = ModeReport.combined("reranked", list(reranked.values()))
        if r.decisions:
            decided = ", ".join(f"{name} {count}" for name, count in sorted(r.decisions.items()))
            lines.append(f"\nreranked decisions: {decided}")
        if r.failures:
            reasons = ", ".join(f"{name} {count}" for name, count in sorted(r.failures.items()))
            lines.append(
                f"reranked: {sum(r.failures.values())} of {r.queries} searches failed ({reasons});"
                " each counts as a miss, not as the keyword fallback it returned"
            )
        if r.stopped_at_ceiling:
            lines.append(
                f"reranked: stopped at the --max-requests ceiling ({r.requests} requests)"
                f" after {r.queries} of {len(everything)} queries"
            )
    return "\n".join(lines)


def _counts(fixtures: Sequence[Fixture]) -> dict[str, int]:
    expecting = sum(f.expect is not None for f in fixtures)
    return {
        "queries": len(fixtures),
        "expect_skill": expecting,
        "expect_none": len(fixtures) - expecting,
    }


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


Suites = Mapping[str, tuple[Suite, Modes]]


def _by_writer(suites: Suites) -> dict[str, dict[str, ModeReport]]:
    """Return each writer's figures per mode, added up over every catalog holding its set."""
    writers: dict[str, dict[str, list[ModeReport]]] = {}
    for _suite, modes in suites.values():
        for mode, by_set in modes.items():
            for writer, report in by_set.items():
                writers.setdefault(writer, {}).setdefault(mode, []).append(report)
    return {
        writer: {mode: ModeReport.combined(mode, reports) for mode, reports in by_mode.items()}
        for writer, by_mode in sorted(writers.items())
    }


def _everything(suites: Suites) -> dict[str, ModeReport]:
    reports: dict[str, list[ModeReport]] = {}
    for _suite, modes in suites.values():
        for mode, by_set in modes.items():
            reports.setdefault(mode, []).extend(by_set.values())
    return {mode: ModeReport.combined(mode, rs) for mode, rs in reports.items()}


def render_suites(suites: Suites, limit: int) -> str:
    """Return the report of a folder of catalogs: each catalog's, then per writer, then all."""
    parts = []
    for name, (suite, modes) in suites.items():
        table = render_report(suite.catalog, suite.sets, limit, modes).split("\n\nreranked")[0]
        parts.append(f"== catalog {name}: " + table)
    lines = ["== per writer, over every catalog (selection / no-match)"]
    header = f"{'writer':<14}{'mode':<9}{'queries':>8}{'selection':>11}{'no-match':>10}"
    lines.append(header)
    for writer, by_mode in _by_writer(suites).items():
        for r in by_mode.values():
            lines.append(
                f"{writer:<14}{r.mode:<9}{r.queries:>8}{_percent(r.selection_accuracy):>11}"
                f"{_percent(r.no_match_accuracy):>10}"
            )
    lines.append("")
    lines.append("== every catalog and writer together")
    lines.append(f"{'mode':<9}{'queries':>8}{'selection':>11}{'no-match':>10}")
    for r in _everything(suites).values():
        lines.append(
            f"{r.mode:<9}{r.queries:>8}{_percent(r.selection_accuracy):>11}"
            f"{_percent(r.no_match_accuracy):>10}"
        )
    return "\n\n".join(parts) + "\n\n" + "\n".join(lines)


def suites_json(suites: Suites, limit: int) -> dict[str, Any]:
    """Return the report of a folder of catalogs as one JSON object."""
    return {
        "limit": limit,
        "modes": {mode: r.to_json() for mode, r in _everything(suites).items()},
        "catalogs": {
            name: report_json(suite.catalog, suite.sets, limit, modes)
            for name, (suite, modes) in suites.items()
        },
        "writers": {
            writer: {mode: r.to_json() for mode, r in by_mode.items()}
            for writer, by_mode in _by_writer(suites).items()
        },
    }
