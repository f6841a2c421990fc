"""Real clients on a script-built page, with the gateway's browser on (issue 41): firecrawl-py
4.17.0 `scrape(url, wait_for=3000)` and the Hermes agent's `web_extract` through
`FIRECRAWL_API_URL`. Hermes's own agent-side loopback check is let through for the test
site only, never sift's guard."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from browserkit import need_chromium
from fetchkit import PageServer, page
from gatewaykit import Gateway, gateway

from siftlib.config import BrowserConfig, FetchConfig

pytestmark = pytest.mark.contract

TOKEN = "browser-contract-token"
APP = b"""<!doctype html><html><head><title>Issue tracker</title></head><body>
<div id="root"></div><script>
setTimeout(function () {
  document.getElementById('root').innerHTML = '<article><h1>Issue 41</h1><p>' +
    'The comments of this issue are loaded by a script after a second. '.repeat(10) +
    '</p></article>';
}, 1000);
</script></body></html>"""
SHOWN = "The comments of this issue are loaded by a script after a second."
# Hermes 0.19.0 sends no waitFor: its page loads its comments with fetch() as it starts.
FETCHED = b"""<!doctype html><html><head><title>Issue tracker</title></head><body>
<div id="root"></div><script>
fetch('/comments').then(function (r) { return r.text(); }).then(function (text) {
  document.getElementById('root').innerHTML = '<article><h1>Issue 41</h1><p>' + text +
    '</p></article>';
});
</script></body></html>"""
COMMENTS = b"The comments of this issue arrive through fetch as the page starts. " * 10


@pytest.fixture
def site() -> Iterator[PageServer]:
    routes = {
        "/issue": page(APP),
        "/fetched": page(FETCHED),
        "/comments": page(COMMENTS, content_type="text/plain"),
    }
    with PageServer(routes) as server:
        yield server


@pytest.fixture
def gw(tmp_path: Path, site: PageServer) -> Iterator[Gateway]:
    need_chromium()
    fetch = FetchConfig(allow=(site.allow,), timeout=40.0, browser=BrowserConfig(enabled=True))
    with gateway(tmp_path, callers={"agent": TOKEN}, fetch=fetch) as running:
        yield running


def test_firecrawl_sdk_scrape_with_wait_for_reads_the_rendered_page(
    gw: Gateway, site: PageServer
) -> None:
    from firecrawl import Firecrawl

    doc = Firecrawl(api_url=gw.url, api_key=TOKEN).scrape(site.url + "/issue", wait_for=3000)
    assert doc.markdown is not None and SHOWN in doc.markdown
    assert doc.metadata is not None
    assert doc.metadata.status_code == 200
    extra = doc.metadata.model_dump()
    assert extra.get("rendered") is True


def test_hermes_web_extract_reads_the_rendered_page(
    gw: Gateway, site: PageServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text(
        "web:\n  search_backend: firecrawl\n  extract_backend: firecrawl\n"
    )
    monkeypatch.setenv("HERMES_HOME", str(home))
    monkeypatch.setenv("FIRECRAWL_API_URL", gw.url)
    monkeypatch.setenv("FIRECRAWL_API_KEY", TOKEN)
    import plugins.web.firecrawl.provider as provider
    import tools.web_tools as web_tools
    from tools.web_tools import web_extract_tool

    checked, checked_async = provider.is_safe_url, web_tools.async_is_safe_url

    async def async_is_safe_url(url: str) -> bool:
        return url.startswith(site.url + "/") or await checked_async(url)

    monkeypatch.setattr(
        provider, "is_safe_url", lambda url: url.startswith(site.url) or checked(url)
    )
    monkeypatch.setattr(web_tools, "async_is_safe_url", async_is_safe_url)
    provider._reset_client_for_tests()
    try:
        result = json.loads(
            asyncio.run(web_extract_tool([site.url + "/fetched"], format="markdown"))
        )
    finally:
        provider._reset_client_for_tests()
    (issue,) = result["results"]
    assert not issue.get("error")
    assert "The comments of this issue arrive through fetch as the page starts." in issue["content"]
