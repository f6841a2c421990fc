"""The gateway's routes, statuses and auth, over real sockets against loopback fake upstreams."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bodykit import searxng_body
from gatewaykit import FakeUpstream, Gateway, call, gateway, raw_exchange, status_of, write_config

from siftlib.cli import main
from siftlib.config import FetchConfig
from siftlib.errors import ConfigError
from siftlib.gateway.server import check_open_mode, split_listen

TOKEN = "tok-ops-9f8e7d"
FORBIDDEN_HIT_KEYS = {"markdown", "html", "rawHtml", "links", "screenshot", "summary", "json"}
HIT_KEYS = {"url", "title", "snippet", "score", "source"}
WEB_KEYS = {"url", "title", "description", "position"}
NOT_FOUND = "this gateway serves /v1/search, /v2/search, /v1/fetch, /v2/scrape, /healthz, /metrics"


@pytest.fixture
def gw(tmp_path: Path, searxng: FakeUpstream, tavily: FakeUpstream) -> Iterator[Gateway]:
    with gateway(
        tmp_path, searxng=searxng.url, tavily=tavily.url + "/search", callers={"ops": TOKEN}
    ) as running:
        yield running


def upstream_calls(*fakes: FakeUpstream) -> int:
    return sum(len(fake.calls) for fake in fakes)


# --- POST /v1/search ------------------------------------------------------------------------


def test_v1_search_returns_the_native_envelope_of_fused_hits(
    gw: Gateway, searxng: FakeUpstream, tavily: FakeUpstream
) -> None:
    reply = call(gw.url, "POST", "/v1/search", {"query": "sqlite wal mode", "k": 4}, token=TOKEN)
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "application/json"
    body = reply.json
    assert set(body) == {"results", "warnings", "sizes", "timings", "cached"}
    assert body["cached"] is False
    assert body["sizes"] == {
        "results": len(body["results"]),
        "sources_ok": ["searxng", "tavily"],
        "sources_failed": [],
    }
    assert 0 < len(body["results"]) <= 4
    for hit in body["results"]:
        assert HIT_KEYS <= set(hit) <= HIT_KEYS | {"published", "engines"}
        assert hit["source"] in ("searxng", "tavily")
    scores = [hit["score"] for hit in body["results"]]
    assert scores == sorted(scores, reverse=True)
    assert set(body["timings"]) == {"search_ms", "rerank_ms"}
    assert upstream_calls(searxng, tavily) == 2


def test_v1_repeat_is_a_cache_hit_without_upstream_calls(
    gw: Gateway, searxng: FakeUpstream, tavily: FakeUpstream
) -> None:
    first = call(gw.url, "POST", "/v1/search", {"query": "sqlite wal mode"}, token=TOKEN)
    second = call(gw.url, "POST", "/v1/search", {"query": "  SQLite   WAL mode "}, token=TOKEN)
    assert (first.status, second.status) == (200, 200)
    assert second.json["cached"] is True
    assert second.json["results"] == first.json["results"]
    assert upstream_calls(searxng, tavily) == 2


def test_v1_k_defaults_to_search_k(tmp_path: Path) -> None:
    many = FakeUpstream(searxng_body(30))
    try:
        with gateway(tmp_path, searxng=many.url) as running:
            reply = call(running.url, "POST", "/v1/search", {"query": "pages"})
            assert reply.status == 200
            assert len(reply.json["results"]) == 8
            reply = call(running.url, "POST", "/v1/search", {"query": "pages", "k": 50})
            assert len(reply.json["results"]) == 30
    finally:
        many.close()


@pytest.mark.parametrize("k", [0, 51, -1, "5", True, 2.5, [3], {"k": 1}])
def test_v1_k_outside_1_to_50_or_not_an_integer_is_400(
    gw: Gateway, searxng: FakeUpstream, tavily: FakeUpstream, k: object
) -> None:
    reply = call(gw.url, "POST", "/v1/search", {"query": "sqlite", "k": k}, token=TOKEN)
    assert reply.status == 400
    assert reply.json["error"] == "invalid query"
    assert "k must be" in reply.json["details"]
    assert upstream_calls(searxng, tavily) == 0


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"query": None},
        {"query": 42},
        {"query": ["sqlite"]},
        {"query": "   \t\n "},
        {"query": "x" * 1501},
        {"query": "sqlite", "rerank": "yes"},
        {"query": "sqlite", "digest": 1},
        {"query": "sqlite", "question": 7},
    ],
)
def test_v1_invalid_query_or_types_is_400(
    gw: Gateway, searxng: FakeUpstream, tavily: FakeUpstream, body: dict[str, Any]
) -> None:
    reply = call(gw.url, "POST", "/v1/search", body, token=TOKEN)
    assert reply.status == 400
    assert reply.json["error"] == "invalid query"
    assert upstream_calls(searxng, tavily) == 0


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b'"sqlite"', b"\xff\xfe", b"[" * 5000])
def test_a_body_that_is_not_a_json_object_is_400(gw: Gateway, raw: bytes) -> None:
    reply = call(gw.url, "POST", "/v1/search", raw, token=TOKEN)
    assert reply.status == 400
    assert reply.json["error"] == "invalid query"


def test_v1_query_of_1500_characters_is_accepted(gw: Gateway) -> None:
    reply = call(gw.url, "POST", "/v1/search", {"query": "w" * 1500}, token=TOKEN)
    assert reply.status == 200


def test_v1_question_is_ignored_and_digest_adds_a_warning(gw: Gateway) -> None:
    plain = call(gw.url, "POST", "/v1/search", {"query": "sqlite wal"}, token=TOKEN).json
    asked = call(
        gw.url,
        "POST",
        "/v1/search",
        {"query": "sqlite wal", "question": "which mode is faster?", "digest": True, "x": 1},
        token=TOKEN,
    )
    assert asked.status == 200
    assert asked.json["results"] == plain["results"]
    assert "digest: not supported" in asked.json["warnings"]
    assert "digest: not supported" not in plain["warnings"]


def test_v1_rerank_false_concatenates_in_source_order(gw: Gateway) -> None:
    reply = call(
        gw.url, "POST", "/v1/search", {"query": "wal", "rerank": False, "k": 50}, token=TOKEN
    )
    assert reply.status == 200
    sources = [hit["source"] for hit in reply.json["results"]]
    assert sources == sorted(sources, key=["searxng", "tavily"].index)
    assert "tavily" in sources


# --- POST /v2/search (Firecrawl) ------------------------------------------------------------


def test_v2_search_answers_exactly_the_firecrawl_shape(gw: Gateway) -> None:
    native = call(gw.url, "POST", "/v1/search", {"query": "sqlite wal", "k": 5}, token=TOKEN).json
    reply = call(gw.url, "POST", "/v2/search", {"query": "sqlite wal", "limit": 5}, token=TOKEN)
    assert reply.status == 200
    body = reply.json
    assert set(body) == {"success", "data"}
    assert body["success"] is True
    assert set(body["data"]) == {"web"}
    web = body["data"]["web"]
    assert [hit["position"] for hit in web] == list(range(1, len(web) + 1))
    for hit in web:
        assert WEB_KEYS <= set(hit) <= WEB_KEYS | {"published", "engines"}
        assert not FORBIDDEN_HIT_KEYS & set(hit)
        assert isinstance(hit["url"], str)
    assert [(h["url"], h["title"], h["description"]) for h in web] == [
        (h["url"], h["title"], h["snippet"]) for h in native["results"]
    ]


@pytest.mark.parametrize(
    ("limit", "expected"),
    [(None, 5), (1, 1), (7, 7), (20, 20), (21, 20), (100, 20), (0, 1), (-4, 1)],
)
def test_v2_limit_defaults_to_5_and_is_clamped_to_1_to_20(
    tmp_path: Path, limit: int | None, expected: int
) -> None:
    many = FakeUpstream(searxng_body(40))
    body: dict[str, object] = {"query": "pages", "origin": "python-sdk@4.17.0"}
    if limit is not None:
        body["limit"] = limit
    try:
        with gateway(tmp_path, searxng=many.url) as running:
            reply = call(running.url, "POST", "/v2/search", body)
            assert reply.status == 200
            assert len(reply.json["data"]["web"]) == expected
    finally:
        many.close()


def test_v2_null_limit_means_the_default(gw: Gateway) -> None:
    reply = call(gw.url, "POST", "/v2/search", {"query": "sqlite", "limit": None}, token=TOKEN)
    assert reply.status == 200


@pytest.mark.parametrize(
    "body",
    [
        {"query": "sqlite", "limit": "5"},
        {"query": "sqlite", "limit": 5.0},
        {"query": "sqlite", "limit": True},
        {"query": "sqlite", "limit": [5]},
        {"limit": 5},
        {"query": None},
        {"query": 12},
        {"query": ""},
        {"query": "q" * 1501},
    ],
)
def test_v2_bad_limit_or_query_is_400_with_success_false(
    gw: Gateway, searxng: FakeUpstream, body: dict[str, Any]
) -> None:
    reply = call(gw.url, "POST", "/v2/search", body, token=TOKEN)
    assert reply.status == 400
    assert reply.json["success"] is False
    assert reply.json["error"] == "invalid query"
    assert upstream_calls(searxng) == 0


def test_v2_ignores_unknown_fields(gw: Gateway) -> None:
    body = {
        "query": "sqlite wal",
        "limit": 3,
        "origin": "python-sdk@4.17.0",
        "sources": ["web", "news", "images"],
        "categories": ["github"],
        "tbs": "qdr:d",
        "location": "Germany",
        "timeout": 300000,
        "ignoreInvalidURLs": True,
        "scrapeOptions": {"formats": ["markdown", "html"], "onlyMainContent": True},
        "integration": "hermes",
    }
    reply = call(gw.url, "POST", "/v2/search", body, token=TOKEN)
    assert reply.status == 200
    web = reply.json["data"]["web"]
    assert len(web) == 3
    assert all(WEB_KEYS <= set(hit) <= WEB_KEYS | {"published", "engines"} for hit in web)


def test_empty_results_are_a_successful_search(tmp_path: Path) -> None:
    empty = FakeUpstream(b'{"query": "x", "results": []}')
    try:
        with gateway(tmp_path, searxng=empty.url) as running:
            v2 = call(running.url, "POST", "/v2/search", {"query": "nothing matches"})
            v1 = call(running.url, "POST", "/v1/search", {"query": "nothing matches"})
    finally:
        empty.close()
    assert (v2.status, v2.json) == (200, {"success": True, "data": {"web": []}})
    assert v1.status == 200
    assert v1.json["results"] == []


def test_no_source_enabled_is_422_on_both_routes(tmp_path: Path) -> None:
    with gateway(tmp_path) as running:
        v1 = call(running.url, "POST", "/v1/search", {"query": "sqlite"})
        v2 = call(running.url, "POST", "/v2/search", {"query": "sqlite"})
        health = call(running.url, "GET", "/healthz").json
    assert v1.status == 422
    assert v1.json["error"] == "no search results"
    assert v2.status == 422
    assert (v2.json["success"], v2.json["error"]) == (False, "no search results")
    assert health == {**health, "status": "degraded", "degraded": ["search: no source enabled"]}


@pytest.mark.parametrize("upstream_status", [500, 502, 503, 429, 404])
def test_every_source_failing_is_422_never_502(tmp_path: Path, upstream_status: int) -> None:
    broken = FakeUpstream(b'{"error": "boom"}', status=upstream_status)
    try:
        with gateway(tmp_path, searxng=broken.url, tavily=broken.url + "/search") as running:
            v1 = call(running.url, "POST", "/v1/search", {"query": "sqlite"})
            v2 = call(running.url, "POST", "/v2/search", {"query": "sqlite"})
    finally:
        broken.close()
    assert (v1.status, v2.status) == (422, 422)
    assert v1.json["error"] == "no search results"
    assert v1.json["warnings"] == [f"searxng: {upstream_status}", f"tavily: {upstream_status}"]
    assert "boom" not in v1.raw.decode()
    assert v2.json["success"] is False


def test_one_source_failing_is_a_200_with_a_warning(tmp_path: Path, searxng: FakeUpstream) -> None:
    broken = FakeUpstream(b"bad gateway", status=502)
    try:
        with gateway(tmp_path, searxng=searxng.url, tavily=broken.url + "/search") as running:
            reply = call(running.url, "POST", "/v1/search", {"query": "sqlite wal"})
    finally:
        broken.close()
    assert reply.status == 200
    assert "tavily: 502" in reply.json["warnings"]
    assert reply.json["sizes"]["sources_failed"] == ["tavily"]


def test_an_internal_error_is_a_plain_500_without_a_traceback(
    tmp_path: Path, searxng: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    class Exploding:
        def __init__(self, real: Any) -> None:
            self.metrics = real.metrics

        def search(self, request: object, **options: object) -> object:
            raise RuntimeError("upstream said: secret text at http://internal.example/x")

    with gateway(tmp_path, searxng=searxng.url, searcher_factory=Exploding) as running:
        v1 = call(running.url, "POST", "/v1/search", {"query": "sqlite"})
        v2 = call(running.url, "POST", "/v2/search", {"query": "sqlite"})
    why = "the gateway could not complete the request"
    assert (v1.status, v1.json) == (500, {"error": "internal error", "details": why})
    assert (v2.status, v2.json) == (
        500,
        {"success": False, "error": "internal error", "details": why},
    )
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "RuntimeError" in logged
    assert "secret text" not in logged
    assert "internal.example" not in logged


# --- routes, methods, bodies ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/"), ("POST", "/v1/scrape"), ("POST", "/v2/crawl"), ("GET", "/v2/search/x")],
)
def test_unknown_paths_are_404(gw: Gateway, method: str, path: str) -> None:
    reply = call(gw.url, method, path, token=TOKEN)
    assert reply.status == 404
    firecrawl = {"success": False} if path.startswith("/v2/") else {}
    assert reply.json == {**firecrawl, "error": "not found", "details": NOT_FOUND}


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("GET", "/v1/search", "POST"),
        ("PUT", "/v2/search", "POST"),
        ("POST", "/healthz", "GET"),
        ("DELETE", "/metrics", "GET"),
    ],
)
def test_wrong_methods_are_405_with_allow(gw: Gateway, method: str, path: str, allow: str) -> None:
    reply = call(gw.url, method, path, token=TOKEN)
    assert reply.status == 405
    assert reply.headers["Allow"] == allow


def test_an_unknown_method_is_405_not_501(gw: Gateway) -> None:
    raw = raw_exchange(gw.port, b"BREW /v1/search HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status_of(raw) == 405


@pytest.mark.parametrize(("path", "allow"), [("/v1/search", "POST"), ("/healthz", "GET")])
def test_an_unknown_method_on_a_route_names_the_allowed_ones(
    gw: Gateway, path: str, allow: str
) -> None:
    request = b"BREW %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path.encode()
    raw = raw_exchange(gw.port, request)
    head = raw.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    assert head[0] == "HTTP/1.1 405 Method Not Allowed"
    assert f"Allow: {allow}" in head


def test_an_unknown_method_on_an_unknown_path_is_404(gw: Gateway) -> None:
    raw = raw_exchange(gw.port, b"BREW /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status_of(raw) == 404
    assert json.loads(raw.partition(b"\r\n\r\n")[2]) == {"error": "not found", "details": NOT_FOUND}


def test_an_unknown_method_keeps_the_connection_for_the_next_request(gw: Gateway) -> None:
    raw = raw_exchange(
        gw.port,
        b"BREW /nope HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    assert raw.count(b"HTTP/1.1 404 ") == 1 and raw.count(b"HTTP/1.1 200 OK") == 1


def test_the_query_string_does_not_change_the_route(gw: Gateway) -> None:
    reply = call(gw.url, "POST", "/v2/search?url=http://x", {"query": "sqlite"}, token=TOKEN)
    assert reply.status == 200


def test_a_body_over_64_kib_is_413_and_not_searched(gw: Gateway, searxng: FakeUpstream) -> None:
    body = json.dumps({"query": "sqlite", "pad": "x" * 70000}).encode()
    reply = call(gw.url, "POST", "/v1/search", body, token=TOKEN)
    assert reply.status == 413
    assert upstream_calls(searxng) == 0


def test_a_declared_length_over_the_cap_is_413_before_reading(gw: Gateway) -> None:
    head = (
        b"POST /v2/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
        b"Content-Length: 99999999999999999999\r\n\r\n"
    )
    raw = raw_exchange(gw.port, head)
    assert status_of(raw) == 413
    assert b'"success": false' in raw


@pytest.mark.parametrize(
    "lengths",
    [
        [b"abc"],
        [b"-5"],
        [b"5, 5"],
        [b"+17"],
        [b"1e3"],
        [b""],
        [b"17", b"17"],
        [b"17", b"18"],
    ],
)
def test_malformed_negative_or_duplicated_content_length_is_400(
    gw: Gateway, searxng: FakeUpstream, lengths: list[bytes]
) -> None:
    body = b'{"query": "sqlite"}'  # 19 bytes
    head = (
        b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
    )
    head += b"".join(b"Content-Length: " + value + b"\r\n" for value in lengths)
    raw = raw_exchange(gw.port, head + b"\r\n" + body)
    assert status_of(raw) == 400
    assert b"Traceback" not in raw
    assert upstream_calls(searxng) == 0


def test_a_post_without_content_length_is_400(gw: Gateway, searxng: FakeUpstream) -> None:
    raw = raw_exchange(
        gw.port,
        b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\n\r\n",
    )
    assert status_of(raw) == 400
    assert upstream_calls(searxng) == 0


def test_a_chunked_body_is_400(gw: Gateway, searxng: FakeUpstream) -> None:
    raw = raw_exchange(
        gw.port,
        b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n13\r\n" + b'{"query": "sqlite"}' + b"\r\n0\r\n\r\n",
    )
    assert status_of(raw) == 400
    assert upstream_calls(searxng) == 0


@pytest.mark.parametrize(
    "field",
    [
        b"Content-Length : 19",  # space before the colon: a smuggling vector
        b" folded: continuation",  # obs-fold
        b"NoColonHere",
        b"Bad Name: x",
        b"X-Nul: a\x00b",
        b"X-Cr: a\rb",
        b": no name",
    ],
)
def test_a_malformed_header_field_is_400_with_a_sentence(
    gw: Gateway, searxng: FakeUpstream, field: bytes
) -> None:
    body = b'{"query": "sqlite"}'
    raw = raw_exchange(
        gw.port,
        b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
        b"Content-Length: 19\r\n" + field + b"\r\n\r\n" + body,
    )
    assert status_of(raw) == 400
    assert json.loads(raw.split(b"\r\n\r\n", 1)[1]) == {
        "error": "bad request",
        "details": "a header field is malformed",
    }
    assert upstream_calls(searxng) == 0


@pytest.mark.parametrize(
    ("fields", "details"),
    [
        (b"".join(b"X-F%d: v\r\n" % i for i in range(101)), "too many header fields"),
        (b"X-Long: " + b"v" * 70_000 + b"\r\n", "the request head is over 16 KiB"),
    ],
)
def test_too_many_or_too_long_header_fields_are_431(
    gw: Gateway, fields: bytes, details: str
) -> None:
    raw = raw_exchange(gw.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + fields + b"\r\n")
    assert status_of(raw) == 431
    assert json.loads(raw.split(b"\r\n\r\n", 1)[1])["details"] == details


@pytest.mark.parametrize(
    ("line", "status"),
    [
        (b"GET /healthz", 400),  # HTTP/0.9 is not spoken
        (b"GET /healthz HTTP/x", 400),
        (b"GET /healthz HTTP/1.1 extra", 400),
        (b"GET /healthz HTTP/1.10", 400),
        (b"GET /healthz HTTP/2.0", 505),
    ],
)
def test_a_malformed_request_line_is_refused(gw: Gateway, line: bytes, status: int) -> None:
    raw = raw_exchange(gw.port, line + b"\r\nHost: x\r\n\r\n")
    assert status_of(raw) == status
    assert b"Connection: close" in raw


def test_an_http_2_request_to_a_firecrawl_route_gets_a_firecrawl_error(gw: Gateway) -> None:
    raw = raw_exchange(gw.port, b"POST /v2/search HTTP/2.0\r\nHost: x\r\n\r\n")
    assert status_of(raw) == 505
    assert json.loads(raw.split(b"\r\n\r\n", 1)[1])["success"] is False


def test_a_stray_blank_line_instead_of_a_request_closes_without_an_answer(gw: Gateway) -> None:
    assert raw_exchange(gw.port, b"\r\n") == b""


def test_field_names_are_case_insensitive_values_trimmed_and_bare_lf_accepted(
    gw: Gateway,
) -> None:
    body = b'{"query": "sqlite"}'
    raw = raw_exchange(
        gw.port,
        b"POST /v1/search HTTP/1.1\nhost: x\ncontent-type: Application/JSON; charset=utf-8\n"
        b"AUTHORIZATION: \t Bearer " + TOKEN.encode() + b" \n"
        b"content-length:19\nconnection: close\n\n" + body,
    )
    assert status_of(raw) == 200
    assert json.loads(raw.split(b"\r\n\r\n", 1)[1])["results"]


def test_http_1_0_closes_unless_it_asks_for_keep_alive(gw: Gateway) -> None:
    import socket

    plain = raw_exchange(gw.port, b"GET /healthz HTTP/1.0\r\n\r\n")  # returns once closed
    assert status_of(plain) == 200
    assert b"Connection: close" in plain
    with socket.create_connection(("127.0.0.1", gw.port), timeout=30) as sock:
        for _ in range(2):  # the second request is answered on the same connection
            sock.sendall(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            answer = b""
            while not answer.endswith(b"}\n"):
                answer += sock.recv(65536)
            assert status_of(answer) == 200


def test_a_body_shorter_than_declared_is_400_and_never_searched(
    gw: Gateway, searxng: FakeUpstream
) -> None:
    head = (
        b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
        b"Content-Length: 100\r\n\r\n"
    )
    # The client closes its side after 19 of 100 bytes: the gateway must not search the prefix.
    raw = raw_exchange(gw.port, head + b'{"query": "sqlite"}', shut_write=True)
    assert status_of(raw) == 400
    assert upstream_calls(searxng) == 0


def test_keep_alive_serves_several_requests_on_one_connection(gw: Gateway) -> None:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
    try:
        statuses = []
        for path, body in [("/v1/search", {"query": "a"}), ("/v2/search", {"query": "b"})] * 2:
            headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
            conn.request("POST", path, json.dumps(body), headers)
            response = conn.getresponse()
            response.read()
            statuses.append(response.status)
            assert response.getheader("Connection") != "close"
        conn.request("GET", "/healthz")
        health = conn.getresponse()
        statuses.append(health.status)
    finally:
        conn.close()
    assert statuses == [200] * 5


# --- auth -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/search", "/v2/search"])
@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Bearer wrong-token",
        f"Basic {TOKEN}",
        f"Bearer {TOKEN}x",
        TOKEN,
    ],
)
def test_a_missing_or_wrong_token_is_401_and_searches_nothing(
    gw: Gateway, searxng: FakeUpstream, path: str, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    reply = call(gw.url, "POST", path, {"query": "sqlite"}, headers=headers)
    assert reply.status == 401
    assert reply.headers["WWW-Authenticate"].startswith("Bearer")
    assert TOKEN not in reply.raw.decode()
    assert upstream_calls(searxng) == 0


def test_metrics_needs_a_token_and_healthz_does_not(gw: Gateway) -> None:
    assert call(gw.url, "GET", "/metrics").status == 401
    assert call(gw.url, "GET", "/metrics", token="nope").status == 401
    assert call(gw.url, "GET", "/metrics", token=TOKEN).status == 200
    assert call(gw.url, "GET", "/healthz").status == 200


def test_each_caller_is_named_by_its_token(tmp_path: Path, searxng: FakeUpstream) -> None:
    callers = {"alpha": "tok-alpha-1", "beta": "tok-beta-2"}
    with gateway(tmp_path, searxng=searxng.url, callers=callers) as running:
        assert (
            call(running.url, "POST", "/v1/search", {"query": "a"}, token="tok-alpha-1").status
            == 200
        )
        assert (
            call(running.url, "POST", "/v1/search", {"query": "b"}, token="tok-beta-2").status
            == 200
        )
        assert (
            call(running.url, "POST", "/v1/search", {"query": "c"}, token="tok-beta-2").status
            == 200
        )
        metrics = call(running.url, "GET", "/metrics", token="tok-alpha-1").json
    assert metrics["search_queries"] == {
        "caller=alpha,source=searxng": 1,
        "caller=beta,source=searxng": 2,
    }


def test_open_mode_serves_everyone_as_local_on_loopback(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    with gateway(tmp_path, searxng=searxng.url) as running:
        assert running.server.open_mode
        plain = call(running.url, "POST", "/v1/search", {"query": "a"})
        with_header = call(running.url, "POST", "/v2/search", {"query": "b"}, token="anything")
        metrics = call(running.url, "GET", "/metrics").json
    assert (plain.status, with_header.status) == (200, 200)
    assert metrics["search_queries"] == {"caller=local,source=searxng": 2}


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.1", "::1", "localhost"])
def test_open_mode_is_allowed_on_loopback(host: str) -> None:
    check_open_mode(host, {}, secret_env="/etc/sift/secret.env")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "sift.example.com"])
def test_open_mode_refuses_other_addresses(host: str) -> None:
    with pytest.raises(ConfigError, match="without caller tokens.*SIFT_TOKEN_<NAME>"):
        check_open_mode(host, {}, secret_env="/etc/sift/secret.env")
    check_open_mode(host, {"ops": "t"}, secret_env="/etc/sift/secret.env")


def test_sift_serve_refuses_to_listen_openly_beyond_loopback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f'[server]\nsecret_env = "{tmp_path / "secret.env"}"\ndb = "{tmp_path / "c.db"}"\n'
    )
    code = main(["serve", "--config", str(config), "--listen", "0.0.0.0:0"])
    assert code == 2
    err = capsys.readouterr().err
    assert "refusing to listen on 0.0.0.0 without caller tokens" in err
    assert not (tmp_path / "c.db").exists()


@pytest.mark.parametrize("listen", ["8787", "127.0.0.1", "127.0.0.1:http", ":8787", "h:-1"])
def test_a_malformed_listen_address_is_a_config_error(listen: str) -> None:
    with pytest.raises(ConfigError, match="HOST:PORT"):
        split_listen(listen)


def test_split_listen_reads_ipv4_ipv6_and_names() -> None:
    assert split_listen("127.0.0.1:8787") == ("127.0.0.1", 8787)
    assert split_listen("[::1]:8787") == ("::1", 8787)
    assert split_listen("localhost:0") == ("localhost", 0)


# --- health and metrics ---------------------------------------------------------------------


def test_healthz_is_ok_when_every_source_can_serve(gw: Gateway) -> None:
    reply = call(gw.url, "GET", "/healthz")
    assert reply.status == 200
    assert reply.json["status"] == "ok"
    assert reply.json["degraded"] == []


def test_healthz_reports_a_missing_key(
    tmp_path: Path, searxng: FakeUpstream, tavily: FakeUpstream
) -> None:
    with gateway(
        tmp_path, searxng=searxng.url, tavily=tavily.url + "/search", keys={"TAVILY_API_KEY": ""}
    ) as running:
        health = call(running.url, "GET", "/healthz").json
        search = call(running.url, "POST", "/v1/search", {"query": "sqlite wal"}).json
    assert health["status"] == "degraded"
    assert health["degraded"] == ["search.tavily: missing key"]
    assert health["sources"]["tavily"]["state"] == "missing key"
    assert "tvly" not in json.dumps(health)
    assert "tavily: missing key" in search["warnings"]
    assert search["sizes"]["sources_ok"] == ["searxng"]
    assert tavily.calls == []


def test_healthz_turns_degraded_while_a_source_keeps_failing_and_ok_when_it_recovers(
    tmp_path: Path, searxng: FakeUpstream, tavily: FakeUpstream
) -> None:
    searxng.status = 503
    with gateway(tmp_path, searxng=searxng.url, tavily=tavily.url + "/search") as running:
        assert call(running.url, "GET", "/healthz").json["status"] == "ok"
        for n in range(3):
            reply = call(running.url, "POST", "/v1/search", {"query": f"wal {n}"})
            assert reply.json["sizes"]["sources_failed"] == ["searxng"]
        failing = call(running.url, "GET", "/healthz").json
        searxng.status = 200
        assert call(running.url, "POST", "/v1/search", {"query": "wal 3"}).status == 200
        recovered = call(running.url, "GET", "/healthz").json
    assert failing["status"] == "degraded"
    assert failing["degraded"] == ["search.searxng: failing"]
    assert failing["sources"]["searxng"]["state"] == "failing"
    assert failing["sources"]["searxng"]["success_rate"] == 0.0
    assert failing["sources"]["tavily"]["state"] == "ok"
    assert failing["sources"]["tavily"]["success_rate"] == 1.0
    assert recovered["status"] == "ok" and recovered["degraded"] == []
    assert recovered["sources"]["searxng"] == {
        **recovered["sources"]["searxng"],
        "state": "ok",
        "recent": 4,
        "success_rate": 0.25,
    }
    p50, p90 = (recovered["sources"]["searxng"][key] for key in ("p50_ms", "p90_ms"))
    assert isinstance(p50, int) and isinstance(p90, int) and p50 <= p90


def test_healthz_reports_a_reached_daily_cap(tmp_path: Path, tavily: FakeUpstream) -> None:
    with gateway(tmp_path, tavily=tavily.url + "/search", tavily_cap=1) as running:
        before = call(running.url, "GET", "/healthz").json
        assert call(running.url, "POST", "/v1/search", {"query": "one"}).status == 200
        after = call(running.url, "GET", "/healthz").json
        capped = call(running.url, "POST", "/v1/search", {"query": "two"})
        metrics = call(running.url, "GET", "/metrics").json
    assert before["status"] == "ok"
    assert after == {**after, "status": "degraded", "degraded": ["search.tavily: daily cap"]}
    assert capped.status == 422
    assert metrics["search_capped"]["source=tavily"] == 1
    assert metrics["search_daily_credits"]["source=tavily"] == 1
    assert len(tavily.calls) == 1


def test_metrics_counts_queries_credits_and_cache(gw: Gateway) -> None:
    for _ in range(2):
        assert (
            call(gw.url, "POST", "/v2/search", {"query": "sqlite wal"}, token=TOKEN).status == 200
        )
    metrics = call(gw.url, "GET", "/metrics", token=TOKEN).json
    assert metrics["search_queries"] == {
        "caller=ops,source=searxng": 1,
        "caller=ops,source=tavily": 1,
    }
    assert metrics["search_cache_hit"] == 1
    assert metrics["search_cache_miss"] == 1
    assert metrics["search_credits"] == {"caller=ops,source=tavily": 1}
    assert metrics["http_responses"]["route=/v2/search,status=200"] == 2


def test_the_gateway_listens_on_ipv6_loopback(tmp_path: Path, searxng: FakeUpstream) -> None:
    import http.client
    import threading

    from siftlib.config import Secrets, load_config
    from siftlib.gateway.server import GatewayServer
    from siftlib.search.pipeline import Searcher

    config = load_config(str(write_config(tmp_path, searxng=searxng.url)))
    searcher = Searcher(config, Secrets({}, environ={}))
    server = GatewayServer(("::1", 0), searcher, callers={})
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        conn = http.client.HTTPConnection("::1", server.server_port, timeout=30)
        body = json.dumps({"query": "sqlite wal"})
        conn.request("POST", "/v2/search", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        body = json.loads(response.read())
        conn.close()
    finally:
        server.shutdown()
        server.server_close()
        searcher.close()
        thread.join(30)
    assert response.status == 200
    assert body["success"] is True


@pytest.mark.parametrize("listen", ["nonsense", "127.0.0.1:http"])
def test_sift_serve_with_a_malformed_listen_address_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listen: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[server]\ndb = "{tmp_path / "c.db"}"\n')
    assert main(["serve", "--config", str(config), "--listen", listen]) == 2
    assert "is not HOST:PORT" in capsys.readouterr().err


def test_sift_serve_on_a_busy_port_exits_1_with_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    config = tmp_path / "config.toml"
    config.write_text(f'[server]\ndb = "{tmp_path / "c.db"}"\n')
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        code = main(["serve", "--config", str(config), "--listen", f"127.0.0.1:{port}"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"sift serve: cannot listen on 127.0.0.1:{port}: Address already in use" in err
    assert "Traceback" not in err


def test_restricted_callers_never_share_cache_entries_with_the_fleet(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    callers = {"ops": "tok-ops", "vault": "tok-vault"}
    with gateway(tmp_path, searxng=searxng.url, callers=callers, restricted=("vault",)) as gw:

        def cached(token: str) -> bool:
            reply = call(gw.url, "POST", "/v1/search", {"query": "sqlite wal"}, token=token)
            assert reply.status == 200
            return bool(reply.json["cached"])

        assert [cached("tok-ops"), cached("tok-vault"), cached("tok-vault"), cached("tok-ops")] == [
            False,
            False,
            True,
            True,
        ]
    assert len(searxng.calls) == 2


def test_metrics_show_a_restricted_callers_work_only_to_itself(
    tmp_path: Path, searxng: FakeUpstream, tavily: FakeUpstream
) -> None:
    callers = {"ops": "tok-ops", "vault": "tok-vault", "cellar": "tok-cellar"}
    restricted = ("vault", "cellar")
    with gateway(
        tmp_path,
        searxng=searxng.url,
        tavily=tavily.url + "/search",
        callers=callers,
        restricted=restricted,
    ) as gw:
        for token, query in [("tok-vault", "a"), ("tok-vault", "b"), ("tok-cellar", "c")]:
            assert call(gw.url, "POST", "/v1/search", {"query": query}, token=token).status == 200
        assert call(gw.url, "POST", "/v1/search", {"query": "d"}, token="tok-ops").status == 200
        seen = {name: call(gw.url, "GET", "/metrics", token=f"tok-{name}").json for name in callers}
    assert seen["ops"]["search_queries"] == {
        "caller=ops,source=searxng": 1,
        "caller=ops,source=tavily": 1,
        "caller=restricted": 6,
    }
    assert seen["ops"]["search_credits"] == {"caller=ops,source=tavily": 1, "caller=restricted": 3}
    assert "vault" not in json.dumps(seen["ops"]) and "cellar" not in json.dumps(seen["ops"])
    assert seen["vault"]["search_queries"] == {
        "caller=ops,source=searxng": 1,
        "caller=ops,source=tavily": 1,
        "caller=restricted": 2,
        "caller=vault,source=searxng": 2,
        "caller=vault,source=tavily": 2,
    }
    assert "cellar" not in json.dumps(seen["vault"])
    assert seen["cellar"]["search_credits"] == {
        "caller=cellar,source=tavily": 1,
        "caller=ops,source=tavily": 1,
        "caller=restricted": 2,
    }
    # Metrics without a caller label count the fleet's work only: they would tell the
    # restricted callers' apart from nothing.
    assert seen["ops"]["search_cache_miss"] == 1
    assert seen["ops"]["http_responses"] == {"route=/v1/search,status=200": 1}


def test_a_restricted_callers_fetches_stay_out_of_caller_less_metrics(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    from fetchkit import PageServer, page

    callers = {"ops": "tok-ops", "vault": "tok-vault"}
    with PageServer({"/p": page(b"<p>a page of words</p>")}) as site:
        fetch = FetchConfig(allow=(site.allow,))
        with gateway(
            tmp_path, searxng=searxng.url, callers=callers, restricted=("vault",), fetch=fetch
        ) as gw:
            for url in (site.url + "/p", "http://10.1.2.3/", "http://db.corp.example/"):
                call(gw.url, "POST", "/v1/fetch", {"url": url}, token="tok-vault")
            seen = call(gw.url, "GET", "/metrics", token="tok-ops").json
    assert seen.get("fetch_bytes", 0) == 0
    assert seen.get("fetch_blocked", {}) == {}
    assert seen.get("http_responses", {}) == {}
    assert seen["fetch_requests"] == {"caller=restricted": 3}


def test_a_token_that_is_not_ascii_is_refused_cleanly(gw: Gateway, searxng: FakeUpstream) -> None:
    body = b'{"query": "sqlite"}'
    raw = raw_exchange(
        gw.port,
        b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer \xff\xfe\xc3\xa9\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body),
    )
    assert status_of(raw) == 401
    assert searxng.calls == []


def test_no_secret_reaches_health_metrics_or_errors(tmp_path: Path, searxng: FakeUpstream) -> None:
    keys = {"TAVILY_API_KEY": "tvly-zzsecret", "BRAVE_API_KEY": "brave-zzsecret"}
    broken = FakeUpstream(b'{"detail": "bad key tvly-zzsecret"}', status=401)
    try:
        with gateway(
            tmp_path,
            searxng=searxng.url,
            tavily=broken.url + "/search",
            callers={"ops": "tok-zzsecret"},
            keys=keys,
        ) as gw:
            replies = [
                call(gw.url, "POST", "/v1/search", {"query": "sqlite"}, token="tok-zzsecret"),
                call(gw.url, "POST", "/v2/search", {"query": ""}, token="tok-zzsecret"),
                call(gw.url, "POST", "/v2/search", {"query": "x"}, token="tok-zzsecretx"),
                call(gw.url, "GET", "/healthz"),
                call(gw.url, "GET", "/metrics", token="tok-zzsecret"),
            ]
    finally:
        broken.close()
    assert [r.status for r in replies] == [200, 400, 401, 200, 200]
    assert replies[0].json["warnings"] == ["tavily: 401"]
    for reply in replies:
        assert b"zzsecret" not in reply.raw
        assert broken.url.encode() not in reply.raw
