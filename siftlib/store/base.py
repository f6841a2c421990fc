"""What every store is: the `Store` protocol, the cache key, and the codec of cached hits.

The pipeline sees only the `Store` protocol (search.md §6, store.md). `siftlib.store.factory`
opens one: the SQLite file by default, or a shared Redis/Valkey server, each behind the memory
front of recent hits (`siftlib.store.recent`):

    store = open_store(config.db)
    key = cache_key(query=q, sources=["searxng", "tavily"], k=8, merge="rrf",
                    hour_bucket="2026-11-30T04", caller_class="fleet")
    cached = store.cache_get(key, now=now)          # Cached(hits, expires), or None on a miss
    reservation = store.reserve("tavily", day="2026-11-30", cap=500)    # before the call
    if reservation is not None:                     # None: at the cap, do not call
        ...
        store.settle(reservation, actual=credits)   # or store.release(reservation) if unsent

The protocol, for every backend and for the memory front that wraps them:

- `cache_get(key, *, now) -> Cached | None`: the hits stored under `key` with their expiry
  (epoch seconds), or None when absent or `expires <= now`; never an expired entry. Raises
  `StoreError` on a fault (the caller then searches uncached).
- `cache_put(key, hits, *, now, ttl)`: store `hits` until `expiry(now, ttl)`, which is at the
  latest the end of the UTC hour. Expired entries are never served, and the backend deletes
  them by itself (SQLite's puts sweep, Redis expires keys). Raises `StoreError` on a fault.
- `reserve(source, *, day, cap, credits=1) -> Reservation | None`: hold `credits` against the
  source's total for `day` (UTC `YYYY-MM-DD`), atomically for every thread and process sharing
  the backend; None when that would pass `cap` (or `credits > cap`). `cap == 0` means no cap:
  the reservation holds nothing (`credits == 0`) and books nothing until it is settled. Never
  raises: on a fault it is granted from this process's lease, credits the backend booked for
  it beforehand (Redis), or booked on its fallback ledger (`ledger == "memory"`, SQLite); see
  `siftlib.store.ledger`.
- `settle(reservation, *, actual)`: replace the reservation by what the call cost, `actual`
  credits, booked even past the cap (they are spent). Never raises.
- `release(reservation)`: give back a reservation whose call never went out. Never raises.
  A reservation is settled or released once; one kept (a call that timed out, which the
  provider may well have charged) simply stays booked.
- `daily_credits(*, day) -> dict[str, int]`: credits spent or reserved per source on `day`,
  fallback bookings included. Never raises.
- `problem -> str | None`: one sentence on the current fault (shown by `/healthz`), else None.
- `close()`: let go of the backend; later cache operations raise `StoreError`.

Decisions:

- Key: sha256 over a JSON array of the parts, so no query text can forge another key's parts.
  The sources part names each attempted source with its configured URL (`searxng
  http://127.0.0.1:8888`): a source pointed elsewhere starts from an empty cache.
  The caller class is one of those parts: fleet callers share `fleet`; each restricted caller
  has its own partition `restricted:<name>`, so restricted callers cannot observe each other
  either ("no other caller may observe the work").
- Value: a JSON list of {url, title, snippet, score, source, published, engines}; nothing
  else is ever written (not SearXNG's answers or suggestions: a cache hit carries hits
  only). A value from before `published`/`engines` reads as hits without them.
- Expiry: an entry expires at `now + ttl`, but never after the end of its UTC hour: the key
  holds the hour bucket, so nobody can hit it later, and the store stays bounded by one hour
  of searches.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from typing import Literal, NamedTuple, Protocol

from siftlib.errors import StoreError
from siftlib.hits import Hit

_FIELDS = ("url", "title", "snippet", "score", "source")
_OPTIONAL = {"published": None, "engines": 0}


class Cached(NamedTuple):
    """Hits read from the cache, and when they expire (epoch seconds)."""

    hits: tuple[Hit, ...]
    expires: float


class Reservation(NamedTuple):
    """Credits held against a paid source's daily cap, and the ledger that holds them.

    `ledger` is `"shared"` for the backend every process sees (the SQLite file, a Redis
    server), a lease spent during a fault included, and `"memory"` for this process's fallback
    ledger during a fault (a backend without leases).
    """

    source: str
    day: str
    credits: int
    ledger: Literal["shared", "memory"] = "shared"


class Store(Protocol):
    """What the pipeline needs from a store; each method's terms are in the module docstring."""

    def cache_get(self, key: str, *, now: float) -> Cached | None: ...
    def cache_put(self, key: str, hits: Sequence[Hit], *, now: float, ttl: float) -> None: ...
    def reserve(
        self, source: str, *, day: str, cap: int, credits: int = 1
    ) -> Reservation | None: ...
    def settle(self, reservation: Reservation, *, actual: int) -> None: ...
    def release(self, reservation: Reservation) -> None: ...
    def daily_credits(self, *, day: str) -> dict[str, int]: ...
    @property
    def problem(self) -> str | None: ...
    def close(self) -> None: ...


def expiry(now: float, ttl: float) -> float:
    """Return when an entry put at `now` expires: after `ttl`, at the latest at the hour's end."""
    return min(now + ttl, (now // 3600 + 1) * 3600)


def _norm(query: str) -> str:
    """Return the query as the cache key sees it: trimmed, whitespace collapsed, lowercased."""
    return " ".join(query.split()).lower()


_KEY_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # built once, not per key


def cache_key(
    *, query: str, sources: Sequence[str], k: int, merge: str, hour_bucket: str, caller_class: str
) -> str:
    """Return the cache key: sha256 over the normalised query and every part shaping the answer."""
    return _key(query, tuple(sorted(sources)), k, merge, hour_bucket, caller_class)


# A repeated search is what the cache is for: its key is hashed once, not on every request
# (the JSON and SHA-256 were a sixth of a cache hit's cost). Bounded like the memory front.
@functools.lru_cache(maxsize=1024)
def _key(query: str, sources: tuple[str, ...], k: int, merge: str, hour: str, caller: str) -> str:
    parts = [_norm(query), list(sources), k, merge, hour, caller]
    return hashlib.sha256(_KEY_JSON.encode(parts).encode("utf-8")).hexdigest()


def encode_hits(hits: Sequence[Hit]) -> str:
    """Return the cached value of hits: a JSON list of their fields, nothing else."""
    return json.dumps(
        [{name: getattr(hit, name) for name in (*_FIELDS, *_OPTIONAL)} for hit in hits],
        ensure_ascii=False,
        separators=(",", ":"),
    )


def decode_hits(value: str | bytes) -> tuple[Hit, ...]:
    """Turn a cached value back into hits; anything else is a fault, never a wrong answer."""
    try:
        items = json.loads(value)
        hits = tuple(
            Hit(
                **{name: item[name] for name in _FIELDS},
                **{name: item.get(name, default) for name, default in _OPTIONAL.items()},
            )
            for item in items
        )
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise StoreError("a cached entry is unreadable") from exc
    for hit in hits:
        texts = (hit.url, hit.title, hit.snippet, hit.source)
        score_ok = isinstance(hit.score, int | float) and not isinstance(hit.score, bool)
        facts_ok = (hit.published is None or isinstance(hit.published, str)) and (
            isinstance(hit.engines, int) and not isinstance(hit.engines, bool)
        )
        if not (score_ok and facts_ok and all(isinstance(text, str) for text in texts)):
            raise StoreError("a cached entry is unreadable")
    return hits
