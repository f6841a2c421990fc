"""A searcher's books: the day's credits, cap reservations, and what each call is counted as.

    accounts = Accounts(config, store, metrics, health, deadline_clock)
    capped, reservation = accounts.reserve("tavily", day="2026-12-03")
    accounts.settle("ops", outcome, reservation, day="2026-12-03")

Decisions the spec leaves open:
- Credits: a daily cap is reserved before the call, after the cache lookup: a cache hit
  writes nothing to the ledger. The plan reads the ledger to leave out a source at its
  cap (the cache key names the sources planned); a source that loses the last credit to
  another search between that read and its reservation is skipped then, as `daily cap`,
  and the answer is not cached, since its key names that source. A call that never left
  (connection or pinning refused) gives the reservation back; a non-2xx answer spends
  nothing; a timeout keeps the reservation (the provider may well have charged); a 2xx
  settles to the actual credits.
- Failure accounting: a source the search wanted and got nothing from is in
  `sources_failed`, whatever the kind: a failed call, or a skip for a missing key, the daily
  cap, a too-long query, a host that does not resolve (`dns failed`) or is refused by the
  SSRF boundary (`upstream refused`). Each such source is one `search_errors` count of its
  kind (a status counts as its number) and one WARNING line `source <name> failed: <kind>`
  on the `sift.source` logger, never the query, a host or a URL (`sift search`, which prints
  the warnings itself, holds that logger to ERROR). A partial answer is a warning, not a failure.
- Health (`siftlib.search.health`): each call's outcome and latency, and each `dns failed` or
  `upstream refused` skip, go into the rolling per-source record `/healthz` reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from siftlib.lazylog import LazyLogger

if TYPE_CHECKING:
    from siftlib.config import Config
    from siftlib.metrics import Metrics
    from siftlib.net.deadline import DeadlineClock
    from siftlib.search.fanout import SourceOutcome
    from siftlib.search.health import Health
    from siftlib.store.base import Reservation, Store

source_log = LazyLogger("sift.source")  # a failed source, for the operator's log

# How long a plan trusts the day's credits it read last (`Accounts.planning_credits`).
PLAN_CREDITS_AGE = 1.0
# Failures after which the provider may have charged the call: its reservation stays booked.
_MAYBE_CHARGED = frozenset(("timeout", "cancelled"))


class Accounts:
    """The daily credits, reservations, counters and health records of one searcher's sources."""

    def __init__(
        self,
        config: Config,
        store: Store | None,
        metrics: Metrics,
        health: Health,
        deadline_clock: DeadlineClock,
    ) -> None:
        self.config = config
        self.store = store
        self.metrics = metrics
        self.health = health
        self.deadline_clock = deadline_clock
        self._plan_credits: tuple[float, str, dict[str, int]] | None = None  # (read at, day, …)

    def credits_today(self, day: str) -> Callable[[], dict[str, int]]:
        """Return a reader of the day's credits per source that asks the store at most once.

        The store answers for every source in one read, so one plan or report needs only one.
        """
        store = self.store
        read: list[dict[str, int]] = []  # a closure, not functools.cache: that wraps per call

        def daily() -> dict[str, int]:
            if not read:
                read.append(store.daily_credits(day=day) if store is not None else {})
            return read[0]

        return daily

    def planning_credits(self, day: str) -> Callable[[], dict[str, int]]:
        """Return a reader of the day's credits for a plan, trusting one read for PLAN_CREDITS_AGE.

        A cache hit plans too, and a store read per hit (a SQLite query under the store's lock,
        a Redis round trip) cost a capped source's hits ~100 µs each. A plan only chooses whom
        to ask: the reservation before any call stays exact, and this process's own
        reservations forget the read at once, so only another gateway's spending is seen late.
        """
        seen = self._plan_credits
        now = self.deadline_clock.now()
        if seen is not None and seen[1] == day and now - seen[0] < PLAN_CREDITS_AGE:
            return lambda: seen[2]
        fresh = self.credits_today(day)

        def daily() -> dict[str, int]:
            credits = fresh()
            self._plan_credits = (now, day, credits)
            return credits

        return daily

    def capped(self, name: str, daily: Callable[[], dict[str, int]]) -> bool:
        """Tell whether a source with a daily cap has spent it, by the credits `daily` reads."""
        cap = self.config.source(name).daily_credit_cap
        if not cap or self.store is None:
            return False
        return daily().get(name, 0) >= cap

    def reserve_all(
        self, planned: Sequence[str], day: str, warnings: list[str], skipped: list[str]
    ) -> dict[str, Reservation | None]:
        """Reserve a credit of each planned source that has a cap (None: no cap).

        A source whose last credit went to another search since the plan is skipped now.
        """
        reservations: dict[str, Reservation | None] = {}
        for name in planned:
            capped, reservation = self.reserve(name, day)
            if capped:
                self.skip(name, "daily cap", warnings, skipped)
            else:
                reservations[name] = reservation
        return reservations

    def skip(self, name: str, why: str, warnings: list[str], skipped: list[str]) -> None:
        """Leave a source out of this search: a warning, and a counted and logged failure."""
        warnings.append(f"{name}: {why}")
        skipped.append(name)
        self._note_failure(name, why)

    def _note_failure(self, name: str, kind: str) -> None:
        """Count a source's failure by kind and log it: one WARNING, never a query or URL."""
        label = kind.split(" ", 1)[0] if kind[0].isdigit() else kind
        self.metrics.inc("search_errors", source=name, kind=label)
        source_log.warning("source %s failed: %s", name, kind)

    def reserve(self, name: str, day: str) -> tuple[bool, Reservation | None]:
        """Reserve one credit of a capped source; return (at the cap, the reservation)."""
        cap = self.config.source(name).daily_credit_cap  # always 0 for SearXNG
        if not cap or self.store is None:
            return False, None
        reservation = self.store.reserve(name, day=day, cap=cap, credits=1)
        self._plan_credits = None  # the next plan reads what this one reserved
        return reservation is None, reservation

    def settle(
        self, caller: str, outcome: SourceOutcome, reservation: Reservation | None, day: str
    ) -> None:
        """Settle the cap reservation and count the call, its credits and its failure."""
        name = outcome.name
        if reservation is None and outcome.credits and self.store is not None:
            # No cap, so nothing was reserved; the daily total still counts every credit.
            reservation = self.store.reserve(name, day=day, cap=0)
        if reservation is not None and self.store is not None:
            if not outcome.sent:
                self.store.release(reservation)
            elif outcome.failure not in _MAYBE_CHARGED:  # it may be charged: kept booked
                self.store.settle(reservation, actual=outcome.credits)
            self._plan_credits = None  # the next plan reads what this search spent
        if outcome.sent:
            self.metrics.inc("search_queries", outcome.calls, caller=caller, source=name)
        if outcome.credits:
            self.metrics.inc("search_credits", outcome.credits, caller=caller, source=name)
        if outcome.failure == "cancelled":
            return  # our caller gave up: not the source's failure, nor its latency
        self.health.record(
            name, ok=outcome.failure is None, ms=outcome.ms if outcome.sent else None
        )
        restricted = caller in self.config.permit_restricted  # in no caller-less aggregate
        if outcome.sent and outcome.ms is not None and not restricted:
            self.metrics.observe("search_source_seconds", outcome.ms / 1000, source=name)
        if outcome.failure is not None:
            self._note_failure(name, outcome.failure)
