"""The gateway's API as pure functions: bodies into requests, outcomes into answers, no sockets."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest

from siftlib import __version__
from siftlib.errors import QueryError
from siftlib.gateway import api, wire
from siftlib.gateway.api import Rejected
from siftlib.hits import Hit
from siftlib.search.pipeline import SearchRequest, SearchResponse


def response(*hits: Hit) -> SearchResponse:
    return SearchResponse(
        results=list(hits),
        warnings=["tavily: timeout"],
        sources_ok=["searxng"],
        sources_failed=["tavily"],
        search_ms=12,
        rerank_ms=0,
        cached=False,
    )


def rejection(call: Any, *args: Any, **kwargs: Any) -> Rejected:
    with pytest.raises(Rejected) as caught:
        call(*args, **kwargs)
    return caught.value


def test_a_native_body_becomes_its_search_request() -> None:
    body = {"query": "sqlite wal", "k": 3, "rerank": False, "digest": True, "question": "why?"}
    assert api.native_request(body, caller="ops", default_k=8) == SearchRequest(
        query="sqlite wal", k=3, rerank=False, digest=True, caller="ops"
    )


def test_a_native_body_without_k_takes_the_default() -> None:
    request = api.native_request({"query": "sqlite"}, caller="ops", default_k=8)
    assert (request.k, request.rerank, request.digest) == (8, None, False)


@pytest.mark.parametrize(
    ("body", "details"),
    [
        ({"query": "q", "rerank": "yes"}, "rerank must be true or false"),
        ({"query": "q", "digest": 1}, "digest must be true or false"),
        ({"query": "q", "question": 7}, "question must be a string"),
        ({"query": 7}, "query must be a string"),
        ({"query": None}, "query is required"),
        ({"q": "sqlite wal"}, "query is required"),
    ],
)
def test_a_bad_native_body_is_rejected_as_an_invalid_query(
    body: dict[str, Any], details: str
) -> None:
    exc = rejection(api.native_request, body, caller="ops", default_k=8)
    assert (exc.status, exc.error, exc.details) == (
        HTTPStatus.BAD_REQUEST,
        "invalid query",
        details,
    )


@pytest.mark.parametrize("k", [0, 51, True, 2.5, "5"])
def test_a_bad_k_is_the_query_rule_shared_by_every_face(k: object) -> None:
    with pytest.raises(QueryError, match="^invalid query: k must be an integer from 1 to 50$"):
        api.native_request({"query": "q", "k": k}, caller="ops", default_k=8)


@pytest.mark.parametrize(("limit", "k"), [(None, 5), (1, 1), (0, 1), (-3, 1), (20, 20), (99, 20)])
def test_a_firecrawl_limit_defaults_to_5_and_is_clamped(limit: int | None, k: int) -> None:
    request = api.firecrawl_request({"query": "q", "limit": limit}, caller="ops")
    assert request == SearchRequest(query="q", k=k, caller="ops")


@pytest.mark.parametrize("limit", ["5", 2.5, True])
def test_a_firecrawl_limit_that_is_not_an_integer_is_rejected(limit: object) -> None:
    exc = rejection(api.firecrawl_request, {"query": "q", "limit": limit}, caller="ops")
    assert exc.details == "limit must be an integer"


@pytest.mark.parametrize(
    ("data", "details"),
    [
        (b"not json", "the body is not valid JSON"),
        (b"[" * 5000, "the body is not valid JSON"),
        (b"[1]", "the body must be a JSON object"),
    ],
)
def test_a_body_must_be_a_json_object(data: bytes, details: str) -> None:
    assert rejection(api.decode_body, data).details == details
    assert api.decode_body(b'{"query": "q"}') == {"query": "q"}


def test_the_firecrawl_answer_numbers_web_hits_from_1() -> None:
    hits = [Hit(f"https://a.example/{i}", f"T{i}", f"S{i}", 1.0, "searxng") for i in (1, 2)]
    assert api.firecrawl_answer(response(*hits)) == {
        "success": True,
        "data": {
            "web": [
                {"url": "https://a.example/1", "title": "T1", "description": "S1", "position": 1},
                {"url": "https://a.example/2", "title": "T2", "description": "S2", "position": 2},
            ]
        },
    }


def test_the_native_answer_is_the_envelope() -> None:
    answer = api.native_answer(response())
    assert answer["sizes"] == {
        "results": 0,
        "sources_ok": ["searxng"],
        "sources_failed": ["tavily"],
    }
    assert answer["warnings"] == ["tavily: timeout"]


@pytest.mark.parametrize("stored", [False, True], ids=["fresh", "cache hit"])
def test_the_answer_bodies_are_the_answers_as_json(stored: bool) -> None:
    hits = (
        Hit("https://a.example/1", "Tï", "S1", 1.5, "searxng", published="2026-01-02"),
        Hit("https://b.example/2", 'T"2', "S\n2", 0.25, "tavily", engines=2),
    )
    found = response(*hits)._replace(stored=hits if stored else None)
    for _ in range(2):  # the second time from the memo when the hits are stored
        assert api.firecrawl_body(found) == wire.json_body(api.firecrawl_answer(found))
        assert api.native_body(found) == wire.json_body(api.native_answer(found))


def test_a_cache_hit_is_encoded_once_per_stored_entry() -> None:
    encoded = api.EncodedHits(entries=2)
    first = (Hit("https://a.example/", "A", "", 1.0, "searxng"),)
    second = (Hit("https://b.example/", "B", "", 1.0, "searxng"),)
    hit = response(*first)._replace(stored=first)
    before = encoded.web(hit)
    assert encoded.web(hit) is before
    other = response(*second)._replace(stored=second)
    assert b"b.example" in encoded.web(other) and b"a.example" not in encoded.web(other)
    fresh = response(*first)
    assert encoded.web(fresh) == encoded.web(fresh) and encoded.web(fresh) is not encoded.web(fresh)
    encoded.native(hit), encoded.native(other)  # past the bound: the oldest is forgotten
    again = encoded.web(hit)
    assert again == before and again is not before


def test_errors_carry_success_false_only_on_the_firecrawl_route() -> None:
    exc = Rejected(
        HTTPStatus.UNPROCESSABLE_ENTITY, "no search results", "none", warnings=["x: 429"]
    )
    native = {"error": "no search results", "details": "none", "warnings": ["x: 429"]}
    assert api.error_payload(exc, route="/v1/search") == native
    assert api.error_payload(exc, route="/v2/search") == {"success": False, **native}


def test_error_headers_ask_for_a_bearer_token_and_name_the_allowed_methods() -> None:
    unauthorized = Rejected(HTTPStatus.UNAUTHORIZED, "missing or invalid bearer token")
    assert api.error_headers(unauthorized, route="/v1/search") == {
        "WWW-Authenticate": 'Bearer realm="sift"'
    }
    wrong = Rejected(HTTPStatus.METHOD_NOT_ALLOWED, "method not allowed")
    assert api.error_headers(wrong, route="/healthz") == {"Allow": "GET"}
    assert api.error_headers(Rejected(HTTPStatus.NOT_FOUND, "not found"), route="/x") == {}


def test_health_is_degraded_when_no_source_is_enabled() -> None:
    searxng = {"state": "ok", "recent": 0, "success_rate": None, "p50_ms": None, "p90_ms": None}
    assert api.health_answer([], sources={"searxng": searxng}, store="sqlite") == {
        "status": "ok",
        "degraded": [],
        "sources": {"searxng": searxng},
        "store": "sqlite",
        "version": __version__,
    }
    assert api.health_answer(["tavily: daily cap"], sources={}, store="redis")["degraded"] == [
        "search: no source enabled",
        "tavily: daily cap",
    ]


def test_unknown_routes_are_labelled_other() -> None:
    assert [api.route_label(r) for r in ("/v2/search", "/v2/search/x")] == ["/v2/search", "other"]
