"""Benchmark `sift fetch`: extraction quality, conversion time, and the guard's cost.

Three figures (fetch.md §5, issue 14):
- main-content quality: word 4-gram F1 between each labelled page's expected article text
  (`testdata/fetch/*.txt`) and what sift returns for it (`*.html`), per page and mean, for
  the markdown sift answers with (as returned, and with link targets dropped), the text
  format, trafilatura's own `extract()` text as the article benchmark runs it (what sift
  must not lose against), our own structural extractor alone (the fallback) and the whole
  page;
- conversion time of a ~100 KB article page (the labelled news article grown with more
  paragraphs and a long menu, deterministic), median of rounds, main content and whole
  page, with the part spent inside trafilatura and the load average beside it;
- a guarded fetch (`Fetcher.read`: guard, pinned transport, streamed body) against a plain
  `httpx.Client().get()` of the same 20 KB page over a kept-alive loopback connection,
  rounds interleaved, medians; target ≤ 1.1× + 2 ms.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import httpx  # noqa: E402
from fetchkit import (  # noqa: E402
    TESTDATA_FETCH,
    PageServer,
    labelled_pages,
    page,
    shingle_f1,
    without_link_targets,
)

from siftlib.config import FetchConfig  # noqa: E402
from siftlib.fetch import convert as converting  # noqa: E402
from siftlib.fetch.fetcher import Fetcher  # noqa: E402

ROUNDS = 7
CONVERSIONS = 41
REQUESTS = 200
BASE = "https://example.org/articles/1"


def document(body: bytes, *, format: str = "markdown", main: bool = True) -> str:
    return converting.convert(
        body,
        content_type="text/html",
        media_type="text/html",
        url=BASE,
        format=format,
        main_content=main,
    ).content


def own_extractor(body: bytes) -> str:
    """Convert with our structural extractor alone (trafilatura switched off)."""
    real = converting._extracted
    converting._extracted = lambda tree, base: None  # type: ignore[assignment]
    try:
        return document(body, format="text")
    finally:
        converting._extracted = real  # type: ignore[assignment]


def trafilatura_alone(body: bytes) -> str:
    """Return trafilatura's own text, called as the article benchmark calls it."""
    import trafilatura

    text = converting.decode(body, "text/html", html_page=True)
    return trafilatura.extract(text, include_comments=False) or ""


def quality() -> None:
    columns: dict[str, Callable[[bytes], str]] = {
        "markdown": document,
        "md-no-urls": lambda b: without_link_targets(document(b)),
        "text": lambda b: document(b, format="text"),
        "trafilatura": trafilatura_alone,
        "own": own_extractor,
        "whole page": lambda b: document(b, format="text", main=False),
    }
    scores: dict[str, list[float]] = {name: [] for name in columns}
    print("main-content quality, word 4-gram F1 against testdata/fetch/*.txt:")
    print(f"  {'page':22}" + "".join(f"{name:>12}" for name in columns))
    for name, body, expected in labelled_pages():
        row = [shingle_f1(expected, convert(body)) for convert in columns.values()]
        for column, value in zip(columns, row, strict=True):
            scores[column].append(value)
        print(f"  {name:22}" + "".join(f"{value:12.3f}" for value in row))
    means = [statistics.mean(values) for values in scores.values()]
    print(f"  {'mean':22}" + "".join(f"{value:12.3f}" for value in means))


def big_page() -> bytes:
    """Return the news article grown to about 100 KB: more paragraphs and a long menu."""
    source = (TESTDATA_FETCH / "news-article.html").read_text(encoding="utf-8")
    words = (TESTDATA_FETCH / "news-article.txt").read_text(encoding="utf-8").split()
    rng = random.Random(14)
    paragraphs = []
    for _ in range(215):
        n = rng.randint(40, 90)
        start = rng.randint(0, len(words) - n)
        link = f"<a href='/story/{rng.randint(1, 9999)}'>more on this</a>"
        paragraphs.append(f"<p>{' '.join(words[start : start + n])} {link}.</p>\n")
    menu = "".join(
        f'<li><a href="/section/{i}">Section {i} with a long label</a></li>\n' for i in range(150)
    )
    grown = source.replace(
        '<div class="story-body">', '<div class="story-body">' + "".join(paragraphs)
    )
    return grown.replace(
        '<ul><li><a href="/about">', "<ul>" + menu + '<li><a href="/about">'
    ).encode()


def conversion_time() -> None:
    body = big_page()
    document(body)  # import and warm up
    inside: list[float] = []
    extract = converting._trafilatura_body

    def timed(tree: object, *, short_pages: bool) -> object:
        start = time.process_time()
        try:
            return extract(tree, short_pages=short_pages)
        finally:
            inside.append(time.process_time() - start)

    converting._trafilatura_body = timed  # type: ignore[assignment]
    load = os.getloadavg()[0]
    try:
        for label, main in (("main content", True), ("whole page", False)):
            wall, cpu = [], []
            for _ in range(CONVERSIONS):
                start, start_cpu = time.perf_counter(), time.process_time()
                document(body, main=main)
                wall.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
            # CPU time as well: on shared cores the wall clock also counts other processes' turns.
            share = f", {statistics.median(inside) * 1000:.1f} in trafilatura" if inside else ""
            print(
                f"converting a {len(body) // 1024} KB article page to markdown, {label}: "
                f"median {statistics.median(wall) * 1000:.1f} ms wall "
                f"({statistics.median(cpu) * 1000:.1f} ms CPU{share}), "
                f"best {min(wall) * 1000:.1f} ms"
            )
            inside.clear()
    finally:
        converting._trafilatura_body = extract  # type: ignore[assignment]
    print(f"  (load average {load:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


def per_request(get: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        get()
    return (time.perf_counter() - start) / n


def guard_cost() -> None:
    body = (TESTDATA_FETCH / "news-article.html").read_bytes() * 4
    with PageServer({"/p": page(body)}) as site:
        url = site.url + "/p"
        plain = httpx.Client(timeout=5.0, trust_env=False)
        fetcher = Fetcher(FetchConfig(allow=(site.allow,)))
        rows: dict[str, list[float]] = {"plain": [], "guarded": []}
        calls = {
            "plain": lambda: plain.get(url).read(),
            "guarded": lambda: fetcher.read(url),
        }
        for get in calls.values():
            per_request(get, 30)  # warm: connections open, code paths hot
        for _ in range(ROUNDS):
            for name, get in calls.items():
                rows[name].append(per_request(get, REQUESTS))
        plain.close()
        fetcher.close()
    a, b = (statistics.median(v) * 1e3 for v in rows.values())
    print(
        f"GET of a {len(body) // 1024} KB page over a kept-alive loopback connection, median ms: "
        f"plain httpx {a:.3f}   guarded fetch {b:.3f}   ratio {b / a:.2f} "
        f"(target ≤ 1.1 × {a:.3f} + 2 = {1.1 * a + 2:.3f})"
    )


if __name__ == "__main__":
    quality()
    conversion_time()
    guard_cost()
