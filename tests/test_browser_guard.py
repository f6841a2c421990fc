"""Nothing a rendered page does reaches what the fetch guard refuses (issue 41).

Each page is served through a pinhole for exactly its own port; a sentinel listener on
another loopback port must receive nothing, whatever the page's scripts, subresources,
redirects or sockets aim at it. Addresses no test can listen on (cloud metadata, a private
network) are proven refused by the proxy's own count. The subresource escapes are all tried
by one page in one render (`escapes`), each aimed at a port or address of its own, so each
test reads its own outcome from the proxy's refusals.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest
from browserkit import mapped, rendering
from fetchkit import Listener, PageServer, page

from siftlib.errors import Blocked
from siftlib.fetch.browser.proxy import Refusal, RenderProxy
from siftlib.fetch.browser.renderer import BROWSERS, browser_command
from siftlib.fetch.fetcher import Fetcher, FetchRequest
from siftlib.fetch.guard import Guard
from siftlib.fetch.models import FetchResult
from siftlib.metrics import Metrics

pytestmark = pytest.mark.one_worker  # a browser or gateways for the module

BODY = """<!doctype html><html><head><title>Escape</title>{head}</head><body>
<div id="root"></div>{body}
<script>
document.getElementById('root').innerHTML = '<article><h1>Still here</h1><p>' +
  'The page rendered although its escape failed. '.repeat(10) + '</p></article>';
{script}
</script></body></html>"""


def escape(*, head: str = "", body: str = "", script: str = "") -> bytes:
    return BODY.format(head=head, body=body, script=script).encode()


@pytest.fixture(scope="module")
def site() -> Iterator[PageServer]:
    with PageServer({}) as server:
        yield server


@pytest.fixture(scope="module")
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture(scope="module")
def fetch(site: PageServer, metrics: Metrics) -> Iterator[Fetcher]:
    with rendering(site.allow, metrics=metrics) as fetcher:
        yield fetcher


def refusals(metrics: Metrics) -> dict[str, float]:
    counted = metrics.snapshot().get("browser_proxy_refusals", {})
    assert isinstance(counted, dict)
    return counted


SUBRESOURCES = {
    "a script's fetch to another loopback port": {
        "script": "fetch('http://127.0.0.1:{port}/steal').catch(function () {{}});"
    },
    "a fetch to localhost": {
        "script": "fetch('http://localhost:{port}/').catch(function () {{}});"
    },
    "a fetch to 0x7f000001": {
        "script": "fetch('http://0x7f000001:{port}/').catch(function () {{}});"
    },
    "an https fetch (a CONNECT tunnel)": {
        "script": "fetch('https://127.0.0.1:{port}/').catch(function () {{}});"
    },
    "an img": {"body": '<img src="http://127.0.0.1:{port}/pixel.png">'},
    "an iframe": {"body": '<iframe src="http://127.0.0.1:{port}/frame"></iframe>'},
    "a stylesheet link": {"head": '<link rel="stylesheet" href="http://127.0.0.1:{port}/s.css">'},
    "a WebSocket": {"script": "try {{ new WebSocket('ws://127.0.0.1:{port}/'); }} catch (e) {{}}"},
    "a secure WebSocket": {
        "script": "try {{ new WebSocket('wss://127.0.0.1:{port}/'); }} catch (e) {{}}"
    },
    "an EventSource": {"script": "new EventSource('http://127.0.0.1:{port}/events');"},
    "a beacon": {"script": "navigator.sendBeacon('http://127.0.0.1:{port}/b', 'x');"},
    "a form post in an iframe": {
        "body": '<iframe name="f"></iframe><form id="p" target="f" method="post" '
        'action="http://127.0.0.1:{port}/post"><input name="a" value="b"></form>',
        "script": "document.getElementById('p').submit();",
    },
}


ADDRESSES = [  # what no test can listen on, and the guard's rule for it
    ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ("http://10.0.0.7/", "private"),
    ("http://192.168.1.1:8080/", "private"),
    ("http://[::1]/", "loopback"),
    ("http://[fd00:ec2::254]/", "metadata"),
]


@dataclass
class Escapes:
    """One render of a page that tries every escape above at once, and what each one reached."""

    result: FetchResult
    idle: dict[str, Listener]  # each attempt's own loopback listener, closed after the render
    refused: list[Refusal]  # what the render's proxy refused, in order
    counted: dict[str, float]  # `browser_proxy_refusals` by rule, counted during the render


@pytest.fixture(scope="module")
def escapes(fetch: Fetcher, site: PageServer, metrics: Metrics) -> Iterator[Escapes]:
    """Each attempt aims at a port of its own, so each test below reads its own outcome."""
    renderer = fetch.renderer
    assert renderer is not None
    refused: list[Refusal] = []
    count = renderer._refused

    def note(refusal: Refusal) -> None:
        refused.append(refusal)
        count(refusal)

    before = refusals(metrics)
    parts: dict[str, list[str]] = {"head": [], "body": [], "script": []}
    with contextlib.ExitStack() as stack, pytest.MonkeyPatch.context() as patch:
        idle = {attempt: stack.enter_context(Listener()) for attempt in SUBRESOURCES}
        for attempt, listener in idle.items():
            for key, value in SUBRESOURCES[attempt].items():
                parts[key].append(value.format(port=listener.port))
        for target, _ in ADDRESSES:
            parts["script"].append(f"fetch('{target}').catch(function () {{}});")
            parts["body"].append(f'<img src="{target}">')
        site.routes["/escapes"] = page(
            escape(**{key: "\n".join(value) for key, value in parts.items()})
        )
        patch.setattr(renderer, "_refused", note)
        result = fetch.fetch(FetchRequest(url=site.url + "/escapes", render=True, wait_for=0.5))
    after = refusals(metrics)
    counted = {rule: after[rule] - before.get(rule, 0) for rule in after}
    yield Escapes(result, idle, refused, counted)


@pytest.mark.parametrize("attempt", list(SUBRESOURCES))
def test_a_subresource_aimed_at_loopback_fails_alone(escapes: Escapes, attempt: str) -> None:
    idle = escapes.idle[attempt]
    assert idle.connections == 0
    assert idle.received == b""
    assert escapes.result.render_ms is not None
    assert "The page rendered although its escape failed." in escapes.result.content
    mine = [refusal.rule for refusal in escapes.refused if refusal.port == idle.port]
    assert mine != [] and set(mine) <= {"loopback", "name"}  # `localhost` is refused by name
    assert all(escapes.counted.get(f"rule={rule}", 0) >= 1 for rule in mine)


WEBRTC = """var pc = new RTCPeerConnection({{iceServers: [
  {{urls: 'stun:127.0.0.1:{udp}'}}, {{urls: 'turn:127.0.0.1:{tcp}?transport=tcp',
  username: 'u', credential: 'c'}}]}});
pc.createDataChannel('escape');
pc.createOffer().then(function (offer) {{ return pc.setLocalDescription(offer); }});"""


@pytest.mark.parametrize("browser", [name for name in BROWSERS if shutil.which(name)] or ["auto"])
def test_webrtc_sends_nothing_around_the_proxy(
    site: PageServer, browser: str, request: pytest.FixtureRequest
) -> None:
    """ICE would send STUN over UDP (which no HTTP proxy carries) and TURN over TCP; each
    browser `auto` may start has its own switch for the policy that forbids it. The one `auto`
    starts is the module's own; another is started for this test."""
    with contextlib.ExitStack() as stack:
        turn = stack.enter_context(Listener())
        stun = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        if browser == browser_command("auto"):
            fetch: Fetcher = request.getfixturevalue("fetch")
        else:
            fetch = stack.enter_context(rendering(site.allow, executable=browser))
        stun.bind(("127.0.0.1", 0))
        script = WEBRTC.format(udp=stun.getsockname()[1], tcp=turn.port)
        site.routes["/webrtc"] = page(escape(script=script))
        result = fetch.fetch(FetchRequest(url=site.url + "/webrtc", render=True, wait_for=0.5))
        stun.setblocking(False)
        with pytest.raises(BlockingIOError):
            stun.recv(2048)  # not one datagram
    assert turn.connections == 0
    assert result.render_ms is not None
    assert "The page rendered although its escape failed." in result.content


@pytest.mark.parametrize(("target", "rule"), ADDRESSES)
def test_addresses_no_test_can_listen_on_are_refused_by_the_proxy(
    escapes: Escapes, target: str, rule: str
) -> None:
    aimed = urlsplit(target)
    mine = [
        refusal.rule
        for refusal in escapes.refused
        if (refusal.host, refusal.port) == (aimed.hostname, aimed.port or 80)
    ]
    assert mine != [] and set(mine) == {rule}
    assert escapes.counted.get(f"rule={rule}", 0) >= 1
    assert "The page rendered although its escape failed." in escapes.result.content


@pytest.mark.parametrize(
    "navigation",
    [
        {"script": "window.location.href = 'http://127.0.0.1:{port}/next';"},
        {"head": '<meta http-equiv="refresh" content="0;url=http://127.0.0.1:{port}/next">'},
        {"script": "window.location.replace('http://localhost:{port}/next');"},
        # Late: from the load event itself. A timer counted from the script's start could fire
        # after the render had settled on a starved machine (it did, under six xdist workers).
        {
            "script": "addEventListener('load', function () {{"
            " location = 'https://127.0.0.1:{port}/'; }});"
        },
    ],
    ids=["js-redirect", "meta-refresh", "replace-to-localhost", "late-https-redirect"],
)
def test_a_refused_top_level_navigation_is_a_blocked_fetch(
    fetch: Fetcher, site: PageServer, navigation: dict[str, str]
) -> None:
    with Listener() as idle:
        parts = {key: value.format(port=idle.port) for key, value in navigation.items()}
        path = "/nav-" + str(abs(hash(str(navigation))))
        site.routes[path] = page(escape(**parts))
        with pytest.raises(Blocked) as caught:
            fetch.fetch(FetchRequest(url=site.url + path, render=True))
    assert str(caught.value).startswith("blocked: ")
    assert idle.connections == 0


def test_a_name_rebound_to_loopback_after_the_page_loaded_is_refused() -> None:
    """The page's own host answers a public address, then loopback: its next request fails."""
    public = "93.184.215.14"
    secret = b"<p>secret</p>"
    with PageServer({}) as origin:
        served = lambda: origin.paths().count("/rebind")  # noqa: E731

        def resolver(host: str, port: int) -> list[str]:
            return [public] if served() < 2 else ["127.0.0.1"]  # static fetch, then the render

        origin.routes["/secret"] = page(secret)
        origin.routes["/rebind"] = page(
            escape(script="fetch('/secret').then(function (r) { return r.text(); });")
        )
        metrics = Metrics()
        with rendering(
            metrics=metrics, resolver=resolver, connect=mapped(public, "127.0.0.1")
        ) as fetch:
            # Half a second after load: at load 40 the script's request once left the starved
            # browser after the render had settled (no refusal was counted).
            rebind = f"http://rebind.example:{origin.port}/rebind"
            result = fetch.fetch(FetchRequest(url=rebind, render=True, wait_for=0.5))
    assert "The page rendered although its escape failed." in result.content
    assert "/secret" not in origin.paths()
    assert refusals(metrics).get("rule=loopback", 0) >= 1


def test_only_the_browser_may_use_its_proxy(site: PageServer) -> None:
    """A local process that finds the render's proxy port is closed on, unanswered."""
    import socket
    import subprocess
    import time

    guard = Guard([site.allow])
    browser = subprocess.Popen(["sleep", "30"])  # stands for the browser: not this process
    with (
        RenderProxy(
            guard, deadline=time.monotonic() + 5, max_bytes=1 << 20, owner=browser.pid
        ) as proxy,
    ):
        site.routes["/proxied"] = page(b"<p>reached</p>")
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
            sock.sendall(f"GET {site.url}/proxied HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            try:
                answer = sock.recv(100)
            except ConnectionResetError:  # closed with the request unread
                answer = b""
            assert answer == b""
    browser.kill()
    browser.wait()
    assert "/proxied" not in site.paths()
    assert proxy.strangers == 1


def test_the_browser_tree_is_found_with_or_without_the_kernels_children_files() -> None:
    import os
    import subprocess

    from siftlib.fetch.browser import processes

    child = subprocess.Popen(["sleep", "30"])
    try:
        me = os.getpid()
        assert child.pid in processes._children(me)
        assert child.pid in processes._by_parent()(me)
        assert child.pid in set(processes.tree(me))
    finally:
        child.kill()
        child.wait()


def test_a_plain_answer_tells_the_browser_to_close_the_connection(site: PageServer) -> None:
    """The next request on that connection could aim elsewhere: it must come on a new one."""
    import socket
    import time

    site.routes["/kept"] = page(b"<p>kept alive</p>", headers={"Connection": "keep-alive"})
    proxy = RenderProxy(
        Guard([site.allow]), deadline=time.monotonic() + 5, max_bytes=1 << 20, owner=None
    )
    with proxy, socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
        sock.sendall(f"GET {site.url}/kept HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        answer = b""
        while b"kept alive" not in answer:
            answer += sock.recv(4096)
    head = answer.split(b"\r\n\r\n", 1)[0].lower()
    assert b"connection: close" in head.split(b"\r\n")
    assert b"keep-alive" not in head
