"""The fetch cache as the fetcher reads and fills it: keys, the decoded memory front, the counts.

    cache = PageCache(open_fetch_cache(config, secrets), max_age=3600.0, restricted=(), metrics=m)
    key = cache.key(request)                 # "" when the cache is off for it (a screenshot)
    result = cache.get(request, key)         # a hit (`FetchResult.as_hit`), or None: fetch it
    cache.put(request, key, result)          # kept when complete and successful

The store (`siftlib.fetch.cache`) holds encoded answers; the latest are also kept decoded in
memory (`Recent`), so a hit reads neither the file nor Redis and decodes no JSON, and the keys
of recent requests are remembered. Hits and misses are counted for fleet callers only (a
caller-less aggregate), and a store that fails is served around with a warning.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from siftlib.fetch.cache import CacheFault, fetch_key
from siftlib.fetch.models import FetchRequest, FetchResult
from siftlib.lazylog import LazyLogger

if TYPE_CHECKING:
    from siftlib.fetch.cache import FetchCache
    from siftlib.metrics import Metrics

__all__ = ["PageCache", "Recent"]

log = LazyLogger("sift")
# The fetch cache's latest answers kept decoded in memory, in bytes of their stored form.
RECENT_BYTES = 32 * 1024 * 1024


class PageCache:
    """A fetch cache store with its decoded memory front, as one fetcher uses it."""

    def __init__(
        self,
        store: FetchCache,
        *,
        max_age: float,
        restricted: Collection[str] = (),
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.max_age = max_age  # `[fetch] cache_max_age`: the default, and the longest
        self.restricted = frozenset(restricted)
        self.metrics = metrics
        self._recent = Recent(RECENT_BYTES)
        if metrics is not None:  # both counters show from the start
            metrics.inc("fetch_cache_hit", 0)
            metrics.inc("fetch_cache_miss", 0)

    def key(self, request: FetchRequest) -> str:
        """Return the request's cache key, or "" when the cache is off for it."""
        if request.screenshot:
            return ""
        from siftlib.search.plan import caller_class

        return _fetch_key(request, caller_class(request.caller, self.restricted))

    def get(self, request: FetchRequest, key: str) -> FetchResult | None:
        """Return a stored answer younger than the request's max age, counting hit or miss."""
        if not key:
            return None
        limit = self.max_age
        max_age = limit if request.max_age is None else min(request.max_age, limit)
        now = time.time()
        found = self._recent.get(key, now=now, max_age=max_age) if max_age > 0 else None
        if found is None and max_age > 0:
            try:
                entry = self.store.get(key, now=now, max_age=max_age)
            except CacheFault as exc:
                log.warning("fetch cache: read failed (%s); fetching uncached", exc)
                entry = None
            stored = _decoded(entry.value) if entry is not None else None
            if entry is not None and stored is not None:
                found = stored, entry.stored_at
                self._recent.put(key, stored, stored_at=entry.stored_at, size=len(entry.value))
        counted = request.caller not in self.restricted  # a caller-less aggregate: fleet only
        if found is None:
            if counted:
                self._count("fetch_cache_miss")
            return None
        if counted:
            self._count("fetch_cache_hit")
        answer: FetchResult = found[0]
        return answer.as_hit(request.url, found[1])

    def put(self, request: FetchRequest, key: str, result: FetchResult) -> None:
        """Keep a complete, successful answer (2xx, nothing cut, no warning) in the cache."""
        if not key or not request.store_in_cache:
            return
        if not 200 <= result.status < 300 or result.truncated or result.warnings:
            return
        value, now = _encoded(result), time.time()
        try:
            self.store.put(key, value, now=now)
        except CacheFault as exc:
            log.warning("fetch cache: write failed (%s); the answer is not kept", exc)
            return
        kept = dataclasses.replace(result, screenshot=None, cached_at=None)
        self._recent.put(key, kept, stored_at=now, size=len(value))

    def _count(self, name: str) -> None:
        if self.metrics is not None:
            self.metrics.inc(name)


class Recent:
    """The latest answers in memory, decoded: a hit skips the store and the JSON decoding.

    Bounded by `max_bytes` of content (least recently used dropped first). Entries are never
    changed once stored, so a copy here is as good as the store's while it is young enough;
    its age is checked against each request's max age as the store's is.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, tuple[Any, float, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: str, *, now: float, max_age: float) -> tuple[Any, float] | None:
        """Return (answer, stored at) when younger than `max_age`, else None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[1] <= now - max_age:
                return None
            self._entries.move_to_end(key)
            return entry[0], entry[1]

    def put(self, key: str, answer: Any, *, stored_at: float, size: int) -> None:
        """Keep an answer, dropping the least recently used past the bound."""
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
            self._entries[key] = (answer, stored_at, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, _, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped


@functools.lru_cache(maxsize=4096)  # the same requests come again: that is why they hit
def _fetch_key(request: FetchRequest, caller_class: str) -> str:
    return fetch_key(request, caller_class=caller_class)


def _encoded(result: FetchResult) -> bytes:
    """Return a result as the fetch cache keeps it (JSON, without a screenshot)."""
    fields = dataclasses.asdict(result)
    for transient in ("screenshot", "cached_at", "stored"):
        fields.pop(transient, None)
    return json.dumps(fields, ensure_ascii=False).encode()


def _decoded(value: bytes) -> FetchResult | None:
    """Return a stored result, or None when the entry does not read as one."""
    try:
        fields = json.loads(value)
        known = {field.name for field in dataclasses.fields(FetchResult)}
        return FetchResult(**{name: v for name, v in fields.items() if name in known})
    except (ValueError, TypeError, AttributeError):
        return None
