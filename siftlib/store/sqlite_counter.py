"""The daily-cap counter on the SQLite file: the `credits` table, one row per source and day.

    counter = SQLiteCounter(store)              # the ledger's Counter (`siftlib.store.ledger`)
    booked = counter.book(("tavily", "2026-11-30"), credits=1, cap=500, floor=Floor(0, ""),
                          ops=[])

A reservation is one guarded upsert, atomic inside SQLite, so threads and processes sharing
the file never pass the cap. A failed statement is rolled back, so an adjustment either
reached the file or did not: op ids, reserve ids and floors need no record here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from siftlib.errors import StoreError
from siftlib.store.counter import Booked, Floor, Slot, Unavailable

if TYPE_CHECKING:
    from siftlib.store.sqlite import SQLiteStore

T = TypeVar("T")

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


class SQLiteCounter:
    """The `credits` table as the ledger's counter (`siftlib.store.ledger.Counter`)."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def book(
        self,
        slot: Slot,
        *,
        credits: int,
        cap: int,
        floor: Floor,
        ops: Sequence[tuple[str, int]],
        reserve: str = "",
        lease: int = 0,
    ) -> Booked:
        """Book credits under the cap after what is owed, in one transaction.

        Neither the floor nor the reserve id is needed: a file does not come back empty under
        an open store, and a booking that failed was rolled back, so it never lands late.
        Nothing is leased: the ledger on a file falls back to the whole rest of the cap.
        """
        source, day = slot
        owed = sum(delta for _, delta in ops)

        def book(db: sqlite3.Connection) -> tuple[bool, int]:
            if not owed:
                return _reserve(db, slot, cap=cap, credits=credits)  # the usual: one upsert
            db.execute("BEGIN IMMEDIATE")
            db.execute(_ADD, (day, source, owed, owed))
            result = _reserve(db, slot, cap=cap, credits=credits)
            db.execute("COMMIT")
            return result

        granted, total = self._call(book)
        return Booked(granted, total, "")

    def adjust(self, slot: Slot, op: tuple[str, int]) -> int | None:
        """Add a settle's or release's difference to the day's total."""
        source, day = slot
        delta = op[1]
        return self._call(
            lambda db: int(db.execute(_ADD, (day, source, delta, delta)).fetchone()[0])
        )

    def withdraw(self, slot: Slot, reserve: str) -> int | None:
        """Never asked: a failed booking was rolled back (`Unavailable.sent` is False here)."""
        return None

    def totals(self, day: str) -> dict[str, int]:
        """Return the day's totals per source."""
        query = "SELECT source, used FROM credits WHERE day = ?"
        rows = self._call(lambda db: db.execute(query, (day,)).fetchall())
        return {source: int(used) for source, used in rows}

    def probe(self) -> None:
        """Return once the file answers."""
        self._call(lambda db: None)

    @property
    def lasting(self) -> bool:
        """True once the file is closed or disabled for good."""
        return self._store._conn is None

    def _call(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return self._store._run(operation)
        except StoreError:  # rolled back: nothing of it reached the file
            raise Unavailable(sent=False) from None


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
