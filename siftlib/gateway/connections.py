"""The gateway's connection table: a bound on open connections, evicting idle ones first.

    class GatewayServer(ConnectionTable): ...          # with a `metrics` and a handler class
    server = GatewayServer(address, ..., max_connections=256, max_connections_per_client=64)

Idle connections cannot lock callers out (search.md §3). Open connections are bounded
(`max_connections`): when the table is full, an idle connection is evicted to make room, one
idle between keep-alive requests first (its client just reconnects), then the oldest that has
sent nothing; only when none is idle is the new one shed with a canned 503. One client address
holds at most `max_connections_per_client` (64), so one host cannot fill the table with slow
requests. Shedding is logged at WARNING, at most once per `SHED_LOG_INTERVAL` (10 s), with the
count since. A connection's place is freed as its handler thread ends.
"""

from __future__ import annotations

import logging
import math
import select
import socket
import threading
import time
from contextlib import suppress
from http import HTTPStatus
from typing import Any, Protocol

from siftlib.gateway import api, wire
from siftlib.gateway.waking import WakingServer
from siftlib.metrics import Metrics

log = logging.getLogger("sift.http")
# Shed on the accept thread before a request is read: the search routes' error, canned once,
# Firecrawl's shape when the connection's first bytes ask for a `/v2/` path.
_SHED = api.Rejected(
    HTTPStatus.SERVICE_UNAVAILABLE,
    "server busy, retry",
    "the gateway holds as many connections as it serves at once; retry in a moment",
)
BUSY = wire.canned_answer(*api.error_answer(_SHED, route="/v1/search")[:2])
BUSY_V2 = wire.canned_answer(*api.error_answer(_SHED, route="/v2/search")[:2])
SHED_LOG_INTERVAL = 10.0


def _asks_v2(request: socket.socket) -> bool:
    """Tell whether a connection about to be shed sent a `/v2/` request line (peeked, 5 ms)."""
    with suppress(OSError):
        if select.select([request], [], [], 0.005)[0]:
            line = request.recv(64, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            return b" /v2/" in line.split(b"\n", 1)[0]
    return False


class Connection(Protocol):
    """What the table knows of a connection's handler: whether it idles, and how to cut it."""

    served: int
    idle_since: float | None

    def evict(self) -> None: ...


class ConnectionTable(WakingServer):
    """A threaded HTTP server whose open connections are bounded, per client and in all."""

    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: Any,
        *,
        max_connections: int,
        max_connections_per_client: int,
    ) -> None:
        self.max_connections = max_connections
        self.max_connections_per_client = max_connections_per_client
        self._table = threading.Lock()
        self._connections = 0
        self._per_client: dict[str, int] = {}
        self._counted: set[int] = set()  # the connections counted in the two above, by id
        self._handlers: set[Connection] = set()
        self._shed_since_log = 0
        self._shed_logged_at = -math.inf
        super().__init__(address, handler)

    @property
    def metrics(self) -> Metrics:
        """Where sheds are counted (`http_shed`): the gateway's current counters."""
        raise NotImplementedError

    def server_bind(self) -> None:
        """Bind without HTTPServer's reverse DNS lookup of our own address (it can stall)."""
        import socketserver

        socketserver.TCPServer.server_bind(self)
        host, port = self.socket.getsockname()[:2]
        self.server_name, self.server_port = str(host), int(port)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Start a handler thread, making room by evicting an idle connection, or shed it."""
        client = str(client_address[0])
        victim = None
        with self._table:
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
            self.metrics.inc("http_shed", reason="evicted")
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
            request.sendall(BUSY_V2 if _asks_v2(request) else BUSY)
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
        with self._table:
            if id(request) not in self._counted:
                return
            self._counted.discard(id(request))
            self._connections -= 1
            held = self._per_client.pop(client) - 1
            if held:
                self._per_client[client] = held

    def register(self, handler: Connection) -> None:
        """Know a connection's handler, so it can be evicted while idle."""
        with self._table:
            self._handlers.add(handler)

    def unregister(self, handler: Connection) -> None:
        """Forget a finished connection's handler."""
        with self._table:
            self._handlers.discard(handler)

    def _idlest(self) -> Connection | None:
        """Return the idle connection to evict: keep-alive ones first, then the oldest silent."""
        idle = [h for h in self._handlers if h.idle_since is not None]
        if not idle:
            return None
        return min(idle, key=lambda h: (h.served == 0, h.idle_since))

    def _shed(self, reason: str) -> None:
        """Count a shed connection; log at most once per interval, with the count since."""
        self.metrics.inc("http_shed", reason=reason)
        now = time.monotonic()
        with self._table:
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
