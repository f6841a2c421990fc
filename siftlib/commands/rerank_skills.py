"""`sift rerank-skills`: find the right agent skill in the local catalog (skills.md §1).

One search per run, or a `--stdio` session (`siftlib.skills.session`) answering one JSON
request per line. `--mode keyword|local` picks the ranking (§10); in a session, a request's
`"mode"` wins over it. Without either, `[skill_search] mode` in the project or global config
does (`siftlib.skills.mode`).
`sift rerank-skills eval` is its own command (`rerank_skills_eval`).

Diagnostics (shadowed skills, ignored or invalid config) go to stderr; stdout carries only
results. Tool errors exit 2 with the sentence on stderr, and `{"error": …}` on stdout under
`--json` (every answer line of `--stdio`).

    $ sift rerank-skills "fill in a pdf form" --limit 3 --json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from siftlib.commands import fail
from siftlib.config import resolve_config_path
from siftlib.errors import ToolError
from siftlib.skills.answer import render_json, render_text
from siftlib.skills.keyword import DEFAULT_LIMIT, check_limit, query_terms
from siftlib.skills.mode import check_mode
from siftlib.skills.session import Session, serve_stdio

_DIGITS = re.compile(r"[0-9]+")

EXAMPLES = """\
examples:
  sift rerank-skills "fill in a pdf form"
  sift rerank-skills "debug a failing test" --limit 3 --json --skills-dir ./skills
  sift rerank-skills "fill in a word document" --mode local
  echo '{"query": "make slides", "limit": 2, "mode": "local"}' | sift rerank-skills --stdio
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of `sift rerank-skills`."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EXAMPLES
    parser.add_argument("query", nargs="*", help="what the skill should do")
    parser.add_argument("--limit", metavar="N", help="matches to return, 1-20 (default 5)")
    parser.add_argument("--k", dest="limit", help=argparse.SUPPRESS)  # as `sift search --k`
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument(
        "--skills-dir",
        metavar="DIR",
        action="append",
        default=[],
        help="a skills folder searched first (repeatable)",
    )
    parser.add_argument("--cwd", metavar="DIR", help="project folder (default: working directory)")
    parser.add_argument("--stdio", action="store_true", help="answer JSON requests, one per line")
    parser.add_argument(
        "--mode", metavar="MODE", help="keyword (the baseline) or local (offline ranking)"
    )


def run(args: argparse.Namespace) -> int:
    """Run one search, or a `--stdio` session."""
    cwd = Path(os.path.abspath(args.cwd or os.getcwd()))
    if not os.path.isdir(cwd):
        return _tool_error(args, f"--cwd {cwd} is not a directory")

    try:
        mode = None if args.mode is None else check_mode(args.mode)
    except ToolError as exc:
        return _tool_error(args, str(exc))

    def open_session() -> tuple[Session, list[str]]:
        return Session.open(
            config_path=resolve_config_path(args.config),
            skills_dirs=[Path(d) for d in args.skills_dir],
            cwd=cwd,
            mode=mode,
            notify=lambda notice: warn([notice]),
        )

    if args.stdio:
        if args.query:
            sys.stderr.write("sift rerank-skills: --stdio takes its queries from stdin\n")
            return 2
        return serve_stdio(open_session, sys.stdin.buffer, sys.stdout, warn=warn, mode=mode)
    query = " ".join(args.query)
    try:
        limit = parse_limit(args.limit)
        if not query_terms(query):
            raise ToolError("the query has no search terms (letters or digits)")
    except ToolError as exc:
        return _tool_error(args, str(exc))
    session, diagnostics = open_session()
    warn(diagnostics)
    try:
        result = session.search(query, limit, mode=mode)
    finally:
        session.close()
    catalog = session.snapshot.catalog
    if args.json:
        print(json.dumps(render_json(result, catalog=catalog)))
    else:
        print(render_text(result, catalog=catalog))
    return 0


def parse_limit(text: str | None) -> int:
    """Return the `--limit` value as an integer from 1 to 20; raise `ToolError` otherwise."""
    if text is None:
        return DEFAULT_LIMIT
    if not _DIGITS.fullmatch(text.strip()):
        raise ToolError("limit must be an integer from 1 to 20")
    return check_limit(int(text))


def warn(diagnostics: Sequence[str]) -> None:
    """Write each diagnostic to stderr, one line each."""
    for diagnostic in diagnostics:
        sys.stderr.write(f"sift rerank-skills: {diagnostic}\n")


def _tool_error(args: argparse.Namespace, message: str) -> int:
    return fail("sift rerank-skills", message, 2, as_json=args.json)
