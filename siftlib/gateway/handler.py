"""One connection of the gateway: read each request strictly, answer it in one write.

    class GatewayServer(ConnectionTable): ...       # serves connections with `Handler`

Reading (search.md §3): a new connection must send its first byte within `first_byte_timeout`;
after that a request's head and body (and, on keep-alive, the wait before it) must arrive
within one `socket_timeout`, else the deadline thread cuts the read (a body cut short is a 400),
so a client that idles, stalls or drips loses its thread; a client that stops reading fails its
send after the same time (`SO_SNDTIMEO`). `siftlib.gateway.wire` parses the line and fields.
Answering: `routes.serve` does the work; every answer, error or not, leaves in one write with
`TCP_NODELAY`; a connection whose body was not read (refused first) is closed after its answer,
so leftover bytes are never parsed as a next request. Access lines go to `sift.http` at DEBUG
through one redacting `log_message` (only status codes, methods and known route names).
"""

from __future__ import annotations

import io
import logging
import socket
import time
from collections.abc import Mapping
from contextlib import suppress
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

from siftlib import __version__
from siftlib.gateway import api, routes, wire
from siftlib.gateway.api import ROUTES, Rejected

if TYPE_CHECKING:
    from siftlib.gateway.server import GatewayServer

log = logging.getLogger("sift.http")
_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS")
_LOGGABLE = frozenset((*ROUTES, *_METHODS, "other"))


class AlreadyAnswered(Exception):
    """The deadline passed and the client already has its 503: drop the late outcome."""


class HungUp(Exception):
    """The client hung up while its request was worked on: nobody is left to answer."""


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
    restricted_caller = False  # the request's caller is in `permit_restricted`
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
        """Wait for a request, then read and answer it, each wait watched (module docstring)."""
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
            # Every method is routed (no `do_GET`...): an unknown path is a 404 and a known
            # one a 405 with `Allow`, never the stdlib's 501 (RFC 9110 §15.5.6).
            self._dispatch(self.command)
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
        self.server.metrics.inc("http_shed", reason="silent")
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
            line.major_minor >= (1, 1) and (self.field("expect") or "").lower() == "100-continue"
        )
        return True

    @property
    def route(self) -> str:
        """The request's path without its query string."""
        return getattr(self, "path", "").split("?", 1)[0]

    def _dispatch(self, method: str) -> None:
        """Answer the request by the route table, every error by the error table."""
        started = time.monotonic()
        if self._read_watch.state == "expired":
            self.close_connection = True  # cut while its head was arriving: nothing to answer
            return
        self._reading_body = True
        self.restricted_caller = False
        self._body_read = False
        server = self.server
        server.request_started()
        try:
            routes.serve(self, method, started)
        except (AlreadyAnswered, HungUp):
            self.close_connection = True
        except Exception as exc:  # never a traceback body, never a 502
            self.reject(exc)
        finally:
            server.request_finished()

    def read_body(self) -> dict[str, Any]:
        """Read the body (exactly `Content-Length` bytes, at most 64 KiB) as a JSON object."""
        return api.decode_body(self.read_bytes())

    def read_bytes(self) -> bytes:
        """Read the body, declared JSON: exactly `Content-Length` bytes, at most 64 KiB."""
        if not wire.declares_json(self.fields):
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
        return data

    def reject(self, exc: Exception) -> None:
        """Answer an error, shaped by `api.error_answer` like every error answer."""
        status, payload, headers = api.error_answer(exc, route=self.route)
        self.send_json(status, payload, headers=headers)

    def send_json(
        self, status: HTTPStatus, payload: object, *, headers: Mapping[str, str] | None = None
    ) -> None:
        self.send(status, wire.json_body(payload), "application/json", headers=headers)

    def send(
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
        self.count(status)

    def field(self, name: str) -> str | None:
        """Return the first value of a header field (its name lowercased), or None."""
        values = self.fields.get(name)
        return values[0] if values else None

    def count(self, status: HTTPStatus) -> None:
        """Count an answer in `http_responses`, which has no caller label: restricted ones not."""
        if self.restricted_caller:
            return
        self.server.metrics.inc(
            "http_responses", route=api.route_label(self.route), status=str(int(status))
        )

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Answer a request the parser refused, in our JSON shape."""
        status = HTTPStatus(code)
        self._body_read, self.close_connection = False, True  # its body is never read
        with suppress(OSError):
            self.reject(Rejected(status, status.phrase.lower(), message))

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if log.isEnabledFor(logging.DEBUG):
            command = getattr(self, "command", "-")
            self.log_message("%s %s %s", command, api.route_label(self.route), code)

    def log_message(self, format: str, *args: Any) -> None:
        """Write one access or error line, keeping only status codes, methods and route names."""
        safe = tuple(a if isinstance(a, int) or a in _LOGGABLE else "-" for a in args)
        log.debug(format, *safe)
