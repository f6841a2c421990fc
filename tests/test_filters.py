"""`includeTags`/`excludeTags` (natively `include`/`exclude`) keep or drop elements (issue 40)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fetchkit import PageServer, page
from gatewaykit import Gateway, call, gateway

from siftlib.config import FetchConfig
from siftlib.fetch.convert import convert

TOKEN = "filters-token"
PAGE = b"""<html lang="en"><head><title>Hinges</title></head><body>
<nav><a href="/">Home</a> <a href="/tools">Tools</a></nav>
<article>
<h1>Fixing a squeaky hinge</h1>
<p class="lead">A squeaky door hinge is almost always a dry hinge pin, and a little grease on
the pin is all it takes to quiet it for years.</p>
<div class="share">Share on every network you can think of</div>
<p>Tap the pin out with a nail set, clean it with steel wool, grease it thinly with white
lithium grease, and tap it home again before swinging the door a dozen times.</p>
<aside id="ad">Buy our premium hinge oil today</aside>
<ul><li>nail set</li><li>steel wool</li><li>lithium grease</li></ul>
</article>
<section id="comments"><p>Great tip, thanks!</p></section>
<footer>Footer words</footer>
</body></html>"""


def markdown(**options: object) -> str:
    document = convert(
        PAGE,
        content_type="text/html; charset=utf-8",
        media_type="text/html",
        url="https://example.org/hinge",
        **options,  # type: ignore[arg-type]
    )
    return document.content


def test_include_keeps_only_the_matches_in_page_order() -> None:
    got = markdown(include=("ul li:nth-child(2)", "p.lead", "#comments"))
    assert "dry hinge pin" in got and "steel wool" in got and "Great tip" in got
    assert got.index("dry hinge pin") < got.index("steel wool") < got.index("Great tip")
    assert "nail set" not in got and "Footer" not in got and "Tap the pin" not in got


def test_a_bare_tag_name_and_nested_matches_count_once() -> None:
    got = markdown(include=("article", "p"), main_content=False)
    assert got.count("dry hinge pin") == 1
    assert "Great tip" in got  # the comment's <p> matched on its own
    assert "Home" not in got and "Footer" not in got


def test_exclude_removes_matches_before_extraction() -> None:
    got = markdown(exclude=(".share", "aside", "ul"), main_content=False)
    assert "Share on every" not in got and "premium hinge oil" not in got
    assert "lithium grease" in got  # the paragraph's, not the list's
    assert "nail set" in got  # the paragraph says it too
    assert "- nail set" not in got


def test_include_then_exclude_inside_it() -> None:
    got = markdown(include=("article",), exclude=("aside", ".share"))
    assert got.startswith("# Fixing a squeaky hinge")
    assert "premium" not in got and "Share on" not in got and "Home" not in got


def test_nothing_matched_is_an_empty_page() -> None:
    assert markdown(include=("table",)).strip() == ""


@pytest.fixture
def site() -> Iterator[PageServer]:
    with PageServer({"/hinge": page(PAGE)}) as server:
        yield server


@pytest.fixture
def gw(tmp_path: Path, site: PageServer) -> Iterator[Gateway]:
    fetch = FetchConfig(allow=(site.allow,), timeout=5.0)
    with gateway(tmp_path, callers={"agent": TOKEN}, fetch=fetch) as running:
        yield running


def test_scrape_honours_include_and_exclude_tags(gw: Gateway, site: PageServer) -> None:
    body = {"url": site.url + "/hinge", "includeTags": ["article"], "excludeTags": ["aside"]}
    reply = call(gw.url, "POST", "/v2/scrape", body, token=TOKEN)
    assert reply.status == 200
    got = reply.json["data"]["markdown"]
    assert "dry hinge pin" in got and "premium" not in got and "Great tip" not in got
    assert reply.json["data"]["metadata"]["title"] == "Hinges"


def test_native_fetch_honours_include_and_exclude(gw: Gateway, site: PageServer) -> None:
    body = {"url": site.url + "/hinge", "include": ["#comments"], "format": "text"}
    reply = call(gw.url, "POST", "/v1/fetch", body, token=TOKEN)
    assert reply.status == 200 and reply.json["content"] == "Great tip, thanks!\n"
    body = {"url": site.url + "/hinge", "exclude": ["article"], "main_content": False}
    reply = call(gw.url, "POST", "/v1/fetch", body, token=TOKEN)
    assert "hinge pin" not in reply.json["content"] and "Great tip" in reply.json["content"]


@pytest.mark.parametrize(
    ("route", "field", "value", "error"),
    [
        ("/v2/scrape", "includeTags", ["div["], "includeTags has an invalid selector 'div['"),
        (
            "/v2/scrape",
            "excludeTags",
            ["a", "p:nope"],
            "excludeTags has an invalid selector 'p:nope'",
        ),
        ("/v1/fetch", "include", ["##x"], "include has an invalid selector '##x'"),
        ("/v1/fetch", "exclude", [""], "exclude has an invalid selector ''"),
        ("/v1/fetch", "exclude", "nav", "exclude must be a list of CSS selectors"),
    ],
)
def test_an_invalid_selector_is_a_400_naming_it(
    gw: Gateway, site: PageServer, route: str, field: str, value: object, error: str
) -> None:
    reply = call(gw.url, "POST", route, {"url": site.url + "/hinge", field: value}, token=TOKEN)
    assert reply.status == 400
    assert reply.json["code"] == "invalid request"
    assert reply.json["error"] == f"invalid request: {error}"
    assert site.hits == []
