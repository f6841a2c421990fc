"""The shared daily totals a backend supplies to the cap ledger (`siftlib.store.ledger`).

    booked = counter.book(("tavily", "2026-11-30"), credits=1, cap=500, floor=Floor(0, ""),
                          ops=[], reserve="9f2c…", lease=4)

`siftlib.store.sqlite_counter` keeps them in the SQLite file's `credits` table,
`siftlib.store.redis_counter` in Redis keys booked by Lua scripts. A counter answers for
every process sharing it, atomically; when it cannot, it raises `Unavailable`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

Slot = tuple[str, str]  # (source, day)


class Unavailable(Exception):
    """The shared counter could not be used; the operation may or may not have reached it.

    `outage` is False for a fault of that one operation (a late reply), True when the counter
    is down (refused, or late again and again): only an outage needs the settling time.
    `sent` is False when the operation surely never reached the counter (nothing was sent,
    or it was rolled back), so it cannot land late.
    """

    def __init__(self, *, outage: bool = True, sent: bool = True) -> None:
        super().__init__("the shared counter is unavailable")
        self.outage = outage
        self.sent = sent


class Floor(NamedTuple):
    """The highest total this process saw for a source's day, and the counter's epoch then."""

    total: int
    epoch: str


class Booked(NamedTuple):
    """What a booking did: granted or not, the total after it, its epoch, the credits leased."""

    granted: bool
    total: int
    epoch: str
    leased: int = 0


class Counter(Protocol):
    """A backend's shared daily totals, booked atomically for every process sharing them."""

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
        """Re-create a lost total from `floor` (or raise it, once per earlier epoch), apply each
        op's id once, then add `credits` unless that passes `cap`, and with them up to `lease`
        credits more, as far as the cap allows. A `reserve` id books once: a repeat is
        answered as the first time, and one withdrawn is refused. Raises `Unavailable`."""
        ...

    def withdraw(self, slot: Slot, reserve: str) -> int | None:
        """Take back a reserve that may have landed after it failed, or refuse it when it
        lands; return the total, None when there is none. Raises `Unavailable`."""
        ...

    def adjust(self, slot: Slot, op: tuple[str, int]) -> int | None:
        """Apply one op (id, delta) to an existing total, once; None when there is no total."""
        ...

    def totals(self, day: str) -> dict[str, int]:
        """Return the totals of `day` per source. Raises `Unavailable`."""
        ...

    def probe(self) -> None:
        """Return when the counter answers. Raises `Unavailable`."""
        ...

    @property
    def lasting(self) -> bool:
        """True when the counter cannot come back (closed, or a broken file)."""
        ...
