"""The memory front of recent hits, over a real SQLite file and over a recording backend."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from clockkit import NOW
from storekit import HITS, key

from siftlib.hits import Hit
from siftlib.store.base import Cached, Reservation
from siftlib.store.factory import open_store
from siftlib.store.recent import RecentHits
from siftlib.store.sqlite import open_sqlite


def forget_the_file(db_path: Path) -> None:
    with sqlite3.connect(db_path) as db:
        db.execute("DELETE FROM search")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "server.db"


@pytest.fixture
def front(db_path: Path) -> Iterator[RecentHits]:
    opened = RecentHits(open_sqlite(db_path))
    yield opened
    opened.close()


def test_open_store_puts_the_front_before_the_file(db_path: Path) -> None:
    opened = open_store(db_path)
    assert isinstance(opened, RecentHits)
    opened.close()


def test_recent_hits_are_served_from_memory_until_their_row_expires(
    front: RecentHits, db_path: Path
) -> None:
    front.cache_put(key(), HITS, now=NOW, ttl=600)
    forget_the_file(db_path)  # memory answers without a read
    assert front.cache_get(key(), now=NOW + 599) == Cached(HITS, NOW + 600)
    assert front.cache_get(key(), now=NOW + 600) is None


def test_hits_read_from_the_file_keep_the_row_expiry_in_memory(db_path: Path) -> None:
    open_sqlite(db_path).cache_put(key(), HITS, now=NOW + 3000, ttl=3600)  # hour ends first
    reader = RecentHits(open_sqlite(db_path))
    assert reader.cache_get(key(), now=NOW + 3001) == Cached(HITS, NOW + 3600)
    forget_the_file(db_path)
    assert reader.cache_get(key(), now=NOW + 3599) == Cached(HITS, NOW + 3600)
    assert reader.cache_get(key(), now=NOW + 3600) is None


def test_memory_keeps_only_the_most_recent_entries(db_path: Path) -> None:
    front = RecentHits(open_sqlite(db_path), entries=2)
    for query in ("one", "two", "three"):
        front.cache_put(key(query), HITS, now=NOW, ttl=600)
    assert front.cache_get(key("one"), now=NOW) is not None  # read back from the file
    forget_the_file(db_path)
    assert front.cache_get(key("one"), now=NOW) is not None  # now in memory again
    assert front.cache_get(key("three"), now=NOW) is not None
    assert front.cache_get(key("two"), now=NOW) is None  # the least recent went


class Recording:
    """A backend that records each call and holds one entry and a fixed reservation."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.problem: str | None = "the database is locked"

    def cache_get(self, key: str, *, now: float) -> Cached | None:
        self.calls.append("cache_get")
        return Cached(HITS, NOW + 60) if key == "kept" and now < NOW + 60 else None

    def cache_put(self, key: str, hits: Sequence[Hit], *, now: float, ttl: float) -> None:
        self.calls.append("cache_put")

    def reserve(self, source: str, *, day: str, cap: int, credits: int = 1) -> Reservation | None:
        self.calls.append(f"reserve {source} {day} {cap} {credits}")
        return Reservation(source, day, credits)

    def settle(self, reservation: Reservation, *, actual: int) -> None:
        self.calls.append(f"settle {reservation.credits} {actual}")

    def release(self, reservation: Reservation) -> None:
        self.calls.append(f"release {reservation.credits}")

    def daily_credits(self, *, day: str) -> dict[str, int]:
        self.calls.append("daily_credits")
        return {"tavily": 7}

    def close(self) -> None:
        self.calls.append("close")


def test_any_backend_gets_the_same_front_and_the_ledger_passes_through() -> None:
    backend = Recording()
    front = RecentHits(backend)
    assert front.cache_get("kept", now=NOW) == Cached(HITS, NOW + 60)
    assert front.cache_get("kept", now=NOW + 59) == Cached(HITS, NOW + 60)  # from memory
    assert front.cache_get("kept", now=NOW + 60) is None  # expired in memory: asked again
    reservation = front.reserve("tavily", day="2025-11-30", cap=5, credits=2)
    assert reservation == Reservation("tavily", "2025-11-30", 2)
    front.settle(reservation, actual=1)
    front.release(reservation)
    assert front.daily_credits(day="2025-11-30") == {"tavily": 7}
    assert front.problem == "the database is locked"
    front.close()
    assert backend.calls == [
        "cache_get",  # the first lookup; the second is answered from memory
        "cache_get",  # the third, once the memory's copy expired
        "reserve tavily 2025-11-30 5 2",
        "settle 2 1",
        "release 2",
        "daily_credits",
        "close",
    ]
