"""The HTTP/1.1 wire without sockets: request lines, header fields, body length, responses."""

from __future__ import annotations

import http.client
import io
import random
from http import HTTPStatus

import pytest

from siftlib.gateway import wire
from siftlib.gateway.wire import BadHead, RequestLine


def test_a_request_line_splits_into_method_path_and_version() -> None:
    assert wire.parse_request_line("POST //v2/search HTTP/1.0") == RequestLine(
        "POST", "/v2/search", "HTTP/1.0", (1, 0)
    )
    assert wire.parse_request_line("  ") is None


@pytest.mark.parametrize(
    ("line", "status"),
    [
        ("GET /", HTTPStatus.BAD_REQUEST),
        ("GET / HTTP/1.1 extra", HTTPStatus.BAD_REQUEST),
        ("GET / HTTPS/1.1", HTTPStatus.BAD_REQUEST),
    ],
)
def test_a_malformed_request_line_is_a_bad_head(line: str, status: HTTPStatus) -> None:
    with pytest.raises(BadHead) as caught:
        wire.parse_request_line(line)
    assert caught.value.status == status


def test_http_2_and_later_are_refused_after_the_line_is_read() -> None:
    line = wire.parse_request_line("POST /v2/search HTTP/2.0")
    assert line is not None and line.path == "/v2/search"
    with pytest.raises(BadHead) as caught:
        wire.check_version(line)
    assert caught.value.status == HTTPStatus.HTTP_VERSION_NOT_SUPPORTED
    wire.check_version(RequestLine("GET", "/", "HTTP/1.1", (1, 1)))  # spoken: no error


def test_fields_are_read_by_lowercased_name_up_to_the_blank_line() -> None:
    rfile = io.BytesIO(b"Host: x\r\nX-A: 1\r\nx-a:  2 \n\r\nbody")
    assert wire.read_fields(rfile) == {"host": ["x"], "x-a": ["1", "2"]}
    assert rfile.read() == b"body"


@pytest.mark.parametrize(
    ("fields", "length"), [({"content-length": ["0"]}, 0), ({"content-length": [" 0012 "]}, 12)]
)
def test_a_body_length_is_one_content_length_of_digits(
    fields: dict[str, list[str]], length: int
) -> None:
    assert wire.body_length(fields) == length


@pytest.mark.parametrize(
    ("fields", "status", "error"),
    [
        ({}, HTTPStatus.BAD_REQUEST, "bad request"),
        ({"content-length": ["1", "1"]}, HTTPStatus.BAD_REQUEST, "bad request"),
        ({"content-length": ["-1"]}, HTTPStatus.BAD_REQUEST, "bad request"),
        ({"content-length": ["1"], "transfer-encoding": ["chunked"]}, 400, "bad request"),
        ({"content-length": ["65537"]}, 413, "request body too large"),
        ({"content-length": ["9" * 40]}, 413, "request body too large"),
    ],
)
def test_a_missing_bad_or_too_large_length_is_refused(
    fields: dict[str, list[str]], status: int, error: str
) -> None:
    with pytest.raises(BadHead) as caught:
        wire.body_length(fields)
    assert (caught.value.status, caught.value.error) == (status, error)


def test_connection_close_follows_the_version_and_the_field() -> None:
    assert not wire.connection_closes({}, (1, 1))
    assert wire.connection_closes({"connection": ["Close"]}, (1, 1))
    assert wire.connection_closes({}, (1, 0))
    assert not wire.connection_closes({"connection": ["keep-alive"]}, (1, 0))


@pytest.mark.parametrize(
    ("values", "version", "closes"),
    [
        (["keep-alive, close"], (1, 1), True),
        (["keep-alive", "close"], (1, 1), True),
        (["upgrade , CLOSE"], (1, 1), True),
        (["keep-alive, close"], (1, 0), True),
        (["foo, Keep-Alive"], (1, 0), False),
        (["closed"], (1, 1), False),
        (["closed"], (1, 0), True),
    ],
)
def test_connection_is_a_token_list(
    values: list[str], version: tuple[int, int], closes: bool
) -> None:
    assert wire.connection_closes({"connection": values}, version) is closes


@pytest.mark.parametrize("value", [b"a\x01b", b"\x1b[0m", b"a\x7f", b"a\x0cb", b"a\rb", b"\x00"])
def test_a_control_byte_in_a_value_is_a_bad_head(value: bytes) -> None:
    with pytest.raises(BadHead) as caught:
        wire.read_fields(io.BytesIO(b"X-A: " + value + b"\r\n\r\n"))
    assert caught.value.status == HTTPStatus.BAD_REQUEST


def test_the_head_budget_counts_every_line() -> None:
    head = b"X-A: " + b"v" * 90 + b"\r\n"  # 97 bytes a line
    assert wire.read_fields(io.BytesIO(head * 2 + b"\r\n"), budget=196) == {"x-a": ["v" * 90] * 2}
    with pytest.raises(BadHead) as caught:
        wire.read_fields(io.BytesIO(head * 2 + b"\r\n"), budget=195)
    assert caught.value.status == HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE
    assert caught.value.details == "the request head is over 16 KiB"


@pytest.mark.parametrize(
    ("fields", "version", "details"),
    [
        ({}, (1, 1), "exactly one Host field is required"),
        ({"host": ["a", "a"]}, (1, 0), "exactly one Host field is required"),
        ({"host": ["a"], "authorization": ["x", "x"]}, (1, 1), "at most one Authorization"),
    ],
)
def test_host_and_authorization_are_checked(
    fields: dict[str, list[str]], version: tuple[int, int], details: str
) -> None:
    with pytest.raises(BadHead, match=details):
        wire.check_fields(fields, version)
    wire.check_fields({"host": ["a"], "authorization": ["x"]}, (1, 1))
    wire.check_fields({}, (1, 0))


def test_a_response_is_one_bytes_object_with_its_length_and_date() -> None:
    data = wire.encode_json(
        HTTPStatus.NOT_FOUND, {"error": "not found"}, {"Allow": "GET"}, server="sift/t", close=True
    )
    head, _, body = data.partition(b"\r\n\r\n")
    assert body == b'{"error": "not found"}\n'
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0] == "HTTP/1.1 404 Not Found"
    assert f"Content-Length: {len(body)}" in lines
    assert f"Date: {wire.http_date()}" in lines
    assert lines[-2:] == ["Allow: GET", "Connection: close"]
    head_only = wire.encode_json(
        HTTPStatus.OK, {}, {}, server="sift/t", close=False, head_only=True
    )
    assert head_only.endswith(b"\r\n\r\n")
    assert b"Connection" not in head_only


def test_the_date_is_an_rfc_9110_imf_fixdate() -> None:
    assert wire.http_date(0) == "Thu, 01 Jan 1970 00:00:00 GMT"
    assert wire.http_date(86400.7) == "Fri, 02 Jan 1970 00:00:00 GMT"


# --- the head parser against the stdlib's, over a corpus -----------------------------------

TOKEN = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
VALUE = [chr(c) for c in range(0x21, 0x7F)] + [" ", "\t"] + [chr(c) for c in range(0xA0, 0x100)]


def stdlib_fields(head: bytes) -> dict[str, list[str]]:
    """Parse a head with `http.client.parse_headers`, as `read_fields` shapes its answer."""
    message = http.client.parse_headers(io.BytesIO(head))
    fields: dict[str, list[str]] = {}
    for name, value in message.items():
        # RFC 9112 §5: whitespace after a field value is not part of it; the stdlib keeps it.
        fields.setdefault(name.lower(), []).append(value.rstrip(" \t"))
    return fields


def generated_heads(count: int) -> list[bytes]:
    """Well-formed heads: any token names (some repeated, any case), any legal value bytes."""
    rng = random.Random(9112)
    heads = []
    for _ in range(count):
        end = rng.choice([b"\r\n", b"\n"])
        names = ["".join(rng.choices(TOKEN, k=rng.randint(1, 12))) for _ in range(6)]
        lines = []
        for _ in range(rng.randint(0, 30)):
            name = rng.choice(names)
            name = "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in name)
            inner = "".join(rng.choices(VALUE, k=rng.randint(0, 40))).strip(" \t")
            padding = [rng.choice(["", " ", "  ", "\t", " \t"]) for _ in range(2)]
            value = padding[0] + inner + padding[1]
            lines.append(f"{name}:{value}".encode("latin-1") + end)
        heads.append(b"".join(lines) + end)
    return heads


HAND_WRITTEN = [
    b"Host: x\r\n\r\n",
    b"Host: x\r\nX-A: 1\r\nx-a: 2\r\n\r\n",
    b"Content-Type:application/json\r\nContent-Length: 12\r\n\r\n",
    b"X-Empty:\r\nX-Blank: \t \r\n\r\n",
    b"X-Colon: a:b:c\r\nX-Inner: a  b\tc\r\n\r\n",
    b"X-Latin: caf\xe9 \xa0\xff\r\n\r\n",
    b"Host: x\nA: b\n\n",
    b"Authorization: Bearer abc.def~+/=\r\n\r\n",
    b"\r\n",
]


def read(head: bytes) -> tuple[dict[str, list[str]], bytes]:
    """Return what `read_fields` reads from `head` and the bytes it left after it."""
    rfile = io.BytesIO(head + b"BODY")
    return wire.read_fields(rfile), rfile.read()


@pytest.mark.parametrize("head", HAND_WRITTEN)
def test_read_fields_agrees_with_the_stdlib_on_well_formed_heads(head: bytes) -> None:
    # The head is consumed exactly, up to its blank line.
    assert read(head) == (stdlib_fields(head), b"BODY")


def test_read_fields_agrees_with_the_stdlib_on_400_generated_heads() -> None:
    """One test over them all: as 400 test items they cost every test worker collection time."""
    heads = generated_heads(400)
    assert [head for head in heads if read(head) != (stdlib_fields(head), b"BODY")] == []


@pytest.mark.parametrize(
    ("head", "why"),
    [
        (b"Host : x\r\n\r\n", "whitespace before the colon (RFC 9112 §5.1: must be a 400)"),
        (b"X-A: 1\r\n  folded\r\n\r\n", "an obsolete folded line"),
        (b"X-A: 1\rX-B: 2\r\n\r\n", "a bare CR inside a value"),
        (b"X-A: a\0b\r\n\r\n", "a NUL inside a value"),
        (b"no colon here\r\n\r\n", "a line that is not a field"),
        (b"B\xe4d: x\r\n\r\n", "a name outside the token characters"),
    ],
)
def test_read_fields_refuses_what_the_stdlib_lets_through(head: bytes, why: str) -> None:
    http.client.parse_headers(io.BytesIO(head))  # lenient: no error
    with pytest.raises(BadHead) as caught:
        wire.read_fields(io.BytesIO(head))
    assert caught.value.status == HTTPStatus.BAD_REQUEST, why
