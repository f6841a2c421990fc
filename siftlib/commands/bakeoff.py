"""`sift bakeoff run|score`: run the source configurations on real queries; score the judged run.

Exit codes: 0 success (also when `--max-credits` skipped lines), 2 bad input, config or run
directory, a paid run on a terminal with neither `--max-credits` nor `--yes`, or scoring
refused (no judgments yet, or a blank row).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from siftlib.bakeoff.run import Progress

RUN_EXAMPLE = (
    "example: sift bakeoff run --queries search_queries.txt --targets search_targets.txt "
    "--out runs/2026-11-30 --max-credits 200"
)
SCORE_EXAMPLE = "example: sift bakeoff score runs/2026-11-30"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare `sift bakeoff run` and `sift bakeoff score`."""
    parser.epilog = f"{RUN_EXAMPLE}\n{SCORE_EXAMPLE}"
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    actions = parser.add_subparsers(dest="action", required=True, metavar="{run,score}")

    run = actions.add_parser(
        "run", help="run every query through every configuration", epilog=RUN_EXAMPLE
    )
    run.add_argument("--queries", required=True, metavar="FILE", help="one query per line")
    run.add_argument(
        "--targets",
        metavar="FILE",
        help="line-aligned with the queries: a URL, a domain, or open (optional; without it "
        "the report has no target hit rate)",
    )
    run.add_argument("--out", required=True, metavar="RUN_DIR", help="a new run directory")
    run.add_argument("--k", type=int, metavar="N", help="hits kept per search (default: search.k)")
    run.add_argument(
        "--max-credits",
        type=_positive,
        metavar="N",
        help="hard ceiling on paid calls for the run (Tavily credits + Brave calls)",
    )
    run.add_argument(
        "--yes",
        action="store_true",
        help="accept the worst-case spend without --max-credits (asked for on a terminal)",
    )
    run.add_argument(
        "--allow-private-upstreams",
        action="store_true",
        help="TEST ONLY: let Brave and Tavily point at loopback or private addresses",
    )
    run.add_argument(
        "--config",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="config file (as before the action)",
    )

    score = actions.add_parser(
        "score", help="unblind a judged run and write the report", epilog=SCORE_EXAMPLE
    )
    score.add_argument("run_dir", metavar="RUN_DIR", help="a run directory with judgments")
    score.add_argument(
        "--judgments", metavar="FILE", help="the filled sheet (default: RUN_DIR/judgments.csv)"
    )
    score.add_argument(
        "--config",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="config file (as before the action)",
    )


def run(args: argparse.Namespace) -> int:
    """Dispatch to `run` or `score`; return the exit code."""
    from siftlib.errors import SiftError

    try:
        return _run(args) if args.action == "run" else _score(args)
    except (SiftError, OSError) as exc:
        print(f"sift bakeoff {args.action}: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from siftlib.backend import LocalBackend
    from siftlib.bakeoff.run import read_query_set, run_bakeoff, runnable_configs
    from siftlib.config import load_config
    from siftlib.errors import BakeoffError, QueryError
    from siftlib.lazylog import configure_cli
    from siftlib.query import MAX_K, check_k

    configure_cli()
    config = load_config(args.config)
    k = config.k if args.k is None else args.k
    try:
        check_k(k)
    except QueryError:
        raise BakeoffError(f"--k must be from 1 to {MAX_K}, not {k}") from None
    plan = read_query_set(Path(args.queries), Path(args.targets) if args.targets else None)
    backend = LocalBackend.over(config, allow_private_upstreams=args.allow_private_upstreams)
    try:
        searcher = backend.searcher()
        _check_spend(args, runnable_configs(searcher), len(plan.queries))
        meta = run_bakeoff(
            searcher,
            plan,
            out=Path(args.out),
            k=k,
            max_credits=args.max_credits,
            progress=_progress_line(),
        )
    finally:
        backend.close()
    for name, info in meta["configs"].items():
        if not info["ran"]:
            print(f"sift bakeoff run: {name} not run: {info['reason']}", file=sys.stderr)
    _say_skipped(Path(args.out), args.max_credits)
    print(f"wrote {Path(args.out) / 'results.jsonl'}; next: sift blind {args.out}")
    return 0


def _check_spend(args: argparse.Namespace, configs: list[str], queries: int) -> None:
    """Say the worst-case spend before the first paid call; on a terminal, want it accepted."""
    from siftlib.bakeoff.run import worst_case_spend
    from siftlib.errors import BakeoffError

    spend = worst_case_spend(configs, queries)
    total = sum(spend.values())
    if not total:
        return
    cap = "" if args.max_credits is None else f"; --max-credits {args.max_credits} caps it"
    print(
        f"sift bakeoff run: worst case {total} paid calls for {queries} queries "
        f"({spend['brave_llm']} Brave calls, {spend['tavily']} Tavily credits){cap}",
        file=sys.stderr,
    )
    if args.max_credits is None and not args.yes and sys.stdin.isatty():
        raise BakeoffError(
            "confirm that spend with --yes, or cap it with --max-credits N (nothing was spent)"
        )


def _say_skipped(out: Path, max_credits: int | None) -> None:
    """Say how many lines each configuration skipped at the credit ceiling, if any."""
    from siftlib.bakeoff.rundir import read_run

    run = read_run(out)
    skipped = {config: 0 for config in run.ran}
    for line in run.lines.values():
        if line.skipped:
            skipped[line.config] += 1
    counts = ", ".join(f"{config} {n}" for config, n in skipped.items() if n)
    if counts:
        print(
            f"sift bakeoff run: --max-credits {max_credits} reached; lines skipped: {counts} "
            f"(of {len(run.queries)} each). Only configurations that ran every query can win "
            "the report; raise --max-credits and run again to compare them all.",
            file=sys.stderr,
        )


def _progress_line() -> Progress:
    tty = sys.stderr.isatty()

    def show(query: int, queries: int, config: int, configs: int) -> None:
        text = f"query {query}/{queries} · config {config}/{configs}"
        if tty:
            end = "\n" if (query, config) == (queries, configs) else ""
            sys.stderr.write(f"\r{text}{end}")
        else:
            sys.stderr.write(f"{text}\n")
        sys.stderr.flush()

    return show


def _score(args: argparse.Namespace) -> int:
    from siftlib.bakeoff.report import render_markdown, write_reports
    from siftlib.bakeoff.score import score_run

    board = score_run(
        Path(args.run_dir), judgments=Path(args.judgments) if args.judgments else None
    )
    md, html = write_reports(board)
    sys.stdout.write(render_markdown(board))
    print(f"\nwrote {md} and {html}")
    return 0
