"""Test kit for fetch: loopback pages with scripted behaviour, and listeners that must stay idle.

with PageServer({"/": page(b"<p>hi</p>")}) as site:      # site.url, site.port, site.hits
    ...
with Listener() as idle:                                  # idle.port; idle.connections
    ...
"""

from __future__ import annotations

import contextlib
import re
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any

from bodykit import TESTDATA_FETCH
from gatewaykit import QuietServer

Route = Callable[[BaseHTTPRequestHandler], None]


def page(
    body: bytes,
    *,
    status: int = 200,
    content_type: str | None = "text/html; charset=utf-8",
    headers: dict[str, str] | None = None,
) -> Route:
    """Answer with a fixed body, in one write."""

    def answer(handler: BaseHTTPRequestHandler) -> None:
        lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}"]
        if content_type is not None:
            lines.append(f"Content-Type: {content_type}")
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        handler.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    return answer


def redirect(location: str, *, status: int = 302) -> Route:
    """Answer with a redirect to `location`."""
    return page(b"", status=status, content_type=None, headers={"Location": location})


def drip(byte_every: float, total: int = 10_000) -> Route:
    """Send a head, then one body byte every `byte_every` seconds."""

    def answer(handler: BaseHTTPRequestHandler) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {total}\r\n\r\n"
        handler.wfile.write(head.encode())
        handler.wfile.flush()
        for _ in range(total):
            time.sleep(byte_every)
            try:
                handler.wfile.write(b"x")
                handler.wfile.flush()
            except OSError:
                return

    return answer


def hang(seconds: float) -> Route:
    """Read the request, then say nothing for `seconds`."""

    def answer(handler: BaseHTTPRequestHandler) -> None:
        time.sleep(seconds)

    return answer


class PageServer:
    """A loopback HTTP/1.1 server answering each path with its route; counts every request."""

    def __init__(
        self,
        routes: dict[str, Route],
        *,
        host: str = "127.0.0.1",
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.routes = routes
        self.hits: list[tuple[str, dict[str, str]]] = []
        self.peers: list[int] = []  # the client port of each request: one per connection
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_GET(self) -> None:
                server.hits.append((self.path, dict(self.headers)))
                server.peers.append(self.client_address[1])
                route = server.routes.get(self.path.split("?", 1)[0])
                (route or page(b"not found", status=404, content_type="text/plain"))(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = QuietServer((host, 0), Handler)
        if ssl_context is not None:  # HTTPS: the handshake runs as each connection is accepted
            self._server.socket = ssl_context.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self.host = host
        scheme = "http" if ssl_context is None else "https"
        self.url = f"{scheme}://{host}:{self.port}"
        self.allow = f"{host}:{self.port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def paths(self) -> list[str]:
        """Return the paths requested so far, in order."""
        return [path for path, _ in self.hits]

    def __enter__(self) -> PageServer:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()


class Listener:
    """A loopback TCP listener that only counts the connections and bytes it receives.

    Read `connections` after the `with` block: leaving it also counts what waits unaccepted.
    """

    def __init__(self, host: str = "127.0.0.1", family: int = socket.AF_INET) -> None:
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self._sock.listen(16)
        self._sock.settimeout(0.05)
        self.port = self._sock.getsockname()[1]
        self.connections = 0
        self.received = b""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            conn.settimeout(0.2)
            with contextlib.suppress(OSError):
                self.received += conn.recv(65536)
            conn.close()

    def __enter__(self) -> Listener:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._sock.setblocking(False)
        while True:  # a connection still in the backlog counts too
            try:
                conn, _ = self._sock.accept()
            except OSError:
                break
            self.connections += 1
            conn.close()
        self._sock.close()


_TOKEN = re.compile(r"\w+")
_MARKDOWN_LINK = re.compile(r"!?\[([^\]]*)\]\([^)\s]*\)")


def labelled_pages() -> list[tuple[str, bytes, str]]:
    """Return (name, html bytes, expected article text) for each labelled page in testdata/fetch."""
    return [
        (html.stem, html.read_bytes(), html.with_suffix(".txt").read_text(encoding="utf-8"))
        for html in sorted(TESTDATA_FETCH.glob("*.html"))
        if html.with_suffix(".txt").exists()
    ]


def shingle_f1(expected: str, got: str, *, n: int = 4) -> float:
    """Word 4-gram F1 between an expected article body and an extraction (words = `\\w+`)."""
    want = Counter(_shingles(_TOKEN.findall(expected), n))
    have = Counter(_shingles(_TOKEN.findall(got), n))
    common = sum((want & have).values())
    if not common:
        return 0.0
    precision, recall = common / sum(have.values()), common / sum(want.values())
    return 2 * precision * recall / (precision + recall)


def without_link_targets(markdown: str) -> str:
    """Return markdown with `[text](url)` reduced to its text, as a reader sees it."""
    return _MARKDOWN_LINK.sub(r"\1", markdown)


def _shingles(words: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + n]) for i in range(max(len(words) - n + 1, 1))] if words else []


def hostile_paragraphs(size: int) -> bytes:
    """A page of `size` bytes of plain paragraphs: main-content extraction is quadratic in it."""
    para = b"<p>" + b"word " * 40 + b"</p>\n"
    return b"<html><body>" + para * (size // len(para)) + b"</body></html>"


def hostile_table(size: int) -> bytes:
    """A page of one table of `size` bytes, ten one-letter cells a row."""
    row = b"<tr>" + b"<td>c</td>" * 10 + b"</tr>"
    return b"<html><body><table>" + row * (size // len(row)) + b"</table></body></html>"


def hostile_class(size: int) -> bytes:
    """A page whose one `class` attribute is `size` bytes long."""
    return b'<html><body><div class="' + b"a " * (size // 2) + b'">hi</div><p>x</p></body></html>'


def hostile_links(count: int) -> bytes:
    """A page of `count` distinct links."""
    links = b"".join(b'<a href="/p%d">l%d</a> ' % (i, i) for i in range(count))
    return b"<html><body>" + links + b"</body></html>"
