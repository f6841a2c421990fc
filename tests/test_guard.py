"""The fetch guard (fetch.md §3): every rule refuses before a byte reaches a listener."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from fetchkit import Listener, PageServer, page, redirect

from siftlib.config import FetchConfig
from siftlib.errors import Blocked, FetchFailed, QueryError
from siftlib.fetch.fetcher import Fetcher, FetchRequest
from siftlib.fetch.guard import Guard, parse_pinhole

ARTICLE = b"<html><head><title>ok</title></head><body><p>fine page</p></body></html>"


def fetcher(
    *allow: str, resolver: Callable[[str, int], list[str]] | None = None, **options: object
) -> Fetcher:
    return Fetcher(FetchConfig(allow=allow, **options), resolver=resolver)  # type: ignore[arg-type]


def refused(fetch: Fetcher, url: str) -> Blocked:
    with pytest.raises(Blocked) as caught:
        fetch.fetch(FetchRequest(url=url))
    return caught.value


@pytest.mark.parametrize(
    ("host", "rule"),
    [
        ("127.0.0.1", "loopback"),
        ("127.1", "loopback"),
        ("0x7f000001", "loopback"),
        ("2130706433", "loopback"),
        ("0177.0.0.1", "loopback"),
        ("0x7f.1", "loopback"),
        ("127.000.000.001", "loopback"),
    ],
)
def test_loopback_literals_in_every_spelling_are_refused(host: str, rule: str) -> None:
    with Listener() as idle, fetcher() as fetch:
        error = refused(fetch, f"http://{host}:{idle.port}/")
    assert error.rule == rule
    assert str(error) == (
        "blocked: 127.0.0.1 is a loopback address "
        f'(to read it on this machine, add "127.0.0.1:{idle.port}" to [fetch] allow)'
    )
    assert idle.connections == 0


@pytest.mark.parametrize(
    ("host", "rule"),
    [
        ("[::1]", "loopback"),
        ("[::ffff:127.0.0.1]", "loopback"),
        ("[::ffff:7f00:1]", "loopback"),
        ("[::127.0.0.1]", "loopback"),
        ("[64:ff9b::7f00:1]", "loopback"),
        ("[2002:7f00:1::1]", "loopback"),
        ("[::]", "unspecified"),
        ("[fe80::1]", "link-local"),
        ("[fd00:ec2::254]", "metadata"),
        ("[fc00::1]", "unique-local"),
        ("[ff02::1]", "multicast"),
        ("[::ffff:10.0.0.1]", "private"),
    ],
)
def test_ipv6_forms_are_refused(host: str, rule: str) -> None:
    with Listener() as idle, fetcher() as fetch:
        error = refused(fetch, f"http://{host}:{idle.port}/")
    assert error.rule == rule
    assert idle.connections == 0


def test_ipv6_loopback_listener_receives_nothing() -> None:
    with Listener("::1", socket.AF_INET6) as idle, fetcher() as fetch:
        error = refused(fetch, f"http://[::1]:{idle.port}/")
    assert error.rule == "loopback"
    assert idle.connections == 0


@pytest.mark.parametrize(
    ("ip", "rule"),
    [
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "cgnat"),
        ("169.254.169.254", "metadata"),
        ("169.254.1.1", "link-local"),
        ("0.0.0.0", "this-network"),
        ("198.18.0.1", "benchmarking"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("192.0.2.1", "documentation"),
    ],
)
def test_non_public_ipv4_literals_are_refused_by_kind(ip: str, rule: str) -> None:
    with fetcher() as fetch:
        error = refused(fetch, f"http://{ip}/")
    assert error.rule == rule
    assert str(error).startswith(f"blocked: {ip} is ")


@pytest.mark.parametrize(
    "name",
    [
        "localhost",
        "LOCALHOST",
        "app.localhost",
        "printer.local",
        "db.internal",
        "nas.home.arpa",
        "intranet",
        "localhost.",
    ],
)
def test_local_and_single_label_names_are_refused_before_any_lookup(name: str) -> None:
    looked_up: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        looked_up.append(host)
        return ["127.0.0.1"]

    with Listener() as idle, fetcher(resolver=resolver) as fetch:
        error = refused(fetch, f"http://{name}:{idle.port}/")
    assert error.rule == "name"
    assert looked_up == []
    assert idle.connections == 0


@pytest.mark.parametrize(
    "answer",
    [["127.0.0.1"], ["93.184.215.14", "127.0.0.1"], ["::1"], ["10.0.0.7"], ["::ffff:127.0.0.1"]],
)
def test_a_name_with_any_non_public_address_is_refused(answer: list[str]) -> None:
    with Listener() as idle, fetcher(resolver=lambda host, port: answer) as fetch:
        error = refused(fetch, f"http://rebind.example:{idle.port}/")
    assert str(error).startswith("blocked: rebind.example is not a public address")
    assert not any(address in str(error) for address in answer)  # never what it resolves to
    assert idle.connections == 0


def test_a_private_name_is_refused_without_its_address() -> None:
    with fetcher(resolver=lambda host, port: ["10.20.30.40"]) as fetch:
        error = refused(fetch, "http://db.corp.example.com/")
    assert str(error) == "blocked: db.corp.example.com is not a public address"
    assert error.rule == "private"


def test_a_loopback_name_is_refused_naming_the_pinhole_to_add() -> None:
    with fetcher(resolver=lambda host, port: ["127.0.0.1"]) as fetch:
        error = refused(fetch, "http://dev.example:8080/")
    assert str(error) == (
        "blocked: dev.example is not a public address "
        '(to read it on this machine, add "dev.example:8080" to [fetch] allow)'
    )


def test_a_pinholed_name_resolving_to_cloud_metadata_is_refused() -> None:
    guard = Guard(["meta.example:80"], resolver=lambda host, port: ["169.254.169.254"])
    with pytest.raises(Blocked) as caught:
        guard.vet("http://meta.example/latest/meta-data/", timeout=2)
    assert caught.value.rule == "metadata"
    assert str(caught.value) == "blocked: meta.example is a cloud metadata address"


def test_a_pinhole_on_the_metadata_address_opens_nothing() -> None:
    guard = Guard(["169.254.169.254:80"])
    with pytest.raises(Blocked) as caught:
        guard.vet("http://169.254.169.254/latest/meta-data/", timeout=2)
    assert caught.value.rule == "metadata"


def test_lookups_that_never_answer_hold_only_their_callers_turns() -> None:
    """A caller's hung lookups (DNS servers that never answer) do not delay another caller."""
    release = threading.Event()

    def resolver(host: str, port: int) -> list[str]:
        if host.startswith("hang"):
            release.wait(60)
        return ["93.184.215.14"]

    def noisy(n: int) -> str:
        with pytest.raises(FetchFailed) as caught:
            guard.vet(f"http://hang{n}.example/", timeout=0.2, caller="noisy")
        return str(caught.value)

    guard = Guard(resolver=resolver)
    try:
        # Eight at once: four hold the caller's lookups, four wait for a turn; all time out.
        with ThreadPoolExecutor(8) as pool:
            failures = list(pool.map(noisy, range(8)))
        assert failures == ["fetch failed: deadline (name lookup)"] * 8
        hop = guard.vet("http://quick.example/", timeout=10, caller="other")
        assert hop.addresses == ("93.184.215.14",)
    finally:
        release.set()


def test_a_name_that_does_not_resolve_is_a_dns_failure() -> None:
    def resolver(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with fetcher(resolver=resolver) as fetch, pytest.raises(FetchFailed) as caught:
        fetch.fetch(FetchRequest(url="http://nowhere.example/"))
    assert caught.value.kind == "dns"


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("file:///etc/passwd", "scheme"),
        ("ftp://example.org/x", "scheme"),
        ("gopher://example.org/", "scheme"),
        ("data:text/html,hi", "scheme"),
        ("javascript:alert(1)", "scheme"),
        ("http://user:pw@example.org/", "userinfo"),
        ("http://user@example.org/", "userinfo"),
        ("http:///path", "host"),
        ("http://example.org:25/", "port"),
        ("http://example.org:0/", "port"),
        ("http://example.org/" + "a" * 8200, "url-length"),
    ],
)
def test_url_rules(url: str, rule: str) -> None:
    looked_up: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        looked_up.append(host)
        return ["93.184.215.14"]

    with fetcher(resolver=resolver) as fetch:
        error = refused(fetch, url)
    assert error.rule == rule
    assert str(error).startswith("blocked: ")
    assert looked_up == []


@pytest.mark.parametrize(
    "url", ["example.org", "not a url", "", "http:example.org", "http://ex ample.org:99999/"]
)
def test_an_unusable_url_is_invalid(url: str) -> None:
    with fetcher() as fetch, pytest.raises(QueryError) as caught:
        fetch.fetch(FetchRequest(url=url))
    assert str(caught.value).startswith("invalid url")


def test_a_pinhole_opens_its_host_and_port_only() -> None:
    with (
        PageServer({"/": page(ARTICLE)}) as site,
        Listener() as neighbour,
        Listener("127.0.0.2") as other_ip,
        fetcher(site.allow) as fetch,
    ):
        assert fetch.fetch(FetchRequest(url=site.url + "/")).status == 200
        assert refused(fetch, f"http://127.0.0.1:{neighbour.port}/").rule == "loopback"
        assert refused(fetch, f"http://127.0.0.2:{site.port}/").rule == "loopback"
        assert refused(fetch, f"http://localhost:{site.port}/").rule == "name"
        assert refused(fetch, f"http://127.0.0.2:{other_ip.port}/").rule == "loopback"
    assert neighbour.connections == 0
    assert other_ip.connections == 0
    assert site.paths() == ["/"]


def test_a_pinhole_matches_the_same_ip_literal_written_otherwise() -> None:
    hole = parse_pinhole("[::1]:8080")
    assert hole.matches("::1", 8080)
    assert hole.matches("0:0::1", 8080)
    assert not hole.matches("::1", 8081)
    assert parse_pinhole("127.0.0.1:80").matches("127.0.0.1", 80)
    assert not parse_pinhole("127.0.0.1:80").matches("127.0.0.2", 80)
    with pytest.raises(ValueError):
        parse_pinhole("127.0.0.1")


def test_a_pinholed_name_is_resolved_and_pinned_without_the_public_check() -> None:
    with PageServer({"/": page(ARTICLE)}) as site:
        guard = Guard([f"dev.example:{site.port}"], resolver=lambda host, port: ["127.0.0.1"])
        hop = guard.vet(f"http://dev.example:{site.port}/", timeout=2)
    assert hop.addresses == ("127.0.0.1",)
    assert hop.pinhole


@pytest.mark.parametrize(
    ("target", "rule"),
    [
        ("http://127.0.0.1:{idle}/", "loopback"),
        ("http://localhost:{idle}/", "name"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://[fd00:ec2::254]/", "metadata"),
        ("file:///etc/passwd", "scheme"),
        ("http://0x7f000001:{idle}/", "loopback"),
    ],
)
def test_a_redirect_from_an_allowed_page_is_vetted_again(target: str, rule: str) -> None:
    with Listener() as idle:
        location = target.format(idle=idle.port)
        with PageServer({"/": redirect(location)}) as site, fetcher(site.allow) as fetch:
            error = refused(fetch, site.url + "/")
        assert site.paths() == ["/"]
    assert error.rule == rule
    assert idle.connections == 0


def test_redirects_past_max_redirects_are_refused_before_the_next_hop() -> None:
    routes = {f"/r{i}": redirect(f"/r{i + 1}") for i in range(5)}
    routes["/r5"] = page(ARTICLE)
    with PageServer(routes) as site, fetcher(site.allow, max_redirects=2) as fetch:
        error = refused(fetch, site.url + "/r0")
        assert site.paths() == ["/r0", "/r1", "/r2"]
    assert error.rule == "redirects"
    assert str(error) == "blocked: more than 2 redirects"


def test_redirects_within_the_limit_are_followed_and_re_pinned() -> None:
    with (
        PageServer({"/": page(ARTICLE)}) as target,
        PageServer({"/go": redirect(target.url + "/", status=301)}) as start,
        fetcher(start.allow, target.allow) as fetch,
    ):
        result = fetch.fetch(FetchRequest(url=start.url + "/go"))
    assert result.url == start.url + "/go"
    assert result.final_url == target.url + "/"
    assert result.status == 200


def test_an_https_to_http_downgrade_is_refused() -> None:
    guard = Guard()
    previous = guard.vet("https://93.184.215.14/", timeout=1)
    with pytest.raises(Blocked) as caught:
        guard.vet("http://93.184.215.14/", timeout=1, previous=previous.url)
    assert caught.value.rule == "downgrade"


def test_nothing_from_the_caller_or_environment_is_forwarded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    with PageServer({"/": page(ARTICLE, headers={"Set-Cookie": "session=abc"})}) as site:
        with fetcher(site.allow) as fetch:
            fetch.fetch(FetchRequest(url=site.url + "/"))
            fetch.fetch(FetchRequest(url=site.url + "/"))
        sent = [{k.lower(): v for k, v in headers.items()} for _, headers in site.hits]
    assert all("cookie" not in headers and "authorization" not in headers for headers in sent)
    assert sent[0]["user-agent"].startswith("sift/")
