"""The tables and JSON of `sift rerank-skills eval`: per set, per catalog, per writer, all.

print(render_report(catalog, sets, 5, evaluate_modes(catalog, sets, ...)))
print(render_suites(suites, 5))  # a folder of catalogs
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from siftlib.skills.catalog import Catalog
from siftlib.skills.eval import ModeReport, Modes
from siftlib.skills.fixtures import Fixture, Suite


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
