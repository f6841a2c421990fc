"""Test kit for the gateway: loopback fake upstreams, an in-process gateway, a raw HTTP caller.

Shared by the server, client and contract tests, the server benchmark and `make demo`.
The fakes answer in one write with `TCP_NODELAY` (search.md §3), so they can be timed.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from siftlib.config import FetchConfig, Secrets, load_config
from siftlib.fetch.fetcher import Fetcher
from siftlib.gateway.server import GatewayServer
from siftlib.gateway.waking import WakingServer
from siftlib.metrics import Metrics
from siftlib.search.pipeline import Searcher
from siftlib.store.factory import open_store

REPO = Path(__file__).resolve().parent.parent


class QuietServer(WakingServer):
    """A loopback test server that takes a client hanging up in silence, and never polls."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # sift may drop a slow or pooled upstream connection; socketserver would print that
        # as a traceback on stderr, where it reads like a failure. Anything else still prints.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass
class Recorded:
    """One request a fake upstream received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class FakeUpstream:
    """A loopback HTTP server giving every request the same answer, and recording each one."""

    def __init__(
        self,
        body: bytes = b"{}",
        *,
        status: int = 200,
        delay: float = 0.0,
        gate: threading.Event | None = None,
    ) -> None:
        self.body, self.status, self.delay, self.gate = body, status, delay, gate
        self.calls: list[Recorded] = []
        self.connections = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def setup(self) -> None:
                super().setup()
                fake.connections += 1

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                fake.calls.append(Recorded(self.command, self.path, dict(self.headers), body))
                if fake.gate is not None:
                    fake.gate.wait(30)
                if fake.delay:
                    time.sleep(fake.delay)
                head = (
                    f"HTTP/1.1 {fake.status} X\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(fake.body)}\r\n\r\n"
                ).encode()
                self.wfile.write(head + fake.body)

            do_GET = do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = QuietServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass
class Gateway:
    """A running in-process gateway and what it is made of."""

    server: GatewayServer
    searcher: Searcher
    url: str
    config_path: Path
    store: Any
    thread: threading.Thread
    stopped: bool = field(default=False)

    @property
    def port(self) -> int:
        return self.server.server_port

    def stop(self) -> None:
        """Stop as `sift serve` does on SIGTERM: stop accepting, drain, close."""
        if self.stopped:
            return
        self.stopped = True
        self.server.shutdown()
        self.server.drain(timeout=30)
        self.server.server_close()
        if self.server.fetcher is not None:
            self.server.fetcher.close()
        self.searcher.close()
        self.store.close()


def warm_conversion_pool() -> None:
    """Wait until a conversion worker has its imports: a first one costs ~1 s, more on a busy box.

    A test's short fetch deadline then measures the fetch, not a worker starting.
    """
    from siftlib.fetch.conversion import conversion_pool

    pool = conversion_pool()
    pool.start()
    pool.run(len, b"", deadline=time.monotonic() + 120)


def write_config(
    directory: Path,
    *,
    searxng: str | None = None,
    brave_llm: str | None = None,
    tavily: str | None = None,
    restricted: tuple[str, ...] = (),
    timeout: str = "3s",
    listen: str = "127.0.0.1:0",
    tavily_cap: int | None = None,
    store: str = "sqlite",
) -> Path:
    """Write a config.toml enabling the sources given by URL; return its path."""
    lines = [
        "[server]",
        f'listen = "{listen}"',
        f'db = "{directory / "cache.db"}"',
        f'secret_env = "{directory / "secret.env"}"',
        f"permit_restricted = {json.dumps(list(restricted))}",
        f'store = "{store}"',
        "[search]",
        f'timeout = "{timeout}"',
    ]
    for name, url in (("searxng", searxng), ("brave_llm", brave_llm), ("tavily", tavily)):
        if url is not None:
            lines += [f"[search.{name}]", "enabled = true", f'url = "{url}"']
            if name == "tavily" and tavily_cap is not None:
                lines.append(f"daily_credit_cap = {tavily_cap}")
    path = directory / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@contextmanager
def gateway(
    directory: Path,
    *,
    searxng: str | None = None,
    brave_llm: str | None = None,
    tavily: str | None = None,
    callers: dict[str, str] | None = None,
    keys: dict[str, str] | None = None,
    restricted: tuple[str, ...] = (),
    timeout: str = "3s",
    tavily_cap: int | None = None,
    searcher_factory: Callable[[Searcher], Any] | None = None,
    fetch: FetchConfig | None = None,
    fetch_cache: Any = None,
    fetch_pool: Any = None,
    **server_options: Any,
) -> Iterator[Gateway]:
    """Run a gateway on 127.0.0.1:<free port> over the given upstreams, then stop it."""
    config = load_config(
        str(
            write_config(
                directory,
                searxng=searxng,
                brave_llm=brave_llm,
                tavily=tavily,
                restricted=restricted,
                timeout=timeout,
                tavily_cap=tavily_cap,
            )
        )
    )
    values = {"TAVILY_API_KEY": "tvly-test-key", "BRAVE_API_KEY": "brave-test-key"}
    values.update(keys or {})
    values.update({f"SIFT_TOKEN_{name.upper()}": token for name, token in (callers or {}).items()})
    secrets = Secrets({k: v for k, v in values.items() if v}, environ={})
    store = open_store(config.db)
    searcher = Searcher(
        config, secrets, store=store, metrics=Metrics(), allow_private_upstreams=True
    )
    served = searcher_factory(searcher) if searcher_factory else searcher
    options: dict[str, Any] = {"deadline": config.timeout + 2.0, "default_k": config.k}
    if fetch is not None:  # the fetch routes, with this [fetch] table (loopback pages: `allow`)
        warm_conversion_pool()
        options["fetcher"] = Fetcher(
            fetch,
            metrics=searcher.metrics,
            restricted=config.permit_restricted,
            cache=fetch_cache,
            pool=fetch_pool,
        )
    options.update(server_options)
    server = GatewayServer(
        ("127.0.0.1", 0),
        served,
        callers=secrets.callers(),
        restricted=config.permit_restricted,
        **options,
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    gw = Gateway(
        server=server,
        searcher=searcher,
        url=f"http://127.0.0.1:{server.server_port}",
        config_path=config.path,
        store=store,
        thread=thread,
    )
    try:
        yield gw
    finally:
        gw.stop()


@dataclass
class Reply:
    """A response as a test sees it."""

    status: int
    headers: http.client.HTTPMessage
    raw: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.raw)


def call(
    url: str,
    method: str,
    path: str,
    body: object = None,
    *,
    token: str | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> Reply:
    """Make one HTTP request (a JSON body unless bytes are given) and read the answer.

    A body is declared `Content-Type: application/json` unless `headers` say otherwise.
    """
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    if data is not None:
        sent.setdefault("Content-Type", "application/json")
    try:
        conn.request(method, path, body=data, headers=sent)
        response = conn.getresponse()
        return Reply(response.status, response.headers, response.read())
    finally:
        conn.close()


def raw_exchange(
    port: int, data: bytes, *, timeout: float = 30.0, shut_write: bool = False
) -> bytes:
    """Send raw bytes to the gateway and return everything it answers until it closes."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        if shut_write:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def status_of(raw: bytes) -> int:
    """Return the status code of a raw HTTP/1.1 response."""
    return int(raw.split(b" ", 2)[1])


@contextmanager
def serve_process(config: Path, *, log: Path) -> Iterator[str]:
    """Run `sift serve` as a process of its own, stderr into `log`; yield its URL; stop it."""
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(REPO / "sift.py"), "serve", "--config", str(config)]
            + ["--allow-private-upstreams"],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        deadline = time.monotonic() + 30
        while not (found := re.search(r"listening on 127\.0\.0\.1:(\d+)", log.read_text())):
            assert proc.poll() is None, f"sift serve exited: {log.read_text()}"
            assert time.monotonic() < deadline, "sift serve did not start listening"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{found.group(1)}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def free_port() -> int:
    """Return a loopback port nobody listened on a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until(condition: Callable[[], object], what: str, limit: float = 20.0) -> None:
    """Poll until `condition()` holds; fail naming `what` when it never does."""
    import pytest

    end = time.monotonic() + limit
    while not condition():
        if time.monotonic() > end:
            pytest.fail(f"never happened: {what}")
        time.sleep(0.01)


def reading_requests(gw: Gateway, count: int) -> None:
    """Wait until `count` connections are past their first byte, reading a request: none idle.

    The connection count rises before a handler thread runs; until it has registered and read
    a byte, a new connection would find it idle and evict it instead of being shed.
    """

    def reading() -> int:
        handlers = list(gw.server._handlers)  # one step under the GIL: handler threads add to it
        return sum(h.served > 0 and h.idle_since is None for h in handlers)

    wait_until(lambda: reading() == count, f"{count} connections reading a request")
