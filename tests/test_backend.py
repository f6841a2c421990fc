"""One backend under every face: a gateway's envelopes read back into the in-process types."""

from __future__ import annotations

from pathlib import Path

import pytest

from siftlib.backend import GatewayBackend, LocalBackend, open_backend
from siftlib.errors import ConfigError
from siftlib.fetch.fetcher import FetchRequest, FetchResult
from siftlib.gateway.client import fetch_result, search_response
from siftlib.hits import Hit
from siftlib.search.pipeline import SearchRequest, SearchResponse
from siftlib.search.sources import QueryNotes


def test_a_search_envelope_reads_back_into_the_response_it_came_from() -> None:
    response = SearchResponse(
        results=[
            Hit("https://a.example/", "A", "about a", 0.0327, "searxng", "2026-03-02", 4),
            Hit("https://b.example/", "B", "", 0, "tavily"),
        ],
        warnings=["brave_llm: timeout"],
        sources_ok=["searxng", "tavily"],
        sources_failed=["brave_llm"],
        search_ms=412,
        rerank_ms=1,
        cached=True,
        notes=QueryNotes(answers=("42",), suggestions=("sqlite wal mode",)),
    )
    assert search_response(response.to_native()).to_native() == response.to_native()


def test_a_minimal_or_odd_search_envelope_reads_without_guessing() -> None:
    read = search_response({"results": [{"url": "u", "score": True}, "junk"], "cached": 1})
    assert read.results == [Hit("u", "", "", 0, "")]
    assert (read.warnings, read.sources_ok, read.cached, read.search_ms) == ([], [], False, 0)


@pytest.mark.parametrize("extra", [{}, {"render_ms": 30, "num_pages": 3, "cached": True}])
def test_a_fetch_envelope_reads_back_into_the_result_it_came_from(extra: dict[str, int]) -> None:
    result = FetchResult(
        url="https://a.example/doc",
        final_url="https://a.example/doc/",
        status=404,
        content_type="text/html; charset=utf-8",
        media_type="text/html",
        title="Doc",
        description="About it",
        language="en",
        content="# Doc",
        links=["https://a.example/"],
        truncated=True,
        warnings=["truncated: the content passed max_chars (5 characters)"],
        fetch_ms=12,
        convert_ms=3,
        bytes=2048,
        render_ms=extra.get("render_ms"),
        author="Ann" if "num_pages" in extra else "",
        num_pages=extra.get("num_pages"),
        cached_at=1.0 if extra.get("cached") else None,
        page_type="article" if extra else "",
    )
    assert fetch_result(result.to_native()).to_native() == result.to_native()


def test_the_place_is_chosen_once(tmp_path: Path) -> None:
    local = open_backend(config=str(tmp_path / "none.toml"), server=None, local=True)
    assert isinstance(local, LocalBackend)
    remote = open_backend(config=None, server="http://127.0.0.1:9", local=False)
    assert isinstance(remote, GatewayBackend) and remote.url == "http://127.0.0.1:9"


def test_nothing_enabled_is_one_sentence_naming_the_keys(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[server]\ndb = "{tmp_path / "cache.db"}"\n[fetch]\nenabled = false\n')
    backend = LocalBackend(str(config))
    try:
        with pytest.raises(ConfigError, match=r"no search source is enabled: set search\.searxng"):
            backend.search(SearchRequest(query="sqlite"))
        with pytest.raises(ConfigError, match=r"fetch is disabled: set fetch\.enabled = true"):
            backend.fetch(FetchRequest(url="https://a.example/"))
    finally:
        backend.close()
