"""The daily-cap ledger every backend shares: its shared counter first, a fallback ledger in faults.

A backend (the SQLite file, a Redis server) supplies a `Counter`: one total per source and UTC
day, booked atomically for every process that shares it. `Ledger` keeps the `Store` protocol's
cap terms (`siftlib.store.base`) on top of it, the same way for both:

    ledger = Ledger(counter, share=0.5, leases=True, settle_after=2.0)
    reservation = ledger.reserve("tavily", day="2026-11-30", cap=500)
    ...
    ledger.settle(reservation, actual=1)

Decisions (store.md §2 "Faults", and where it is silent):

- One total per source and day: the last total read from the counter (`seen`), plus what this
  process owes it (`pending`: adjustments the counter may not have seen, signed), plus the
  fallback reservations not yet settled (`held`), less its own lease, which this process
  still may spend. `daily_credits` reports that total.
- Every adjustment the counter may miss carries an id (`Op`), and the counter applies an id
  once: a settle or release that timed out, and reached the store after all, is not applied
  again when it is handed over later (a release applied twice let a fleet spend past a cap).
- A reserve carries an id the counter books once. A late reply is tried once more under it
  (a first try that ran after all is answered, not booked twice); one that still failed but
  may have reached the counter is withdrawn once it answers (taken back if it ran, refused if
  it runs later), so a reserve that lands after its caller gave up never wastes a credit.
- Leases (Redis, `leases=True`): what a process may spend while the counter fails is booked
  on the counter beforehand. A reserve books, with its credits, a lease topped up to what
  this process reserved in the last `LEASE_WINDOW`, at most `share` of what is left under
  the cap, as far as the cap allows. The lease is spent only when the counter fails or is
  full, and goes back to the counter after `LEASE_WINDOW` without a reserve, and at
  `close()`. So every credit spent was booked on the counter first: no stale total or outage
  can take the processes sharing it past a cap (a share taken of a stale total once passed
  a cap of 40 by one).
- Fallback without leases (SQLite, share 1): while the counter fails, a reservation is
  booked here, up to `share` of what was left under the cap when the outage began (`base`):
  the whole rest, so the cap holds within the process.
- Hand-over: what is owed (the fallback's spend, adjustments that failed, leases given back,
  withdrawals) is carried to the counter by the next booking that reaches it, and by a
  prober thread that tries every `PROBE_EVERY` while anything is owed or leased, so a
  process that stopped reserving (its own view says capped, or its callers went away) still
  hands over; `close()` tries once more.
- Settling after an outage: for `settle_after` seconds after the counter answers again,
  reservations are granted as during the outage (from the lease, or the fallback) while
  every process hands over what it owes and its floor (below); only then are shared totals
  trusted again. A process that went back to the counter at once could find it without the
  others' outage spend, or re-created from its own stale floor, and grant from that. Redis
  waits 2 s (two of its retry periods, so every live gateway's prober has reached it);
  SQLite, with share 1 and no floor, does not wait.
- Floor: every booking sends the highest total this process saw for the source and day, and
  the epoch it saw it in. A counter that came back empty (a Redis restarted without
  persistence: its clients reconnect without an error) is re-created from that floor in a
  new epoch, and raised once by each later floor seen in an earlier epoch, so it starts from
  the most any process knew, not from zero. Every process that saw the outage sends its
  floors again once the counter answers, before anyone trusts it. While the counter is
  there, floors change nothing.
"""

from __future__ import annotations

import os
import threading
import time

from siftlib.store.account import LEASE_WINDOW, Account, Op
from siftlib.store.base import Reservation
from siftlib.store.counter import Counter, Floor, Slot, Unavailable

PROBE_EVERY = 0.25
NO_CAP = 2**52  # counting an uncapped source's credits: a cap nothing reaches


class Ledger:
    """Daily caps on a backend's counter, with the fallback ledger, hand-over and floor."""

    def __init__(
        self, counter: Counter, *, share: float, leases: bool, settle_after: float
    ) -> None:
        self._counter = counter
        self.share = share
        self.leases = leases
        self.settle_after = settle_after
        self._lock = threading.Lock()
        self._slots: dict[Slot, Account] = {}
        self._down = False
        self._back_at = float("-inf")
        self._prober = _Prober(self)

    def reserve(self, source: str, *, day: str, cap: int, credits: int = 1) -> Reservation | None:
        """Reserve credits of a paid source before calling it; None at the cap. Never raises."""
        if cap == 0:
            return Reservation(source, day, 0)
        if credits > cap:
            return None
        slot = (source, day)
        lease = self._lease_wanted(slot, credits=credits, cap=cap)
        if not self._trusted():
            self._hand_over(slot)
        if self._trusted():
            try:
                granted = self._book_reserve(slot, credits=credits, cap=cap, lease=lease)
            except Unavailable:
                pass
            else:
                with self._lock:
                    self._slots[slot].base = None  # back on the counter: the outage is over
                if granted or not self.leases:
                    return Reservation(source, day, credits) if granted else None
        if self.leases:  # the counter failed, or is full: what this process booked ahead
            return self._spend_lease(slot, credits)
        return self._reserve_locally(slot, credits=credits, cap=cap)

    def settle(self, reservation: Reservation, *, actual: int) -> None:
        """Replace a reservation by the credits the call actually cost. Never raises."""
        slot, reserved = (reservation.source, reservation.day), reservation.credits
        if reservation.ledger == "memory":
            with self._lock:
                state = self._slot(slot)
                state.held -= reserved
                state.local += actual - reserved
                state.owe(actual)
            self._hand_over(slot)
        elif reserved == 0:
            if actual:  # an uncapped source: nothing was held, the credits still count
                with self._lock:
                    self._slot(slot).owe(actual)
                self._hand_over(slot)
        elif actual != reserved:
            self._adjust(slot, actual - reserved)

    def release(self, reservation: Reservation) -> None:
        """Give back a reservation whose call never went out. Never raises."""
        if reservation.credits:
            self.settle(reservation, actual=0)

    def daily_credits(self, *, day: str) -> dict[str, int]:
        """Return the credits spent (or reserved) per source on a UTC day. Never raises."""
        try:
            totals = self._counter.totals(day)
        except Unavailable as exc:
            self._failed(exc)
            totals = None
        if totals is not None:
            self._answered()
            with self._lock:
                for source, value in totals.items():
                    self._slot((source, day)).seen = value
            for slot in self._owing(day):
                self._hand_over(slot)
        with self._lock:
            return {
                source: state.seen + state.owed() + state.held - state.lease
                for (source, when), state in sorted(self._slots.items())
                if when == day
            }

    def close(self) -> None:
        """Give the leases back and hand over what is owed, once more; stop the prober."""
        for slot in self._leased(idle_for=0.0):
            self._give_back(slot)
        for slot in self._owing():
            self._hand_over(slot)
        self._prober.closed.set()

    # The counter and the fallback.

    def _trusted(self) -> bool:
        """Tell whether shared totals may grant: the counter answers and the outage settled."""
        return not self._down and time.monotonic() >= self._back_at + self.settle_after

    def _book(
        self, slot: Slot, *, credits: int, cap: int, reserve: str = "", lease: int = 0
    ) -> bool:
        """Book credits on the counter with what is owed and the floor; raises `Unavailable`."""
        with self._lock:
            state = self._slot(slot)
            ops = [op for op in state.pending if not op.flying]
            for op in ops:
                op.flying = op.sent = True
            floor = state.floor
        try:
            granted, total, epoch, leased = self._counter.book(
                slot,
                credits=credits,
                cap=cap,
                floor=floor,
                ops=[(o.ident, o.delta) for o in ops],
                reserve=reserve,
                lease=lease,
            )
        except Unavailable as exc:
            with self._lock:
                for op in ops:
                    op.flying = False
            self._failed(exc)
            raise
        with self._lock:
            state.pending = [op for op in state.pending if op not in ops]
            state.resend_floor = False
            state.seen = total
            # Only a booking's total names its epoch: a read or an adjustment may come from a
            # counter re-created since, so it must not raise the floor of an earlier one.
            known = state.floor.total if epoch == state.floor.epoch else 0
            state.floor = Floor(max(known, total), epoch)
            state.lease += leased
            if leased:
                self._prober.start()  # it gives the lease back once this slot goes idle
        self._answered()
        return granted

    def _book_reserve(self, slot: Slot, *, credits: int, cap: int, lease: int) -> bool:
        """Book a reserve under an id of its own; raises `Unavailable`.

        A late reply is tried once more under the same id (the counter books an id once, so a
        first try that ran after all is not booked twice). A reserve that still failed but
        may have reached the counter is withdrawn later, so it cannot waste a credit.
        """
        reserve = os.urandom(8).hex()
        sent = False
        for _ in range(2):
            try:
                return self._book(slot, credits=credits, cap=cap, reserve=reserve, lease=lease)
            except Unavailable as exc:
                sent = sent or exc.sent
                failure = exc
                if exc.outage:
                    break
        if sent:
            with self._lock:
                self._slot(slot).withdrawals.append(reserve)
        raise failure

    def _hand_over(self, slot: Slot) -> None:
        """Carry what a slot owes to the counter, or find the counter back."""
        with self._lock:
            state = self._slot(slot)
            owes = bool(state.pending) or state.resend_floor
            withdrawals = list(state.withdrawals)
        try:
            for reserve in withdrawals:
                total = self._counter.withdraw(slot, reserve)
                with self._lock:
                    if reserve in state.withdrawals:
                        state.withdrawals.remove(reserve)
                    if total is not None:
                        state.seen = total
                self._answered()
            if owes:
                self._book(slot, credits=0, cap=NO_CAP)
            elif self._down and not withdrawals:
                self._counter.probe()
                self._answered()
        except Unavailable as exc:
            self._failed(exc)

    def _adjust(self, slot: Slot, delta: int) -> None:
        """Settle or release on the counter; when it fails, owe the op (with its id)."""
        op = Op(delta)
        try:
            total = self._counter.adjust(slot, (op.ident, delta))
        except Unavailable as exc:
            op.sent = True
            with self._lock:
                state = self._slot(slot)
                state.pending.append(op)
                if state.base is not None:
                    state.local += delta
            self._failed(exc)
            return
        self._answered()
        if total is not None:
            with self._lock:
                self._slot(slot).seen = total

    def _lease_wanted(self, slot: Slot, *, credits: int, cap: int) -> int:
        """Note a reserve; return the credits to lease with it (none without leases)."""
        if not self.leases:
            return 0
        with self._lock:
            return self._slot(slot).lease_wanted(credits, cap, self.share, time.monotonic())

    def _spend_lease(self, slot: Slot, credits: int) -> Reservation | None:
        """Grant a reservation from this process's lease: credits the counter already holds."""
        with self._lock:
            spent = self._slot(slot).spend_lease(credits)
        return Reservation(slot[0], slot[1], credits) if spent else None

    def _leased(self, *, idle_for: float) -> list[Slot]:
        """The slots holding a lease and reserved from no sooner than `idle_for` ago."""
        now = time.monotonic()
        with self._lock:
            return [
                slot
                for slot, state in self._slots.items()
                if state.lease and now - state.reserved_at >= idle_for
            ]

    def _give_back(self, slot: Slot) -> None:
        """Return a slot's lease to the counter (owed, with its id, if that fails)."""
        with self._lock:
            state = self._slot(slot)
            lease, state.lease = state.lease, 0
        if lease:
            self._adjust(slot, -lease)

    def _reserve_locally(self, slot: Slot, *, credits: int, cap: int) -> Reservation | None:
        with self._lock:
            held = self._slot(slot).hold(credits, cap, self.share)
        return Reservation(slot[0], slot[1], credits, "memory") if held else None

    def _owing(self, day: str | None = None) -> list[Slot]:
        """The slots that owe the counter an adjustment or a withdrawal: of `day`, or any."""
        with self._lock:
            return [
                slot
                for slot, state in self._slots.items()
                if state.owing and day in (None, slot[1])
            ]

    def _slot(self, slot: Slot) -> Account:
        state = self._slots.get(slot)
        if state is None:
            state = self._slots[slot] = Account()
        return state

    # Faults and the prober.

    def _failed(self, exc: Unavailable) -> None:
        with self._lock:
            self._down = self._down or exc.outage
            self._prober.start()

    def _answered(self) -> None:
        if self._down:
            with self._lock:
                if self._down:
                    self._down = False
                    self._back_at = time.monotonic()
                    for state in self._slots.values():
                        state.resend_floor = state.floor.total > 0


class _Prober:
    """The thread a ledger runs while anything is owed or leased, or the counter is down."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._thread: threading.Thread | None = None
        self.closed = threading.Event()

    def start(self) -> None:
        """Start the thread unless it runs (call under the ledger's lock)."""
        if self._thread is None and not self.closed.is_set():
            self._thread = threading.Thread(
                target=self._run, name="sift-ledger-prober", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        """Every `PROBE_EVERY`: give idle leases back, hand over what is owed, or probe."""
        ledger = self._ledger
        while not self.closed.wait(PROBE_EVERY) and not ledger._counter.lasting:
            for slot in ledger._leased(idle_for=LEASE_WINDOW):
                ledger._give_back(slot)
            owing = ledger._owing()
            for slot in owing:
                ledger._hand_over(slot)
            if not owing and ledger._down:
                try:
                    ledger._counter.probe()
                except Unavailable:
                    continue
                ledger._answered()
            with ledger._lock:  # under the lock `_failed` takes: a fault after this starts anew
                if not ledger._down and not any(s.owing or s.lease for s in ledger._slots.values()):
                    self._thread = None
                    return
        with ledger._lock:
            self._thread = None


class LedgerCaps:
    """The daily-cap half of the `Store` protocol, answered by a backend's `Ledger`."""

    _ledger: Ledger

    def reserve(self, source: str, *, day: str, cap: int, credits: int = 1) -> Reservation | None:
        """Reserve credits of a paid source before calling it; None at the cap. Never raises."""
        return self._ledger.reserve(source, day=day, cap=cap, credits=credits)

    def settle(self, reservation: Reservation, *, actual: int) -> None:
        """Replace a reservation by the credits the call actually cost. Never raises."""
        self._ledger.settle(reservation, actual=actual)

    def release(self, reservation: Reservation) -> None:
        """Give back a reservation whose call never went out. Never raises."""
        self._ledger.release(reservation)

    def daily_credits(self, *, day: str) -> dict[str, int]:
        """Return the credits spent (or reserved) per source on a UTC day. Never raises."""
        return self._ledger.daily_credits(day=day)
