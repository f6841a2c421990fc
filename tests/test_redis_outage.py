"""Two gateways on one real redis-server through outages: no outage takes them past a cap.

Each gateway is a store client of its own (as `sift serve` opens it). The outages are real:
the server frozen (SIGSTOP, so commands already sent run late, when it resumes), its password
rotated with every client dropped, and a restart that kept nothing. The count that matters
is the credits granted and spent, against the cap, exactly. During an outage a gateway
spends only its lease, booked on the store beforehand (`siftlib.store.ledger`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from clockkit import DAY
from gatewaykit import wait_until
from rediskit import RedisServer

from siftlib.errors import StoreError
from siftlib.store import redis as redis_store
from siftlib.store.redis import (
    LATE_LIMIT,
    RETRY_AFTER,
    SETTLE_AFTER,
    RedisStore,
    open_redis_store,
)

pytestmark = pytest.mark.one_worker  # a browser or gateways for the module

CAP = 30
COUNTER = f"sift:cap:tavily:{DAY}"
AFTER_CAP = 0.5  # spending goes on this long past the cap (two probe periods): a grant fails
# After an outage a store tries again after RETRY_AFTER, then trusts shared totals SETTLE_AFTER
# later: the spending after one goes on at least that long, past where a too early trust grants.
TRUSTED_AFTER = RETRY_AFTER + SETTLE_AFTER


@pytest.fixture
def gateways(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[], RedisStore]]:
    """Open stores on the test's redis-server with share 0.5, as two gateways of a fleet.

    Their read timeout is 0.5 s, not 50 ms: on a loaded machine a late reply before the
    outage would change what the test starts from; the outages last longer than that.
    """
    monkeypatch.setattr(redis_store, "READ_TIMEOUT", 0.5)
    opened: list[RedisStore] = []

    def open_one() -> RedisStore:
        store = open_redis_store(
            redis_server.url,
            password=redis_server.password,
            prefix="sift:",
            fallback_share=0.5,
            fill_timeout=8.0,
        )
        opened.append(store)
        return store

    yield open_one
    redis_server.resume()
    for store in opened:
        store.close()


def spend(store: RedisStore, *, cap: int = CAP) -> int:
    """Reserve one Tavily credit and spend it; return 1 when granted, else 0."""
    reservation = store.reserve("tavily", day=DAY, cap=cap)
    if reservation is None:
        return 0
    store.settle(reservation, actual=1)
    return 1


def spend_for(seconds: float, *stores: RedisStore, cap: int = CAP) -> int:
    """Let each store spend in turn, a search every 20 ms, for `seconds`; return the grants."""
    granted = 0
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        for store in stores:
            granted += spend(store, cap=cap)
        time.sleep(0.02)
    return granted


def spend_to_cap(room: int, *stores: RedisStore, cap: int = CAP, least: float = 0.0) -> int:
    """Spend as `spend_for` for at least `least` seconds and until `room` credits are granted,
    then `AFTER_CAP` more; at most 10 s. Return the grants.

    Every credit was granted then, so any grant after it passes the cap: the failures these
    tests guard against (a stale total trusted, a release carried twice, an empty store
    taken for zero) grant past the cap at once, in the same burst.
    """
    start = time.monotonic()
    granted, capped, until = 0, False, start + 10.0
    while time.monotonic() < until:
        for store in stores:
            granted += spend(store, cap=cap)
        if granted >= room and not capped:
            capped, until = True, max(start + least, time.monotonic() + AFTER_CAP)
        time.sleep(0.02)
    return granted


def late_until_down(*stores: RedisStore) -> None:
    """Have `LATE_LIMIT` cache lookups time out on each store, all at once (as that many
    searches of two gateways would): three late replies in a row, so each store is down."""

    def late(store: RedisStore) -> None:
        with pytest.raises(StoreError):
            store.cache_get("a cache key", now=0.0)

    with ThreadPoolExecutor(LATE_LIMIT * len(stores)) as pool:
        lookups = [pool.submit(late, store) for store in stores for _ in range(LATE_LIMIT)]
        for lookup in lookups:
            lookup.result()
    assert all(store.problem == "redis unreachable" for store in stores)


def before_the_outage(first: RedisStore, second: RedisStore) -> int:
    """Spend 10 credits, 5 through each gateway, each leasing 4 more with them."""
    spent = sum(spend(store) for _ in range(5) for store in (first, second))
    assert spent == 10
    return spent


def counter(server: RedisServer) -> int:
    with server.client() as client:
        return int(client.get(COUNTER) or 0)


def test_a_frozen_store_never_lets_two_gateways_past_the_cap(
    gateways: Callable[[], RedisStore], redis_server: RedisServer
) -> None:
    first, second = gateways(), gateways()
    spent = before_the_outage(first, second)
    redis_server.pause()
    late_until_down(first, second)  # a search looks the cache up first: 3 late replies, down
    # 10 searches each while the store is frozen: each gateway spends its lease, no more.
    during = [sum(spend(store) for _ in range(10)) for store in (first, second)]
    assert during == [4, 4]
    redis_server.resume()
    # The first gateway gets no more searches (its own total says capped, or its callers
    # went away): what it spent must still reach the store before the second trusts it.
    spent += sum(during)
    spent += spend_to_cap(CAP - spent, second, least=TRUSTED_AFTER)
    assert spent <= CAP
    wait_until(lambda: counter(redis_server) >= spent, "both gateways' outage spend handed over")


def test_a_rotated_password_never_lets_two_gateways_past_the_cap(
    gateways: Callable[[], RedisStore], redis_server: RedisServer
) -> None:
    first, second = gateways(), gateways()
    spent = before_the_outage(first, second)
    old = redis_server.password
    redis_server.rotate_password("rotated-pw")  # every gateway's connection dropped
    assert first.problem == "redis refused the password (SIFT_STORE_PASSWORD)"
    during = [sum(spend(store) for _ in range(10)) for store in (first, second)]
    assert during == [4, 4]
    with redis_server.client() as client:
        client.config_set("requirepass", old or "")  # rotated back: the gateways get in again
    redis_server.password = old
    spent += sum(during)
    spent += spend_to_cap(CAP - spent, second, least=TRUSTED_AFTER)
    assert spent <= CAP
    wait_until(lambda: counter(redis_server) == spent, "both gateways' outage spend handed over")


def test_a_release_that_timed_out_is_applied_once(
    gateways: Callable[[], RedisStore], redis_server: RedisServer
) -> None:
    store = gateways()
    unsent = store.reserve("tavily", day=DAY, cap=3)
    assert unsent is not None
    store.release(unsent)  # the server knows the script now: the frozen one waits to run
    held = [store.reserve("tavily", day=DAY, cap=3) for _ in range(3)]
    assert all(reservation is not None for reservation in held)
    store.settle(held[0], actual=1)  # type: ignore[arg-type]
    store.settle(held[1], actual=1)  # type: ignore[arg-type]
    redis_server.pause()
    store.release(held[2])  # type: ignore[arg-type]  # sent, and it times out
    redis_server.resume()  # the server runs the release it had queued
    wait_until(lambda: counter(redis_server) == 2, "the queued release run")
    spent = 2 + spend_to_cap(1, store, cap=3)
    assert spent == 3  # never 4 against a cap of 3
    assert counter(redis_server) == 3


def test_a_reserve_that_timed_out_and_ran_late_wastes_no_credit(
    gateways: Callable[[], RedisStore], redis_server: RedisServer
) -> None:
    store = gateways()
    spent = spend(store) + spend(store)
    redis_server.pause()
    late = store.reserve("tavily", day=DAY, cap=4)  # sent twice, both time out
    assert late is not None  # granted from the lease the second spend took
    redis_server.resume()  # the server runs both tries it had queued: booked once, then taken back
    store.settle(late, actual=1)
    spent += 1
    spent += spend_to_cap(4 - spent, store, cap=4)
    assert spent == 4  # never 3 against a cap of 4: the late booking wasted nothing
    wait_until(lambda: counter(redis_server) == 4, "the late reserve taken back")
    with redis_server.client() as client:
        assert [client.get(mark) for mark in client.keys("sift:reserve:*")].count(b"w") == 1


def test_a_store_restarted_empty_keeps_the_last_total_seen_as_a_floor(
    gateways: Callable[[], RedisStore], redis_server: RedisServer
) -> None:
    first, second = gateways(), gateways()
    spent = before_the_outage(first, second) + sum(
        spend(s) for _ in range(7) for s in (first, second)
    )
    assert spent == 24
    assert counter(redis_server) == CAP  # 24 spent, and the rest leased by the two gateways
    redis_server.kill()
    redis_server.start()  # the same port, nothing kept
    spent += spend_to_cap(CAP - spent, first, second)
    assert spent == CAP  # never 47 against 30; and once both settled, the whole cap
    assert counter(redis_server) == CAP


def test_a_stale_total_never_lets_two_gateways_past_the_cap(
    gateways: Callable[[], RedisStore], redis_server: RedisServer
) -> None:
    # The first gateway last saw the total at 3; the second then spent 12 more. A share of
    # what the first thought was left (half of 17) once took the fleet to 25 against 20.
    first, second = gateways(), gateways()
    spent = spend(first, cap=20) + spend(first, cap=20)
    spent += sum(spend(second, cap=20) for _ in range(12))
    redis_server.kill()
    spent += sum(spend(store, cap=20) for _ in range(10) for store in (first, second))
    assert spent <= 20
    redis_server.start()  # empty: re-created from the last totals seen
    spent += spend_for(3.0, first, second, cap=20)
    assert spent <= 20
