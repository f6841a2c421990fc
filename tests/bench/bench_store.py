"""Benchmark the SQLite store: cache-hit lookups, cap reservations, and the file size over time.

Figures (targets: each median under 1 ms):
- median `cache_get` of a recent hit, answered from the store's memory front; then of a hit
  read from the file (8 hits decoded, memory front off), one thread; then 8 request threads, each
  lookup followed by request-like work (encoding the answer), for the shipped design (a pool
  of reader connections) side by side with one lock around every lookup (one shared
  connection) and a store per thread, plus the cost of opening a store, which a connection
  per request-thread would pay on every request;
- median `reserve` (one guarded upsert, committed) and `reserve` + `settle`;
- the file size after 100k cached searches, one a second on an injected clock with the
  default 1 h TTL, with expiry sweeping on, side by side with sweeping off.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import storekit  # noqa: E402
from clockkit import DAY, NOW  # noqa: E402

from siftlib.hits import Hit  # noqa: E402
from siftlib.store import sqlite as store_module  # noqa: E402
from siftlib.store.factory import open_store  # noqa: E402
from siftlib.store.sqlite import open_sqlite  # noqa: E402

HITS = [
    Hit(
        url=f"https://docs.example.org/section/{i}/page-about-something",
        title=f"A result title of ordinary length, number {i}",
        snippet="A snippet of about two hundred characters, as SearXNG and Tavily send them: "
        "a sentence or two from the page, with the query terms somewhere in the middle of it, "
        "ending in an ellipsis …",
        score=1 / (61 + i),
        source="searxng",
    )
    for i in range(8)
]


def key(n: int) -> str:
    return storekit.key(f"benchmark query number {n}")


def median_us(samples: list[int]) -> float:
    return statistics.median(samples) / 1000


def verdict(samples: list[int]) -> str:
    return "under the 1 ms target" if median_us(samples) < 1000 else "OVER the 1 ms target"


def time_lookups(
    lookup: Callable[[str], object], keys: list[str], out: list[int], *, request_work: int = 0
) -> None:
    for k in keys:
        started = time.perf_counter_ns()
        hits = lookup(k)
        out.append(time.perf_counter_ns() - started)
        assert hits is not None
        for _ in range(request_work):  # the rest of a request: encode the answer
            json.dumps([hit.to_dict() for hit in HITS])


def bench_lookups(path: Path) -> None:
    store = open_store(path)
    keys = [key(n) for n in range(500)]
    for k in keys:
        store.cache_put(k, HITS, now=NOW, ttl=3600)

    def pooled(k: str) -> object:
        return store.cache_get(k, now=NOW)

    memory: list[int] = []
    time_lookups(pooled, keys * 5, memory)
    print(
        f"cache hit from memory, 1 thread:          median {median_us(memory):7.1f} µs"
        f"  ({verdict(memory)})"
    )
    store.close()
    store = open_sqlite(path)  # from here on every lookup reads the file, no memory front
    time_lookups(pooled, keys, [])  # warm the page cache and the statement caches
    one: list[int] = []
    time_lookups(pooled, keys * 5, one)
    print(
        f"cache hit from the file, 1 thread:        median {median_us(one):7.1f} µs"
        f"  ({verdict(one)})"
    )

    def run(lookups: list[Callable[[str], object]]) -> tuple[float, float]:
        samples: list[list[int]] = [[] for _ in range(8)]
        threads = [
            threading.Thread(
                target=time_lookups,
                args=(lookups[i % len(lookups)], keys, samples[i]),
                kwargs={"request_work": 10},
            )
            for i in range(8)
        ]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        flat = [s for per in samples for s in per]
        return median_us(flat), len(flat) / elapsed

    lock = threading.Lock()

    def locked(k: str) -> object:
        with lock:
            return store.cache_get(k, now=NOW)

    own = [open_sqlite(path) for _ in range(8)]
    designs = {
        "pooled readers (shipped)": [pooled],
        "one lock around lookups": [locked],
        "a store per thread": [lambda k, s=s: s.cache_get(k, now=NOW) for s in own],
    }
    # Interleaved rounds, since other work on the machine moves these figures a lot.
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in designs}
    for _ in range(3):
        for name, lookups in designs.items():
            figures[name].append(run(lookups))
    for name, rounds in figures.items():
        medians = sorted(median for median, _ in rounds)
        rate = statistics.median(rate for _, rate in rounds)
        print(
            f"cache hit, 8 request threads, {name + ':':26} median {medians[1]:7.1f} µs "
            f"(rounds {medians[0]:.0f}-{medians[-1]:.0f}), {rate:6.0f} requests/s"
        )
    opens: list[int] = []
    for _ in range(50):
        started = time.perf_counter_ns()
        open_store(path).close()
        opens.append(time.perf_counter_ns() - started)
    print(f"opening a store (per-request connection): median {median_us(opens):7.1f} µs")
    for s in [store, *own]:
        s.close()


def bench_reservations(path: Path) -> None:
    store = open_store(path)
    reserve: list[int] = []
    both: list[int] = []
    for _ in range(3000):
        started = time.perf_counter_ns()
        assert store.reserve("tavily", day=DAY, cap=1_000_000)
        reserve.append(time.perf_counter_ns() - started)
    for _ in range(3000):
        started = time.perf_counter_ns()
        reservation = store.reserve("brave_llm", day=DAY, cap=1_000_000)
        assert reservation is not None
        store.settle(reservation, actual=1)
        both.append(time.perf_counter_ns() - started)
    print(
        f"cap reservation (reserve):                median {median_us(reserve):7.1f} µs"
        f"  ({verdict(reserve)})"
    )
    print(f"cap reservation (reserve + settle):       median {median_us(both):7.1f} µs")
    store.close()


def fill(path: Path, searches: int) -> tuple[float, int, int, float]:
    store = open_store(path)
    started = time.perf_counter()
    for n in range(searches):
        store.cache_put(key(n), HITS, now=NOW + n, ttl=3600)
    elapsed = time.perf_counter() - started
    store.close()  # the last close checkpoints the WAL into the file
    return elapsed, path.stat().st_size, _rows(path), searches / elapsed


def _rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT count(*) FROM search").fetchone()[0])


def bench_size(directory: Path) -> None:
    searches = 100_000
    elapsed, size, rows, rate = fill(directory / "swept.db", searches)
    print(
        f"100k searches, sweeping on:  {size / 2**20:6.1f} MiB, {rows:6d} rows live, "
        f"{rate:6.0f} puts/s ({elapsed:4.1f} s)"
    )
    store_module.SWEEP_EVERY = 10**9
    elapsed, size, rows, rate = fill(directory / "unswept.db", searches)
    print(
        f"100k searches, sweeping off: {size / 2**20:6.1f} MiB, {rows:6d} rows live, "
        f"{rate:6.0f} puts/s ({elapsed:4.1f} s)"
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        bench_lookups(directory / "lookups.db")
        bench_reservations(directory / "caps.db")
        bench_size(directory)


if __name__ == "__main__":
    main()
