"""The Hermes agent (hermes-agent 0.19.0) reaching sift as its Firecrawl backend."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from gatewaykit import FakeUpstream, Gateway, call, fixture_bytes, gateway

pytestmark = pytest.mark.contract

TOKEN = "hermes-sift-token-42"


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[Gateway]:
    searxng = FakeUpstream(fixture_bytes("searxng/wal-typed-and-legacy.json"))
    brave = FakeUpstream(fixture_bytes("brave_llm/wal-generic-and-sources.json"))
    try:
        with gateway(
            tmp_path / "sift", searxng=searxng.url, brave_llm=brave.url, callers={"hermes": TOKEN}
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
    (home / "config.yaml").write_text("web:\n  search_backend: firecrawl\n")
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
