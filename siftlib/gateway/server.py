"""The HTTP gateway: `/v1/search`, `/v2/search`, `/v1/fetch`, `/v2/scrape`, health, metrics.

    server = GatewayServer(("127.0.0.1", 8787), searcher, callers={"ops": "t0k3n"}, default_k=8)
    server.serve_forever()          # SIGTERM → server.shutdown(); then server.drain(); close

A request passes through modules of one concept each: `connections` bounds the open
connections, `handler` reads a request strictly and writes its answer in one write, `routes`
says what each route does, `wire` parses and builds the bytes, `api` and `scrape` turn
bodies into requests and outcomes into the native or Firecrawl answers (pure functions;
every error answer is `api.error_answer`'s), `watchdog` cuts what runs past its deadline
and `hangup` notices a client gone. `GatewayServer` here owns the searcher, the fetcher, the
callers, the slots and the deadlines.

Built on the stdlib `ThreadingHTTPServer`, with the traps of that stack closed (search.md §3):
- the listen backlog is 128, not 5; open connections are bounded (`connections`);
- searches are bounded (`max_searches`): a request waits at most `queue_wait` for a slot,
  else 503. A search runs on its handler's thread (a hand-off to a pool cost a third of the
  cache-hit throughput); one deadline thread answers 503 for any search still running
  `deadline` seconds after its request started, and the late outcome is dropped. The search
  keeps its slot until the pipeline's own deadline ends it, so the bound stays honest;
- fetches have slots of their own (`max_fetches`, 16), so no number of slow pages keeps a
  search from a slot; a fetch's deadline is its own (`min(request timeout, fetch.timeout)`,
  conversion included), and the watchdog answers 408 `deadline` `FETCH_MARGIN` past it;
- a search or fetch is cancelled (`siftlib.gateway.hangup`) when its client hangs up, and when the
  watchdog answered for it: its upstream requests close, reservations not yet spent go back,
  nothing is cached, and its slot is free as soon as the work notices (within 50 ms). Work
  still running `HANGUP_AFTER` (50 ms) is watched for a hang-up; a cache hit is done sooner;
- never a 502 (the Firecrawl SDK retries only on 502, tripling upstream spend): statuses are
  400, 401, 404, 405, 408, 413, 415, 422, 431, 503, 505, and 500 (a fetch that failed,
  `fetch failed: <kind>`, or a fixed body for anything unexpected).

Decisions the spec leaves open:
- Route before auth: an unknown path is a 404 and a wrong method a 405 (with `Allow`) even
  without a token; everything else but `/healthz` needs one. A POST body must be declared
  `Content-Type: application/json` (parameters such as `charset` allowed): else 415.
- Open mode (no tokens, loopback only) trusts the box, not the browser on it: any web page
  could POST there cross-origin as `text/plain` (a "simple" request, no preflight) or rebind
  its own name to 127.0.0.1 and read the answers (as Ollama's CVE-2024-28224). So in open
  mode the `Host` must be a loopback name (`127.0.0.1`, `[::1]`, `localhost`, any loopback
  address) with the listening port (or none on port 80), and a POST must be JSON, which a
  page cannot send cross-origin without a preflight sift never grants: else 403.
- `Expect: 100-continue` is answered only once route, auth, content type and size passed:
  a refused request gets its error instead, and its body is never invited. Tokens are compared with
  `hmac.compare_digest` against every caller's token, without stopping at the first match.
- SIGTERM: the serve loop stops accepting, `drain()` waits for in-flight requests (answers
  given while draining carry `Connection: close`), then the store is closed.
- Logging (`siftlib.logs`) is batched off the request threads, and holds httpx and httpcore
  to WARNING: httpx logs each upstream request URL, query string included, at INFO. The INFO
  line per search is the pipeline's. An internal error is logged by exception type only: its
  text may carry an upstream's words, which restricted callers must not leak.
"""

from __future__ import annotations

import hmac
import ipaddress
import queue
import re
import socket
import threading
import time
from collections.abc import Callable, Collection, Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, TypeVar

from siftlib.errors import Cancelled, ConfigError
from siftlib.gateway import wire
from siftlib.gateway.api import Rejected
from siftlib.gateway.connections import ConnectionTable
from siftlib.gateway.handler import AlreadyAnswered, Handler, HungUp
from siftlib.gateway.hangup import HangUps
from siftlib.gateway.watchdog import Watchdog

if TYPE_CHECKING:
    from siftlib.fetch.fetcher import Fetcher, FetchRequest, FetchResult
    from siftlib.metrics import Metrics
    from siftlib.search.pipeline import Searcher, SearchRequest, SearchResponse

_T = TypeVar("_T")
# Past a fetch's own deadline: the conversion and the answer itself.
FETCH_MARGIN = 2.0
# How long a search or fetch runs before its connection is watched for a hang-up.
HANGUP_AFTER = 0.05

_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::([0-9]{1,5}))?")


def split_listen(listen: str) -> tuple[str, int]:
    """Return host and port of a `HOST:PORT` (or `[v6]:PORT`) listen address, or raise."""
    host, sep, port = listen.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not wire.DIGITS.fullmatch(port):
        raise ConfigError(f"listen address {listen!r} is not HOST:PORT (e.g. 127.0.0.1:8787)")
    # Port 0 (any free port, said in the "listening on" line) is kept for tests and scripts.
    if int(port) > 65535:
        raise ConfigError(f"listen address {listen!r}: port must be 1–65535")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Say whether a listen host is a loopback address (or `localhost`)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_local_host(value: str, port: int) -> bool:
    """Say whether a `Host` value names this gateway on loopback (`localhost:8787`, `[::1]`)."""
    match = _HOST.fullmatch(value)
    if match is None or int(match[2] or 80) != port:
        return False
    return is_loopback(match[1].strip("[]").lower())


def check_open_mode(host: str, callers: Mapping[str, str], *, secret_env: str) -> None:
    """Refuse to listen beyond loopback when no caller token exists (the gateway would be open)."""
    if not callers and not is_loopback(host):
        raise ConfigError(
            f"refusing to listen on {host} without caller tokens: add a "
            f"SIFT_TOKEN_<NAME>=<token> line to {secret_env}, or listen on 127.0.0.1"
        )


class GatewayServer(ConnectionTable):
    """The threaded gateway: owns the searcher, the callers and every concurrency bound."""

    def __init__(
        self,
        address: tuple[str, int],
        searcher: Searcher,
        *,
        callers: Mapping[str, str],
        restricted: Collection[str] = (),
        default_k: int = 8,
        deadline: float = 10.0,
        socket_timeout: float = 10.0,
        max_searches: int = 32,
        queue_wait: float = 1.0,
        max_connections: int = 256,
        fetcher: Fetcher | None = None,
        max_connections_per_client: int = 64,
        first_byte_timeout: float = 2.0,
        max_fetches: int = 16,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.searcher = searcher
        self.fetcher = fetcher  # None: fetch is disabled, its routes answer 404
        self.callers = [(name, token.encode()) for name, token in sorted(callers.items())]
        self.restricted = frozenset(restricted)
        self.default_k = default_k
        self.deadline = deadline
        self.socket_timeout = socket_timeout
        self.queue_wait = queue_wait
        self.first_byte_timeout = first_byte_timeout
        self.draining = threading.Event()
        # Search slots as tokens in a C-level queue: a threading.Semaphore is Python code
        # around a Condition, several times the cost per search.
        self._slots: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(max_searches):
            self._slots.put(None)
        # Fetches have slots of their own: slow pages (or a host's per_host queue) never
        # hold the slots searches need.
        self._fetch_slots: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(max_fetches):
            self._fetch_slots.put(None)
        self.hangups = HangUps()
        self.watchdog = Watchdog()
        self._state = threading.Condition(threading.Lock())
        self._in_flight = 0
        super().__init__(
            address,
            Handler,
            max_connections=max_connections,
            max_connections_per_client=max_connections_per_client,
        )

    @property
    def metrics(self) -> Metrics:
        """The current searcher's counters (a reload brings a new searcher)."""
        return self.searcher.metrics

    @property
    def open_mode(self) -> bool:
        """True when no caller token exists: every request is caller `local`."""
        return not self.callers

    def authenticate(self, header: str | None) -> str | None:
        """Return the caller a bearer token belongs to, or None."""
        if self.open_mode:
            return "local"
        scheme, _, token = (header or "").partition(" ")
        given = token.strip().encode("latin-1")  # the bytes as sent (fields are read as latin-1)
        found = None
        for name, expected in self.callers:
            # Compare against every token so timing tells nothing about which one is close.
            if hmac.compare_digest(given, expected) and scheme.lower() == "bearer" and given:
                found = name
        return found

    def run_search(
        self,
        request: SearchRequest,
        *,
        started: float,
        on_expiry: Callable[[], None],
        connection: socket.socket,
    ) -> SearchResponse:
        """Run one search on this thread; 503 when the gateway is full.

        Past the deadline, the deadline thread calls `on_expiry` (which answers 503) and
        cancels the search; its late outcome is then dropped with `AlreadyAnswered`.
        """
        return self._bounded(
            lambda cancel: self.searcher.search(request, cancel=cancel),
            started + self.deadline,
            on_expiry,
            slots=self._slots,
            connection=connection,
        )

    def run_fetch(
        self,
        request: FetchRequest,
        *,
        started: float,
        on_expiry: Callable[[], None],
        connection: socket.socket,
    ) -> FetchResult:
        """Run one fetch on this thread, in a fetch slot (never a search's), by its deadline."""
        fetcher = self.fetcher
        if fetcher is None:
            raise Rejected(HTTPStatus.NOT_FOUND, "not found", "fetch is disabled in the config")
        limit = fetcher.settings.timeout
        if request.timeout is not None:
            limit = min(limit, request.timeout)
        return self._bounded(
            lambda cancel: fetcher.fetch(request, cancel=cancel),
            started + limit + FETCH_MARGIN,
            on_expiry,
            slots=self._fetch_slots,
            connection=connection,
        )

    def _bounded(
        self,
        work: Callable[[threading.Event], _T],
        due: float,
        on_expiry: Callable[[], None],
        *,
        slots: queue.SimpleQueue[None],
        connection: socket.socket,
    ) -> _T:
        """Run `work` in one of `slots`, cancelled when its client hangs up or at `due`.

        Past `due` the watchdog answers for it (`on_expiry`) and cancels it, so the slot is
        free as soon as the work notices; a client that hung up gets no answer (`HungUp`).
        """
        try:
            slots.get(timeout=self.queue_wait)
        except queue.Empty:
            self.searcher.metrics.inc("http_shed", reason="busy")
            raise Rejected(HTTPStatus.SERVICE_UNAVAILABLE, "server busy, retry") from None
        cancel = threading.Event()

        def expire() -> None:
            on_expiry()
            cancel.set()

        watch = self.watchdog.watch(due, expire)
        # Watching for a hang-up costs two system calls; work done within HANGUP_AFTER (every
        # cache hit) never needs it, so the deadline thread starts the watch only then.
        watched: list[int] = []

        def watch_hangup() -> None:
            watched.append(self.hangups.watch(connection, cancel))

        later = self.watchdog.watch(time.monotonic() + HANGUP_AFTER, watch_hangup)
        try:
            response = work(cancel)
        except Cancelled:
            if watch.settle():
                raise HungUp from None
            raise AlreadyAnswered from None
        except BaseException:
            if watch.settle():
                raise
            raise AlreadyAnswered from None
        finally:
            if not later.settle() and watched:  # it started (settle waits for it): stop it
                self.hangups.forget(watched[0])
            slots.put(None)
        if not watch.settle():
            raise AlreadyAnswered
        return response

    def request_started(self) -> None:
        """Count one request being answered, for `drain`."""
        with self._state:
            self._in_flight += 1

    def request_finished(self) -> None:
        """Count one request answered, waking `drain` when it waits."""
        with self._state:
            self._in_flight -= 1
            if self.draining.is_set():
                self._state.notify_all()

    def reload(
        self,
        searcher: Searcher,
        *,
        callers: Mapping[str, str],
        restricted: Collection[str],
        default_k: int,
        deadline: float,
        fetcher: Fetcher | None,
    ) -> tuple[Searcher, Fetcher | None]:
        """Serve the next requests with a new config's parts; return the searcher and fetcher
        replaced, which requests already running go on using (the caller closes them later)."""
        with self._state:
            replaced = self.searcher, self.fetcher
            self.searcher, self.fetcher = searcher, fetcher
            self.callers = [(name, token.encode()) for name, token in sorted(callers.items())]
            self.restricted = frozenset(restricted)
            self.default_k = default_k
            self.deadline = deadline
        return replaced

    def drain(self, timeout: float) -> bool:
        """Wait until no request is in flight (call after `shutdown`); False on timeout."""
        with self._state:
            self.draining.set()
            return self._state.wait_for(lambda: self._in_flight == 0, timeout=timeout)

    def server_close(self) -> None:
        """Close the listening socket and stop the deadline thread."""
        super().server_close()
        self.watchdog.close()
        self.hangups.close()
