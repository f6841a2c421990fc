"""The Hermes agent (hermes-agent 0.19.0) reaching sift as its Firecrawl backend.

`web_search` goes to `/v2/search`, `web_extract` to `/v2/scrape`. Hermes refuses loopback
URLs on the agent side before it calls its backend; the extract tests let the test site's
URLs through that agent-side check only (`allow_site`), never through sift's guard.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from bodykit import TESTDATA_FETCH, fixture_bytes
from fetchkit import Listener, PageServer, page, redirect
from gatewaykit import FakeUpstream, Gateway, call, gateway

from siftlib.config import FetchConfig

pytestmark = pytest.mark.contract

TOKEN = "hermes-sift-token-42"


@pytest.fixture
def site() -> Iterator[PageServer]:
    """Loopback pages for `web_extract`, reached through an `allow` pinhole."""
    routes = {
        "/news": page((TESTDATA_FETCH / "news-article.html").read_bytes()),
        "/docs": page((TESTDATA_FETCH / "docs-page.html").read_bytes()),
        "/report.pdf": page(b"%PDF-1.7", content_type="application/pdf"),
    }
    with PageServer(routes) as server:
        yield server


@pytest.fixture
def gw(tmp_path: Path, site: PageServer) -> Iterator[Gateway]:
    searxng = FakeUpstream(fixture_bytes("searxng/wal-typed-and-legacy.json"))
    brave = FakeUpstream(fixture_bytes("brave_llm/wal-generic-and-sources.json"))
    try:
        with gateway(
            tmp_path / "sift",
            searxng=searxng.url,
            brave_llm=brave.url,
            callers={"hermes": TOKEN},
            fetch=FetchConfig(allow=(site.allow,)),
        ) as running:
            yield running
    finally:
        searxng.close()
        brave.close()


@pytest.fixture
def hermes(tmp_path: Path, gw: Gateway, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A Hermes home whose web search backend is Firecrawl, pointed at the gateway."""
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text(
        "web:\n  search_backend: firecrawl\n  extract_backend: firecrawl\n"
    )
    monkeypatch.setenv("HERMES_HOME", str(home))
    monkeypatch.setenv("FIRECRAWL_API_URL", gw.url)
    monkeypatch.setenv("FIRECRAWL_API_KEY", TOKEN)
    from plugins.web.firecrawl.provider import _reset_client_for_tests

    _reset_client_for_tests()
    yield home
    _reset_client_for_tests()


@pytest.fixture(autouse=True)
def sift_dir(tmp_path: Path) -> None:
    (tmp_path / "sift").mkdir()


def test_hermes_parses_the_raw_v2_json_with_its_own_extractor(gw: Gateway) -> None:
    from plugins.web.firecrawl.provider import _extract_web_search_results

    raw = call(gw.url, "POST", "/v2/search", {"query": "sqlite wal", "limit": 4}, token=TOKEN)
    parsed = _extract_web_search_results(json.loads(raw.raw))
    assert parsed == raw.json["data"]["web"]
    assert len(parsed) == 4
    assert [hit["position"] for hit in parsed] == [1, 2, 3, 4]
    assert all(isinstance(hit["url"], str) and hit["url"] for hit in parsed)


def test_hermes_web_search_tool_goes_through_sift(gw: Gateway, hermes: Path) -> None:
    from tools.web_tools import web_search_tool

    result = json.loads(web_search_tool("sqlite wal", limit=3))
    native = call(gw.url, "POST", "/v1/search", {"query": "sqlite wal", "k": 3}, token=TOKEN)
    assert result["success"] is True
    assert [(h["url"], h["title"], h["description"]) for h in result["data"]["web"]] == [
        (h["url"], h["title"], h["snippet"]) for h in native.json["results"]
    ]
    assert native.json["cached"] is True  # Hermes's search filled the cache
    assert {h["source"] for h in native.json["results"]} <= {"searxng", "brave_llm"}


def test_hermes_firecrawl_provider_reports_a_gateway_refusal(gw: Gateway, hermes: Path) -> None:
    from plugins.web.firecrawl.provider import FirecrawlWebSearchProvider

    provider = FirecrawlWebSearchProvider()
    assert provider.is_available()
    refused = provider.search("  ", limit=5)
    assert refused["success"] is False
    ok = provider.search("sqlite wal", limit=2)
    assert ok["success"] is True
    assert len(ok["data"]["web"]) == 2


@pytest.fixture
def allow_site(site: PageServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Let Hermes's own agent-side URL check pass the test site (and nothing else)."""
    import plugins.web.firecrawl.provider as provider
    import tools.web_tools as web_tools

    checked, checked_async = provider.is_safe_url, web_tools.async_is_safe_url

    def is_safe_url(url: str) -> bool:
        return url.startswith(site.url + "/") or checked(url)

    async def async_is_safe_url(url: str) -> bool:
        return url.startswith(site.url + "/") or await checked_async(url)

    monkeypatch.setattr(provider, "is_safe_url", is_safe_url)
    monkeypatch.setattr(web_tools, "async_is_safe_url", async_is_safe_url)


def extract(urls: list[str], **options: object) -> dict[str, object]:
    import asyncio

    from tools.web_tools import web_extract_tool

    return json.loads(asyncio.run(web_extract_tool(urls, **options)))  # type: ignore[arg-type]


def test_hermes_web_extract_reads_pages_through_sift(
    gw: Gateway, site: PageServer, hermes: Path, allow_site: None
) -> None:
    result = extract([site.url + "/news", site.url + "/docs"], format="markdown")
    news, docs = result["results"]  # type: ignore[misc]
    assert news["url"] == site.url + "/news" and not news.get("error")
    assert news["title"].startswith("City council approves new tram line")
    assert news["content"].startswith("# City council approves new tram line")
    assert "Most read" not in news["content"] and "About time!" not in news["content"]
    assert "```python\nfrom pondlib import Client, Limits" in docs["content"]
    assert [path for path, _ in site.hits] == ["/news", "/docs"]
    scrapes = gw.searcher.metrics.snapshot()["fetch_requests"]
    assert scrapes == {"caller=hermes,outcome=ok": 2}


def test_hermes_web_extract_default_format_asks_markdown_and_html(
    gw: Gateway, site: PageServer, hermes: Path, allow_site: None
) -> None:
    (news,) = extract([site.url + "/news"])["results"]  # type: ignore[misc]
    assert news["content"].startswith("# City council approves new tram line")


def test_hermes_reports_sifts_refusals_per_url(
    gw: Gateway, site: PageServer, hermes: Path, allow_site: None
) -> None:
    with Listener() as idle:
        # Hermes's check passes the site's URLs; sift's guard still refuses the redirect.
        site.routes["/hop"] = redirect(f"http://127.0.0.1:{idle.port}/admin")
        urls = [site.url + "/report.pdf", site.url + "/hop", site.url + "/news"]
        pdf, hop, news = extract(urls, format="markdown")["results"]  # type: ignore[misc]
    assert "unsupported content: the PDF is broken (it does not parse)" in pdf["error"]
    assert "blocked: 127.0.0.1 is a loopback address" in hop["error"]
    assert news["content"].startswith("# City council")
    assert idle.connections == 0


def test_hermes_agent_side_check_still_blocks_other_loopback_urls(
    gw: Gateway, site: PageServer, hermes: Path, allow_site: None
) -> None:
    with Listener() as idle:
        url = f"http://127.0.0.1:{idle.port}/"
        (refused,) = extract([url], format="markdown")["results"]  # type: ignore[misc]
    assert "private or internal" in refused["error"]
    assert idle.connections == 0
