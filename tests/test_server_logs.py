"""What the gateway logs (search.md §8): one INFO line per search; no query, URL or secret."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from bodykit import fixture_bytes
from gatewaykit import FakeUpstream, call, gateway

from siftlib.logs import configure_logging

SEARCH_LINE = re.compile(
    r"search caller=(\w+) q_len=(\d+) sources=([a-z_,]+|-) n=(\d+) cache=(hit|miss) rerank_ms=(\d+)"
)
TOKENS = {"ops": "tok-ops-a1b2c3d4", "vault": "tok-vault-e5f6a7b8"}
KEYS = {"TAVILY_API_KEY": "tvly-key-0000secret", "BRAVE_API_KEY": "brave-key-1111secret"}


@pytest.fixture(autouse=True)
def serve_logging() -> None:
    """Configure logging as `sift serve` does (the conftest puts it back afterwards)."""
    configure_logging()


@pytest.fixture
def fakes() -> Iterator[dict[str, FakeUpstream]]:
    made = {
        "searxng": FakeUpstream(fixture_bytes("searxng/wal-typed-and-legacy.json")),
        "brave_llm": FakeUpstream(fixture_bytes("brave_llm/wal-generic-and-sources.json")),
        "tavily": FakeUpstream(fixture_bytes("tavily/wal-usage-unsorted.json")),
    }
    yield made
    for fake in made.values():
        fake.close()


def forbidden_texts(fakes: dict[str, FakeUpstream]) -> list[str]:
    """Everything no log line may carry: query words, hosts, URLs, keys, tokens, hit text."""
    return [
        "zebra",
        "quokka",
        "Zebra",
        "127.0.0.1",
        "http://",
        "https://",
        "sqlite.org",
        "example.org",
        "example.net",
        *(f":{fake.port}" for fake in fakes.values()),
        *KEYS.values(),
        *TOKENS.values(),
        "Bearer",
        "rollback journal",
        "readers continue",
        "Write-Ahead Logging",
        "checkpoint",
        "quota exceeded",
    ]


def test_one_info_line_per_search_and_nothing_sensitive(
    tmp_path: Path, fakes: dict[str, FakeUpstream], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with gateway(
        tmp_path,
        searxng=fakes["searxng"].url,
        brave_llm=fakes["brave_llm"].url + "/res/v1/llm/context",
        tavily=fakes["tavily"].url + "/search",
        callers=TOKENS,
        keys=KEYS,
        restricted=("vault",),
    ) as gw:
        caplog.clear()
        ops, vault = TOKENS["ops"], TOKENS["vault"]
        q1, q2 = "zebra quokka wal mode", "Zebra   quokka checkpoint starvation"
        assert call(gw.url, "POST", "/v1/search", {"query": q1, "k": 3}, token=ops).status == 200
        assert call(gw.url, "POST", "/v2/search", {"query": q2}, token=ops).status == 200
        assert call(gw.url, "POST", "/v1/search", {"query": q1, "k": 3}, token=ops).status == 200
        assert call(gw.url, "POST", "/v1/search", {"query": q1, "k": 3}, token=vault).status == 200
        assert call(gw.url, "POST", "/v1/search", {"query": q1, "k": 0}, token=ops).status == 400
        assert call(gw.url, "POST", "/v1/search", {"query": "  "}, token=ops).status == 400
        assert call(gw.url, "POST", "/v2/search", {"query": q1}, token="tok-wrong").status == 401
        assert (
            call(gw.url, "POST", f"/v2/search?q={quote(q1)}&key={ops}", {"query": q1}).status == 401
        )
        assert call(gw.url, "GET", f"/nowhere?q={quote(q1)}", token=ops).status == 404
        assert call(gw.url, "GET", "/metrics", token=ops).status == 200
        assert call(gw.url, "GET", "/healthz").status == 200
        records = list(caplog.records)

    search_lines = [r for r in records if r.levelno == logging.INFO]
    assert [r.name for r in search_lines] == ["sift"] * 4
    parsed = [SEARCH_LINE.fullmatch(r.getMessage()) for r in search_lines]
    assert all(parsed), [r.getMessage() for r in search_lines]
    assert [(m.group(1), m.group(2), m.group(5)) for m in parsed if m] == [
        ("ops", str(len(q1)), "miss"),
        ("ops", str(len(" ".join(q2.split()))), "miss"),
        ("ops", str(len(q1)), "hit"),
        ("vault", str(len(q1)), "miss"),  # restricted: never served the fleet's cache
    ]
    assert parsed[0] and parsed[0].group(3) == "searxng,brave_llm,tavily"
    assert all(r.levelno < logging.WARNING for r in records), [r.getMessage() for r in records]
    every_line = "\n".join(f"{r.name} {r.getMessage()}" for r in records)
    for text in forbidden_texts(fakes):
        assert text not in every_line, text


def test_restricted_callers_upstream_error_text_is_dropped(
    tmp_path: Path, fakes: dict[str, FakeUpstream], caplog: pytest.LogCaptureFixture
) -> None:
    refusing = FakeUpstream(
        b'{"detail": {"error": "quota exceeded for key tvly-key-0000secret at https://api.tavily.com"}}',
        status=429,
    )
    caplog.set_level(logging.DEBUG)
    try:
        with gateway(
            tmp_path,
            searxng=fakes["searxng"].url,
            tavily=refusing.url + "/search",
            callers=TOKENS,
            keys=KEYS,
            restricted=("vault",),
        ) as gw:
            caplog.clear()
            reply = call(
                gw.url, "POST", "/v1/search", {"query": "zebra quokka"}, token=TOKENS["vault"]
            )
            records = list(caplog.records)
    finally:
        refusing.close()
    assert reply.status == 200
    assert reply.json["warnings"] == ["tavily: 429"]
    assert "quota" not in reply.raw.decode()
    every_line = "\n".join(r.getMessage() for r in records)
    assert f":{refusing.port}" not in every_line
    for text in forbidden_texts(fakes):
        assert text not in every_line, text
    assert len([r for r in records if r.levelno == logging.INFO]) == 1


def test_access_lines_keep_only_methods_routes_and_statuses(
    tmp_path: Path, fakes: dict[str, FakeUpstream], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="sift.http")
    with gateway(tmp_path, searxng=fakes["searxng"].url) as gw:
        caplog.clear()
        call(gw.url, "POST", "/v2/search?api_key=zebra", {"query": "zebra"})
        call(gw.url, "GET", "/zebra/quokka?x=1")
        records = [r for r in caplog.records if r.name == "sift.http"]
    lines = [r.getMessage() for r in records]
    assert "POST /v2/search 200" in lines
    assert "GET other 404" in lines
    assert not any("zebra" in line or "quokka" in line for line in lines)
    assert all(r.levelno == logging.DEBUG for r in records)
