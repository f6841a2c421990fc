"""The search pipeline shared by `sift serve`, `sift search --local` and the bake-off.

    searcher = Searcher(load_config(None), load_secrets(path), store=open_store(db))
    response = searcher.search(SearchRequest(query="sqlite wal mode", k=5))

One search (search.md §4): validate the query, plan the sources (enabled, keyed, not
refused, under their query caps, daily cap reserved), look the plan up in the cache, fan out
to every planned source at once under one wall-clock deadline, merge (`fusion`), truncate,
and store the result only when every attempted source succeeded in full. The plan is
`siftlib.search.plan`, the calls `siftlib.search.fanout`, the credits, counters and health
`siftlib.search.accounting`; this module runs them in order.

Decisions the spec leaves open (the fan-out's and the accounting's are in their modules):
- Without a store (library use and tests), nothing is cached and no cap applies.
- `rerank = false` concatenates; `no_rerank` applies to fusion only.
- A query that cannot be encoded as UTF-8 (a lone surrogate, which `json.loads` lets through
  from both `"\\ud800"` and the raw bytes `ED A0 80`) is `invalid query`.
- A partial answer is served with a warning but never cached: SearXNG naming unresponsive
  engines (`searxng: partial (3 engines unresponsive)`), or a later page lost
  (`searxng: partial (page 2 timeout)`). SearXNG with no hit and unresponsive engines is a
  failure, `searxng: unresponsive`.
- SearXNG's answers, suggestions and corrections go into the native envelope (`answers`,
  `suggestions`, `corrections`, each only when not empty) and nowhere else; a cache hit has
  none (the cache holds hits only).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from siftlib.config import PAID_SOURCES, SOURCE_ORDER, Config, Secrets
from siftlib.errors import Cancelled, NoResultsError, StoreError
from siftlib.hits import Hit
from siftlib.lazylog import LazyLogger
from siftlib.metrics import Metrics
from siftlib.net.deadline import DeadlineClock
from siftlib.query import check_k, normalise_query
from siftlib.search.accounting import Accounts
from siftlib.search.fanout import FanOut, SourceOutcome
from siftlib.search.health import Health
from siftlib.search.plan import choose_sources, merge_mode, search_key, utc_day
from siftlib.search.sources import QueryNotes

if TYPE_CHECKING:
    import httpx

    from siftlib.store.base import Store

log = LazyLogger("sift")

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
        deadline_clock = deadline_clock or DeadlineClock()
        self.fanout = FanOut(
            config,
            secrets,
            deadline_clock=deadline_clock,
            allow_private_upstreams=allow_private_upstreams,
            resolver=resolver,
        )
        self.accounts = Accounts(config, store, self.metrics, self.health, deadline_clock)
        self._secret_env_missing = secrets.file_missing and config.secret_env_configured

    @property
    def deadline_clock(self) -> DeadlineClock:
        """The clock of deadlines and latencies, the fan-out's and the books' alike."""
        return self.fanout.deadline_clock

    @deadline_clock.setter
    def deadline_clock(self, clock: DeadlineClock) -> None:
        self.fanout.deadline_clock = self.accounts.deadline_clock = clock

    def close(self) -> None:
        """Close every upstream client and the worker pool."""
        self.fanout.close()

    def unavailable(self, name: str) -> str | None:
        """Say why a source cannot be called at all (disabled, missing key, DNS, refused)."""
        if name not in self.fanout.adapters:
            return "disabled"
        if self.fanout.missing_key(name):
            return "missing key"
        return self.fanout.upstream(name).problem

    def checkup(self) -> Checkup:
        """Return what `/healthz` reports, from one look at each source and one ledger read.

        A source's state is `missing key`, `capped` (at the daily cap), `failing` (its host does
        not resolve or is refused, or its last `FAILING_AFTER` outcomes failed) or `ok`; the
        degraded list names each source that is not `ok` as `search.<name>: <why>`, then a
        missing secrets file and a store fault. Both come from the same facts, so one answer
        never says a source is `ok` in one place and failing in the other.
        """
        daily = self.accounts.credits_today(utc_day(self.clock()))
        degraded, sources = [], {}
        for name in self.fanout.adapters:
            why = self.unavailable(name)
            capped = self.accounts.capped(name, daily)
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
        if self._secret_env_missing and any(map(self.fanout.missing_key, self.fanout.adapters)):
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
        daily = self.accounts.credits_today(utc_day(self.clock()))
        snapshot["search_daily_credits"] = {f"source={n}": daily().get(n, 0) for n in PAID_SOURCES}
        snapshot["search_capped"] = {
            f"source={n}": int(self.accounts.capped(n, daily)) for n in PAID_SOURCES
        }
        if self.store is not None:
            snapshot["store_up"] = {f"kind={self.config.store_kind}": int(not self.store.problem)}
        return snapshot

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

        planned, skipped = choose_sources(
            request, query, day, warnings, fanout=self.fanout, accounts=self.accounts
        )
        merge = merge_mode(self.config, rerank, planned)
        key = None
        if request.use_cache and self.store is not None and planned:
            key = search_key(self.config, request, query, planned, k=k, merge=merge, now=now)
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
        reservations = self.accounts.reserve_all(planned, day, warnings, skipped)
        if not reservations:
            _log(request, query, [], 0, "miss", 0)
            raise NoResultsError.because("no source could be called", warnings)

        outcomes = self.fanout.run(list(reservations), query, k, started, cancel)
        by_source: dict[str, Sequence[Hit]] = {}
        failed = list(skipped)
        complete = True
        notes = QueryNotes()
        for outcome in outcomes:
            self.accounts.settle(request.caller, outcome, reservations[outcome.name], day)
            if outcome.failure is None:
                by_source[outcome.name] = outcome.hits
                notes = notes | outcome.notes
                warnings.extend(f"{outcome.name}: partial ({why})" for why in outcome.partial)
                complete = complete and not outcome.partial
            else:
                failed.append(outcome.name)
                warnings.append(f"{outcome.name}: {outcome.failure}")
        if cancel is not None and cancel.is_set():
            _log(request, query, planned, 0, "cancelled", 0)
            raise Cancelled("cancelled")
        failed.sort(key=SOURCE_ORDER.index)
        ok = [name for name in planned if name not in failed]
        if not ok:
            _log(request, query, planned, 0, "miss", 0)
            raise NoResultsError.because("every source failed", warnings)

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
        capped, reservation = self.accounts.reserve(name, day)
        if capped:
            return SourceOutcome(name, failure="daily cap", sent=False)
        started = self.deadline_clock.now()
        outcome = self.fanout.send(name, self.fanout.build(name, build), deadline)
        outcome = outcome._replace(ms=(self.deadline_clock.now() - started) * 1000)
        self.accounts.settle(caller, outcome, reservation, day)
        return outcome

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
        _log(request, query, ok + failed, len(hits), "hit" if cached else "miss", rerank_ms)
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
