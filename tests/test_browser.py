"""Rendering with a real headless Chromium: script-built pages read as their content.

Every page is served on loopback through one pinhole for exactly its port; see
test_browser_guard.py for the escapes and test_browser_bounds.py for hostile pages.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator

import pytest
from browserkit import rendering
from fetchkit import PageServer, page

from siftlib.fetch.browser.shell import shell_reason
from siftlib.fetch.fetcher import Fetcher, FetchRequest
from siftlib.metrics import Metrics

pytestmark = pytest.mark.one_worker  # a browser or gateways for the module

SHELL = "Loading the application"
BUILT = b"""<!doctype html><html><head><title>Docs app</title></head><body>
<div id="root"><p>%s</p></div>
<script>
document.getElementById('root').innerHTML =
  '<article><h1>Rendered guide</h1><p>' + 'This paragraph was written by a script. '.repeat(12) +
  '</p></article>';
</script></body></html>""" % SHELL.encode()
DELAYED = b"""<!doctype html><html><head><title>Lazy</title></head><body>
<main id="app"></main>
<script>
setTimeout(function () {
  fetch('/data.json').then(r => r.json()).then(function (d) {
    document.getElementById('app').innerHTML = '<article><h1>' + d.title + '</h1><p>' +
      d.body + '</p></article>';
  });
}, 200);
</script></body></html>"""
DATA = (
    b'{"title": "Comments loaded later", "body": "'
    + b"Each comment arrived through fetch after a delay. " * 10
    + b'"}'
)
REVEALED = b"""<!doctype html><html><head><title>Reveal</title>
<style>.hidden { display: none }</style></head><body>
<noscript>You need to enable JavaScript to run this app.</noscript>
<div id="content" class="hidden"></div>
<script>
window.addEventListener('load', function () {
  var c = document.getElementById('content');
  c.innerHTML = '<article><h1>Shown on load</h1><p>' +
    'The article appears once the page has loaded. '.repeat(12) + '</p></article>';
  c.className = '';
});
</script></body></html>"""
WAITED = b"""<!doctype html><html><head><title>Slow</title></head><body><div id="root"></div>
<script>
setTimeout(function () {
  document.getElementById('root').innerHTML = '<article><h1>Late text</h1><p>' +
    'Written a second and a half after load, with no request to wait for. '.repeat(8) +
    '</p></article>';
}, 1500);
</script></body></html>"""
STATIC = (
    b"""<!doctype html><html><head><title>Plain</title></head><body><article>
<h1>A plain article</h1><p>"""
    + b"Static text that needs no script at all. " * 20
    + b"""</p>
</article><script>var analytics = 1;</script></body></html>"""
)


@pytest.fixture(scope="module")
def site() -> Iterator[PageServer]:
    routes = {
        "/built": page(BUILT),
        "/delayed": page(DELAYED),
        "/data.json": page(DATA, content_type="application/json"),
        "/revealed": page(REVEALED),
        "/waited": page(WAITED),
        "/static": page(STATIC),
    }
    with PageServer(routes) as server:
        yield server


@pytest.fixture(scope="module")
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture(scope="module")
def fetch(site: PageServer, metrics: Metrics) -> Iterator[Fetcher]:
    with rendering(site.allow, metrics=metrics) as fetcher:
        yield fetcher


@pytest.mark.parametrize(
    ("path", "shown", "absent"),
    [
        ("/built", "This paragraph was written by a script.", SHELL),
        ("/delayed", "Each comment arrived through fetch after a delay.", None),
        ("/revealed", "The article appears once the page has loaded.", "enable JavaScript"),
    ],
)
def test_a_script_built_page_reads_as_its_rendered_content(
    fetch: Fetcher, site: PageServer, path: str, shown: str, absent: str | None
) -> None:
    off = fetch.settings.browser._replace(enabled=False)
    with Fetcher(fetch.settings._replace(browser=off)) as static:
        shell = static.fetch(FetchRequest(url=site.url + path))
    assert shown not in shell.content
    result = fetch.fetch(FetchRequest(url=site.url + path))
    assert shown in result.content
    if absent is not None:
        assert absent not in result.content
    assert result.render_ms is not None and result.render_ms > 0
    native = result.to_native()
    assert native["rendered"] is True
    assert native["timings"]["render_ms"] == result.render_ms  # type: ignore[index]
    assert result.status == 200


def test_auto_leaves_a_page_with_text_static(fetch: Fetcher, site: PageServer) -> None:
    result = fetch.fetch(FetchRequest(url=site.url + "/static"))
    assert "Static text that needs no script at all." in result.content
    assert result.render_ms is None
    assert "rendered" not in result.to_native()


def test_render_true_renders_and_render_false_does_not(fetch: Fetcher, site: PageServer) -> None:
    forced = fetch.fetch(FetchRequest(url=site.url + "/static", render=True))
    assert forced.render_ms is not None
    assert "Static text that needs no script at all." in forced.content
    skipped = fetch.fetch(FetchRequest(url=site.url + "/built", render=False))
    assert skipped.render_ms is None
    assert "This paragraph was written by a script." not in skipped.content


def test_wait_for_waits_after_load(fetch: Fetcher, site: PageServer) -> None:
    hasty = fetch.fetch(FetchRequest(url=site.url + "/waited", render=True))
    assert "Written a second and a half after load" not in hasty.content
    patient = fetch.fetch(FetchRequest(url=site.url + "/waited", render=True, wait_for=2.0))
    assert "Written a second and a half after load" in patient.content


def test_a_screenshot_is_a_png_data_url(fetch: Fetcher, site: PageServer) -> None:
    result = fetch.fetch(FetchRequest(url=site.url + "/built", screenshot=True))
    assert result.screenshot is not None
    head, _, data = result.screenshot.partition(",")
    assert head == "data:image/png;base64"
    assert base64.b64decode(data).startswith(b"\x89PNG\r\n\x1a\n")


def test_renders_are_counted(fetch: Fetcher, site: PageServer, metrics: Metrics) -> None:
    before = metrics.snapshot().get("browser_renders", 0)
    fetch.fetch(FetchRequest(url=site.url + "/built"))
    assert metrics.snapshot()["browser_renders"] == before + 1  # type: ignore[operator]


def test_the_browser_is_not_started_until_a_page_needs_it(site: PageServer) -> None:
    with rendering(site.allow) as fetcher:
        assert fetcher.renderer is not None
        fetcher.fetch(FetchRequest(url=site.url + "/static"))
        assert fetcher.renderer.health() == {"available": True, "running": False}
        started = time.monotonic()
        fetcher.fetch(FetchRequest(url=site.url + "/built"))
        assert fetcher.renderer.health()["running"] is True
    assert time.monotonic() - started < fetcher.settings.timeout


@pytest.mark.parametrize(
    ("html", "reason"),
    [
        (b'<html><body><div id="root"></div><script src="/app.js"></script>', "an empty #root"),
        (b'<div id="__next">  <!-- ssr off --> </div><script></script>', "an empty #__next"),
        (
            b"<noscript>Please enable JavaScript to continue.</noscript><p>"
            + b"word " * 100
            + b"</p><script></script>",
            "a <noscript> asking for JavaScript",
        ),
        (b"<p>Loading...</p><script src=/a.js></script>", "little visible text"),
        (b"<p>Loading...</p>", None),
        (b"<article>" + b"Plenty of words here. " * 40 + b"</article><script></script>", None),
    ],
)
def test_auto_renders_only_what_looks_like_an_application_shell(
    html: bytes, reason: str | None
) -> None:
    assert shell_reason(html, "x" * 500) == reason


def test_auto_renders_a_page_whose_main_content_came_back_near_empty() -> None:
    html = b"<nav>" + b"Menu entry " * 40 + b"</nav><main></main><script></script>"
    assert shell_reason(html, "Menu") == "a near-empty main content"
