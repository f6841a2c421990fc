"""The HTTP/1.1 wire: a request's line, header fields and body length read strictly, and whole
responses built to leave in one write.

    line = parse_request_line(raw)      # None: nobody to answer; BadHead: answer exc.status
    fields = read_fields(rfile)         # {"content-length": ["12"], ...}
    length = body_length(fields)
    sock.sendall(encode_json(HTTPStatus.OK, {"ok": True}, {}, server="sift/0.1", close=False))

Decisions (search.md §3 asks for the traps of the stdlib stack closed):
- Fields are read as lines here, not by the stdlib's email parser (~20 µs a request, a tenth
  of a cache hit): a malformed line is a 400, HTTP/2 and later a 505.
- The whole head (request line and fields) is capped at 16 KiB, as h11 does, and at 100
  fields: past either, a 431. The stdlib allowed 100 lines of 64 KiB each, so 120 such
  connections took a gateway from 46 MiB to 782 MiB. API clients send a few hundred bytes.
- Strict where a lenient reading could be smuggled past a proxy or a check: a control byte
  in a field value (anything below 0x20 but tab, and DEL) is a 400; so are a missing `Host`
  on HTTP/1.1 and a repeated `Host` or `Authorization`. `Connection` is a token list
  (`keep-alive, close` closes).
- `Content-Length` must appear exactly once, as plain digits: anything else is a 400, a body
  larger than 64 KiB a 413; a chunked body is refused (a 400 asking for a length).
- A response's head and JSON body are one bytes object, so keep-alive answers never wait
  for the client's delayed ACK (`TCP_NODELAY` is set by the handler class).
- The `Date` value is formatted once per second, not once per response.
- Sends time out by `SO_SNDTIMEO`, not a Python socket timeout: the latter costs a `poll()`
  per recv and send, each a GIL hand-off.
"""

from __future__ import annotations

import json
import math
import re
import socket
import struct
import time
from collections.abc import Mapping
from email.utils import formatdate
from http import HTTPStatus
from typing import Any, NamedTuple

MAX_REQUEST_BYTES = 64 * 1024
DIGITS = re.compile(r"[0-9]+")
_VERSION = re.compile(r"HTTP/([0-9])\.([0-9])")
_FIELD_NAME = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
MAX_HEAD_BYTES = 16 * 1024
_MAX_FIELDS = 100
_JSON = json.JSONEncoder(ensure_ascii=False)  # one encoder for every answer, not one each
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_CANNED_HEAD = (
    b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n"
)


HEAD_TOO_LARGE = f"the request head is over {MAX_HEAD_BYTES // 1024} KiB"

# An error body's `details` when the error has no reason of its own: Firecrawl's SDKs print
# `<error> - <details>`, and say "No additional error details provided." when it is absent.
_DETAILS = {
    400: "the request or one of its fields is not valid",
    401: "send Authorization: Bearer <token>, a caller token from the gateway's secret.env",
    403: "the request was refused",
    404: "this gateway serves /v1/search, /v2/search, /v1/fetch, /v2/scrape, /healthz, /metrics",
    405: "see the Allow header for the methods this path takes",
    408: "the request ran past its deadline",
    413: f"request bodies are capped at {MAX_REQUEST_BYTES // 1024} KiB",
    415: "send the body as JSON, declared Content-Type: application/json",
    422: "no source could answer: none is enabled, or every one failed (see warnings)",
    431: f"request heads are capped at {MAX_HEAD_BYTES // 1024} KiB",
    500: "the gateway could not complete the request",
    503: "the gateway is at its bound of concurrent work; retry in a moment",
    505: "the gateway speaks HTTP/1.0 and HTTP/1.1",
}


def details_for(status: int) -> str:
    """Return the `details` of an error body whose error gives no reason of its own."""
    return _DETAILS.get(status, HTTPStatus(status).phrase)


class BadHead(Exception):
    """The request head was malformed, too large or of the wrong version; answered `status`."""

    def __init__(self, status: HTTPStatus, details: str, *, error: str | None = None) -> None:
        super().__init__(details)
        self.status, self.details = status, details
        self.error = status.phrase.lower() if error is None else error


class RequestLine(NamedTuple):
    """A request line's method, target and version (`HTTP/1.1` as `(1, 1)`)."""

    method: str
    path: str
    version: str
    major_minor: tuple[int, int]


def parse_request_line(text: str) -> RequestLine | None:
    """Split a request line (without its line end); None for a blank one, BadHead if malformed."""
    words = text.split()
    if not words:
        return None  # a stray blank line (as the stdlib: close, answer nothing)
    version = _VERSION.fullmatch(words[2]) if len(words) == 3 else None
    if version is None:
        raise BadHead(HTTPStatus.BAD_REQUEST, "the request line is not METHOD PATH HTTP/1.1")
    path = words[1]
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    return RequestLine(words[0], path, words[2], (int(version[1]), int(version[2])))


def check_version(line: RequestLine) -> None:
    """Refuse HTTP/2 and later, which are not spoken here, once the path is known."""
    if line.major_minor >= (2, 0):
        raise BadHead(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, "speak HTTP/1.1")


def read_fields(rfile: Any, *, budget: int = MAX_HEAD_BYTES) -> dict[str, list[str]]:
    """Read header fields up to the blank line, by lowercased name, strictly (RFC 9112 §5).

    A field line is `name: value`; no space before the colon, no folded continuation line,
    no control byte in a value. A head that ends before its blank line is refused too, and so
    is one over `budget` bytes (what the request line left of `MAX_HEAD_BYTES`). A malformed
    field raises `BadHead`.
    """
    fields: dict[str, list[str]] = {}
    count = 0
    while True:
        line = rfile.readline(budget + 1)
        budget -= len(line)
        if budget < 0:
            raise BadHead(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, HEAD_TOO_LARGE)
        if line in (b"\r\n", b"\n"):
            return fields
        if not line.endswith(b"\n"):
            raise BadHead(HTTPStatus.BAD_REQUEST, "the request head ended before its blank line")
        count += 1
        if count > _MAX_FIELDS:
            raise BadHead(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "too many header fields")
        name, colon, value = line.partition(b":")
        value = value.strip(b" \t\r\n")
        if not colon or not _FIELD_NAME.fullmatch(name) or _CONTROL.search(value):
            raise BadHead(HTTPStatus.BAD_REQUEST, "a header field is malformed")
        fields.setdefault(name.decode("ascii").lower(), []).append(value.decode("latin-1"))


def check_fields(fields: Mapping[str, list[str]], major_minor: tuple[int, int]) -> None:
    """Refuse a head without its one `Host` (HTTP/1.1) or with a repeated `Authorization`."""
    hosts = fields.get("host")
    if (hosts is None and major_minor >= (1, 1)) or (hosts is not None and len(hosts) > 1):
        raise BadHead(HTTPStatus.BAD_REQUEST, "exactly one Host field is required")
    if len(fields.get("authorization", ())) > 1:
        raise BadHead(HTTPStatus.BAD_REQUEST, "at most one Authorization field is allowed")


def body_length(fields: Mapping[str, list[str]]) -> int:
    """Return the declared body length: one `Content-Length` of digits, at most 64 KiB."""
    if "transfer-encoding" in fields:
        raise BadHead(HTTPStatus.BAD_REQUEST, "send the body with a Content-Length")
    declared = fields.get("content-length", [])
    if len(declared) != 1 or not DIGITS.fullmatch(declared[0].strip()):
        raise BadHead(HTTPStatus.BAD_REQUEST, "exactly one valid Content-Length is required")
    text = declared[0].strip().lstrip("0") or "0"
    if len(text) > 9 or int(text) > MAX_REQUEST_BYTES:
        raise BadHead(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            "the limit is 64 KiB",
            error="request body too large",
        )
    return int(text)


def declares_json(fields: Mapping[str, list[str]]) -> bool:
    """Say whether the body is declared `Content-Type: application/json` (parameters allowed)."""
    media_type = (fields.get("content-type") or [""])[0].partition(";")[0]
    return media_type.strip().lower() == "application/json"


def body_expected(method: str, fields: Mapping[str, list[str]]) -> bool:
    """Say whether a request may carry a body (so an unread one must close the connection)."""
    declared = [value.strip() for value in fields.get("content-length", ["0"])]
    return declared != ["0"] or "transfer-encoding" in fields or method == "POST"


def connection_closes(fields: Mapping[str, list[str]], major_minor: tuple[int, int]) -> bool:
    """Say whether the connection ends after this request (HTTP/1.0 unless it asks otherwise)."""
    values = fields.get("connection")
    if values is None:
        return major_minor < (1, 1)
    tokens = {token.strip().lower() for value in values for token in value.split(",")}
    return "close" in tokens or (major_minor < (1, 1) and "keep-alive" not in tokens)


_date_cache: tuple[float, str] = (math.nan, "")  # NaN equals no second: the first call formats


def http_date(timestamp: float | None = None) -> str:
    """Return the `Date` header value, formatted once per second."""
    global _date_cache
    second = int(time.time() if timestamp is None else timestamp)
    if _date_cache[0] != second:
        _date_cache = (second, formatdate(second, usegmt=True))
    return _date_cache[1]


def encode_json(
    status: HTTPStatus,
    payload: object,
    headers: Mapping[str, str],
    *,
    server: str,
    close: bool,
    head_only: bool = False,
) -> bytes:
    """Return a whole response, head and JSON body, to leave in one write."""
    return encode_response(
        status,
        json_body(payload),
        "application/json",
        headers,
        server=server,
        close=close,
        head_only=head_only,
    )


def canned_answer(status: HTTPStatus, payload: object) -> bytes:
    """Return a whole closing JSON answer with the fewest fields, built once and sent as is."""
    body = json_body(payload)
    return _CANNED_HEAD % (status, status.phrase.encode(), len(body)) + body


def json_body(payload: object) -> bytes:
    """Return the JSON body of an answer, newline-terminated."""
    return json_text(payload) + b"\n"


def json_text(value: object) -> bytes:
    """Return a value as the JSON the answers embed it as (UTF-8, no newline)."""
    return _JSON.encode(value).encode()


def encode_response(
    status: HTTPStatus,
    body: bytes,
    content_type: str,
    headers: Mapping[str, str],
    *,
    server: str,
    close: bool,
    head_only: bool = False,
) -> bytes:
    """Return a whole response, head and body, to leave in one write."""
    lines = [
        f"HTTP/1.1 {status.value} {status.phrase}",
        f"Server: {server}",
        f"Date: {http_date()}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Cache-Control: no-store",
        *(f"{name}: {value}" for name, value in headers.items()),
        *(["Connection: close"] if close else []),
    ]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + body


def set_send_timeout(sock: socket.socket, seconds: float) -> None:
    """Make a send fail after `seconds` without the client reading (`SO_SNDTIMEO`)."""
    timeval = struct.pack("ll", int(seconds), int(seconds % 1 * 1_000_000))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
