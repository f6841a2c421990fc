"""The fetch cache: complete, successful page reads kept for a while (issue 40).

    cache = open_fetch_cache(config, secrets)          # None when cache_max_age is 0
    key = fetch_key(request, caller_class="fleet")
    entry = cache.get(key, now=now, max_age=600.0)     # CachedPage(value, stored_at) or None
    cache.put(key, value, now=now)                     # value: the encoded answer (bytes)

Agents read the same documentation pages again and again; a read inside its freshness
window costs no upstream request. The store is the configured one: SQLite by default, the
shared Redis/Valkey server when `[server] store` names one.

Decisions:
- Key: sha256 over a JSON array of the canonical URL (`siftlib.search.canonical_url`) and every
  option that shapes the answer (format and further formats, main content, tag filters, PDF
  parsing and its page limit, `max_chars`, rendering and its wait) and the caller class:
  `fleet`, or a restricted caller's own `restricted:<name>`, exactly as the search cache
  partitions, so a fleet caller never observes a restricted caller's page and restricted
  callers only their own.
- Freshness as Firecrawl defines it: an entry younger than the request's `maxAge` is served
  without a fetch; `maxAge` 0 always fetches. `[fetch] cache_max_age` is the default when a
  request names none and the longest any entry lives (a larger `maxAge` is capped to it);
  0 turns the cache off.
- Size: `[fetch] cache_max_bytes` bounds the stored answers; past it the oldest entries are
  evicted first. On Redis every entry carries a TTL of `cache_max_age` too, and one script
  keeps the index, the sizes and the total in step, so gateways sharing the server share
  the bound.
- SQLite: its own file beside the search cache (`fetch-cache.db` next to `[server] db`):
  page bodies of up to megabytes do not share WAL checkpoints or locks with the search cache
  and the credit ledger, and a restart keeps every entry.
- A cache that fails is served around: a read or write fault is logged once and the fetch
  goes on uncached, as for the search cache.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from siftlib.lazylog import LazyLogger

if TYPE_CHECKING:
    from siftlib.config import Config, Secrets
    from siftlib.fetch.fetcher import FetchRequest

__all__ = ["CachedPage", "FetchCache", "fetch_key", "open_fetch_cache"]

log = LazyLogger("sift")

FILE_NAME = "fetch-cache.db"
_BUSY_TIMEOUT = 1.0


class CachedPage(NamedTuple):
    """One stored answer and when it was stored (epoch seconds)."""

    value: bytes
    stored_at: float


class FetchCache(Protocol):
    """What the fetcher needs of a cache backend; faults raise `OSError`-free `CacheFault`."""

    def get(self, key: str, *, now: float, max_age: float) -> CachedPage | None: ...
    def put(self, key: str, value: bytes, *, now: float) -> None: ...
    def close(self) -> None: ...


class CacheFault(Exception):
    """The cache could not be read or written (the fetch goes on uncached)."""


def fetch_key(request: FetchRequest, *, caller_class: str) -> str:
    """Return the cache key of a fetch: what shapes its answer, and who may see it."""
    parts: list[Any] = [
        _canonical(request.url),
        request.format,
        list(request.also),
        request.main_content,
        list(request.include),
        list(request.exclude),
        request.pdf,
        request.pdf_max_pages,
        request.max_chars,
        request.render,
        request.wait_for,
        caller_class,
    ]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


@functools.lru_cache(maxsize=1024)
def _canonical(url: str) -> str:
    """Return a URL's canonical form; the same few pages are asked for again and again."""
    from siftlib.search.canonical_url import canonical_url

    return canonical_url(url)


class SQLiteFetchCache:
    """Entries in a SQLite file: one row per key, evicted oldest first past `max_bytes`."""

    def __init__(self, path: Path, *, max_bytes: int, ttl: float) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.ttl = ttl
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            db = sqlite3.connect(
                self.path, timeout=_BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
            )
            with contextlib.suppress(OSError):
                self.path.chmod(0o600)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS fetch_cache (key TEXT PRIMARY KEY, value BLOB"
                " NOT NULL, size INTEGER NOT NULL, stored_at REAL NOT NULL)"
            )
            db.execute("CREATE INDEX IF NOT EXISTS fetch_cache_age ON fetch_cache (stored_at)")
            self._db = db
        return self._db

    def get(self, key: str, *, now: float, max_age: float) -> CachedPage | None:
        """Return the entry under `key` stored less than `max_age` seconds ago, else None."""
        oldest = now - min(max_age, self.ttl)
        with self._lock, _faults():
            row = (
                self._connection()
                .execute(
                    "SELECT value, stored_at FROM fetch_cache WHERE key = ? AND stored_at > ?",
                    (key, oldest),
                )
                .fetchone()
            )
        return None if row is None else CachedPage(bytes(row[0]), float(row[1]))

    def put(self, key: str, value: bytes, *, now: float) -> None:
        """Store `value` under `key`, then drop expired entries and the oldest past the bound."""
        if len(value) > self.max_bytes:
            return
        with self._lock, _faults():
            db = self._connection()
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    "INSERT OR REPLACE INTO fetch_cache VALUES (?, ?, ?, ?)",
                    (key, value, len(value), now),
                )
                db.execute("DELETE FROM fetch_cache WHERE stored_at <= ?", (now - self.ttl,))
                (total,) = db.execute("SELECT COALESCE(SUM(size), 0) FROM fetch_cache").fetchone()
                if total > self.max_bytes:
                    _evict_oldest(db, total - self.max_bytes)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def _evict_oldest(db: sqlite3.Connection, excess: int) -> None:
    """Delete the oldest entries until `excess` bytes are gone."""
    freed = 0
    doomed = []
    for key, size in db.execute("SELECT key, size FROM fetch_cache ORDER BY stored_at"):
        doomed.append((key,))
        freed += size
        if freed >= excess:
            break
    db.executemany("DELETE FROM fetch_cache WHERE key = ?", doomed)


# KEYS: value key, index (sorted set: key → stored at), sizes (hash), total (counter).
# ARGV: key, value, stored at, ttl, max bytes, value key prefix.
_PUT = """
local old = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
local size = string.len(ARGV[2])
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[4])
redis.call('HSET', KEYS[3], ARGV[1], size)
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local total = redis.call('INCRBY', KEYS[4], size - old)
local function drop(member)
  local gone = tonumber(redis.call('HGET', KEYS[3], member) or '0')
  redis.call('HDEL', KEYS[3], member)
  redis.call('ZREM', KEYS[2], member)
  redis.call('DEL', ARGV[6] .. member)
  total = redis.call('DECRBY', KEYS[4], gone)
end
local expired = tonumber(ARGV[3]) - tonumber(ARGV[4])
for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', expired)) do
  drop(member)
end
while total > tonumber(ARGV[5]) do
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)
  if #oldest == 0 then break end
  drop(oldest[1])
end
return total
"""


class RedisFetchCache:
    """Entries on a Redis/Valkey server: TTL keys, and a size-bounded index under the prefix."""

    def __init__(self, client: Any, *, prefix: str, max_bytes: int, ttl: float) -> None:
        self.client = client
        self.prefix = f"{prefix}fetch:"
        self.max_bytes = max_bytes
        self.ttl = ttl
        self._put = client.register_script(_PUT)

    def get(self, key: str, *, now: float, max_age: float) -> CachedPage | None:
        """Return the entry under `key` stored less than `max_age` seconds ago, else None."""
        with _faults():
            raw = self.client.get(self.prefix + "page:" + key)
        if raw is None:
            return None
        stored_at, _, value = bytes(raw).partition(b"\n")
        try:
            at = float(stored_at)
        except ValueError:
            return None
        return CachedPage(value, at) if at > now - min(max_age, self.ttl) else None

    def put(self, key: str, value: bytes, *, now: float) -> None:
        """Store `value` under `key` with a TTL; evict the oldest entries past the bound."""
        if len(value) > self.max_bytes:
            return
        stored = repr(now).encode() + b"\n" + value
        keys = [self.prefix + "page:" + key, *(self.prefix + name for name in _INDEX_KEYS)]
        args = [key, stored, now, max(int(self.ttl), 1), self.max_bytes, self.prefix + "page:"]
        with _faults():
            self._put(keys=keys, args=args)

    def close(self) -> None:
        """Let go of the connection pool."""
        with contextlib.suppress(Exception):
            self.client.close()


_INDEX_KEYS = ("index", "sizes", "total")


@contextlib.contextmanager
def _faults() -> Any:
    """Turn a backend's error into `CacheFault`."""
    try:
        yield
    except CacheFault:
        raise
    except Exception as exc:  # sqlite3.Error, redis.RedisError, OSError: all mean "uncached"
        raise CacheFault(type(exc).__name__) from None


def open_fetch_cache(config: Config, secrets: Secrets) -> FetchCache | None:
    """Open the fetch cache in the configured store; None when `cache_max_age` is 0."""
    settings = config.fetch
    if settings.cache_max_age <= 0 or settings.cache_max_bytes <= 0:
        return None
    if config.store == "sqlite":
        return SQLiteFetchCache(
            config.db.with_name(FILE_NAME),
            max_bytes=settings.cache_max_bytes,
            ttl=settings.cache_max_age,
        )
    from siftlib.store.factory import open_configured_client

    return RedisFetchCache(
        open_configured_client(config, secrets),
        prefix=config.store_prefix,
        max_bytes=settings.cache_max_bytes,
        ttl=settings.cache_max_age,
    )
