"""`POST /v1/fetch` and `POST /v2/scrape` on a real gateway (fetch.md §4)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fetchkit import Listener, PageServer, hang, page
from gatewaykit import Gateway, call, gateway

from siftlib.config import FetchConfig
from siftlib.fetch.pagetype import PAGE_TYPES

TOKEN = "fetch-token-1"
ARTICLE = (
    b"<html lang='en'><head><title>Tram line approved</title>"
    b"<meta name='description' content='Council vote.'></head><body>"
    b"<nav><a href='/'>Home</a></nav><article><h1>Tram line approved</h1>"
    b"<p>The council voted for the tram after a decade of debate, and building starts in"
    b" spring. Read the <a href='/plan'>plan</a>.</p></article><footer>Footer</footer>"
    b"</body></html>"
)
GUARD = "the fetch guard reads public addresses only; [fetch] allow opens one host:port"


@pytest.fixture
def site() -> Iterator[PageServer]:
    routes = {
        "/a": page(ARTICLE),
        "/gone": page(b"<html><body><p>This page is gone.</p></body></html>", status=404),
        "/f.png": page(b"\x89PNG\r\n\x1a\n", content_type="image/png"),
        "/slow": hang(10),
    }
    with PageServer(routes) as server:
        yield server


@pytest.fixture
def gw(tmp_path: Path, site: PageServer) -> Iterator[Gateway]:
    fetch = FetchConfig(allow=(site.allow,), timeout=5.0)
    with gateway(tmp_path, callers={"agent": TOKEN}, fetch=fetch) as running:
        yield running


def scrape(gw: Gateway, body: dict[str, object], token: str | None = TOKEN) -> object:
    return call(gw.url, "POST", "/v2/scrape", body, token=token)


def test_native_fetch_envelope(gw: Gateway, site: PageServer) -> None:
    reply = call(gw.url, "POST", "/v1/fetch", {"url": site.url + "/a"}, token=TOKEN)
    assert reply.status == 200
    body = reply.json
    assert set(body) == {
        "url",
        "final_url",
        "status",
        "content_type",
        "title",
        "description",
        "language",
        "content",
        "links",
        "truncated",
        "warnings",
        "page_type",
        "timings",
    }
    assert body["page_type"] in PAGE_TYPES  # a guess from the URL and markup (pagetype.py)
    assert body["url"] == body["final_url"] == site.url + "/a"
    assert (body["status"], body["content_type"]) == (200, "text/html")
    assert (body["title"], body["description"], body["language"]) == (
        "Tram line approved",
        "Council vote.",
        "en",
    )
    assert body["content"].startswith("# Tram line approved\n\nThe council voted")
    assert f"[plan]({site.url}/plan)" in body["content"]
    assert "Footer" not in body["content"]
    assert body["links"] == [site.url + "/", site.url + "/plan"]
    assert body["truncated"] is False and body["warnings"] == []
    assert set(body["timings"]) == {"fetch_ms", "convert_ms"}


def test_native_fetch_formats_and_max_chars(gw: Gateway, site: PageServer) -> None:
    text = call(
        gw.url,
        "POST",
        "/v1/fetch",
        {"url": site.url + "/a", "format": "text", "main_content": False, "max_chars": 40},
        token=TOKEN,
    ).json
    assert text["content"] == "Home\n\nTram line approved\n\nThe council vo"
    assert text["truncated"] is True and "max_chars" in text["warnings"][0]
    bad = call(gw.url, "POST", "/v1/fetch", {"url": site.url, "format": "pdf"}, token=TOKEN)
    assert bad.status == 400 and bad.json["code"] == "invalid request"


def test_scrape_without_options(gw: Gateway, site: PageServer) -> None:
    reply = scrape(gw, {"url": site.url + "/a", "origin": "python-sdk@4.17.0"})
    assert reply.status == 200
    body = reply.json
    assert body["success"] is True
    assert set(body["data"]) == {"markdown", "metadata"}
    metadata = body["data"]["metadata"]
    assert metadata == {
        "title": "Tram line approved",
        "description": "Council vote.",
        "language": "en",
        "sourceURL": site.url + "/a",
        "url": site.url + "/a",
        "statusCode": 200,
        "contentType": "text/html; charset=utf-8",
        "proxyUsed": "basic",
        "cacheState": "miss",
        "scrapeId": metadata["scrapeId"],
        "pageType": body["data"]["metadata"]["pageType"],
    }
    assert metadata["pageType"] in PAGE_TYPES
    assert uuid.UUID(metadata["scrapeId"]).version == 4
    assert "warning" not in body


def test_scrape_with_the_sdks_default_options_and_every_format(
    gw: Gateway, site: PageServer
) -> None:
    body = {
        "url": site.url + "/a",
        "formats": ["markdown", {"type": "links"}, "html", "rawHtml"],
        "onlyMainContent": True,
        "mobile": False,
        "skipTlsVerification": True,
        "removeBase64Images": True,
        "fastMode": False,
        "blockAds": True,
        "maxAge": 14400000,
        "storeInCache": True,
        "timeout": 4000,
        "waitFor": 3000,
        "headers": {"Cookie": "secret=1"},
        "origin": "python-sdk@4.17.0",
    }
    data = scrape(gw, body).json["data"]
    assert set(data) == {"markdown", "links", "html", "rawHtml", "metadata"}
    assert data["links"] == [site.url + "/", site.url + "/plan"]
    assert "<h1>Tram line approved</h1>" in data["html"] and "Footer" not in data["html"]
    assert data["rawHtml"] == ARTICLE.decode()
    assert all("cookie" not in {k.lower() for k in headers} for _, headers in site.hits)


def test_scrape_whole_page_on_request(gw: Gateway, site: PageServer) -> None:
    data = scrape(gw, {"url": site.url + "/a", "onlyMainContent": False}).json["data"]
    assert "Footer" in data["markdown"] and "Home" in data["markdown"]


def test_an_upstream_404_is_a_successful_scrape(gw: Gateway, site: PageServer) -> None:
    reply = scrape(gw, {"url": site.url + "/gone"})
    assert reply.status == 200
    assert reply.json["success"] is True
    assert reply.json["data"]["metadata"]["statusCode"] == 404
    assert "This page is gone." in reply.json["data"]["markdown"]


@pytest.mark.parametrize(
    ("extra", "name"),
    [
        ({"formats": ["json"]}, "json"),
        ({"formats": [{"type": "screenshot"}]}, "screenshot"),
        ({"formats": ["summary"]}, "summary"),
        ({"formats": ["changeTracking"]}, "changeTracking"),
        ({"actions": [{"type": "click", "selector": "#x"}]}, "actions"),
        ({"location": {"country": "DE"}}, "location"),
        ({"proxy": "stealth"}, "proxy"),
    ],
)
def test_unsupported_options_are_refused_by_name(
    gw: Gateway, site: PageServer, extra: dict[str, object], name: str
) -> None:
    reply = scrape(gw, {"url": site.url + "/a", **extra})
    assert reply.status == 400
    assert reply.json == {
        "success": False,
        "error": f"unsupported option: {name}",
        "code": "unsupported option",
        "details": "this gateway serves the scrape options its docs list, no others",
    }
    assert site.hits == []


def test_a_blocked_url_is_a_400_and_reaches_nothing(gw: Gateway) -> None:
    with Listener() as idle:
        reply = scrape(gw, {"url": f"http://127.0.0.1:{idle.port}/admin"})
    assert reply.status == 400
    assert reply.json == {
        "success": False,
        "error": "blocked: 127.0.0.1 is a loopback address "
        f'(to read it on this machine, add "127.0.0.1:{idle.port}" to [fetch] allow)',
        "code": "blocked",
        "details": GUARD,
    }
    assert idle.connections == 0
    native = call(gw.url, "POST", "/v1/fetch", {"url": "http://10.0.0.1/"}, token=TOKEN)
    assert native.status == 400
    assert native.json == {
        "error": "blocked: 10.0.0.1 is a private address",
        "code": "blocked",
        "details": GUARD,
    }


@pytest.mark.parametrize("url", ["not a url", "", 42, None])
def test_an_invalid_url_is_a_400(gw: Gateway, url: object) -> None:
    reply = scrape(gw, {"url": url})
    assert reply.status == 400
    assert reply.json["success"] is False and reply.json["code"] == "invalid url"


def test_an_unsupported_content_type_is_a_415(gw: Gateway, site: PageServer) -> None:
    reply = scrape(gw, {"url": site.url + "/f.png"})
    assert reply.status == 415
    assert reply.json == {
        "success": False,
        "error": "unsupported content type: image/png",
        "code": "unsupported content type",
        "details": "the page is of a content type fetch does not read",
    }


def test_a_fetch_past_its_timeout_is_a_408(gw: Gateway, site: PageServer) -> None:
    reply = scrape(gw, {"url": site.url + "/slow", "timeout": 300})
    assert reply.status == 408
    assert reply.json == {
        "success": False,
        "error": "fetch failed: deadline",
        "code": "deadline",
        "details": "the fetch ran past its deadline (fetch.timeout, or the request's timeout)",
    }


def test_a_failed_connection_is_a_500_never_a_502(tmp_path: Path) -> None:
    with Listener() as closed:
        port = closed.port
    fetch = FetchConfig(allow=(f"127.0.0.1:{port}",))
    with gateway(tmp_path, fetch=fetch) as running:
        reply = call(running.url, "POST", "/v2/scrape", {"url": f"http://127.0.0.1:{port}/"})
    assert reply.status == 500
    assert reply.json == {
        "success": False,
        "error": "fetch failed: connect",
        "code": "fetch failed",
        "details": "the page could not be fetched; the error names the step that failed",
    }


def test_auth_and_body_errors_in_the_fetch_shape(gw: Gateway, site: PageServer) -> None:
    unauthorized = scrape(gw, {"url": site.url + "/a"}, token="wrong")
    assert unauthorized.status == 401
    assert unauthorized.json["success"] is False and "code" in unauthorized.json
    broken = call(gw.url, "POST", "/v2/scrape", b"{not json", token=TOKEN)
    assert broken.status == 400
    assert broken.json == {
        "success": False,
        "error": "invalid request: the body is not valid JSON",
        "code": "invalid request",
        "details": "the request or one of its fields is not valid",
    }
    large = call(gw.url, "POST", "/v1/fetch", b"x" * 70_000, token=TOKEN)
    assert large.status == 413 and "success" not in large.json
    assert site.hits == []


def test_fetch_is_404_when_disabled(tmp_path: Path) -> None:
    with gateway(tmp_path) as running:
        reply = call(running.url, "POST", "/v1/fetch", {"url": "https://example.org/"})
    assert reply.status == 404
    assert reply.json["error"].startswith("not found")


def test_metrics_count_fetches_without_urls(gw: Gateway, site: PageServer) -> None:
    scrape(gw, {"url": site.url + "/a"})
    scrape(gw, {"url": "http://169.254.169.254/latest/meta-data/"})
    metrics = call(gw.url, "GET", "/metrics", token=TOKEN).json
    assert metrics["fetch_requests"] == {
        "caller=agent,outcome=blocked": 1,
        "caller=agent,outcome=ok": 1,
    }
    assert metrics["fetch_blocked"] == {"rule=metadata": 1}
    assert metrics["fetch_bytes"] == len(ARTICLE)
    assert "169.254" not in str(metrics) and "/a" not in str(metrics)


def test_serve_opens_a_fetcher_only_when_fetch_is_enabled(tmp_path: Path) -> None:
    from siftlib.backend import LocalBackend
    from siftlib.commands.serve import open_fetcher
    from siftlib.config import Secrets, load_config

    path = tmp_path / "config.toml"
    path.write_text("[fetch]\nenabled = false\n")
    assert open_fetcher(LocalBackend.over(load_config(str(path)), Secrets({}, environ={}))) is None
    path.write_text('[fetch]\nallow = ["127.0.0.1:8080"]\nper_host = 2\n')
    fetcher = open_fetcher(LocalBackend.over(load_config(str(path)), Secrets({}, environ={})))
    assert fetcher is not None
    assert fetcher.settings.per_host == 2
    assert [hole.port for hole in fetcher.guard.pinholes] == [8080]
    fetcher.close()


def test_a_gateway_exiting_early_stops_its_starting_conversion_workers(tmp_path: Path) -> None:
    """No worker starts with the gateway; the ones a first fetch starts end with the process."""
    import subprocess
    import sys

    (tmp_path / "config.toml").write_text("[fetch]\n")
    script = f"""
import sys
from siftlib.backend import LocalBackend
from siftlib.commands import serve
from siftlib.config import Secrets, load_config
from siftlib.fetch import conversion

serve.open_fetcher(
    LocalBackend.over(load_config({str(tmp_path / "config.toml")!r}), Secrets({{}}, environ={{}}))
)
print(conversion._POOL is None)
conversion.conversion_pool().start()  # what fetches start
print(" ".join(str(w.process.pid) for w in conversion.conversion_pool()._idle))
sys.exit(0)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=30)
    assert (done.returncode, done.stderr) == (0, b"")
    unstarted, _, started = done.stdout.partition(b"\n")
    assert unstarted == b"True"  # open_fetcher started no worker
    pids = [int(pid) for pid in started.split()]
    assert pids  # the workers were starting
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
