"""Pinned upstream connections: the SSRF boundary of every source.

Each source gets one `Upstream`, built at start from its config URL only:

    upstream = open_upstream("https://api.tavily.com/search", public=True, timeout=8.0)
    if upstream.problem is None:
        response = upstream.client.post("https://api.tavily.com/search", json=body)

Mechanism. `upstream.client` is an ordinary `httpx.Client`; its transport is an
`httpx.HTTPTransport` whose httpcore connection pool is built around our own
`httpcore.NetworkBackend`. httpcore hands that backend the host and port of the request URL
in `connect_tcp`; the backend refuses any other host or port than the configured ones, and
otherwise opens a TCP socket only to the IP addresses this module resolved and checked
itself, on that port. httpcore never resolves a name, so a DNS answer that changes after our
check (rebinding) cannot reach a socket. httpcore then layers TLS over that socket with the
request's host as SNI and for hostname verification: the certificate is checked against the
configured name, never the IP. Above the pool, the transport refuses any request whose
scheme, host or port differs from the configured ones, and every request while the latest
resolution is refused, so a pooled keep-alive connection is not reused after a rebinding.
(After a refresh to other acceptable addresses, a kept-alive connection to an old, checked
address may finish its few seconds of keep-alive.) The transport touches one private
attribute, `HTTPTransport._pool`, and uses httpcore's `SyncStream`; the `httpx<0.29`
requirement pins both, and the tests exercise both.

Resolution happens at open and again once `refresh_interval` (10 minutes) has passed, checked
on every request and every `problem` read. An unacceptable answer or a failed lookup is
retried sooner, after at most 30 s, so one DNS hiccup at start does not silence a source for
ten minutes. The two are told apart: a lookup that fails or finds no address is `dns failed`
(`LookupFailed`), an answer the boundary does not accept is `upstream refused`
(`UpstreamRefused`); an operator fixes the first in DNS and must never "fix" the second.
An answer is acceptable when it holds no cloud metadata address and, for a source that must
be public (Brave, Tavily), when every record `is_public`. SearXNG (`public=False`) may
resolve to loopback or private addresses and is pinned all the same. `allow_private=True`
(the test-only `--allow-private-upstreams`) lets a public source use non-public addresses,
still pinned, and logs a loud warning at the first such open in the process (once, however
many sources and searchers use it). Nothing else relaxes the boundary: a caller-supplied
`ssl_context` must verify certificates and hostnames.

The client: `trust_env=False` (no proxy from the environment; with an explicit transport
httpx would ignore them anyway), a cookie jar whose policy accepts no cookie, and redirects
followed at most one hop, only within the configured scheme, host and port. A response hook
refuses any other redirect with `RedirectRefused`, an `httpx.TooManyRedirects`, because the
first request *was* sent (a daily cap must not be refunded); the transport's origin check
stands behind it. `UpstreamRefused` and `LookupFailed`, both `httpx.ConnectError`s, always
mean nothing was sent.
TLS verifies against the system roots: `ssl.create_default_context()`, i.e. OpenSSL's default
store, which the operator may point elsewhere with `SSL_CERT_FILE`/`SSL_CERT_DIR` (how the
system's roots are configured on some hosts); there is no switch to turn verification off.
Error texts and log lines never carry a host or URL.

Not public (`is_public` is False), one table below, each row tested:

    IPv4  0/8 this network, 10/8, 172.16/12, 192.168/16 private, 100.64/10 CGNAT,
          127/8 loopback, 169.254/16 link-local, 192.0.0/24 protocol assignments,
          192.0.2/24 198.51.100/24 203.0.113/24 documentation, 192.88.99/24 6to4 relay,
          198.18/15 benchmarking, 224/4 multicast, 240/4 reserved and broadcast
    IPv6  everything outside 2000::/3 (unspecified, loopback, IPv4-mapped and -compatible,
          ULA fc00::/7, link-local, site-local, multicast, discard 100::/64, 64:ff9b:1::/48)
          except NAT64 64:ff9b::/96 of a public IPv4; inside 2000::/3: 2001::/23 protocol
          assignments (Teredo 2001::/32 is public only if server and client IPv4 both are),
          2001:db8::/32 and 3fff::/20 documentation, 5f00::/16 SRv6, 2002::/16 6to4 of a
          non-public IPv4
    cloud metadata (refused for every source, even SearXNG and under allow_private):
          169.254.169.254 (AWS, GCP, Azure, OCI, DigitalOcean), 169.254.170.2 (ECS),
          169.254.0.23 (Tencent), 100.100.100.200 (Alibaba), 168.63.129.16 (Azure
          WireServer, inside a public range), 192.0.0.192 (OCI), fd00:ec2::254 (AWS IPv6)
"""

from __future__ import annotations

import contextvars
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from http.cookiejar import CookieJar, DefaultCookiePolicy
from types import TracebackType
from typing import Any, TypeVar

import httpcore
import httpx
from httpcore._backends.sync import SyncStream

from siftlib.errors import Cancelled
from siftlib.lazylog import LazyLogger

__all__ = [
    "LookupFailed",
    "RedirectRefused",
    "Upstream",
    "UpstreamRefused",
    "address_kind",
    "describe_kind",
    "is_public",
    "open_upstream",
    "resolve",
]

log = LazyLogger("sift")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]
Connector = Callable[[tuple[str, int], float | None], socket.socket]

_RETRY_REFUSED = 30.0
_DEFAULT_PORTS = {"http": 80, "https": 443}

_NOT_PUBLIC_V4 = tuple(
    (ipaddress.IPv4Network(net), kind)
    for net, kind in (
        ("0.0.0.0/8", "this-network"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "cgnat"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "reserved"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "reserved"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
    )
)
_GLOBAL_V6 = ipaddress.IPv6Network("2000::/3")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_R = TypeVar("_R")
_TEREDO = ipaddress.IPv6Network("2001::/32")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
# Outside 2000::/3 everything is refused; these rows only name why.
_NOT_GLOBAL_V6 = tuple(
    (ipaddress.IPv6Network(net), kind)
    for net, kind in (
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("fc00::/7", "unique-local"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local"),
        ("ff00::/8", "multicast"),
    )
)
_NOT_PUBLIC_V6 = tuple(
    (ipaddress.IPv6Network(net), kind)
    for net, kind in (
        ("2001:db8::/32", "documentation"),
        ("2001::/23", "reserved"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "reserved"),
    )
)
_METADATA = frozenset(
    ipaddress.ip_address(ip)
    for ip in (
        "169.254.169.254",
        "169.254.170.2",
        "169.254.0.23",
        "100.100.100.200",
        "168.63.129.16",
        "192.0.0.192",
        "fd00:ec2::254",
    )
)
_KIND_PHRASES = {
    "this-network": "a this-network (0.0.0.0/8) address",
    "cgnat": "a carrier-grade NAT (100.64.0.0/10) address",
    "metadata": "a cloud metadata address",
    "unspecified": "the unspecified address",
    "ipv4-mapped": "an IPv4-mapped address",
    "ipv4-compatible": "an IPv4-compatible address",
}


class UpstreamRefused(httpx.ConnectError):
    """The dialer refused to connect: the address or port is outside the pinned set."""


class LookupFailed(httpx.ConnectError):
    """The upstream's host name did not resolve to any address; nothing was sent."""


DNS_FAILED = "dns failed"
REFUSED = "upstream refused"


class RedirectRefused(httpx.TooManyRedirects):
    """The upstream redirected to another scheme, host or port; the redirect was not followed."""


def is_public(ip: str | IPAddress) -> bool:
    """Tell whether an address is a public unicast address a public source may resolve to."""
    return address_kind(ip) is None


def address_kind(ip: str | IPAddress) -> str | None:
    """Name the kind of a non-public address (`loopback`, `private`, …); None when public.

    An IPv6 address that embeds an IPv4 one (mapped, compatible, NAT64, 6to4, Teredo) is
    named by the embedded address when that is not public.
    """
    address = _unscoped(ipaddress.ip_address(ip) if isinstance(ip, str) else ip)
    if address in _METADATA:
        return "metadata"
    if isinstance(address, ipaddress.IPv4Address):
        return next((kind for net, kind in _NOT_PUBLIC_V4 if address in net), None)
    if address in _NAT64:
        return address_kind(ipaddress.IPv4Address(address.packed[-4:]))
    if address not in _GLOBAL_V6:
        for net, kind in _NOT_GLOBAL_V6:
            if address in net:
                return kind
        for net, kind in ((_MAPPED, "ipv4-mapped"), (_COMPATIBLE, "ipv4-compatible")):
            if address in net:
                return address_kind(ipaddress.IPv4Address(address.packed[-4:])) or kind
        return "reserved"
    if address in _TEREDO:
        server, client = address.teredo or (address, address)
        return address_kind(server) or address_kind(client)
    if address in _SIX_TO_FOUR:
        return address_kind(address.sixtofour) if address.sixtofour else "reserved"
    return next((kind for net, kind in _NOT_PUBLIC_V6 if address in net), None)


def describe_kind(kind: str) -> str:
    """Return an address kind as a noun phrase: `loopback` → "a loopback address"."""
    return _KIND_PHRASES.get(kind, f"a {kind} address")


def _unscoped(address: IPAddress) -> IPAddress:
    """Drop an IPv6 `%scope`, which would make every network comparison false."""
    if isinstance(address, ipaddress.IPv6Address):
        return ipaddress.IPv6Address(address.packed)
    return address


def _is_metadata(address: IPAddress) -> bool:
    """Tell whether an address reaches a cloud metadata service, also IPv4-mapped or NAT64."""
    address = _unscoped(address)
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        elif address in _NAT64:
            address = ipaddress.IPv4Address(address.packed[-4:])
    return address in _METADATA


def resolve(host: str, port: int) -> list[str]:
    """Resolve a host name to its TCP addresses, in the resolver's order, without repeats."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class _FixedPin:
    """An address set checked once by the caller (one hop of a fetch), never re-resolved."""

    def __init__(self, origin: tuple[str, str, int], addresses: tuple[str, ...]) -> None:
        self.origin = origin
        _, self.host, self.port = origin
        self._addresses = addresses

    def addresses(self) -> tuple[str, ...]:
        """Return the pinned addresses."""
        return self._addresses

    def refusal(self) -> httpx.ConnectError:
        """Return the error for a connection attempt while there is no acceptable address."""
        return UpstreamRefused("upstream refused: no acceptable address")


class _Pin(_FixedPin):
    """The resolved, checked address set of one host, refreshed on an interval."""

    def __init__(
        self,
        origin: tuple[str, str, int],
        *,
        public: bool,
        resolver: Resolver,
        clock: Callable[[], float],
        refresh_interval: float,
    ) -> None:
        super().__init__(origin, ())
        self._public = public
        self._resolver = resolver
        self._clock = clock
        self._refresh_interval = refresh_interval
        self._lock = threading.Lock()
        self.problem: str | None = None  # DNS_FAILED or REFUSED while there is no address
        self._resolved_at = 0.0
        self._resolve()

    def addresses(self) -> tuple[str, ...]:
        """Return the pinned addresses, re-resolving first if due; empty means refused."""
        with self._lock:
            due = self._refresh_interval
            if not self._addresses:
                due = min(due, _RETRY_REFUSED)
            if self._clock() - self._resolved_at >= due:
                self._resolve()
            return self._addresses

    def refusal(self) -> httpx.ConnectError:
        """Return the error for a connection attempt while there is no acceptable address."""
        if self.problem == DNS_FAILED:
            return LookupFailed("dns failed: the host name did not resolve")
        return UpstreamRefused("upstream refused: no acceptable address")

    def _resolve(self) -> None:
        self._resolved_at = self._clock()
        try:
            answer = self._resolver(self.host, self.port)
        except (OSError, UnicodeError):
            answer = []
        if not answer:
            self._addresses, self.problem = (), DNS_FAILED
            return
        try:
            parsed = [ipaddress.ip_address(ip) for ip in answer]
        except ValueError:
            parsed = []
        acceptable = bool(parsed) and not any(_is_metadata(ip) for ip in parsed)
        if self._public:
            acceptable = acceptable and all(is_public(ip) for ip in parsed)
        self._addresses = tuple(answer) if acceptable else ()
        self.problem = None if acceptable else REFUSED


class _PinnedBackend(httpcore.NetworkBackend):
    """An httpcore network backend that dials only the pinned addresses on the pinned port."""

    def __init__(self, pin: _FixedPin, connect: Connector) -> None:
        self._pin = pin
        self._connect = connect

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        if host.lower() != self._pin.host or port != self._pin.port:
            raise UpstreamRefused("upstream refused: host or port outside the pinned set")
        addresses = self._pin.addresses()
        if not addresses:
            raise self._pin.refusal()
        error: OSError = OSError("no address")
        for ip in addresses:
            try:
                sock = self._connect((ip, port), timeout)
            except OSError as exc:
                error = exc
                continue
            for option in socket_options or ():
                sock.setsockopt(*option)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return _DeadlineStream(sock)
        if isinstance(error, TimeoutError):
            raise httpcore.ConnectTimeout(str(error)) from error
        raise httpcore.ConnectError(str(error)) from error


_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("deadline", default=None)


_CANCEL: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "cancel", default=None
)
# How often a socket wait with a cancel event looks at it (a wait without one never wakes).
CANCEL_POLL = 0.05


@contextmanager
def wall_clock(deadline: float | None, *, cancel: threading.Event | None = None) -> Iterator[None]:
    """Cap every socket wait of the pinned streams used inside by `deadline` (monotonic).

    With `cancel`, a wait also ends soon after the event is set, raising `Cancelled`: the
    request in flight is dropped with its connection, whatever it was waiting for.
    """
    token = _DEADLINE.set(deadline)
    cancel_token = _CANCEL.set(cancel)
    try:
        yield
    finally:
        _CANCEL.reset(cancel_token)
        _DEADLINE.reset(token)


def current_cancel() -> threading.Event | None:
    """Return the cancel event of the innermost `wall_clock`, if it has one."""
    return _CANCEL.get()


def _remaining(timeout: float | None) -> float | None:
    """Return `timeout` cut to what is left of the current wall-clock deadline, if any."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the wall-clock deadline passed")
    return left if timeout is None else min(timeout, left)


def _cancellable(
    wait: Callable[[float | None], _R], timeout: float | None, cancel: threading.Event
) -> _R:
    """Run a socket wait in slices of `CANCEL_POLL`, raising `Cancelled` once `cancel` is set.

    A slice that times out consumed nothing, so the wait is simply made again.
    """
    due = None if timeout is None else time.monotonic() + timeout
    while True:
        if cancel.is_set():
            raise Cancelled("cancelled")
        left = _remaining(None if due is None else max(due - time.monotonic(), 0.0))
        if left is not None and left <= CANCEL_POLL:
            return wait(left)
        try:
            return wait(CANCEL_POLL)
        except httpcore.ReadTimeout:
            continue


class _DeadlineStream(SyncStream):
    """A socket stream whose every wait ends by the wall-clock deadline set by `wall_clock`.

    httpx's timeouts are per operation: a server dripping a byte a second never trips them.
    """

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        cancel = _CANCEL.get()
        if cancel is None:
            return super().read(max_bytes, _remaining(timeout))
        return _cancellable(
            lambda left: super(_DeadlineStream, self).read(max_bytes, left), timeout, cancel
        )

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        cancel = _CANCEL.get()
        if cancel is None:
            super().write(buffer, _remaining(timeout))
        elif cancel.is_set():
            raise Cancelled("cancelled")
        else:  # a write that blocks is a send buffer full: bounded by the deadline
            super().write(buffer, _remaining(timeout))

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        stream = super().start_tls(ssl_context, server_hostname, _remaining(timeout))
        return _DeadlineStream(stream.get_extra_info("socket"))


class _PinnedTransport(httpx.HTTPTransport):
    """An httpx transport for one origin whose connection pool dials through `_PinnedBackend`."""

    def __init__(
        self, pin: _FixedPin, *, ssl_context: ssl.SSLContext | None, connect: Connector
    ) -> None:
        # HTTPTransport's only state is its pool; we build that pool ourselves so that it
        # gets our network backend (HTTPTransport has no parameter for one).
        self._pin = pin
        limits = httpx.Limits()
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_PinnedBackend(pin, connect),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if _origin(request.url) != self._pin.origin:
            raise UpstreamRefused(
                "upstream refused: scheme, host or port outside the pinned set", request=request
            )
        if not self._pin.addresses():
            error = self._pin.refusal()
            error.request = request
            raise error
        return super().handle_request(request)


def _origin(url: httpx.URL) -> tuple[str, str, int]:
    port = url.port or _DEFAULT_PORTS.get(url.scheme, 0)
    return url.scheme, url.raw_host.decode("ascii").lower(), port


def _redirect_check(origin: tuple[str, str, int]) -> Callable[[httpx.Response], None]:
    """Build a response hook that lets a redirect through only within `origin`."""

    def check(response: httpx.Response) -> None:
        if not response.has_redirect_location:
            return
        # The target as httpx computes it (`Client._redirect_url`): a host-less absolute URL
        # gets the request's host, a relative one is joined.
        request_url = response.request.url
        try:
            target = httpx.URL(response.headers["Location"])
            if target.scheme and not target.host:
                target = target.copy_with(host=request_url.host)
            target = request_url.join(target)
        except httpx.InvalidURL:
            target = None
        if target is None or _origin(target) != origin:
            raise RedirectRefused(
                "redirect outside the configured origin refused", request=response.request
            )

    return check


class _NoCookies(DefaultCookiePolicy):
    """A cookie policy that accepts no cookie, so nothing persists between requests."""

    def set_ok(self, cookie: Any, request: Any) -> bool:
        return False

    def return_ok(self, cookie: Any, request: Any) -> bool:
        return False


class Upstream:
    """One source's pinned HTTP client, built from its config URL only."""

    client: httpx.Client

    def __init__(self, client: httpx.Client, pin: _Pin) -> None:
        self.client = client
        self._pin = pin

    @property
    def problem(self) -> str | None:
        """`dns failed` or `upstream refused` while the source cannot be dialled, else None.

        Each look re-resolves the host when its pin is due, as a connection would.
        """
        return None if self._pin.addresses() else self._pin.problem

    def close(self) -> None:
        """Close the pooled connections."""
        self.client.close()

    def __enter__(self) -> Upstream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _verified_context(scheme: str, ssl_context: ssl.SSLContext | None) -> ssl.SSLContext | None:
    if ssl_context is None:
        # Plain http never starts TLS (the transport refuses any other scheme): skip the CA load.
        return ssl.create_default_context() if scheme == "https" else None
    if not ssl_context.check_hostname or ssl_context.verify_mode != ssl.CERT_REQUIRED:
        raise ValueError("the TLS context must verify certificates and hostnames")
    return ssl_context


_banner_lock = threading.Lock()
_banner_shown = False


def announce_allow_private() -> None:
    """Log the test-only switch's banner, once per process."""
    global _banner_shown
    with _banner_lock:
        if _banner_shown:
            return
        _banner_shown = True
    log.warning(
        "--allow-private-upstreams is ON: public sources may connect to loopback and "
        "private addresses. This switch is for tests only; never run a gateway with it."
    )


def pinned_transport(
    url: httpx.URL,
    addresses: tuple[str, ...],
    *,
    ssl_context: ssl.SSLContext | None = None,
    connect: Connector | None = None,
) -> httpx.HTTPTransport:
    """Return a transport for `url`'s origin that dials only `addresses`, checked by the caller.

    Used by fetch for each hop: the guard resolves and checks, this dials exactly that.
    """
    return _PinnedTransport(
        _FixedPin(_origin(url), addresses),
        ssl_context=_verified_context(url.scheme, ssl_context),
        connect=connect or socket.create_connection,
    )


def open_upstream(
    url: str,
    *,
    public: bool,
    timeout: float,
    allow_private: bool = False,
    resolver: Resolver | None = None,
    clock: Callable[[], float] = time.monotonic,
    refresh_interval: float = 600.0,
    ssl_context: ssl.SSLContext | None = None,
    connect: Connector | None = None,
) -> Upstream:
    """Open the pinned client for one source URL; a refused resolution is reported, not raised."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ValueError("an upstream URL must be a valid URL") from exc
    if parsed.scheme not in _DEFAULT_PORTS:
        raise ValueError("an upstream URL must be http or https")
    if parsed.userinfo:
        raise ValueError("an upstream URL must not carry a user name or password")
    if not parsed.raw_host:
        raise ValueError("an upstream URL must name a host")
    if public and allow_private:
        announce_allow_private()
    pin = _Pin(
        _origin(parsed),
        public=public and not allow_private,
        resolver=resolver or resolve,
        clock=clock,
        refresh_interval=refresh_interval,
    )
    transport = _PinnedTransport(
        pin,
        ssl_context=_verified_context(parsed.scheme, ssl_context),
        connect=connect or socket.create_connection,
    )
    client = httpx.Client(
        transport=transport,
        trust_env=False,
        cookies=CookieJar(policy=_NoCookies()),
        follow_redirects=True,
        max_redirects=1,
        event_hooks={"response": [_redirect_check(pin.origin)]},
        timeout=timeout,
    )
    return Upstream(client, pin)
