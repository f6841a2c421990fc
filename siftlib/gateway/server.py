"""The HTTP gateway: `/v1/search`, `/v2/search`, `/v1/fetch`, `/v2/scrape`, health, metrics.

    server = GatewayServer(("127.0.0.1", 8787), searcher, callers={"ops": "t0k3n"}, default_k=8)
    server.serve_forever()          # SIGTERM → server.shutdown(); then server.drain(); close

A request passes through three modules, each one concept: `siftlib.gateway.wire` reads its line,
fields and body length and builds the one-write answer; `siftlib.gateway.api` turns the body into a
`SearchRequest` and the outcome into the native or Firecrawl answer (pure functions);
`siftlib.gateway.watchdog` cuts what runs past its deadline. `Handler` here routes and maps errors
to statuses; `GatewayServer` owns the searcher, the callers and every concurrency bound.

Built on the stdlib `ThreadingHTTPServer`, with the traps of that stack closed (search.md §3):
- the listen backlog is 128, not 5; each response is written once, with `TCP_NODELAY` set;
- a request's head and body must arrive within one `socket_timeout` in all, else the deadline
  thread cuts the read (a body cut short is a 400), so a client that idles, stalls or drips
  loses its thread; a client that stops reading fails its send after the same time
  (`SO_SNDTIMEO`);
- idle connections cannot lock callers out. A new connection must send its first byte within
  `first_byte_timeout` (2 s; real clients send at once), far less than a slow request gets.
  Open connections are bounded (`max_connections`): when the table is full, an idle
  connection is evicted to make room, one idle between keep-alive requests first (its client
  just reconnects), then the oldest that has sent nothing; only when none is idle is the new
  one shed with a canned 503. One client address holds at most `max_connections_per_client`
  (64) connections, so one host cannot fill the table with slow requests. Shedding is logged
  at WARNING, at most once per `SHED_LOG_INTERVAL` (10 s) with the count since;
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
  nothing is cached, and its slot is free as soon as the work notices (within 50 ms);
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
- A connection whose request body was not read (refused before reading) is closed after the
  answer, so leftover bytes are never parsed as a next request.
- SIGTERM: the serve loop stops accepting, `drain()` waits for in-flight requests (answers
  given while draining carry `Connection: close`), then the store is closed.
- Logging (`siftlib.logs`) is batched off the request threads, and holds httpx and httpcore
  to WARNING: httpx logs each upstream request URL, query string included, at INFO.
- Access lines go to the `sift.http` logger at DEBUG through one redacting `log_message`
  (only status codes, methods and known route names survive); the INFO line per search is
  the pipeline's. An internal error is logged by exception type only: its text may carry an
  upstream's words, which restricted callers must not leak.
"""

from __future__ import annotations

import hmac
import io
import ipaddress
import logging
import math
import queue
import re
import select
import socket
import threading
import time
from collections.abc import Callable, Collection, Mapping
from contextlib import suppress
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, TypeVar

from siftlib import __version__
from siftlib.errors import Cancelled, ConfigError, NoResultsError, QueryError
from siftlib.gateway import api, prometheus, wire
from siftlib.gateway.api import ROUTES, Rejected
from siftlib.gateway.hangup import HangUps
from siftlib.gateway.watchdog import Watchdog
from siftlib.metrics import visible_to

if TYPE_CHECKING:
    from siftlib.fetch.fetcher import Fetcher, FetchRequest, FetchResult
    from siftlib.search.pipeline import Searcher, SearchRequest, SearchResponse

log = logging.getLogger("sift.http")
_T = TypeVar("_T")
# Past a fetch's own deadline: the conversion and the answer itself.
FETCH_MARGIN = 2.0
# How long a search or fetch runs before its connection is watched for a hang-up.
HANGUP_AFTER = 0.05

_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS")
SHED_LOG_INTERVAL = 10.0
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::([0-9]{1,5}))?")
_LOGGABLE = frozenset((*ROUTES, *_METHODS, "other"))


class AlreadyAnswered(Exception):
    """The deadline passed and the client already has its 503: drop the late outcome."""


class HungUp(Exception):
    """The client hung up while its request was worked on: nobody is left to answer."""


def _asks_v2(request: socket.socket) -> bool:
    """Tell whether a connection about to be shed sent a `/v2/` request line (peeked, 5 ms)."""
    with suppress(OSError):
        if select.select([request], [], [], 0.005)[0]:
            line = request.recv(64, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            return b" /v2/" in line.split(b"\n", 1)[0]
    return False


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


class GatewayServer(ThreadingHTTPServer):
    """The threaded gateway: owns the searcher, the callers and every concurrency bound."""

    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True

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
        self.max_connections = max_connections
        self.max_connections_per_client = max_connections_per_client
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
        self._connections = 0
        self._per_client: dict[str, int] = {}
        self._counted: set[int] = set()  # the connections counted in the two above, by id
        self._handlers: set[Handler] = set()
        self._in_flight = 0
        self._shed_since_log = 0
        self._shed_logged_at = -math.inf
        super().__init__(address, Handler)

    def server_bind(self) -> None:
        """Bind without HTTPServer's reverse DNS lookup of our own address (it can stall)."""
        import socketserver

        socketserver.TCPServer.server_bind(self)
        host, port = self.socket.getsockname()[:2]
        self.server_name, self.server_port = str(host), int(port)

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

    def process_request(self, request: Any, client_address: Any) -> None:
        """Start a handler thread, making room by evicting an idle connection, or shed it."""
        client = str(client_address[0])
        victim = None
        with self._state:
            held = self._per_client.get(client, 0)
            shed = "client" if held >= self.max_connections_per_client else None
            if shed is None and self._connections >= self.max_connections:
                victim = self._idlest()
                if victim is None:
                    shed = "connections"
                else:
                    victim.idle_since = None  # never chosen twice
            if shed is None:
                self._connections += 1
                self._per_client[client] = held + 1
                self._counted.add(id(request))
        if victim is not None:
            self.searcher.metrics.inc("http_shed", reason="evicted")
            victim.evict()
        if shed is None:
            try:
                super().process_request(request, client_address)
            except BaseException:
                self.release_connection(request, client)
                raise
            return
        self._shed(shed)
        try:
            request.settimeout(1.0)
            request.sendall(wire.BUSY_V2 if _asks_v2(request) else wire.BUSY)
        except OSError:
            pass
        self.shutdown_request(request)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """Handle one connection, then free its place under `max_connections`."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.release_connection(request, str(client_address[0]))

    def release_connection(self, request: Any, client: str) -> None:
        """Free a connection's place under the bounds, once: at its last answer, or its end.

        A `Connection: close` client reconnects as soon as it has its answer, before the
        handler thread has torn the old connection down: counted until then, 64 such
        clients from one address found it at its bound and got a spurious 503.
        """
        with self._state:
            if id(request) not in self._counted:
                return
            self._counted.discard(id(request))
            self._connections -= 1
            held = self._per_client.pop(client) - 1
            if held:
                self._per_client[client] = held

    def register(self, handler: Handler) -> None:
        """Know a connection's handler, so it can be evicted while idle."""
        with self._state:
            self._handlers.add(handler)

    def unregister(self, handler: Handler) -> None:
        """Forget a finished connection's handler."""
        with self._state:
            self._handlers.discard(handler)

    def _idlest(self) -> Handler | None:
        """Return the idle connection to evict: keep-alive ones first, then the oldest silent."""
        idle = [h for h in self._handlers if h.idle_since is not None]
        if not idle:
            return None
        return min(idle, key=lambda h: (h.served == 0, h.idle_since))

    def _shed(self, reason: str) -> None:
        """Count a shed connection; log at most once per interval, with the count since."""
        self.searcher.metrics.inc("http_shed", reason=reason)
        now = time.monotonic()
        with self._state:
            self._shed_since_log += 1
            if now - self._shed_logged_at < SHED_LOG_INTERVAL:
                return
            count, self._shed_since_log, self._shed_logged_at = self._shed_since_log, 0, now
        log.warning(
            "shedding connections: %d refused with 503 (%s) since the last report; "
            "max_connections=%d, max_connections_per_client=%d",
            count,
            "one client address at its bound" if reason == "client" else "table full, none idle",
            self.max_connections,
            self.max_connections_per_client,
        )

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Note a connection that failed outside a request (reset, broken pipe), no traceback."""
        import sys

        log.debug("connection error: %s", type(sys.exc_info()[1]).__name__)


class Handler(BaseHTTPRequestHandler):
    """One connection: route, authenticate, read the body, search, answer in one write."""

    server: GatewayServer
    protocol_version = "HTTP/1.1"
    _echo_keep_alive = False
    _expects_continue = False
    server_version = f"sift/{__version__}"
    sys_version = ""
    disable_nagle_algorithm = True
    wbufsize = 64 * 1024  # headers and body leave in one write, flushed per request
    _body_read = False
    _restricted = False  # the request's caller is in `permit_restricted`
    fields: dict[str, list[str]]  # the request's header fields (`headers` is not parsed)
    raw_requestline: bytes
    rfile: io.BufferedReader  # rbufsize -1: buffered, so a peeked byte is not lost

    def setup(self) -> None:
        super().setup()
        self.fields = {}
        self.served = 0  # requests read on this connection; 0: it has sent nothing yet
        self.idle_since: float | None = None  # set while waiting for a request's first byte
        # Reads block plainly and the watchdog cuts them; a socket timeout would cost a poll()
        # per recv and send, each a GIL hand-off. A client that stops reading fails the send.
        wire.set_send_timeout(self.connection, self.server.socket_timeout)
        self.server.register(self)

    def finish(self) -> None:
        self.server.unregister(self)
        super().finish()

    def evict(self) -> None:
        """Cut this idle connection to make room for a new one (its wait for a byte ends)."""
        log.debug("idle connection evicted")
        with suppress(OSError):
            self.connection.shutdown(socket.SHUT_RD)

    def handle_one_request(self) -> None:
        """Wait for a request, then read and answer it.

        A new connection must send its first byte within `first_byte_timeout`. After that a
        request's head and body (and on keep-alive, the wait before it) must arrive within one
        socket timeout: a per-recv timeout alone would let a client drip one byte at a time.
        """
        server = self.server
        self._reading_body = False
        if self.served == 0:
            due = time.monotonic() + server.first_byte_timeout
            silent = server.watchdog.watch(due, self._cut_silent)
            try:
                arrived = self._first_byte()
            finally:
                arrived = silent.settle() and arrived
            if not arrived:
                self.close_connection = True
                return
        due = time.monotonic() + server.socket_timeout
        self._read_watch = server.watchdog.watch(due, self._cut_slow_request)
        try:
            if self.served and not self._first_byte():
                self.close_connection = True  # closed, cut or evicted while idle
                return
            self.served += 1
            self.raw_requestline = self.rfile.readline(wire.MAX_HEAD_BYTES + 1)
            if not self.parse_request():
                return
            method = getattr(self, "do_" + self.command, None)
            if method is None:
                self.send_error(HTTPStatus.NOT_IMPLEMENTED)
                return
            method()
            self.wfile.flush()
        finally:
            self._read_watch.settle()

    def _first_byte(self) -> bool:
        """Wait until a request's first byte is buffered; False when the connection ended."""
        self.idle_since = time.monotonic()
        try:
            arrived = bool(self.rfile.peek(1))
        except OSError:
            arrived = False
        self.idle_since = None
        return arrived

    def _cut_silent(self) -> None:
        """Close a new connection that has sent nothing by its first-byte deadline."""
        log.debug("silent connection cut")
        self.server.searcher.metrics.inc("http_shed", reason="silent")
        with suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _cut_slow_request(self) -> None:
        """Stop reading a request still arriving at its deadline.

        A cut head closes the connection; a cut body ends the read short, which is answered 400.
        """
        log.debug("request too slow: reading cut")
        with suppress(OSError):
            self.connection.shutdown(socket.SHUT_RD if self._reading_body else socket.SHUT_RDWR)

    def parse_request(self) -> bool:
        """Parse the request line and header fields; on a malformed one answer it, return False."""
        self.command, self.path, self.fields = "", "", {}  # nothing of an earlier request
        self.request_version = self.default_request_version
        self.close_connection = True
        raw = self.raw_requestline
        if len(raw) > wire.MAX_HEAD_BYTES:
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, wire.HEAD_TOO_LARGE)
            return False
        if not raw.endswith(b"\n"):
            return False  # the client left (or was cut) mid-line: nobody to answer
        self.requestline = str(raw, "iso-8859-1").rstrip("\r\n")
        try:
            line = wire.parse_request_line(self.requestline)
            if line is None:
                return False
            self.command, self.path, self.request_version = line.method, line.path, line.version
            wire.check_version(line)  # after the path: a /v2/ refusal is Firecrawl-shaped
            self.fields = wire.read_fields(self.rfile, budget=wire.MAX_HEAD_BYTES - len(raw))
            wire.check_fields(self.fields, line.major_minor)
        except wire.BadHead as exc:
            self.send_error(exc.status, exc.details)
            return False
        self.close_connection = wire.connection_closes(self.fields, line.major_minor)
        # HTTP/1.0 keep-alive is opt-in both ways: the answer must say it keeps the connection.
        self._echo_keep_alive = line.major_minor < (1, 1) and not self.close_connection
        self._expects_continue = (
            line.major_minor >= (1, 1) and (self._field("expect") or "").lower() == "100-continue"
        )
        return True

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_OPTIONS(self) -> None:
        self._dispatch("OPTIONS")

    @property
    def route(self) -> str:
        """The request's path without its query string."""
        return getattr(self, "path", "").split("?", 1)[0]

    def _dispatch(self, method: str) -> None:
        started = time.monotonic()
        if self._read_watch.state == "expired":
            self.close_connection = True  # cut while its head was arriving: nothing to answer
            return
        self._reading_body = True
        self._restricted = False
        self._body_read = False
        route = self.route
        server = self.server
        server.request_started()
        try:
            allowed = ROUTES.get(route)
            if allowed is None:
                raise Rejected(HTTPStatus.NOT_FOUND, "not found")
            if method not in allowed:
                raise Rejected(HTTPStatus.METHOD_NOT_ALLOWED, "method not allowed")
            if server.open_mode:
                self._check_local_origin(method)
            if route == "/healthz":
                searcher = server.searcher
                checkup = searcher.checkup()
                renderer = server.fetcher.renderer if server.fetcher is not None else None
                answer = api.health_answer(
                    checkup.degraded,
                    sources=checkup.sources,
                    store=searcher.config.store_kind,
                    browser=None if renderer is None else renderer.health(),
                )
                self._send_json(HTTPStatus.OK, answer)
                return
            caller = server.authenticate(self._field("authorization"))
            if caller is None:
                raise Rejected(HTTPStatus.UNAUTHORIZED, "missing or invalid bearer token")
            self._restricted = caller in server.restricted
            if route == "/metrics":
                self._metrics(caller)
            elif route in api.FETCH_ROUTES:
                self._fetch(route, caller, started)
            elif route == "/v1/search":
                request = api.native_request(
                    self._read_body(), caller=caller, default_k=server.default_k
                )
                data = api.native_body(self._search(request, started))
                self._send(HTTPStatus.OK, data, "application/json")
            else:
                request = api.firecrawl_request(self._read_body(), caller=caller)
                data = api.firecrawl_body(self._search(request, started))
                self._send(HTTPStatus.OK, data, "application/json")
        except Rejected as exc:
            self._reject(exc)
        except wire.BadHead as exc:
            self._reject(Rejected(exc.status, exc.error, exc.details))
        except (AlreadyAnswered, HungUp):
            self.close_connection = True
        except QueryError as exc:
            self._reject(Rejected(HTTPStatus.BAD_REQUEST, "invalid query", api.why(exc)))
        except NoResultsError as exc:
            status = HTTPStatus.UNPROCESSABLE_ENTITY
            self._reject(Rejected(status, "no search results", api.why(exc), warnings=exc.warnings))
        except Exception as exc:  # never a traceback body, never a 502
            log.error("internal error on %s: %s", route, type(exc).__name__)
            self._reject(Rejected(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error"))
        finally:
            server.request_finished()

    def _fetch(self, route: str, caller: str, started: float) -> None:
        """Serve `/v1/fetch` or `/v2/scrape`: a refused or failed fetch is an answer too."""
        from siftlib.errors import Blocked, FetchFailed
        from siftlib.gateway import scrape

        body = self._read_body()
        firecrawl = route == "/v2/scrape"
        try:
            if firecrawl:
                fetcher = self.server.fetcher
                browser = fetcher is not None and fetcher.renderer is not None
                asked = scrape.firecrawl_request(body, caller=caller, browser=browser)
                request = asked.fetch
            else:
                request = scrape.native_request(body, caller=caller)
            result = self.server.run_fetch(
                request, started=started, on_expiry=self._answer_late, connection=self.connection
            )
        except (Blocked, FetchFailed, QueryError) as exc:
            status, payload = scrape.failure(exc, firecrawl=firecrawl)
            self._send_json(HTTPStatus(status), payload)
            return
        answer = scrape.firecrawl_answer(result, asked) if firecrawl else result.to_native()
        self._send_json(HTTPStatus.OK, answer)

    def _search(self, request: SearchRequest, started: float) -> SearchResponse:
        return self.server.run_search(
            request, started=started, on_expiry=self._answer_late, connection=self.connection
        )

    def _check_local_origin(self, method: str) -> None:
        """In open mode, refuse what a web page could send: a foreign Host, a non-JSON POST."""
        port = self.server.server_port
        if not is_local_host(self._field("host") or "", port):
            raise Rejected(
                HTTPStatus.FORBIDDEN,
                "forbidden",
                f"without caller tokens the Host must be 127.0.0.1:{port}, [::1]:{port} "
                f"or localhost:{port}",
            )
        if method == "POST" and not self._json_body_declared():
            raise Rejected(
                HTTPStatus.FORBIDDEN,
                "forbidden",
                "without caller tokens a POST must be sent as Content-Type: application/json",
            )

    def _json_body_declared(self) -> bool:
        media_type = (self._field("content-type") or "").partition(";")[0]
        return media_type.strip().lower() == "application/json"

    def _read_body(self) -> dict[str, Any]:
        """Read the body (exactly `Content-Length` bytes, at most 64 KiB) as a JSON object."""
        if not self._json_body_declared():
            raise Rejected(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                "unsupported media type",
                "send the body as Content-Type: application/json",
            )
        length = wire.body_length(self.fields)
        if self._expects_continue:
            self._expects_continue = False
            self.wfile.write(wire.CONTINUE)
            self.wfile.flush()
        try:
            data = self.rfile.read(length)  # short when the watchdog cut a slow body
        except OSError:  # reset mid-body: a short body, not an internal error
            data = b""
        self._read_watch.settle()
        if len(data) != length:
            raise Rejected(
                HTTPStatus.BAD_REQUEST, "bad request", "the body is shorter than its Content-Length"
            )
        self._body_read = True
        return api.decode_body(data)

    def _reject(self, exc: Rejected) -> None:
        route = self.route
        headers = api.error_headers(exc, route=route)
        self._send_json(exc.status, api.error_payload(exc, route=route), headers=headers)

    def _answer_late(self) -> None:
        """Answer from the deadline thread while the work runs on (never blocks).

        A search past its deadline is a 503; a fetch a 408 `deadline` (fetch.md §4.2).
        """
        route = self.route
        if route in api.FETCH_ROUTES:
            from siftlib.errors import FetchFailed
            from siftlib.gateway.scrape import failure

            code, payload = failure(FetchFailed("deadline"), firecrawl=route == "/v2/scrape")
            status = HTTPStatus(code)
        else:
            rejected = Rejected(HTTPStatus.SERVICE_UNAVAILABLE, "search deadline exceeded")
            status, payload = rejected.status, api.error_payload(rejected, route=route)
        data = wire.encode_json(status, payload, {}, server=self.server_version, close=True)
        self.server.searcher.metrics.inc("http_shed", reason="deadline")
        self._count(status)
        with suppress(OSError):
            self.connection.send(data, socket.MSG_DONTWAIT)
            self.connection.shutdown(socket.SHUT_WR)

    def _metrics(self, caller: str) -> None:
        server = self.server
        snapshot = server.searcher.metrics_snapshot()
        answer = visible_to(snapshot, viewer=caller, restricted=server.restricted)
        query = getattr(self, "path", "").partition("?")[2]
        if not prometheus.wants_prometheus(self._field("accept"), query):
            self._send_json(HTTPStatus.OK, answer)
            return
        text = prometheus.render(answer, server.searcher.metrics.histograms())
        self._send(HTTPStatus.OK, text.encode(), prometheus.CONTENT_TYPE)

    def _send_json(
        self, status: HTTPStatus, payload: object, *, headers: Mapping[str, str] | None = None
    ) -> None:
        self._send(status, wire.json_body(payload), "application/json", headers=headers)

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if not self._body_read and wire.body_expected(getattr(self, "command", ""), self.fields):
            # A body not read here (refused first) must not be parsed as the next request.
            self.close_connection = True
        if self.server.draining.is_set():
            self.close_connection = True
        if self._echo_keep_alive and not self.close_connection:
            headers = {**(headers or {}), "Connection": "keep-alive"}
        self.log_request(int(status))
        head_only = getattr(self, "command", None) == "HEAD"
        answer = wire.encode_response(
            status,
            body,
            content_type,
            headers or {},
            server=self.server_version,
            close=self.close_connection,
            head_only=head_only,
        )
        self.wfile.write(answer)
        if self.close_connection:
            self.server.release_connection(self.request, str(self.client_address[0]))
        self._count(status)

    def _field(self, name: str) -> str | None:
        """Return the first value of a header field (its name lowercased), or None."""
        values = self.fields.get(name)
        return values[0] if values else None

    def date_time_string(self, timestamp: float | None = None) -> str:
        """Return the `Date` header value, formatted once per second."""
        return wire.http_date(timestamp)

    def _count(self, status: HTTPStatus) -> None:
        if self._restricted:
            return  # `http_responses` has no caller label: a restricted caller's stay out of it
        self.server.searcher.metrics.inc(
            "http_responses", route=api.route_label(self.route), status=str(int(status))
        )

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Answer a request the stdlib parser refused, in our JSON shape."""
        if code == HTTPStatus.NOT_IMPLEMENTED:
            # The stdlib's answer to a method with no `do_` handler: route it like any other,
            # so an unknown path is a 404 and a known one a 405 with `Allow` (RFC 9110 §15.5.6).
            self._dispatch(self.command)
            self.wfile.flush()
            return
        status = HTTPStatus(code)
        self._body_read = False
        self.close_connection = True
        rejected = Rejected(status, status.phrase.lower(), message)
        with suppress(OSError):
            self._send_json(status, api.error_payload(rejected, route=self.route))

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if log.isEnabledFor(logging.DEBUG):
            command = getattr(self, "command", "-")
            self.log_message("%s %s %s", command, api.route_label(self.route), code)

    def log_message(self, format: str, *args: Any) -> None:
        """Write one access or error line, keeping only status codes, methods and route names."""
        safe = tuple(a if isinstance(a, int) or a in _LOGGABLE else "-" for a in args)
        log.debug(format, *safe)
