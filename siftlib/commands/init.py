"""`sift init`: write a commented `config.toml` and a `secret.env` template, never overwriting.

sift init                 # where sift looks: --config, $SIFT_CONFIG, else the user config dir
sift init --dir /etc/sift # /etc/sift/config.toml and /etc/sift/secret.env

Exit codes: 0 written, 2 a file is already there (nothing is written) or cannot be created.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of `sift init`."""
    parser.epilog = "example: sift init --dir /etc/sift"
    parser.add_argument(
        "--dir",
        metavar="DIR",
        help="write DIR/config.toml and DIR/secret.env (default: the user config dir)",
    )


def run(args: argparse.Namespace) -> int:
    """Write the starter files; return the exit code."""
    from siftlib.config import default_db, locate_config
    from siftlib.errors import ConfigError
    from siftlib.starter import write_starter

    if args.dir and args.config:
        print("sift init: give --dir or --config, not both", file=sys.stderr)
        return 2
    config_path = Path(args.dir) / "config.toml" if args.dir else locate_config(args.config)[0]
    try:
        config_path, secret_path = write_starter(config_path=config_path, db=default_db())
    except ConfigError as exc:
        print(f"sift init: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"sift init: cannot write {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    print(f"wrote {config_path} (every setting at its default; no search source enabled)")
    print(f"wrote {secret_path} (mode 0600: provider keys and caller tokens go here)")
    config_flag = "" if locate_config(None)[0] == config_path else f" --config {config_path}"
    print(
        f"next: enable a source in {config_path.name}, add its key to {secret_path.name}, "
        f'then: sift search{config_flag} "your query"'
    )
    return 0
