"""One process's account of a source's day, which the cap ledger (`siftlib.store.ledger`) keeps.

    account = Account()
    lease = account.lease_wanted(1, cap=500, share=0.5, now=time.monotonic())
    account.owe(-1)                             # a release the counter has not confirmed

It holds the last total seen, the adjustments owed (`Op`, each with the id the counter
applies once), the reserves to withdraw, the floor, the fallback's holds during an outage,
and the lease: credits booked on the counter that only this process may spend, topped up to
what it reserved in the last `LEASE_WINDOW`. The ledger takes its lock around every call.
"""

from __future__ import annotations

import os

from siftlib.store.counter import Floor

LEASE_WINDOW = 10.0


class Op:
    """One adjustment the counter has not confirmed: an id it applies once, and a delta."""

    __slots__ = ("delta", "flying", "ident", "sent")

    def __init__(self, delta: int) -> None:
        self.ident = os.urandom(8).hex()
        self.delta = delta
        self.sent = False  # sent once: its id is fixed, so nothing more may join it
        self.flying = False  # in a booking right now


class Account:
    """What this process knows of one source's day, and its rules on it."""

    __slots__ = (
        "base",
        "demand",
        "floor",
        "held",
        "lease",
        "local",
        "pending",
        "reserved_at",
        "resend_floor",
        "seen",
        "withdrawals",
    )

    def __init__(self) -> None:
        self.seen = 0
        self.held = 0
        self.pending: list[Op] = []
        self.withdrawals: list[str] = []  # ids of reserves that failed but may land late
        self.base: int | None = None  # `seen` when the current outage began; None: no outage
        self.local = 0  # what the current outage booked here, against its allowance
        self.floor = Floor(0, "")
        self.lease = 0  # credits booked on the counter that only this process may spend
        self.reserved_at = float("-inf")
        self.resend_floor = False  # the counter answers again: it may have come back empty
        self.demand = (float("-inf"), 0, 0)  # a window's start, its credits, the last one's

    @property
    def owing(self) -> bool:
        """Whether the counter is owed an adjustment, a withdrawal or this floor."""
        return bool(self.pending or self.withdrawals or self.resend_floor)

    def owed(self) -> int:
        """Return the sum of the adjustments owed."""
        return sum(op.delta for op in self.pending)

    def owe(self, delta: int) -> None:
        """Owe the counter `delta`, joining the last op unless it was sent (its id is fixed)."""
        last = self.pending[-1] if self.pending else None
        if last is not None and not last.sent:
            last.delta += delta
        else:
            self.pending.append(Op(delta))

    def note(self, credits: int, now: float) -> int:
        """Count a reserve's credits; return the most reserved before it in this window or
        the last one (a lone reserve leases nothing)."""
        start, current, last = self.demand
        if now - start >= LEASE_WINDOW:
            start, current, last = now, 0, current if now - start < 2 * LEASE_WINDOW else 0
        self.demand = (start, current + credits, last)
        self.reserved_at = now
        return max(current, last)

    def lease_wanted(self, credits: int, cap: int, share: float, now: float) -> int:
        """Note a reserve; return the credits to lease with it: the lease topped up to recent
        demand, within `share` of what is left."""
        target = min(self.note(credits, now), int(share * max(cap - self.seen, 0)))
        return max(target - self.lease, 0)

    def spend_lease(self, credits: int) -> bool:
        """Take credits from the lease; False when it holds too few."""
        if self.lease < credits:
            return False
        self.lease -= credits
        return True

    def hold(self, credits: int, cap: int, share: float) -> bool:
        """Hold credits on the fallback (no leases): within `share` of what was left when the
        outage began; False past it."""
        if self.base is None:  # the outage begins for this slot
            self.base = self.seen
            self.local = self.held + max(self.owed(), 0)
        if self.local + credits > int(share * max(cap - self.base, 0)):
            return False
        self.local += credits
        self.held += credits
        return True
