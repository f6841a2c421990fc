"""The shared store: one search cache and one daily budget for several gateways (store.md).

Every gateway of a fleet points `[server] store` at the same Redis (>= 7) or Valkey (>= 7.2)
and so shares the cache and, above all, the daily caps:

    store = RecentHits(open_redis_store("redis://10.0.0.5:6379/0",
                                        password=secrets.get(PASSWORD_KEY), prefix="sift:",
                                        fallback_share=0.5, fill_timeout=8.0))
    cached = store.cache_get(key, now=now)    # None on a miss: this gateway fills the key
    reservation = store.reserve("tavily", day="2026-11-30", cap=500)
    if reservation is not None:
        ...
        store.settle(reservation, actual=credits)

It implements the `Store` protocol of `siftlib.store.sqlite` (its terms are in that docstring) and,
like SQLite, sits behind `RecentHits`, which answers recent hits from memory.

Decisions (store.md §2, and where it is silent):

- Keys: `<prefix>cap:<source>:<YYYY-MM-DD>` holds a day's credits as an integer;
  `<prefix>search:<cache key>` a cached answer under the SQLite key (search.md §6, so the
  partitions stay apart), as `<expires> <the SQLite value>`: the protocol hands the expiry
  back, and the caller's clock decides it as it does for SQLite; `<prefix>fill:<cache key>`
  the fill lock.
- Caps: the shared `Ledger` (`siftlib.store.ledger`) on three Lua scripts
  (`siftlib.store.redis_counter`), each over one counter and its record in the same Cluster
  hash slot (so they run unchanged on a Redis Cluster), sent by EVALSHA and by EVAL when the
  server answers NOSCRIPT. Booking (a reserve, and the hand-over
  of what a gateway owes) creates the counter with a 48 h TTL, set once: past the next
  midnight whenever in its day it was created, whatever clock the caller uses, and long
  enough for a settle in flight at midnight. Adjusting (a settle or release) changes only an
  existing counter: a late one never re-creates an expired key.
- The record, `<prefix>ledger:{<counter key>}` (a hash, 48 h from its last write), holds the
  ids of the adjustments applied, so one that timed out and reached the store after all is
  applied once, and the highest floor sent after a fault, so a counter that came back empty
  is raised to the most any gateway knew. A plain reserve writes no record, but a mark of its
  own, `<prefix>reserve:{<counter key>}:<id>` (10 minutes): a reserve whose reply was late is
  tried again under its id and booked once, and one withdrawn is refused if it runs later.
- Cache: the value lives `min(cache_ttl, the rest of the UTC hour)` on the server (`PX`), as
  SQLite's rows do; `sweep` has nothing to do. A miss takes the fill lock (`SET NX PX`, for the
  search timeout, the longest a fill can take); a miss that finds the lock taken polls for the
  value for at most `FILL_WAIT` (1 s, within the request's deadline margin), then searches anyway.
  A put stores the value and drops the lock; a fill that stores nothing (a partial answer)
  leaves it to expire.
- Faults: connect and read timeouts of 50 ms and no client retries (the ledger retries a
  reserve itself, under its id). A refused connection, or `LATE_LIMIT` (3) timeouts in a
  row, mark the store down for `RETRY_AFTER` (1 s), during which nothing waits on it; then
  the next operation tries again, so the store recovers by itself. A single timeout fails
  its operation only. While it is down, cache operations raise `StoreError("unavailable")`
  (the search goes on uncached, warning `store: unavailable`), `problem` says
  `redis unreachable`, and paid sources are granted from this gateway's lease: credits the
  ledger booked on the store beforehand (at most `fallback_share` of what was left), so an
  outage can never take the fleet past a cap; what it owes, and its floors, are handed over
  when the store is back, and for `SETTLE_AFTER` (2 s) after that grants still come from the
  lease only, so no gateway trusts a total before every gateway handed over.
- Credentials: the password comes from `secret.env` only (config refuses one in the URL, and
  URL options, which would override it). No message, problem or log line carries the URL;
  they name `host:port` at most.
- At open the store is pinged once, and a `maxmemory-policy` other than `noeviction` is
  logged: any evicting policy can drop a cap counter and so reset a cap.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar, cast
from urllib.parse import unquote, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from siftlib.errors import StoreError
from siftlib.hits import Hit
from siftlib.lazylog import LazyLogger
from siftlib.store.base import Cached, decode_hits, encode_hits, expiry
from siftlib.store.counter import Slot, Unavailable
from siftlib.store.ledger import Ledger, LedgerCaps
from siftlib.store.redis_counter import RedisCounter

log = LazyLogger("sift")

T = TypeVar("T")

PASSWORD_KEY = "SIFT_STORE_PASSWORD"
CONNECT_TIMEOUT = 0.05
READ_TIMEOUT = 0.05
RETRY_AFTER = 1.0
LATE_LIMIT = 3
SETTLE_AFTER = 2.0
FILL_WAIT = 1.0
FILL_POLL = 0.01


class RedisStore(LedgerCaps):
    """The shared store: cache and daily caps on a Redis-protocol server, for a fleet."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        where: str,
        prefix: str,
        fallback_share: float,
        fill_timeout: float,
        fill_wait: float = FILL_WAIT,
    ) -> None:
        self._client = client
        self.where = where
        self.prefix = prefix
        self.fallback_share = fallback_share
        self._fill_ms = max(1, round(fill_timeout * 1000))
        self._fill_wait = fill_wait
        self._state = threading.Lock()
        self._problem: str | None = None
        self._retry_at = 0.0
        self._late = 0  # operations timed out in a row
        self._ledger = Ledger(
            RedisCounter(self), share=fallback_share, leases=True, settle_after=SETTLE_AFTER
        )

    @property
    def problem(self) -> str | None:
        """`redis unreachable` (or another fault, in one sentence) while it is down, else None."""
        with contextlib.suppress(Unavailable):
            self._call(lambda client: client.ping())
        return self._problem

    # The cache.

    def cache_get(self, key: str, *, now: float) -> Cached | None:
        """Return the entry under `key`; on a miss, wait briefly for another gateway's fill."""
        value_key, lock_key = self._search_key(key), self._fill_key(key)
        deadline = time.monotonic() + self._fill_wait
        while True:
            cached = self._fresh(value_key, now)
            if cached is not None:
                return cached
            if self._cache_call(
                lambda client: client.set(lock_key, b"1", nx=True, px=self._fill_ms)
            ):
                # A fill may have landed (dropping its lock) between the read and the lock.
                cached = self._fresh(value_key, now)
                if cached is not None:
                    self._cache_call(lambda client: client.delete(lock_key))
                return cached
            if time.monotonic() >= deadline:
                return None
            time.sleep(FILL_POLL)

    def _fresh(self, value_key: str, now: float) -> Cached | None:
        """Read an entry, or None when it is absent or expired by the caller's clock."""
        value = self._cache_call(lambda client: client.get(value_key))
        if value is None:
            return None
        cached = _decode(cast(bytes, value))
        return cached if cached.expires > now else None

    def cache_put(self, key: str, hits: Sequence[Hit], *, now: float, ttl: float) -> None:
        """Store hits under `key` until `expiry(now, ttl)`, on the server too; drop the lock."""
        expires = expiry(now, ttl)
        px = max(1, round((expires - now) * 1000))
        value = f"{expires!r} {encode_hits(hits)}"

        def put(client: redis.Redis) -> None:
            with client.pipeline(transaction=False) as pipe:
                pipe.set(self._search_key(key), value, px=px)
                pipe.delete(self._fill_key(key))
                pipe.execute()

        self._cache_call(put)

    # The daily caps.

    def close(self) -> None:
        """Hand over what the ledger owes, then close the connections; later cache operations
        raise StoreError."""
        self._ledger.close()
        with self._state:
            self._problem, self._retry_at = "the store is closed", float("inf")
        self._client.close()

    # Keys and faults.

    def _cap_keys(self, slot: Slot) -> tuple[str, str]:
        """The counter of a source's day and its record, in one Cluster hash slot."""
        counter = f"{self.prefix}cap:{slot[0]}:{slot[1]}"
        # A prefix carrying a hash tag puts both in its slot; otherwise the record's tag is
        # the counter's whole name, which is what the counter hashes by.
        return counter, f"{self.prefix}ledger:{{{counter}}}"

    def _search_key(self, key: str) -> str:
        return f"{self.prefix}search:{key}"

    def _fill_key(self, key: str) -> str:
        return f"{self.prefix}fill:{key}"

    def _cache_call(self, operation: Callable[[redis.Redis], T]) -> T:
        try:
            return self._call(operation)
        except Unavailable:
            raise StoreError("unavailable") from None

    def _call(self, operation: Callable[[redis.Redis], T]) -> T:
        """Run one operation on the store, unless it is down; raise `Unavailable` if it fails."""
        if self._problem is not None and time.monotonic() < self._retry_at:
            raise Unavailable(sent=False)
        try:
            result = operation(self._client)
        except redis.exceptions.AuthenticationError:
            self._fail("redis refused the password (SIFT_STORE_PASSWORD)")
            raise Unavailable from None
        except redis.exceptions.ResponseError as exc:
            # An error reply's first word names its kind (OOM, READONLY, NOPERM…).
            kind = str(exc).split(" ", 1)[0] or "error"
            self._fail(f"redis refused the command ({kind})")
            raise Unavailable from None
        except redis.exceptions.TimeoutError:
            # One late reply fails its operation only: a busy moment must not send a whole
            # second of searches upstream uncached.
            with self._state:
                self._late += 1
                late = self._late
            if late < LATE_LIMIT:
                raise Unavailable(outage=False) from None
            self._fail("redis unreachable")
            raise Unavailable from None
        except (redis.exceptions.RedisError, OSError):
            self._fail("redis unreachable")
            raise Unavailable from None
        self._late = 0
        if self._problem is not None:
            with self._state:
                if self._problem is not None:
                    self._problem = None
                    log.warning("store: redis at %s is reachable again", self.where)
        return result

    def _fail(self, problem: str) -> None:
        with self._state:
            self._retry_at = time.monotonic() + RETRY_AFTER
            if self._problem == problem:
                return
            self._problem = problem
        log.warning(
            "store: %s at %s; searches are served uncached and paid sources spend only this "
            "gateway's lease until it is back",
            problem,
            self.where,
        )


def open_redis_store(
    url: str,
    *,
    password: str | None,
    prefix: str,
    fallback_share: float,
    fill_timeout: float,
    fill_wait: float = FILL_WAIT,
) -> RedisStore:
    """Connect to a Redis-protocol store named by a config URL; never raises on a store fault."""
    client = connect(url, password=password)
    where = describe_url(url)
    store = RedisStore(
        client,
        where=where,
        prefix=prefix,
        fallback_share=fallback_share,
        fill_timeout=fill_timeout,
        fill_wait=fill_wait,
    )
    if store.problem is None:  # a store down at start is logged and used once it is back
        _check_eviction(client, where)
    return store


def connect(url: str, *, password: str | None) -> redis.Redis:
    """Return a client for a store URL (no I/O yet): sift's timeouts, no retries."""
    parts = urlsplit(url)
    host, port, db = _address(url)
    return redis.Redis(
        host=host,
        port=port,
        db=db,
        username=unquote(parts.username) if parts.username else None,
        password=password,
        ssl=parts.scheme == "rediss",
        socket_connect_timeout=CONNECT_TIMEOUT,
        socket_timeout=READ_TIMEOUT,
        retry=Retry(NoBackoff(), 0),
        driver_info=None,  # no CLIENT SETINFO round trips on each new connection
        protocol=2,
    )


def describe_url(url: str) -> str:
    """Name a store URL for logs: `host:port/db`, never its user or anything else."""
    host, port, db = _address(url)
    return f"{host}:{port}/{db}"


def _address(url: str) -> tuple[str, int, int]:
    parts = urlsplit(url)
    return parts.hostname or "localhost", parts.port or 6379, int(parts.path.strip("/") or 0)


def _check_eviction(client: redis.Redis, where: str) -> None:
    """Log an evicting memory policy, which can drop a cap counter and so reset a cap."""
    try:
        policy = client.config_get("maxmemory-policy")
    except (redis.exceptions.RedisError, OSError):
        return  # CONFIG may be refused to this user (or renamed): nothing to check
    value = policy.get("maxmemory-policy", b"noeviction")
    name = value.decode() if isinstance(value, bytes) else str(value)
    if name != "noeviction":
        log.warning(
            "store: redis at %s evicts keys (maxmemory-policy %s): a cap counter can be "
            "dropped and its cap reset; set maxmemory-policy noeviction",
            where,
            name,
        )


def _decode(value: bytes) -> Cached:
    """Turn a stored value, `<expires> <the SQLite value>`, back into an entry, or raise."""
    head, _, body = value.partition(b" ")
    try:
        expires = float(head)
    except ValueError:
        raise StoreError("a cached entry is unreadable") from None
    return Cached(decode_hits(body), expires)
