"""The search pipeline shared by `sift serve`, `sift search --local` and the bake-off.

    searcher = Searcher(load_config(None), load_secrets(path), store=open_store(db))
    response = searcher.search(SearchRequest(query="sqlite wal mode", k=5))

One search (search.md §4): validate the query, plan the sources (enabled, keyed, not
refused, under their query caps, daily cap reserved), look the plan up in the cache, fan out
to every planned source at once under one wall-clock deadline, merge (`fusion`), truncate,
and store the result only when every attempted source succeeded in full.

Decisions the spec leaves open:
- Each source runs on a worker thread; the caller waits at most `search.timeout` in all.
  A worker reads the body itself in chunks and stops at the deadline or at 2 MiB, so a
  dripping upstream is cut and its thread freed soon after.
- Credits: a daily cap is reserved before the call, after the cache lookup: a cache hit
  writes nothing to the ledger. The plan reads the ledger to leave out a source at its
  cap (the cache key names the sources planned); a source that loses the last credit to
  another search between that read and its reservation is skipped then, as `daily cap`,
  and the answer is not cached, since its key names that source. A call that never left
  (connection or pinning refused) gives the reservation back; a non-2xx answer spends
  nothing; a timeout keeps the reservation (the provider may well have charged); a 2xx
  settles to the actual credits.
- Without a store (library use and tests), nothing is cached and no cap applies.
- `rerank = false` concatenates; `no_rerank` applies to fusion only.
- A source call ends in a last `except Exception`: whatever an adapter or client raises that
  no earlier clause names is that source's `bad response`, logged by exception type only
  (its text may quote the upstream's body). The other sources' hits are kept.
- A query that cannot be encoded as UTF-8 (a lone surrogate, which `json.loads` lets through
  from both `"\\ud800"` and the raw bytes `ED A0 80`) is `invalid query`.
- A partial answer is served with a warning but never cached: SearXNG naming unresponsive
  engines (`searxng: partial (3 engines unresponsive)`), or a later page lost
  (`searxng: partial (page 2 timeout)`). SearXNG with no hit and unresponsive engines is a
  failure, `searxng: unresponsive`.
- Pages: while the source says another page could help (SearXNG: a full page, fewer than
  `k` distinct hits), its worker asks for the next one under the same deadline. The pages in
  so far are kept at the deadline or when a later page fails; a page that adds no new URL
  ends the paging. Each page is an upstream call in `search_queries`.
- Failure accounting: a source the search wanted and got nothing from is in
  `sources_failed`, whatever the kind: a failed call, or a skip for a missing key, the daily
  cap, a too-long query, a host that does not resolve (`dns failed`) or is refused by the
  SSRF boundary (`upstream refused`). Each such source is one `search_errors` count of its
  kind (a status counts as its number) and one WARNING line `source <name> failed: <kind>`
  on the `sift.source` logger, never the query, a host or a URL (`sift search`, which prints
  the warnings itself, holds that logger to ERROR). A partial answer is a warning, not a failure.
- Health (`siftlib.search.health`): each call's outcome and latency, and each `dns failed` or
  `upstream refused` skip, go into the rolling per-source record `/healthz` reports.
- SearXNG's answers, suggestions and corrections go into the native envelope (`answers`,
  `suggestions`, `corrections`, each only when not empty) and nowhere else; a cache hit has
  none (the cache holds hits only).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, NamedTuple

from siftlib.config import PAID_SOURCES, SOURCE_ORDER, Config, Secrets, load_secrets
from siftlib.errors import Cancelled, NoResultsError, StoreError
from siftlib.lazylog import LazyLogger
from siftlib.metrics import Metrics
from siftlib.net.deadline import DeadlineClock
from siftlib.search.health import Health
from siftlib.search.hits import Hit
from siftlib.search.query import check_k, normalise_query
from siftlib.search.sources import SOURCES, BadResponse, QueryNotes, Source, Unresponsive
from siftlib.store.base import Reservation, cache_key
from siftlib.store.factory import open_configured_store

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

    import httpx

    from siftlib.net.dial import Upstream
    from siftlib.store.base import Store

log = LazyLogger("sift")
source_log = LazyLogger("sift.source")  # a failed source, for the operator's log

MAX_BODY_BYTES = 2 * 1024 * 1024
_CHUNK = 64 * 1024
_WORKERS = 64
# How long a plan trusts the day's credits it read last (`Searcher._planning_credits`).
PLAN_CREDITS_AGE = 1.0
# After a cancel, how long the fan-out waits for its calls to say whether they were sent.
_CANCEL_GRACE = 0.5
# Failures after which the provider may have charged the call: its reservation stays booked.
_MAYBE_CHARGED = frozenset(("timeout", "cancelled"))
_COUNTERS_AT_START: dict[str, object] = {
    "search_queries": {},
    "search_credits": {},
    "search_errors": {},
    "search_cache_hit": 0,
    "search_cache_miss": 0,
}


class SearchRequest(NamedTuple):
    """One search, as a caller asks for it."""

    query: str
    k: int | None = None
    rerank: bool | None = None
    digest: bool = False
    caller: str = "local"
    use_cache: bool = True
    sources: tuple[str, ...] | None = None


class SearchResponse(NamedTuple):
    """The outcome of one search: fused hits plus what went wrong on the way."""

    results: list[Hit]
    warnings: list[str]
    sources_ok: list[str]
    sources_failed: list[str]
    search_ms: int
    rerank_ms: int
    cached: bool
    credits: Mapping[str, int] = {}  # never mutated: each search passes its own
    notes: QueryNotes = QueryNotes()
    stored: tuple[Hit, ...] | None = None  # a cache hit: its entry as the store holds it

    def to_native(self) -> dict[str, object]:
        """Return the native API's response envelope (search.md §3.1)."""
        return {
            "results": [hit.to_dict() for hit in self.results],
            **self.notes.to_dict(),
            "warnings": self.warnings,
            "sizes": {
                "results": len(self.results),
                "sources_ok": self.sources_ok,
                "sources_failed": self.sources_failed,
            },
            "timings": {"search_ms": self.search_ms, "rerank_ms": self.rerank_ms},
            "cached": self.cached,
        }


class Checkup(NamedTuple):
    """What `/healthz` reports: what cannot serve now, and each source's state and record."""

    degraded: list[str]
    sources: dict[str, dict[str, object]]


class SourceOutcome(NamedTuple):
    """What one source came to: hits, or the warning kind that replaced them.

    A usable answer may still be partial: `unresponsive` names the upstream's engines that
    did not answer, `lost_page` says which later page failed and how (`(2, "timeout")`).
    `ms` is the wall-clock time the source took, for its health record.
    """

    name: str
    hits: tuple[Hit, ...] = ()
    credits: int = 0
    failure: str | None = None
    sent: bool = True
    calls: int = 1
    unresponsive: tuple[str, ...] = ()
    lost_page: tuple[int, str] | None = None
    notes: QueryNotes = QueryNotes()
    ms: float | None = None

    @property
    def partial(self) -> list[str]:
        """Return why a usable answer is incomplete, one reason a warning."""
        reasons = [f"{len(self.unresponsive)} engines unresponsive"] if self.unresponsive else []
        if self.lost_page is not None:
            page, kind = self.lost_page
            reasons.append(f"page {page} {kind}")
        return reasons

    def and_page(self, page: SourceOutcome) -> SourceOutcome:
        """Return this outcome with a later page's hits, credits, engines and notes added."""
        return self._replace(
            hits=self.hits + page.hits,
            credits=self.credits + page.credits,
            calls=self.calls + page.calls,
            unresponsive=tuple(dict.fromkeys((*self.unresponsive, *page.unresponsive))),
            notes=self.notes | page.notes,
        )


class _Pages:
    """The pages of one source that are in so far, for the fan-out to take at the deadline."""

    def __init__(self) -> None:
        self.latest: tuple[int, SourceOutcome] | None = None  # (pages in, outcome); one write


class _TooLarge(Exception):
    """The answer passed the size limit."""


class _Deadline(Exception):
    """The wall-clock deadline passed while reading."""


def hour_bucket(now: float) -> str:
    """Return the cache's hour bucket, UTC `YYYY-MM-DDTHH`."""
    return _hour_text(int(now // 3600))


def utc_day(now: float) -> str:
    """Return the daily cap's day, UTC `YYYY-MM-DD`."""
    return _hour_text(int(now // 3600))[:10]


@functools.lru_cache(maxsize=4)
def _hour_text(hour: int) -> str:
    # Every search needs both texts; formatting them once an hour keeps strftime off the hot path.
    return time.strftime("%Y-%m-%dT%H", time.gmtime(hour * 3600))


def caller_class(caller: str, restricted: Collection[str]) -> str:
    """Return the cache partition: `fleet`, or a restricted caller's own `restricted:<name>`."""
    return f"restricted:{caller}" if caller in restricted else "fleet"


class Searcher:
    """The configured sources, their pinned clients, the store and the counters."""

    def __init__(
        self,
        config: Config,
        secrets: Secrets,
        *,
        store: Store | None = None,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
        deadline_clock: DeadlineClock | None = None,
        allow_private_upstreams: bool = False,
        resolver: Callable[[str, int], list[str]] | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.metrics = metrics or Metrics()
        self.health = Health()
        self.clock = clock
        self.deadline_clock = deadline_clock or DeadlineClock()
        self._plan_credits: tuple[float, str, dict[str, int]] | None = None  # (read at, day, …)
        self._sources: dict[str, Source] = {}
        self._keys: dict[str, str | None] = {}
        self._upstreams: dict[str, Upstream] = {}
        self._opening = threading.Lock()
        self._allow_private = allow_private_upstreams
        self._resolver = resolver
        self._pool: ThreadPoolExecutor | None = None  # started by the first search that calls
        self._secret_env_missing = secrets.file_missing and config.secret_env_configured
        for source in config.enabled_sources:
            adapter = SOURCES[source.name](source.url)
            key = secrets.get(adapter.key_name) if adapter.key_name else None
            self._sources[source.name] = adapter
            self._keys[source.name] = key
            if adapter.key_name and key is None:
                log.warning("search.%s: missing key (%s)", source.name, adapter.key_name)
        if allow_private_upstreams and any(s.must_be_public for s in config.enabled_sources):
            from siftlib.net.dial import announce_allow_private

            announce_allow_private()

    def close(self) -> None:
        """Close every upstream client and the worker pool."""
        with self._opening:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
            for upstream in self._upstreams.values():
                upstream.close()

    def unavailable(self, name: str) -> str | None:
        """Say why a source cannot be called at all (disabled, missing key, DNS, refused)."""
        if name not in self._sources:
            return "disabled"
        if self._missing_key(name):
            return "missing key"
        return self._upstream(name).problem

    def _missing_key(self, name: str) -> bool:
        return self._sources[name].key_name is not None and self._keys[name] is None

    def _opened_problem(self, name: str) -> str | None:
        """Return the problem of a source's client (dns failed, refused) if it is open yet.

        A source's pinned client (and httpx with it) is opened on its first call, not before:
        a search answered from the cache needs no HTTP client, and `sift search` pays for
        its import only on a miss. A host that does not resolve is then that call's failure.
        """
        upstream = self._upstreams.get(name)
        return upstream.problem if upstream is not None else None

    def _upstream(self, name: str) -> Upstream:
        """Return a source's pinned client, opening it on first use."""
        with self._opening:
            upstream = self._upstreams.get(name)
            if upstream is None:
                from siftlib.net.dial import open_upstream

                source = self.config.source(name)
                upstream = self._upstreams[name] = open_upstream(
                    source.url,
                    public=source.must_be_public,
                    timeout=self.config.timeout,
                    allow_private=self._allow_private,
                    resolver=self._resolver,
                )
            return upstream

    def _workers(self) -> ThreadPoolExecutor:
        """Return the pool the sources are called on, starting it on first use.

        A search answered from the cache calls no source: `sift search` then imports no
        `concurrent.futures` and starts no pool.
        """
        with self._opening:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(_WORKERS, thread_name_prefix="sift-source")
            return self._pool

    def checkup(self) -> Checkup:
        """Return what `/healthz` reports, from one look at each source and one ledger read.

        A source's state is `missing key`, `capped` (at the daily cap), `failing` (its host does
        not resolve or is refused, or its last `FAILING_AFTER` outcomes failed) or `ok`; the
        degraded list names each source that is not `ok` as `search.<name>: <why>`, then a
        missing secrets file and a store fault. Both come from the same facts, so one answer
        never says a source is `ok` in one place and failing in the other.
        """
        daily = self._credits_today(utc_day(self.clock()))
        degraded, sources = [], {}
        for name in self._sources:
            why = self.unavailable(name)
            capped = self._capped(name, daily)
            failing = self.health.failing(name)
            reason = why or (capped and "daily cap") or (failing and "failing")
            if reason:
                degraded.append(f"search.{name}: {reason}")
            if why == "missing key":
                state = "missing key"
            elif capped:
                state = "capped"
            elif why is not None or failing:
                state = "failing"
            else:
                state = "ok"
            sources[name] = {"state": state, **self.health.report(name)}
        if self._secret_env_missing and any(map(self._missing_key, self._sources)):
            degraded.append("server.secret_env: file missing")
        problem = self.store.problem if self.store is not None else None
        if problem:
            degraded.append(f"store: {problem}")
        return Checkup(degraded, sources)

    def metrics_snapshot(self) -> dict[str, object]:
        """Return the `/metrics` JSON: counters, plus today's credits and capped state."""
        # Every counter search.md §3.3 names is present from the start, at zero or empty.
        counters = {**_COUNTERS_AT_START, **self.metrics.snapshot()}
        snapshot: dict[str, object] = dict(sorted(counters.items()))
        daily = self._credits_today(utc_day(self.clock()))
        snapshot["search_daily_credits"] = {f"source={n}": daily().get(n, 0) for n in PAID_SOURCES}
        snapshot["search_capped"] = {
            f"source={n}": int(self._capped(n, daily)) for n in PAID_SOURCES
        }
        if self.store is not None:
            snapshot["store_up"] = {f"kind={self.config.store_kind}": int(not self.store.problem)}
        return snapshot

    def _credits_today(self, day: str) -> Callable[[], dict[str, int]]:
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

    def _planning_credits(self, day: str) -> Callable[[], dict[str, int]]:
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
        fresh = self._credits_today(day)

        def daily() -> dict[str, int]:
            credits = fresh()
            self._plan_credits = (now, day, credits)
            return credits

        return daily

    def _capped(self, name: str, daily: Callable[[], dict[str, int]]) -> bool:
        cap = self.config.source(name).daily_credit_cap
        if not cap or self.store is None:
            return False
        return daily().get(name, 0) >= cap

    def search(
        self, request: SearchRequest, *, cancel: threading.Event | None = None
    ) -> SearchResponse:
        """Run one search; raise `QueryError` or `NoResultsError` when it cannot answer.

        Once `cancel` is set, the search raises `Cancelled`: its upstream requests close,
        reservations of calls not sent go back, and nothing is cached.
        """
        started = self.deadline_clock.now()
        query = normalise_query(request.query)
        k = check_k(self.config.k if request.k is None else request.k)
        rerank = self.config.rerank if request.rerank is None else request.rerank
        now = self.clock()
        day = utc_day(now)
        warnings: list[str] = ["digest: not supported"] if request.digest else []

        planned, skipped = self._plan(request, query, day, warnings)
        merge = self._merge_mode(rerank, planned)
        key = None
        if request.use_cache and self.store is not None and planned:
            key = cache_key(
                query=query,
                # Each source with its configured URL: pointing one elsewhere (a reload, an
                # edited config) must never serve the old upstream's entries.
                sources=[f"{name} {self.config.source(name).url}" for name in planned],
                k=k,
                merge=merge,
                hour_bucket=hour_bucket(now),
                caller_class=caller_class(request.caller, self.config.permit_restricted),
            )
            try:
                cached = self.store.cache_get(key, now=now)
            except StoreError as exc:
                cached, key = None, None
                warnings.append(f"store: {exc}")
            aggregated = request.caller not in self.config.permit_restricted
            if cached is not None:
                if aggregated:
                    self.metrics.inc("search_cache_hit")
                response = self._finish(
                    request,
                    query,
                    list(cached.hits),
                    warnings,
                    planned,
                    skipped,
                    started,
                    0,
                    cached=True,
                )._replace(stored=cached.hits)
                if aggregated:
                    self.metrics.observe(
                        "search_cache_hit_seconds", self.deadline_clock.now() - started
                    )
                return response
            if aggregated:
                self.metrics.inc("search_cache_miss")

        if cancel is not None and cancel.is_set():
            raise Cancelled("cancelled")
        reservations = self._reserve_all(planned, day, warnings, skipped)
        if not reservations:
            self._log(request, query, [], 0, "miss", 0)
            raise NoResultsError("no search results: no source could be called", warnings)

        outcomes = self._fan_out(list(reservations), query, k, started, cancel)
        by_source: dict[str, Sequence[Hit]] = {}
        failed = list(skipped)
        complete = True
        notes = QueryNotes()
        for outcome in outcomes:
            self._account(request.caller, outcome, reservations[outcome.name], day)
            if outcome.failure is None:
                by_source[outcome.name] = outcome.hits
                notes = notes | outcome.notes
                warnings.extend(f"{outcome.name}: partial ({why})" for why in outcome.partial)
                complete = complete and not outcome.partial
            else:
                failed.append(outcome.name)
                warnings.append(f"{outcome.name}: {outcome.failure}")
        if cancel is not None and cancel.is_set():
            self._log(request, query, planned, 0, "cancelled", 0)
            raise Cancelled("cancelled")
        failed.sort(key=SOURCE_ORDER.index)
        ok = [name for name in planned if name not in failed]
        if not ok:
            self._log(request, query, planned, 0, "miss", 0)
            raise NoResultsError("no search results: every source failed", warnings)

        from siftlib.search import fusion  # a cache hit merges nothing

        merge_started = time.monotonic()
        if rerank:
            prefix = "tavily" if merge.endswith("+tavily-prefix") else None
            hits = fusion.fuse(by_source, order=SOURCE_ORDER, prefix=prefix)
        else:
            hits = fusion.concatenate(by_source, order=SOURCE_ORDER)
        hits = hits[:k]
        rerank_ms = round((time.monotonic() - merge_started) * 1000) if rerank else 0

        if key is not None and not set(failed) & set(planned) and complete:
            try:
                assert self.store is not None
                self.store.cache_put(key, hits, now=now, ttl=self.config.cache_ttl)
            except StoreError as exc:
                warnings.append(f"store: {exc}")
        response = self._finish(
            request, query, hits, warnings, ok, failed, started, rerank_ms, cached=False
        )
        return response._replace(
            credits={o.name: o.credits for o in outcomes if o.credits}, notes=notes
        )

    def _merge_mode(self, rerank: bool, planned: Sequence[str]) -> str:
        if not rerank:
            return "concat"
        tavily = self.config.source("tavily")
        return "rrf+tavily-prefix" if tavily.no_rerank and "tavily" in planned else "rrf"

    def _plan(
        self, request: SearchRequest, query: str, day: str, warnings: list[str]
    ) -> tuple[list[str], list[str]]:
        """Choose the sources to call: enabled, keyed, reachable, under their caps.

        The sources skipped come back too; each is a warning, a counted and logged failure.
        """
        plan: list[str] = []
        skipped: list[str] = []
        daily = self._planning_credits(day)
        for name, adapter in self._sources.items():
            if request.sources is not None and name not in request.sources:
                continue
            problem = self._opened_problem(name)
            why = "missing key" if self._missing_key(name) else problem
            if why is None and adapter.query_too_long(query):
                why = "query too long"
            if why is None and self._capped(name, daily):
                why = "daily cap"
            if why is None:
                plan.append(name)
                continue
            self._skip(name, why, warnings, skipped)
            if why == problem:  # the upstream's own state, unlike a key or cap
                self.health.record(name, ok=False, ms=None)
        return plan, skipped

    def _reserve_all(
        self, planned: Sequence[str], day: str, warnings: list[str], skipped: list[str]
    ) -> dict[str, Reservation | None]:
        """Reserve a credit of each planned source that has a cap (None: no cap).

        A source whose last credit went to another search since the plan is skipped now.
        """
        reservations: dict[str, Reservation | None] = {}
        for name in planned:
            capped, reservation = self._reserve(name, day)
            if capped:
                self._skip(name, "daily cap", warnings, skipped)
            else:
                reservations[name] = reservation
        return reservations

    def _skip(self, name: str, why: str, warnings: list[str], skipped: list[str]) -> None:
        """Leave a source out of this search: a warning, and a counted and logged failure."""
        warnings.append(f"{name}: {why}")
        skipped.append(name)
        self._note_failure(name, why)

    def _note_failure(self, name: str, kind: str) -> None:
        """Count a source's failure by kind and log it: one WARNING, never a query or URL."""
        label = kind.split(" ", 1)[0] if kind[0].isdigit() else kind
        self.metrics.inc("search_errors", source=name, kind=label)
        source_log.warning("source %s failed: %s", name, kind)

    def _reserve(self, name: str, day: str) -> tuple[bool, Reservation | None]:
        """Reserve one credit of a capped source; return (at the cap, the reservation)."""
        cap = self.config.source(name).daily_credit_cap  # always 0 for SearXNG
        if not cap or self.store is None:
            return False, None
        reservation = self.store.reserve(name, day=day, cap=cap, credits=1)
        self._plan_credits = None  # the next plan reads what this one reserved
        return reservation is None, reservation

    def _account(
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

    def _fan_out(
        self,
        planned: Sequence[str],
        query: str,
        k: int,
        started: float,
        cancel: threading.Event | None,
    ) -> list[SourceOutcome]:
        """Call every planned source at once; whatever is not back by the deadline timed out.

        Once `cancel` is set the calls end within `CANCEL_POLL` (their sockets check it), and
        their outcomes, `cancelled`, are waited for: they say which calls were sent.
        """
        deadline = started + self.config.timeout
        pages = {name: _Pages() for name in planned}
        futures: dict[str, Future[SourceOutcome]] = {
            name: self._workers().submit(self._timed, name, query, k, deadline, pages[name], cancel)
            for name in planned
        }
        sent_at = self.deadline_clock.now()
        if cancel is None:
            self.deadline_clock.wait(futures.values(), until=deadline)
        else:
            from siftlib.net.dial import CANCEL_POLL

            clock = self.deadline_clock
            while not cancel.is_set() and clock.now() < deadline:
                if all(future.done() for future in futures.values()):
                    break
                clock.wait(futures.values(), until=min(deadline, clock.now() + CANCEL_POLL))
            if cancel.is_set():
                clock.wait(futures.values(), until=min(deadline, clock.now() + _CANCEL_GRACE))
        waited = (self.deadline_clock.now() - sent_at) * 1000
        outcomes = []
        for name, future in futures.items():
            if future.done():
                outcomes.append(future.result())
            elif (latest := pages[name].latest) is not None:
                done, outcome = latest
                lost = (done + 1, "timeout")
                outcomes.append(
                    outcome._replace(calls=outcome.calls + 1, lost_page=lost, ms=waited)
                )
            else:
                outcomes.append(SourceOutcome(name, failure="timeout", ms=waited))
        return outcomes

    def _timed(
        self,
        name: str,
        query: str,
        k: int,
        deadline: float,
        pages: _Pages,
        cancel: threading.Event | None = None,
    ) -> SourceOutcome:
        """Run one source's part of a search on a worker thread, with its latency."""
        from siftlib.net.dial import wall_clock

        started = self.deadline_clock.now()
        # The deadline is on `deadline_clock` (a test's may not be monotonic): only the cancel.
        with wall_clock(None, cancel=cancel):
            outcome = self._pages(name, query, k, deadline, pages)
        return outcome._replace(ms=(self.deadline_clock.now() - started) * 1000)

    def _pages(
        self, name: str, query: str, k: int, deadline: float, pages: _Pages
    ) -> SourceOutcome:
        """Call a source for page 1, then for further pages while they may fill `k`."""
        from siftlib.search import fusion

        adapter = self._sources[name]
        outcome = self._call(name, self._request(name, query, k), deadline)
        page, got = 1, len(outcome.hits)
        have = len(fusion.distinct(outcome.hits))
        while outcome.failure is None and adapter.next_page(page=page, got=got, have=have, k=k):
            pages.latest = (page, outcome)
            page += 1
            more = self._call(name, self._request(name, query, k, page=page), deadline)
            if more.failure is not None:
                calls = outcome.calls + int(more.sent)
                return outcome._replace(calls=calls, lost_page=(page, more.failure))
            outcome = outcome.and_page(more)
            got, before = len(more.hits), have
            have = len(fusion.distinct(outcome.hits))
            if have == before:
                break  # the page repeated what was in: nothing further to come
        return outcome

    def _request(self, name: str, query: str, k: int, *, page: int = 1) -> httpx.Request:
        return self._sources[name].build_request(query, k=k, key=self._keys[name], page=page)

    def call(
        self, name: str, build: Callable[[str | None], httpx.Request], *, caller: str
    ) -> SourceOutcome:
        """Send one request, built by `build(key)`, to a source under its cap and timeout.

        The bake-off's agent-style Tavily call uses this: same pinned client, cap, deadline,
        body limits, response mapping and counters as a search, another request body. The
        source's key goes only to `build` (a wire-format function), never back to the caller.
        """
        day = utc_day(self.clock())
        deadline = self.deadline_clock.now() + self.config.timeout
        capped, reservation = self._reserve(name, day)
        if capped:
            return SourceOutcome(name, failure="daily cap", sent=False)
        started = self.deadline_clock.now()
        outcome = self._call(name, build(self._keys.get(name)), deadline)
        outcome = outcome._replace(ms=(self.deadline_clock.now() - started) * 1000)
        self._account(caller, outcome, reservation, day)
        return outcome

    def _call(self, name: str, request: httpx.Request, deadline: float) -> SourceOutcome:
        """Send a source's request and map its answer; never raises."""
        import httpx

        from siftlib.net.dial import LookupFailed, UpstreamRefused, current_cancel

        adapter = self._sources[name]
        charged = 0  # a provider bills a 2xx answer, usable or not
        cancel = current_cancel()
        if cancel is not None and cancel.is_set():
            return SourceOutcome(name, failure="cancelled", sent=False)
        try:
            upstream = self._upstream(name)
            remaining = max(0.001, deadline - self.deadline_clock.now())
            request.extensions["timeout"] = httpx.Timeout(remaining).as_dict()
            response = upstream.client.send(request, stream=True)
            try:
                if not 200 <= response.status_code < 300:
                    return SourceOutcome(
                        name, failure=adapter.describe_status(response.status_code)
                    )
                charged = adapter.credits_per_call
                body = _read_capped(response, deadline, self.deadline_clock.now)
            finally:
                response.close()
            answer = adapter.parse(body)
        except Cancelled:  # mid-request: the provider may have charged, as for a timeout
            return SourceOutcome(name, failure="cancelled", credits=charged)
        except UpstreamRefused:
            return SourceOutcome(name, failure="upstream refused", sent=False)
        except LookupFailed:
            return SourceOutcome(name, failure="dns failed", sent=False)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol):
            return SourceOutcome(name, failure="connection failed", sent=False)
        except (httpx.TimeoutException, _Deadline):
            return SourceOutcome(name, failure="timeout", credits=charged)
        except _TooLarge:
            return SourceOutcome(name, failure="too large", credits=charged)
        except Unresponsive:
            return SourceOutcome(name, failure="unresponsive", credits=charged)
        except BadResponse:
            return SourceOutcome(name, failure="bad response", credits=charged)
        except httpx.TooManyRedirects:
            return SourceOutcome(name, failure="bad response")
        except httpx.HTTPError:
            return SourceOutcome(name, failure="connection failed", credits=charged)
        except Exception as exc:  # a failing source is recorded, never raised
            log.warning("%s: bad response (%s)", name, type(exc).__name__)
            return SourceOutcome(name, failure="bad response", credits=charged)
        return SourceOutcome(
            name,
            hits=tuple(answer.hits),
            credits=answer.credits,
            unresponsive=answer.unresponsive,
            notes=answer.notes,
        )

    def _finish(
        self,
        request: SearchRequest,
        query: str,
        hits: list[Hit],
        warnings: list[str],
        ok: list[str],
        failed: list[str],
        started: float,
        rerank_ms: int,
        *,
        cached: bool,
    ) -> SearchResponse:
        self._log(request, query, ok + failed, len(hits), "hit" if cached else "miss", rerank_ms)
        return SearchResponse(
            results=hits,
            warnings=warnings,
            sources_ok=ok,
            sources_failed=failed,
            search_ms=round((self.deadline_clock.now() - started) * 1000),
            rerank_ms=rerank_ms,
            cached=cached,
        )

    def _log(
        self,
        request: SearchRequest,
        query: str,
        sources: Sequence[str],
        n: int,
        cache: str,
        rerank_ms: int,
    ) -> None:
        """Write the one INFO line of a search: never the query text, hosts or URLs."""
        log.info(
            "search caller=%s q_len=%d sources=%s n=%d cache=%s rerank_ms=%d",
            request.caller,
            len(query),
            ",".join(sorted(sources, key=SOURCE_ORDER.index)) or "-",
            n,
            cache,
            rerank_ms,
        )


def _read_capped(response: httpx.Response, deadline: float, now: Callable[[], float]) -> bytes:
    """Read a streamed body, stopping at the deadline or past the size limit."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _TooLarge
    body = bytearray()
    for chunk in response.iter_bytes(_CHUNK):
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise _TooLarge
        if now() > deadline:
            raise _Deadline
    return bytes(body)


@contextmanager
def open_searcher(config: Config, *, allow_private_upstreams: bool = False) -> Iterator[Searcher]:
    """Open the store and a searcher over it, as every command runs; close both after."""
    secrets = load_secrets(config.secret_env, expected=config.secret_env_configured)
    store = open_configured_store(config, secrets)
    searcher = Searcher(
        config,
        secrets,
        store=store,
        allow_private_upstreams=allow_private_upstreams,
    )
    try:
        yield searcher
    finally:
        searcher.close()
        store.close()
