"""The fan-out: every planned source called at once, each on a worker thread, under one deadline.

    fanout = FanOut(config, secrets, deadline_clock=DeadlineClock())
    outcomes = fanout.run(["searxng", "tavily"], "sqlite wal", k=8, started=now, cancel=None)

`FanOut` holds what calling a source takes: its adapter (`siftlib.search.sources`), its key
and its pinned client (`siftlib.net.dial`), opened on the source's first call. Each call comes
back as a `SourceOutcome`, hits or the failure kind that replaced them; the pipeline plans
before it and settles the books after it (`siftlib.search.plan`, `siftlib.search.accounting`).

Decisions the spec leaves open:
- Each source runs on a worker thread; the caller waits at most `search.timeout` in all.
  A worker reads the body itself in chunks and stops at the deadline or at 2 MiB, so a
  dripping upstream is cut and its thread freed soon after.
- A source call ends in a last `except Exception`: whatever an adapter or client raises that
  no earlier clause names is that source's `bad response`, logged by exception type only
  (its text may quote the upstream's body). The other sources' hits are kept.
- Pages: while the source says another page could help (SearXNG: a full page, fewer than
  `k` distinct hits), its worker asks for the next one under the same deadline. The pages in
  so far are kept at the deadline or when a later page fails; a page that adds no new URL
  ends the paging. Each page is an upstream call in `search_queries`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from siftlib.errors import Cancelled
from siftlib.hits import Hit
from siftlib.lazylog import LazyLogger
from siftlib.search.sources import SOURCES, BadResponse, QueryNotes, Source, Unresponsive

if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Future, ThreadPoolExecutor

    import httpx

    from siftlib.config import Config, Secrets
    from siftlib.net.deadline import DeadlineClock
    from siftlib.net.dial import Upstream

log = LazyLogger("sift")

MAX_BODY_BYTES = 2 * 1024 * 1024
_CHUNK = 64 * 1024
_WORKERS = 64
# After a cancel, how long the fan-out waits for its calls to say whether they were sent.
_CANCEL_GRACE = 0.5


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


class FanOut:
    """The enabled sources: adapters, keys and pinned clients, and the threads that call them."""

    def __init__(
        self,
        config: Config,
        secrets: Secrets,
        *,
        deadline_clock: DeadlineClock,
        allow_private_upstreams: bool = False,
        resolver: Callable[[str, int], list[str]] | None = None,
    ) -> None:
        self.config = config
        self.deadline_clock = deadline_clock
        self.adapters: dict[str, Source] = {}
        self._keys: dict[str, str | None] = {}
        self._upstreams: dict[str, Upstream] = {}
        self._opening = threading.Lock()
        self._allow_private = allow_private_upstreams
        self._resolver = resolver
        self._pool: ThreadPoolExecutor | None = None  # started by the first search that calls
        for source in config.enabled_sources:
            adapter = SOURCES[source.name](source.url)
            key = secrets.get(adapter.key_name) if adapter.key_name else None
            self.adapters[source.name] = adapter
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

    def missing_key(self, name: str) -> bool:
        """Tell whether a source needs a key that the secrets do not hold."""
        return self.adapters[name].key_name is not None and self._keys[name] is None

    def opened_problem(self, name: str) -> str | None:
        """Return the problem of a source's client (dns failed, refused) if it is open yet.

        A source's pinned client (and httpx with it) is opened on its first call, not before:
        a search answered from the cache needs no HTTP client, and `sift search` pays for
        its import only on a miss. A host that does not resolve is then that call's failure.
        """
        upstream = self._upstreams.get(name)
        return upstream.problem if upstream is not None else None

    def upstream(self, name: str) -> Upstream:
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

    def run(
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
            from siftlib.net.deadline import CANCEL_POLL

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
        from siftlib.net.wallclock import wall_clock

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

        adapter = self.adapters[name]
        outcome = self.send(name, self._request(name, query, k), deadline)
        page, got = 1, len(outcome.hits)
        have = len(fusion.distinct(outcome.hits))
        while outcome.failure is None and adapter.next_page(page=page, got=got, have=have, k=k):
            pages.latest = (page, outcome)
            page += 1
            more = self.send(name, self._request(name, query, k, page=page), deadline)
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
        return self.adapters[name].build_request(query, k=k, key=self._keys[name], page=page)

    def build(self, name: str, build: Callable[[str | None], httpx.Request]) -> httpx.Request:
        """Return the request `build(key)` makes with a source's key, which stays in here."""
        return build(self._keys.get(name))

    def send(self, name: str, request: httpx.Request, deadline: float) -> SourceOutcome:
        """Send a source's request and map its answer; never raises."""
        import httpx

        from siftlib.net.dial import LookupFailed, UpstreamRefused
        from siftlib.net.wallclock import current_cancel

        adapter = self.adapters[name]
        charged = 0  # a provider bills a 2xx answer, usable or not
        cancel = current_cancel()
        if cancel is not None and cancel.is_set():
            return SourceOutcome(name, failure="cancelled", sent=False)
        try:
            upstream = self.upstream(name)
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
