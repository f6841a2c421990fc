"""The SQLite store on its own (no memory front): keys, expiry, partitions, caps, faults."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from clockkit import DAY, NOW
from gatewaykit import wait_until
from storekit import HITS, key

from siftlib.errors import StoreError
from siftlib.hits import Hit
from siftlib.store import sqlite as store_module
from siftlib.store.base import Reservation
from siftlib.store.sqlite import SQLiteStore, open_sqlite


def count_rows(db_path: Path) -> int:
    with sqlite3.connect(db_path) as db:
        return int(db.execute("SELECT count(*) FROM search").fetchone()[0])


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "server.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SQLiteStore]:
    opened = open_sqlite(db_path)
    assert opened.problem is None
    yield opened
    opened.close()


# --- the key -------------------------------------------------------------------------------


def test_query_text_cannot_forge_other_key_parts() -> None:
    # A plain "|"-joined key would let the query swallow the next part.
    assert key(query="a|searxng", sources=["tavily"]) != key(
        query="a", sources=["searxng", "tavily"]
    )
    assert key(query='a","b') != key(query="a", sources=["b"])


# --- the cache -----------------------------------------------------------------------------


def test_value_holds_only_urls_titles_snippets_scores_sources_dates_and_engine_counts(
    store: SQLiteStore, db_path: Path
) -> None:
    store.cache_put(key(), HITS, now=NOW, ttl=3600)
    with sqlite3.connect(db_path) as db:
        (value,) = db.execute("SELECT hits FROM search").fetchone()
    assert [set(item) for item in json.loads(value)] == [
        {"url", "title", "snippet", "score", "source", "published", "engines"}
    ] * 2


def test_a_row_from_before_dates_and_engine_counts_reads_without_them(
    store: SQLiteStore, db_path: Path
) -> None:
    store.cache_put(key(), HITS, now=NOW, ttl=3600)
    old = [{"url": "https://a.com", "title": "A", "snippet": "a", "score": 1.0, "source": "tavily"}]
    with sqlite3.connect(db_path) as db:
        db.execute("UPDATE search SET hits = ?", (json.dumps(old),))
    cached = store.cache_get(key(), now=NOW)
    assert cached is not None
    assert cached.hits == (Hit("https://a.com", "A", "a", 1.0, "tavily"),)


def test_an_entry_never_outlives_its_hour_bucket(store: SQLiteStore, db_path: Path) -> None:
    store.cache_put(key(), HITS, now=NOW + 3540, ttl=86400)  # 04:59, a one-day TTL
    assert store.cache_get(key(), now=NOW + 3599).hits == HITS
    assert store.cache_get(key(), now=NOW + 3600) is None  # 05:00: the bucket rolled over
    later = open_sqlite(db_path)  # a store's first put sweeps
    later.cache_put(key(k=1), HITS, now=NOW + 3600, ttl=60)
    later.close()
    assert count_rows(db_path) == 1


def test_a_sweeping_put_deletes_expired_rows_only(store: SQLiteStore, db_path: Path) -> None:
    store.cache_put(key(k=1), HITS, now=NOW, ttl=60)
    store.cache_put(key(k=2), HITS, now=NOW, ttl=120)
    store.cache_put(key(k=3), HITS, now=NOW, ttl=600)
    later = open_sqlite(db_path)  # a store's first put sweeps
    later.cache_put(key(k=4), HITS, now=NOW + 120, ttl=600)
    later.close()
    assert count_rows(db_path) == 2
    assert store.cache_get(key(k=3), now=NOW + 120).hits == HITS


def test_puts_sweep_expired_rows_now_and_then(store: SQLiteStore, db_path: Path) -> None:
    for k in range(store_module.SWEEP_EVERY):
        store.cache_put(key(k=k), HITS, now=NOW, ttl=60)
    assert count_rows(db_path) == store_module.SWEEP_EVERY
    store.cache_put(key(k=-1), HITS, now=NOW + 61, ttl=60)
    assert count_rows(db_path) == 1


def test_the_first_put_of_a_store_sweeps(db_path: Path) -> None:
    # One-shot `sift search --local` runs make one put each: they must clean up too.
    for k in range(3):
        once = open_sqlite(db_path)
        once.cache_put(key(k=k), HITS, now=NOW + k * 100, ttl=60)
        once.close()
    assert count_rows(db_path) == 1


def test_an_unreadable_entry_is_a_store_error_not_a_wrong_answer(
    store: SQLiteStore, db_path: Path
) -> None:
    open_sqlite(db_path).cache_put(key(), HITS, now=NOW, ttl=3600)  # another process wrote it
    with sqlite3.connect(db_path) as db:
        db.execute("""UPDATE search SET hits = '[{"url": 1}]'""")
    with pytest.raises(StoreError, match="unreadable"):
        store.cache_get(key(), now=NOW)
    assert store.problem is None  # one bad row does not disable the file


# --- the file ------------------------------------------------------------------------------


def test_open_creates_parent_dirs_a_wal_file_and_schema_version_1(db_path: Path) -> None:
    opened = open_sqlite(db_path)
    assert opened.problem is None
    with sqlite3.connect(db_path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("PRAGMA user_version").fetchone() == (1,)
    opened.close()


def test_reopening_keeps_the_schema_and_data(db_path: Path) -> None:
    open_sqlite(db_path).close()
    with sqlite3.connect(db_path) as db:
        db.execute("INSERT INTO credits VALUES ('2025-11-30', 'tavily', 7)")
    reopened = open_sqlite(db_path)
    assert reopened.problem is None
    assert reopened.daily_credits(day="2025-11-30") == {"tavily": 7}
    reopened.close()


def test_processes_opening_a_fresh_file_together_migrate_once(db_path: Path) -> None:
    barrier = threading.Barrier(6)
    opened: list[SQLiteStore] = []

    def open_it() -> None:
        barrier.wait()
        opened.append(open_sqlite(db_path))

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # A store that met another's migration lock says so until its next operation succeeds.
    for n, s in enumerate(opened):
        s.cache_put(key(k=n), HITS, now=NOW, ttl=60)
    assert [s.problem for s in opened] == [None] * 6
    with sqlite3.connect(db_path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(store_module._MIGRATIONS)
    for s in opened:
        s.close()


def test_a_file_from_a_newer_sift_is_left_alone(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    with sqlite3.connect(db_path) as db:
        db.execute("CREATE TABLE future (x)")
        db.execute("PRAGMA user_version = 9")
    before = db_path.read_bytes()
    opened = open_sqlite(db_path)
    assert opened.problem == "the database file was written by a newer sift (schema 9)"
    with pytest.raises(StoreError, match="newer sift"):
        opened.cache_put(key(), HITS, now=NOW, ttl=3600)
    opened.close()
    assert db_path.read_bytes() == before


def test_a_directory_in_place_of_the_file_cannot_be_opened(db_path: Path) -> None:
    db_path.mkdir(parents=True)
    opened = open_sqlite(db_path)
    assert opened.problem == "the database file cannot be opened"
    with pytest.raises(StoreError):
        opened.cache_get(key(), now=NOW)


def _garbage(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database\n" * 400)


def _damaged(path: Path) -> None:
    """A real store file whose schema page is overwritten past the header."""
    open_sqlite(path).close()
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xa5" * (4096 - 100)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_garbage, _damaged])
def test_a_corrupt_file_is_reported_and_left_in_place(
    db_path: Path, damage: object, caplog: pytest.LogCaptureFixture
) -> None:
    damage(db_path)  # type: ignore[operator]
    before = db_path.read_bytes()
    with caplog.at_level(logging.WARNING, logger="sift"):
        opened = open_sqlite(db_path)
    assert opened.problem == "the database file is corrupt"
    assert str(db_path) in caplog.text and "corrupt" in caplog.text
    with pytest.raises(StoreError, match="^the database file is corrupt$"):
        opened.cache_get(key(), now=NOW)
    with pytest.raises(StoreError, match="corrupt"):
        opened.cache_put(key(), HITS, now=NOW, ttl=3600)
    opened.close()
    assert db_path.read_bytes() == before


def test_corruption_found_by_a_lookup_disables_the_file(
    store: SQLiteStore, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for k in range(300):
        store.cache_put(key(k=k), HITS, now=NOW, ttl=3600)
    store.close()
    data = bytearray(db_path.read_bytes())
    data[len(data) // 2 :] = b"\xa5" * (len(data) - len(data) // 2)  # the rows, not the schema
    db_path.write_bytes(bytes(data))
    opened = open_sqlite(db_path)
    assert opened.problem is None
    with (
        caplog.at_level(logging.WARNING, logger="sift"),
        pytest.raises(StoreError, match="^the database file is corrupt$"),
    ):
        for k in range(300):
            opened.cache_get(key(k=k), now=NOW)
    assert opened.problem == "the database file is corrupt"
    assert str(db_path) in caplog.text
    with pytest.raises(StoreError, match="corrupt"):
        opened.cache_put(key(), HITS, now=NOW, ttl=3600)
    assert opened.reserve("tavily", day="2025-11-30", cap=1)
    opened.close()
    assert db_path.read_bytes() == bytes(data)


def test_a_read_only_file_is_reported_and_left_in_place(
    store: SQLiteStore, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store.cache_put(key(), HITS, now=NOW, ttl=3600)
    store.close()
    db_path.chmod(0o444)
    before = db_path.read_bytes()
    with caplog.at_level(logging.WARNING, logger="sift"):
        opened = open_sqlite(db_path)
    assert opened.problem == "the database file is read-only"
    assert "read-only" in caplog.text
    with pytest.raises(StoreError, match="^the database file is read-only$"):
        opened.cache_get(key(), now=NOW)
    with pytest.raises(StoreError, match="read-only"):
        opened.cache_put(key(), HITS, now=NOW, ttl=3600)
    assert opened.reserve("tavily", day="2025-11-30", cap=1)
    assert not opened.reserve("tavily", day="2025-11-30", cap=1)
    opened.close()
    assert db_path.read_bytes() == before


def test_a_file_sqlite_opens_read_only_is_found_by_the_write_probe(
    store: SQLiteStore, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Root ignores permission bits, so stand in for a read-only mount with SQLite's own mode.
    store.close()
    real_connect = sqlite3.connect

    def read_only(path: Path, **options: object) -> sqlite3.Connection:
        return real_connect(f"file:{path}?mode=ro", uri=True, **options)  # type: ignore[call-overload,no-any-return]

    monkeypatch.setattr(store_module.sqlite3, "connect", read_only)
    opened = open_sqlite(db_path)
    assert opened.problem == "the database file is read-only"


def test_a_locked_file_fails_one_operation_and_recovers(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT", 0.05)
    opened = open_sqlite(db_path)
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreError, match="^the database is locked$"):
        opened.cache_put(key(), HITS, now=NOW, ttl=3600)
    assert opened.problem == "the database is locked"
    assert opened.cache_get(key(), now=NOW) is None  # WAL readers are not blocked
    other.execute("COMMIT")
    opened.cache_put(key(), HITS, now=NOW, ttl=3600)
    assert opened.problem is None
    assert opened.cache_get(key(), now=NOW).hits == HITS
    other.close()
    opened.close()


def test_a_file_locked_at_open_is_migrated_once_the_lock_goes(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT", 0.05)
    db_path.parent.mkdir(parents=True)
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    opened = open_sqlite(db_path)
    assert opened.problem == "the database is locked"
    other.execute("COMMIT")
    other.close()
    opened.cache_put(key(), HITS, now=NOW, ttl=3600)
    assert opened.cache_get(key(), now=NOW).hits == HITS
    assert opened.problem is None
    opened.close()


# --- daily caps ----------------------------------------------------------------------------


def reserve(store: SQLiteStore, *, cap: int, credits: int = 1, day: str = DAY) -> Reservation:
    reservation = store.reserve("tavily", day=day, cap=cap, credits=credits)
    assert reservation is not None
    return reservation


def test_a_faulted_store_enforces_the_cap_in_memory(db_path: Path) -> None:
    _garbage(db_path)
    opened = open_sqlite(db_path)
    held = [opened.reserve("tavily", day=DAY, cap=2) for _ in range(3)]
    assert held == [Reservation("tavily", DAY, 1, "memory")] * 2 + [None]
    assert held[0] is not None
    opened.release(held[0])
    opened.settle(reserve(opened, cap=2), actual=3)
    assert opened.daily_credits(day=DAY) == {"tavily": 4}
    assert not opened.reserve("tavily", day=DAY, cap=5, credits=2)
    assert opened.reserve("tavily", day="2025-12-01", cap=2)


def test_a_lock_during_reserve_falls_back_to_the_total_last_read(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT", 0.05)
    opened = open_sqlite(db_path)
    assert opened.reserve("tavily", day=DAY, cap=3, credits=2)
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    in_memory = reserve(opened, cap=3)  # in memory: 2 read + 1
    assert in_memory.ledger == "memory"
    assert not opened.reserve("tavily", day=DAY, cap=3)
    assert opened.daily_credits(day=DAY) == {"tavily": 3}
    other.execute("COMMIT")
    other.close()
    # The memory reservation settles into the file once the lock is gone.
    opened.settle(in_memory, actual=1)
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT used FROM credits").fetchone() == (3,)
    assert opened.daily_credits(day=DAY) == {"tavily": 3}
    assert not opened.reserve("tavily", day=DAY, cap=3)
    opened.close()


def test_credits_settled_during_a_lock_reach_the_file_afterwards(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT", 0.05)
    opened = open_sqlite(db_path)
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    opened.settle(reserve(opened, cap=5), actual=2)
    opened.release(reserve(opened, cap=5))
    assert other.execute("SELECT count(*) FROM credits").fetchone() == (0,)
    other.execute("COMMIT")
    assert opened.reserve("tavily", day=DAY, cap=5)
    assert other.execute("SELECT used FROM credits").fetchone() == (3,)
    assert opened.daily_credits(day=DAY) == {"tavily": 3}
    other.close()
    opened.close()


def test_each_reservation_settles_in_the_ledger_that_holds_it(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Once guessed from sizes: a 1-credit file booking settled while a 2-credit memory one
    # was held was taken for the memory one, and a credit never reached the file.
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT", 0.05)
    opened = open_sqlite(db_path)
    in_file = reserve(opened, cap=5)
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    in_memory = reserve(opened, cap=5, credits=2)
    other.execute("COMMIT")
    assert (in_file.ledger, in_memory.ledger) == ("shared", "memory")
    opened.settle(in_file, actual=1)
    opened.settle(in_memory, actual=2)
    assert other.execute("SELECT used FROM credits").fetchone() == (3,)
    assert opened.daily_credits(day=DAY) == {"tavily": 3}
    opened.release(reserve(opened, cap=5))
    assert other.execute("SELECT used FROM credits").fetchone() == (3,)
    other.close()
    opened.close()


def test_lookups_do_not_wait_behind_a_write_stuck_on_a_foreign_lock(
    store: SQLiteStore, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.cache_put(key(), HITS, now=NOW, ttl=3600)
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT", 30.0)
    patient = open_sqlite(db_path)
    patient.cache_get(key(), now=NOW)
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process is writing
    writer = threading.Thread(
        target=patient.cache_put, args=(key(k=1), HITS), kwargs={"now": NOW, "ttl": 3600}
    )
    writer.start()
    writer.join(0.2)  # the put now waits for the lock, holding the store's writer
    assert patient.cache_get(key(), now=NOW).hits == HITS
    assert writer.is_alive()
    other.execute("COMMIT")
    writer.join()
    assert patient.cache_get(key(k=1), now=NOW).hits == HITS
    other.close()
    patient.close()


def test_concurrent_lookups_and_a_close_raise_nothing_but_store_errors(
    store: SQLiteStore,
) -> None:
    store.cache_put(key(), HITS, now=NOW, ttl=3600)
    barrier, failures = threading.Barrier(9), []

    def look() -> None:
        barrier.wait()
        for _ in range(200):
            try:
                assert store.cache_get(key(), now=NOW).hits == HITS
            except StoreError as exc:
                assert str(exc) == "the store is closed"
            except Exception as exc:  # noqa: BLE001 - collected for the assertion below
                failures.append(exc)

    threads = [threading.Thread(target=look) for _ in range(8)]
    for thread in threads:
        thread.start()
    barrier.wait()
    store.close()
    for thread in threads:
        thread.join()
    assert failures == []


# --- file modes ------------------------------------------------------------------------------


def test_state_directories_and_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    kept = tmp_path / "shared"
    kept.mkdir()
    kept.chmod(0o755)
    path = kept / "state" / "sift" / "cache.db"
    old = os.umask(0)
    try:
        opened = open_sqlite(path)
        opened.cache_put(key(), HITS, now=NOW, ttl=3600)
    finally:
        os.umask(old)
    try:
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (kept, *kept.rglob("*"))}
    finally:
        opened.close()
    assert modes.pop("shared") == 0o755  # a directory sift did not create keeps its mode
    assert modes.pop("state") == modes.pop("sift") == 0o700
    assert modes.pop("cache.db") == 0o600
    assert modes.pop("cache.db-wal") == 0o600  # SQLite gives it the file's mode
    assert set(modes.values()) <= {0o600}


def test_credits_spent_during_a_lock_reach_the_file_without_another_reservation(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process that stops reserving after a fault (its callers went away) still hands over.
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT", 0.05)
    opened = open_sqlite(db_path)
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    spent = opened.reserve("tavily", day="2025-11-30", cap=5)
    assert spent is not None and spent.ledger == "memory"
    opened.settle(spent, actual=2)
    other.execute("COMMIT")
    wait_until(
        lambda: other.execute("SELECT used FROM credits").fetchone() == (2,),
        "the memory ledger's credits in the file",
    )
    other.close()
    opened.close()
