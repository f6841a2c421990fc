"""Benchmark the start-up of the commands agents run most, against a bare interpreter.

Modules are byte-compiled first (a warm-up run of each command with PYTHONDONTWRITEBYTECODE
unset), as they are in an installed sift. Side by side in one run, alternating, median of
RUNS each: `python -c pass`; `sift search --local` answering from a warm cache (the fake
SearXNG is then stopped, so nothing but the cache can answer), with the starter's `[fetch]`
and with a pinhole in `allow` (a pinhole is data: it must cost a cached search nothing);
`sift fetch --help`; and `sift search --local` missing the cache (a new query each run)
against a fake SearXNG answering at once, which pays for the sources' HTTP stack and nothing
else. Target: the cached searches and `--help` each <= 2.5x the bare interpreter.

The search runs as an agent's does: no `--config`, so sift finds its config in the user
config dir, written there by `sift init` (every setting commented, `secret.env` beside it)
with SearXNG enabled, as the operator would edit it.
"""

from __future__ import annotations

import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from bodykit import fixture_bytes  # noqa: E402
from gatewaykit import FakeUpstream  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", 21))
SIFT = str(Path(sys.executable).parent / "sift")


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="sift-bench-") as tmp:
        home = Path(tmp)
        env = {
            # Compiled modules are kept, as an installed sift has them.
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("SIFT_", "XDG_")) and k != "PYTHONDONTWRITEBYTECODE"
            },
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_STATE_HOME": str(home / "state"),
        }
        searxng = FakeUpstream(fixture_bytes("searxng/wal-typed-and-legacy.json"))
        subprocess.run([SIFT, "init"], env=env, check=True, capture_output=True)
        config = home / "config" / "sift" / "config.toml"
        starter = 'enabled = false\nurl = "http://127.0.0.1:8888"'
        assert config.read_text().count(starter) == 1, "the starter's SearXNG table changed"
        config.write_text(
            config.read_text().replace(starter, f'enabled = true\nurl = "{searxng.url}"')
        )
        pinholed = home / "pinhole" / "config.toml"
        pinholed.parent.mkdir()
        pinholed.write_text(config.read_text().replace("allow = []", 'allow = ["127.0.0.1:9"]', 1))
        assert "127.0.0.1:9" in pinholed.read_text(), "the starter's [fetch] allow changed"
        (pinholed.parent / "secret.env").write_text("")
        search = [SIFT, "search", "--local", "sqlite wal mode"]
        subprocess.run(search, env=env, check=True, capture_output=True)  # fills the cache
        subprocess.run([SIFT, "fetch", "--help"], env=env, check=True, capture_output=True)
        misses = itertools.count()
        commands: dict[str, Callable[[], list[str]]] = {
            "python -c pass": lambda: [sys.executable, "-c", "pass"],
            "sift search --local (cache hit)": lambda: search,
            "  the same with a pinhole": lambda: [*search, "--config", str(pinholed)],
            "sift fetch --help": lambda: [SIFT, "fetch", "--help"],
            "sift search --local (cache miss)": lambda: [*search, f"n{next(misses)}"],
        }
        subprocess.run(
            commands["  the same with a pinhole"](), env=env, check=True, capture_output=True
        )
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(RUNS):
            for name, argv in commands.items():
                times[name].append(timed(argv(), env))
        searxng.close()
    medians = {name: statistics.median(found) for name, found in times.items()}
    bare = medians["python -c pass"]
    print(
        f"start-up, median of {RUNS} alternating runs (same interpreter, same venv), "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    for name, ms in medians.items():
        ratio = ms / bare
        verdict = (
            ""
            if name.startswith("python") or "miss" in name
            else (f"  (target <= 2.5x: {'meets' if ratio <= 2.5 else 'MISSES'})")
        )
        print(f"   {name:<34}{ms:>8.1f} ms {ratio:>6.2f}x{verdict}")


if __name__ == "__main__":
    main()
