"""Opted-in reranking of the keyword result through System One (skills.md §6–§9).

`SystemOneReranker.search` takes the keyword baseline the caller already computed and returns
either a validated, gated reranked result or that baseline, unchanged. No provider call is made
for an empty catalog, an exact skill name, a closed session, a request the shortlist refuses or
an envelope that is too big; a cache hit makes none either.

The call runs in a worker thread so the caller can stop waiting at the end-to-end deadline
(`timeout_ms` from the moment `search` is entered: client setup, request, reading and parsing
included) or when its `cancel` event is set; either aborts the call, whose connection closes.
A search works on its own immutable catalog snapshot. Every change of catalog (paths included)
clears the cache and starts a new generation, as does `close`; an answer for an older generation
is discarded. A new config or key means a new `SystemOneReranker` (and so an empty cache).

Observers receive `Attempt` events and one `SearchObservation` per search (`observe.py`).

    reranker = SystemOneReranker(settings, key)
    result = reranker.search(catalog, query, limit, keyword_search(catalog, query, limit))
    reranker.close()
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from siftlib.net.abort import Abort
from siftlib.net.deadline import DeadlineClock
from siftlib.skills.cache import SessionCache
from siftlib.skills.catalog import Catalog, Skill
from siftlib.skills.consent import RerankSettings
from siftlib.skills.decide import (
    Decision,
    InvalidAnswer,
    Outcome,
    Reason,
    decide,
    decide_fit,
    fail,
    normalise,
    validate_distribution,
    validate_fits,
)
from siftlib.skills.keyword import SkillResult, normalise_query
from siftlib.skills.observe import (
    Attempt,
    AttemptEvent,
    CacheState,
    Observer,
    SearchObservation,
    ShortlistKind,
    Trail,
    notify,
    observation,
)
from siftlib.skills.provider import (
    ProviderAnswer,
    ProviderError,
    SystemOne,
    build_body,
    parse_response,
    resolve_base_url,
)
from siftlib.skills.shortlist import OutboundRequest, build_request

if TYPE_CHECKING:
    import httpx

CONTRACT_VERSION = "skills/1"
CANCEL_POLL_SECONDS = 0.01


@dataclass(eq=False)
class _Call:
    """One in-flight provider call: its abort handle and, once done, its answer or failure."""

    abort: Abort = dataclasses.field(default_factory=Abort)
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    answer: ProviderAnswer | None = None
    reason: Reason | None = None


class SystemOneReranker:
    """Opted-in reranking for one session: lazy provider client, session cache, observers."""

    def __init__(
        self,
        settings: RerankSettings,
        api_key: str,
        *,
        base_url: str | None = None,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
        deadline_clock: DeadlineClock | None = None,
        observers: Sequence[Observer] = (),
    ) -> None:
        self._settings = settings
        self._api_key = api_key
        self._base_url = resolve_base_url(base_url)
        self._transport = transport
        self._observers = tuple(observers)
        self._deadline_clock = deadline_clock or DeadlineClock()
        self._cache = SessionCache(
            max_entries=settings.cache_max_entries, ttl_ms=settings.cache_ttl_ms, clock=clock
        )
        self._lock = threading.Lock()
        self._client: SystemOne | None = None
        self._calls: set[_Call] = set()
        self._skills: tuple[Skill, ...] | None = None
        self._generation = 0
        self._closed = False

    def search(
        self,
        catalog: Catalog,
        query: str,
        limit: int,
        baseline: SkillResult,
        *,
        cancel: threading.Event | None = None,
    ) -> SkillResult:
        """Rerank the keyword `baseline` of `query`, or return it unchanged."""
        deadline = self._deadline_clock.now() + self._settings.timeout_ms / 1000.0
        trail = Trail()
        try:
            outcome = self._search(catalog, query, cancel, deadline, trail)
        except Exception:
            # Whatever went wrong, the caller still gets its keyword result.
            outcome = fail(Reason.INTERNAL)
        if outcome.decision in (Decision.ACCEPTED, Decision.NO_MATCH):
            ranked = tuple(trail.shortlist[i] for i in outcome.ranked)
            result = SkillResult(matches=ranked[:limit], total=len(ranked))
        else:
            result = baseline
        self._observe_search(catalog, outcome, trail, baseline, result)
        return result

    def prepare(self) -> None:
        """Set up the provider client now (no connection is made until a search sends), so
        that a search's deadline goes to the provider, not to loading the HTTP library and
        its certificates (§8: 0.25 s of a 1 s deadline on a busy machine)."""
        with contextlib.suppress(ProviderError):  # closed already: searches will say so
            self._provider()

    def close(self) -> None:
        """End the session: abort outstanding calls, clear the cache, close the client."""
        with self._lock:
            self._closed = True
            self._generation += 1
            calls, self._calls = self._calls, set()
            client, self._client = self._client, None
        for call in calls:
            call.abort.abort()
        self._cache.clear()
        if client is not None:
            client.close()

    def _search(
        self,
        catalog: Catalog,
        query: str,
        cancel: threading.Event | None,
        deadline: float,
        trail: Trail,
    ) -> Outcome:
        generation = self._snapshot(catalog)
        if generation is None:
            return Outcome(Decision.SKIPPED, Reason.CLOSED)
        if not catalog.skills:
            return Outcome(Decision.SKIPPED, Reason.EMPTY_CATALOG)
        normalised = normalise_query(query)
        if any(skill.name.lower() == normalised for skill in catalog.skills):
            return Outcome(Decision.SKIPPED, Reason.EXACT_NAME)
        if cancel is not None and cancel.is_set():
            return fail(Reason.CANCELLED)
        request = build_request(catalog, query, self._settings)
        if not isinstance(request, OutboundRequest):
            trail.shortlist_kind = ShortlistKind.NO_REQUEST
            return Outcome(Decision.SKIPPED, Reason.NO_REQUEST)
        trail.shortlist_kind = ShortlistKind.REQUEST
        trail.shortlist = request.candidates
        key = self._cache_key(normalised, request)
        if not self._cache.enabled:
            trail.cache = CacheState.DISABLED
        else:
            cached = self._cache.get(key)
            if cached is not None:
                trail.cache = CacheState.HIT
                return dataclasses.replace(cached, reason=Reason.CACHED)
            trail.cache = CacheState.MISS
        try:
            body = build_body(request, model=self._settings.model, fit=self._fit)
        except ProviderError as exc:
            return Outcome(Decision.SKIPPED, exc.reason)
        outcome = self._call(body, request, cancel, deadline, trail)
        with self._lock:
            if generation != self._generation:
                return fail(Reason.STALE)
            if outcome.cacheable and self._cache.enabled:
                self._cache.put(key, outcome)
                trail.cache = CacheState.STORED
        return outcome

    @property
    def _fit(self) -> bool:
        return self._settings.experimental_fit

    def _snapshot(self, catalog: Catalog) -> int | None:
        """Note the catalog a search uses; a changed one clears the cache. None when closed."""
        with self._lock:
            if self._closed:
                return None
            if catalog.skills != self._skills:
                if self._skills is not None:
                    self._generation += 1
                    self._cache.clear()
                self._skills = catalog.skills
            return self._generation

    def _cache_key(self, normalised: str, request: OutboundRequest) -> Hashable:
        settings = dataclasses.astuple(self._settings)
        transmitted = tuple(
            (candidate["id"], candidate["name"], candidate["description"])
            for candidate in request.body["candidates"]
        )
        return (CONTRACT_VERSION, self._settings.model, normalised, settings, transmitted)

    def _call(
        self,
        body: bytes,
        request: OutboundRequest,
        cancel: threading.Event | None,
        deadline: float,
        trail: Trail,
    ) -> Outcome:
        """Make the one provider call, wait for it within the deadline, and decide."""
        if cancel is not None and cancel.is_set():
            return fail(Reason.CANCELLED)
        call = _Call()
        with self._lock:
            if self._closed:
                return Outcome(Decision.SKIPPED, Reason.CLOSED)
            self._calls.add(call)
        self._notify(Attempt(AttemptEvent.STARTED))
        worker = threading.Thread(target=self._run, args=(call, body, deadline), daemon=True)
        worker.start()
        try:
            stopped = self._wait(call, cancel, deadline)
        finally:
            with self._lock:
                self._calls.discard(call)
        if stopped is not None:
            call.abort.abort()
            self._notify(Attempt(AttemptEvent.ABORTED, stopped))
            return fail(stopped)
        if call.answer is None:
            reason = call.reason or Reason.NETWORK
            self._notify(Attempt(AttemptEvent.FAILED, reason))
            return fail(reason)
        self._notify(Attempt(AttemptEvent.ANSWERED))
        trail.input_tokens = call.answer.input_tokens
        trail.output_tokens = call.answer.output_tokens
        return _judge(call.answer, len(request.candidates), self._settings)

    def _wait(self, call: _Call, cancel: threading.Event | None, deadline: float) -> Reason | None:
        """Wait for the call; return why waiting stopped early, or None once it is done."""
        while True:
            now = self._deadline_clock.now()
            if deadline - now <= 0:
                return Reason.TIMEOUT
            # A caller's cancel event cannot be waited on together with ours: poll it.
            until = deadline if cancel is None else min(deadline, now + CANCEL_POLL_SECONDS)
            if self._deadline_clock.wait_event(call.done, until=until):
                return None
            if cancel is not None and cancel.is_set():
                return Reason.CANCELLED

    def _run(self, call: _Call, body: bytes, deadline: float) -> None:
        """Worker: set up the client if needed, send, read and parse; never raises."""
        try:
            client = self._provider()
            remaining = deadline - self._deadline_clock.now()
            if remaining <= 0:
                raise ProviderError(Reason.TIMEOUT)
            call.answer = parse_response(client.post(body, timeout=remaining, abort=call.abort))
        except (ProviderError, InvalidAnswer) as exc:
            call.reason = exc.reason
        except Exception:
            call.reason = Reason.NETWORK
        finally:
            call.done.set()

    def _provider(self) -> SystemOne:
        with self._lock:
            if self._closed:
                raise ProviderError(Reason.CLOSED)
            if self._client is None:
                self._client = SystemOne(
                    api_key=self._api_key, base_url=self._base_url, transport=self._transport
                )
            return self._client

    def _notify(self, event: Attempt | SearchObservation) -> None:
        notify(self._observers, event)

    def _observe_search(
        self,
        catalog: Catalog,
        outcome: Outcome,
        trail: Trail,
        baseline: SkillResult,
        result: SkillResult,
    ) -> None:
        if self._observers:
            self._notify(observation(catalog, outcome, trail, baseline, result))


def _judge(answer: ProviderAnswer, count: int, settings: RerankSettings) -> Outcome:
    """Validate the provider's answer for `count` candidates and decide by the gates (§7)."""
    ids = [f"c{i}" for i in range(count)]
    try:
        fits = validate_fits(answer.answers, ids) if settings.experimental_fit else None
        distribution = validate_distribution(normalise(answer.answers), ids)
    except InvalidAnswer as exc:
        return fail(exc.reason)
    if fits is not None:
        return decide_fit(
            distribution,
            fits,
            min_probability=settings.min_probability,
            min_margin=settings.min_margin,
            min_fit_probability=settings.min_fit_probability,
        )
    return decide(
        distribution, min_probability=settings.min_probability, min_margin=settings.min_margin
    )
