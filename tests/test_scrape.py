"""The fetch routes' answers as bytes: a cache hit's encoded once per entry, the same JSON."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from siftlib.errors import (
    Blocked,
    BlockedBySite,
    FetchFailed,
    InvalidRequest,
    InvalidURL,
    NoResultsError,
    QueryError,
    SiftError,
    UnreadableContent,
    UnsupportedContent,
    UnsupportedOption,
)
from siftlib.fetch.fetcher import FetchRequest, FetchResult
from siftlib.gateway import api, scrape, wire


def stored(content: str = "# Tram\n\nThe council voted.", **changes: Any) -> FetchResult:
    fields: dict[str, Any] = {
        "url": "https://news.example/tram",
        "final_url": "https://news.example/2026/tram",
        "status": 200,
        "content_type": "text/html; charset=utf-8",
        "media_type": "text/html",
        "title": "Tram ï",
        "description": 'A "vote"',
        "language": "en",
        "content": content,
        "links": ["https://news.example/"],
        "truncated": False,
        "warnings": [],
        "fetch_ms": 12,
        "convert_ms": 3,
        "bytes": 900,
        "also": {"html": "<h1>Tram</h1>", "links": "https://news.example/"},
        "page_type": "article",
    }
    return FetchResult(**{**fields, **changes})


def asked(*formats: str) -> scrape.ScrapeRequest:
    body = {"url": "https://news.example/tram", "formats": list(formats)}
    return scrape.firecrawl_request(body, caller="agent")


def without_id(data: bytes) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(data)
    assert uuid.UUID(answer["data"]["metadata"].pop("scrapeId")).version == 4
    return answer


CONTENTS = [
    "# Tram\n\nThe council voted.",
    # Text ending in a marker's first characters writes it whole: that page is encoded per hit.
    'ends in a marker: "\x00sourceURL\x00',
    'ends in a marker: "\x00scrapeId\x00',
    '"\x00scrapeId\x00" and "\x00sourceURL\x00" inside',
]


@pytest.mark.parametrize("content", CONTENTS, ids=["page", "url mark", "id mark", "inside"])
@pytest.mark.parametrize("formats", [("markdown",), ("markdown", "links", "html")])
def test_a_hit_body_is_its_answer_as_json(content: str, formats: tuple[str, ...]) -> None:
    entry = stored(content)
    request = asked(*formats)
    for url in ("https://news.example/tram", "https://news.example/tram#vote", "https://a/\x00"):
        hit = entry.as_hit(url, 1_770_000_000.25)
        for _ in range(2):  # the second time from the remembered bytes
            data = scrape.firecrawl_body(hit, request)
            assert data.endswith(b"\n")
            assert without_id(data) == without_id(
                wire.json_body(scrape.firecrawl_answer(hit, request))
            )
            assert json.loads(data)["data"]["metadata"]["sourceURL"] == url
            assert scrape.native_body(hit) == wire.json_body(hit.to_native())


def test_a_hit_answers_with_its_own_url_time_and_a_fresh_scrape_id() -> None:
    entry, request = stored(), asked("markdown")
    first = json.loads(scrape.firecrawl_body(entry.as_hit("https://a.example/x", 0.5), request))
    second = json.loads(scrape.firecrawl_body(entry.as_hit("https://b.example/y", 0.5), request))
    one, two = first["data"]["metadata"], second["data"]["metadata"]
    assert (one["sourceURL"], two["sourceURL"]) == ("https://a.example/x", "https://b.example/y")
    assert one["scrapeId"] != two["scrapeId"]
    assert one["cacheState"] == "hit" and one["cachedAt"] == "1970-01-01T00:00:00.500Z"
    native = json.loads(scrape.native_body(entry.as_hit("https://c.example/z", 0.5)))
    assert native["url"] == "https://c.example/z" and native["cached"] is True


def test_a_fresh_page_is_encoded_each_time() -> None:
    fresh, request = stored(), asked("markdown")
    assert fresh.stored is None
    assert without_id(scrape.firecrawl_body(fresh, request)) == without_id(
        wire.json_body(scrape.firecrawl_answer(fresh, request))
    )
    assert "cacheState" in json.loads(scrape.firecrawl_body(fresh, request))["data"]["metadata"]
    assert scrape.native_body(fresh) == wire.json_body(fresh.to_native())


def test_as_hit_leaves_the_stored_entry_as_it_was() -> None:
    entry = stored()
    hit = entry.as_hit("https://other.example/", 7.0)
    assert (entry.url, entry.cached_at, entry.stored) == ("https://news.example/tram", None, None)
    assert (hit.url, hit.cached_at, hit.stored) == ("https://other.example/", 7.0, entry)
    assert hit.content is entry.content and hit == FetchResult(
        **{**entry.__dict__, "url": "https://other.example/", "cached_at": 7.0}
    )


def test_the_request_of_a_scrape_is_unchanged_by_the_encoding() -> None:
    assert asked("markdown", "links").fetch == FetchRequest(
        url="https://news.example/tram", format="markdown", also=("links",), caller="agent"
    )


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (Blocked("address", "blocked: 10.0.0.1 is a private address"), 400, "blocked"),
        (BlockedBySite("a CAPTCHA wall", 429), 403, "blocked by the site"),
        (UnsupportedContent("image/png"), 415, "unsupported content type"),
        (UnreadableContent("the PDF has no text layer"), 415, "unsupported content"),
        (FetchFailed("deadline"), 408, "deadline"),
        (FetchFailed("tls"), 500, "fetch failed"),
        (InvalidURL("invalid url: ftp is not http(s)"), 400, "invalid url"),
        (
            InvalidRequest("invalid request: max_chars must be a positive integer"),
            400,
            "invalid request",
        ),
        (UnsupportedOption("unsupported option: actions"), 400, "unsupported option"),
        (QueryError.because("the query is empty"), 400, "invalid query"),
        (NoResultsError.because("every source failed"), 422, "no search results"),
    ],
)
def test_one_table_gives_each_errors_status_by_its_code(
    exc: SiftError, status: int, code: str
) -> None:
    assert exc.code == code  # type: ignore[attr-defined]
    assert api.ERROR_STATUS[code] == status
    if isinstance(exc, NoResultsError):
        return  # a search's: its body is the search routes' (test_api)
    for firecrawl in (False, True):
        route = "/v2/scrape" if firecrawl else "/v1/fetch"
        answered, body, _ = api.error_answer(exc, route=route)
        assert (answered, body["code"]) == (status, code)
        assert body["error"] == (
            f"fetch failed: {exc.kind}" if isinstance(exc, FetchFailed) else str(exc)
        )
        assert ("success" in body) is firecrawl


def test_a_search_error_keeps_its_reason_apart_from_its_label() -> None:
    exc = QueryError.because("k must be an integer from 1 to 50")
    assert str(exc) == "invalid query: k must be an integer from 1 to 50"
    assert exc.reason == "k must be an integer from 1 to 50"
    plain = QueryError("--max-chars must be a positive number")
    assert plain.reason == str(plain)
    failed = NoResultsError.because("every source failed", ["tavily: 429"])
    assert (str(failed), failed.reason, failed.warnings) == (
        "no search results: every source failed",
        "every source failed",
        ["tavily: 429"],
    )


def test_a_scrape_body_decodes_the_same_remembered_or_not() -> None:
    body = {"url": "https://news.example/tram", "formats": ["markdown", "links"], "maxAge": 600}
    data = json.dumps(body).encode()
    first = scrape.firecrawl_request_of(data, caller="agent")
    assert first == scrape.firecrawl_request(body, caller="agent")
    assert scrape.firecrawl_request_of(data, caller="agent") is first  # remembered
    assert scrape.firecrawl_request_of(data, caller="other").fetch.caller == "other"
    large = json.dumps({**body, "origin": "x" * 4000}).encode()
    assert scrape.firecrawl_request_of(large, caller="agent") == first
    assert scrape.firecrawl_request_of(large, caller="agent") is not first


@pytest.mark.parametrize(
    ("data", "refusal"),
    [
        (b'{"url": "https://a.example/", "formats": ["json"]}', UnsupportedOption),
        (b'{"url": ""}', InvalidURL),
        (b"[1, 2]", api.Rejected),
    ],
)
def test_a_refused_scrape_body_is_refused_every_time(data: bytes, refusal: type[Exception]) -> None:
    for _ in range(2):
        with pytest.raises(refusal):
            scrape.firecrawl_request_of(data, caller="agent")


def test_scrape_ids_are_distinct_random_uuid4s() -> None:
    entry, request = stored(), asked("markdown")
    ids = [
        json.loads(scrape.firecrawl_body(entry.as_hit("https://a/", 1.0), request))["data"][
            "metadata"
        ]["scrapeId"]
        for _ in range(200)
    ]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant, str(parsed)) == (4, uuid.RFC_4122, text)
