"""Benchmark how long an idle `sift serve` takes to exit after SIGTERM.

From the signal to the process's exit, median and worst of 15 runs, with the gateway idle
since it said "listening on". The stdlib serve loop looks for a shutdown request once per
`poll_interval` (0.5 s by default, which made this up to 0.6 s). Target: < 200 ms.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from gatewaykit import write_config  # noqa: E402

RUNS = 15


def stop_once(config: Path) -> float:
    """Start an idle gateway, wait a moment, SIGTERM it; return seconds until it exits."""
    process = subprocess.Popen(
        [sys.executable, str(REPO / "sift.py"), "serve", "--config", str(config)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stderr is not None
    while "listening on" not in process.stderr.readline():
        pass
    time.sleep(0.3)  # idle: the serve loop is inside its select
    started = time.perf_counter()
    process.send_signal(signal.SIGTERM)
    process.wait(30)
    return time.perf_counter() - started


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        config = write_config(Path(directory))
        times = sorted(stop_once(config) for _ in range(RUNS))
    median, worst = statistics.median(times) * 1000, times[-1] * 1000
    print(f"idle sift serve, SIGTERM to exit: median {median:.0f} ms, worst {worst:.0f} ms")
    print(f"target < 200 ms: {'met' if worst < 200 else 'NOT met'}")


if __name__ == "__main__":
    main()
