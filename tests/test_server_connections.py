"""Idle connections cannot lock callers out: first-byte timeout, eviction, per-address bound.

Reproduced on the stdlib-era gateway: 260 sockets that never sent a byte took every slot,
and `/healthz` and authenticated searches got 503 until the idle ones were cut ~10 s later.
Timeouts are set short here, never slept through.
"""

from __future__ import annotations

import logging
import select
import socket
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from gatewaykit import FakeUpstream, Gateway, call, gateway, reading_requests, wait_until

TOKEN = "tok-ops-9f8e7d"


def connect(gw: Gateway, *, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", gw.port), timeout=15, source_address=(source, 0))
    return sock


def closed_by_gateway(sock: socket.socket) -> bool:
    """Say whether the gateway has closed `sock` without a word."""
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True


def still_open(sock: socket.socket) -> bool:
    """Say whether `sock` is open with nothing to read (select does not block past 0.1 s)."""
    readable, _, _ = select.select([sock], [], [], 0.1)
    return not readable


def answered(sock: socket.socket, rest: bytes = b"GET /healthz") -> int:
    """Send the `rest` of a request to /healthz on `sock`; return its status."""
    port = sock.getpeername()[1]
    sock.sendall(rest + b" HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % port)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return 0
        data += chunk
    return int(data.split(b" ", 2)[1])


def held_connections(gw: Gateway, count: int) -> None:
    wait_until(lambda: gw.server._connections == count, f"{count} connections held")


def waiting_silently(gw: Gateway, sock: socket.socket) -> None:
    """Wait until the handler of `sock`, which has sent nothing, waits for its first byte."""
    port = sock.getsockname()[1]

    def waiting() -> bool:
        handlers = list(gw.server._handlers)  # one step under the GIL: handler threads add to it
        return any(h.client_address[1] == port and h.idle_since is not None for h in handlers)

    wait_until(waiting, f"the connection from port {port} waiting for its first byte")


def idle_keep_alive(gw: Gateway, count: int) -> None:
    """Wait until `count` answered connections are idle, waiting for their next request."""

    def idle() -> int:
        handlers = list(gw.server._handlers)  # one step under the GIL: handler threads add to it
        return sum(h.served > 0 and h.idle_since is not None for h in handlers)

    wait_until(lambda: idle() == count, f"{count} idle keep-alive connections")


def test_a_connection_that_sends_nothing_is_cut_at_the_first_byte_timeout(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    with gateway(tmp_path, searxng=searxng.url, socket_timeout=60, first_byte_timeout=0.2) as gw:
        silent = connect(gw)
        slow = connect(gw)
        slow.sendall(b"GET /heal")  # one byte is enough to get the full socket timeout
        with silent, slow:
            assert closed_by_gateway(silent)  # long before the 60 s socket timeout
            assert still_open(slow)
            wait_until(lambda: gw.server._connections == 1, "the silent one released")
            assert answered(slow, b"thz") == 200
    assert gw.searcher.metrics.snapshot()["http_shed"] == {"reason=silent": 1}


def test_a_full_table_evicts_an_idle_connection_instead_of_refusing(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    options = {"max_connections": 3, "first_byte_timeout": 60, "socket_timeout": 60}
    with (
        gateway(tmp_path, searxng=searxng.url, callers={"ops": TOKEN}, **options) as gw,
        ExitStack() as stack,
    ):
        silent = []
        for _ in range(3):  # each waiting for its first byte before the next: an age order
            silent.append(stack.enter_context(connect(gw)))
            waiting_silently(gw, silent[-1])
        reply = call(gw.url, "POST", "/v1/search", {"query": "sqlite"}, token=TOKEN)
        assert reply.status == 200
        assert closed_by_gateway(silent[0])  # the oldest made room
        assert still_open(silent[1]) and still_open(silent[2])
    assert gw.searcher.metrics.snapshot()["http_shed"] == {"reason=evicted": 1}


def test_idle_keep_alive_connections_are_evicted_before_silent_ones(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    options = {"max_connections": 3, "first_byte_timeout": 60, "socket_timeout": 60}
    with gateway(tmp_path, searxng=searxng.url, **options) as gw, ExitStack() as stack:
        silent = stack.enter_context(connect(gw))  # the oldest, but never sent a byte
        kept = [stack.enter_context(connect(gw)) for _ in range(2)]
        for waiting, sock in enumerate(kept, 1):
            assert answered(sock) == 200  # now idle between keep-alive requests
            # The answer reaches us before its handler marks itself idle: wait for that, so
            # kept[0] is idle first however the machine schedules the two handler threads.
            idle_keep_alive(gw, waiting)
        held_connections(gw, 3)
        assert call(gw.url, "GET", "/healthz").status == 200
        assert closed_by_gateway(kept[0])
        assert still_open(kept[1]) and still_open(silent)
        held_connections(gw, 2)
        late = stack.enter_context(connect(gw))
        held_connections(gw, 3)
        assert call(gw.url, "GET", "/healthz").status == 200
        assert closed_by_gateway(kept[1])
        assert still_open(silent) and still_open(late)
        assert answered(silent) == 200


def test_a_busy_table_with_nothing_idle_still_sheds_with_503(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    with gateway(tmp_path, searxng=searxng.url, max_connections=2) as gw, ExitStack() as stack:
        for _ in range(2):
            stack.enter_context(connect(gw)).sendall(b"GET /hea")  # busy reading a head
        reading_requests(gw, 2)
        assert call(gw.url, "GET", "/healthz").status == 503


def test_one_client_address_holds_at_most_its_bound(
    tmp_path: Path, searxng: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        gateway(tmp_path, searxng=searxng.url, max_connections_per_client=2) as gw,
        ExitStack() as stack,
    ):
        for _ in range(2):
            stack.enter_context(connect(gw)).sendall(b"GET /hea")
        held_connections(gw, 2)
        third = stack.enter_context(connect(gw))
        data = b""
        while chunk := third.recv(65536):
            data += chunk
        assert data.startswith(b"HTTP/1.1 503 ")
        other = stack.enter_context(connect(gw, source="127.0.0.2"))  # another address: room
        assert answered(other) == 200
    assert gw.searcher.metrics.snapshot()["http_shed"] == {"reason=client": 1}


@pytest.fixture
def shedding(tmp_path: Path, searxng: FakeUpstream) -> Iterator[Gateway]:
    with gateway(tmp_path, searxng=searxng.url, max_connections=1) as gw, ExitStack() as stack:
        stack.enter_context(connect(gw)).sendall(b"GET /hea")
        reading_requests(gw, 1)
        yield gw


def test_shedding_is_logged_once_per_interval_with_the_count(
    shedding: Gateway, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="sift")
    statuses = [call(shedding.url, "GET", "/healthz").status for _ in range(5)]
    assert statuses == [503] * 5
    warnings = [r.getMessage() for r in caplog.records if "shedding" in r.getMessage()]
    assert warnings == [
        "shedding connections: 1 refused with 503 (table full, none idle) since the last "
        "report; max_connections=1, max_connections_per_client=64"
    ]
    monkeypatch.setattr("siftlib.gateway.connections.SHED_LOG_INTERVAL", 0.0)
    assert call(shedding.url, "GET", "/healthz").status == 503
    warnings = [r.getMessage() for r in caplog.records if "shedding" in r.getMessage()]
    assert warnings[1].startswith("shedding connections: 5 refused with 503 ")
