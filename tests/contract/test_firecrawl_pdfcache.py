"""firecrawl-py 4.17.0 `scrape()` on PDFs, challenge pages, tag filters and the fetch cache
(issue 40): the SDK parses every answer sift gives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bodykit import TESTDATA_FETCH
from fetchkit import PageServer, page
from gatewaykit import Gateway, gateway
from pdfkit import Pdf, Text, paragraph

from siftlib.config import FetchConfig
from siftlib.fetch.cache import SQLiteFetchCache

pytestmark = pytest.mark.contract

TOKEN = "fc-sift-pdfcache-1"
INTRO = "Zoë Brandt said the fare would stay at €2.50 — “a promise we keep”, she added."


def report(**options: Any) -> bytes:
    pdf = Pdf(title="Harbour tram", author="Zoë Brandt")
    pdf.page([Text(72, 720, 24, "Harbour tram approved"), *paragraph(72, 680, 11, INTRO)])
    pdf.page([Text(72, 720, 16, "Costs"), *paragraph(72, 690, 11, "Three million a kilometre.")])
    return pdf.bytes(**options)


@pytest.fixture
def site() -> Iterator[PageServer]:
    pdf = "application/pdf"
    blocked = TESTDATA_FETCH / "blocked"
    routes = {
        "/report.pdf": page(report(), content_type=pdf),
        "/locked.pdf": page(report(password="secret"), content_type=pdf),
        "/scan.pdf": page(Pdf().scanned_page().bytes(), content_type=pdf),
        "/moment": page(
            (blocked / "cloudflare-just-a-moment.html").read_bytes(),
            status=403,
            headers={"cf-mitigated": "challenge"},
        ),
        "/news": page((TESTDATA_FETCH / "news-article.html").read_bytes()),
    }
    with PageServer(routes) as server:
        yield server


@pytest.fixture
def gw(tmp_path: Path, site: PageServer) -> Iterator[Gateway]:
    fetch = FetchConfig(allow=(site.allow,), timeout=30.0)
    cache = SQLiteFetchCache(tmp_path / "fetch-cache.db", max_bytes=1 << 24, ttl=3600.0)
    with gateway(tmp_path, callers={"agent": TOKEN}, fetch=fetch, fetch_cache=cache) as running:
        yield running
    cache.close()


def sdk(url: str) -> Any:
    from firecrawl import Firecrawl

    return Firecrawl(api_url=url, api_key=TOKEN)


def test_sdk_reads_a_pdf_as_markdown(gw: Gateway, site: PageServer) -> None:
    from firecrawl.v2.types import Document

    doc = sdk(gw.url).scrape(site.url + "/report.pdf", formats=["markdown"], parsers=["pdf"])
    assert isinstance(doc, Document) and doc.markdown is not None
    assert doc.markdown.startswith("# Harbour tram approved\n\n" + INTRO + "\n\n---\n\n## Costs")
    meta = doc.metadata
    assert meta is not None
    assert (meta.title, meta.num_pages, meta.content_type) == ("Harbour tram", 2, "application/pdf")
    assert meta.model_dump()["author"] == "Zoë Brandt"
    limited = sdk(gw.url).scrape(
        site.url + "/report.pdf", parsers=[{"type": "pdf", "max_pages": 1}]
    )
    assert limited.markdown is not None and "Costs" not in limited.markdown
    assert limited.metadata is not None and limited.metadata.num_pages == 2


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/locked.pdf", "the PDF is encrypted with a password"),
        ("/scan.pdf", "the PDF has no text layer (a scanned document?); sift does no OCR"),
    ],
)
def test_sdk_sees_an_unreadable_pdf_as_one_clear_error(
    gw: Gateway, site: PageServer, path: str, reason: str
) -> None:
    from firecrawl.v2.utils.error_handler import FirecrawlError

    with pytest.raises(FirecrawlError) as caught:
        sdk(gw.url).scrape(site.url + path)
    assert caught.value.status_code == 415
    assert f"unsupported content: {reason}" in str(caught.value)


def test_sdk_sees_a_challenge_page_as_website_not_supported(gw: Gateway, site: PageServer) -> None:
    from firecrawl.v2.utils.error_handler import WebsiteNotSupportedError

    for _ in range(2):
        with pytest.raises(WebsiteNotSupportedError) as caught:
            sdk(gw.url).scrape(site.url + "/moment")
        assert "blocked by the site: a Cloudflare challenge (HTTP 403)" in str(caught.value)
    assert site.paths().count("/moment") == 2  # never cached


def test_sdk_tag_filters_and_the_cache(gw: Gateway, site: PageServer) -> None:
    client = sdk(gw.url)
    first = client.scrape(site.url + "/news", include_tags=["h1"], only_main_content=True)
    assert first.markdown is not None and first.markdown.strip().startswith("# City council")
    assert "\n\n" not in first.markdown.strip()  # the heading alone
    assert first.metadata.cache_state == "miss"
    again = client.scrape(site.url + "/news", include_tags=["h1"], max_age=60_000)
    assert again.metadata.cache_state == "hit" and again.metadata.cached_at
    assert again.markdown == first.markdown
    fresh = client.scrape(site.url + "/news", include_tags=["h1"], max_age=0)
    assert fresh.metadata.cache_state == "miss"
    assert site.paths() == ["/news", "/news"]
