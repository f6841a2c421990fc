"""The gateway under stress: stalled clients, bursts, bounds, deadlines and graceful shutdown."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from bodykit import searxng_body
from gatewaykit import FakeUpstream, call, gateway, reading_requests, wait_until, write_config

REPO = Path(__file__).resolve().parent.parent

BUSY = "the gateway is at its bound of concurrent work; retry in a moment"


def local_post_head(port: int, length: int, extra: bytes = b"") -> bytes:
    """Return the head of a JSON POST to /v1/search, as a local client sends it in open mode."""
    return (
        b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
        b"%sContent-Length: %d\r\n\r\n" % (port, extra, length)
    )


class Blocking:
    """A searcher that holds every search until released, to fill the gateway's bounds."""

    def __init__(self, real: Any) -> None:
        self.real, self.metrics = real, real.metrics
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)

    def search(self, request: Any, **options: Any) -> Any:
        self.entered.release()
        self.release.wait(30)
        return self.real.search(request, **options)


def test_a_stalled_client_does_not_block_others_and_loses_its_thread(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    with gateway(tmp_path, searxng=searxng.url, socket_timeout=0.5, first_byte_timeout=1.0) as gw:
        half_body = socket.create_connection(("127.0.0.1", gw.port))
        half_body.sendall(local_post_head(gw.port, 100) + b'{"query": "sq')
        half_head = socket.create_connection(("127.0.0.1", gw.port))
        half_head.sendall(b"POST /v1/sea")
        silent = socket.create_connection(("127.0.0.1", gw.port))
        try:
            for query in ("one", "two", "three"):
                reply = call(gw.url, "POST", "/v2/search", {"query": query}, timeout=10)
                assert reply.status == 200
            # Each stalled socket is answered or closed after the socket timeout, never kept.
            for sock in (half_body, half_head, silent):
                sock.settimeout(15)
            answer = half_body.recv(65536)
            assert answer.startswith(b"HTTP/1.1 400")
            assert half_head.recv(65536) == b""
            assert silent.recv(65536) == b""
        finally:
            for sock in (half_body, half_head, silent):
                sock.close()
        wait_until(lambda: gw.server._connections == 0, "stalled connections released")
    asked = sorted(parse_qs(urlsplit(recorded.path).query)["q"][0] for recorded in searxng.calls)
    assert asked == ["one", "three", "two"]  # the stalled half-request was never searched


def test_64_concurrent_clients_are_all_answered(tmp_path: Path) -> None:
    slow = FakeUpstream(searxng_body(10), delay=0.05)
    statuses: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(64)

    def client(n: int) -> None:
        barrier.wait()
        try:
            status = call(gw.url, "POST", "/v2/search", {"query": f"burst {n}"}, timeout=60).status
        except OSError as exc:
            status = -1
            print("lost:", type(exc).__name__)
        with lock:
            statuses.append(status)

    try:
        with gateway(tmp_path, searxng=slow.url) as gw:
            threads = [threading.Thread(target=client, args=(n,)) for n in range(64)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(90)
    finally:
        slow.close()
    assert len(statuses) == 64
    assert set(statuses) <= {200, 503}
    assert statuses.count(200) >= 1


def test_past_the_search_bound_clients_are_shed_with_503_not_lost(tmp_path: Path) -> None:
    slow = FakeUpstream(searxng_body(10), delay=0.3)
    replies: list[Any] = []
    lock = threading.Lock()
    barrier = threading.Barrier(24)

    def client(n: int) -> None:
        barrier.wait()
        reply = call(gw.url, "POST", "/v2/search", {"query": f"shed {n}"}, timeout=60)
        with lock:
            replies.append(reply)

    try:
        with gateway(tmp_path, searxng=slow.url, max_searches=2, queue_wait=0.0) as gw:
            threads = [threading.Thread(target=client, args=(n,)) for n in range(24)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(90)
            metrics = call(gw.url, "GET", "/metrics").json
    finally:
        slow.close()
    assert len(replies) == 24
    shed = [r for r in replies if r.status == 503]
    assert {r.status for r in replies} == {200, 503}
    assert all(
        r.json == {"success": False, "error": "server busy, retry", "details": BUSY} for r in shed
    )
    assert metrics["http_shed"] == {"reason=busy": len(shed)}


def test_a_full_gateway_answers_503_while_a_search_holds_the_only_slot(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    holder: dict[str, Blocking] = {}

    def blocking(real: Any) -> Blocking:
        holder["b"] = Blocking(real)
        return holder["b"]

    with gateway(
        tmp_path, searxng=searxng.url, searcher_factory=blocking, max_searches=1, queue_wait=0.05
    ) as gw:
        blocker = holder["b"]
        first: list[int] = []
        thread = threading.Thread(
            target=lambda: first.append(call(gw.url, "POST", "/v1/search", {"query": "a"}).status)
        )
        thread.start()
        assert blocker.entered.acquire(timeout=20)
        busy = call(gw.url, "POST", "/v1/search", {"query": "b"})
        blocker.release.set()
        thread.join(30)
        after = call(gw.url, "POST", "/v1/search", {"query": "c"})
    assert (busy.status, busy.json) == (503, {"error": "server busy, retry", "details": BUSY})
    assert first == [200]
    assert after.status == 200


def test_a_search_past_the_server_deadline_is_503(tmp_path: Path, searxng: FakeUpstream) -> None:
    holder: dict[str, Blocking] = {}

    def blocking(real: Any) -> Blocking:
        holder["b"] = Blocking(real)
        return holder["b"]

    with gateway(tmp_path, searxng=searxng.url, searcher_factory=blocking, deadline=0.3) as gw:
        started = time.monotonic()
        reply = call(gw.url, "POST", "/v2/search", {"query": "never answers"}, timeout=30)
        waited = time.monotonic() - started
        holder["b"].release.set()
    assert (reply.status, reply.json["error"]) == (503, "search deadline exceeded")
    assert waited < 10  # the deadline (0.3 s) plus a generous margin, not the client's 30 s


def test_connections_past_the_bound_get_a_canned_503(tmp_path: Path, searxng: FakeUpstream) -> None:
    with gateway(tmp_path, searxng=searxng.url, max_connections=2) as gw:
        held = [socket.create_connection(("127.0.0.1", gw.port)) for _ in range(2)]
        for sock in held:
            sock.sendall(b"GET /hea")  # busy reading a head: not idle, so never evicted
        try:
            reading_requests(gw, 2)
            with socket.create_connection(("127.0.0.1", gw.port), timeout=15) as third:
                answer = b""
                while chunk := third.recv(65536):
                    answer += chunk
        finally:
            for sock in held:
                sock.close()
        wait_until(lambda: gw.server._connections == 0, "held connections released")
        after = call(gw.url, "GET", "/healthz")
    assert answer.startswith(b"HTTP/1.1 503 ")
    assert answer.endswith(
        b'{"error": "server busy, retry", "details": "the gateway holds as many connections as '
        b'it serves at once; retry in a moment"}\n'
    )
    assert after.status == 200


def test_shutdown_lets_in_flight_requests_finish_then_closes(tmp_path: Path) -> None:
    gate = threading.Event()
    slow = FakeUpstream(searxng_body(5), gate=gate)
    replies: list[Any] = []
    try:
        with gateway(tmp_path, searxng=slow.url) as gw:
            request = threading.Thread(
                target=lambda: replies.append(call(gw.url, "POST", "/v1/search", {"query": "x"}))
            )
            request.start()
            wait_until(lambda: len(slow.calls) == 1, "the search reached the upstream")
            stopper = threading.Thread(target=gw.stop)
            stopper.start()
            wait_until(lambda: gw.server.draining.is_set(), "draining started")
            assert stopper.is_alive()  # still waiting for the request in flight
            gate.set()
            request.join(30)
            stopper.join(30)
            assert not stopper.is_alive()
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", gw.port), timeout=5).close()
            assert gw.store.problem == "the store is closed"
    finally:
        gate.set()
        slow.close()
    assert [reply.status for reply in replies] == [200]
    assert replies[0].headers["Connection"] == "close"
    assert len(replies[0].json["results"]) == 5


def test_sigterm_finishes_in_flight_requests_and_exits_0(tmp_path: Path) -> None:
    gate = threading.Event()
    slow = FakeUpstream(searxng_body(3), gate=gate)
    # A deadline far past the drain: on a starved machine the default 3 s could end the search.
    config = write_config(tmp_path, searxng=slow.url, timeout="10s")
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "sift.py"), "serve", "--config", str(config)],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    replies: list[Any] = []
    try:
        assert proc.stderr is not None
        line = ""
        while "listening on" not in line:
            line = proc.stderr.readline()
            assert line, "sift serve exited before listening"
        port = int(re.search(r"listening on 127\.0\.0\.1:(\d+)", line).group(1))  # type: ignore[union-attr]
        url = f"http://127.0.0.1:{port}"
        request = threading.Thread(
            target=lambda: replies.append(call(url, "POST", "/v1/search", {"query": "term"}))
        )
        request.start()
        wait_until(lambda: len(slow.calls) == 1, "the search reached the upstream")
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)  # let the signal land while the search is still held upstream
        assert proc.poll() is None
        gate.set()
        request.join(30)
        code = proc.wait(30)
        rest = proc.stderr.read()
    finally:
        gate.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        slow.close()
    assert code == 0
    assert [reply.status for reply in replies] == [200]
    assert "sift serve: stopped" in rest
    # The batched log lines are written out before the last word.
    assert 0 <= rest.find("INFO search caller=local q_len=4 ") < rest.find("sift serve: stopped")
    assert "Traceback" not in rest
    db = tmp_path / "cache.db"
    assert db.exists()
    assert not Path(f"{db}-wal").exists()  # the store was closed cleanly (WAL checkpointed)


def test_a_body_dripped_byte_by_byte_is_cut_at_the_socket_timeout(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    body = b'{"query": "sqlite wal", "pad": "' + b"x" * 20 + b'"}'
    stop_dripping = threading.Event()
    with gateway(tmp_path, searxng=searxng.url, socket_timeout=0.5) as gw:
        head = local_post_head(gw.port, len(body))
        sock = socket.create_connection(("127.0.0.1", gw.port), timeout=30)

        def drip() -> None:
            with contextlib.suppress(OSError):
                sock.sendall(head)
                for byte in body:  # each byte well within the per-recv timeout
                    if stop_dripping.wait(0.15):
                        return
                    sock.sendall(bytes([byte]))

        dripper = threading.Thread(target=drip)
        dripper.start()
        try:
            answer = sock.recv(65536)
        finally:
            stop_dripping.set()
            dripper.join(30)
            sock.close()
    # Had the gateway waited for the whole (valid) body, this would be a 200 search.
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b"shorter than its Content-Length" in answer
    assert searxng.calls == []


def test_expect_100_continue_is_answered_before_the_body(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    body = b'{"query": "sqlite wal"}'
    with (
        gateway(tmp_path, searxng=searxng.url) as gw,
        socket.create_connection(("127.0.0.1", gw.port), timeout=15) as sock,
    ):
        sock.sendall(local_post_head(gw.port, len(body), b"Expect: 100-continue\r\n"))
        interim = sock.recv(65536)
        sock.sendall(body)
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert answer.startswith(b"HTTP/1.1 200 ")


def test_a_request_head_dripped_byte_by_byte_is_cut_at_the_socket_timeout(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"p" * 200 + b"\r\n\r\n"
    stop_dripping = threading.Event()
    with gateway(tmp_path, searxng=searxng.url, socket_timeout=0.5) as gw:
        sock = socket.create_connection(("127.0.0.1", gw.port), timeout=15)

        def drip() -> None:
            with contextlib.suppress(OSError):
                for byte in head:  # each byte well within the per-recv timeout
                    if stop_dripping.wait(0.1):
                        return
                    sock.sendall(bytes([byte]))

        dripper = threading.Thread(target=drip)
        dripper.start()
        try:
            try:
                answer = sock.recv(65536)  # had the head been awaited: 25 s, then a 200
            except ConnectionResetError:
                answer = b""
        finally:
            stop_dripping.set()
            dripper.join(30)
            sock.close()
        wait_until(lambda: gw.server._connections == 0, "the dripping connection released")
    assert answer == b""


def test_a_client_that_stops_reading_loses_its_thread_after_the_socket_timeout(
    tmp_path: Path,
) -> None:
    padded = FakeUpstream(
        json.dumps(
            {
                "results": [
                    {"url": f"https://example.org/{i}", "title": "t" * 200, "content": "c" * 400}
                    for i in range(50)
                ]
            }
        ).encode()
    )
    body = b'{"query": "sqlite wal", "k": 50}'
    with gateway(tmp_path, searxng=padded.url, socket_timeout=0.5) as gw:
        request = local_post_head(gw.port, len(body)) + body
        assert len(call(gw.url, "POST", "/v1/search", json.loads(body)).raw) > 20_000
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # and never read
        sock.connect(("127.0.0.1", gw.port))

        def pipeline() -> None:
            with contextlib.suppress(OSError):  # refused once the gateway gives up on us
                sock.sendall(request * 1000)  # ~30 MB of answers: more than any socket buffer

        sender = threading.Thread(target=pipeline)
        sender.start()
        try:
            wait_until(lambda: gw.server._connections == 1, "the pipelining client connected")
            wait_until(lambda: gw.server._connections == 0, "the unread connection released")
            assert call(gw.url, "GET", "/healthz").status == 200  # the gateway serves on
        finally:
            sock.close()
            sender.join(30)
    padded.close()


def test_a_client_reset_mid_body_is_not_an_internal_error(
    tmp_path: Path, searxng: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    import struct

    caplog.set_level("DEBUG", logger="sift")
    with gateway(tmp_path, searxng=searxng.url) as gw:
        sock = socket.create_connection(("127.0.0.1", gw.port), timeout=30)
        sock.sendall(local_post_head(gw.port, 100) + b'{"query"')
        wait_until(lambda: gw.server._connections == 1, "the half request arrived")
        time.sleep(0.2)  # let the handler block reading the rest of the body
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # a reset, not a clean close
        wait_until(lambda: gw.server._connections == 0, "the reset connection released")
        assert call(gw.url, "GET", "/healthz").status == 200
    assert searxng.calls == []
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text


def test_clients_that_close_each_connection_never_get_a_spurious_busy(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    """64 clients from one address, one request a connection: each reconnects at its answer."""
    statuses: list[int] = []
    lock = threading.Lock()

    def client() -> None:
        for _ in range(5):
            reply = call(gw.url, "GET", "/healthz", headers={"Connection": "close"})
            with lock:
                statuses.append(reply.status)

    with gateway(tmp_path, searxng=searxng.url) as gw:
        threads = [threading.Thread(target=client) for _ in range(64)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        metrics = call(gw.url, "GET", "/metrics").json
    assert statuses == [200] * 320
    assert "http_shed" not in metrics or metrics["http_shed"] == {}


def test_a_connection_shed_on_a_v2_route_gets_firecrawls_shape(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    with (
        gateway(tmp_path, searxng=searxng.url, max_connections_per_client=1) as gw,
        socket.create_connection(("127.0.0.1", gw.port)) as held,
    ):
        held.sendall(b"GET /hea")  # busy reading a head: the address is at its bound
        reading_requests(gw, 1)
        body = b'{"query": "q"}'
        head = (
            b"POST /v2/search HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
        ) % (gw.port, len(body))
        with socket.create_connection(("127.0.0.1", gw.port), timeout=15) as second:
            second.sendall(head + body)
            answer = b""
            while chunk := second.recv(65536):
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 503 ")
    shed = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert (shed["success"], shed["error"]) == (False, "server busy, retry")
