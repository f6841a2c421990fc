"""Benchmark the pinned client against a plain `httpx.Client` on the same loopback server.

Figures, side by side in one run (rounds interleaved, medians):
- per-request time over a kept-alive connection (GET, 2 KiB JSON body read in full), so the
  difference is what the dialer adds to every request: the origin check, the pin lookup
  and the redirect hook;
- per-request time with a fresh connection each time (pool closed after every request), so
  the dialer's connect path is measured too;
- the cost of building the client: `open_upstream` (URL check, resolution, pin, pool) for an
  http and an https URL (the latter loads the system CA store) vs `httpx.Client()` (which
  loads certifi's CA bundle whether or not it will speak TLS).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import httpx  # noqa: E402
from bodykit import searxng_body  # noqa: E402
from gatewaykit import FakeUpstream  # noqa: E402

from siftlib.net.dial import open_upstream  # noqa: E402

ROUNDS = 7
REQUESTS = 300
FRESH = 100
BUILDS = 20


def per_request(client: httpx.Client, url: str, n: int, *, fresh: bool) -> float:
    """Return the mean seconds per request over `n` sequential requests."""
    start = time.perf_counter()
    for _ in range(n):
        response = client.get(url)
        response.read()
        if fresh:
            client._transport.close()  # drop the pooled connection: the next request connects
    return (time.perf_counter() - start) / n


def build_cost(build: Callable[[], httpx.Client]) -> float:
    start = time.perf_counter()
    for _ in range(BUILDS):
        build().close()
    return (time.perf_counter() - start) / BUILDS


def main() -> None:
    fake = FakeUpstream(searxng_body(10))
    url = f"{fake.url}/search?q=x&format=json"
    plain = httpx.Client(timeout=5.0)
    upstream = open_upstream(fake.url, public=False, timeout=5.0)
    pinned = upstream.client
    per_request(plain, url, 50, fresh=False)  # warm both
    per_request(pinned, url, 50, fresh=False)

    rows: dict[str, list[float]] = {
        k: [] for k in ("plain keep", "pinned keep", "plain fresh", "pinned fresh")
    }
    builds: dict[str, list[float]] = {"httpx.Client()": [], "http": [], "https": []}
    for _ in range(ROUNDS):
        rows["plain keep"].append(per_request(plain, url, REQUESTS, fresh=False))
        rows["pinned keep"].append(per_request(pinned, url, REQUESTS, fresh=False))
        rows["plain fresh"].append(per_request(plain, url, FRESH, fresh=True))
        rows["pinned fresh"].append(per_request(pinned, url, FRESH, fresh=True))
        builds["httpx.Client()"].append(build_cost(lambda: httpx.Client(timeout=5.0)))
        for scheme in ("http", "https"):
            address = f"{scheme}://127.0.0.1:{fake.port}"
            builds[scheme].append(
                build_cost(lambda a=address: open_upstream(a, public=False, timeout=5.0).client)
            )
    plain.close()
    upstream.close()
    fake.close()

    med = {k: statistics.median(v) * 1e6 for k, v in rows.items()}
    print(f"per request, median of {ROUNDS} rounds (µs):")
    for kind in ("keep", "fresh"):
        a, b = med[f"plain {kind}"], med[f"pinned {kind}"]
        label = "kept-alive connection" if kind == "keep" else "new connection each time"
        print(f"  {label:26} plain {a:8.1f}   pinned {b:8.1f}   pinned/plain {b / a:5.2f}")
    a, b, c = (statistics.median(v) * 1e3 for v in builds.values())
    print(
        f"building a client (ms):      httpx.Client() {a:6.2f}   "
        f"open_upstream(http) {b:6.2f}   open_upstream(https) {c:6.2f}"
    )


if __name__ == "__main__":
    main()
