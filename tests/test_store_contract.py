"""The store contract, held against every backend: the SQLite file and a real redis-server.

Each test runs once per backend. `reopen()` opens another handle on the same store, as another
sift process (SQLite) or another gateway (Redis) would. What only one backend has (files,
migrations, Lua scripts, keys on the server, faults) is tested in `test_store.py` and
`test_redis_store.py`; the outages of a fleet in `test_redis_outage.py`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from clockkit import DAY, NOW
from storekit import HITS, key

from siftlib.errors import StoreError
from siftlib.store import redis as redis_store
from siftlib.store.base import Cached, Reservation, Store
from siftlib.store.redis import open_redis_store
from siftlib.store.sqlite import open_sqlite


@pytest.fixture(params=["sqlite", "redis"])
def reopen(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[], Store]]:
    """Open handles on one store of the backend; each is another process or gateway on it.

    Redis reads for 0.5 s here, not 50 ms: the contract is the rules, and on a loaded machine
    a late reply would be granted from the lease instead (`test_redis_store.py` tests that).
    """
    opened: list[Store] = []
    monkeypatch.setattr(redis_store, "READ_TIMEOUT", 0.5)
    if request.param == "sqlite":
        path = tmp_path / "state" / "server.db"

        def open_one() -> Store:
            return open_sqlite(path)

    else:
        url = request.getfixturevalue("redis_server").url

        def open_one() -> Store:
            return open_redis_store(
                url,
                password=None,
                prefix="sift:",
                fallback_share=0.5,
                fill_timeout=8.0,
                fill_wait=0.05,
            )

    def track() -> Store:
        store = open_one()
        assert store.problem is None
        opened.append(store)
        return store

    yield track
    for store in opened:
        store.close()


@pytest.fixture
def store(reopen: Callable[[], Store]) -> Store:
    return reopen()


def granted(store: Store, n: int, *, cap: int, source: str = "tavily") -> list[bool]:
    return [store.reserve(source, day=DAY, cap=cap) is not None for _ in range(n)]


def reserve(store: Store, *, cap: int, credits: int = 1, day: str = DAY) -> Reservation:
    reservation = store.reserve("tavily", day=day, cap=cap, credits=credits)
    assert reservation is not None
    return reservation


# --- the cache -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"query": "SQLite WAL modes"},
        {"sources": ["searxng"]},
        {"sources": ["searxng", "tavily", "brave_llm"]},
        {"k": 5},
        {"merge": "concat"},
        {"merge": "rrf+tavily-prefix"},
        {"hour_bucket": "2025-11-30T05"},
        {"hour_bucket": "2025-12-01T04"},
        {"caller_class": "restricted:alice"},
    ],
)
def test_each_key_part_changing_is_a_miss(store: Store, change: dict[str, object]) -> None:
    store.cache_put(key(), HITS, now=NOW, ttl=3600)
    assert key(**change) != key()
    assert store.cache_get(key(**change), now=NOW) is None
    assert store.cache_get(key(), now=NOW).hits == HITS


@pytest.mark.parametrize(
    "change",
    [
        {"query": "  sqlite   wal\tMODE \n"},
        {"query": "sqlite wal mode"},
        {"sources": ["tavily", "searxng"]},
        {"sources": ("searxng", "tavily")},
    ],
)
def test_equivalent_key_parts_hit(store: Store, change: dict[str, object]) -> None:
    store.cache_put(key(), HITS, now=NOW, ttl=3600)
    assert key(**change) == key()
    assert store.cache_get(key(**change), now=NOW).hits == HITS


def test_miss_then_hit_round_trips_every_field(store: Store) -> None:
    assert store.cache_get(key(), now=NOW) is None
    store.cache_put(key(), HITS, now=NOW, ttl=3600)
    assert store.cache_get(key(), now=NOW + 1).hits == HITS


def test_an_empty_answer_is_a_hit_not_a_miss(store: Store) -> None:
    store.cache_put(key(), [], now=NOW, ttl=3600)
    assert store.cache_get(key(), now=NOW).hits == ()


def test_ttl_expiry_with_an_injected_clock(store: Store) -> None:
    store.cache_put(key(), HITS, now=NOW + 60, ttl=600)
    assert store.cache_get(key(), now=NOW + 659).hits == HITS
    assert store.cache_get(key(), now=NOW + 660) is None
    assert store.cache_get(key(), now=NOW + 5000) is None


def test_a_later_put_replaces_the_entry(store: Store) -> None:
    store.cache_put(key(), HITS, now=NOW, ttl=3600)
    store.cache_put(key(), HITS[:1], now=NOW + 10, ttl=3600)
    assert store.cache_get(key(), now=NOW + 11).hits == HITS[:1]


def test_restricted_and_fleet_partitions_are_isolated_both_ways(store: Store) -> None:
    fleet, alice, bob = (
        key(caller_class=c) for c in ("fleet", "restricted:alice", "restricted:bob")
    )
    store.cache_put(alice, HITS[:1], now=NOW, ttl=3600)
    assert store.cache_get(fleet, now=NOW) is None
    assert store.cache_get(bob, now=NOW) is None
    store.cache_put(fleet, HITS, now=NOW, ttl=3600)
    assert store.cache_get(alice, now=NOW).hits == HITS[:1]
    assert store.cache_get(bob, now=NOW) is None
    assert store.cache_get(fleet, now=NOW).hits == HITS


def test_the_cache_survives_a_restart(reopen: Callable[[], Store]) -> None:
    first = reopen()
    first.cache_put(key(), HITS, now=NOW, ttl=3600)
    first.close()
    second = reopen()
    assert second.cache_get(key(), now=NOW + 1).hits == HITS
    second.close()


def test_an_entry_written_through_one_handle_is_a_hit_through_another(
    reopen: Callable[[], Store],
) -> None:
    first, second = reopen(), reopen()
    first.cache_put(key(), HITS, now=NOW, ttl=3600)
    assert second.cache_get(key(), now=NOW) == Cached(HITS, NOW + 3600)
    assert second.cache_get(key(caller_class="restricted:alice"), now=NOW) is None


def test_a_closed_store_is_not_reopened_behind_the_callers_back(store: Store) -> None:
    store.close()
    with pytest.raises(StoreError):
        store.cache_get(key(), now=NOW)
    assert store.problem == "the store is closed"
    store.reserve("tavily", day=DAY, cap=4)  # a cap operation never raises (may grant nothing)


# --- daily caps ----------------------------------------------------------------------------


def test_reserve_up_to_the_cap_then_refuse(store: Store) -> None:
    assert granted(store, 5, cap=3) == [True] * 3 + [False] * 2
    assert store.daily_credits(day=DAY) == {"tavily": 3}


def test_a_reservation_knows_its_source_day_amount_and_ledger(store: Store) -> None:
    assert store.reserve("tavily", day=DAY, cap=5, credits=2) == Reservation(
        "tavily", DAY, 2, "shared"
    )
    assert store.reserve("brave_llm", day=DAY, cap=0) == Reservation("brave_llm", DAY, 0)


def test_a_reservation_of_several_credits_never_straddles_the_cap(store: Store) -> None:
    assert store.reserve("tavily", day=DAY, cap=5, credits=3)
    assert not store.reserve("tavily", day=DAY, cap=5, credits=3)
    assert not store.reserve("tavily", day=DAY, cap=2, credits=3)
    assert store.reserve("tavily", day=DAY, cap=5, credits=2)
    assert store.daily_credits(day=DAY) == {"tavily": 5}


def test_cap_zero_is_off_and_writes_nothing_until_settled(store: Store) -> None:
    assert all(granted(store, 100, cap=0, source="brave_llm"))
    assert store.daily_credits(day=DAY) == {}
    unbooked = store.reserve("brave_llm", day=DAY, cap=0)
    assert unbooked is not None
    store.release(unbooked)
    store.settle(unbooked, actual=0)
    assert store.daily_credits(day=DAY) == {}
    store.settle(unbooked, actual=3)  # an uncapped call's spend still counts
    assert store.daily_credits(day=DAY) == {"brave_llm": 3}


def test_days_and_sources_have_separate_totals(store: Store) -> None:
    assert store.reserve("tavily", day=DAY, cap=1)
    assert not store.reserve("tavily", day=DAY, cap=1)
    assert store.reserve("tavily", day="2025-12-01", cap=1)
    assert store.reserve("brave_llm", day=DAY, cap=1)
    assert store.daily_credits(day=DAY) == {"brave_llm": 1, "tavily": 1}
    assert store.daily_credits(day="2025-12-01") == {"tavily": 1}


def test_settle_records_the_actual_credits_even_past_the_cap(store: Store) -> None:
    store.settle(reserve(store, cap=3), actual=2)
    assert store.daily_credits(day=DAY) == {"tavily": 2}
    store.settle(reserve(store, cap=3), actual=4)
    assert store.daily_credits(day=DAY) == {"tavily": 6}
    assert store.reserve("tavily", day=DAY, cap=3) is None


def test_settle_to_fewer_credits_gives_the_rest_back(store: Store) -> None:
    store.settle(reserve(store, cap=2, credits=2), actual=1)
    assert store.daily_credits(day=DAY) == {"tavily": 1}
    assert store.reserve("tavily", day=DAY, cap=2)


def test_release_gives_a_reservation_back(store: Store) -> None:
    store.release(reserve(store, cap=1))
    assert store.daily_credits(day=DAY) == {"tavily": 0}
    assert store.reserve("tavily", day=DAY, cap=1)


def test_the_cap_survives_a_restart(reopen: Callable[[], Store]) -> None:
    first = reopen()
    assert granted(first, 2, cap=2) == [True, True]
    first.close()
    second = reopen()
    assert second.daily_credits(day=DAY) == {"tavily": 2}
    assert not second.reserve("tavily", day=DAY, cap=2)
    assert second.reserve("tavily", day="2025-12-01", cap=2)
    second.close()


def test_eight_threads_racing_reach_the_cap_exactly(store: Store) -> None:
    cap, barrier = 150, threading.Barrier(8)
    counts: list[int] = []

    def race() -> None:
        barrier.wait()
        counts.append(sum(granted(store, 40, cap=cap)))

    threads = [threading.Thread(target=race) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(counts) == cap
    assert store.daily_credits(day=DAY) == {"tavily": cap}


def test_reserve_settle_release_together(reopen: Callable[[], Store]) -> None:
    store = reopen()
    assert store.reserve("tavily", day=DAY, cap=0) == Reservation("tavily", DAY, 0)  # no cap
    assert store.daily_credits(day=DAY) == {}
    assert store.reserve("tavily", day=DAY, cap=3, credits=4) is None
    first, second, third, fourth = [store.reserve("tavily", day=DAY, cap=3) for _ in range(4)]
    assert first == Reservation("tavily", DAY, 1, "shared") and fourth is None
    assert second is not None and third is not None
    store.release(second)  # the call never went out
    store.settle(third, actual=2)  # it cost more than reserved
    assert store.daily_credits(day=DAY) == {"tavily": 3}
    assert store.reserve("tavily", day=DAY, cap=3) is None
    for _ in range(2):  # uncapped: nothing held, the credits counted when settled
        uncapped = store.reserve("brave_llm", day=DAY, cap=0)
        assert uncapped is not None
        store.settle(uncapped, actual=1)
    assert reopen().daily_credits(day=DAY) == {"brave_llm": 2, "tavily": 3}


def test_the_day_rolls_over_at_utc_midnight(store: Store) -> None:
    assert store.reserve("tavily", day=DAY, cap=1)
    assert not store.reserve("tavily", day=DAY, cap=1)
    assert store.reserve("tavily", day="2025-12-01", cap=1)
    assert store.daily_credits(day="2025-12-01") == {"tavily": 1}
