"""Benchmark the browser (issue 41): what rendering costs, and that being able to costs nothing.

Three figures, from one run:
- render time of a small script-built page (`Fetcher.fetch` with `render=True`: the static
  read, the render in a fresh context behind its proxy, both conversions), median and p90 of
  `RENDERS` renders after one warm-up (the launch is timed on its own);
- resident memory of every browser process together after `RENDERS` renders (and after the
  first), from /proc;
- a static fetch of a plain page (no script: `auto` leaves it alone) with the browser
  enabled-but-unused against disabled, rounds interleaved, medians; target within 5 %.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fetchkit import PageServer, page  # noqa: E402

from siftlib.config import BrowserConfig, FetchConfig  # noqa: E402
from siftlib.fetch.fetcher import Fetcher, FetchRequest  # noqa: E402

RENDERS = 100
STATIC_ROUNDS = 9
STATIC_FETCHES = 30
APP = b"""<!doctype html><html><head><title>Bench app</title></head><body><div id="root"></div>
<script>
var items = [];
for (var i = 0; i < 30; i++) { items.push('<li>Item ' + i + ' of a list a script wrote.</li>'); }
document.getElementById('root').innerHTML = '<article><h1>Rendered</h1><p>' +
  'A small page whose every word a script wrote. '.repeat(10) + '</p><ul>' + items.join('') +
  '</ul></article>';
</script></body></html>"""
PLAIN = (
    b"<html><head><title>Plain</title></head><body><article><h1>Plain</h1><p>"
    + b"A static article that reads the same with or without a browser. " * 60
    + b"</p></article></body></html>"
)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def renders(site: PageServer) -> None:
    settings = FetchConfig(allow=(site.allow,), timeout=60.0, browser=BrowserConfig(enabled=True))
    with Fetcher(settings) as fetcher:
        renderer = fetcher.renderer
        assert renderer is not None
        started = time.perf_counter()
        first = fetcher.fetch(FetchRequest(url=site.url + "/app", render=True))
        launch_ms = (time.perf_counter() - started) * 1000
        assert first.render_ms is not None and "every word a script wrote" in first.content
        assert renderer._browser is not None
        rss_first = renderer._browser.rss()
        times = []
        for _ in range(RENDERS):
            started = time.perf_counter()
            result = fetcher.fetch(FetchRequest(url=site.url + "/app", render=True))
            times.append((time.perf_counter() - started) * 1000)
            assert result.render_ms is not None, result.warnings
        assert renderer._browser is not None
        rss_last = renderer._browser.rss()
    print(f"first fetch, browser launch included: {launch_ms:.0f} ms")
    print(
        f"render of a small script-built page ({RENDERS} renders): "
        f"median {statistics.median(times):.0f} ms, p90 {percentile(times, 0.9):.0f} ms"
    )
    print(
        f"browser RSS (all processes): {rss_first / 2**20:.0f} MiB after 1 render, "
        f"{rss_last / 2**20:.0f} MiB after {RENDERS + 1}"
    )


def static_cost(site: PageServer) -> None:
    base = FetchConfig(allow=(site.allow,), timeout=20.0)
    on = base._replace(browser=BrowserConfig(enabled=True))
    medians: dict[str, list[float]] = {"disabled": [], "enabled-unused": []}
    with Fetcher(base) as off_fetcher, Fetcher(on) as on_fetcher:
        fetchers = {"disabled": off_fetcher, "enabled-unused": on_fetcher}
        for fetcher in fetchers.values():  # warm: conversion workers, kept connections
            fetcher.fetch(FetchRequest(url=site.url + "/plain"))
        for _ in range(STATIC_ROUNDS):
            for name, fetcher in fetchers.items():
                times = []
                for _ in range(STATIC_FETCHES):
                    started = time.perf_counter()
                    result = fetcher.fetch(FetchRequest(url=site.url + "/plain"))
                    times.append((time.perf_counter() - started) * 1000)
                    assert result.render_ms is None
                medians[name].append(statistics.median(times))
        assert on_fetcher.renderer is not None
        assert on_fetcher.renderer.health()["running"] is False  # never started
    off = statistics.median(medians["disabled"])
    unused = statistics.median(medians["enabled-unused"])
    print(
        f"static fetch of a plain page: disabled {off:.2f} ms, enabled-but-unused "
        f"{unused:.2f} ms ({unused / off:.3f}x; target within 5 %)"
    )


def main() -> None:
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    with PageServer({"/app": page(APP), "/plain": page(PLAIN)}) as site:
        static_cost(site)
        renders(site)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
