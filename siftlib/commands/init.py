"""`sift init`: write a commented `config.toml` and a `secret.env` template, never overwriting.

sift init                 # where sift looks: --config, $SIFT_CONFIG, else the user config dir
sift init --dir /etc/sift # /etc/sift/config.toml and /etc/sift/secret.env
sift init --searxng http://127.0.0.1:8888   # probe that SearXNG, then enable it

With `--searxng URL`, one search is sent to that SearXNG first, as the gateway will send it
(`siftlib.search.probe`): on success the source is written enabled, into the new config, or into the
existing one (only `[search.searxng]`'s `enabled` and `url` change); on a refusal one sentence
says the SearXNG setting to change, and nothing is written.

Exit codes: 0 written, 1 the SearXNG probe failed (nothing is written), 2 a file is already
there (nothing is written), cannot be created, or the URL is not http(s).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from urllib.parse import urlsplit


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of `sift init`."""
    parser.epilog = "example: sift init --searxng http://127.0.0.1:8888"
    parser.add_argument(
        "--dir",
        metavar="DIR",
        help="write DIR/config.toml and DIR/secret.env (default: the user config dir)",
    )
    parser.add_argument(
        "--searxng",
        metavar="URL",
        help="check that the SearXNG at URL answers sift's JSON searches, then enable it "
        "(in a new config, or in the existing one)",
    )


def run(args: argparse.Namespace) -> int:
    """Write the starter files (or enable SearXNG in them); return the exit code."""
    from siftlib.config import default_db, locate_config
    from siftlib.errors import ConfigError, ProbeFailed
    from siftlib.starter import enable_searxng, write_starter

    if args.dir and args.config:
        print("sift init: give --dir or --config, not both", file=sys.stderr)
        return 2
    config_path = Path(args.dir) / "config.toml" if args.dir else locate_config(args.config)[0]
    url = args.searxng
    if url is not None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.username:
            why = "is not an http:// or https:// URL with a host"
            print(f"sift init: --searxng {url!r} {why}", file=sys.stderr)
            return 2
        from siftlib.search.probe import probe_searxng

        try:
            probe = probe_searxng(url)
        except ProbeFailed as exc:
            print(f"sift init: {exc}; nothing written", file=sys.stderr)
            return 1
        note = f"; {probe.note}" if probe.note else ""
        print(f"SearXNG at {url} answers JSON ({probe.hits} results for a test search{note})")
    try:
        if url is not None and config_path.exists():
            enable_searxng(config_path, url)
            print(f"enabled [search.searxng] at {url} in {config_path}")
            _next(config_path, locate_config(None)[0])
            return 0
        config_path, secret_path = write_starter(
            config_path=config_path, db=default_db(), searxng=url
        )
    except ConfigError as exc:
        print(f"sift init: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"sift init: cannot write {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    enabled = f"searxng enabled at {url}" if url else "no search source enabled"
    print(f"wrote {config_path} (every setting at its default; {enabled})")
    print(f"wrote {secret_path} (mode 0600: provider keys and caller tokens go here)")
    if url:
        _next(config_path, locate_config(None)[0])
        return 0
    config_flag = "" if locate_config(None)[0] == config_path else f" --config {config_path}"
    print(
        f"next: enable a source in {config_path.name}, add its key to {secret_path.name}, "
        f'then: sift search{config_flag} "your query"'
    )
    return 0


def _next(config_path: Path, default: Path) -> None:
    """Say what to run now that a source is enabled."""
    config_flag = "" if default == config_path else f" --config {config_path}"
    print(
        f'next: sift search{config_flag} "your query" (a running sift serve takes the change '
        "on kill -HUP)"
    )
