"""The fetch guard: which URL, name and address a fetch may reach (fetch.md §3).

    guard = Guard(allow=["127.0.0.1:8080"])
    hop = guard.vet("https://example.org/a", timeout=5.0)   # or raises Blocked / FetchFailed
    transport = pinned_transport(hop.url, hop.addresses)   # siftlib.net.dial: dials only those

Every hop of every fetch goes through `vet` before a byte is sent to it, in this order:
1. the URL: at most 8 KiB, `http` or `https`, a host, no userinfo, a valid port that is not
   one of the WHATWG Fetch "bad ports" (SMTP, IRC, … — a browser refuses them too; spec
   silent), and on a redirect no `https` → `http` downgrade;
2. an `allow` pinhole (exact `host:port`, the host as written or as the same IP literal)
   skips 3–4 for that host and port only; its name is still resolved and pinned, and a
   cloud metadata address is refused through a pinhole too (as the dialer does for every
   source);
3. names: `localhost`, `*.localhost`, `*.local`, `*.internal`, `*.home.arpa` and single-label
   names are refused before any lookup. A numeric host in one of the forms `inet_aton`
   accepts (`127.1`, `0x7f000001`, `2130706433`, `0177.0.0.1`) is that IPv4 address, as a
   browser's URL parser reads it: the URL is rewritten to the dotted quad and checked as one;
4. addresses: `getaddrinfo`, and **every** answer must be public by `siftlib.net.dial`'s one
   table (`address_kind`), else the hop is refused. An IP literal is refused naming its
   kind; a name only as `not a public address`, never what it resolves to (that would map
   an internal DNS for any caller); either names the `[fetch] allow` pinhole to add when it
   is this machine (loopback).
Each lookup runs on a thread of its own so it too ends by the fetch's deadline; one caller
has at most `LOOKUPS_PER_CALLER` in flight (a name whose DNS never answers holds its
thread until the resolver gives up, ~20 s), so unanswered lookups hold only their caller.

A refusal is a `Blocked(rule, sentence)`: `rule` is a short label for `/metrics`
(`scheme`, `userinfo`, `host`, `url-length`, `port`, `downgrade`, `name`, or the address
kind such as `loopback`), the sentence names what was refused and why
(`blocked: 127.0.0.1 is a loopback address`), a loopback one with the pinhole that opens
it. A name that does not resolve is a
`FetchFailed("dns")`, an unparsable URL an `InvalidURL` (`invalid url: …`).
"""

from __future__ import annotations

import ipaddress
import re
import socket
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

import httpx

from siftlib.errors import Blocked, FetchFailed, InvalidURL
from siftlib.net.addresses import Resolver, address_kind, describe_kind, resolve
from siftlib.net.pinholes import Pinhole, ip_literal, parse_pinhole

__all__ = ["Guard", "Hop", "Pinhole", "parse_pinhole"]

MAX_URL_BYTES = 8 * 1024
LOOKUPS_PER_CALLER = 4
_DEFAULT_PORTS = {"http": 80, "https": 443}
_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa")
# A host `inet_aton` reads as an IPv4 address: one to four parts, decimal, octal or hex.
_NUMERIC_HOST = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+)){0,3}\.?", re.I)
# The WHATWG Fetch standard's "bad ports": services a browser never lets a page talk to.
BAD_PORTS = frozenset(
    (1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95)
    + (101, 102, 103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161)
    + (179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563)
    + (587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060)
    + (5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080)
)


@dataclass(frozen=True)
class Hop:
    """A URL that passed the guard, and the only addresses it may be dialled on."""

    url: httpx.URL
    addresses: tuple[str, ...]
    host: str
    pinhole: bool = False


class Guard:
    """The rules of fetch.md §3, with the configured pinholes; one per fetcher."""

    def __init__(self, allow: Iterable[str] = (), *, resolver: Resolver | None = None) -> None:
        self.pinholes = tuple(parse_pinhole(entry) for entry in allow)
        self._resolver = resolver or resolve
        self._in_flight: dict[str, int] = {}  # lookups running, by caller
        self._lookups = threading.Condition()

    def vet(
        self,
        url: str,
        *,
        timeout: float,
        previous: httpx.URL | None = None,
        caller: str = "local",
    ) -> Hop:
        """Check one hop and resolve it; return what may be dialled, or raise `Blocked`."""
        parts = _split(url)
        scheme = parts.scheme.lower()
        if previous is not None and previous.scheme == "https" and scheme == "http":
            raise Blocked("downgrade", "blocked: a redirect from https to http")
        host = (parts.hostname or "").rstrip(".")
        port = _port(parts, scheme)
        numeric = _NUMERIC_HOST.fullmatch(host) is not None and ip_literal(host) is None
        if numeric:
            try:
                host = socket.inet_ntoa(socket.inet_aton(host))
            except OSError:
                raise InvalidURL(f"invalid url: {host!r} is not an IPv4 address") from None
        target = _rebuild(parts, scheme, host, port)
        literal = ip_literal(host)
        if literal is None:  # the name as it is looked up: IDNA-encoded by httpx
            host = target.raw_host.decode("ascii").lower().rstrip(".")
        pinhole = any(p.matches(host, port) for p in self.pinholes)
        if literal is not None:
            if pinhole:
                _check_metadata(literal, host)
            else:
                _check_address(literal, host, port)
            return Hop(target, (str(literal),), host, pinhole)
        if not pinhole:
            _check_name(host)
        addresses = self._resolve(host, port, timeout, caller)
        for ip in addresses:
            address = ip_literal(ip)
            if pinhole:
                _check_metadata(address, host)
            else:
                _check_address(address, host, port, name=True)
        return Hop(target, tuple(addresses), host, pinhole)

    def _resolve(self, host: str, port: int, timeout: float, caller: str) -> list[str]:
        """Look a name up on a thread of its own, at most `LOOKUPS_PER_CALLER` per caller."""
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._lookups:
            while self._in_flight.get(caller, 0) >= LOOKUPS_PER_CALLER:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise FetchFailed("deadline", "fetch failed: deadline (name lookup)")
                self._lookups.wait(left)
            self._in_flight[caller] = self._in_flight.get(caller, 0) + 1
        answer: Future[list[str]] = Future()
        threading.Thread(
            target=self._lookup, args=(host, port, caller, answer), name="sift-dns", daemon=True
        ).start()
        try:
            addresses = answer.result(timeout=max(deadline - time.monotonic(), 0.0))
        except FutureTimeout:
            raise FetchFailed("deadline", "fetch failed: deadline (name lookup)") from None
        except (OSError, UnicodeError):
            raise FetchFailed("dns", f"fetch failed: dns ({host} does not resolve)") from None
        if not addresses:
            raise FetchFailed("dns", f"fetch failed: dns ({host} does not resolve)")
        return addresses

    def _lookup(self, host: str, port: int, caller: str, answer: Future[list[str]]) -> None:
        try:
            answer.set_result(self._resolver(host, port))
        except BaseException as exc:
            answer.set_exception(exc)
        finally:
            with self._lookups:
                left = self._in_flight.pop(caller) - 1
                if left:
                    self._in_flight[caller] = left
                self._lookups.notify_all()


def _split(url: str) -> SplitResult:
    """Check rule 1 on the URL text; return its parts."""
    if len(url.encode("utf-8", "surrogatepass")) > MAX_URL_BYTES:
        raise Blocked("url-length", "blocked: the URL is longer than 8 KiB")
    if any(ch in url for ch in "\r\n\t\0") or not url.strip():
        raise InvalidURL("invalid url: it is empty or holds control characters")
    try:
        parts = urlsplit(url.strip())
    except ValueError as exc:
        raise InvalidURL(f"invalid url: {exc}") from None
    scheme = parts.scheme.lower()
    if not scheme or (scheme in _DEFAULT_PORTS and not parts.netloc and "//" not in url):
        raise InvalidURL("invalid url: an absolute http:// or https:// URL is required")
    if scheme not in _DEFAULT_PORTS:
        raise Blocked("scheme", f"blocked: the {scheme}: scheme is not allowed (http or https)")
    if "@" in parts.netloc:
        raise Blocked("userinfo", "blocked: the URL carries a user name or password")
    if not parts.hostname:
        raise Blocked("host", "blocked: the URL has no host")
    return parts


def _port(parts: SplitResult, scheme: str) -> int:
    try:
        port = parts.port
    except ValueError:
        raise InvalidURL("invalid url: the port is not a number from 1 to 65535") from None
    if port is None:
        return _DEFAULT_PORTS[scheme]
    if port == 0 or port in BAD_PORTS:
        raise Blocked("port", f"blocked: port {port} is not a web port")
    return port


def _rebuild(parts: SplitResult, scheme: str, host: str, port: int) -> httpx.URL:
    """Return the hop's URL for httpx: host as checked, default port dropped, no fragment."""
    shown = f"[{host}]" if ":" in host else host
    netloc = shown if port == _DEFAULT_PORTS[scheme] else f"{shown}:{port}"
    path = parts.path or "/"
    query = f"?{parts.query}" if parts.query else ""
    try:
        return httpx.URL(f"{scheme}://{netloc}{path}{query}")
    except httpx.InvalidURL as exc:
        raise InvalidURL(f"invalid url: {exc}") from None


def _check_name(host: str) -> None:
    if host == "localhost" or host.endswith(_LOCAL_SUFFIXES):
        raise Blocked("name", f"blocked: {host} is a local name")
    if "." not in host:
        raise Blocked("name", f"blocked: {host} is a single-label name")


def _check_address(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None,
    host: str,
    port: int,
    *,
    name: bool = False,
) -> None:
    """Refuse an address that is not public: a name's without saying what it resolved to."""
    kind = "reserved" if ip is None else address_kind(ip)
    if kind is None:
        return
    hint = ""
    if kind == "loopback":
        shown = f"[{host}]" if ":" in host else host
        hint = f' (to read it on this machine, add "{shown}:{port}" to [fetch] allow)'
    if not name:
        raise Blocked(kind, f"blocked: {host} is {describe_kind(kind)}{hint}")
    raise Blocked(kind, f"blocked: {host} is not a public address{hint}")


def _check_metadata(ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None, host: str) -> None:
    """Refuse a cloud metadata address even through a pinhole, as the dialer does everywhere."""
    if ip is not None and address_kind(ip) == "metadata":
        raise Blocked("metadata", f"blocked: {host} is a cloud metadata address")
