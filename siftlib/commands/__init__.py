"""The subcommands of `sift`, one module each (see `siftlib.cli`), and how they report failure."""

from __future__ import annotations

import json
import re
import sys
from typing import TextIO

# What a terminal acts on rather than shows: C0 controls but tab and newline, DEL, and the C1
# controls (U+0080-U+009F: CSI, OSC, ... as one character). ESC starts every sequence that
# clears the screen, moves the cursor, retitles the window or (OSC 52) writes the clipboard.
_TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def print_json_error(message: object) -> None:
    """Print `{"error": "<message>"}` on stdout, the failure shape of every `--json` command."""
    print(json.dumps({"error": str(message)}, ensure_ascii=False), flush=True)


def fail(prog: str, message: object, code: int, *, as_json: bool = False) -> int:
    """Report a failure (JSON on stdout under `--json`, the sentence on stderr); return `code`."""
    if as_json:
        print_json_error(message)
    print(f"{prog}: {message}", file=sys.stderr)
    return code


def for_terminal(text: str, stream: TextIO) -> str:
    """Return page or provider text fit to print: controls shown as U+FFFD on a terminal.

    A page can hold escape sequences; printed raw they act on the reader's terminal. When
    `stream` is not a terminal (a pipe, a file) the text is left exactly as it came.
    """
    if not stream.isatty():
        return text
    return _TERMINAL_CONTROLS.sub("\ufffd", text)
