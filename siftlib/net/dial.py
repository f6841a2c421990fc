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

The address table (what is public, what is cloud metadata) is `siftlib.net.addresses`;
the wall-clock deadline and cancel every socket wait honours is `siftlib.net.wallclock`.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from http.cookiejar import CookieJar, DefaultCookiePolicy
from types import TracebackType
from typing import Any

import httpcore
import httpx

from siftlib.lazylog import LazyLogger
from siftlib.net.addresses import Resolver, is_metadata, is_public, resolve
from siftlib.net.wallclock import DeadlineStream

__all__ = [
    "Connector",
    "LookupFailed",
    "RedirectRefused",
    "Upstream",
    "UpstreamRefused",
    "announce_allow_private",
    "open_upstream",
    "pinned_transport",
]

log = LazyLogger("sift")

Connector = Callable[[tuple[str, int], float | None], socket.socket]

_RETRY_REFUSED = 30.0
_DEFAULT_PORTS = {"http": 80, "https": 443}


class UpstreamRefused(httpx.ConnectError):
    """The dialer refused to connect: the address or port is outside the pinned set."""


class LookupFailed(httpx.ConnectError):
    """The upstream's host name did not resolve to any address; nothing was sent."""


DNS_FAILED = "dns failed"
REFUSED = "upstream refused"


class RedirectRefused(httpx.TooManyRedirects):
    """The upstream redirected to another scheme, host or port; the redirect was not followed."""


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
        acceptable = bool(parsed) and not any(is_metadata(ip) for ip in parsed)
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
            return DeadlineStream(sock)
        if isinstance(error, TimeoutError):
            raise httpcore.ConnectTimeout(str(error)) from error
        raise httpcore.ConnectError(str(error)) from error


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
