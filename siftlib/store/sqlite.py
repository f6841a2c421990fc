"""The store: the search-result cache and the daily credit ledger of paid sources (search.md §6).

The pipeline sees only the `Store` protocol below. `open_store` gives the embedded default:
`SQLiteStore`, one file (`server.db`, WAL) shared by every command and every sift process on
the host, behind `RecentHits` (`siftlib.store.recent`), which answers recent hits from memory:

    store = open_store(config.db)
    key = cache_key(query=q, sources=["searxng", "tavily"], k=8, merge="rrf",
                    hour_bucket="2026-11-30T04", caller_class="fleet")
    cached = store.cache_get(key, now=now)          # Cached(hits, expires), or None on a miss
    reservation = store.reserve("tavily", day="2026-11-30", cap=500)    # before the call
    if reservation is not None:                     # None: at the cap, do not call
        ...
        store.settle(reservation, actual=credits)   # or store.release(reservation) if unsent

The protocol, for every backend (this SQLite file, a shared Redis/Valkey server) and for the
memory front that wraps them:

- `cache_get(key, *, now) -> Cached | None`: the hits stored under `key` with their expiry
  (epoch seconds), or None when absent or `expires <= now`; never an expired entry. Raises
  `StoreError` on a fault (the caller then searches uncached).
- `cache_put(key, hits, *, now, ttl)`: store `hits` until `expiry(now, ttl)`, which is at the
  latest the end of the UTC hour. Raises `StoreError` on a fault.
- `sweep(*, now) -> int`: delete expired entries and return how many. Never raises.
- `reserve(source, *, day, cap, credits=1) -> Reservation | None`: hold `credits` against the
  source's total for `day` (UTC `YYYY-MM-DD`), atomically for every thread and process sharing
  the backend; None when that would pass `cap` (or `credits > cap`). `cap == 0` means no cap:
  the reservation holds nothing (`credits == 0`) and books nothing until it is settled. Never
  raises: on a fault it is booked in this process's memory (`ledger == "memory"`), which
  starts from the last total read, so the cap still holds within the process.
- `settle(reservation, *, actual)`: replace the reservation by what the call cost, `actual`
  credits, booked even past the cap (they are spent). Never raises.
- `release(reservation)`: give back a reservation whose call never went out. Never raises.
  A reservation is settled or released once; one kept (a call that timed out, which the
  provider may well have charged) simply stays booked.
- `daily_credits(*, day) -> dict[str, int]`: credits spent or reserved per source on `day`,
  memory bookings included. Never raises.
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
  only). A row from before `published`/`engines` reads as hits without them.
- Expiry: a row expires at `now + ttl`, but never after the end of its UTC hour: the key holds
  the hour bucket, so nobody can hit it later, and the file stays bounded by one hour of
  searches. Expired rows are never served; `sweep()` deletes them, and so do a store's first
  `cache_put` and every 256th after it.
- Recent hits are answered from memory by `RecentHits`, not here: this class always reads
  the file, so any backend gets the same front.
- Threads: writes (puts, sweeps, the ledger) share one connection behind a lock, so threads
  queue in Python instead of in SQLite's sleeping busy handler. Lookups take a connection of
  their own from a pool and never wait on that lock: a put stuck for up to the busy timeout
  on another process's write lock must not stall this process's cache hits (WAL readers are
  never blocked by a writer), and a lock held across SQLite's release of the GIL would make
  waiting readers pay for the holder's rescheduling. Pooled rather than per thread, because
  the server starts a thread per connection (opening one costs ~130 µs).
- Processes: a reservation is one guarded upsert, atomic inside SQLite, so threads and
  processes sharing the file never pass the cap. The busy timeout is 1 s; a lock held longer
  is a fault for that operation only. `settle` records the actual credits even past the cap
  (they are spent); `release` gives an unused reservation back. The `credits` table keeps one
  row per source and day as history (a few bytes a day); nothing sweeps it.
- Faults never fail a search. A corrupt, read-only or unopenable file, or one written by a
  newer sift, disables the file for the life of the process: `problem` says so, cache
  operations raise `StoreError`, and the file is left exactly as it was (a corrupt file is
  logged with its path and never replaced; move it aside to start afresh). A locked file is a
  fault of that one operation. A file with no write permission bit counts as read-only even
  for root, as its owner intended.
- Cap accounting never raises: without the file, credits go to an in-memory ledger per
  (source, day), which starts from the last total this process read from the file, so the
  cap still holds within the process. What was settled in memory is written to the file by
  the next cap operation on that source and day that reaches it. A `Reservation` names the
  ledger that holds it, so a settle after the fault has ended books its credits exactly once.
  `sweep` and `daily_credits` never raise either.
- Files: the directories sift creates for the file are 0700 and a new file is 0600 (SQLite
  gives its `-wal` and `-shm` the file's mode), whatever the umask, so no other local user
  can read the cache or swap `cache.db`. An existing directory or file keeps the mode its
  owner gave it.
- Schema: `PRAGMA user_version`; `_MIGRATIONS[n]` takes version n to n + 1 inside one
  `BEGIN IMMEDIATE`, so two processes starting together migrate once.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol, TypeVar

from siftlib.errors import StoreError
from siftlib.lazylog import LazyLogger
from siftlib.search.hits import Hit

if TYPE_CHECKING:
    from siftlib.config import Config, Secrets

log = LazyLogger("sift")

T = TypeVar("T")

BUSY_TIMEOUT = 1.0
SWEEP_EVERY = 256
_FIELDS = ("url", "title", "snippet", "score", "source")
_OPTIONAL = {"published": None, "engines": 0}

_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 0 → 1
        "CREATE TABLE search (key TEXT PRIMARY KEY, expires REAL NOT NULL, hits TEXT NOT NULL)",
        "CREATE INDEX search_expires ON search (expires)",
        "CREATE TABLE credits (day TEXT NOT NULL, source TEXT NOT NULL,"
        " used INTEGER NOT NULL, PRIMARY KEY (day, source)) WITHOUT ROWID",
    ),
)

_RESERVE = """
INSERT INTO credits (day, source, used) VALUES (?, ?, ?)
ON CONFLICT (day, source) DO UPDATE SET used = used + excluded.used
WHERE used + excluded.used <= ?
RETURNING used
"""
_ADD = """
INSERT INTO credits (day, source, used) VALUES (?, ?, max(?, 0))
ON CONFLICT (day, source) DO UPDATE SET used = max(used + ?, 0)
RETURNING used
"""


class Cached(NamedTuple):
    """Hits read from the cache, and when they expire (epoch seconds)."""

    hits: tuple[Hit, ...]
    expires: float


class Reservation(NamedTuple):
    """Credits held against a paid source's daily cap, and the ledger that holds them.

    `ledger` is `"shared"` for the backend every process sees (the SQLite file, a Redis
    server) and `"memory"` for this process's fallback ledger during a fault.
    """

    source: str
    day: str
    credits: int
    ledger: Literal["shared", "memory"] = "shared"


class Store(Protocol):
    """What the pipeline needs from a store; each method's terms are in the module docstring."""

    def cache_get(self, key: str, *, now: float) -> Cached | None: ...
    def cache_put(self, key: str, hits: Sequence[Hit], *, now: float, ttl: float) -> None: ...
    def sweep(self, *, now: float) -> int: ...
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


class SQLiteStore:
    """The embedded store: one SQLite file shared by every sift process on the host."""

    def __init__(self, path: Path, conn: sqlite3.Connection | None, problem: str | None) -> None:
        self.path = path
        self._conn = conn
        self._problem = problem
        self._ready = False
        self._lock = threading.RLock()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._puts = 0
        # The in-memory ledger: the last total read from the file, plus what the file has not
        # seen (signed), plus reservations made in memory and not yet settled.
        self._seen: dict[tuple[str, str], int] = defaultdict(int)
        self._unsynced: dict[tuple[str, str], int] = defaultdict(int)
        self._held: dict[tuple[str, str], int] = defaultdict(int)

    @property
    def problem(self) -> str | None:
        """A one-sentence description of the current fault, else None (a lock clears on success)."""
        return self._problem

    def cache_get(self, key: str, *, now: float) -> Cached | None:
        """Return the cached hits under `key`, or None when there are none or they expired."""
        row = self._read(
            lambda db: db.execute(
                "SELECT hits, expires FROM search WHERE key = ? AND expires > ?", (key, now)
            ).fetchone()
        )
        return None if row is None else Cached(decode_hits(row[0]), row[1])

    def cache_put(self, key: str, hits: Sequence[Hit], *, now: float, ttl: float) -> None:
        """Store hits under `key` until `now + ttl`, at the latest the end of the UTC hour."""
        value = encode_hits(hits)
        expires = expiry(now, ttl)

        def put(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT OR REPLACE INTO search (key, expires, hits) VALUES (?, ?, ?)",
                (key, expires, value),
            )
            # The first put sweeps too, so one-shot `sift search --local` runs clean up as well.
            if self._puts % SWEEP_EVERY == 0:
                db.execute("DELETE FROM search WHERE expires <= ?", (now,))

        self._run(put)
        self._puts += 1

    def sweep(self, *, now: float) -> int:
        """Delete expired rows and return how many went; a fault deletes nothing (never raises)."""
        try:
            return self._run(
                lambda db: db.execute("DELETE FROM search WHERE expires <= ?", (now,)).rowcount
            )
        except StoreError:
            return 0

    def reserve(self, source: str, *, day: str, cap: int, credits: int = 1) -> Reservation | None:
        """Reserve credits of a paid source before calling it; None at the cap. Never raises."""
        if cap == 0:
            return Reservation(source, day, 0)
        if credits > cap:
            return None
        slot = (source, day)
        with self._lock:
            try:
                self._sync(slot)
                granted, used = self._run(lambda db: _reserve(db, slot, cap=cap, credits=credits))
            except StoreError:
                if self._total(slot) + credits > cap:
                    return None
                self._unsynced[slot] += credits
                self._held[slot] += credits
                return Reservation(source, day, credits, "memory")
            self._seen[slot] = used
            return Reservation(source, day, credits) if granted else None

    def settle(self, reservation: Reservation, *, actual: int) -> None:
        """Replace a reservation by the credits the call actually cost. Never raises."""
        if reservation.credits or actual:
            self._adjust(reservation, actual=actual)

    def release(self, reservation: Reservation) -> None:
        """Give back a reservation whose call never went out. Never raises."""
        if reservation.credits:
            self._adjust(reservation, actual=0)

    def daily_credits(self, *, day: str) -> dict[str, int]:
        """Return the credits spent (or reserved) per source on a UTC day. Never raises."""
        with self._lock:
            try:
                rows = self._run(
                    lambda db: db.execute(
                        "SELECT source, used FROM credits WHERE day = ?", (day,)
                    ).fetchall()
                )
            except StoreError:
                rows = []
            for source, used in rows:
                self._seen[(source, day)] = used
            names = {s for s, d in (*self._seen, *self._unsynced) if d == day}
            return {name: self._total((name, day)) for name in sorted(names)}

    def close(self) -> None:
        """Close the database file; later cache operations raise StoreError."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
                self._problem = self._problem or "the store is closed"
            self._close_readers()

    def _total(self, slot: tuple[str, str]) -> int:
        return self._seen[slot] + self._unsynced[slot]

    def _adjust(self, reservation: Reservation, *, actual: int) -> None:
        source, day, reserved = reservation.source, reservation.day, reservation.credits
        slot = (source, day)
        # A reservation booked in memory is unknown to the file: the file gets the whole
        # actual spend; one booked in the file gets the difference.
        from_memory = reservation.ledger == "memory"
        delta = actual if from_memory else actual - reserved
        with self._lock:
            try:
                self._sync(slot)
                row = self._run(lambda db: db.execute(_ADD, (day, source, delta, delta)).fetchone())
            except StoreError:
                row = None
            if from_memory:
                self._held[slot] -= reserved
            if row is None:
                self._unsynced[slot] += actual - reserved
                return
            self._seen[slot] = row[0]
            if from_memory:
                self._unsynced[slot] -= reserved

    def _sync(self, slot: tuple[str, str]) -> None:
        """Write to the file what was settled in memory during a fault (raises StoreError)."""
        source, day = slot
        pending = self._unsynced[slot] - self._held[slot]
        if pending:
            row = self._run(lambda db: db.execute(_ADD, (day, source, pending, pending)).fetchone())
            self._seen[slot] = row[0]
            self._unsynced[slot] -= pending

    def _run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """Run one database operation under the lock; turn a failure into StoreError."""
        with self._lock:
            if self._conn is None:
                raise StoreError(self._problem or "the store is closed")
            try:
                if not self._ready:
                    _prepare(self._conn)
                    self._ready = True
                result = operation(self._conn)
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                raise self._fault(exc) from None
            except _NewerSchema as exc:
                raise self._fault(exc) from None
            self._problem = None
            return result

    def _read(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """Run one read on a pooled connection of its own, outside the writer's lock."""
        if not self._ready or self._conn is None:
            self._run(lambda db: None)  # prepares the file, or raises its fault
        with self._readers_lock:
            db = self._readers.pop() if self._readers else None
        try:
            if db is None:
                db = _connect(self.path)
            result = operation(db)
        except sqlite3.Error as exc:
            if db is not None:
                db.close()
            with self._lock:
                raise self._fault(exc) from None
        with self._readers_lock:
            self._readers.append(db)
        if self._conn is None:  # closed or faulted meanwhile
            self._close_readers()
        # A transient problem is cleared by the next write, under the lock this must not take.
        return result

    def _close_readers(self) -> None:
        with self._readers_lock:
            readers, self._readers = self._readers, []
        for db in readers:
            db.close()

    def _fault(self, exc: Exception) -> StoreError:
        """Record a fault; a lasting one closes the file so nothing touches it again."""
        problem, lasting = _describe(exc)
        self._problem = problem
        if lasting and self._conn is not None:
            self._conn.close()
            self._conn = None
            self._close_readers()
            _report(problem, self.path)
        return StoreError(problem)


class _NewerSchema(Exception):
    """The database file was written by a newer sift."""


def open_configured_store(config: Config, secrets: Secrets) -> Store:
    """Open the store `[server] store` names, behind the memory front of recent hits."""
    if config.store == "sqlite":
        return open_store(config.db)
    from siftlib.store.recent import RecentHits
    from siftlib.store.redis import PASSWORD_KEY, open_redis_store

    return RecentHits(
        open_redis_store(
            config.store,
            password=secrets.get(PASSWORD_KEY),
            prefix=config.store_prefix,
            fallback_share=config.store_fallback_share,
            fill_timeout=config.timeout,
        )
    )


def open_store(path: Path) -> Store:
    """Open the store file (created with its schema if needed) behind the memory front."""
    from siftlib.store.recent import RecentHits

    return RecentHits(open_sqlite(path))


def open_sqlite(path: Path) -> SQLiteStore:
    """Open (creating it and its schema if needed) the store file; never raises."""
    try:
        _make_private_dirs(path.parent)
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        if path.exists() and not path.stat().st_mode & 0o222:
            return _faulted(path, "the database file is read-only")
        conn = _connect(path)
    except (OSError, sqlite3.Error):
        return _faulted(path, "the database file cannot be opened")
    store = SQLiteStore(path, conn, None)
    # Migrate and probe now, so a broken file is reported at start; a lock only delays this.
    with contextlib.suppress(StoreError):
        store._run(lambda db: None)
    return store


def _make_private_dirs(folder: Path) -> None:
    """Create `folder` and its missing parents as 0700 (mkdir's mode is under the umask)."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for created in reversed(missing):
        with contextlib.suppress(FileExistsError):
            created.mkdir(mode=0o700)
            os.chmod(created, 0o700)


def _connect(path: Path) -> sqlite3.Connection:
    # Autocommit: every statement is its own transaction unless one says BEGIN.
    return sqlite3.connect(
        path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
    )


def _faulted(path: Path, problem: str) -> SQLiteStore:
    _report(problem, path)
    return SQLiteStore(path, None, problem)


def _report(problem: str, path: Path) -> None:
    log.warning(
        "store: %s (%s); it is left untouched and searches are served uncached "
        "until it is fixed or moved aside",
        problem,
        path,
    )


def _prepare(db: sqlite3.Connection) -> None:
    """Check the schema version, switch to WAL, migrate, and prove the file writable."""
    # The version comes first: a file from a newer sift must not be touched, not even its mode.
    version = _known_version(db)
    _switch_to_wal(db)
    db.execute("PRAGMA synchronous = NORMAL")
    if version != len(_MIGRATIONS):
        _migrate(db)
    # A file opened read-only accepts reads and even BEGIN; only a write tells.
    db.execute("DELETE FROM search WHERE 0")


def _switch_to_wal(db: sqlite3.Connection) -> None:
    """Set WAL mode, waiting up to the busy timeout for another connection doing the same."""
    # Two connections switching a fresh file together: SQLite refuses one with SQLITE_BUSY at
    # once, skipping the busy handler (it holds a shared lock, so waiting could deadlock), and
    # that process started with "the database is locked". Its lock is gone by the next try.
    give_up = time.monotonic() + BUSY_TIMEOUT
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() > give_up:
                raise
        time.sleep(0.005)


def _migrate(db: sqlite3.Connection) -> None:
    """Apply the missing migrations in one transaction (another process may have just run them)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        version = _known_version(db)
        for statements in _MIGRATIONS[version:]:
            for statement in statements:
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {len(_MIGRATIONS)}")
        db.execute("COMMIT")
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")


def _known_version(db: sqlite3.Connection) -> int:
    """Return the file's schema version; raise `_NewerSchema` when this sift cannot read it."""
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version > len(_MIGRATIONS):
        raise _NewerSchema(f"the database file was written by a newer sift (schema {version})")
    return version


def _describe(exc: Exception) -> tuple[str, bool]:
    """Return a one-sentence description of a failure and whether it lasts."""
    if isinstance(exc, _NewerSchema):
        return str(exc), True
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return "the database file is corrupt", True
    if code == sqlite3.SQLITE_READONLY:
        return "the database file is read-only", True
    if code == sqlite3.SQLITE_CANTOPEN:
        return "the database file cannot be opened", True
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return "the database is locked", False
    if code == sqlite3.SQLITE_FULL:
        return "the disk is full", False
    return f"the database failed ({getattr(exc, 'sqlite_errorname', type(exc).__name__)})", False


def _reserve(
    db: sqlite3.Connection, slot: tuple[str, str], *, cap: int, credits: int
) -> tuple[bool, int]:
    """Add credits to a day's total unless that passes the cap; return (granted, total)."""
    source, day = slot
    row = db.execute(_RESERVE, (day, source, credits, cap)).fetchone()
    if row is not None:
        return True, int(row[0])
    row = db.execute(
        "SELECT used FROM credits WHERE day = ? AND source = ?", (day, source)
    ).fetchone()
    return False, int(row[0])


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
