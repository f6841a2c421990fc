"""The guarded forward proxy every byte of a render goes through.

    with RenderProxy(guard, deadline=..., max_bytes=..., owner=browser_pid) as proxy:
        ...  # a browser context created with proxyServer=f"http://127.0.0.1:{proxy.port}"
        proxy.refused_for(url, failed=True)   # the refusal of that navigation, or None

One `RenderProxy` per render, on a loopback port of its own, so its byte cap, its deadline and
its refusals belong to that render alone. It speaks the two forms a browser sends a proxy:
- `CONNECT host:port` (https, and WebSockets): the target is vetted by the fetch `Guard`
  (`http://host:port/`: names, every resolved address public, pinholes, bad ports) *before*
  anything is dialled, then the proxy dials exactly the vetted addresses and relays the tunnel;
- an absolute-form request (`GET http://host:port/path HTTP/1.1`, plain http and ws): the URL
  is vetted whole (so `ftp:`, `file:`, userinfo are refused there too), the request is sent
  in origin form to the vetted addresses with `Connection: close`, and the answer relayed.
A refused target gets `403` and nothing is dialled; the refusal is kept (`refusals`) so the
renderer can tell a refused navigation from a refused subresource, and counted in
`/metrics` by rule. Redirects need no rule of their own: the browser follows each one with a
new request, which comes back here. DNS is asked once per connection, by the guard, and the
socket goes to the answer it checked (pinning), so a rebinding name cannot switch addresses.

Only the browser may use the port: an accepted connection whose peer socket is not held by a
process of the browser's process tree (`siftlib.fetch.browser.processes`) is closed
unanswered. The heads it reads and rewrites are `siftlib.fetch.browser.heads`. Bounds: at
most `max_bytes` relayed in both directions over the whole render (past it every connection
is cut and new ones refused), at most 64 connections open at once and 2,000 in all, every
wait ending by the render's deadline.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from siftlib.errors import Blocked, FetchFailed, QueryError
from siftlib.fetch.browser.heads import (
    MAX_HEAD,
    closing,
    connect_target,
    origin_form,
    plain_target,
    request_line,
    short_answer,
)
from siftlib.fetch.browser.processes import held_by_tree
from siftlib.fetch.guard import Guard
from siftlib.net.dial import Connector

__all__ = ["Refusal", "RenderProxy", "refusal_of"]

_MAX_OPEN = 64
_MAX_CONNECTIONS = 2000
_CHUNK = 64 * 1024
_POLL = 0.25


@dataclass(frozen=True)
class Refusal:
    """One request the guard refused: where it aimed and why."""

    host: str
    port: int
    rule: str
    sentence: str
    url: str = ""  # the refused URL of a plain request; "" for a tunnel (host and port only)


def refusal_of(refusals: list[Refusal], url: str, *, failed: bool) -> Refusal | None:
    """Return the latest refusal of `url` among `refusals`, or None.

    A plain request is matched by its URL; a tunnel only by host and port, and only when
    the request `failed` (a tunnel carries every URL of its host, the refused one too).
    """
    target = plain_target(url)  # host and port as the proxy reads a plain request's target
    if target is None:
        return None
    _, host, port = target
    exact = url.split("#", 1)[0]
    for refusal in reversed(refusals):
        if refusal.url and refusal.url == exact:
            return refusal
        if failed and not refusal.url and (refusal.host, refusal.port) == (host, port):
            return refusal
    return None


class RenderProxy:
    """A loopback forward proxy for one render, applying the fetch guard to every request."""

    def __init__(
        self,
        guard: Guard,
        *,
        deadline: float,
        max_bytes: int,
        owner: int | None,
        connect: Connector | None = None,
        on_refusal: Callable[[Refusal], None] | None = None,
    ) -> None:
        self.guard = guard
        self.deadline = deadline
        self.max_bytes = max_bytes
        self.owner = owner
        self.refusals: list[Refusal] = []
        self.relayed = 0
        self.over_cap = False
        self.strangers = 0  # connections refused because they did not come from the browser
        self._connect = connect or _dial
        self._on_refusal = on_refusal
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._accepted = 0
        self._active = time.monotonic()  # the last connection or byte, for `idle`
        self._closed = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.settimeout(_POLL)
        self.port: int = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._serve, name="sift-proxy", daemon=True)
        self._thread.start()

    def __enter__(self) -> RenderProxy:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop accepting and cut every connection of this render."""
        self._closed.set()
        self._thread.join(timeout=2)
        self._sock.close()
        self._cut_all()

    def idle(self) -> float:
        """Return the seconds since the browser last opened a connection or moved a byte."""
        return time.monotonic() - self._active

    def refused_for(self, url: str, *, failed: bool) -> Refusal | None:
        """Return the refusal of `url` if the proxy refused it (`refusal_of`)."""
        with self._lock:
            refusals = list(self.refusals)
        return refusal_of(refusals, url, failed=failed)

    # --- serving -----------------------------------------------------------------------------

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, peer = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self.owner is not None and not held_by_tree(peer[1], self.port, self.owner):
                self.strangers += 1
                conn.close()
                continue
            self._active = time.monotonic()
            with self._lock:
                self._accepted += 1
                full = len(self._open) >= _MAX_OPEN or self._accepted > _MAX_CONNECTIONS
                if not full:
                    self._open.add(conn)
            if full:
                conn.close()
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            head, rest = self._read_head(conn)
            if head is None:
                return
            method, target = request_line(head)
            if method == b"CONNECT":
                upstream = self._open_tunnel(conn, target)
                if upstream is not None:
                    self._relay(conn, upstream, rest)
            else:
                upstream = self._open_plain(conn, target)
                if upstream is not None:
                    self._relay(conn, upstream, origin_form(head, target) + rest, last=True)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(conn)
                if upstream is not None:
                    self._open.discard(upstream)
            conn.close()
            if upstream is not None:
                upstream.close()

    def _read_head(self, conn: socket.socket) -> tuple[bytes | None, bytes]:
        data = b""
        while b"\r\n\r\n" not in data:
            if len(data) > MAX_HEAD or not self._wait(conn):
                return None, b""
            chunk = conn.recv(_CHUNK)
            if not chunk:
                return None, b""
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        return head + b"\r\n\r\n", rest

    def _open_tunnel(self, conn: socket.socket, authority: str) -> socket.socket | None:
        parts = connect_target(authority)
        if parts is None:
            conn.sendall(short_answer(400, "bad CONNECT target"))
            return None
        host, port = parts
        shown = f"[{host}]" if ":" in host else host
        upstream = self._dial_vetted(conn, f"http://{shown}:{port}/", host, port, "")
        if upstream is not None:
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        return upstream

    def _open_plain(self, conn: socket.socket, url: str) -> socket.socket | None:
        target = plain_target(url)
        if target is None:
            conn.sendall(short_answer(400, "bad request target"))
            return None
        vetted, host, port = target
        return self._dial_vetted(conn, vetted, host, port, url)

    def _dial_vetted(
        self, conn: socket.socket, url: str, host: str, port: int, plain: str
    ) -> socket.socket | None:
        if self.over_cap or self.max_bytes <= 0:
            conn.sendall(short_answer(403, "this proxy relays nothing more"))
            return None
        try:
            hop = self.guard.vet(url, timeout=self._left())
        except Blocked as exc:
            self._refuse(Refusal(host, port, exc.rule, str(exc), plain))
            conn.sendall(short_answer(403, str(exc)))
            return None
        except QueryError as exc:
            self._refuse(Refusal(host, port, "invalid", str(exc), plain))
            conn.sendall(short_answer(400, str(exc)))
            return None
        except FetchFailed as exc:
            conn.sendall(short_answer(502, str(exc)))
            return None
        port = hop.url.port or (443 if hop.url.scheme == "https" else 80)
        for address in hop.addresses:
            try:
                # Past the deadline a dial fails at once (socket refuses a timeout <= 0).
                upstream = self._connect((address, port), max(self._left(), 0.001))
            except OSError:
                continue
            with self._lock:
                if self._closed.is_set():
                    upstream.close()
                    return None
                self._open.add(upstream)
            return upstream
        conn.sendall(short_answer(502, "fetch failed: connect"))
        return None

    def _refuse(self, refusal: Refusal) -> None:
        with self._lock:
            self.refusals.append(refusal)
        if self._on_refusal is not None:
            self._on_refusal(refusal)

    def _relay(
        self, conn: socket.socket, upstream: socket.socket, first: bytes, *, last: bool = False
    ) -> None:
        """Move bytes both ways until one side ends, the cap is passed or the render ends.

        `last`: the connection carries this one plain request, so the answer's head tells the
        browser `Connection: close` — else it could send its next request, for another host,
        down a connection that is dialled to this one.
        """
        for sock in (conn, upstream):
            sock.settimeout(max(self._left(), 0.01))  # a send stuck on a full peer ends too
        if first and not self._count(len(first)):
            return
        if first:
            upstream.sendall(first)
        pair = {conn: upstream, upstream: conn}
        answer = b"" if last else None  # the answer's head, while it is still arriving
        while not self._closed.is_set():
            left = self._left()
            if left <= 0:
                return
            ready, _, _ = select.select(list(pair), [], [], min(_POLL, left))
            for sock in ready:
                data = sock.recv(_CHUNK)
                if not data or not self._count(len(data)):
                    return
                if sock is upstream and answer is not None:
                    answer += data
                    if b"\r\n\r\n" not in answer:
                        if len(answer) > MAX_HEAD:
                            return
                        continue
                    data, answer = closing(answer), None
                pair[sock].sendall(data)

    def _count(self, size: int) -> bool:
        self._active = time.monotonic()
        with self._lock:
            self.relayed += size
            if self.relayed <= self.max_bytes:
                return True
            self.over_cap = True
        self._cut_all()
        return False

    def _cut_all(self) -> None:
        with self._lock:
            sockets = list(self._open)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _wait(self, conn: socket.socket) -> bool:
        """Wait until `conn` has bytes; False when the render ended or its deadline passed."""
        while not self._closed.is_set():
            left = self._left()
            if left <= 0:
                return False
            ready, _, _ = select.select([conn], [], [], min(_POLL, left))
            if ready:
                return True
        return False

    def _left(self) -> float:
        return self.deadline - time.monotonic()


def _dial(address: tuple[str, int], timeout: float | None) -> socket.socket:
    return socket.create_connection(address, timeout=timeout)
