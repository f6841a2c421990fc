"""The guarded fetch (fetch.md §2, §5): deadline, byte cap, content types, charsets, redirects."""

from __future__ import annotations

import gzip
import socket
import ssl
import threading
import time
import zlib
from typing import Any

import pytest
from fetchkit import PageServer, drip, hang, hostile_links, hostile_paragraphs, page

from siftlib.config import FetchConfig
from siftlib.errors import Blocked, Cancelled, FetchFailed, UnsupportedContent
from siftlib.fetch.conversion import MAIN_CONTENT_MAX_BYTES
from siftlib.fetch.fetcher import Fetcher, FetchRequest, FetchResult
from siftlib.fetch.reader import HostSlots
from siftlib.fetch.workers import WorkerPool
from siftlib.metrics import Metrics

ARTICLE = (
    "<html lang='en'><head><title>Café</title></head>"
    "<body><p>Crème brûlée für alle.</p></body></html>"
)


def fetcher(*allow: str, **options: object) -> Fetcher:
    return Fetcher(FetchConfig(allow=allow, **options), metrics=Metrics())  # type: ignore[arg-type]


def fetch_one(
    route_or_routes: object, path: str = "/", *, format_main: bool = False, **options: object
) -> object:
    routes = route_or_routes if isinstance(route_or_routes, dict) else {"/": route_or_routes}
    with PageServer(routes) as site, fetcher(site.allow, **options) as fetch:  # type: ignore[arg-type]
        return fetch.fetch(
            FetchRequest(url=site.url + path, format="text", main_content=format_main)
        )


def test_a_404_page_is_returned_as_a_page() -> None:
    body = (
        b"<html><head><title>Not here</title></head><body><p>No such page, sorry.</p></body></html>"
    )
    result = fetch_one(page(body, status=404))
    assert result.status == 404
    assert result.title == "Not here"
    assert "No such page" in result.content


def test_the_byte_cap_truncates_with_a_warning() -> None:
    body = b"<p>" + b"word " * 50_000 + b"</p>"
    result = fetch_one(page(body), max_bytes=4096)
    assert result.truncated
    assert result.bytes == 4096
    assert any("max_bytes" in warning for warning in result.warnings)


def test_a_decompression_bomb_stops_at_the_cap() -> None:
    bomb = gzip.compress(b"\0" * (16 * 1024 * 1024), compresslevel=9)  # 16 times the cap
    assert len(bomb) < 100_000
    route = page(bomb, content_type="text/plain", headers={"Content-Encoding": "gzip"})
    result = fetch_one(route, max_bytes=1024 * 1024)
    assert result.truncated
    assert result.bytes == 1024 * 1024


@pytest.mark.parametrize("wrap", [zlib.compress, lambda data: zlib.compress(data)[2:-4]])
def test_deflate_bodies_zlib_wrapped_or_raw_are_decoded(wrap: object) -> None:
    route = page(wrap(ARTICLE.encode()), headers={"Content-Encoding": "deflate"})  # type: ignore[operator]
    assert "Crème brûlée" in fetch_one(route).content


def test_a_corrupt_gzip_body_is_an_encoding_failure() -> None:
    route = page(b"\x1f\x8b\x08\x00garbage-garbage", headers={"Content-Encoding": "gzip"})
    with pytest.raises(FetchFailed) as caught:
        fetch_one(route)
    assert caught.value.kind == "encoding"


def test_a_dripping_server_is_cut_at_the_deadline() -> None:
    # Every read returns within 0.1 s, so only a wall-clock deadline ends this (1000 s) body.
    with pytest.raises(FetchFailed) as caught:
        fetch_one(drip(0.1), timeout=0.5)
    assert caught.value.kind == "deadline"


def test_a_hung_server_is_cut_at_the_deadline() -> None:
    with pytest.raises(FetchFailed) as caught:
        fetch_one(hang(5), timeout=0.5)
    assert caught.value.kind == "deadline"


def test_a_request_timeout_shorter_than_the_config_wins() -> None:
    with (
        PageServer({"/": hang(5)}) as site,
        fetcher(site.allow, timeout=30.0) as fetch,
        pytest.raises(FetchFailed) as caught,
    ):
        fetch.fetch(FetchRequest(url=site.url + "/", timeout=0.3))
    assert caught.value.kind == "deadline"


def test_a_refused_connection_is_a_connect_failure() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    with fetcher(f"127.0.0.1:{port}") as fetch, pytest.raises(FetchFailed) as caught:
        fetch.fetch(FetchRequest(url=f"http://127.0.0.1:{port}/"))
    assert caught.value.kind == "connect"
    assert str(caught.value) == "fetch failed: connect"


def test_a_server_that_closes_mid_body_is_a_cut_body() -> None:
    def cut(handler: object) -> None:
        handler.wfile.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\nshort"
        )  # type: ignore[attr-defined]
        handler.close_connection = True  # type: ignore[attr-defined]

    with pytest.raises(FetchFailed) as caught:
        fetch_one(cut)
    assert caught.value.kind == "cut"


@pytest.mark.parametrize(
    "content_type",
    [
        "image/png",
        "application/zip",
        "application/octet-stream",
        "video/mp4",
        "text/css",
    ],
)
def test_unsupported_content_types_are_refused_after_the_head(content_type: str) -> None:
    sent = threading.Event()

    def big(handler: object) -> None:
        head = (
            f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: 50000000\r\n\r\n"
        )
        handler.wfile.write(head.encode())  # type: ignore[attr-defined]
        try:
            for _ in range(200):
                handler.wfile.write(b"\0" * 65536)  # type: ignore[attr-defined]
        except OSError:
            sent.set()  # the reader hung up early

    with pytest.raises(UnsupportedContent) as caught:
        fetch_one(big)
    assert caught.value.media_type == content_type
    assert str(caught.value) == f"unsupported content type: {content_type}"
    assert sent.wait(5)


def test_a_body_without_content_type_is_sniffed() -> None:
    assert fetch_one(page(ARTICLE.encode(), content_type=None)).media_type == "text/html"
    with pytest.raises(UnsupportedContent):
        fetch_one(page(b"\x89PNG\r\n\x1a\n\0\0\0", content_type=None))


@pytest.mark.parametrize(
    ("first", "last"),
    [("text/html", "text/html; charset=utf-8"), ("text/html; charset=utf-8", "text/html")],
)
def test_a_content_type_sent_twice_is_the_last_one(first: str, last: str) -> None:
    result = fetch_one(page(ARTICLE.encode(), content_type=first, headers={"Content-Type": last}))
    assert (result.content_type, result.media_type) == (last, "text/html")
    assert result.content.strip() == "Crème brûlée für alle."


@pytest.mark.parametrize(
    ("head", "media_type"),
    [
        (b"%!PS-Adobe-3.0\n%%Title: report\n", "application/postscript"),
        (bytes(range(1, 256)), "application/octet-stream"),  # no NUL, other control bytes
    ],
)
def test_a_binary_body_without_content_type_is_refused_at_its_head(
    head: bytes, media_type: str
) -> None:
    sent = threading.Event()

    def untyped(handler: object) -> None:
        reply = b"HTTP/1.1 200 OK\r\nContent-Length: 50000000\r\n\r\n" + head
        handler.wfile.write(reply)  # type: ignore[attr-defined]
        try:
            for _ in range(200):
                handler.wfile.write(b"x" * 65536)  # type: ignore[attr-defined]
        except OSError:
            sent.set()  # the reader hung up early

    with pytest.raises(UnsupportedContent) as caught:
        fetch_one(untyped)
    assert caught.value.media_type == media_type
    assert sent.wait(5)


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        (ARTICLE.encode("utf-8"), "text/html; charset=utf-8", "Crème brûlée für alle."),
        (ARTICLE.encode("cp1252"), "text/html; charset=windows-1252", "Crème brûlée für alle."),
        (ARTICLE.encode("cp1252"), "text/html; charset=iso-8859-1", "Crème brûlée für alle."),
        (ARTICLE.encode("cp1252"), "text/html", "Crème brûlée für alle."),
        (ARTICLE.encode("cp1252"), "text/html; charset=no-such-charset", "Crème brûlée für alle."),
        (ARTICLE.encode("cp1252"), "text/html; charset=utf-8", "Cr�me br�l�e f�r alle."),
        (ARTICLE.encode("utf-8"), "text/html; charset=base64", "Crème brûlée für alle."),
        (ARTICLE.encode("cp1252"), "text/html; charset=undefined", "Crème brûlée für alle."),
        (ARTICLE.encode("cp1252"), "text/html; charset=idna", "Crème brûlée für alle."),
        (
            ARTICLE.replace("<head>", "<head><meta charset=idna>").encode("utf-8"),
            "text/html",
            "Crème brûlée für alle.",
        ),
        (
            ARTICLE.replace("<head>", "<head><meta charset='koi8-r'>").encode("koi8-r", "replace"),
            "text/html",
            "Cr?me br?l?e f?r alle.",
        ),
        (
            "<html><head><meta http-equiv='Content-Type' content='text/html; charset=Shift_JIS'>"
            "</head><body><p>日本語のページ</p></body></html>".encode("shift_jis"),
            "text/html",
            "日本語のページ",
        ),
        (
            b"\xef\xbb\xbf" + ARTICLE.encode("utf-8"),
            "text/html; charset=cp1252",
            "Crème brûlée für alle.",
        ),
    ],
)
def test_charsets_are_detected_without_a_traceback(
    body: bytes, content_type: str, expected: str
) -> None:
    result = fetch_one(page(body, content_type=content_type))
    assert result.content.strip() == expected


def test_plain_markdown_and_json_pass_through() -> None:
    routes = {
        "/t": page(b"just text\n", content_type="text/plain"),
        "/m": page(b"# Title\n\nbody\n", content_type="text/markdown; charset=utf-8"),
        "/j": page(b'{"a": 1}', content_type="application/json"),
    }
    with PageServer(routes) as site, fetcher(site.allow) as fetch:
        text = fetch.fetch(FetchRequest(url=site.url + "/t"))
        markdown = fetch.fetch(FetchRequest(url=site.url + "/m"))
        data = fetch.fetch(FetchRequest(url=site.url + "/j"))
    assert text.content == "just text\n"
    assert markdown.content == "# Title\n\nbody\n"
    assert data.content == '```json\n{"a": 1}\n```'


def test_max_chars_truncates_the_content_with_a_warning() -> None:
    body = ("<p>" + "lorem ipsum " * 1000 + "</p>").encode()
    with PageServer({"/": page(body)}) as site, fetcher(site.allow, max_chars=500) as fetch:
        capped = fetch.fetch(FetchRequest(url=site.url + "/"))
        smaller = fetch.fetch(FetchRequest(url=site.url + "/", max_chars=100))
        larger = fetch.fetch(FetchRequest(url=site.url + "/", max_chars=10_000))
    assert len(capped.content) == 500 and capped.truncated
    assert len(smaller.content) == 100
    assert len(larger.content) == 500
    assert any("max_chars" in warning for warning in capped.warnings)


def test_connections_are_kept_alive_between_fetches() -> None:
    with PageServer({"/": page(ARTICLE.encode())}) as site, fetcher(site.allow) as fetch:
        for _ in range(3):
            fetch.fetch(FetchRequest(url=site.url + "/"))
    assert len(site.peers) == 3
    assert len(set(site.peers)) == 1


def test_per_host_slots_bound_concurrency_within_the_deadline() -> None:
    slots = HostSlots(2)
    deadline = time.monotonic() + 0.2
    assert slots.acquire("a.example", deadline)
    assert slots.acquire("a.example", deadline)
    assert slots.acquire("b.example", deadline)
    assert not slots.acquire("a.example", deadline)
    slots.release("a.example")
    assert slots.acquire("a.example", time.monotonic() + 1)


def test_metrics_and_log_line_carry_no_path_or_query(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="sift")
    with (
        PageServer({"/secret/path": page(ARTICLE.encode())}) as site,
        Fetcher(FetchConfig(allow=(site.allow,)), metrics=Metrics(), restricted=["vip"]) as fetch,
    ):
        fetch.fetch(FetchRequest(url=site.url + "/secret/path?token=abc", caller="ops"))
        fetch.fetch(FetchRequest(url=site.url + "/secret/path?token=abc", caller="vip"))
        with pytest.raises(Blocked):
            fetch.fetch(FetchRequest(url="http://127.0.0.1:9999/", caller="ops"))
        snapshot = fetch.metrics.snapshot()  # type: ignore[union-attr]
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("fetch ")]
    ms = lines[0].split("ms=")[1].split()[0]
    size = len(ARTICLE.encode())
    assert lines[0] == f"fetch caller=ops host=127.0.0.1 status=200 bytes={size} ms={ms} cache=miss"
    assert "host=-" in lines[1]
    assert "status=blocked" in lines[2]
    assert all("secret" not in line and "token" not in line for line in lines)
    assert snapshot["fetch_requests"] == {
        "caller=ops,outcome=blocked": 1,
        "caller=ops,outcome=ok": 1,
        "caller=vip,outcome=ok": 1,
    }
    assert snapshot["fetch_blocked"] == {"rule=loopback": 1}
    assert snapshot["fetch_bytes"] == len(ARTICLE.encode())  # the restricted vip's are not in it


def test_a_fault_of_our_own_is_counted_as_an_error_not_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr("siftlib.fetch.workers.WorkerPool.run", broken)
    with (
        PageServer({"/a": page(ARTICLE.encode())}) as site,
        Fetcher(FetchConfig(allow=(site.allow,)), metrics=Metrics()) as fetch,
    ):
        with pytest.raises(RuntimeError):
            fetch.fetch(FetchRequest(url=site.url + "/a", caller="ops"))
        snapshot = fetch.metrics.snapshot()  # type: ignore[union-attr]
    assert snapshot["fetch_requests"] == {"caller=ops,outcome=error": 1}


@pytest.fixture
def ca() -> Any:
    import trustme

    return trustme.CA()


def tls_site(ca: Any, name: str, names: list[str | None]) -> PageServer:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert(name).configure_cert(context)
    context.sni_callback = lambda sock, sni, ctx: names.append(sni)  # type: ignore[assignment,misc,return-value]
    return PageServer({"/": page(ARTICLE.encode())}, ssl_context=context)


def tls_fetcher(allow: str, ca: Any, *, trust: bool = True) -> Fetcher:
    context = ssl.create_default_context()
    if trust:
        ca.configure_trust(context)
    return Fetcher(
        FetchConfig(allow=(allow,), timeout=5.0),
        resolver=lambda host, port: ["127.0.0.1"],
        ssl_context=context,
    )


def test_https_is_verified_for_the_urls_host_with_sni(ca: Any) -> None:
    names: list[str | None] = []
    with tls_site(ca, "pages.example", names) as site:
        url = f"https://pages.example:{site.port}/"
        with tls_fetcher(f"pages.example:{site.port}", ca) as fetch:
            result = fetch.fetch(FetchRequest(url=url, format="text"))
    assert result.status == 200 and "Crème brûlée" in result.content
    assert names == ["pages.example"]


def test_a_certificate_for_another_name_is_a_tls_failure(ca: Any) -> None:
    with tls_site(ca, "other.example", []) as site:
        url = f"https://pages.example:{site.port}/"
        with (
            tls_fetcher(f"pages.example:{site.port}", ca) as fetch,
            pytest.raises(FetchFailed) as caught,
        ):
            fetch.fetch(FetchRequest(url=url))
        assert site.hits == []
    assert caught.value.kind == "tls"


def test_a_certificate_from_an_untrusted_ca_is_a_tls_failure(ca: Any) -> None:
    with tls_site(ca, "pages.example", []) as site:
        url = f"https://pages.example:{site.port}/"
        with (
            tls_fetcher(f"pages.example:{site.port}", ca, trust=False) as fetch,
            pytest.raises(FetchFailed) as caught,
        ):
            fetch.fetch(FetchRequest(url=url))
        assert site.hits == []
    assert caught.value.kind == "tls"


def test_a_context_that_does_not_verify_is_refused() -> None:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        PageServer({"/": page(ARTICLE.encode())}) as site,
        Fetcher(FetchConfig(allow=(site.allow,)), ssl_context=context) as fetch,
        pytest.raises(ValueError),
    ):
        fetch.fetch(FetchRequest(url=f"https://{site.allow}/"))


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


# A page of this many links takes ~2 CPU-s to convert (1.7 MB, read in a moment): twice the
# deadline below, and four times the cancel's delay, even on an idle machine.
SLOW_LINKS = 60_000


def worker_pids(pool: WorkerPool) -> set[int]:
    return {pool.run(eval, b"__import__('os').getpid()", deadline=time.monotonic() + 30)}


def test_the_first_fetch_starts_the_workers() -> None:
    """A pool nothing started converts the first fetch; the workers it starts stay bounded."""
    with (
        WorkerPool(2, preload=("siftlib.fetch.convert",)) as pool,
        PageServer({"/": page(b"<p>first fetch of a cold pool</p>")}) as site,
        Fetcher(FetchConfig(allow=(site.allow,)), pool=pool) as fetch,
    ):
        assert pool._started == 0
        result = fetch.fetch(FetchRequest(url=site.url + "/", main_content=False))
        assert "first fetch of a cold pool" in result.content
        assert 1 <= pool._started <= 2


def test_fetches_racing_for_the_shared_pool_open_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from siftlib.fetch import conversion

    monkeypatch.setattr(conversion, "_POOL", None)
    go = threading.Barrier(8)
    pools: list[WorkerPool] = []

    def first() -> None:
        go.wait()
        pools.append(conversion.conversion_pool())

    threads = [threading.Thread(target=first) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(pools) == 8 and len({id(pool) for pool in pools}) == 1
    assert pools[0]._started == 0  # asking for the pool starts no worker
    pools[0].close()


def test_the_deadline_covers_the_conversion_and_stops_it() -> None:
    """A page that costs seconds to convert ends at the fetch's deadline, its worker killed."""
    with (
        WorkerPool(1, preload=("siftlib.fetch.convert",)) as pool,
        PageServer({"/": page(hostile_links(SLOW_LINKS))}) as site,
        Fetcher(FetchConfig(allow=(site.allow,), timeout=1.0), pool=pool) as fetch,
    ):
        before = worker_pids(pool)
        with pytest.raises(FetchFailed) as failed:
            fetch.fetch(FetchRequest(url=site.url + "/", main_content=False))
        assert failed.value.kind == "deadline"
        assert "converting the page" in str(failed.value)
        assert not any(pid_alive(pid) for pid in before)
        assert worker_pids(pool) != before  # replaced, and serving


def test_a_cancelled_fetch_stops_its_conversion() -> None:
    cancel = threading.Event()
    with (
        WorkerPool(1, preload=("siftlib.fetch.convert",)) as pool,
        PageServer({"/": page(hostile_links(SLOW_LINKS))}) as site,
        Fetcher(FetchConfig(allow=(site.allow,)), pool=pool) as fetch,
    ):
        before = worker_pids(pool)
        threading.Timer(0.5, cancel.set).start()
        with pytest.raises(Cancelled):
            fetch.fetch(FetchRequest(url=site.url + "/", main_content=False), cancel=cancel)
        assert not any(pid_alive(pid) for pid in before)


def test_a_cancelled_fetch_stops_reading_the_page() -> None:
    cancel = threading.Event()
    with PageServer({"/": drip(0.05)}) as site, fetcher(site.allow) as fetch:
        threading.Timer(0.3, cancel.set).start()
        with pytest.raises(Cancelled):
            fetch.fetch(FetchRequest(url=site.url + "/"), cancel=cancel)
        snapshot = fetch.metrics.snapshot()  # type: ignore[union-attr]
    assert snapshot["fetch_requests"] == {"caller=local,outcome=cancelled": 1}


def test_a_page_too_large_for_main_content_is_converted_whole_with_a_warning() -> None:
    body = hostile_paragraphs(MAIN_CONTENT_MAX_BYTES + 100_000)
    result = fetch_one(page(body), format_main=True)
    assert isinstance(result, FetchResult)
    assert result.content.startswith("word word")
    assert any(w.startswith("main content: the page passed") for w in result.warnings)


def test_max_chars_cuts_every_format() -> None:
    body = b"<html><body><p>" + b"long text " * 2000 + b"</p></body></html>"
    with PageServer({"/": page(body)}) as site, fetcher(site.allow) as fetch:
        result = fetch.fetch(
            FetchRequest(url=site.url + "/", also=("raw_html", "html", "text"), max_chars=100)
        )
    assert len(result.content) == 100
    assert {name: len(text) for name, text in result.also.items()} == {
        "raw_html": 100,
        "html": 100,
        "text": 100,
    }
    assert result.truncated
    assert result.warnings == ["truncated: the content passed max_chars (100 characters)"]
