"""Run the `sift` command in a subprocess, as a person at a shell does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def sift(
    *args: str,
    env: dict[str, str] | None = None,
    stdin: str | int = "",
    cwd: Path | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run `sift ARGS…` to completion with the test's (scrubbed) environment plus `env`.

    `stdin` is the text to feed, or a file descriptor (a pseudo-terminal, say) to read from.
    """
    return subprocess.run(
        [sys.executable, str(REPO / "sift.py"), *args],
        input=stdin if isinstance(stdin, str) else None,
        stdin=stdin if isinstance(stdin, int) else None,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=timeout,
    )
