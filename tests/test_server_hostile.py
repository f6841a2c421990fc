"""Hostile queries and upstreams, end to end: the gateway over sockets, `sift search` in a process.

Each case once ended in a 500 or a traceback: a lone surrogate in the query, an upstream
answering `NaN`, `1e999` or 200 KB of nested brackets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gatewaykit import FakeUpstream, call, gateway, raw_exchange, write_config

REPO = Path(__file__).resolve().parent.parent
NESTED = b"[" * 100_000 + b"]" * 100_000


def strict_json(raw: bytes) -> object:
    """Decode JSON as a strict parser would: `NaN` and `Infinity` are refused."""

    def refuse(name: str) -> object:
        raise ValueError(f"{name} is not JSON")

    return json.loads(raw, parse_constant=refuse)


@pytest.fixture
def hostile_tavily(request: pytest.FixtureRequest) -> Iterator[FakeUpstream]:
    fake = FakeUpstream(request.param)
    yield fake
    fake.close()


@pytest.mark.parametrize(
    "hostile_tavily",
    [
        b'{"results": [{"url": "https://t.example/", "score": NaN}], "usage": {"credits": 1}}',
        b'{"results": [{"url": "https://t.example/", "score": 1e999}]}',
        b'{"results": [], "usage": {"credits": 1e999}}',
        b'{"results": [], "usage": {"credits": 1e30}}',
        NESTED,
    ],
    ids=["score-nan", "score-inf", "credits-inf", "credits-1e30", "nested"],
    indirect=True,
)
@pytest.mark.parametrize("route", ["/v1/search", "/v2/search"])
def test_a_hostile_upstream_is_a_warning_and_the_answer_stays_strict_json(
    tmp_path: Path, searxng: FakeUpstream, hostile_tavily: FakeUpstream, route: str
) -> None:
    with gateway(tmp_path, searxng=searxng.url, tavily=hostile_tavily.url + "/search") as gw:
        reply = call(gw.url, "POST", route, {"query": "sqlite wal", "limit": 10})
        metrics = call(gw.url, "GET", "/metrics")
    assert reply.status == 200
    body = strict_json(reply.raw)
    assert isinstance(body, dict)
    if route == "/v1/search":
        assert body["warnings"] == ["tavily: bad response"]
        assert {hit["source"] for hit in body["results"]} == {"searxng"}
    else:
        assert body["success"] is True and len(body["data"]["web"]) == 4
    # The 2xx answer was billed; with no usable `usage.credits` it counts one (search.md §5).
    assert metrics.json["search_daily_credits"]["source=tavily"] == 1


@pytest.mark.parametrize(
    "raw_query", [b'"wal \\ud800 mode"', b'"wal \xed\xa0\x80 mode"'], ids=["escaped", "utf8-bytes"]
)
@pytest.mark.parametrize("route", ["/v1/search", "/v2/search"])
def test_a_lone_surrogate_in_the_query_is_invalid_query_on_both_routes(
    tmp_path: Path, searxng: FakeUpstream, raw_query: bytes, route: str
) -> None:
    body = b'{"query": ' + raw_query + b"}"
    with gateway(tmp_path, searxng=searxng.url) as gw:
        reply = call(gw.url, "POST", route, body, headers={"Content-Type": "application/json"})
        again = raw_exchange(
            gw.port,
            b"POST " + route.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n" % (gw.port, len(body)) + body,
        )
    assert reply.status == 400
    assert reply.json["error"] == "invalid query"
    assert ("success" in reply.json) == (route == "/v2/search")
    assert again.startswith(b"HTTP/1.1 400 ")
    assert searxng.calls == []


def run_sift(*args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, str(REPO / "sift.py"), *args],
        cwd=REPO,
        capture_output=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_sift_search_keeps_the_good_hits_when_a_source_answers_deep_nesting(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    nested = FakeUpstream(NESTED)
    try:
        config = write_config(tmp_path, searxng=searxng.url, tavily=nested.url + "/search")
        (tmp_path / "secret.env").write_text("TAVILY_API_KEY=tvly-test-key\n")
        done = run_sift(
            "search", "sqlite wal", "--json", "--allow-private-upstreams", "--config", str(config)
        )
    finally:
        nested.close()
    assert b"Traceback" not in done.stderr
    assert done.returncode == 0, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["warnings"] == ["tavily: bad response"]
    assert envelope["sizes"]["sources_ok"] == ["searxng"]


def test_sift_search_with_a_query_that_is_not_utf8_exits_2(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    config = write_config(tmp_path, searxng=searxng.url)
    done = run_sift("search", b"wal \xed\xa0\x80 mode", "--config", str(config))
    assert b"Traceback" not in done.stderr
    assert done.returncode == 2
    # The last word; before it, the missing secret.env of write_config's config is warned about.
    assert done.stderr.decode().splitlines()[-1].startswith("sift search: invalid query")
    assert searxng.calls == []
