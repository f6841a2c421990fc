"""The store under the real pipeline: cache hits, what is never cached, partitions, caps, faults."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from bodykit import fixture_bytes, searxng_answer, tavily_answer
from clockkit import NOW, Clock
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from siftlib.config import Secrets, load_config
from siftlib.errors import NoResultsError
from siftlib.search.pipeline import Searcher, SearchRequest, SearchResponse
from siftlib.store import sqlite as store_module
from siftlib.store.factory import open_store
from siftlib.store.sqlite import SQLiteStore


class Upstreams:
    """Fake SearXNG and Tavily on one pytest-httpserver; every answer names its call number."""

    def __init__(self, httpserver: HTTPServer) -> None:
        self.calls = {"searxng": 0, "tavily": 0}
        self.searxng_fixture: str | None = None  # a recorded-shape answer instead of numbered hits
        self.tavily_status = 200
        self.tavily_credits = 1
        httpserver.expect_request("/searx/search").respond_with_handler(self._searxng)
        httpserver.expect_request("/tavily", method="POST").respond_with_handler(self._tavily)

    def _searxng(self, request: Request) -> Response:
        self.calls["searxng"] += 1
        if self.searxng_fixture is not None:
            return Response(fixture_bytes(self.searxng_fixture), content_type="application/json")
        n = self.calls["searxng"]
        results = [
            {
                "url": f"https://s.example/{n}/{i}",
                "title": f"S{n}.{i}",
                "content": "searx hit",
                "score": 3 - i,
                "engines": ["duckduckgo"],
                "category": "general",
            }
            for i in range(3)
        ]
        body = searxng_answer(request.args["q"], results)
        return Response(json.dumps(body), content_type="application/json")

    def _tavily(self, request: Request) -> Response:
        self.calls["tavily"] += 1
        if self.tavily_status != 200:
            return Response('{"detail": {"error": "no"}}', status=self.tavily_status)
        n = self.calls["tavily"]
        hit = {
            "url": f"https://t.example/{n}",
            "title": f"T{n}",
            "content": "tavily hit",
            "score": 0.9,
            "raw_content": None,
        }
        body = tavily_answer(request.json["query"], [hit], response_time=0.5)
        body["usage"] = {"credits": self.tavily_credits}
        return Response(json.dumps(body), content_type="application/json")


@pytest.fixture
def upstreams(httpserver: HTTPServer) -> Upstreams:
    return Upstreams(httpserver)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "server.db"


@pytest.fixture
def make_searcher(
    tmp_path: Path, httpserver: HTTPServer, db_path: Path, clock: Clock
) -> Iterator[Callable[..., Searcher]]:
    made: list[tuple[Searcher, SQLiteStore]] = []

    def make(
        *, tavily: bool = False, cap: int = 0, ttl: str = "1h", searxng_path: str = "searx"
    ) -> Searcher:
        base = httpserver.url_for("")
        path = tmp_path / "config.toml"
        path.write_text(
            f'[server]\ndb = "{db_path}"\npermit_restricted = ["Alice", "carol"]\n'
            f'[search]\ncache_ttl = "{ttl}"\n'
            f'[search.searxng]\nenabled = true\nurl = "{base}{searxng_path}"\n'
            f'[search.tavily]\nenabled = {str(tavily).lower()}\nurl = "{base}tavily"\n'
            f"daily_credit_cap = {cap}\n"
        )
        config = load_config(str(path))
        store = open_store(config.db)
        searcher = Searcher(
            config,
            Secrets({"TAVILY_API_KEY": "tvly-secret"}, environ={}),
            store=store,
            clock=clock,
            allow_private_upstreams=True,
        )
        made.append((searcher, store))
        return searcher

    yield make
    for searcher, store in made:
        searcher.close()
        store.close()


def search(searcher: Searcher, query: str = "sqlite wal", **options: object) -> SearchResponse:
    return searcher.search(SearchRequest(query=query, **options))  # type: ignore[arg-type]


def test_a_hit_returns_cached_with_no_upstream_call(
    upstreams: Upstreams, make_searcher: Callable[..., Searcher]
) -> None:
    searcher = make_searcher()
    first = search(searcher)
    second = search(searcher)
    assert upstreams.calls == {"searxng": 1, "tavily": 0}
    assert (first.cached, second.cached) == (False, True)
    assert second.to_native()["cached"] is True
    assert second.results == first.results and second.warnings == []
    assert searcher.metrics.snapshot()["search_cache_hit"] == 1
    assert searcher.metrics.snapshot()["search_cache_miss"] == 1


def test_a_source_pointed_elsewhere_never_serves_the_old_upstreams_entries(
    upstreams: Upstreams, make_searcher: Callable[..., Searcher]
) -> None:
    assert not search(make_searcher()).cached
    assert search(make_searcher()).cached  # the same config over the same file hits
    moved = make_searcher(searxng_path="nowhere")  # a wrong URL: that path answers 500
    with pytest.raises(NoResultsError) as failed:
        search(moved)
    assert failed.value.warnings == ["searxng: 500"]
    assert upstreams.calls["searxng"] == 1


@pytest.mark.parametrize(
    "same",
    [{"query": "  SQLite   WAL "}, {"k": 8}, {"rerank": True}, {"caller": "bob"}],
)
def test_the_same_normalised_request_hits(
    upstreams: Upstreams, make_searcher: Callable[..., Searcher], same: dict[str, object]
) -> None:
    searcher = make_searcher()
    search(searcher)
    assert search(searcher, **{"query": "sqlite wal", **same}).cached
    assert upstreams.calls["searxng"] == 1


@pytest.mark.parametrize(
    "other",
    [{"query": "sqlite wals"}, {"k": 5}, {"rerank": False}, {"caller": "alice"}],
)
def test_each_request_part_changing_is_a_miss(
    upstreams: Upstreams, make_searcher: Callable[..., Searcher], other: dict[str, object]
) -> None:
    searcher = make_searcher()
    search(searcher)
    response = search(searcher, **{"query": "sqlite wal", **other})
    assert not response.cached
    assert upstreams.calls["searxng"] == 2


def test_the_attempted_sources_are_part_of_the_key(
    upstreams: Upstreams, make_searcher: Callable[..., Searcher]
) -> None:
    search(make_searcher())
    with_tavily = search(make_searcher(tavily=True))
    assert not with_tavily.cached
    assert upstreams.calls == {"searxng": 2, "tavily": 1}


def test_the_hour_bucket_rolling_over_is_a_miss(
    upstreams: Upstreams, make_searcher: Callable[..., Searcher], clock: Clock
) -> None:
    searcher = make_searcher(ttl="2h")
    clock.now = NOW + 3599  # 04:59:59
    search(searcher)
    assert search(searcher).cached
    clock.now = NOW + 3600  # 05:00:00, well inside the TTL
    assert not search(searcher).cached
    assert upstreams.calls["searxng"] == 2


def test_ttl_expiry_with_an_injected_clock(
    upstreams: Upstreams, make_searcher: Callable[..., Searcher], clock: Clock
) -> None:
    searcher = make_searcher(ttl="10m")
    search(searcher)
    clock.now = NOW + 599
    assert search(searcher).cached
    clock.now = NOW + 600
    assert not search(searcher).cached
    assert upstreams.calls["searxng"] == 2


def test_partial_results_are_not_cached(
    upstreams: Upstreams, make_searcher: Callable[..., Searcher]
) -> None:
    searcher = make_searcher(tavily=True)
    upstreams.tavily_status = 500
    partial = search(searcher)
    assert partial.warnings == ["tavily: 500"] and partial.results
    again = search(searcher)
    assert not again.cached
    assert upstreams.calls == {"searxng": 2, "tavily": 2}
    upstreams.tavily_status = 200
    complete = search(searcher)
    assert not complete.cached and complete.warnings == []
    assert search(searcher).cached
    assert upstreams.calls == {"searxng": 3, "tavily": 3}


def test_a_searxng_answer_naming_unresponsive_engines_is_served_but_never_cached(
    upstreams: Upstreams, make_searcher: Callable[..., Searcher]
) -> None:
    searcher = make_searcher()
    upstreams.searxng_fixture = "searxng/partial-three-unresponsive.json"
    partial = search(searcher)
    assert partial.warnings == ["searxng: partial (3 engines unresponsive)"]
    assert len(partial.results) == 3 and partial.sources_ok == ["searxng"]
    assert not search(searcher).cached
    assert upstreams.calls["searxng"] == 2
    upstreams.searxng_fixture = None  # SearXNG recovers: the next answer is complete
    complete = search(searcher)
    assert not complete.cached and complete.warnings == []
    assert search(searcher).cached
    assert upstreams.calls["searxng"] == 3


def test_every_engine_suspended_is_a_searxng_failure_never_cached(
    upstreams: Upstreams, make_searcher: Callable[..., Searcher]
) -> None:
    upstreams.searxng_fixture = "searxng/every-engine-suspended.json"
    alone = make_searcher()
    with pytest.raises(NoResultsError) as failed:
        search(alone)
    assert failed.value.warnings == ["searxng: unresponsive"]
    with_tavily = make_searcher(tavily=True)
    response = search(with_tavily)
    assert response.warnings == ["searxng: unresponsive"]
    assert response.sources_failed == ["searxng"] and response.sources_ok == ["tavily"]
    assert not search(with_tavily).cached
    assert upstreams.calls == {"searxng": 3, "tavily": 2}
    metrics = with_tavily.metrics.snapshot()
    assert metrics["search_errors"] == {"kind=unresponsive,source=searxng": 2}


def test_restricted_and_fleet_callers_never_see_each_others_entries(
    upstreams: Upstreams, make_searcher: Callable[..., Searcher]
) -> None:
    searcher = make_searcher()
    fleet = search(searcher, caller="bob")
    alice = search(searcher, caller="alice")
    assert not alice.cached and alice.results != fleet.results
    carol = search(searcher, caller="carol")  # restricted too, but not alice
    assert not carol.cached and carol.results not in (fleet.results, alice.results)
    assert upstreams.calls["searxng"] == 3
    # Each caller now hits only its own entry.
    assert search(searcher, caller="alice").results == alice.results
    assert search(searcher, caller="carol").results == carol.results
    for caller in ("bob", "dave", "local"):
        hit = search(searcher, caller=caller)
        assert hit.cached and hit.results == fleet.results
    assert upstreams.calls["searxng"] == 3


def test_a_restricted_first_search_leaves_fleet_callers_a_miss(
    upstreams: Upstreams, make_searcher: Callable[..., Searcher]
) -> None:
    searcher = make_searcher()
    search(searcher, caller="alice")
    assert not search(searcher, caller="bob").cached
    assert upstreams.calls["searxng"] == 2


def test_at_the_cap_the_source_is_skipped_and_the_search_still_succeeds(
    upstreams: Upstreams, make_searcher: Callable[..., Searcher]
) -> None:
    searcher = make_searcher(tavily=True, cap=2)
    for query in ("one", "two"):
        assert search(searcher, query=query).sources_ok == ["searxng", "tavily"]
    capped = search(searcher, query="three")
    assert capped.warnings == ["tavily: daily cap"]
    assert capped.sources_ok == ["searxng"] and capped.results
    assert capped.sources_failed == ["tavily"]
    assert searcher.metrics.snapshot()["search_errors"] == {"kind=daily cap,source=tavily": 1}
    assert searcher.checkup().sources["tavily"]["state"] == "capped"
    again = search(searcher, query="three")  # a cache hit still names the skipped source
    assert again.cached and again.sources_failed == ["tavily"]
    assert upstreams.calls["tavily"] == 2
    assert searcher.store is not None
    assert searcher.store.daily_credits(day="2025-11-30") == {"tavily": 2}


def test_a_checkup_reads_the_ledger_once_and_agrees_with_itself(
    upstreams: Upstreams, make_searcher: Callable[..., Searcher], monkeypatch: pytest.MonkeyPatch
) -> None:
    searcher = make_searcher(tavily=True, cap=1)
    search(searcher, query="one")
    assert searcher.store is not None
    reads = []
    real = searcher.store.daily_credits

    def counted(*, day: str) -> dict[str, int]:
        reads.append(day)
        return real(day=day)

    monkeypatch.setattr(searcher.store, "daily_credits", counted)
    checkup = searcher.checkup()
    assert reads == ["2025-11-30"]
    assert checkup.degraded == ["search.tavily: daily cap"]
    assert checkup.sources["tavily"]["state"] == "capped"
    assert checkup.sources["searxng"]["state"] == "ok"


def test_the_cap_survives_a_restart_and_resets_the_next_day(
    upstreams: Upstreams, make_searcher: Callable[..., Searcher], clock: Clock
) -> None:
    first = make_searcher(tavily=True, cap=3)
    upstreams.tavily_credits = 2
    search(first, query="one")
    search(first, query="two")  # reserved 1, spent 2: the total is 4, past the cap of 3
    first.close()
    assert first.store is not None
    first.store.close()
    second = make_searcher(tavily=True, cap=3)
    assert search(second, query="three").warnings == ["tavily: daily cap"]
    assert upstreams.calls["tavily"] == 2
    clock.now = NOW + 86400
    assert search(second, query="four").sources_ok == ["searxng", "tavily"]


def test_a_cache_hit_writes_nothing_to_the_credit_ledger(
    upstreams: Upstreams,
    make_searcher: Callable[..., Searcher],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    searcher = make_searcher(tavily=True, cap=2)
    search(searcher)
    store = searcher.store
    assert store is not None
    booked: list[str] = []
    for name in ("reserve", "settle", "release"):
        monkeypatch.setattr(store, name, lambda *a, _n=name, **kw: booked.append(_n))
    assert search(searcher).cached
    assert booked == []
    monkeypatch.undo()
    assert store.daily_credits(day="2025-11-30") == {"tavily": 1}
    assert upstreams.calls["tavily"] == 1


def test_the_last_credit_taken_after_the_plan_skips_the_source_and_caches_nothing(
    upstreams: Upstreams,
    make_searcher: Callable[..., Searcher],
    db_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    searcher = make_searcher(tavily=True, cap=1)
    store = searcher.store
    assert store is not None
    other = open_store(db_path)  # another sift process on the same file
    reserve = store.reserve

    def raced(source: str, **options: object) -> object:
        assert other.reserve(source, day="2025-11-30", cap=1) is not None  # it wins the credit
        return reserve(source, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "reserve", raced)
    lost = search(searcher)
    other.close()
    assert (lost.warnings, lost.sources_ok, lost.sources_failed) == (
        ["tavily: daily cap"],
        ["searxng"],
        ["tavily"],
    )
    assert upstreams.calls == {"searxng": 1, "tavily": 0}
    assert searcher.metrics.snapshot()["search_errors"] == {"kind=daily cap,source=tavily": 1}
    monkeypatch.undo()
    assert store.daily_credits(day="2025-11-30") == {"tavily": 1}
    # Its key names tavily, which did not answer: nothing was cached. At the cap now, the
    # plan leaves tavily out of the key, and that answer is cached.
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT count(*) FROM search").fetchone() == (0,)
    again = search(searcher)
    assert not again.cached and again.sources_failed == ["tavily"]
    assert search(searcher).cached
    assert upstreams.calls == {"searxng": 2, "tavily": 0}


def _make_read_only(path: Path) -> None:
    open_store(path).close()
    path.chmod(0o444)


def _make_corrupt(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x00not sqlite\x00" * 1000)


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (_make_read_only, "the database file is read-only"),
        (_make_corrupt, "the database file is corrupt"),
    ],
)
def test_a_broken_database_serves_every_search_uncached_with_a_warning(
    upstreams: Upstreams,
    make_searcher: Callable[..., Searcher],
    db_path: Path,
    damage: Callable[[Path], None],
    problem: str,
) -> None:
    damage(db_path)
    before = db_path.read_bytes()
    searcher = make_searcher(tavily=True, cap=2)
    for _ in range(2):
        response = search(searcher)
        assert not response.cached and len(response.results) == 4
        assert response.warnings == [f"store: {problem}"]
    assert upstreams.calls == {"searxng": 2, "tavily": 2}
    # The cap still holds, in memory.
    assert search(searcher, query="other").warnings == ["tavily: daily cap", f"store: {problem}"]
    assert db_path.read_bytes() == before
    assert searcher.checkup().degraded == ["search.tavily: daily cap", f"store: {problem}"]


def test_sift_search_local_shares_the_store_at_the_default_path(
    upstreams: Upstreams, httpserver: HTTPServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from siftlib.cli import main

    config = tmp_path / "config.toml"
    config.write_text(f'[search.searxng]\nenabled = true\nurl = "{httpserver.url_for("")}searx"\n')
    argv = ["search", "--local", "--json", "--config", str(config), "sqlite wal"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    second = json.loads(capsys.readouterr().out)
    assert (first["cached"], second["cached"]) == (False, True)
    assert second["results"] == first["results"]
    assert upstreams.calls["searxng"] == 1
    default = Path(os.environ["XDG_STATE_HOME"]) / "sift" / "cache.db"
    with sqlite3.connect(default) as db:
        assert db.execute("SELECT count(*) FROM search").fetchone() == (1,)


def test_sift_search_local_with_a_corrupt_store_still_answers(
    upstreams: Upstreams,
    httpserver: HTTPServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    from siftlib.cli import main

    db = tmp_path / "server.db"
    _make_corrupt(db)
    before = db.read_bytes()
    config = tmp_path / "config.toml"
    config.write_text(
        f'[server]\ndb = "{db}"\n'
        f'[search.searxng]\nenabled = true\nurl = "{httpserver.url_for("")}searx"\n'
    )
    assert main(["search", "--local", "--config", str(config), "sqlite wal"]) == 0
    out, err = capsys.readouterr()
    assert "https://s.example/1/0" in out
    assert "sift: warning: store: the database file is corrupt" in err
    assert str(db) in caplog.text  # the log line names the file to move aside
    assert db.read_bytes() == before


def test_a_locked_database_serves_uncached_with_a_warning_then_recovers(
    upstreams: Upstreams,
    make_searcher: Callable[..., Searcher],
    db_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT", 0.05)
    searcher = make_searcher(tavily=True, cap=5)
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    locked = search(searcher)
    assert not locked.cached and len(locked.results) == 4
    assert locked.warnings == ["store: the database is locked"]
    other.execute("COMMIT")
    other.close()
    assert not search(searcher).cached  # nothing was stored while locked
    assert search(searcher).cached
    assert upstreams.calls == {"searxng": 2, "tavily": 2}
    # The credit spent while the file was locked reached the file once the lock went.
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT used FROM credits").fetchone() == (2,)


def test_a_plan_trusts_the_days_credits_for_a_second_and_reservations_stay_exact(
    upstreams: Upstreams,
    make_searcher: Callable[..., Searcher],
    db_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    searcher = make_searcher(tavily=True, cap=3)
    store = searcher.store
    assert store is not None
    reads: list[str] = []
    daily_credits = store.daily_credits

    def counted(*, day: str) -> dict[str, int]:
        reads.append(day)
        return daily_credits(day=day)

    monkeypatch.setattr(store, "daily_credits", counted)
    search(searcher)  # a miss: reads, reserves, and forgets what it read
    for _ in range(20):
        assert search(searcher).cached
    assert len(reads) == 2  # the miss's plan, then one read for twenty hits
    other = open_store(db_path)  # another gateway on the same file spends the rest
    assert other.reserve("tavily", day="2025-11-30", cap=3, credits=2) is not None
    other.close()
    # This plan still trusts its read, so it asks for a credit: the reservation refuses it.
    late = search(searcher, query="two")
    assert late.warnings == ["tavily: daily cap"] and upstreams.calls["tavily"] == 1
    now = searcher.deadline_clock.now() + 1.5
    monkeypatch.setattr(searcher.deadline_clock, "now", lambda: now)
    reads.clear()
    assert search(searcher, query="three").warnings == ["tavily: daily cap"]
    assert reads == ["2025-11-30"] and upstreams.calls["tavily"] == 1
