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
- Caps: reserve, settle and release are one Lua script each over exactly one key (so they run
  unchanged on a Redis Cluster), sent by EVALSHA and by EVAL when the server answers NOSCRIPT.
  Reserve creates the counter with a 48 h TTL, set once: past the next midnight whenever in its
  day it was created, whatever clock the caller uses, and long enough for a settle in flight at
  midnight. Settle and release change only an existing counter: a late one never re-creates an
  expired key. Credits of an uncapped source are counted by the reserve script under no cap.
- Cache: the value lives `min(cache_ttl, the rest of the UTC hour)` on the server (`PX`), as
  SQLite's rows do; `sweep` has nothing to do. A miss takes the fill lock (`SET NX PX`, for the
  search timeout, the longest a fill can take); a miss that finds the lock taken polls for the
  value for at most `FILL_WAIT` (1 s, within the request's deadline margin), then searches anyway.
  A put stores the value and drops the lock; a fill that stores nothing (a partial answer)
  leaves it to expire.
- Faults: connect and read timeouts of 50 ms and no client retries (a retried reserve could
  book twice). A refused connection, or `LATE_LIMIT` (3) timeouts in a row, mark the store
  down for `RETRY_AFTER` (1 s), during which nothing waits on it; then the next operation
  tries again, so the store recovers by itself. A single timeout fails its operation only.
  While it is down, cache operations raise `StoreError("unavailable")` (the search goes on
  uncached, warning `store: unavailable`), `problem` says `redis unreachable`, and caps fall
  back to a ledger in this process: per source and day it grants at most `fallback_share` of
  what was left under the cap when the store was last read (the whole share of the cap when it
  never was), so N gateways with share 1/N together stay within what was left. A
  `Reservation` names its ledger, so each settles where it was booked. What the local ledger
  spent, and what settles could not reach the store, is carried into the shared counter by the
  next reserve of that source and day once the store is back. A reserve that timed out may
  still have been booked by the store: that credit stays booked there, unused (the safe
  side), while the search goes on the local ledger.
- Credentials: the password comes from `secret.env` only (config refuses one in the URL, and
  URL options, which would override it). No message, problem or log line carries the URL;
  they name `host:port` at most.
- At open the store is pinged once, and a `maxmemory-policy` other than `noeviction` is
  logged: any evicting policy can drop a cap counter and so reset a cap.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TypeVar, cast
from urllib.parse import unquote, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from siftlib.config import SOURCE_ORDER
from siftlib.errors import StoreError
from siftlib.lazylog import LazyLogger
from siftlib.search.hits import Hit
from siftlib.store.sqlite import Cached, Reservation, decode_hits, encode_hits, expiry

log = LazyLogger("sift")

T = TypeVar("T")

PASSWORD_KEY = "SIFT_STORE_PASSWORD"
CONNECT_TIMEOUT = 0.05
READ_TIMEOUT = 0.05
RETRY_AFTER = 1.0
LATE_LIMIT = 3
FILL_WAIT = 1.0
FILL_POLL = 0.01
COUNTER_TTL = 48 * 3600
_NO_CAP = 2**52  # counting an uncapped source's credits: a cap nothing reaches

# KEYS[1] the day's counter; ARGV credits, cap, ttl, carry (credits settled while the store
# was away, signed). The carry is booked whatever the answer; the credits only under the cap.
_RESERVE = """
local raw = redis.call('GET', KEYS[1])
local used = tonumber(raw or '0')
local total = math.max(used + tonumber(ARGV[4]), 0)
local granted = 0
if total + tonumber(ARGV[1]) <= tonumber(ARGV[2]) then
  total = total + tonumber(ARGV[1])
  granted = 1
end
if not raw then
  redis.call('SET', KEYS[1], total, 'EX', ARGV[3])
elseif total ~= used then
  redis.call('SET', KEYS[1], total, 'KEEPTTL')
end
return {granted, total}
"""
# KEYS[1] the day's counter; ARGV reserved, actual. Nil when the counter is gone.
_SETTLE = """
local raw = redis.call('GET', KEYS[1])
if not raw then return false end
local total = math.max(tonumber(raw) + tonumber(ARGV[2]) - tonumber(ARGV[1]), 0)
redis.call('SET', KEYS[1], total, 'KEEPTTL')
return total
"""
# KEYS[1] the day's counter; ARGV reserved. Nil when the counter is gone.
_RELEASE = """
local raw = redis.call('GET', KEYS[1])
if not raw then return false end
local total = math.max(tonumber(raw) - tonumber(ARGV[1]), 0)
redis.call('SET', KEYS[1], total, 'KEEPTTL')
return total
"""

Slot = tuple[str, str]  # (source, day)


class _Down(Exception):
    """The store cannot be used now."""


class _Script:
    """A Lua script sent by its SHA1, and in full when the server does not know it."""

    def __init__(self, client: redis.Redis, source: str) -> None:
        self._client = client
        self._source = source
        self._sha = hashlib.sha1(source.encode()).hexdigest()

    def __call__(self, key: str, *args: int) -> object:
        try:
            return self._client.evalsha(self._sha, 1, key, *args)
        except redis.exceptions.NoScriptError:
            # EVAL runs it and caches it on the server, so the next EVALSHA finds it.
            return self._client.eval(self._source, 1, key, *args)


class RedisStore:
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
        self._reserve = _Script(client, _RESERVE)
        self._settle = _Script(client, _SETTLE)
        self._release = _Script(client, _RELEASE)
        self._state = threading.Lock()
        self._problem: str | None = None
        self._retry_at = 0.0
        self._late = 0  # operations timed out in a row
        # The local ledger. `seen`: the last shared total read; `unsynced`: settled credits the
        # shared counter has not seen (signed); `held`: local reservations not yet settled;
        # `local`: what the local ledger booked since it last handed over (its allowance).
        self._seen: dict[Slot, int] = defaultdict(int)
        self._unsynced: dict[Slot, int] = defaultdict(int)
        self._held: dict[Slot, int] = defaultdict(int)
        self._local: dict[Slot, int] = defaultdict(int)

    @property
    def problem(self) -> str | None:
        """`redis unreachable` (or another fault, in one sentence) while it is down, else None."""
        with contextlib.suppress(_Down):
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

    def sweep(self, *, now: float) -> int:
        """Delete nothing: the server expires cached answers itself."""
        return 0

    # The daily caps.

    def reserve(self, source: str, *, day: str, cap: int, credits: int = 1) -> Reservation | None:
        """Reserve credits of a paid source before calling it; None at the cap. Never raises."""
        if cap == 0:
            return Reservation(source, day, 0)
        if credits > cap:
            return None
        slot = (source, day)
        granted = self._book(slot, credits=credits, cap=cap)
        if granted is not None:
            return Reservation(source, day, credits) if granted else None
        with self._state:
            allowance = int(self.fallback_share * max(cap - self._seen[slot], 0))
            if self._local[slot] + credits > allowance:
                return None
            self._local[slot] += credits
            self._held[slot] += credits
            return Reservation(source, day, credits, "memory")

    def settle(self, reservation: Reservation, *, actual: int) -> None:
        """Replace a reservation by the credits the call actually cost. Never raises."""
        slot, reserved = (reservation.source, reservation.day), reservation.credits
        if reservation.ledger == "memory":
            self._settle_locally(slot, reserved=reserved, actual=actual)
        elif reserved:
            self._adjust(slot, self._settle, (reserved, actual), delta=actual - reserved)
        elif actual and self._book(slot, credits=actual, cap=_NO_CAP) is None:
            with self._state:  # an uncapped source's credits, counted once the store is back
                self._unsynced[slot] += actual

    def release(self, reservation: Reservation) -> None:
        """Give back a reservation whose call never went out. Never raises."""
        slot, reserved = (reservation.source, reservation.day), reservation.credits
        if reservation.ledger == "memory":
            self._settle_locally(slot, reserved=reserved, actual=0)
        elif reserved:
            self._adjust(slot, self._release, (reserved,), delta=-reserved)

    def daily_credits(self, *, day: str) -> dict[str, int]:
        """Return the credits spent (or reserved) per source on a UTC day. Never raises."""
        names = SOURCE_ORDER
        keys = [self._cap_key((name, day)) for name in names]
        try:
            values = self._call(lambda client: client.mget(keys))
        except _Down:
            values = [None] * len(names)
        with self._state:
            for name, value in zip(names, values, strict=True):
                if value is not None:
                    self._seen[(name, day)] = int(value)
            known = {s for s, d in (*self._seen, *self._unsynced, *self._held) if d == day}
            return {name: self._total((name, day)) for name in sorted(known)}

    def close(self) -> None:
        """Close the connections to the store; later cache operations raise StoreError."""
        with self._state:
            self._problem, self._retry_at = "the store is closed", float("inf")
        self._client.close()

    def _book(self, slot: Slot, *, credits: int, cap: int) -> bool | None:
        """Book credits in the shared counter with the carry; None when the store is down."""
        with self._state:
            carry, self._unsynced[slot] = self._unsynced[slot], 0
        try:
            answer = self._call(
                lambda client: self._reserve(self._cap_key(slot), credits, cap, COUNTER_TTL, carry)
            )
        except _Down:
            with self._state:
                self._unsynced[slot] += carry
            return None
        granted, total = cast(list[int], answer)
        with self._state:
            self._seen[slot] = int(total)
            # What the local ledger settled is in the shared counter now; a new outage starts
            # its allowance afresh from that total.
            self._local[slot] = self._held[slot] + max(self._unsynced[slot], 0)
        return bool(granted)

    def _settle_locally(self, slot: Slot, *, reserved: int, actual: int) -> None:
        """Settle a reservation of the local ledger; the shared counter gets it by the carry."""
        with self._state:
            self._held[slot] -= reserved
            self._local[slot] += actual - reserved
            self._unsynced[slot] += actual

    def _adjust(self, slot: Slot, script: _Script, args: tuple[int, ...], *, delta: int) -> None:
        """Run settle or release on the shared counter; while down, remember the difference."""
        try:
            total = self._call(lambda client: script(self._cap_key(slot), *args))
        except _Down:
            with self._state:
                self._unsynced[slot] += delta
            return
        if total is not None:
            with self._state:
                self._seen[slot] = int(total)  # type: ignore[call-overload]

    def _total(self, slot: Slot) -> int:
        return self._seen[slot] + self._unsynced[slot] + self._held[slot]

    # Keys and faults.

    def _cap_key(self, slot: Slot) -> str:
        return f"{self.prefix}cap:{slot[0]}:{slot[1]}"

    def _search_key(self, key: str) -> str:
        return f"{self.prefix}search:{key}"

    def _fill_key(self, key: str) -> str:
        return f"{self.prefix}fill:{key}"

    def _cache_call(self, operation: Callable[[redis.Redis], T]) -> T:
        try:
            return self._call(operation)
        except _Down:
            raise StoreError("unavailable") from None

    def _call(self, operation: Callable[[redis.Redis], T]) -> T:
        """Run one operation on the store, unless it is down; a failure marks it down."""
        if self._problem is not None and time.monotonic() < self._retry_at:
            raise _Down
        try:
            result = operation(self._client)
        except redis.exceptions.AuthenticationError:
            self._fail("redis refused the password (SIFT_STORE_PASSWORD)")
            raise _Down from None
        except redis.exceptions.ResponseError as exc:
            # An error reply's first word names its kind (OOM, READONLY, NOPERM…).
            kind = str(exc).split(" ", 1)[0] or "error"
            self._fail(f"redis refused the command ({kind})")
            raise _Down from None
        except redis.exceptions.TimeoutError:
            # One late reply fails its operation only: a busy moment must not send a whole
            # second of searches upstream uncached.
            with self._state:
                self._late += 1
                late = self._late
            if late >= LATE_LIMIT:
                self._fail("redis unreachable")
            raise _Down from None
        except (redis.exceptions.RedisError, OSError):
            self._fail("redis unreachable")
            raise _Down from None
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
            "store: %s at %s; searches are served uncached and caps kept on a local ledger "
            "until it is back",
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
