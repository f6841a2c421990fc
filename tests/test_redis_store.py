"""The shared store on a real redis-server: keys, TTLs, cap scripts, fill lock and faults."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from hashlib import sha1
from pathlib import Path

import pytest
from clockkit import DAY, NOW
from gatewaykit import wait_until
from rediskit import RedisServer
from storekit import HITS, key

from siftlib.errors import StoreError
from siftlib.store import redis as redis_store
from siftlib.store.base import Cached
from siftlib.store.redis import RedisStore, open_redis_store
from siftlib.store.redis_counter import _ADJUST, _BOOK, MARK_TTL


def spend(store: RedisStore, *, cap: int) -> str | None:
    """Reserve one Tavily credit and settle it as spent; return the ledger that held it."""
    reservation = store.reserve("tavily", day=DAY, cap=cap)
    if reservation is None:
        return None
    store.settle(reservation, actual=1)
    return reservation.ledger


# sift's own read timeout, which the slow-store test holds the store to.
READ_TIMEOUT = redis_store.READ_TIMEOUT


@pytest.fixture
def open_shared(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., RedisStore]]:
    """Open stores on the test's redis-server, as separate gateways would; close them after.

    They read for 0.5 s, not 50 ms: on a starved machine three late replies in a row marked a
    store down before the outage a test was about (the slow-store test sets 50 ms again).
    """
    monkeypatch.setattr(redis_store, "READ_TIMEOUT", 0.5)
    opened: list[RedisStore] = []

    def open_one(**options: object) -> RedisStore:
        settings: dict[str, object] = {
            "password": redis_server.password,
            "prefix": "sift:",
            "fallback_share": 0.5,
            "fill_timeout": 8.0,
        }
        settings.update(options)
        store = open_redis_store(redis_server.url, **settings)  # type: ignore[arg-type]
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


def test_a_counter_key_carries_prefix_source_and_day_and_a_cleanup_ttl(
    open_shared: Callable[..., RedisStore], redis_server: RedisServer
) -> None:
    store = open_shared()
    assert store.reserve("tavily", day=DAY, cap=5)
    with redis_server.client() as client:
        # The counter, and the reserve's mark (so a late repeat books once) for ten minutes.
        counter, mark = sorted(client.keys("*"))
        assert counter == b"sift:cap:tavily:2025-11-30"
        assert mark.startswith(b"sift:reserve:{sift:cap:tavily:2025-11-30}:")
        assert (client.get(mark), 0 < client.ttl(mark) <= MARK_TTL) == (b"1", True)
        assert client.get("sift:cap:tavily:2025-11-30") == b"1"
        ttl = client.ttl("sift:cap:tavily:2025-11-30")
        # Past the next midnight wherever in the day it was made, and set once: a later
        # reserve leaves it alone.
        assert 24 * 3600 < ttl <= 48 * 3600
        client.expire("sift:cap:tavily:2025-11-30", 30 * 3600)
        assert store.reserve("tavily", day=DAY, cap=5)
        assert 29 * 3600 < client.ttl("sift:cap:tavily:2025-11-30") <= 30 * 3600


def test_a_cached_answer_lives_on_the_server_until_the_ttl_or_the_hour_ends(
    open_shared: Callable[..., RedisStore], redis_server: RedisServer
) -> None:
    store = open_shared(prefix="fleet-a:")
    store.cache_put(key("one"), HITS, now=NOW, ttl=600)
    store.cache_put(key("two"), HITS, now=NOW + 3000, ttl=3600)  # 10 minutes left in the hour
    with redis_server.client() as client:
        assert sorted(client.keys("*")) == sorted(
            [f"fleet-a:search:{key('one')}".encode(), f"fleet-a:search:{key('two')}".encode()]
        )
        assert 590_000 < client.pttl(f"fleet-a:search:{key('one')}") <= 600_000
        assert 590_000 < client.pttl(f"fleet-a:search:{key('two')}") <= 600_000
    assert store.cache_get(key("one"), now=NOW) == Cached(tuple(HITS), NOW + 600)
    assert store.cache_get(key("one"), now=NOW + 600) is None  # expired by the caller's clock


def test_another_prefix_is_another_store(open_shared: Callable[..., RedisStore]) -> None:
    ours, theirs = open_shared(prefix="sift:"), open_shared(prefix="other:")
    ours.cache_put(key(), HITS, now=NOW, ttl=3600)
    assert ours.reserve("tavily", day=DAY, cap=1)
    assert theirs.cache_get(key(), now=NOW) is None
    assert theirs.reserve("tavily", day=DAY, cap=1)


def test_a_late_settle_never_recreates_an_expired_counter(
    open_shared: Callable[..., RedisStore], redis_server: RedisServer
) -> None:
    store = open_shared()
    settled, released = (
        store.reserve("tavily", day=DAY, cap=5),
        store.reserve("tavily", day=DAY, cap=5),
    )
    assert settled is not None and released is not None
    with redis_server.client() as client:
        client.delete("sift:cap:tavily:2025-11-30")  # as its TTL would
        store.settle(settled, actual=3)
        store.release(released)
        assert client.exists("sift:cap:tavily:2025-11-30") == 0


def test_the_scripts_are_sent_in_full_when_the_server_forgot_them(
    open_shared: Callable[..., RedisStore], redis_server: RedisServer
) -> None:
    store = open_shared()
    with redis_server.client() as client:
        client.script_flush()
        reservation = store.reserve("tavily", day=DAY, cap=5)  # NOSCRIPT, then EVAL
        assert reservation is not None
        store.settle(reservation, actual=2)
        assert client.get("sift:cap:tavily:2025-11-30") == b"2"
        shas = [sha1(source.encode()).hexdigest() for source in (_BOOK, _ADJUST)]
        assert client.script_exists(*shas) == [True, True]  # EVAL cached them for EVALSHA


def test_a_miss_waits_for_another_gateways_fill(
    open_shared: Callable[..., RedisStore], redis_server: RedisServer
) -> None:
    filler, waiter = open_shared(), open_shared(fill_wait=30.0)
    assert filler.cache_get(key(), now=NOW) is None  # the miss takes the fill lock
    with redis_server.client() as client:
        assert 7_000 < client.pttl(f"sift:fill:{key()}") <= 8_000  # for the search timeout
    found: list[object] = []
    waiting = threading.Thread(target=lambda: found.append(waiter.cache_get(key(), now=NOW)))
    waiting.start()
    waiting.join(0.2)
    assert waiting.is_alive()  # still polling: the lock is taken and the value not there
    filler.cache_put(key(), HITS, now=NOW, ttl=3600)
    waiting.join(30)
    assert found == [Cached(tuple(HITS), NOW + 3600)]
    with redis_server.client() as client:
        assert client.exists(f"sift:fill:{key()}") == 0  # the put dropped the lock


def test_a_fill_that_never_comes_is_waited_for_briefly_then_searched_anyway(
    open_shared: Callable[..., RedisStore],
) -> None:
    filler, waiter = open_shared(), open_shared(fill_wait=0.05)
    assert filler.cache_get(key(), now=NOW) is None
    assert waiter.cache_get(key(), now=NOW) is None  # after the bounded wait, not an error


def test_an_unreadable_entry_is_a_fault_never_a_wrong_answer(
    open_shared: Callable[..., RedisStore], redis_server: RedisServer
) -> None:
    store = open_shared()
    with redis_server.client() as client:
        client.set(f"sift:search:{key()}", b'[{"url": 1}]')
    with pytest.raises(StoreError):
        store.cache_get(key(), now=NOW)


def test_the_store_down_means_uncached_searching_and_only_the_lease_to_spend(
    open_shared: Callable[..., RedisStore], redis_server: RedisServer
) -> None:
    store = open_shared(fallback_share=0.5)
    for _ in range(4):
        spend(store, cap=10)
    with redis_server.client() as client:
        # 4 spent, and 2 leased with them: what was reserved before each, within half of
        # what was left (the first reserve leases nothing, the second 1, the third 1 more).
        assert client.get(f"sift:cap:tavily:{DAY}") == b"6"
    redis_server.kill()
    with pytest.raises(StoreError, match="^unavailable$"):
        store.cache_get(key(), now=NOW)
    with pytest.raises(StoreError, match="^unavailable$"):
        store.cache_put(key(), HITS, now=NOW, ttl=3600)
    assert store.problem == "redis unreachable"
    # Only the 2 credits the store holds for this gateway: never a share of a stale total.
    spent = [spend(store, cap=10) for _ in range(4)]
    assert spent == ["shared"] * 2 + [None] * 2
    assert store.daily_credits(day=DAY) == {"tavily": 6}


def test_a_store_never_reached_grants_no_paid_credit(
    open_shared: Callable[..., RedisStore], redis_server: RedisServer
) -> None:
    # Nothing was booked ahead, and the total is unknown: any grant could pass the cap.
    redis_server.kill()
    store = open_shared(fallback_share=0.25)
    assert store.problem == "redis unreachable"
    assert [store.reserve("tavily", day=DAY, cap=10) for _ in range(3)] == [None] * 3


def test_the_store_recovers_by_itself_and_takes_over_what_was_spent_meanwhile(
    open_shared: Callable[..., RedisStore],
    redis_server: RedisServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(redis_store, "RETRY_AFTER", 0.0)  # try the store again at once
    monkeypatch.setattr(redis_store, "SETTLE_AFTER", 0.0)  # and trust it again at once
    store = open_shared()
    assert [spend(store, cap=10) for _ in range(3)] == ["shared"] * 3  # and 2 leased
    in_flight = store.reserve("tavily", day=DAY, cap=10)  # booked in the store, settled later
    assert in_flight is not None and in_flight.ledger == "shared"
    redis_server.kill()
    with caplog.at_level(logging.WARNING, logger="sift"):
        assert [spend(store, cap=10) for _ in range(3)] == ["shared", "shared", None]  # leased
        store.settle(in_flight, actual=2)
        redis_server.start()  # empty: it kept nothing on disk
        assert store.problem is None
        store.cache_put(key(), HITS, now=NOW, ttl=3600)
        assert store.cache_get(key(), now=NOW) == Cached(tuple(HITS), NOW + 3600)
        assert spend(store, cap=10) == "shared"
    # 3 spent, the call in flight's 2, the lease's 2, then this one: the empty store was
    # re-created from the 6 seen before (leases included), with the 1 more than reserved.
    assert store.daily_credits(day=DAY) == {"tavily": 8}
    with redis_server.client() as client:
        assert int(client.get("sift:cap:tavily:2025-11-30")) >= 8  # and this gateway's lease
    messages = [record.getMessage() for record in caplog.records]
    assert any("redis unreachable" in message for message in messages)
    assert any("reachable again" in message for message in messages)


def test_while_down_the_store_is_not_waited_on_until_the_retry_time(
    open_shared: Callable[..., RedisStore], redis_server: RedisServer
) -> None:
    store = open_shared()
    redis_server.kill()
    assert store.problem == "redis unreachable"
    redis_server.start()
    # Within the retry time nothing is tried, so the store still counts as down.
    assert store.problem == "redis unreachable"
    with pytest.raises(StoreError):
        store.cache_get(key(), now=NOW)


def test_a_password_is_sent_and_never_shown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    password = "s3cret-store-pw"
    server = RedisServer(tmp_path / "redis", password=password)
    server.start()
    try:
        with caplog.at_level(logging.DEBUG):
            good = open_redis_store(
                server.url, password=password, prefix="sift:", fallback_share=0.5, fill_timeout=8
            )
            assert good.problem is None
            assert good.reserve("tavily", day=DAY, cap=3)
            wrong = open_redis_store(
                server.url, password="not-it", prefix="sift:", fallback_share=0.5, fill_timeout=8
            )
            assert wrong.problem == "redis refused the password (SIFT_STORE_PASSWORD)"
            with pytest.raises(StoreError) as raised:
                wrong.cache_get(key(), now=NOW)
            none = open_redis_store(
                server.url, password=None, prefix="sift:", fallback_share=0.5, fill_timeout=8
            )
            none_problem = none.problem
            for store in (good, wrong, none):
                store.close()
    finally:
        server.stop()
    assert none_problem is not None and none_problem.startswith("redis refused")
    shown = [str(raised.value), repr(good), str(wrong.problem), none_problem]
    shown += [record.getMessage() for record in caplog.records]
    assert not any(password in text or "not-it" in text for text in shown)


def test_an_evicting_memory_policy_is_reported(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    with redis_server.client() as client:
        client.config_set("maxmemory-policy", "allkeys-lru")
    with caplog.at_level(logging.WARNING, logger="sift"):
        store = open_redis_store(
            redis_server.url, password=None, prefix="sift:", fallback_share=0.5, fill_timeout=8
        )
        store.close()
    assert any("maxmemory-policy allkeys-lru" in r.getMessage() for r in caplog.records)


def test_a_slow_store_fails_each_late_operation_and_is_down_after_three_in_a_row(
    open_shared: Callable[..., RedisStore],
    redis_server: RedisServer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(redis_store, "RETRY_AFTER", 0.0)  # try the store again at once
    monkeypatch.setattr(redis_store, "READ_TIMEOUT", READ_TIMEOUT)
    store = open_shared()
    assert [spend(store, cap=4) for _ in range(2)] == ["shared"] * 2  # and 1 leased
    redis_server.pause()  # every command waits, answered late: a store too slow for 50 ms
    try:
        with caplog.at_level(logging.WARNING, logger="sift"):
            for _ in range(2):
                with pytest.raises(StoreError, match="^unavailable$"):
                    store.cache_get(key(), now=NOW)
            assert caplog.records == []  # a late reply or two fails those operations only
            assert store.reserve("tavily", day=DAY, cap=4)  # from the lease, meanwhile
            assert [r.getMessage().split(" at ")[0] for r in caplog.records] == [
                "store: redis unreachable"
            ]
    finally:
        redis_server.resume()
    # Once the server runs again the store is back: under load that can take a moment.
    wait_until(lambda: store.problem is None, "the store back after the pause")


def test_a_lease_spent_in_an_outage_settles_on_the_store_once_it_is_back(
    open_shared: Callable[..., RedisStore],
    redis_server: RedisServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(redis_store, "RETRY_AFTER", 0.0)
    store = open_shared()
    assert [spend(store, cap=10) for _ in range(3)] == ["shared"] * 3  # and 2 leased
    redis_server.kill()
    leased = store.reserve("tavily", day=DAY, cap=10, credits=2)
    assert leased is not None and leased.ledger == "shared"  # the store holds it already
    store.settle(leased, actual=1)  # 1 less than reserved: owed to the store, with its id
    redis_server.start()
    wait_until(lambda: store.daily_credits(day=DAY) == {"tavily": 4}, "the settle handed over")
    with redis_server.client() as client:
        # Restarted empty: re-created from the 5 seen before, less the 1 given back.
        assert client.get("sift:cap:tavily:2025-11-30") == b"4"


def test_a_valkey_url_speaks_the_same_protocol(redis_server: RedisServer) -> None:
    url = redis_server.url.replace("redis://", "valkey://")
    store = open_redis_store(url, password=None, prefix="sift:", fallback_share=0.5, fill_timeout=8)
    try:
        assert store.problem is None
        assert spend(store, cap=1) == "shared"
    finally:
        store.close()
