"""Reading one web page's bytes, safely: the guarded GET under every fetch.

    reader = PageReader(config.fetch, guard=Guard(config.fetch.allow))
    page = reader.read("https://example.org/post", timeout=10.0)   # a Page, not converted
    reader.close()

`Fetcher.fetch` (`siftlib.fetch.fetcher`) = `PageReader.read` (the network, this module) +
`siftlib.fetch.conversion` (the page).

One fetch, under **one wall-clock deadline** (`min(request timeout, fetch.timeout)`):
- each hop is vetted by `siftlib.fetch.guard` (scheme, names, every resolved address public, or an
  `allow` pinhole) and dialled through `siftlib.net.dial.pinned_transport` to exactly the vetted
  addresses, with SNI and certificate verification for the URL's host (system roots, no
  override). Redirects (301, 302, 303, 307, 308) are followed here, at most `max_redirects`,
  each hop re-vetted and re-pinned; a redirect past that is refused before it is sent;
- every socket wait (connect, TLS, each read and write) ends by the deadline
  (`wallclock.wall_clock`), so a server that drips a byte a second is cut at the deadline;
- only GET, with our `User-Agent`, `Accept` and `Accept-Encoding: gzip, deflate`; no cookies,
  no credentials, no caller headers, no proxy from the environment;
- the head decides: a content type fetch does not read is refused (`UnsupportedContent`)
  before one byte of the body is read; a missing one is sniffed from the first bytes, and a
  binary body refused there (`_sniff`);
- the body is streamed and decoded here (not by httpx), `decompress(max_length=…)`, so the
  `max_bytes` cap applies to the decoded bytes: a decompression bomb stops at the cap, with
  at most one 64 KiB chunk of slack in memory. Past the cap: truncated, with a warning;
- at most `per_host` fetches to one host run at once; the others wait, within the deadline.

Connections: one pinned transport per (origin, vetted addresses), kept alive and reused by
later fetches to the same place (at most 32 kept, least recently used dropped first). A new
answer from DNS gives a new transport, so nothing is ever sent to an address not vetted.

Decisions the spec leaves open: a 304 or 1xx is not followed; a redirect without a usable
`Location` is returned as the page it is; of a `Content-Type` sent twice, the last counts;
the deadline covers a name lookup too (on a small thread pool); errors are
`FetchFailed(kind)` with kind `dns`, `connect`, `tls`, `deadline`, `reset` (the connection
broke), `cut` (the body ended early), `protocol` (not HTTP) or `encoding` (a body we cannot
decode).
"""

from __future__ import annotations

import re
import ssl
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import httpx

from siftlib.errors import Blocked, Cancelled, FetchFailed, UnsupportedContent
from siftlib.fetch.guard import Guard, Hop
from siftlib.fetch.models import PDF_TYPE, Page
from siftlib.net.deadline import CANCEL_POLL
from siftlib.net.dial import Connector, pinned_transport
from siftlib.net.wallclock import current_cancel, wall_clock

if TYPE_CHECKING:
    from siftlib.config import FetchConfig

__all__ = ["ACCEPTED_TYPES", "HostSlots", "PageReader"]

# A `.pdf` URL answered with one of these is read as a PDF when its body starts like one.
_GENERIC_TYPES = frozenset(
    ("application/octet-stream", "binary/octet-stream", "application/download")
)
ACCEPTED_TYPES = frozenset(
    (
        *("text/html", "application/xhtml+xml", "text/plain", "text/markdown"),
        *("application/json", PDF_TYPE, "application/x-pdf"),
    )
)
_REDIRECTS = frozenset((301, 302, 303, 307, 308))
_ACCEPT = (
    "text/html,application/xhtml+xml,text/markdown;q=0.9,text/plain;q=0.9,"
    "application/json;q=0.8,*/*;q=0.1"
)
_KEPT_TRANSPORTS = 32
# WHATWG MIME Sniffing: the two signatures of a binary type that can start with text only,
# and the "binary data bytes" no text has (not ESC: ISO-2022-JP text switches sets with it).
_TEXT_LIKE_SIGNATURES = {b"%!PS-Adobe-": "application/postscript"}
_BINARY_BYTE = re.compile(rb"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")


class HostSlots:
    """At most `per_host` holders per host at once; the others wait, until a deadline."""

    def __init__(self, per_host: int) -> None:
        self.per_host = per_host
        self._active: dict[str, int] = {}
        self._cond = threading.Condition()

    def acquire(self, host: str, deadline: float, cancel: threading.Event | None = None) -> bool:
        """Take a slot for `host`; False when none freed up before `deadline` (monotonic).

        Raise `Cancelled` when `cancel` is set while waiting.
        """
        with self._cond:
            while self._active.get(host, 0) >= self.per_host:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                if cancel is not None:
                    if cancel.is_set():
                        raise Cancelled("cancelled")
                    left = min(left, CANCEL_POLL)
                self._cond.wait(left)
            self._active[host] = self._active.get(host, 0) + 1
            return True

    def release(self, host: str) -> None:
        """Give a slot back."""
        with self._cond:
            count = self._active.pop(host) - 1
            if count:
                self._active[host] = count
            self._cond.notify_all()


class PageReader:
    """Guarded GETs over pooled pinned connections, redirects followed; thread-safe."""

    def __init__(
        self,
        settings: FetchConfig,
        *,
        guard: Guard,
        connect: Connector | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.settings = settings
        self.guard = guard
        self._slots = HostSlots(settings.per_host)
        self._connect = connect
        self._ssl_context = ssl_context
        self._transports: OrderedDict[tuple[object, ...], httpx.HTTPTransport] = OrderedDict()
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close every kept connection."""
        with self._lock:
            transports = list(self._transports.values())
            self._transports.clear()
        for transport in transports:
            transport.close()

    def time_limit(self, asked: float | None) -> float:
        """Return a fetch's time limit: the request's, capped by `fetch.timeout`."""
        return self.settings.timeout if asked is None else min(asked, self.settings.timeout)

    def read(
        self,
        url: str,
        *,
        timeout: float | None = None,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
        caller: str = "local",
    ) -> Page:
        """Fetch a page's body through the guard, following redirects; no conversion.

        It ends by `deadline` (monotonic), else `timeout` from now (capped by the config).
        """
        started = time.monotonic()
        if deadline is None:
            deadline = started + self.time_limit(timeout)
        previous: httpx.URL | None = None
        current = url
        with wall_clock(deadline, cancel=cancel):
            for hops in range(self.settings.max_redirects + 1):
                hop = self.guard.vet(
                    current, timeout=deadline - time.monotonic(), previous=previous, caller=caller
                )
                outcome = self._exchange(hop, deadline, started)
                if isinstance(outcome, Page):
                    outcome.url = url
                    return outcome
                if hops == self.settings.max_redirects:
                    break
                previous, current = hop.url, outcome
        raise Blocked("redirects", f"blocked: more than {self.settings.max_redirects} redirects")

    def _exchange(self, hop: Hop, deadline: float, started: float) -> Page | str:
        """Send one hop; return its page, or the absolute URL it redirects to."""
        if not self._slots.acquire(hop.host, deadline, current_cancel()):
            raise FetchFailed("deadline", "fetch failed: deadline (waiting for a per-host slot)")
        try:
            return self._send(hop, deadline, started)
        finally:
            self._slots.release(hop.host)

    def _send(self, hop: Hop, deadline: float, started: float) -> Page | str:
        left = max(deadline - time.monotonic(), 0.001)
        request = httpx.Request(
            "GET",
            hop.url,
            headers={
                "User-Agent": self.settings.user_agent,
                "Accept": _ACCEPT,
                "Accept-Encoding": "gzip, deflate",
            },
            extensions={"timeout": {"connect": left, "read": left, "write": left, "pool": left}},
        )
        with _failures():
            response = self._transport(hop).handle_request(request)
        try:
            location = response.headers.get("location", "").strip()
            if response.status_code in _REDIRECTS and location:
                try:
                    return str(hop.url.join(location))
                except httpx.InvalidURL:
                    pass  # no usable target: the redirect page is the answer
            # Sent twice, a header comes joined ("text/html, text/html; charset=utf-8"): the
            # last one is the type, as for a browser (WHATWG Fetch, "extract a MIME type").
            content_type = (response.headers.get_list("content-type") or [""])[-1].strip()
            media_type = content_type.split(";", 1)[0].strip().lower()
            generic_pdf = media_type in _GENERIC_TYPES and hop.url.path.lower().endswith(".pdf")
            if media_type and media_type not in ACCEPTED_TYPES and not generic_pdf:
                raise UnsupportedContent(media_type)
            body, truncated = self._body(response, "" if generic_pdf else media_type)
            if generic_pdf:
                if not body.startswith(b"%PDF-"):
                    raise UnsupportedContent(media_type)
                media_type = PDF_TYPE
            media_type = PDF_TYPE if media_type == "application/x-pdf" else media_type
            media_type = media_type or _sniff(body)
            warnings = []
            if truncated:
                cap = self.settings.max_bytes
                warnings.append(f"truncated: the page passed max_bytes ({cap} bytes)")
            return Page(
                url=str(hop.url),
                final_url=str(hop.url),
                status=response.status_code,
                content_type=content_type or media_type,
                media_type=media_type,
                body=body,
                truncated=truncated,
                warnings=warnings,
                fetch_ms=round((time.monotonic() - started) * 1000),
                headers=dict(response.headers.items()),
            )
        finally:
            response.close()

    def _body(self, response: httpx.Response, media_type: str) -> tuple[bytes, bool]:
        """Read the decoded body up to `max_bytes`; True when it was cut there."""
        cap = self.settings.max_bytes
        decoder = _decoder(response.headers.get("content-encoding", ""))
        parts: list[bytes] = []
        size = 0
        with _failures(reading=True):
            for chunk in _raw(response):
                data = decoder(chunk, cap - size + 1)
                if not media_type and not size and data:
                    _sniff(data)  # a binary body is refused before more of it is read
                parts.append(data)
                size += len(data)
                if size > cap:
                    return b"".join(parts)[:cap], True
        return b"".join(parts), False

    def _transport(self, hop: Hop) -> httpx.HTTPTransport:
        key = (hop.url.scheme, hop.url.raw_host, hop.url.port, hop.addresses)
        with self._lock:
            transport = self._transports.get(key)
            if transport is not None:
                self._transports.move_to_end(key)
                return transport
            transport = pinned_transport(
                hop.url, hop.addresses, ssl_context=self._ssl_context, connect=self._connect
            )
            self._transports[key] = transport
            dropped = (
                self._transports.popitem(last=False)[1]
                if len(self._transports) > _KEPT_TRANSPORTS
                else None
            )
        if dropped is not None:
            dropped.close()
        return transport


def _raw(response: httpx.Response) -> Iterator[bytes]:
    """Yield the body as it arrives on the wire (still compressed)."""
    stream = response.stream
    assert isinstance(stream, httpx.SyncByteStream)
    yield from stream


Decoder = Callable[[bytes, int], bytes]


def _decoder(encoding: str) -> Decoder:
    """Return a bounded decoder for a `Content-Encoding` (`gzip`, `deflate` or none)."""
    coding = encoding.strip().lower()
    if coding in ("", "identity"):
        return lambda data, room: data
    if coding in ("gzip", "x-gzip"):
        return _Inflate(zlib.MAX_WBITS | 16)
    if coding == "deflate":
        return _Inflate(None)
    raise FetchFailed("encoding", f"fetch failed: encoding ({coding} is not supported)")


class _Inflate:
    """Inflate a stream, never producing more than the room left under the byte cap."""

    def __init__(self, wbits: int | None) -> None:
        self._wbits = wbits
        self._inflater: zlib._Decompress | None = None

    def __call__(self, data: bytes, room: int) -> bytes:
        if self._inflater is None:
            wbits = self._wbits
            if wbits is None:  # "deflate" is zlib-wrapped by the RFC, raw by some servers
                wbits = zlib.MAX_WBITS if len(data) > 1 and _zlib_header(data) else -zlib.MAX_WBITS
            self._inflater = zlib.decompressobj(wbits)
        try:
            return self._inflater.decompress(data, max(room, 1))
        except zlib.error:
            raise FetchFailed("encoding", "fetch failed: encoding (a corrupt body)") from None


def _zlib_header(data: bytes) -> bool:
    return data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0


def _sniff(head: bytes) -> str:
    """Guess the media type of a body sent without one from its first bytes; refuse binary."""
    if head.startswith(b"%PDF-"):
        return PDF_TYPE
    for signature, media_type in _TEXT_LIKE_SIGNATURES.items():
        if head.startswith(signature):
            raise UnsupportedContent(media_type)
    start = head[:1024].lstrip().lower()
    if start.startswith((b"<!doctype html", b"<html", b"<head", b"<body", b"<!--")):
        return "text/html"
    if _BINARY_BYTE.search(start):
        raise UnsupportedContent("application/octet-stream")
    return "text/plain"


@contextmanager
def _failures(*, reading: bool = False) -> Iterator[None]:
    """Translate httpx's transport errors into `FetchFailed` kinds, at this one boundary."""
    try:
        yield
    except httpx.TimeoutException:
        raise FetchFailed("deadline", "fetch failed: deadline") from None
    except httpx.ConnectError as exc:
        raise FetchFailed("tls" if _caused_by(exc, ssl.SSLError) else "connect") from None
    except httpx.RemoteProtocolError:
        raise FetchFailed("cut" if reading else "protocol") from None
    except httpx.TransportError:
        raise FetchFailed("reset") from None


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """Tell whether `kind` is anywhere in an exception's chain of causes."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
