"""`sift fetch`: read one web page as markdown, in-process or through a sift server.

Exit codes (fetch.md §1): 0 fetched (any upstream status; a non-2xx one is named on
stderr), 1 the fetch failed, 2 usage or config error, 3 authentication refused, 4 refused
by the guard (address, name, scheme, port, redirect or content type), 5 the sift server is
unreachable. Warnings (truncation) go to stderr; the page alone goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from siftlib.commands import for_terminal
from siftlib.errors import (
    AuthError,
    Blocked,
    ConfigError,
    FetchFailed,
    QueryError,
    UnreachableError,
)

if TYPE_CHECKING:
    from siftlib.fetch.fetcher import FetchResult

# `siftlib.gateway.scrape.NATIVE_FORMATS`, spelled out so that building the parser imports no httpx
# (a test keeps the two equal).
FORMATS = ("markdown", "text", "html", "links")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of `sift fetch`."""
    parser.epilog = "example: sift fetch https://sqlite.org/wal.html --max-chars 4000"
    parser.add_argument("url", help="the page to read (http or https)")
    parser.add_argument(
        "--format", choices=FORMATS, default="markdown", help="what to print (default markdown)"
    )
    parser.add_argument(
        "--full", action="store_true", help="the whole page, not only its main content"
    )
    parser.add_argument("--json", action="store_true", help="print the native JSON envelope")
    parser.add_argument(
        "--max-age",
        type=float,
        metavar="SECONDS",
        help="a cached copy this recent will do (0: always fetch; default [fetch] cache_max_age)",
    )
    parser.add_argument(
        "--max-chars", type=int, metavar="N", help="cut the content at N characters"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--server", metavar="URL", help="fetch through this sift server")
    where.add_argument("--local", action="store_true", help="fetch in-process (the default)")


def run(args: argparse.Namespace) -> int:
    """Fetch one page and print it; return the exit code."""
    from siftlib.lazylog import configure_cli

    configure_cli()
    from siftlib.backend import open_backend
    from siftlib.fetch.fetcher import FetchRequest

    if args.max_chars is not None and args.max_chars < 1:
        return _fail(args, QueryError("--max-chars must be a positive number"), 2)
    if args.max_age is not None and not args.max_age >= 0:
        return _fail(args, QueryError("--max-age must be a number of seconds, at least 0"), 2)
    request = FetchRequest(
        url=args.url,
        format=args.format,
        main_content=not args.full,
        max_chars=args.max_chars,
        max_age=args.max_age,
    )
    try:
        backend = open_backend(config=args.config, server=args.server, local=args.local)
        try:
            page = backend.fetch(request)
        finally:
            backend.close()
    except (ConfigError, QueryError) as exc:
        return _fail(args, exc, 2)
    except FetchFailed as exc:
        return _fail(args, exc, 1)
    except AuthError as exc:
        return _fail(args, exc, 3)
    except Blocked as exc:
        return _fail(args, exc, 4)
    except UnreachableError as exc:
        return _fail(args, exc, 5)
    _print(page, as_json=args.json)
    return 0


def _print(page: FetchResult, *, as_json: bool) -> None:
    from siftlib.render import terminal_page

    if not 200 <= page.status < 300:
        print(f"sift fetch: the page answered {page.status}", file=sys.stderr)
    if as_json:
        print(json.dumps(page.to_native(), ensure_ascii=False))
        return
    for warning in page.warnings:
        print(f"sift: warning: {warning}", file=sys.stderr)
    sys.stdout.write(terminal_page(for_terminal(page.content, sys.stdout)))


def _fail(args: argparse.Namespace, exc: Exception, code: int) -> int:
    from siftlib.commands import fail

    return fail("sift fetch", exc, code, as_json=args.json)
