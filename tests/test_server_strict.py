"""The gateway's HTTP/1.1 strictness over raw sockets: what a lenient parser let through.

Each case was reproduced against the stdlib-era gateway: a head of 100 lines of 64 KiB,
`Connection: keep-alive, close` kept open, control bytes and missing or doubled `Host` and
`Authorization` accepted, `100 Continue` sent before the request was even routed, and open
mode answering any web page's `text/plain` POST or rebound `Host`.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from gatewaykit import FakeUpstream, Gateway, gateway, raw_exchange, status_of

from siftlib.gateway.server import is_local_host

TOKEN = "tok-ops-9f8e7d"
BODY = b'{"query": "sqlite wal"}'


@pytest.fixture
def gw(tmp_path: Path, searxng: FakeUpstream) -> Iterator[Gateway]:
    with gateway(tmp_path, searxng=searxng.url, callers={"ops": TOKEN}) as running:
        yield running


@pytest.fixture
def open_gw(tmp_path: Path, searxng: FakeUpstream) -> Iterator[Gateway]:
    with gateway(tmp_path, searxng=searxng.url) as running:
        yield running


def post(
    path: bytes = b"/v1/search",
    *,
    host: bytes = b"x",
    content_type: bytes | None = b"application/json",
    token: bytes | None = TOKEN.encode(),
    extra: bytes = b"",
    body: bytes = BODY,
) -> bytes:
    """Return a raw POST request, one field per argument."""
    head = b"POST " + path + b" HTTP/1.1\r\nHost: " + host + b"\r\n"
    if content_type is not None:
        head += b"Content-Type: " + content_type + b"\r\n"
    if token is not None:
        head += b"Authorization: Bearer " + token + b"\r\n"
    head += extra + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
    return head + body


def answer_of(raw: bytes) -> dict[str, object]:
    body: dict[str, object] = json.loads(raw.split(b"\r\n\r\n", 1)[1])
    return body


def read_answer(sock: socket.socket) -> bytes:
    """Read one whole answer (head and its Content-Length body) from a kept-open connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
    while len(rest) < length:
        rest += sock.recv(65536)
    return head + b"\r\n\r\n" + rest


# --- the head's size ------------------------------------------------------------------------


def test_a_head_over_16_kib_is_431_however_it_is_split(gw: Gateway) -> None:
    lines = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"v" * 2000) for i in range(9))  # 18 KB, 9 lines
    raw = raw_exchange(gw.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + lines + b"\r\n")
    assert status_of(raw) == 431
    assert answer_of(raw) == {
        "error": "request header fields too large",
        "details": "the request head is over 16 KiB",
    }
    long_line = b"GET /healthz?" + b"q" * 17_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    assert status_of(raw_exchange(gw.port, long_line)) == 431


def test_a_head_just_under_16_kib_is_served(gw: Gateway) -> None:
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    pad = b"X-Pad: " + b"v" * (16 * 1024 - len(head) - 11) + b"\r\n"
    request = head + pad + b"\r\n"
    assert len(request) == 16 * 1024
    assert status_of(raw_exchange(gw.port, request)) == 200


# --- strict fields --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field",
    [b"X-Bell: a\x07b", b"X-Esc: \x1b[31m", b"X-Del: a\x7f", b"X-Vt: a\x0bb", b"X-Nul: \x00"],
)
def test_a_control_byte_in_a_field_value_is_400(
    gw: Gateway, searxng: FakeUpstream, field: bytes
) -> None:
    raw = raw_exchange(gw.port, post(extra=field + b"\r\n"))
    assert status_of(raw) == 400
    assert answer_of(raw)["details"] == "a header field is malformed"
    assert searxng.calls == []


def test_a_tab_in_a_field_value_is_fine(gw: Gateway) -> None:
    assert status_of(raw_exchange(gw.port, post(extra=b"X-Tab: a\tb\r\n"))) == 200


@pytest.mark.parametrize(
    ("request_bytes", "details"),
    [
        (
            b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n",
            "exactly one Host field is required",
        ),
        (
            b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n",
            "exactly one Host field is required",
        ),
        (
            b"GET /healthz HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n",
            "exactly one Host field is required",
        ),
        (
            post(extra=b"Authorization: Bearer other\r\n"),
            "at most one Authorization field is allowed",
        ),
    ],
    ids=["missing-host", "two-hosts", "two-hosts-1.0", "two-authorizations"],
)
def test_a_missing_or_doubled_host_or_a_doubled_authorization_is_400(
    gw: Gateway, searxng: FakeUpstream, request_bytes: bytes, details: str
) -> None:
    raw = raw_exchange(gw.port, request_bytes)
    assert status_of(raw) == 400
    assert answer_of(raw) == {"error": "bad request", "details": details}
    assert searxng.calls == []


def test_http_1_0_needs_no_host(gw: Gateway) -> None:
    assert status_of(raw_exchange(gw.port, b"GET /healthz HTTP/1.0\r\n\r\n")) == 200


@pytest.mark.parametrize(
    ("request_bytes", "details"),
    [
        (
            b"GET /v2/search HTTP/1.1\r\nHost: x\r\nBad Name: x\r\n\r\n",
            "a header field is malformed",
        ),
        (b"POST /v2/search HTTP/1.1\r\n\r\n", "exactly one Host field is required"),
        (b"GET /v2/x HTTP/1.1\r\nHost: x\r\nX: " + b"v" * 20_000 + b"\r\n\r\n", None),
    ],
)
def test_a_malformed_head_on_v2_carries_the_firecrawl_envelope(
    gw: Gateway, request_bytes: bytes, details: str | None
) -> None:
    raw = raw_exchange(gw.port, request_bytes)
    assert status_of(raw) in (400, 431)
    answer = answer_of(raw)
    assert answer["success"] is False and isinstance(answer["error"], str)
    assert details is None or answer["details"] == details


# --- Connection -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "connection",
    [b"keep-alive, close", b"Close", b"upgrade,close", b"keep-alive\r\nConnection: close"],
)
def test_close_anywhere_in_the_connection_tokens_closes(gw: Gateway, connection: bytes) -> None:
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: " + connection + b"\r\n\r\n"
    raw = raw_exchange(gw.port, request * 2)  # returns once the gateway closes
    assert raw.count(b"HTTP/1.1 200 ") == 1
    assert b"Connection: close\r\n" in raw


def test_an_http_1_0_keep_alive_answer_says_keep_alive(gw: Gateway) -> None:
    with socket.create_connection(("127.0.0.1", gw.port), timeout=30) as sock:
        for _ in range(2):
            sock.sendall(b"GET /healthz HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            answer = read_answer(sock)
            assert status_of(answer) == 200
            assert b"\r\nConnection: keep-alive\r\n" in answer
    plain = raw_exchange(gw.port, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert b"Connection: keep-alive" not in plain and b"Connection: close" in plain


# --- Expect: 100-continue ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (post(b"/v1/nowhere", extra=b"Expect: 100-continue\r\n"), 404),
        (post(token=b"wrong", extra=b"Expect: 100-continue\r\n"), 401),
        (post(content_type=b"text/plain", extra=b"Expect: 100-continue\r\n"), 415),
        (post(extra=b"Expect: 100-continue\r\n", body=b"x" * 70_000), 413),
    ],
    ids=["route", "auth", "content-type", "size"],
)
def test_100_continue_is_sent_only_after_route_auth_and_size_pass(
    gw: Gateway, request_bytes: bytes, status: int
) -> None:
    head = request_bytes.split(b"\r\n\r\n", 1)[0] + b"\r\n\r\n"
    raw = raw_exchange(gw.port, head)  # the body is never sent: the gateway must not invite it
    assert status_of(raw) == status
    assert b"100 Continue" not in raw


def test_100_continue_is_sent_when_every_check_passes(gw: Gateway) -> None:
    request = post(extra=b"Expect: 100-continue\r\n")
    head, _, body = request.partition(b"\r\n\r\n")
    with socket.create_connection(("127.0.0.1", gw.port), timeout=30) as sock:
        sock.sendall(head + b"\r\n\r\n")
        assert sock.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        assert status_of(read_answer(sock)) == 200


# --- content type and open mode ---------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [None, b"text/plain", b"application/x-www-form-urlencoded", b"application/jsonx"],
)
def test_with_tokens_a_post_that_is_not_json_is_415(
    gw: Gateway, searxng: FakeUpstream, content_type: bytes | None
) -> None:
    raw = raw_exchange(gw.port, post(b"/v2/search", content_type=content_type))
    assert status_of(raw) == 415
    assert answer_of(raw) == {
        "success": False,
        "error": "unsupported media type",
        "details": "send the body as Content-Type: application/json",
    }
    assert searxng.calls == []


def test_with_tokens_json_with_parameters_is_fine(gw: Gateway) -> None:
    raw = raw_exchange(gw.port, post(content_type=b"Application/JSON ; charset=UTF-8"))
    assert status_of(raw) == 200


def test_with_tokens_auth_comes_before_the_content_type(gw: Gateway) -> None:
    raw = raw_exchange(gw.port, post(content_type=b"text/plain", token=None))
    assert status_of(raw) == 401


@pytest.mark.parametrize("path", [b"/v1/search", b"/v2/search"])
@pytest.mark.parametrize(
    "content_type", [None, b"text/plain", b"multipart/form-data; boundary=x", b"application/xml"]
)
def test_open_mode_refuses_a_post_a_web_page_could_send(
    open_gw: Gateway, searxng: FakeUpstream, path: bytes, content_type: bytes | None
) -> None:
    host = b"127.0.0.1:%d" % open_gw.port
    raw = raw_exchange(open_gw.port, post(path, host=host, content_type=content_type, token=None))
    assert status_of(raw) == 403
    answer = answer_of(raw)
    assert answer["error"] == "forbidden"
    assert answer["details"] == (
        "without caller tokens a POST must be sent as Content-Type: application/json"
    )
    assert searxng.calls == []


@pytest.mark.parametrize(
    "host",
    [
        b"evil.example:%d",
        b"evil.example",
        b"127.0.0.1",
        b"127.0.0.1:1",
        b"localhost.evil:%d",
        b"10.0.0.5:%d",
        b"[::2]:%d",
        b"127.0.0.1:%d0",
        b"",
    ],
)
def test_open_mode_refuses_a_host_that_is_not_this_loopback_gateway(
    open_gw: Gateway, searxng: FakeUpstream, host: bytes
) -> None:
    value = host % open_gw.port if b"%d" in host else host
    for request in [
        post(host=value, token=None),
        b"GET /metrics HTTP/1.1\r\nHost: " + value + b"\r\nConnection: close\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: " + value + b"\r\nConnection: close\r\n\r\n",
    ]:
        raw = raw_exchange(open_gw.port, request)
        assert status_of(raw) == 403
        assert answer_of(raw) == {
            "error": "forbidden",
            "details": f"without caller tokens the Host must be 127.0.0.1:{open_gw.port}, "
            f"[::1]:{open_gw.port} or localhost:{open_gw.port}",
        }
    assert searxng.calls == []


@pytest.mark.parametrize(
    "host", [b"127.0.0.1:%d", b"localhost:%d", b"LocalHost:%d", b"127.0.0.2:%d"]
)
def test_open_mode_serves_a_loopback_host_with_a_json_post(open_gw: Gateway, host: bytes) -> None:
    raw = raw_exchange(open_gw.port, post(host=host % open_gw.port, token=None))
    assert status_of(raw) == 200
    assert answer_of(raw)["results"]


def test_with_tokens_any_host_is_served(gw: Gateway) -> None:
    assert status_of(raw_exchange(gw.port, post(host=b"sift.internal.example"))) == 200


@pytest.mark.parametrize(
    ("value", "port", "local"),
    [
        ("127.0.0.1:8787", 8787, True),
        ("[::1]:8787", 8787, True),
        ("LOCALHOST:8787", 8787, True),
        ("127.9.9.9:8787", 8787, True),
        ("localhost", 80, True),
        ("[::1]", 80, True),
        ("localhost", 8787, False),
        ("[::1]", 8787, False),
        ("127.0.0.1:8788", 8787, False),
        ("127.0.0.1:+8787", 8787, False),
        ("::1:8787", 8787, False),
        ("[::1]x:8787", 8787, False),
        ("attacker.example:8787", 8787, False),
        ("", 8787, False),
    ],
)
def test_a_local_host_is_a_loopback_name_with_the_listening_port(
    value: str, port: int, local: bool
) -> None:
    assert is_local_host(value, port) is local
