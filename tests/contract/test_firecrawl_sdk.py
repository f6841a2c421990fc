"""The real Firecrawl SDK (firecrawl-py 4.17.0): `search()` against `/v2/search` (search.md
§3.2) and `scrape()` against `/v2/scrape` (fetch.md §4.2)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bodykit import TESTDATA_FETCH, searxng_body
from fetchkit import Listener, PageServer, hang, page
from gatewaykit import FakeUpstream, Gateway, call, gateway

from siftlib.config import FetchConfig

pytestmark = pytest.mark.contract

TOKEN = "fc-sift-token-1234"


@pytest.fixture
def gw(tmp_path: Path, searxng: FakeUpstream, tavily: FakeUpstream) -> Iterator[Gateway]:
    with gateway(
        tmp_path, searxng=searxng.url, tavily=tavily.url + "/search", callers={"agent": TOKEN}
    ) as running:
        yield running


def sdk(url: str, key: str | None = TOKEN) -> Any:
    from firecrawl import Firecrawl

    return Firecrawl(api_url=url, api_key=key)


def answers(gw: Gateway, status: int) -> int:
    """How many `/v2/search` requests the gateway answered with `status`."""
    responses = gw.searcher.metrics.snapshot().get("http_responses", {})
    assert isinstance(responses, dict)
    return int(responses.get(f"route=/v2/search,status={status}", 0))


def test_sdk_search_returns_the_fused_hits(gw: Gateway) -> None:
    from firecrawl.v2.types import SearchResultWeb

    data = sdk(gw.url).search(query="sqlite wal mode", limit=4)
    native = call(gw.url, "POST", "/v1/search", {"query": "sqlite wal mode", "k": 4}, token=TOKEN)
    assert all(isinstance(hit, SearchResultWeb) for hit in data.web)
    assert [(h.url, h.title, h.description) for h in data.web] == [
        (h["url"], h["title"], h["snippet"]) for h in native.json["results"]
    ]
    assert {h["source"] for h in native.json["results"]} == {"searxng", "tavily"}
    assert data.news is None and data.images is None


def test_sdk_default_limit_is_5_and_100_is_clamped_to_20(tmp_path: Path) -> None:
    many = FakeUpstream(searxng_body(40))
    try:
        with gateway(tmp_path, searxng=many.url) as running:
            default = sdk(running.url, key=None).search(query="pages")
            most = sdk(running.url, key=None).search(query="pages", limit=100)
    finally:
        many.close()
    assert len(default.web) == 5
    assert len(most.web) == 20
    assert [h.url for h in most.web[:5]] == [h.url for h in default.web]


def test_sdk_joins_v2_search_at_the_root_of_a_prefixed_api_url(gw: Gateway) -> None:
    data = sdk(gw.url + "/firecrawl/api").search(query="sqlite wal", limit=2)
    assert len(data.web) == 2


def test_sdk_options_that_would_scrape_change_nothing(gw: Gateway) -> None:
    from firecrawl.v2.types import ScrapeOptions, SearchResultWeb

    plain = sdk(gw.url).search(query="sqlite wal", limit=3)
    data = sdk(gw.url).search(
        query="sqlite wal",
        limit=3,
        sources=["web", "news"],
        tbs="qdr:w",
        location="Germany",
        timeout=60000,
        ignore_invalid_urls=True,
        scrape_options=ScrapeOptions(formats=["markdown", "html", "links"]),
    )
    assert all(isinstance(hit, SearchResultWeb) for hit in data.web)
    assert [h.url for h in data.web] == [h.url for h in plain.web]


def test_sdk_open_mode_without_a_key(tmp_path: Path, searxng: FakeUpstream) -> None:
    with gateway(tmp_path, searxng=searxng.url) as running:
        data = sdk(running.url, key=None).search(query="sqlite wal", limit=2)
    assert [h.url for h in data.web][:1] == ["https://www.sqlite.org/wal.html"]
    assert "Authorization" not in searxng.calls[0].headers


def test_sdk_empty_results_are_a_success(tmp_path: Path) -> None:
    empty = FakeUpstream(b'{"results": []}')
    try:
        with gateway(tmp_path, searxng=empty.url) as running:
            data = sdk(running.url, key=None).search(query="nothing at all")
    finally:
        empty.close()
    assert data.web == []


def test_sdk_wrong_key_is_one_401_without_retries(gw: Gateway) -> None:
    from firecrawl.v2.utils.error_handler import UnauthorizedError

    with pytest.raises(UnauthorizedError):
        sdk(gw.url, key="fc-wrong").search(query="sqlite wal")
    assert answers(gw, 401) == 1


def test_sdk_bad_limit_type_never_reaches_a_search(gw: Gateway, searxng: FakeUpstream) -> None:
    from firecrawl.v2.utils.error_handler import BadRequestError

    # The SDK validates 1-100 itself; a raw client can still send a non-integer.
    raw = call(gw.url, "POST", "/v2/search", {"query": "x", "limit": "3"}, token=TOKEN)
    assert raw.status == 400
    with pytest.raises(BadRequestError):
        sdk(gw.url).search(query="x" * 1501)
    assert answers(gw, 400) == 2
    assert searxng.calls == []


@pytest.mark.parametrize("upstream_status", [502, 500, 429])
def test_sdk_sees_422_once_when_every_source_fails(tmp_path: Path, upstream_status: int) -> None:
    from firecrawl.v2.utils.error_handler import FirecrawlError

    broken = FakeUpstream(b"upstream trouble", status=upstream_status)
    try:
        with gateway(tmp_path, searxng=broken.url, callers={"agent": TOKEN}) as running:
            with pytest.raises(FirecrawlError) as raised:
                sdk(running.url).search(query="sqlite wal")
            assert answers(running, 422) == 1
            assert answers(running, 502) == 0
    finally:
        broken.close()
    assert raised.value.status_code == 422
    assert len(broken.calls) == 1  # one upstream call: the SDK did not retry


def test_sdk_sees_422_when_no_source_is_enabled(tmp_path: Path) -> None:
    from firecrawl.v2.utils.error_handler import FirecrawlError

    with gateway(tmp_path) as running, pytest.raises(FirecrawlError) as raised:
        sdk(running.url, key=None).search(query="sqlite wal")
    assert raised.value.status_code == 422
    assert "no search results" in str(raised.value)


def test_sdk_sees_one_500_for_an_internal_error(tmp_path: Path, searxng: FakeUpstream) -> None:
    from firecrawl.v2.utils.error_handler import InternalServerError

    class Exploding:
        def __init__(self, real: Any) -> None:
            self.metrics = real.metrics

        def search(self, request: object, **options: object) -> object:
            raise KeyError("boom")

    with gateway(tmp_path, searxng=searxng.url, searcher_factory=Exploding) as running:
        with pytest.raises(InternalServerError):
            sdk(running.url, key=None).search(query="sqlite wal")
        assert answers(running, 500) == 1


def test_hits_carrying_published_and_engines_still_parse_as_web_results(gw: Gateway) -> None:
    from firecrawl.v2.types import SearchResultWeb

    raw = call(gw.url, "POST", "/v2/search", {"query": "sqlite wal", "limit": 6}, token=TOKEN)
    web = raw.json["data"]["web"]
    extras = {key for hit in web for key in hit} - {"url", "title", "description", "position"}
    assert extras == {"published", "engines"}
    # Keys that would make the SDK take a hit for a scraped document (and drop its fields).
    scraped = {"markdown", "html", "rawHtml", "links", "screenshot", "changeTracking", "summary"}
    assert not extras & (scraped | {"json"})
    blog = next(h for h in web if h["url"] == "https://blog.example.net/sqlite-wal-explained/")
    assert blog["published"] == "2026-03-02T00:00:00"
    assert blog["engines"] == 3  # two SearXNG engines and Tavily

    data = sdk(gw.url).search(query="sqlite wal", limit=6)
    assert all(isinstance(hit, SearchResultWeb) for hit in data.web)
    assert [(h.url, h.title, h.description) for h in data.web] == [
        (h["url"], h["title"], h["description"]) for h in web
    ]


# --- scrape() against /v2/scrape (fetch.md §4.2) ---------------------------------------------


@pytest.fixture
def site() -> Iterator[PageServer]:
    """Loopback pages, reached through an `allow` pinhole."""
    routes = {
        "/news": page((TESTDATA_FETCH / "news-article.html").read_bytes()),
        "/gone": page(b"<html><body><p>No such story.</p></body></html>", status=404),
        "/report.pdf": page(b"%PDF-1.7", content_type="application/pdf"),
        "/slow": hang(10),
    }
    with PageServer(routes) as server:
        yield server


@pytest.fixture
def scraping(tmp_path: Path, site: PageServer) -> Iterator[Gateway]:
    fetch = FetchConfig(allow=(site.allow,), timeout=5.0)
    with gateway(tmp_path, callers={"agent": TOKEN}, fetch=fetch) as running:
        yield running


def test_sdk_scrape_without_options(scraping: Gateway, site: PageServer) -> None:
    from firecrawl.v2.types import Document, DocumentMetadata

    doc = sdk(scraping.url).scrape(site.url + "/news")
    assert isinstance(doc, Document)
    assert doc.markdown is not None
    assert doc.markdown.startswith("# City council approves new tram line after decade of debate")
    assert "Most read" not in doc.markdown and "About time!" not in doc.markdown
    assert isinstance(doc.metadata, DocumentMetadata)
    meta = doc.metadata
    assert (
        meta.title
        == "City council approves new tram line after decade of debate | The Riverside Courier"
    )
    assert meta.language == "en-GB"
    assert meta.status_code == 200
    assert meta.source_url == meta.url == site.url + "/news"
    assert meta.content_type == "text/html; charset=utf-8"
    assert meta.proxy_used == "basic"
    # sift's `pageType` rides along as an extra field the SDK keeps without complaint.
    assert meta.model_dump().get("pageType") == "article", meta.model_dump()
    assert doc.links is None and doc.html is None


def test_sdk_scrape_with_options_and_formats(scraping: Gateway, site: PageServer) -> None:
    doc = sdk(scraping.url).scrape(
        site.url + "/news",
        formats=["markdown", "links", "html", "rawHtml"],
        only_main_content=False,
        timeout=4000,
        wait_for=3000,
        headers={"Cookie": "session=1"},
        mobile=True,
        skip_tls_verification=True,
    )
    assert doc.markdown is not None and "Most read" in doc.markdown
    assert isinstance(doc.links, list) and all(isinstance(link, str) for link in doc.links)
    assert site.url + "/documents/tram-plan.pdf" in doc.links
    assert doc.html is not None and "<script" not in doc.html
    assert doc.raw_html is not None and "<script" in doc.raw_html
    assert doc.metadata is not None
    extra = doc.metadata.model_dump()
    assert extra["cache_state"] == "miss" and isinstance(extra["scrape_id"], str)
    assert all("cookie" not in {k.lower() for k in headers} for _, headers in site.hits)


def test_sdk_scrape_of_a_404_page_is_a_document(scraping: Gateway, site: PageServer) -> None:
    doc = sdk(scraping.url).scrape(site.url + "/gone")
    assert doc.metadata is not None and doc.metadata.status_code == 404
    assert doc.markdown is not None and "No such story." in doc.markdown


def test_sdk_scrape_typed_errors(scraping: Gateway, site: PageServer) -> None:
    from firecrawl.v2.utils.error_handler import (
        BadRequestError,
        FirecrawlError,
        RequestTimeoutError,
        UnauthorizedError,
    )

    client = sdk(scraping.url)
    with Listener() as idle, pytest.raises(BadRequestError) as blocked:
        client.scrape(f"http://127.0.0.1:{idle.port}/admin")
    assert idle.connections == 0
    assert "blocked: 127.0.0.1 is a loopback address" in str(blocked.value)
    with pytest.raises(BadRequestError) as unsupported:
        client.scrape(site.url + "/news", formats=["screenshot"])
    assert "unsupported option: screenshot" in str(unsupported.value)
    with pytest.raises(FirecrawlError) as pdf:
        client.scrape(site.url + "/report.pdf")
    assert pdf.value.status_code == 415
    assert "unsupported content: the PDF is broken (it does not parse)" in str(pdf.value)
    with pytest.raises(RequestTimeoutError):
        client.scrape(site.url + "/slow", timeout=500)
    with pytest.raises(UnauthorizedError):
        sdk(scraping.url, key="fc-wrong").scrape(site.url + "/news")
    responses = scraping.searcher.metrics.snapshot()["http_responses"]
    assert isinstance(responses, dict)
    assert not any("status=502" in key for key in responses)
    assert responses["route=/v2/scrape,status=400"] == 2  # each answered once: no retries
