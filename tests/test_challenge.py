"""Challenge and block pages are a fetch failure `blocked by the site`, never content (issue 40)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from bodykit import TESTDATA_FETCH
from fetchkit import PageServer, page
from gatewaykit import Gateway, call, gateway

from siftlib.cli import main
from siftlib.config import FetchConfig
from siftlib.fetch.challenge import challenge_of

BLOCKED = TESTDATA_FETCH / "blocked"
TOKEN = "challenge-token"
CLOUDFLARE = {"Server": "cloudflare", "CF-RAY": "8f1c2a3b4d5e6f70-FRA"}
# (page, status, headers as the vendor sends them, what sift names it)
KINDS = [
    (
        "cloudflare-just-a-moment",
        403,
        {**CLOUDFLARE, "cf-mitigated": "challenge"},
        "a Cloudflare challenge",
    ),
    ("cloudflare-just-a-moment", 503, CLOUDFLARE, "a Cloudflare challenge"),
    ("cloudflare-attention-required", 403, CLOUDFLARE, "a Cloudflare block"),
    ("captcha-unusual-traffic", 429, {}, "a CAPTCHA wall"),
    ("captcha-unusual-traffic", 200, {}, "a CAPTCHA wall"),
    (
        "datadome-block",
        403,
        {"X-DataDome": "protected", "X-DD-B": "1", "Server": "DataDome"},
        "a DataDome block",
    ),
    ("akamai-access-denied", 403, {"Server": "AkamaiGHost"}, "an Akamai block"),
    ("perimeterx-press-and-hold", 403, {}, "a PerimeterX block"),
    ("imperva-incident", 200, {"X-CDN": "Imperva"}, "an Imperva block"),
    ("consent-wall", 200, {}, "a consent wall"),
]


def _body(name: str) -> bytes:
    return (BLOCKED / f"{name}.html").read_bytes()


@pytest.mark.parametrize(("name", "status", "headers", "what"), KINDS)
def test_each_kind_is_named(name: str, status: int, headers: dict[str, str], what: str) -> None:
    lowered = {key.lower(): value for key, value in headers.items()}
    assert challenge_of(status=status, headers=lowered, body=_body(name)) == what


def test_a_challenge_header_alone_is_proof() -> None:
    headers = {"cf-mitigated": "challenge"}
    assert challenge_of(status=200, headers=headers, body=b"<p>x</p>") == "a Cloudflare challenge"


def test_a_consent_host_is_a_wall_whatever_it_says() -> None:
    body = b"<html><body><p>Redirecting</p></body></html>"
    url = "https://consent.google.com/ml?continue=https://www.google.com/maps"
    assert challenge_of(status=200, headers={}, body=body, url=url) == "a consent wall"


@pytest.mark.parametrize("status", [200, 403, 429, 503])
def test_an_ordinary_error_page_is_a_page(status: int) -> None:
    assert challenge_of(status=status, headers={}, body=_body("ordinary-403")) is None


def test_vendor_scripts_and_widgets_on_an_article_are_not_a_wall() -> None:
    """Cloudflare's detection script, `_pxAppId`, a reCAPTCHA on a comment form, a banner."""
    assert challenge_of(status=200, headers={}, body=_body("ordinary-with-widgets")) is None


def test_no_labelled_page_is_taken_for_a_challenge() -> None:
    pages = sorted(TESTDATA_FETCH.glob("*.html"))
    assert pages
    for path in pages:
        assert challenge_of(status=200, headers={}, body=path.read_bytes()) is None, path.name


@pytest.fixture
def site() -> Iterator[PageServer]:
    routes = {
        f"/{index}": page(_body(name), status=status, headers=headers)
        for index, (name, status, headers, _) in enumerate(KINDS)
    }
    routes["/forbidden"] = page(_body("ordinary-403"), status=403)
    routes["/article"] = page(_body("ordinary-with-widgets"))
    with PageServer(routes) as server:
        yield server


@pytest.fixture
def gw(tmp_path: Path, site: PageServer) -> Iterator[Gateway]:
    fetch = FetchConfig(allow=(site.allow,), timeout=5.0)
    with gateway(tmp_path, callers={"agent": TOKEN}, fetch=fetch) as running:
        yield running


def test_scrape_answers_blocked_by_the_site_with_the_upstream_status(
    gw: Gateway, site: PageServer
) -> None:
    for index, (_, status, _, what) in enumerate(KINDS):
        reply = call(gw.url, "POST", "/v2/scrape", {"url": f"{site.url}/{index}"}, token=TOKEN)
        body = reply.json
        assert reply.status == 403, body
        assert body["success"] is False
        assert body["code"] == "blocked by the site"
        assert body["error"] == f"blocked by the site: {what} (HTTP {status})"
        assert body["metadata"]["statusCode"] == status
        assert body["data"]["metadata"]["statusCode"] == status
        assert "markdown" not in body["data"]


def test_native_fetch_answers_blocked_by_the_site(gw: Gateway, site: PageServer) -> None:
    reply = call(gw.url, "POST", "/v1/fetch", {"url": site.url + "/0"}, token=TOKEN)
    assert reply.status == 403
    assert reply.json["error"] == "blocked by the site: a Cloudflare challenge (HTTP 403)"
    assert reply.json["code"] == "blocked by the site"
    assert reply.json["status"] == 403
    metrics = call(gw.url, "GET", "/metrics", token=TOKEN).json
    assert metrics["fetch_blocked"] == {"rule=site": 1}


def test_an_ordinary_403_stays_a_page_with_its_status(gw: Gateway, site: PageServer) -> None:
    reply = call(gw.url, "POST", "/v2/scrape", {"url": site.url + "/forbidden"}, token=TOKEN)
    body = reply.json
    assert reply.status == 200 and body["success"] is True
    assert body["data"]["metadata"]["statusCode"] == 403
    assert "staff directory" in body["data"]["markdown"]
    article = call(gw.url, "POST", "/v1/fetch", {"url": site.url + "/article"}, token=TOKEN)
    assert article.status == 200
    assert "dry hinge pin" in article.json["content"]


def test_cli_exits_4_with_one_sentence(
    tmp_path: Path, site: PageServer, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[fetch]\nallow = ["{site.allow}"]\ntimeout = "5s"\n')
    assert main(["fetch", site.url + "/5", "--config", str(path)]) == 4
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "sift fetch: blocked by the site: a DataDome block (HTTP 403)\n"


def test_cli_through_a_server_exits_4_too(
    gw: Gateway,
    site: PageServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIFT_TOKEN", TOKEN)
    assert main(["fetch", site.url + "/6", "--server", gw.url]) == 4
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "sift fetch: blocked by the site: an Akamai block (HTTP 403)\n"
