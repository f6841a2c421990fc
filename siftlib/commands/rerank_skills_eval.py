"""`sift rerank-skills eval`: accuracy of each skill-search mode on labelled queries (§9).

Exit codes: 0 report printed, 2 bad arguments or fixtures (the sentence on stderr, and
`{"error": …}` on stdout under `--json`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from siftlib.commands import fail
from siftlib.config import resolve_config_path
from siftlib.errors import ToolError
from siftlib.skills.consent import load_settings
from siftlib.skills.eval import evaluate_modes
from siftlib.skills.fixtures import catalog_folders, choose_catalog, load_sets, load_suites
from siftlib.skills.keyword import DEFAULT_LIMIT, check_limit
from siftlib.skills.report import render_report, render_suites, report_json, suites_json

EXAMPLE = """\
examples:
  sift rerank-skills eval --fixtures testdata/skills/eval --max-requests 40
  sift rerank-skills eval --fixtures testdata/skills/writers   # per catalog and per writer
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of `sift rerank-skills eval`."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EXAMPLE
    parser.add_argument(
        "--fixtures",
        metavar="FILE",
        help='labelled queries, {"query", "expect"} per line; a folder: each *.jsonl a set',
    )
    parser.add_argument("--max-requests", metavar="N", help="ceiling on provider requests")
    parser.add_argument("--limit", metavar="N", help="matches per search, 1-20 (default 5)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--skills-dir",
        metavar="DIR",
        action="append",
        default=[],
        help="the catalog's folders (default: catalog/ beside the fixtures)",
    )
    parser.add_argument("--cwd", metavar="DIR", help="project folder (default: working directory)")


def run(args: argparse.Namespace) -> int:
    """Run every labelled query in each mode and print the report."""
    try:
        if not args.fixtures:
            raise ToolError("eval needs --fixtures FILE")
        fixtures_path = Path(args.fixtures)
        limit = check_limit(_integer(args.limit, "--limit", DEFAULT_LIMIT))
        max_requests = None
        if args.max_requests is not None:
            max_requests = _integer(args.max_requests, "--max-requests", 0)
        cwd = Path(os.path.abspath(args.cwd or os.getcwd()))
        skills_dirs = [Path(d) for d in args.skills_dir]
        folders = [] if skills_dirs else catalog_folders(fixtures_path)
        if folders:
            return _run_suites(args, folders, cwd, limit, max_requests)
        catalog = choose_catalog(fixtures_path, skills_dirs, cwd)
        sets = load_sets(fixtures_path, catalog)
    except ToolError as exc:
        return _error(args, str(exc))
    _warn(catalog.diagnostics)
    settings, diagnostics = load_settings(resolve_config_path(args.config), cwd=cwd)
    _warn(diagnostics)
    modes = evaluate_modes(catalog, sets, limit=limit, settings=settings, max_requests=max_requests)
    if args.json:
        print(json.dumps(report_json(catalog, sets, limit, modes)))
    else:
        print(render_report(catalog, sets, limit, modes))
    return 0


def _run_suites(
    args: argparse.Namespace, folders: list[Path], cwd: Path, limit: int, max_requests: int | None
) -> int:
    """Evaluate each catalog of a folder of catalogs and print them, per writer and together."""
    suites, warnings = load_suites(folders, cwd)
    _warn(warnings)
    settings, diagnostics = load_settings(resolve_config_path(args.config), cwd=cwd)
    _warn(diagnostics)
    results = {}
    for name, suite in suites.items():
        _warn([f"{name}: {d}" for d in suite.catalog.diagnostics])
        modes = evaluate_modes(
            suite.catalog, suite.sets, limit=limit, settings=settings, max_requests=max_requests
        )
        if max_requests is not None:
            max_requests -= sum(r.requests for r in modes.get("reranked", {}).values())
        results[name] = (suite, modes)
    if args.json:
        print(json.dumps(suites_json(results, limit)))
    else:
        print(render_suites(results, limit))
    return 0


def _integer(text: str | None, option: str, default: int) -> int:
    if text is None:
        return default
    stripped = text.strip()
    if not stripped.isdigit() or not stripped.isascii():
        raise ToolError(f"{option} must be a non-negative integer")
    return int(stripped)


def _warn(diagnostics: list[str] | tuple[str, ...]) -> None:
    for diagnostic in diagnostics:
        sys.stderr.write(f"sift rerank-skills eval: {diagnostic}\n")


def _error(args: argparse.Namespace, message: str) -> int:
    return fail("sift rerank-skills eval", message, 2, as_json=args.json)
