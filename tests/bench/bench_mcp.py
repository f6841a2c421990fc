"""Benchmark `sift mcp`: start-up, and a cached web search over stdio against `sift search`.

1. Start-up: from spawning `sift mcp` to the answer of the first `tools/list` (after
   `initialize` and `notifications/initialized`, as an agent starts a session), median of
   15 runs. Target: < 150 ms. A bare `python -c pass` run alongside gives the interpreter's
   own floor on this machine, and the CPU time of each (user + system) is printed too: on a
   shared machine wall time swings with the load, CPU time much less.
2. A cached `web_search`: the same query over one long-lived `sift mcp` session (the round
   trip of one `tools/call`, median of 200), against the same cached search as a whole
   `sift search --json` process (median of 15), which is what an agent pays per search when
   it reaches sift through the shell. Both hit the same SQLite cache of a SearXNG fake.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from bodykit import fixture_bytes  # noqa: E402
from gatewaykit import FakeUpstream, write_config  # noqa: E402

SIFT = str(Path(sys.executable).parent / "sift")
STARTS = 15
CALLS = 200
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
}


def send(stdin: IO[bytes], *messages: dict[str, Any]) -> None:
    stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    stdin.flush()


def request(id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params or {}}


def start(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [SIFT, "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )


def time_to_tools(env: dict[str, str]) -> tuple[float, float]:
    """Return ms from spawning `sift mcp` to its first `tools/list` answer, and its CPU ms."""
    cpu = _children_cpu()
    began = time.perf_counter()
    server = start(env)
    assert server.stdin is not None and server.stdout is not None
    send(
        server.stdin,
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        request(1, "tools/list"),
    )
    server.stdout.readline()
    listing = json.loads(server.stdout.readline())
    took = (time.perf_counter() - began) * 1000
    assert len(listing["result"]["tools"]) >= 2, listing
    server.stdin.close()
    server.wait(30)
    return took, _children_cpu() - cpu


def bare_interpreter() -> tuple[float, float]:
    cpu = _children_cpu()
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return (time.perf_counter() - began) * 1000, _children_cpu() - cpu


def _children_cpu() -> float:
    """Return the CPU ms (user + system) of every child waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


def cached_calls(env: dict[str, str], query: str) -> list[float]:
    """Return the ms of each cached `web_search` call over one session."""
    server = start(env)
    assert server.stdin is not None and server.stdout is not None
    send(server.stdin, INITIALIZE)
    server.stdout.readline()
    search = {"name": "web_search", "arguments": {"query": query}}
    send(server.stdin, request(1, "tools/call", search))  # fills the cache
    assert json.loads(server.stdout.readline())["result"]["isError"] is False
    times = []
    for i in range(CALLS):
        began = time.perf_counter()
        send(server.stdin, request(2 + i, "tools/call", search))
        answer = json.loads(server.stdout.readline())
        times.append((time.perf_counter() - began) * 1000)
        assert answer["result"]["structuredContent"]["cached"] is True, answer
    server.stdin.close()
    server.wait(30)
    return times


def cli_searches(env: dict[str, str], query: str) -> list[float]:
    """Return the ms of each whole `sift search --json` process on the cached query."""
    times = []
    for _ in range(STARTS):
        began = time.perf_counter()
        done = subprocess.run(
            [SIFT, "search", query, "--json"], env=env, capture_output=True, check=True
        )
        times.append((time.perf_counter() - began) * 1000)
        assert json.loads(done.stdout)["cached"] is True
    return times


def main() -> None:
    searxng = FakeUpstream(fixture_bytes("searxng/wal-typed-and-legacy.json"))
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": tmp,
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_STATE_HOME": str(home / "state"),
            "SIFT_CONFIG": str(write_config(home, searxng=searxng.url)),
        }
        starts, cpu = zip(*(time_to_tools(env) for _ in range(STARTS)), strict=True)
        floor, floor_cpu = zip(*(bare_interpreter() for _ in range(STARTS)), strict=True)
        median = statistics.median(starts)
        verdict = "ok" if median < 150 else "OVER the 150 ms target"
        print(f"start -> first tools/list answer: median {median:.1f} ms, min {min(starts):.1f}")
        print(f"  (bare `python -c pass`: median {statistics.median(floor):.1f} ms)  {verdict}")
        print(
            f"  CPU per session (start, initialize, tools/list, end): median "
            f"{statistics.median(cpu):.1f} ms; bare interpreter "
            f"{statistics.median(floor_cpu):.1f} ms"
        )

        query = "sqlite wal checkpoint"
        calls = cached_calls(env, query)
        shell = cli_searches(env, query)
        print(
            f"cached web_search over stdio: median {statistics.median(calls):.2f} ms, "
            f"p90 {statistics.quantiles(calls, n=10)[-1]:.2f} ms ({CALLS} calls, one session)"
        )
        print(
            f"same cached search as `sift search --json`: median {statistics.median(shell):.1f}"
            f" ms per process ({STARTS} runs)"
        )
    searxng.close()


if __name__ == "__main__":
    main()
