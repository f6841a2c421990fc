"""A hostile page costs one render, never the gateway: each is cut by the fetch's deadline
(or the byte cap, or the memory bound), the browser is restarted when it must be, and the
next render is fine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from browserkit import rendering
from fetchkit import PageServer, hang, page

from siftlib.errors import Cancelled
from siftlib.fetch.fetcher import Fetcher, FetchRequest
from siftlib.metrics import Metrics

pytestmark = pytest.mark.one_worker  # a browser or gateways for the module

TIMEOUT = 10.0  # the bombs' deadline (each ends by its own bound first); fine pages get the default
# A page that never yields burns a core until its deadline, which is all it proves: a short one.
# The static page it falls back to was read and converted before the render began.
LOOP_TIMEOUT = 2.0
# A page still loading (or still requesting) is read at its deadline: long enough for a starved
# renderer to have run the page's script, short enough not to wait for nothing.
WAIT_TIMEOUT = 4.0
STORM = 1000  # requests of /requests: Chromium sends six to one host at once and queues the rest
FINE = b"""<!doctype html><html><head><title>Fine</title></head><body><div id="root"></div>
<script>document.getElementById('root').innerHTML = '<article><h1>Fine</h1><p>' +
  'The next render reads normally. '.repeat(12) + '</p></article>';</script></body></html>"""
TEXT = "<article><h1>Hostile</h1><p>" + "The hostile page has some text of its own. " * 8
HOSTILE = {
    "/loop": f"<html><body>{TEXT}</p></article><script>while (true) {{}}</script></body></html>",
    "/loop-later": (
        f"<html><body>{TEXT}</p></article><script>setTimeout(function () {{ while (true) {{}} }},"
        " 50);</script></body></html>"
    ),
    "/memory": (
        f"<html><body>{TEXT}</p></article><script>var kept = [];"
        "while (true) { kept.push(new Array(1000000).fill(Math.random())); }</script></body></html>"
    ),
    "/buffers": (
        f"<html><body>{TEXT}</p></article><script>var kept = [];"
        "while (true) { var b = new Uint8Array(64 * 1024 * 1024); b.fill(7); kept.push(b); }"
        "</script></body></html>"
    ),
    "/popups": (
        f'<html><body><div id="root"></div><script>'
        "for (var i = 0; i < 100; i++) {"
        "  var a = document.createElement('a'); a.href = '/fine?' + i; a.target = '_blank';"
        "  document.body.appendChild(a); a.click(); window.open('/fine?w' + i);"
        "}"
        f"document.getElementById('root').innerHTML = '{TEXT}</p></article>';"
        "</script></body></html>"
    ),
    "/never-loads": (
        f'<html><body><div id="root"></div><img src="/hang"><script>'
        f"document.getElementById('root').innerHTML = '{TEXT}</p></article>';"
        "</script></body></html>"
    ),
    "/requests": (
        f'<html><body><div id="root"></div><script>'
        f"for (var i = 0; i < {STORM}; i++) {{ fetch('/hang?' + i).catch(function () {{}}); }}"
        f"document.getElementById('root').innerHTML = '{TEXT}</p></article>';"
        "</script></body></html>"
    ),
}


@pytest.fixture(scope="module")
def site() -> Iterator[PageServer]:
    routes = {path: page(html.encode()) for path, html in HOSTILE.items()}
    routes["/fine"] = page(FINE)
    routes["/hang"] = hang(60)
    routes["/big.js"] = page(b"/*" + b"x" * 3_000_000 + b"*/", content_type="text/javascript")
    routes["/heavy"] = page(
        b'<html><body><div id="root"></div><script src="/big.js"></script><script>'
        b"document.getElementById('root').innerHTML = '<p>"
        + b"Text beside a heavy script. " * 10
        + b"</p>';</script></body></html>"
    )
    with PageServer(routes) as server:
        yield server


@pytest.fixture(scope="module")
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture(scope="module")
def fetch(site: PageServer, metrics: Metrics) -> Iterator[Fetcher]:
    with rendering(site.allow, metrics=metrics, max_bytes=1024 * 1024) as fetcher:
        fine(fetcher, site)  # Chromium started: each hostile page's deadline goes to the page
        yield fetcher


def fine(fetch: Fetcher, site: PageServer) -> None:
    result = fetch.fetch(FetchRequest(url=site.url + "/fine"))
    assert "The next render reads normally." in result.content, result.warnings
    assert result.render_ms is not None


@pytest.mark.parametrize(
    ("path", "timeout"),
    [
        ("/loop", LOOP_TIMEOUT),
        ("/loop-later", LOOP_TIMEOUT),
        ("/memory", TIMEOUT),
        ("/buffers", TIMEOUT),
    ],
)
def test_a_page_that_never_yields_costs_one_render(
    fetch: Fetcher, site: PageServer, path: str, timeout: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each is ended by its own bound: the deadline (the loops), the renderer's JavaScript heap
    (/memory: a crash) or the browser's memory bound (/buffers)."""
    renderer = fetch.renderer
    assert renderer is not None and renderer._browser is not None  # every test ends with fine()
    if path == "/buffers":  # the memory bound at a smaller scale: 512 MiB over the idle browser
        monkeypatch.setattr(renderer, "memory_bound", renderer._browser.rss() + 512 * 1024**2)
    started = time.monotonic()
    result = fetch.fetch(FetchRequest(url=site.url + path, render=True, timeout=timeout))
    assert time.monotonic() - started < timeout + 1.5
    assert result.render_ms is None  # the static page, saying why it is not rendered
    assert any(warning.startswith("render failed: ") for warning in result.warnings)
    assert "The hostile page has some text of its own." in result.content
    fine(fetch, site)


def test_a_popup_storm_is_closed_and_the_page_still_reads(fetch: Fetcher, site: PageServer) -> None:
    result = fetch.fetch(FetchRequest(url=site.url + "/popups", render=True))
    assert "The hostile page has some text of its own." in result.content
    assert result.render_ms is not None
    renderer = fetch.renderer
    assert renderer is not None and renderer._browser is not None
    pages = renderer._browser.pipe.call("Target.getTargets", timeout=5)["targetInfos"]
    assert [info for info in pages if info["type"] == "page" and info["url"] != "about:blank"] == []
    fine(fetch, site)


def test_a_page_that_never_finishes_loading_is_read_at_the_deadline(
    fetch: Fetcher, site: PageServer
) -> None:
    started = time.monotonic()
    result = fetch.fetch(
        FetchRequest(url=site.url + "/never-loads", render=True, timeout=WAIT_TIMEOUT)
    )
    assert time.monotonic() - started < WAIT_TIMEOUT + 1.5
    assert "The hostile page has some text of its own." in result.content
    assert result.render_ms is not None
    assert "rendered: the page had not finished loading at the deadline" in result.warnings
    fine(fetch, site)


def test_a_thousand_requests_cost_one_render(fetch: Fetcher, site: PageServer) -> None:
    """The renderer may still be issuing them at the deadline: then the static page it is."""
    started = time.monotonic()
    result = fetch.fetch(
        FetchRequest(url=site.url + "/requests", render=True, timeout=WAIT_TIMEOUT)
    )
    assert time.monotonic() - started < WAIT_TIMEOUT + 1.5
    if result.render_ms is None:
        assert any(warning.startswith("render failed: ") for warning in result.warnings)
    else:
        assert "The hostile page has some text of its own." in result.content
    assert len(site.paths()) < STORM
    fine(fetch, site)


def test_the_byte_cap_cuts_what_the_proxy_relays(fetch: Fetcher, site: PageServer) -> None:
    result = fetch.fetch(FetchRequest(url=site.url + "/heavy", render=True))
    assert result.render_ms is not None, result.warnings
    assert any("byte cap" in warning for warning in result.warnings), result.warnings
    fine(fetch, site)


def test_a_crashed_or_hung_browser_is_restarted(
    fetch: Fetcher, site: PageServer, metrics: Metrics
) -> None:
    renderer = fetch.renderer
    assert renderer is not None
    browser = renderer._browser
    assert browser is not None  # every test ends with fine()
    browser.pipe.kill()  # as if it crashed between two renders
    fine(fetch, site)
    restarts = metrics.snapshot().get("browser_restarts", {})
    assert isinstance(restarts, dict) and restarts.get("reason=crash", 0) >= 1


def test_a_cancelled_fetch_stops_its_render(fetch: Fetcher, site: PageServer) -> None:
    cancel = threading.Event()
    threading.Timer(1.5, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        fetch.fetch(FetchRequest(url=site.url + "/never-loads", render=True), cancel=cancel)
    assert time.monotonic() - started < TIMEOUT
    fine(fetch, site)
