"""The SSRF boundary: address table, resolution and pinning, refresh, redirects, cookies, proxies.

Every "nothing was contacted" check uses a real listening socket on 127.0.0.1 and a
non-blocking accept(): a TCP connect to loopback completes in the kernel before connect()
returns, so a leaked connection is already queued when the request under test has failed.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from email.message import Message
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest
from clockkit import Clock
from gatewaykit import QuietServer

from siftlib.net.addresses import is_public
from siftlib.net.dial import (
    LookupFailed,
    RedirectRefused,
    UpstreamRefused,
    _Pin,
    _PinnedBackend,
    open_upstream,
)

# --- the address table -------------------------------------------------------------------

PUBLIC = [
    "1.1.1.1",
    "8.8.8.8",
    "11.0.0.1",
    "93.184.215.14",
    "9.255.255.255",  # just below 10/8
    "100.63.255.255",  # just below CGNAT
    "100.128.0.0",  # just above CGNAT
    "126.255.255.255",  # just below 127/8
    "169.253.255.255",  # just below link-local
    "172.15.255.255",  # just below 172.16/12
    "172.32.0.0",  # just above 172.16/12
    "192.0.1.1",  # between 192.0.0/24 and 192.0.2/24
    "192.167.255.255",
    "192.169.0.0",
    "198.17.255.255",
    "198.20.0.0",
    "223.255.255.255",  # last address before multicast
    "2606:4700:4700::1111",
    "2a00:1450:4001:80b::200e",
    "2001:4860:4860::8888",  # 2001:4860::/32 is outside 2001::/23
    "64:ff9b::808:808",  # NAT64 of 8.8.8.8
    "2002:808:808::1",  # 6to4 of 8.8.8.8
    "2001:0:4136:e378:8000:63bf:f7f7:f7f7",  # Teredo, server 65.54.227.120, client 8.8.8.8
]

NOT_PUBLIC = [
    # IPv4
    "0.0.0.0",  # unspecified
    "0.1.2.3",  # this network
    "10.0.0.1",
    "10.255.255.255",
    "100.64.0.1",  # CGNAT
    "100.127.255.254",
    "127.0.0.1",
    "127.255.255.254",
    "169.254.1.1",  # link-local
    "172.16.0.1",
    "172.31.255.255",
    "192.0.0.1",  # protocol assignments
    "192.0.2.1",  # documentation
    "192.88.99.1",  # 6to4 relay anycast
    "192.168.1.1",
    "198.18.0.1",  # benchmarking
    "198.19.255.255",
    "198.51.100.1",  # documentation
    "203.0.113.1",  # documentation
    "224.0.0.1",  # multicast
    "239.255.255.250",
    "240.0.0.1",  # reserved
    "255.255.255.255",  # broadcast
    # cloud metadata
    "169.254.169.254",
    "169.254.170.2",
    "169.254.0.23",
    "100.100.100.200",
    "168.63.129.16",  # Azure WireServer: inside a public range
    "192.0.0.192",
    "fd00:ec2::254",
    # IPv6
    "::",  # unspecified
    "::1",  # loopback
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:8.8.8.8",  # IPv4-mapped, even of a public address
    "::127.0.0.1",  # IPv4-compatible
    "::8.8.8.8",
    "fc00::1",  # unique local
    "fd12:3456:789a::1",
    "fe80::1",  # link-local
    "fe80::1%eth0",
    "fec0::1",  # site-local
    "ff02::1",  # multicast
    "ff0e::1",
    "100::1",  # discard-only
    "4000::1",  # outside 2000::/3
    "e000::1",
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b::6464:64c8",  # NAT64 of 100.100.100.200 (metadata)
    "64:ff9b:1::808:808",  # local-use NAT64
    "2001:db8::1",  # documentation
    "3fff::1",  # documentation
    "5f00::1",  # SRv6
    "2001:2::1",  # benchmarking, inside 2001::/23
    "2001:10::1",  # ORCHID
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2002:c0a8:101::1",  # 6to4 of 192.168.1.1
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo, client 10.0.0.1
    "2001:0:a00:1:8000:63bf:f7f7:f7f7",  # Teredo, server 10.0.0.1
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo, client 192.0.2.45
]


@pytest.mark.parametrize("address", PUBLIC)
def test_public_address(address: str) -> None:
    assert is_public(address)
    assert is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", NOT_PUBLIC)
def test_not_public_address(address: str) -> None:
    assert not is_public(address)
    assert not is_public(ipaddress.ip_address(address))


def test_is_public_rejects_a_name() -> None:
    with pytest.raises(ValueError):
        is_public("localhost")


# --- fixtures ----------------------------------------------------------------------------


class FakeUpstream(QuietServer):
    """A real HTTP/1.1 keep-alive server on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _FakeHandler)
        self.port: int = self.server_address[1]
        self.ssl_context = ssl_context
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.requests: list[tuple[str, str, Message]] = []
        self.connections = 0

    def route(self, path: str, body: bytes = b"{}", *, status: int = 200, **headers: str) -> None:
        self.routes[path] = (status, {k.replace("_", "-"): v for k, v in headers.items()}, body)

    @property
    def paths(self) -> list[str]:
        return [path for _, path, _ in self.requests]

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        self.connections += 1
        if self.ssl_context is not None:
            sock.settimeout(5.0)
            sock = self.ssl_context.wrap_socket(sock, server_side=True)
        return sock, address


class _FakeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeUpstream

    def do_GET(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.requests.append((self.command, self.path, self.headers))
        status, headers, body = self.server.routes.get(self.path.split("?")[0], (404, {}, b""))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def running(server: FakeUpstream) -> Iterator[FakeUpstream]:
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def server() -> Iterator[FakeUpstream]:
    with running(FakeUpstream()) as srv:
        yield srv


class Sentinel:
    """A listening socket that must never receive a connection."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.setblocking(False)
        self.port: int = self.sock.getsockname()[1]

    def contacted(self) -> bool:
        try:
            conn, _ = self.sock.accept()
        except BlockingIOError:
            return False
        conn.close()
        return True


@pytest.fixture
def sentinel() -> Iterator[Sentinel]:
    s = Sentinel()
    yield s
    s.sock.close()


class Dialer:
    """A socket-creation seam that records every connect and can reroute it to a local server."""

    def __init__(self, route: dict[str, tuple[str, int]] | None = None) -> None:
        self.route = route or {}
        self.calls: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def __call__(self, address: tuple[str, int], timeout: float | None) -> socket.socket:
        with self.lock:
            self.calls.append(address)
        return socket.create_connection(self.route.get(address[0], address), timeout)


def fixed(*answer: str) -> Callable[[str, int], list[str]]:
    return lambda host, port: list(answer)


# --- URL validation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "ftp://search.test/",
        "file:///etc/passwd",
        "gopher://search.test:70/",
        "http://user:secret@search.test/",
        "https://user@search.test/",
        "http:///search",
        "search.test/search",
        "http://bad\x00host/",
    ],
)
def test_open_upstream_rejects_bad_urls(url: str) -> None:
    with pytest.raises(ValueError):
        open_upstream(url, public=False, timeout=2.0, resolver=fixed("127.0.0.1"))


# --- resolution and pinning --------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        ["127.0.0.1"],
        ["10.0.0.7"],
        ["169.254.169.254"],
        ["::1"],
        ["::ffff:127.0.0.1"],
        ["1.1.1.1", "127.0.0.1"],  # every record is checked, not just the first
        ["2606:4700:4700::1111", "fd00::1"],
        ["not-an-address"],
    ],
)
def test_public_source_with_a_poisoned_answer_is_refused(
    answer: list[str], sentinel: Sentinel
) -> None:
    dialer = Dialer()
    url = f"http://api.tavily.test:{sentinel.port}/search"
    with open_upstream(
        url, public=True, timeout=2.0, resolver=fixed(*answer), connect=dialer
    ) as upstream:
        assert upstream.problem == "upstream refused"
        with pytest.raises(UpstreamRefused):
            upstream.client.post(url, json={"query": "x"})
        with pytest.raises(UpstreamRefused):
            upstream.client.send(upstream.client.build_request("GET", url), stream=True)
    assert dialer.calls == []
    assert not sentinel.contacted()


def no_name(host: str, port: int) -> list[str]:
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


@pytest.mark.parametrize("resolver", [no_name, fixed()], ids=["lookup error", "no address"])
def test_failed_lookup_is_a_dns_failure_not_a_refusal(
    resolver: Callable[[str, int], list[str]], sentinel: Sentinel
) -> None:
    url = f"http://api.search.test:{sentinel.port}/"
    with open_upstream(url, public=True, timeout=2.0, resolver=resolver) as upstream:
        assert upstream.problem == "dns failed"
        with pytest.raises(LookupFailed) as raised:
            upstream.client.get(url)
        assert not isinstance(raised.value, UpstreamRefused)
    assert not sentinel.contacted()


def test_a_lookup_that_recovers_clears_the_dns_failure(server: FakeUpstream) -> None:
    server.route("/search", json.dumps({"results": []}).encode())
    answers: list[list[str]] = [[], ["127.0.0.1"]]
    clock = Clock(1000.0)
    url = f"http://searxng.test:{server.port}/search"
    with open_upstream(
        url, public=False, timeout=2.0, resolver=lambda h, p: answers.pop(0), clock=clock
    ) as upstream:
        assert upstream.problem == "dns failed"
        clock.now += 31  # a failed lookup is retried within 30 s
        assert upstream.problem is None
        assert upstream.client.get(url).status_code == 200


def test_public_source_connects_only_to_its_pinned_public_addresses(server: FakeUpstream) -> None:
    server.route("/search", json.dumps({"results": []}).encode())
    dialer = Dialer(route={"1.1.1.1": ("127.0.0.1", server.port)})
    url = f"http://api.tavily.test:{server.port}/search"
    with open_upstream(
        url, public=True, timeout=2.0, resolver=fixed("1.1.1.1"), connect=dialer
    ) as upstream:
        assert upstream.problem is None
        response = upstream.client.post(url, json={"query": "x"})
    assert response.json() == {"results": []}
    assert dialer.calls == [("1.1.1.1", server.port)]
    assert server.requests[0][2]["Host"] == f"api.tavily.test:{server.port}"


def test_a_name_is_resolved_by_the_pin_never_by_httpcore(server: FakeUpstream) -> None:
    # "searxng.internal" resolves nowhere; the request only works through the pinned address.
    server.route("/search", json.dumps({"results": []}).encode())
    calls: list[tuple[str, int]] = []

    def resolver(host: str, port: int) -> list[str]:
        calls.append((host, port))
        return ["127.0.0.1"]

    url = f"http://SearXNG.Internal:{server.port}"
    with open_upstream(url, public=False, timeout=2.0, resolver=resolver) as upstream:
        for _ in range(3):
            assert upstream.client.get(f"{url}/search").status_code == 200
    assert calls == [("searxng.internal", server.port)]


def test_default_ports_are_pinned() -> None:
    seen: list[tuple[str, int]] = []

    def resolver(host: str, port: int) -> list[str]:
        seen.append((host, port))
        return ["1.1.1.1"]

    open_upstream("https://api.tavily.test/search", public=True, timeout=1.0, resolver=resolver)
    open_upstream("http://searx.test/", public=False, timeout=1.0, resolver=resolver)
    assert seen == [("api.tavily.test", 443), ("searx.test", 80)]


def test_default_resolver_pins_a_loopback_searxng(server: FakeUpstream, sentinel: Sentinel) -> None:
    server.route("/search", json.dumps({"results": []}).encode())
    base = f"http://127.0.0.1:{server.port}"
    with open_upstream(base, public=False, timeout=2.0) as upstream:
        assert upstream.problem is None
        assert upstream.client.get(f"{base}/search").status_code == 200
        for other in (
            f"http://127.0.0.1:{sentinel.port}/search",  # another loopback port
            f"http://localhost:{server.port}/search",  # another host, same port
            f"https://127.0.0.1:{server.port}/search",  # another scheme
        ):
            with pytest.raises(UpstreamRefused):
                upstream.client.get(other)
    assert not sentinel.contacted()
    assert server.paths == ["/search"]


def test_backend_refuses_another_port_at_the_socket(sentinel: Sentinel) -> None:
    # The dialer itself, below the transport's origin check: another port never gets a socket.
    dialer = Dialer()
    pin = _Pin(
        ("http", "searxng.test", sentinel.port + 1),
        public=False,
        resolver=fixed("127.0.0.1"),
        clock=Clock(1000.0),
        refresh_interval=600.0,
    )
    backend = _PinnedBackend(pin, dialer)
    for host, port in (("searxng.test", sentinel.port), ("127.0.0.1", sentinel.port + 1)):
        with pytest.raises(UpstreamRefused):
            backend.connect_tcp(host, port, timeout=1.0)
    assert dialer.calls == []
    assert not sentinel.contacted()


@pytest.mark.parametrize("public", [True, False])
@pytest.mark.parametrize(
    "answer",
    [
        "169.254.169.254",
        "100.100.100.200",
        "168.63.129.16",
        "fd00:ec2::254",
        "::ffff:169.254.169.254",  # IPv4-mapped: a dual-stack socket reaches the IPv4 address
        "64:ff9b::a9fe:a9fe",  # NAT64
    ],
)
def test_metadata_address_is_refused_for_every_source(
    public: bool, answer: str, sentinel: Sentinel
) -> None:
    url = f"http://metadata.test:{sentinel.port}/"
    with open_upstream(
        url,
        public=public,
        timeout=1.0,
        allow_private=True,
        resolver=fixed("10.0.0.1", answer),
    ) as upstream:
        assert upstream.problem == "upstream refused"
        with pytest.raises(UpstreamRefused):
            upstream.client.get(url)
    assert not sentinel.contacted()


def test_next_address_is_tried_when_one_fails(server: FakeUpstream) -> None:
    server.route("/", b"ok")

    class Flaky(Dialer):
        def __call__(self, address: tuple[str, int], timeout: float | None) -> socket.socket:
            if address[0] == "1.1.1.1":
                self.calls.append(address)
                raise ConnectionRefusedError(111, "Connection refused")
            return super().__call__(address, timeout)

    dialer = Flaky(route={"8.8.8.8": ("127.0.0.1", server.port)})
    url = f"http://api.test:{server.port}/"
    with open_upstream(
        url, public=True, timeout=2.0, resolver=fixed("1.1.1.1", "8.8.8.8"), connect=dialer
    ) as upstream:
        assert upstream.client.get(url).text == "ok"
    assert dialer.calls == [("1.1.1.1", server.port), ("8.8.8.8", server.port)]


def test_all_addresses_failing_is_a_connect_error_not_a_refusal(sentinel: Sentinel) -> None:
    port = sentinel.port
    sentinel.sock.close()  # nothing listens there now: a real "connection refused"
    url = f"http://127.0.0.1:{port}/"
    with (
        open_upstream(url, public=False, timeout=2.0) as upstream,
        pytest.raises(httpx.ConnectError) as caught,
    ):
        upstream.client.get(url)
    assert not isinstance(caught.value, UpstreamRefused)


def test_a_connect_timeout_is_a_timeout() -> None:
    def silent(address: tuple[str, int], timeout: float | None) -> socket.socket:
        raise TimeoutError("timed out")

    url = "http://searxng.test:8888/"
    with (
        open_upstream(
            url, public=False, timeout=1.0, resolver=fixed("10.0.0.1"), connect=silent
        ) as upstream,
        pytest.raises(httpx.ConnectTimeout),
    ):
        upstream.client.get(url)


# --- refresh and rebinding ---------------------------------------------------------------


def test_rebinding_after_refresh_is_refused(server: FakeUpstream, sentinel: Sentinel) -> None:
    server.route("/search", json.dumps({"results": []}).encode())
    answer = ["1.1.1.1"]
    resolved: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        resolved.append(host)
        return list(answer)

    clock = Clock(1000.0)
    # The configured port is the sentinel's: a connection to the rebound 127.0.0.1 would land there.
    dialer = Dialer(route={"1.1.1.1": ("127.0.0.1", server.port)})
    url = f"http://api.tavily.test:{sentinel.port}/search"
    with open_upstream(
        url,
        public=True,
        timeout=2.0,
        resolver=resolver,
        clock=clock,
        refresh_interval=60.0,
        connect=dialer,
    ) as upstream:
        assert upstream.client.get(url).status_code == 200  # leaves a pooled keep-alive socket
        answer[:] = ["127.0.0.1"]
        clock.now += 59.0
        assert upstream.problem is None  # still within the interval: the pin holds
        assert upstream.client.get(url).status_code == 200
        assert len(resolved) == 1
        assert server.connections == 1  # the second request rode the pooled connection

        clock.now += 1.0
        assert upstream.problem == "upstream refused"
        assert len(resolved) == 2
        with pytest.raises(UpstreamRefused):
            upstream.client.get(url)  # the pooled connection is not reused either
        assert server.paths == ["/search", "/search"]

        answer[:] = ["8.8.8.8"]
        dialer.route["8.8.8.8"] = ("127.0.0.1", server.port)
        clock.now += 30.0  # a refused answer is retried sooner than the full interval
        assert upstream.problem is None
        assert upstream.client.get(url).status_code == 200
    assert all(ip in ("1.1.1.1", "8.8.8.8") for ip, _ in dialer.calls)
    assert not sentinel.contacted()


def test_refresh_happens_on_connect_without_reading_refused(server: FakeUpstream) -> None:
    server.route("/", b"ok")
    answer = ["127.0.0.1"]
    clock = Clock(1000.0)
    url = f"http://searxng.test:{server.port}/"
    with open_upstream(
        url,
        public=False,
        timeout=2.0,
        resolver=lambda host, port: list(answer),
        clock=clock,
        refresh_interval=600.0,
    ) as upstream:
        assert upstream.client.get(url).text == "ok"
        answer[:] = ["169.254.169.254"]
        clock.now += 600.0
        with pytest.raises(UpstreamRefused):
            upstream.client.get(url)
        assert upstream.problem == "upstream refused"


# --- the test-only switch ----------------------------------------------------------------


def test_allow_private_banner_is_logged_once_per_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="sift"):
        for url in ("http://api.tavily.test:9/search", "http://api.brave.test:9/llm"):
            for _ in range(2):
                open_upstream(
                    url, public=True, timeout=1.0, allow_private=True, resolver=fixed("127.0.0.1")
                ).close()
    banners = [r for r in caplog.records if "--allow-private-upstreams" in r.getMessage()]
    assert len(banners) == 1


def test_allow_private_lets_a_public_source_use_loopback_loudly(
    server: FakeUpstream, sentinel: Sentinel, caplog: pytest.LogCaptureFixture
) -> None:
    server.route("/search", json.dumps({"results": []}).encode())
    url = f"http://api.tavily.test:{server.port}/search"
    with caplog.at_level(logging.WARNING, logger="sift"):
        upstream = open_upstream(
            url, public=True, timeout=2.0, allow_private=True, resolver=fixed("127.0.0.1")
        )
    with upstream:
        assert upstream.problem is None
        assert upstream.client.get(url).status_code == 200
        with pytest.raises(UpstreamRefused):  # still pinned to its port
            upstream.client.get(f"http://api.tavily.test:{sentinel.port}/search")
    assert not sentinel.contacted()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    assert "--allow-private-upstreams" in text
    assert "tavily" not in text and str(server.port) not in text


def test_private_source_opens_without_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="sift"):
        open_upstream(
            "http://127.0.0.1:8888", public=False, timeout=1.0, allow_private=True
        ).close()
    assert caplog.records == []


def test_refusal_texts_name_no_host_or_port(sentinel: Sentinel) -> None:
    url = f"http://secret-host.test:{sentinel.port}/"
    with (
        open_upstream(url, public=True, timeout=1.0, resolver=fixed("127.0.0.1")) as upstream,
        pytest.raises(UpstreamRefused) as caught,
    ):
        upstream.client.get(url)
    assert "secret-host" not in str(caught.value)
    assert str(sentinel.port) not in str(caught.value)


# --- redirects ---------------------------------------------------------------------------


@pytest.fixture
def searxng(server: FakeUpstream) -> Iterator[tuple[str, httpx.Client]]:
    base = f"http://127.0.0.1:{server.port}"
    with open_upstream(base, public=False, timeout=2.0) as upstream:
        yield base, upstream.client


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{sentinel}/steal",  # another port
        "http://localhost:{port}/steal",  # another host
        "https://127.0.0.1:{port}/steal",  # another scheme
        "//127.0.0.1:{sentinel}/steal",  # scheme-relative, another port
        "http://[::1/",  # unparseable
    ],
)
def test_redirect_elsewhere_is_not_followed(
    target: str,
    server: FakeUpstream,
    sentinel: Sentinel,
    searxng: tuple[str, httpx.Client],
) -> None:
    base, client = searxng
    location = target.format(sentinel=sentinel.port, port=server.port)
    server.route("/search", b"", status=302, Location=location)
    with pytest.raises(RedirectRefused):
        client.get(f"{base}/search")
    with pytest.raises(httpx.TooManyRedirects):  # the pipeline reports it as a bad response
        client.send(client.build_request("GET", f"{base}/search"), stream=True)
    assert not sentinel.contacted()
    assert server.paths == ["/search", "/search"]


def test_one_redirect_within_the_origin_is_followed(
    server: FakeUpstream, searxng: tuple[str, httpx.Client]
) -> None:
    base, client = searxng
    server.route("/search", b"", status=301, Location="/s2")
    server.route("/s2", json.dumps({"results": []}).encode())
    response = client.send(client.build_request("GET", f"{base}/search"), stream=True)
    assert response.status_code == 200
    assert json.loads(response.read()) == {"results": []}
    response.close()


def test_a_second_redirect_is_not_followed(
    server: FakeUpstream, searxng: tuple[str, httpx.Client]
) -> None:
    base, client = searxng
    server.route("/a", b"", status=302, Location="/b")
    server.route("/b", b"", status=302, Location="/c")
    server.route("/c", b"too far")
    with pytest.raises(httpx.TooManyRedirects):
        client.get(f"{base}/a")
    assert server.paths == ["/a", "/b"]


# --- cookies, proxies, concurrency -------------------------------------------------------


def test_no_cookie_persists(server: FakeUpstream, searxng: tuple[str, httpx.Client]) -> None:
    base, client = searxng
    server.route("/set", b"", Set_Cookie="sid=abc; Path=/")
    server.route("/check", b"ok")
    client.get(f"{base}/set")
    client.get(f"{base}/check")
    assert len(client.cookies) == 0
    assert server.requests[-1][2]["Cookie"] is None


def test_environment_proxies_are_ignored(
    server: FakeUpstream, sentinel: Sentinel, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = f"http://127.0.0.1:{sentinel.port}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, proxy)
    server.route("/search", b"direct")
    url = f"http://api.tavily.test:{server.port}/search"
    with open_upstream(
        url, public=True, timeout=2.0, allow_private=True, resolver=fixed("127.0.0.1")
    ) as upstream:
        assert upstream.client.get(url).text == "direct"
    assert not sentinel.contacted()


def test_one_pool_is_shared_by_concurrent_threads(server: FakeUpstream) -> None:
    server.route("/search", json.dumps({"results": []}).encode())
    dialer = Dialer()
    url = f"http://127.0.0.1:{server.port}/search"
    threads, per_thread = 6, 10
    errors: list[BaseException] = []
    with open_upstream(url, public=False, timeout=5.0, connect=dialer) as upstream:

        def work() -> None:
            try:
                for _ in range(per_thread):
                    request = upstream.client.build_request("GET", url)
                    response = upstream.client.send(request, stream=True)
                    assert response.status_code == 200
                    response.read()
                    response.close()
            except BaseException as exc:  # noqa: BLE001 - surfaced below
                errors.append(exc)

        pool = [threading.Thread(target=work) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    assert errors == []
    assert len(server.requests) == threads * per_thread
    assert 1 <= len(dialer.calls) == server.connections <= threads  # keep-alive reuse


# --- TLS ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> Any:
    import trustme

    return trustme.CA()


@contextmanager
def tls_upstream(ca: Any, hostname: str) -> Iterator[tuple[FakeUpstream, list[str | None]]]:
    """A TLS fake whose certificate (issued by the test CA) names `hostname`; records SNI."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert(hostname).configure_cert(context)
    names: list[str | None] = []
    context.sni_callback = lambda sock, name, ctx: names.append(name)
    with running(FakeUpstream(ssl_context=context)) as srv:
        srv.route("/search", b'{"results": []}')
        yield srv, names


def trusting(ca: Any) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


def open_tls(port: int, context: ssl.SSLContext | None) -> Any:
    return open_upstream(
        f"https://search.test:{port}/search",
        public=True,
        timeout=5.0,
        allow_private=True,
        resolver=fixed("127.0.0.1"),
        ssl_context=context,
    )


def test_tls_with_the_test_ca_trusted_verifies_the_configured_name(ca: Any) -> None:
    with (
        tls_upstream(ca, "search.test") as (srv, names),
        open_tls(srv.port, trusting(ca)) as upstream,
    ):
        response = upstream.client.get(f"https://search.test:{srv.port}/search")
    assert response.json() == {"results": []}
    assert names == ["search.test"]  # SNI is the configured host, never the pinned IP


def test_tls_against_system_roots_rejects_a_test_ca(ca: Any) -> None:
    with (
        tls_upstream(ca, "search.test") as (srv, _),
        open_tls(srv.port, None) as upstream,
        pytest.raises(httpx.ConnectError) as caught,
    ):
        upstream.client.get(f"https://search.test:{srv.port}/search")
    assert not isinstance(caught.value, UpstreamRefused)
    assert "CERTIFICATE_VERIFY_FAILED" in str(caught.value)
    assert srv.requests == []


def test_tls_certificate_for_another_name_always_fails(ca: Any) -> None:
    with (
        tls_upstream(ca, "other.test") as (srv, _),
        open_tls(srv.port, trusting(ca)) as upstream,
        pytest.raises(httpx.ConnectError),
    ):
        upstream.client.get(f"https://search.test:{srv.port}/search")
    assert srv.requests == []


def test_tls_context_that_skips_verification_is_rejected() -> None:
    lax = ssl.create_default_context()
    lax.check_hostname = False
    with pytest.raises(ValueError):
        open_tls(443, lax)
    lax.verify_mode = ssl.CERT_NONE
    with pytest.raises(ValueError):
        open_tls(443, lax)
