"""The subcommands of `sift`, one module each (see `siftlib.cli`), and how they report failure."""

from __future__ import annotations

import json
import sys


def print_json_error(message: object) -> None:
    """Print `{"error": "<message>"}` on stdout, the failure shape of every `--json` command."""
    print(json.dumps({"error": str(message)}, ensure_ascii=False), flush=True)


def fail(prog: str, message: object, code: int, *, as_json: bool = False) -> int:
    """Report a failure (JSON on stdout under `--json`, the sentence on stderr); return `code`."""
    if as_json:
        print_json_error(message)
    print(f"{prog}: {message}", file=sys.stderr)
    return code
