"""`sift search`: one search, in-process (the embedded default) or through a sift server.

Exit codes (search.md §1): 0 success, 1 no source produced results, 2 usage, config or query
error, 3 authentication refused, 5 the sift server is unreachable.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from siftlib.commands import fail, for_terminal
from siftlib.errors import AuthError, ConfigError, NoResultsError, QueryError, UnreachableError

if TYPE_CHECKING:
    from siftlib.search.pipeline import SearchResponse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of `sift search`."""
    parser.epilog = "example: sift search sqlite wal checkpoint --k 5"
    parser.add_argument("query", nargs="+", help="what to search for (the words form one query)")
    parser.add_argument("--k", type=int, metavar="N", help="number of results (1-50)")
    parser.add_argument("--limit", type=int, dest="k", help=argparse.SUPPRESS)  # alias of --k
    parser.add_argument("--json", action="store_true", help="print the native JSON envelope")
    add_where_arguments(parser)


def add_where_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare where searches run: `--server URL` or `--local` (and the test-only switch)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--server", metavar="URL", help="search through this sift server")
    where.add_argument("--local", action="store_true", help="search in-process (the default)")
    parser.add_argument(
        "--allow-private-upstreams",
        action="store_true",
        help="TEST ONLY: let Brave and Tavily point at loopback or private addresses",
    )


def run(args: argparse.Namespace) -> int:
    """Run one search and print it; return the exit code."""
    from siftlib.lazylog import configure_cli_later

    configure_cli_later("sift.source")  # that logger's warnings are printed below
    from siftlib.backend import open_backend
    from siftlib.search.pipeline import SearchRequest

    query = " ".join(args.query)
    try:
        backend = open_backend(
            config=args.config,
            server=args.server,
            local=args.local,
            allow_private_upstreams=args.allow_private_upstreams,
        )
        try:
            response = backend.search(SearchRequest(query=query, k=args.k))
        finally:
            backend.close()
    except (ConfigError, QueryError) as exc:
        return _fail(args, exc, 2)
    except NoResultsError as exc:
        for warning in exc.warnings:
            print(f"sift: warning: {warning}", file=sys.stderr)
        return _fail(args, exc, 1)
    except AuthError as exc:
        return _fail(args, exc, 3)
    except UnreachableError as exc:
        return _fail(args, exc, 5)
    _print(response, as_json=args.json)
    return 0


def _print(response: SearchResponse, *, as_json: bool) -> None:
    from siftlib.render import terminal_hits

    for warning in response.warnings:
        print(f"sift: warning: {warning}", file=sys.stderr)
    if as_json:
        print(json.dumps(response.to_native(), ensure_ascii=False))
        return
    if not response.results:
        print("no results", file=sys.stderr)
        return
    print(for_terminal(terminal_hits(response.results), sys.stdout))


def _fail(args: argparse.Namespace, exc: Exception, code: int) -> int:
    return fail("sift search", exc, code, as_json=args.json)
