"""The session cache: LRU, absolute expiry on an injected monotonic clock, gated outcomes only."""

from __future__ import annotations

from clockkit import Clock

from siftlib.skills.cache import SessionCache
from siftlib.skills.decide import Decision, Outcome, Reason

ACCEPTED = Outcome(Decision.ACCEPTED, Reason.WINNER, (1, 0))
NO_MATCH = Outcome(Decision.NO_MATCH, Reason.NO_MATCH_WINNER)


def make(max_entries: int = 4, ttl_ms: int = 1000) -> tuple[SessionCache, Clock]:
    clock = Clock(1000.0)
    return SessionCache(max_entries=max_entries, ttl_ms=ttl_ms, clock=clock), clock


def test_hit_returns_the_stored_outcome() -> None:
    cache, _ = make()
    cache.put("k", ACCEPTED)
    cache.put("n", NO_MATCH)
    assert cache.get("k") == ACCEPTED
    assert cache.get("n") == NO_MATCH
    assert cache.get("other") is None


def test_failures_and_uncertain_outcomes_are_never_stored() -> None:
    cache, _ = make()
    cache.put("f", Outcome(Decision.FAILURE, Reason.TIMEOUT))
    cache.put("u", Outcome(Decision.UNCERTAIN, Reason.LOW_MARGIN))
    cache.put("s", Outcome(Decision.SKIPPED, Reason.EXACT_NAME))
    assert len(cache) == 0


def test_expiry_is_absolute_from_insertion_and_hits_do_not_extend_it() -> None:
    cache, clock = make(ttl_ms=1000)
    cache.put("k", ACCEPTED)
    clock.now += 0.999
    assert cache.get("k") == ACCEPTED
    clock.now += 0.001
    assert cache.get("k") is None
    assert len(cache) == 0


def test_reinsertion_restarts_the_expiry() -> None:
    cache, clock = make(ttl_ms=1000)
    cache.put("k", ACCEPTED)
    clock.now += 0.9
    cache.put("k", NO_MATCH)
    clock.now += 0.9
    assert cache.get("k") == NO_MATCH


def test_lru_evicts_the_least_recently_used() -> None:
    cache, _ = make(max_entries=2)
    cache.put("a", ACCEPTED)
    cache.put("b", ACCEPTED)
    assert cache.get("a") == ACCEPTED  # b is now the least recently used
    cache.put("c", NO_MATCH)
    assert cache.get("b") is None
    assert cache.get("a") == ACCEPTED
    assert cache.get("c") == NO_MATCH


def test_zero_entries_or_zero_ttl_disable_the_cache() -> None:
    for cache, _ in (make(max_entries=0), make(ttl_ms=0)):
        assert not cache.enabled
        cache.put("k", ACCEPTED)
        assert cache.get("k") is None


def test_clear_forgets_everything() -> None:
    cache, _ = make()
    cache.put("a", ACCEPTED)
    cache.put("b", NO_MATCH)
    cache.clear()
    assert cache.get("a") is None
    assert len(cache) == 0
