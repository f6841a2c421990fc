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
from typing import Any

from siftlib.commands import for_terminal
from siftlib.errors import (
    AuthError,
    Blocked,
    ConfigError,
    FetchFailed,
    QueryError,
    UnreachableError,
)

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
    from siftlib.config import load_client_config

    if args.max_chars is not None and args.max_chars < 1:
        return _fail(args, QueryError("--max-chars must be a positive number"), 2)
    if args.max_age is not None and not args.max_age >= 0:
        return _fail(args, QueryError("--max-age must be a number of seconds, at least 0"), 2)
    body: dict[str, Any] = {"url": args.url, "format": args.format, "main_content": not args.full}
    if args.max_chars is not None:
        body["max_chars"] = args.max_chars
    if args.max_age is not None:
        body["max_age"] = args.max_age
    try:
        client = None if args.local else load_client_config(args.server)
        if client is not None:
            from siftlib.gateway.client import fetch_remote

            envelope = fetch_remote(client.url, client.token, body, timeout=75.0)
        else:
            envelope = _fetch_local(args)
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
    _print(envelope, as_json=args.json)
    return 0


def _fetch_local(args: argparse.Namespace) -> dict[str, Any]:
    from siftlib.config import load_config, load_secrets
    from siftlib.fetch.cache import open_fetch_cache
    from siftlib.fetch.fetcher import Fetcher, FetchRequest

    config = load_config(args.config)
    if not config.fetch.enabled:
        raise ConfigError(f"fetch is disabled: set fetch.enabled = true in {config.path}")
    request = FetchRequest(
        url=args.url,
        format=args.format,
        main_content=not args.full,
        max_chars=args.max_chars,
        max_age=args.max_age,
    )
    secrets = load_secrets(config.secret_env, expected=config.secret_env_configured)
    cache = open_fetch_cache(config, secrets)
    try:
        with Fetcher(config.fetch, cache=cache) as fetcher:
            return fetcher.fetch(request).to_native()
    finally:
        if cache is not None:
            cache.close()


def _print(envelope: dict[str, Any], *, as_json: bool) -> None:
    status = envelope.get("status")
    if isinstance(status, int) and not 200 <= status < 300:
        print(f"sift fetch: the page answered {status}", file=sys.stderr)
    if as_json:
        print(json.dumps(envelope, ensure_ascii=False))
        return
    for warning in envelope.get("warnings", []):
        print(f"sift: warning: {warning}", file=sys.stderr)
    content = for_terminal(str(envelope.get("content", "")), sys.stdout)
    sys.stdout.write(content if content.endswith("\n") or not content else content + "\n")


def _fail(args: argparse.Namespace, exc: Exception, code: int) -> int:
    from siftlib.commands import fail

    return fail("sift fetch", exc, code, as_json=args.json)
