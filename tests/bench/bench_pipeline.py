"""Benchmark the fan-out: a search waits for its slowest source, and never past the timeout.

Three loopback fakes answer after 100, 200 and 300 ms; the median latency of a three-source
search is divided by the slowest source's 300 ms (target ≤ 1.05). Then one source hangs and
the search must return within the configured timeout + 50 ms.
"""

from __future__ import annotations

import logging
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bodykit import searxng_body  # noqa: E402
from gatewaykit import FakeUpstream  # noqa: E402

from siftlib.config import Secrets, load_config  # noqa: E402
from siftlib.search.pipeline import Searcher, SearchRequest  # noqa: E402

ROUNDS = 15
TAVILY = b'{"results": [{"url": "https://t.example/1", "title": "T", "content": "t", "score": 1}]}'
BRAVE = (
    b'{"grounding": {"generic": [{"url": "https://b.example/1", "title": "B", "snippets": ["b"]}]}}'
)


def searcher(directory: Path, searxng: str, brave: str, tavily: str, timeout: str) -> Searcher:
    path = directory / "config.toml"
    path.write_text(
        f'[search]\ntimeout = "{timeout}"\n'
        f'[search.searxng]\nenabled = true\nurl = "{searxng}"\n'
        f'[search.brave_llm]\nenabled = true\nurl = "{brave}"\n'
        f'[search.tavily]\nenabled = true\nurl = "{tavily}"\n'
    )
    keys = Secrets({"BRAVE_API_KEY": "b", "TAVILY_API_KEY": "t"}, environ={})
    return Searcher(load_config(str(path)), keys, allow_private_upstreams=True)


def median_ms(run: Searcher, query: str) -> float:
    samples = []
    for i in range(ROUNDS):
        started = time.perf_counter()
        run.search(SearchRequest(query=f"{query} {i}"))
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    logging.getLogger("sift").setLevel(logging.ERROR)  # the test switch's warning, once per source
    fakes = [
        FakeUpstream(searxng_body(8), delay=0.1),
        FakeUpstream(BRAVE, delay=0.2),
        FakeUpstream(TAVILY, delay=0.3),
    ]
    gate = threading.Event()
    hung = FakeUpstream(TAVILY, gate=gate)
    with tempfile.TemporaryDirectory() as tmp:
        fan = searcher(Path(tmp), *(f.url for f in fakes), timeout="2s")
        fan.search(SearchRequest(query="warm-up"))
        fan_ms = median_ms(fan, "fan-out")
        fan.close()
        stuck = searcher(Path(tmp), fakes[0].url, fakes[1].url, hung.url, timeout="1s")
        stuck_ms = median_ms(stuck, "hung")
        stuck.close()
    gate.set()
    for fake in (*fakes, hung):
        fake.close()
    print(f"three sources (100/200/300 ms): median {fan_ms:.1f} ms over {ROUNDS} searches")
    print(f"  ratio to the slowest source: {fan_ms / 300:.3f}  (target <= 1.05)")
    print(f"hung source, timeout 1000 ms: median {stuck_ms:.1f} ms")
    print(f"  over the timeout: {stuck_ms - 1000:+.1f} ms  (target <= +50 ms)")


if __name__ == "__main__":
    main()
