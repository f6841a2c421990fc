"""The embedded store: one SQLite file shared by every sift process on the host (search.md §6).

`SQLiteStore` implements the `Store` protocol (`siftlib.store.base`); `open_store`
(`siftlib.store.factory`) puts it behind the memory front of recent hits. Its daily caps are
the shared `Ledger` (`siftlib.store.ledger`) on the `credits` table
(`siftlib.store.sqlite_counter`).

Decisions:

- Expired rows are never served; a store's first `cache_put` and every 256th after it delete
  them, so one-shot `sift search --local` runs clean up too.
- Recent hits are answered from memory by `RecentHits`, not here: this class always reads
  the file, so any backend gets the same front.
- Threads: writes (puts, the ledger) share one connection behind a lock, so threads
  queue in Python instead of in SQLite's sleeping busy handler. Lookups take a connection of
  their own from a pool and never wait on that lock: a put stuck for up to the busy timeout
  on another process's write lock must not stall this process's cache hits (WAL readers are
  never blocked by a writer), and a lock held across SQLite's release of the GIL would make
  waiting readers pay for the holder's rescheduling. Pooled rather than per thread, because
  the server starts a thread per connection (opening one costs ~130 µs).
- Processes: a reservation is one guarded upsert, atomic inside SQLite, so threads and
  processes sharing the file never pass the cap. The busy timeout is 1 s; a lock held longer
  is a fault for that operation only. A failed statement is rolled back, so an adjustment
  either reached the file or did not: the ledger's op ids need no record here. The `credits`
  table keeps one row per source and day as history (a few bytes a day); nothing sweeps it.
- Faults never fail a search. A corrupt, read-only or unopenable file, or one written by a
  newer sift, disables the file for the life of the process: `problem` says so, cache
  operations raise `StoreError`, and the file is left exactly as it was (a corrupt file is
  logged with its path and never replaced; move it aside to start afresh). A locked file is a
  fault of that one operation. A file with no write permission bit counts as read-only even
  for root, as its owner intended.
- Cap accounting never raises: without the file, the ledger books in memory, granting up to
  the whole rest of the cap as last read (share 1: the cap still holds within the process),
  and hands it to the file once it answers.
- Files: the directories sift creates for the file are 0700 and a new file is 0600 (SQLite
  gives its `-wal` and `-shm` the file's mode), whatever the umask, so no other local user
  can read the cache or swap `cache.db`. An existing directory or file keeps the mode its
  owner gave it.
- Schema: `PRAGMA user_version`; `_MIGRATIONS[n]` takes version n to n + 1 inside one
  `BEGIN IMMEDIATE`, so two processes starting together migrate once.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from siftlib.errors import StoreError
from siftlib.hits import Hit
from siftlib.lazylog import LazyLogger
from siftlib.store.base import Cached, decode_hits, encode_hits, expiry
from siftlib.store.ledger import Ledger, LedgerCaps
from siftlib.store.sqlite_counter import SQLiteCounter

log = LazyLogger("sift")

T = TypeVar("T")

BUSY_TIMEOUT = 1.0
SWEEP_EVERY = 256

_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 0 → 1
        "CREATE TABLE search (key TEXT PRIMARY KEY, expires REAL NOT NULL, hits TEXT NOT NULL)",
        "CREATE INDEX search_expires ON search (expires)",
        "CREATE TABLE credits (day TEXT NOT NULL, source TEXT NOT NULL,"
        " used INTEGER NOT NULL, PRIMARY KEY (day, source)) WITHOUT ROWID",
    ),
)


class SQLiteStore(LedgerCaps):
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
        self._ledger = Ledger(SQLiteCounter(self), share=1.0, leases=False, settle_after=0.0)

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

    def close(self) -> None:
        """Close the database file; later cache operations raise StoreError."""
        self._ledger.close()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
                self._problem = self._problem or "the store is closed"
            self._close_readers()

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
