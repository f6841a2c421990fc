"""Benchmark the shared store on a real redis-server against SQLite, side by side in one run.

1. A cache hit (8 hits decoded), one thread: the SQLite file against Redis on loopback, both
   without the memory front of recent hits (which answers either in ~1 µs). Target: Redis
   adds under 0.5 ms.
2. A cap reservation, reserve + settle, one thread: SQLite against Redis's two Lua scripts.
3. Cached `POST /v2/search` through real `sift serve` processes on one Redis, driven by wrk
   (2 threads, 16 keep-alive connections each, 4 s): one gateway alone, then two gateways at
   once, one wrk each. Both share this machine's 2 cores with wrk and Redis, so the second
   row shows what sharing the store costs, not what a second host would add.
"""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from bench_store import HITS, key  # noqa: E402  (the same answers as SQLite's bench)
from bodykit import searxng_body  # noqa: E402
from clockkit import DAY, NOW  # noqa: E402
from gatewaykit import FakeUpstream, call, serve_process, write_config  # noqa: E402
from rediskit import RedisServer  # noqa: E402

from siftlib.store.base import Store  # noqa: E402
from siftlib.store.redis import open_redis_store  # noqa: E402
from siftlib.store.sqlite import open_sqlite  # noqa: E402

ROUNDS = 2000
WRK_SECONDS = 4
WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = '{"query": "a cached query", "limit": 5}'
wrk.headers["Content-Type"] = "application/json"
"""


def median_us(operation: Callable[[int], object]) -> float:
    samples = []
    for n in range(ROUNDS):
        started = time.perf_counter_ns()
        operation(n)
        samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000


def bench_store(name: str, store: Store) -> tuple[float, float]:
    keys = [key(n) for n in range(500)]
    for k in keys:
        store.cache_put(k, HITS, now=NOW, ttl=3600)
    median_us(lambda n: store.cache_get(keys[n % 500], now=NOW))  # warm up
    hit = median_us(lambda n: store.cache_get(keys[n % 500], now=NOW))

    def reserve_settle(n: int) -> None:
        reservation = store.reserve("tavily", day=DAY, cap=10_000_000)
        assert reservation is not None
        store.settle(reservation, actual=1)

    pair = median_us(reserve_settle)
    print(f"{name:8} cache hit median {hit:6.1f} µs   reserve + settle median {pair:6.1f} µs")
    return hit, pair


def wrk(url: str) -> tuple[float, str]:
    script = Path(tempfile.mkdtemp()) / "post.lua"
    script.write_text(WRK_SCRIPT)
    done = subprocess.run(
        ["wrk", "-t2", "-c16", f"-d{WRK_SECONDS}s", "--latency", "-s", str(script)]
        + [f"{url}/v2/search"],
        capture_output=True,
        text=True,
        check=True,
    )
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", done.stdout).group(1))  # type: ignore[union-attr]
    p50 = re.search(r"^\s+50%\s+(\S+)", done.stdout, re.M).group(1)  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", done.stdout)
    assert errors is None, done.stdout
    return rate, p50


def run_together(urls: list[str]) -> list[tuple[float, str]]:
    results: list[tuple[float, str]] = [(0.0, "")] * len(urls)

    def one(i: int) -> None:
        results[i] = wrk(urls[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(urls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def gateways(root: Path, redis_url: str, upstream: str, count: int) -> Iterator[str]:
    for n in range(count):
        directory = root / f"gateway{n}"
        directory.mkdir()
        yield str(write_config(directory, searxng=upstream, store=redis_url)), directory


def bench_gateways(root: Path, redis_url: str) -> None:
    if shutil.which("wrk") is None:
        print("gateway throughput: skipped, wrk is not installed (make bench installs it)")
        return
    upstream = FakeUpstream(searxng_body(8))
    with ExitStack() as stack:
        urls = []
        for config, directory in gateways(root, redis_url, upstream.url, 2):
            urls.append(
                stack.enter_context(serve_process(Path(config), log=directory / "serve.log"))
            )
        body = {"query": "a cached query", "limit": 5}
        assert call(urls[0], "POST", "/v2/search", body).status == 200  # fills the cache
        assert call(urls[1], "POST", "/v2/search", body).status == 200  # a hit from the fill
        assert len(upstream.calls) == 1
        alone = wrk(urls[0])
        together = run_together(urls)
        misses = len(upstream.calls) - 1  # a store reply slower than its timeout is a miss
    upstream.close()
    print(f"cached /v2/search, one gateway on Redis:   {alone[0]:7.0f} requests/s (p50 {alone[1]})")
    total = sum(rate for rate, _ in together)
    each = ", ".join(f"{rate:.0f} (p50 {p50})" for rate, p50 in together)
    print(f"cached /v2/search, two gateways on Redis:  {total:7.0f} requests/s ({each})")
    print(f"searches served uncached because the store answered too late: {misses}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server = RedisServer(root / "redis")
        server.start()
        try:
            sqlite = open_sqlite(root / "server.db")  # both without the memory front
            sqlite_hit, sqlite_pair = bench_store("SQLite", sqlite)
            sqlite.close()
            shared = open_redis_store(
                server.url, password=None, prefix="sift:", fallback_share=0.5, fill_timeout=8
            )
            redis_hit, redis_pair = bench_store("Redis", shared)
            shared.close()
            added = redis_hit - sqlite_hit
            verdict = "under" if added < 500 else "OVER"
            print(f"Redis adds {added:+.1f} µs to a cache hit ({verdict} the 0.5 ms target)")
            print(f"Redis adds {redis_pair - sqlite_pair:+.1f} µs to reserve + settle")
            bench_gateways(root, server.url)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
