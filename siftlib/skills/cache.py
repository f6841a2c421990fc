"""The session cache of gated rerank outcomes (skills.md §8).

Memory only, one per `SystemOneReranker` (so per session and per key/config). Entries are outcomes
(decision plus shortlist indexes), independent of `limit`; the caller rebuilds results from
its current catalog. LRU at `max_entries`; each entry expires `ttl_ms` after insertion on an
injected monotonic clock, and a hit does not extend it. `max_entries == 0` or `ttl_ms == 0`
disables the cache.

    cache = SessionCache(max_entries=128, ttl_ms=300_000, clock=time.monotonic)
    cache.put(key, outcome); cache.get(key)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

from siftlib.skills.decide import Outcome


class SessionCache:
    """An LRU map from request keys to gated outcomes, with absolute expiry."""

    def __init__(self, *, max_entries: int, ttl_ms: int, clock: Callable[[], float]) -> None:
        self._max_entries = max_entries
        self._ttl = ttl_ms / 1000.0
        self._clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, Outcome]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether anything can be stored at all."""
        return self._max_entries > 0 and self._ttl > 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def get(self, key: Hashable) -> Outcome | None:
        """Return the live outcome stored under `key`, marking it recently used."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            expires, outcome = entry
            if self._clock() >= expires:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return outcome

    def put(self, key: Hashable, outcome: Outcome) -> None:
        """Store a gated outcome; failures and uncertain outcomes are refused."""
        if not self.enabled or not outcome.cacheable:
            return
        with self._lock:
            self._entries[key] = (self._clock() + self._ttl, outcome)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
