"""Run the `sift` command in a subprocess, as a person at a shell does."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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


@dataclass
class Serving:
    """A `sift serve` process that has said where it listens, and what it said so far."""

    process: subprocess.Popen[str]
    url: str
    said: list[str]

    def stop(self) -> tuple[int, str]:
        """Send SIGTERM; return the exit code and the rest of stderr."""
        self.process.send_signal(signal.SIGTERM)
        assert self.process.stderr is not None
        rest = self.process.stderr.read()
        return self.process.wait(30), rest


@contextmanager
def serving(*args: str, env: dict[str, str] | None = None) -> Iterator[Serving]:
    """Run `sift serve ARGS…` until it says "listening on"; stop it at the end if still up."""
    process = subprocess.Popen(
        [sys.executable, str(REPO / "sift.py"), "serve", *args],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    assert process.stderr is not None
    said: list[str] = []
    try:
        while not said or "listening on" not in said[-1]:
            line = process.stderr.readline()
            assert line, f"sift serve exited before listening: {''.join(said)}"
            said.append(line)
        found = re.search(r"listening on (\S+):(\d+)", said[-1])
        assert found is not None
        yield Serving(process, f"http://{found.group(1)}:{found.group(2)}", said)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
