"""Each adapter maps the project's fixtures and every real recorded body in ../shared/realdata."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bodykit import fixture_bytes

from siftlib.search.sources import SOURCES, BadResponse, Unresponsive
from siftlib.search.sources.brave_llm import BraveLLM
from siftlib.search.sources.searxng import SearXNG
from siftlib.search.sources.tavily import Tavily, agent_request

REAL_DIRS = {"searxng": "searxng", "brave_llm": "brave", "tavily": "tavily"}


def test_searxng_sorts_by_score_stably_and_drops_hits_without_url() -> None:
    answer = SearXNG("http://127.0.0.1:8888").parse(
        fixture_bytes("searxng/wal-typed-and-legacy.json")
    )
    assert [h.url for h in answer.hits] == [
        "https://www.sqlite.org/wal.html",
        "https://blog.example.net/sqlite-wal-explained/",
        "https://docs.example.com/db/journal-modes#wal",
        "https://www.sqlite.org/pragma.html?x=1#pragma_journal_mode",
    ]
    assert answer.hits[2].snippet == ""
    assert answer.hits[0].score == 9.0
    assert {h.source for h in answer.hits} == {"searxng"}
    assert answer.credits == 0


def test_searxng_legacy_format_with_string_answers() -> None:
    answer = SearXNG("http://x").parse(fixture_bytes("searxng/legacy-2024-format.json"))
    assert [h.title for h in answer.hits] == ["SQLite 教程", "SQLite 入门"]
    assert '"WAL"' in answer.hits[0].snippet
    assert answer.notes.answers == ("SQLite 是一个嵌入式数据库",)
    assert answer.unresponsive == ()


def test_searxng_partial_answer_names_its_unresponsive_engines_and_keeps_its_texts() -> None:
    answer = SearXNG("http://x").parse(fixture_bytes("searxng/partial-three-unresponsive.json"))
    assert answer.unresponsive == ("brave", "google", "startpage")
    assert [h.url for h in answer.hits] == [
        "https://forum.example.org/t/checkpoint-never-finishes/",
        "https://www.sqlite.org/wal.html",
        "https://blog.example.net/wal-growth",
    ]
    # An answer object's text; a translation (no `answer` text) is not an answer.
    assert answer.notes.answers == (
        "PRAGMA wal_checkpoint(TRUNCATE) blocks until readers finish, then truncates the WAL.",
    )
    assert answer.notes.suggestions == (
        "sqlite wal_autocheckpoint",
        "sqlite busy_timeout checkpoint",
    )
    assert answer.notes.corrections == ("sqlite checkpoint starvation wal",)
    assert all(h.url not in answer.notes.answers for h in answer.hits)


def test_searxng_with_no_result_and_every_engine_suspended_is_unresponsive() -> None:
    with pytest.raises(Unresponsive):
        SearXNG("http://x").parse(fixture_bytes("searxng/every-engine-suspended.json"))


def test_searxng_empty_answer_with_every_engine_answering_is_a_plain_empty_answer() -> None:
    body = json.dumps({"query": "q", "results": [], "unresponsive_engines": []}).encode()
    assert SearXNG("http://x").parse(body).hits == []


def test_searxng_carries_published_and_engines() -> None:
    answer = SearXNG("http://x").parse(fixture_bytes("searxng/wal-typed-and-legacy.json"))
    facts = {h.url: (h.published, h.engines) for h in answer.hits}
    assert facts == {
        "https://www.sqlite.org/wal.html": (None, 3),
        "https://blog.example.net/sqlite-wal-explained/": ("2026-03-02T00:00:00", 2),
        "https://docs.example.com/db/journal-modes#wal": (None, 1),
        "https://www.sqlite.org/pragma.html?x=1#pragma_journal_mode": (None, 1),
    }


def test_searxng_asks_for_another_page_only_while_a_full_page_leaves_k_unfilled() -> None:
    searxng = SearXNG("http://x")
    full = searxng.parse(fixture_bytes("searxng/wal-page-1.json"))
    short = searxng.parse(fixture_bytes("searxng/wal-page-2.json"))
    assert len(full.hits) == 12 and len(short.hits) == 6
    assert searxng.next_page(page=1, got=len(full.hits), have=12, k=20)
    assert not searxng.next_page(page=1, got=len(full.hits), have=12, k=12)  # k is filled
    assert not searxng.next_page(page=2, got=len(short.hits), have=17, k=20)  # short: the last
    assert not searxng.next_page(page=5, got=len(full.hits), have=40, k=50)  # five pages at most
    request = searxng.build_request("a", k=20, key=None, page=2)
    assert request.url.params["pageno"] == "2"


def test_searxng_request_and_403_hint() -> None:
    request = SearXNG("http://127.0.0.1:8888/searx/").build_request("a b", k=5, key=None)
    assert str(request.url) == "http://127.0.0.1:8888/searx/search?q=a+b&format=json&pageno=1"
    assert request.headers["accept"] == "application/json"
    assert SearXNG("http://x").describe_status(403) == "403 (json format disabled?)"
    assert SearXNG("http://x").describe_status(500) == "500"


def test_brave_maps_generic_then_sources_generic_missed() -> None:
    answer = BraveLLM("https://b").parse(fixture_bytes("brave_llm/wal-generic-and-sources.json"))
    assert [(h.url, h.title) for h in answer.hits] == [
        ("https://www.sqlite.org/wal.html", "Write-Ahead Logging"),
        ("https://forum.example.org/t/wal-on-nfs", "WAL on network filesystems"),
        ("https://blog.example.net/sqlite-wal-explained", "SQLite WAL mode explained"),
    ]
    assert answer.hits[0].snippet == (
        "WAL mode lets readers continue while a writer commits. A checkpoint moves WAL content"
        " back into the database file; readers never block the writer."
    )
    assert answer.hits[2].snippet == ""
    assert answer.credits == 1
    urls = [h.url for h in answer.hits]
    assert "https://maps.example.com/poi/1" not in urls  # poi and map are not web hits


def test_brave_published_is_the_iso_date_of_age() -> None:
    answer = BraveLLM("https://b").parse(fixture_bytes("brave_llm/wal-generic-and-sources.json"))
    assert [h.published for h in answer.hits] == ["2026-03-02", None, "2026-03-02"]


def test_tavily_published_date_in_iso_8601_and_an_unreadable_one_left_out() -> None:
    answer = Tavily("https://t").parse(fixture_bytes("tavily/news-published-date.json"))
    assert [h.published for h in answer.hits] == ["2026-11-04T09:30:00Z", "2026-11-20", None]


def test_brave_request_uses_the_llm_context_endpoint_and_token_header() -> None:
    url = "https://api.search.brave.com/res/v1/llm/context"
    request = BraveLLM(url).build_request("wal mode", k=8, key="BSA-secret")
    assert str(request.url) == url + "?q=wal+mode"
    assert request.method == "GET"
    assert request.headers["x-subscription-token"] == "BSA-secret"


def test_brave_grounding_string_is_never_a_snippet() -> None:
    body = json.dumps({"grounding": "A model-written summary.", "sources": {}}).encode()
    assert BraveLLM("https://b").parse(body).hits == []


def test_tavily_keeps_its_order_never_the_answer_and_counts_usage() -> None:
    answer = Tavily("https://t").parse(fixture_bytes("tavily/wal-usage-unsorted.json"))
    assert [h.score for h in answer.hits] == [0.81234, 0.90112, 0.5]
    assert answer.credits == 1
    answer = Tavily("https://t").parse(fixture_bytes("tavily/answer-images-no-usage.json"))
    assert answer.credits == 1  # no usage: counts one
    assert all("small, embedded" not in h.snippet for h in answer.hits)


def test_tavily_usage_credits_are_taken_as_reported() -> None:
    body = json.dumps({"results": [], "usage": {"credits": 2}}).encode()
    assert Tavily("https://t").parse(body).credits == 2


def test_tavily_exact_request_body() -> None:
    request = Tavily("https://api.tavily.com/search").build_request("q", k=50, key="tvly-x")
    assert json.loads(request.content) == {
        "query": "q",
        "max_results": 20,
        "search_depth": "basic",
        "include_answer": False,
        "include_raw_content": False,
        "include_images": False,
        "include_usage": True,
    }
    assert request.headers["authorization"] == "Bearer tvly-x"
    assert str(request.url) == "https://api.tavily.com/search"


def test_tavily_agent_request_is_what_an_agents_own_tool_sends() -> None:
    request = agent_request("https://api.tavily.com/search", "q", 50, "tvly-x")
    assert json.loads(request.content) == {
        "query": "q",
        "max_results": 20,
        "include_raw_content": False,
        "include_images": False,
    }
    assert request.method == "POST" and str(request.url) == "https://api.tavily.com/search"
    assert request.headers["authorization"] == "Bearer tvly-x"


@pytest.mark.parametrize("name", ["searxng", "brave_llm", "tavily"])
@pytest.mark.parametrize(
    "body", [b"<html>oops</html>", b"[]", b'"text"', b"\xff\xfe", b'{"unrelated": 1}']
)
def test_garbage_is_a_bad_response(name: str, body: bytes) -> None:
    with pytest.raises(BadResponse):
        SOURCES[name]("https://x").parse(body)


def test_query_caps() -> None:
    brave, tavily, searxng = BraveLLM("https://b"), Tavily("https://t"), SearXNG("http://s")
    assert not brave.query_too_long("w " * 50) and brave.query_too_long("w " * 51)
    assert not tavily.query_too_long("x" * 400) and tavily.query_too_long("x" * 401)
    assert brave.query_too_long("x" * 401)
    assert not searxng.query_too_long("x" * 1500)


@pytest.mark.parametrize("name", ["searxng", "brave_llm", "tavily"])
def test_every_real_recorded_body_maps(name: str, realdata: Path) -> None:
    files = sorted((realdata / REAL_DIRS[name]).glob("*.json"))
    assert files, f"no real data found under {realdata}"
    for path in files:
        raw = json.loads(path.read_bytes())
        answer = SOURCES[name]("https://x").parse(path.read_bytes())
        assert answer.hits, path.name
        assert all(isinstance(h.url, str) and h.url for h in answer.hits)
        if name == "tavily":
            assert len(answer.hits) == len(raw["results"])
            if raw.get("answer"):
                assert all(raw["answer"] not in h.snippet for h in answer.hits)
        if name == "searxng":
            assert len(answer.hits) == sum(isinstance(r.get("url"), str) for r in raw["results"])
            scores = [h.score for h in answer.hits]
            assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("name", ["searxng", "tavily"])
def test_lone_surrogates_in_text_are_replaced_and_such_urls_dropped(name: str) -> None:
    body = (
        b'{"results": [{"url": "https://a.example/\\ud800", "title": "bad url"},'
        b' {"url": "https://b.example/", "title": "A \\udfff title", "content": "x\xed\xa0\x80"}]}'
    )
    hits = SOURCES[name]("https://x").parse(body).hits
    assert [(h.url, h.title, h.snippet) for h in hits] == [
        ("https://b.example/", "A \ufffd title", "x\ufffd")
    ]
    for hit in hits:
        json.dumps(hit.to_dict(), ensure_ascii=False).encode("utf-8")


def test_brave_drops_urls_holding_lone_surrogates() -> None:
    body = (
        b'{"grounding": {"generic": [{"url": "https://a.example/\\ud800", "title": "x"}]},'
        b' "sources": {"https://b.example/\\udc00": {"title": "y"}, "https://c.example/": {}}}'
    )
    assert [h.url for h in BraveLLM("https://b").parse(body).hits] == ["https://c.example/"]


def test_real_searxng_unresponsive_engines_are_named(realdata: Path) -> None:
    path = realdata / "searxng" / "atman-espresso-no-number-of-results.json"
    answer = SearXNG("http://x").parse(path.read_bytes())
    assert answer.unresponsive == ("duckduckgo", "startpage")
    assert len(answer.notes.suggestions) == 15
    assert all(h.engines >= 1 for h in answer.hits)
