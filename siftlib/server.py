"""The HTTP gateway: native `/v1/search`, Firecrawl-compatible `/v2/search`, health, metrics.

    server = GatewayServer(("127.0.0.1", 8787), searcher, callers={"ops": "t0k3n"}, default_k=8)
    server.serve_forever()          # SIGTERM → server.shutdown(); then server.drain(); close

Built on the stdlib `ThreadingHTTPServer`, with the traps of that stack closed (search.md §3):
- the listen backlog is 128, not 5; each response (head and body) is built as one bytes
  object and written once, with `TCP_NODELAY` set, so keep-alive answers never wait for the
  client's delayed ACK;
- a request's head and body must arrive within one `socket_timeout` in all, else the deadline
  thread cuts the read (a body cut short is a 400), so a client that idles, stalls or drips
  loses its thread; a client that stops reading fails its send after the same time
  (`SO_SNDTIMEO`). Open connections are bounded (`max_connections`, a canned 503 past it) so
  idle clients cannot pile up threads;
- the request line and header fields are parsed here, strictly (`read_fields`), not by the
  stdlib's email parser (20 µs a request, a tenth of a cache hit): a malformed line is a
  400, more than 100 fields or a 64 KiB line a 431, HTTP/2 and later a 505;
- `Content-Length` must appear exactly once, as plain digits: anything else is a 400, a
  larger body than 64 KiB a 413, and a body shorter than declared a 400, never searched;
- searches are bounded (`max_searches`): a request waits at most `queue_wait` for a slot,
  else 503. A search runs on its handler's thread (a hand-off to a pool cost a third of the
  cache-hit throughput); one deadline thread answers 503 for any search still running
  `deadline` seconds after its request started, and the late outcome is dropped. The search
  keeps its slot until the pipeline's own deadline ends it, so the bound stays honest;
- never a 502 (the Firecrawl SDK retries only on 502, tripling upstream spend): statuses are
  400, 401, 404, 405, 413, 422, 431, 503, 505, and 500 with a fixed body for anything
  unexpected.

Decisions the spec leaves open:
- Route before auth: an unknown path is a 404 and a wrong method a 405 (with `Allow`) even
  without a token; everything else but `/healthz` needs one. Tokens are compared with
  `hmac.compare_digest` against every caller's token, without stopping at the first match.
- Error bodies: `{"error": "invalid query" | "no search results" | …, "details": "<why>"}`
  (`"success": false` added on `/v2/search`); `details` is what Firecrawl itself uses. A 422
  also carries the search's `warnings` (`tavily: 429`: source and kind, never upstream text).
- Unknown fields are ignored on both search routes; `/v2/search` `limit` null means absent.
- A connection whose request body was not read (refused before reading) is closed after the
  answer, so leftover bytes are never parsed as a next request.
- `/healthz` is `degraded` with `search: no source enabled` when nothing is enabled (every
  search would be a 422), besides the searcher's own list (missing key, daily cap, refused).
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

import heapq
import hmac
import ipaddress
import itertools
import json
import logging
import math
import queue
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Collection, Mapping
from contextlib import suppress
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from siftlib import __version__
from siftlib.errors import ConfigError, NoResultsError, QueryError

if TYPE_CHECKING:
    from siftlib.pipeline import Searcher, SearchRequest, SearchResponse

log = logging.getLogger("sift.http")

MAX_REQUEST_BYTES = 64 * 1024
FIRECRAWL_DEFAULT_LIMIT = 5
FIRECRAWL_MAX_LIMIT = 20
_ROUTES = {
    "/v1/search": ("POST",),
    "/v2/search": ("POST",),
    "/healthz": ("GET",),
    "/metrics": ("GET",),
}
_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS")
_LOGGABLE = frozenset((*_ROUTES, *_METHODS, "other"))
_DIGITS = re.compile(r"[0-9]+")
_VERSION = re.compile(r"HTTP/([0-9])\.([0-9])")
_FIELD_NAME = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_MAX_LINE = 65536  # as the stdlib: a longer head line, or more fields, is a 431
_MAX_FIELDS = 100
_JSON = json.JSONEncoder(ensure_ascii=False)  # one encoder for every answer, not one each
_BUSY_BODY = b'{"error": "server busy, retry"}\n'
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY)
)


class Rejected(Exception):
    """A request the gateway answers with an error status."""

    def __init__(
        self,
        status: HTTPStatus,
        error: str,
        details: str | None = None,
        *,
        warnings: list[str] | None = None,
    ) -> None:
        super().__init__(error)
        self.status, self.error, self.details = status, error, details
        self.warnings = warnings


class BadHead(Exception):
    """A header field was malformed, or the fields too many or too long; answered with `status`."""

    def __init__(self, status: HTTPStatus, details: str) -> None:
        super().__init__(details)
        self.status, self.details = status, details


def read_fields(rfile: Any) -> dict[str, list[str]]:
    """Read header fields up to the blank line, by lowercased name, strictly (RFC 9112 §5).

    The stdlib parses them with the email package: ~20 µs a request, a tenth of a cache hit.
    A field line is `name: value`; no space before the colon, no folded continuation line,
    no CR or NUL in a value. A head that ends before its blank line is refused too. A malformed
    field raises `BadHead`.
    """
    fields: dict[str, list[str]] = {}
    count = 0
    while True:
        line = rfile.readline(_MAX_LINE + 1)
        if len(line) > _MAX_LINE:
            raise BadHead(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "a header line is too long")
        if line in (b"\r\n", b"\n"):
            return fields
        if not line.endswith(b"\n"):
            raise BadHead(HTTPStatus.BAD_REQUEST, "the request head ended before its blank line")
        count += 1
        if count > _MAX_FIELDS:
            raise BadHead(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "too many header fields")
        name, colon, value = line.partition(b":")
        value = value.strip(b" \t\r\n")
        if not colon or not _FIELD_NAME.fullmatch(name) or b"\r" in value or b"\0" in value:
            raise BadHead(HTTPStatus.BAD_REQUEST, "a header field is malformed")
        fields.setdefault(name.decode("ascii").lower(), []).append(value.decode("latin-1"))


class AlreadyAnswered(Exception):
    """The deadline passed and the client already has its 503: drop the late outcome."""


class _Watch:
    """One operation under a deadline: settled by its handler, or expired by the watchdog."""

    __slots__ = ("due", "on_expiry", "state", "_lock")

    def __init__(self, due: float, on_expiry: Callable[[], None]) -> None:
        self.due = due
        self.on_expiry: Callable[[], None] | None = on_expiry
        self.state = "running"
        self._lock = threading.Lock()

    def settle(self) -> bool:
        """Mark the operation finished; False when the deadline already answered for it."""
        with self._lock:
            if self.state == "expired":
                return False
            self.state = "settled"
            self.on_expiry = None  # a settled entry waits in the heap: hold no handler
            return True

    def expire(self) -> None:
        with self._lock:
            if self.state == "running" and self.on_expiry is not None:
                self.state = "expired"
                self.on_expiry()
                self.on_expiry = None


class _Watchdog:
    """One thread that expires what runs past its deadline, so handlers need no second thread.

    It watches searches (`deadline` after their request arrived) and request heads (one socket
    timeout each). Entries sit in a heap by due time; settled ones are dropped when they reach
    the top, so settling costs only a flag, and the thread is woken only by an entry due
    before its next wake-up (rare: deadlines have fixed lengths), not once per request.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, _Watch]] = []
        self._order = itertools.count()
        self._wake_at = math.inf  # when the thread wakes next: a later entry needs no notify
        self._closed = False
        threading.Thread(target=self._run, name="sift-deadline", daemon=True).start()

    def watch(self, due: float, on_expiry: Callable[[], None]) -> _Watch:
        """Start watching one operation; `on_expiry` runs if it is not settled by `due`."""
        entry = _Watch(due, on_expiry)
        with self._cond:
            heapq.heappush(self._heap, (due, next(self._order), entry))
            if due < self._wake_at:
                self._cond.notify()
        return entry

    def close(self) -> None:
        """Stop the thread; what still runs is no longer expired."""
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    while self._heap and self._heap[0][2].state != "running":
                        heapq.heappop(self._heap)
                    if self._closed:
                        return
                    if not self._heap:
                        self._wake_at = math.inf
                        self._cond.wait()
                        continue
                    self._wake_at = self._heap[0][0]
                    delay = self._wake_at - time.monotonic()
                    if delay <= 0:
                        entry = heapq.heappop(self._heap)[2]
                        break
                    self._cond.wait(delay)
            entry.expire()


def split_listen(listen: str) -> tuple[str, int]:
    """Return host and port of a `HOST:PORT` (or `[v6]:PORT`) listen address, or raise."""
    host, sep, port = listen.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not _DIGITS.fullmatch(port) or int(port) > 65535:
        raise ConfigError(f"listen address {listen!r} is not HOST:PORT (e.g. 127.0.0.1:8787)")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Say whether a listen host is a loopback address (or `localhost`)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.searcher = searcher
        self.callers = [(name, token.encode()) for name, token in sorted(callers.items())]
        self.restricted = frozenset(restricted)
        self.default_k = default_k
        self.deadline = deadline
        self.socket_timeout = socket_timeout
        self.queue_wait = queue_wait
        self.max_connections = max_connections
        self.draining = threading.Event()
        # Search slots as tokens in a C-level queue: a threading.Semaphore is Python code
        # around a Condition, several times the cost per search.
        self._slots: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(max_searches):
            self._slots.put(None)
        self.watchdog = _Watchdog()
        self._state = threading.Condition(threading.Lock())
        self._connections = 0
        self._in_flight = 0
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
        given = token.strip().encode("utf-8", "surrogateescape")
        found = None
        for name, expected in self.callers:
            # Compare against every token so timing tells nothing about which one is close.
            if hmac.compare_digest(given, expected) and scheme.lower() == "bearer" and given:
                found = name
        return found

    def run_search(
        self, request: SearchRequest, *, started: float, on_expiry: Callable[[], None]
    ) -> SearchResponse:
        """Run one search on this thread; 503 when the gateway is full.

        Past the deadline, the deadline thread calls `on_expiry` (which answers 503) while
        the search runs on; its late outcome is then dropped with `AlreadyAnswered`.
        """
        try:
            self._slots.get(timeout=self.queue_wait)
        except queue.Empty:
            self.searcher.metrics.inc("http_shed", reason="busy")
            raise Rejected(HTTPStatus.SERVICE_UNAVAILABLE, "server busy, retry") from None
        watch = self.watchdog.watch(started + self.deadline, on_expiry)
        try:
            response = self.searcher.search(request)
        except BaseException:
            if watch.settle():
                raise
            raise AlreadyAnswered from None
        finally:
            self._slots.put(None)
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

    def drain(self, timeout: float) -> bool:
        """Wait until no request is in flight (call after `shutdown`); False on timeout."""
        with self._state:
            self.draining.set()
            return self._state.wait_for(lambda: self._in_flight == 0, timeout=timeout)

    def server_close(self) -> None:
        """Close the listening socket and stop the deadline thread."""
        super().server_close()
        self.watchdog.close()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Start a handler thread, or shed the connection with a canned 503 past the bound."""
        with self._state:
            shed = self._connections >= self.max_connections
            if not shed:
                self._connections += 1
        if not shed:
            try:
                super().process_request(request, client_address)
            except BaseException:
                self._connection_done()
                raise
            return
        self.searcher.metrics.inc("http_shed", reason="connections")
        try:
            request.settimeout(1.0)
            request.sendall(_BUSY)
        except OSError:
            pass
        self.shutdown_request(request)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """Handle one connection, then free its place under `max_connections`."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._connection_done()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Note a connection that failed outside a request (reset, broken pipe), no traceback."""
        import sys

        log.debug("connection error: %s", type(sys.exc_info()[1]).__name__)

    def _connection_done(self) -> None:
        with self._state:
            self._connections -= 1


class Handler(BaseHTTPRequestHandler):
    """One connection: route, authenticate, read the body, search, answer in one write."""

    server: GatewayServer
    protocol_version = "HTTP/1.1"
    server_version = f"sift/{__version__}"
    sys_version = ""
    disable_nagle_algorithm = True
    wbufsize = 64 * 1024  # headers and body leave in one write, flushed per request
    _body_read = False
    fields: dict[str, list[str]]  # the request's header fields (`headers` is not parsed)
    raw_requestline: bytes

    def setup(self) -> None:
        super().setup()
        self.fields = {}
        # Reads block plainly and the watchdog cuts them; a socket timeout would cost a poll()
        # per recv and send, each a GIL hand-off. A client that stops reading fails the send.
        seconds = self.server.socket_timeout
        timeval = struct.pack("ll", int(seconds), int(seconds % 1 * 1_000_000))
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)

    def handle_one_request(self) -> None:
        """Read and answer one request; its head and body must arrive within one socket timeout."""
        # A per-recv timeout alone would let a client drip one byte at a time for ever.
        due = time.monotonic() + self.server.socket_timeout
        self._reading_body = False
        self._read_watch = self.server.watchdog.watch(due, self._cut_slow_request)
        try:
            super().handle_one_request()
        finally:
            self._read_watch.settle()

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
        if not raw.endswith(b"\n"):
            return False  # the client left (or was cut) mid-line: nobody to answer
        self.requestline = str(raw, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if not words:
            return False  # a stray blank line (as the stdlib: close, answer nothing)
        version = _VERSION.fullmatch(words[2]) if len(words) == 3 else None
        if version is None:
            self.send_error(HTTPStatus.BAD_REQUEST, "the request line is not METHOD PATH HTTP/1.1")
            return False
        major_minor = (int(version[1]), int(version[2]))
        if major_minor >= (2, 0):
            self.send_error(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, "speak HTTP/1.1")
            return False
        self.command, self.path, self.request_version = words
        if self.path.startswith("//"):
            self.path = "/" + self.path.lstrip("/")
        try:
            self.fields = read_fields(self.rfile)
        except BadHead as exc:
            self.send_error(exc.status, exc.details)
            return False
        connection = (self._field("connection") or "").lower()
        self.close_connection = connection == "close" or (
            major_minor < (1, 1) and connection != "keep-alive"
        )
        if (self._field("expect") or "").lower() == "100-continue" and major_minor >= (1, 1):
            return self.handle_expect_100()
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
        self._body_read = False
        route = self.route
        self.server.request_started()
        try:
            allowed = _ROUTES.get(route)
            if allowed is None:
                raise Rejected(HTTPStatus.NOT_FOUND, "not found")
            if method not in allowed:
                raise Rejected(HTTPStatus.METHOD_NOT_ALLOWED, "method not allowed")
            if route == "/healthz":
                self._send_json(HTTPStatus.OK, self._health())
                return
            caller = self.server.authenticate(self._field("authorization"))
            if caller is None:
                raise Rejected(HTTPStatus.UNAUTHORIZED, "missing or invalid bearer token")
            if route == "/metrics":
                self._send_json(HTTPStatus.OK, self.server.searcher.metrics_snapshot())
            elif route == "/v1/search":
                self._send_json(HTTPStatus.OK, self._native(caller, started))
            else:
                self._send_json(HTTPStatus.OK, self._firecrawl(caller, started))
        except Rejected as exc:
            self._reject(exc)
        except AlreadyAnswered:
            self.close_connection = True
        except QueryError as exc:
            self._reject(Rejected(HTTPStatus.BAD_REQUEST, "invalid query", _why(exc)))
        except NoResultsError as exc:
            status = HTTPStatus.UNPROCESSABLE_ENTITY
            self._reject(Rejected(status, "no search results", _why(exc), warnings=exc.warnings))
        except Exception as exc:  # never a traceback body, never a 502
            log.error("internal error on %s: %s", route, type(exc).__name__)
            self._reject(Rejected(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error"))
        finally:
            self.server.request_finished()

    def _health(self) -> dict[str, object]:
        degraded = self.server.searcher.degraded()
        if not self.server.searcher.config.enabled_sources:
            degraded = ["search: no source enabled", *degraded]
        return {
            "status": "degraded" if degraded else "ok",
            "degraded": degraded,
            "version": __version__,
        }

    def _native(self, caller: str, started: float) -> dict[str, object]:
        """Serve `POST /v1/search`: the native envelope."""
        from siftlib.pipeline import SearchRequest

        body = self._read_json()
        k = body.get("k")
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 50):
            raise Rejected(
                HTTPStatus.BAD_REQUEST, "invalid query", "k must be an integer from 1 to 50"
            )
        for name in ("rerank", "digest"):
            if body.get(name) is not None and not isinstance(body[name], bool):
                raise Rejected(
                    HTTPStatus.BAD_REQUEST, "invalid query", f"{name} must be true or false"
                )
        question = body.get("question")
        if question is not None and not isinstance(question, str):
            raise Rejected(HTTPStatus.BAD_REQUEST, "invalid query", "question must be a string")
        request = SearchRequest(
            query=_query(body),
            k=self.server.default_k if k is None else k,
            rerank=body.get("rerank"),
            digest=bool(body.get("digest")),
            caller=caller,
        )
        return self.server.run_search(
            request, started=started, on_expiry=self._answer_late
        ).to_native()

    def _firecrawl(self, caller: str, started: float) -> dict[str, object]:
        """Serve `POST /v2/search`: Firecrawl's shape, web hits only, never a scrape."""
        from siftlib.pipeline import SearchRequest

        body = self._read_json()
        limit = body.get("limit")
        if limit is None:
            limit = FIRECRAWL_DEFAULT_LIMIT
        elif isinstance(limit, bool) or not isinstance(limit, int):
            raise Rejected(HTTPStatus.BAD_REQUEST, "invalid query", "limit must be an integer")
        limit = min(max(limit, 1), FIRECRAWL_MAX_LIMIT)
        request = SearchRequest(query=_query(body), k=limit, caller=caller)
        response = self.server.run_search(request, started=started, on_expiry=self._answer_late)
        web = [
            {"url": hit.url, "title": hit.title, "description": hit.snippet, "position": i}
            for i, hit in enumerate(response.results, 1)
        ]
        return {"success": True, "data": {"web": web}}

    def _read_json(self) -> dict[str, Any]:
        """Read the body (exactly `Content-Length` bytes, at most 64 KiB) as a JSON object."""
        if self._field("transfer-encoding") is not None:
            raise Rejected(
                HTTPStatus.BAD_REQUEST, "bad request", "send the body with a Content-Length"
            )
        declared = self.fields.get("content-length", [])
        if len(declared) != 1 or not _DIGITS.fullmatch(declared[0].strip()):
            raise Rejected(
                HTTPStatus.BAD_REQUEST,
                "bad request",
                "exactly one valid Content-Length is required",
            )
        text = declared[0].strip().lstrip("0") or "0"
        if len(text) > 9 or int(text) > MAX_REQUEST_BYTES:
            raise Rejected(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "request body too large", "the limit is 64 KiB"
            )
        length = int(text)
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
        try:
            body = json.loads(data)
        except (ValueError, RecursionError):
            raise Rejected(
                HTTPStatus.BAD_REQUEST, "invalid query", "the body is not valid JSON"
            ) from None
        if not isinstance(body, dict):
            raise Rejected(
                HTTPStatus.BAD_REQUEST, "invalid query", "the body must be a JSON object"
            )
        return body

    def handle_expect_100(self) -> bool:
        """Send `100 Continue` at once (our writes are buffered until the answer)."""
        self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        self.wfile.flush()
        return True

    def _reject(self, exc: Rejected) -> None:
        self._send_json(exc.status, self._error_payload(exc), headers=self._error_headers(exc))

    def _error_payload(self, exc: Rejected) -> dict[str, object]:
        payload: dict[str, object] = {"error": exc.error}
        if exc.details:
            payload["details"] = exc.details
        if exc.warnings is not None:
            payload["warnings"] = exc.warnings
        return {"success": False, **payload} if self.route == "/v2/search" else payload

    def _error_headers(self, exc: Rejected) -> dict[str, str]:
        if exc.status == HTTPStatus.UNAUTHORIZED:
            return {"WWW-Authenticate": 'Bearer realm="sift"'}
        if exc.status == HTTPStatus.METHOD_NOT_ALLOWED:
            return {"Allow": ", ".join(_ROUTES[self.route])}
        return {}

    def _answer_late(self) -> None:
        """Answer 503 from the deadline thread while the search runs on (never blocks)."""
        rejected = Rejected(HTTPStatus.SERVICE_UNAVAILABLE, "search deadline exceeded")
        data = self._encode(rejected.status, self._error_payload(rejected), {}, close=True)
        self.server.searcher.metrics.inc("http_shed", reason="deadline")
        self._count(rejected.status)
        with suppress(OSError):
            self.connection.send(data, socket.MSG_DONTWAIT)
            self.connection.shutdown(socket.SHUT_WR)

    def _send_json(
        self, status: HTTPStatus, payload: object, *, headers: Mapping[str, str] | None = None
    ) -> None:
        if not self._body_read and self._body_expected():
            # A body not read here (refused first) must not be parsed as the next request.
            self.close_connection = True
        if self.server.draining.is_set():
            self.close_connection = True
        self.log_request(int(status))
        self.wfile.write(self._encode(status, payload, headers or {}, close=self.close_connection))
        self._count(status)

    def _field(self, name: str) -> str | None:
        """Return the first value of a header field (its name lowercased), or None."""
        values = self.fields.get(name)
        return values[0] if values else None

    def _body_expected(self) -> bool:
        declared = [value.strip() for value in self.fields.get("content-length", ["0"])]
        chunked = "transfer-encoding" in self.fields
        return declared != ["0"] or chunked or getattr(self, "command", None) == "POST"

    def date_time_string(self, timestamp: float | None = None) -> str:
        """Return the `Date` header value, formatted once per second."""
        global _date_cache
        second = int(time.time() if timestamp is None else timestamp)
        if _date_cache[0] != second:
            _date_cache = (second, super().date_time_string(second))
        return _date_cache[1]

    def _encode(
        self, status: HTTPStatus, payload: object, headers: Mapping[str, str], *, close: bool
    ) -> bytes:
        """Return a whole response, head and JSON body, to leave in one write."""
        body = _JSON.encode(payload).encode() + b"\n"
        lines = [
            f"HTTP/1.1 {status.value} {status.phrase}",
            f"Server: {self.server_version}",
            f"Date: {self.date_time_string()}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            "Cache-Control: no-store",
            *(f"{name}: {value}" for name, value in headers.items()),
            *(["Connection: close"] if close else []),
        ]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head if getattr(self, "command", None) == "HEAD" else head + body

    def _count(self, status: HTTPStatus) -> None:
        self.server.searcher.metrics.inc(
            "http_responses", route=_route_label(self.route), status=str(int(status))
        )

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Answer a request the stdlib parser refused, in our JSON shape."""
        # The stdlib answers unknown methods with 501; for a client that is a wrong method.
        status = (
            HTTPStatus.METHOD_NOT_ALLOWED
            if code == HTTPStatus.NOT_IMPLEMENTED
            else HTTPStatus(code)
        )
        self._body_read = False
        self.close_connection = True
        payload = {"error": status.phrase.lower()}
        if message:
            payload["details"] = message
        with suppress(OSError):
            self._send_json(status, payload)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if log.isEnabledFor(logging.DEBUG):
            command = getattr(self, "command", "-")
            self.log_message("%s %s %s", command, _route_label(self.route), code)

    def log_message(self, format: str, *args: Any) -> None:
        """Write one access or error line, keeping only status codes, methods and route names."""
        safe = tuple(a if isinstance(a, int) or a in _LOGGABLE else "-" for a in args)
        log.debug(format, *safe)


_date_cache: tuple[int, str] = (0, "")


def _route_label(route: str) -> str:
    return route if route in _ROUTES else "other"


def _query(body: Mapping[str, Any]) -> str:
    query = body.get("query")
    if not isinstance(query, str):
        raise Rejected(HTTPStatus.BAD_REQUEST, "invalid query", "query must be a string")
    return query


def _why(exc: Exception) -> str:
    """Return an error's sentence without the label the error field already carries."""
    text = str(exc)
    for label in ("invalid query: ", "no search results: "):
        text = text.removeprefix(label)
    return text
