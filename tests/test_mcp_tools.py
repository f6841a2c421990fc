"""The MCP tools over the real libraries: a pipeline on loopback fakes, a gateway, a catalog."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clikit import sift
from gatewaykit import FakeUpstream, gateway, write_config
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

import siftlib.skills.keyword
from siftlib.config import FetchConfig
from siftlib.mcp.protocol import ArgumentError, Tool, ToolResult
from siftlib.mcp.schemas import check_arguments
from siftlib.mcp.tools import SkillsPlace, Toolbox, Where
from siftlib.skills.relevance import RelevanceIndex

CATALOG = Path(__file__).resolve().parents[1] / "testdata" / "skills" / "catalog"


def open_toolbox(
    tmp_path: Path, *, config: Path | None = None, server: str | None = None
) -> Toolbox:
    named = str(config) if config is not None else None
    return Toolbox(
        Where(config=named, server=server, local=False, allow_private_upstreams=True),
        skills=SkillsPlace(skills_dirs=(CATALOG,), cwd=tmp_path),
    )


@pytest.fixture
def box(tmp_path: Path, searxng: FakeUpstream) -> Iterator[Toolbox]:
    toolbox = open_toolbox(tmp_path, config=write_config(tmp_path, searxng=searxng.url))
    yield toolbox
    toolbox.close()


def run(toolbox: Toolbox, name: str, arguments: dict[str, Any]) -> ToolResult:
    tool = {tool.name: tool for tool in toolbox.tools()}[name]
    return tool.run(tool.check(arguments), threading.Event())


def test_the_tools_as_listed(box: Toolbox) -> None:
    tools = {tool.name: tool.to_wire() for tool in box.tools()}
    assert list(tools) == ["web_search", "web_fetch", "skill_search"]
    search = tools["web_search"]
    assert search["title"] and search["description"]
    assert search["inputSchema"]["additionalProperties"] is False
    assert search["inputSchema"]["required"] == ["query"]
    assert search["inputSchema"]["properties"]["query"] == {
        "type": "string",
        "minLength": 1,
        "maxLength": 1500,
        "description": "What to search for, as typed into a search engine.",
    }
    assert search["inputSchema"]["properties"]["limit"]["default"] == 8
    assert search["outputSchema"]["type"] == "object"
    assert search["annotations"] == {
        "title": "Web search",
        "readOnlyHint": True,
        "openWorldHint": True,
    }
    fetch = tools["web_fetch"]
    assert fetch["inputSchema"]["required"] == ["url"]
    assert fetch["inputSchema"]["additionalProperties"] is False
    assert {
        name: rules.get("default") for name, rules in fetch["inputSchema"]["properties"].items()
    } == {
        "url": None,
        "format": "markdown",
        "main_content": True,
        "max_chars": 20000,
    }
    assert fetch["inputSchema"]["properties"]["format"]["enum"] == ["markdown", "text", "links"]
    assert fetch["annotations"] == {
        "title": "Read a web page",
        "readOnlyHint": True,
        "openWorldHint": True,
    }
    skills = tools["skill_search"]
    assert skills["inputSchema"]["properties"]["limit"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 10,
        "default": 5,
        "description": "How many skills to return at most.",
    }
    assert skills["annotations"]["openWorldHint"] is False
    assert skills["annotations"]["readOnlyHint"] is True


# web_search


def test_web_search_runs_the_pipeline_in_process(box: Toolbox, searxng: FakeUpstream) -> None:
    result = run(box, "web_search", {"query": "  sqlite   wal "})
    assert result.is_error is False
    structured = result.structured
    assert structured is not None
    assert structured["query"] == "  sqlite   wal "
    assert structured["cached"] is False and structured["warnings"] == []
    hits = structured["results"]
    assert 0 < len(hits) <= 8
    assert [hit["position"] for hit in hits] == list(range(1, len(hits) + 1))
    assert {hit["source"] for hit in hits} == {"searxng"}
    assert set(hits[0]) == {"position", "title", "url", "snippet", "source"}
    assert result.text.startswith(f"1. {' '.join(hits[0]['title'].split())}\n   {hits[0]['url']}")
    assert "{" not in result.text
    assert searxng.calls[0].path.startswith("/search?q=sqlite+wal&format=json")

    again = run(box, "web_search", {"query": "sqlite wal", "limit": 8})
    assert again.structured is not None and again.structured["cached"] is True
    assert again.structured["results"] == hits
    assert again.text.endswith("(from sift's cache)")
    assert len(searxng.calls) == 1


def test_web_search_limit(box: Toolbox) -> None:
    result = run(box, "web_search", {"query": "sqlite wal", "limit": 2})
    assert result.structured is not None and len(result.structured["results"]) == 2


def test_a_blank_query_is_a_tool_error(box: Toolbox) -> None:
    result = run(box, "web_search", {"query": "   "})
    assert result.is_error is True and result.structured is None
    assert result.text == "Invalid query: the query is empty."


def test_no_source_enabled_is_a_tool_error_naming_the_keys(tmp_path: Path) -> None:
    toolbox = open_toolbox(tmp_path, config=write_config(tmp_path))
    result = run(toolbox, "web_search", {"query": "x"})
    assert result.is_error is True
    assert "search.searxng.enabled" in result.text and str(tmp_path) in result.text
    toolbox.close()


def test_every_source_failing_is_a_tool_error_with_the_warnings(tmp_path: Path) -> None:
    broken = FakeUpstream(b"{}", status=500)
    toolbox = open_toolbox(tmp_path, config=write_config(tmp_path, searxng=broken.url))
    try:
        result = run(toolbox, "web_search", {"query": "x"})
    finally:
        toolbox.close()
        broken.close()
    assert result.is_error is True
    assert result.text == "No search results: every source failed (searxng: 500)."


def test_web_search_through_a_gateway(tmp_path: Path, searxng: FakeUpstream) -> None:
    (tmp_path / "gw").mkdir()
    with gateway(tmp_path / "gw", searxng=searxng.url) as gw:
        toolbox = open_toolbox(tmp_path, server=gw.url)
        result = run(toolbox, "web_search", {"query": "sqlite wal", "limit": 3})
        toolbox.close()
    assert result.structured is not None
    assert [hit["position"] for hit in result.structured["results"]] == [1, 2, 3]
    assert len(searxng.calls) == 1


def test_client_toml_sends_searches_to_the_gateway(tmp_path: Path, searxng: FakeUpstream) -> None:
    (tmp_path / "gw").mkdir()
    with gateway(tmp_path / "gw", searxng=searxng.url, callers={"agent": "tok-1"}) as gw:
        client_toml = Path(os.environ["XDG_CONFIG_HOME"]) / "sift" / "client.toml"
        client_toml.parent.mkdir(parents=True, exist_ok=True)
        client_toml.write_text(f'url = "{gw.url}"\ntoken = "tok-1"\n')
        toolbox = open_toolbox(tmp_path)
        result = run(toolbox, "web_search", {"query": "sqlite wal"})
        toolbox.close()
    assert result.is_error is False and len(searxng.calls) == 1


def test_an_unreachable_gateway_says_to_fall_back(tmp_path: Path) -> None:
    closed = FakeUpstream()
    url = closed.url
    closed.close()
    toolbox = open_toolbox(tmp_path, server=url)
    result = run(toolbox, "web_search", {"query": "x"})
    toolbox.close()
    assert result.is_error is True
    assert result.text.endswith("; use your built-in web search instead.")
    assert result.text.count(". ") == 0  # one sentence (mcp.md)
    assert url in result.text


# web_fetch

PAGE = (CATALOG.parents[1] / "fetch" / "docs-page.html").read_bytes()


@pytest.fixture
def page(httpserver: HTTPServer) -> str:
    """A loopback HTML page; return its URL."""
    httpserver.expect_request("/docs").respond_with_data(
        PAGE, content_type="text/html; charset=utf-8"
    )
    return httpserver.url_for("/docs")


def fetch_config(tmp_path: Path, url: str, *, enabled: bool = True) -> Path:
    """Write a config whose `[fetch] allow` pinhole opens the page's host:port only."""
    pinhole = url.split("/")[2]
    path = tmp_path / "config.toml"
    path.write_text(f'[fetch]\nenabled = {str(enabled).lower()}\nallow = ["{pinhole}"]\n')
    return path


def test_web_fetch_reads_a_page_as_markdown(tmp_path: Path, page: str) -> None:
    toolbox = open_toolbox(tmp_path, config=fetch_config(tmp_path, page))
    try:
        result = run(toolbox, "web_fetch", {"url": page})
        short = run(toolbox, "web_fetch", {"url": page, "max_chars": 40, "format": "text"})
    finally:
        toolbox.close()
    structured = result.structured
    assert result.is_error is False and structured is not None
    assert set(structured) == {
        "url",
        "final_url",
        "status",
        "title",
        "content",
        "truncated",
        "warnings",
    }
    assert structured["url"] == structured["final_url"] == page
    assert structured["status"] == 200 and structured["truncated"] is False
    assert structured["title"] and "#" in structured["content"]
    assert result.text.startswith(f"{structured['title']} ({page}, status 200)\n\n")
    assert result.text.endswith(structured["content"])
    assert short.structured is not None and short.structured["truncated"] is True
    assert len(short.structured["content"]) <= 40
    assert "truncated" in short.text.splitlines()[0]


def test_a_cancelled_web_search_calls_no_source(box: Toolbox, searxng: FakeUpstream) -> None:
    tool = {tool.name: tool for tool in box.tools()}["web_search"]
    cancelled = threading.Event()
    cancelled.set()
    result = tool.run(tool.check({"query": "sqlite wal"}), cancelled)
    assert result.is_error is True
    assert searxng.calls == []


def test_a_cancelled_web_fetch_stops_reading_the_page(tmp_path: Path) -> None:
    from fetchkit import PageServer, drip

    with PageServer({"/drip": drip(0.05)}) as site:
        toolbox = open_toolbox(tmp_path, config=fetch_config(tmp_path, site.url + "/drip"))
        tool = {tool.name: tool for tool in toolbox.tools()}["web_fetch"]
        cancel = threading.Event()
        threading.Timer(0.3, cancel.set).start()
        try:
            result = tool.run(tool.check({"url": site.url + "/drip"}), cancel)
        finally:
            toolbox.close()
    assert result.is_error is True
    assert result.text == "Cancelled."


def test_web_fetch_refusals_are_tool_errors(tmp_path: Path, page: str) -> None:
    listener = FakeUpstream()
    toolbox = open_toolbox(tmp_path, config=fetch_config(tmp_path, page))
    try:
        blocked = run(toolbox, "web_fetch", {"url": listener.url + "/secret"})
        scheme = run(toolbox, "web_fetch", {"url": "file:///etc/passwd"})
    finally:
        toolbox.close()
        listener.close()
    assert blocked.is_error is True and blocked.text.startswith("Blocked: ")
    assert "loopback" in blocked.text
    assert scheme.is_error is True and scheme.structured is None
    assert listener.calls == [] and listener.connections == 0


def test_web_fetch_disabled_is_a_tool_error(tmp_path: Path, page: str) -> None:
    toolbox = open_toolbox(tmp_path, config=fetch_config(tmp_path, page, enabled=False))
    result = run(toolbox, "web_fetch", {"url": page})
    toolbox.close()
    assert result.is_error is True
    assert (
        result.text == f"Fetch is disabled: set fetch.enabled = true in {tmp_path / 'config.toml'}."
    )


def test_web_fetch_through_a_gateway(tmp_path: Path, page: str) -> None:
    (tmp_path / "gw").mkdir()
    allow = FetchConfig(allow=(page.split("/")[2],))
    with gateway(tmp_path / "gw", fetch=allow) as gw:
        toolbox = open_toolbox(tmp_path, server=gw.url)
        try:
            links = run(toolbox, "web_fetch", {"url": page, "format": "links"})
            blocked = run(toolbox, "web_fetch", {"url": "http://10.1.2.3/admin"})
        finally:
            toolbox.close()
    assert links.structured is not None
    assert (links.structured["url"], links.structured["status"]) == (page, 200)
    found = links.structured["content"].splitlines()
    assert found and all(line.startswith("http") for line in found)
    assert blocked.is_error is True and blocked.text.startswith("Blocked: ")
    assert "10.1.2.3" in blocked.text


# skill_search


def keyword_toolbox(tmp_path: Path) -> Toolbox:
    config = tmp_path / "keyword.toml"
    config.write_text('[skill_search]\nmode = "keyword"\n')
    return open_toolbox(tmp_path, config=config)


def test_skill_search_is_local_by_default(box: Toolbox) -> None:
    result = run(box, "skill_search", {"query": "fill pdf form", "limit": 2})
    assert result.structured is not None
    assert result.structured["mode"] == "local" and result.structured["selection"] == "matches"
    assert result.structured["results"][0]["name"] == "pdf-forms"


def test_skill_search_in_keyword_mode(tmp_path: Path) -> None:
    toolbox = keyword_toolbox(tmp_path)
    try:
        result = run(toolbox, "skill_search", {"query": "fill pdf form", "limit": 2})
    finally:
        toolbox.close()
    structured = result.structured
    assert structured is not None
    assert structured["query"] == "fill pdf form"
    assert structured["mode"] == "keyword" and structured["selection"] == "matches"
    names = [hit["name"] for hit in structured["results"]]
    assert len(names) == 2 and names[0] == "pdf-forms"
    first = structured["results"][0]
    assert first["path"] == str(CATALOG / "pdf-forms" / "SKILL.md")
    assert first["score"] > structured["results"][1]["score"] > 0
    assert first["description"] and first["path"] in result.text
    assert "{" not in result.text


def test_no_fitting_skill_is_selection_none(box: Toolbox) -> None:
    result = run(box, "skill_search", {"query": "qqqzzz"})
    assert result.structured == {
        "query": "qqqzzz",
        "mode": "local",
        "selection": "none",
        "results": [],
    }
    assert result.text == "No matching skills found."


def test_an_empty_catalog_says_where_it_looked_as_the_cli_does(tmp_path: Path) -> None:
    empty = tmp_path / "skills"
    empty.mkdir()
    (tmp_path / ".git").mkdir()  # the project ends here
    toolbox = Toolbox(
        Where(config=None, server=None, local=False, allow_private_upstreams=False),
        skills=SkillsPlace(skills_dirs=(empty,), cwd=tmp_path),
    )
    try:
        result = run(toolbox, "skill_search", {"query": "pdf"})
    finally:
        toolbox.close()
    cli = sift("rerank-skills", "pdf", "--skills-dir", str(empty), "--cwd", str(tmp_path))
    assert result.text.startswith(f"No skills found in: {empty}, ")
    assert result.text + "\n" == cli.stdout
    assert result.structured["results"] == [] and result.structured["selection"] == "none"


def test_local_mode_from_the_config(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[skill_search]\nmode = "local"\n')
    toolbox = open_toolbox(tmp_path, config=config)
    try:
        found = run(toolbox, "skill_search", {"query": "fill in a pdf form", "limit": 2})
        none = run(toolbox, "skill_search", {"query": "qqqzzz"})
        named = run(toolbox, "skill_search", {"query": "pdf-forms", "limit": 1})
    finally:
        toolbox.close()
    # A query naming a skill ranks it first for certain; JSON carries that as 100, not Infinity.
    assert named.structured is not None
    assert [(hit["name"], hit["score"]) for hit in named.structured["results"]] == [
        ("pdf-forms", 100)
    ]
    assert found.structured is not None
    assert found.structured["mode"] == "local" and found.structured["selection"] == "matches"
    hits = found.structured["results"]
    assert hits and hits[0]["name"] == "pdf-forms"
    assert all(isinstance(hit["score"], float) and hit["score"] > 0 for hit in hits)
    assert [hit["score"] for hit in hits] == sorted((hit["score"] for hit in hits), reverse=True)
    assert none.structured is not None
    assert (none.structured["mode"], none.structured["selection"]) == ("local", "none")


@pytest.mark.parametrize(
    ("mode", "owner", "ranker"),
    [("keyword", siftlib.skills.keyword, "_scores"), ("local", RelevanceIndex, "score")],
)
def test_a_search_ranks_the_catalog_once(
    mode: str, owner: object, ranker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The scores reported are the ones the search ranked by, not a second pass over the catalog
    # (over 10,000 skills each pass takes 20-35 ms).
    calls: list[str] = []
    original = getattr(owner, ranker)

    def counted(*args: Any) -> Any:  # (catalog, query) or, as a method, (index, query)
        calls.append(args[-1])
        return original(*args)

    monkeypatch.setattr(owner, ranker, counted)
    config = tmp_path / "config.toml"
    config.write_text(f'[skill_search]\nmode = "{mode}"\n')
    toolbox = open_toolbox(tmp_path, config=config)
    try:
        found = run(toolbox, "skill_search", {"query": "fill in a pdf form", "limit": 2})
    finally:
        toolbox.close()
    assert found.structured is not None and found.structured["mode"] == mode
    assert [hit["name"] for hit in found.structured["results"]][0] == "pdf-forms"
    assert calls == ["fill in a pdf form"]


def test_a_named_config_that_is_missing_is_a_tool_error_not_a_crash(tmp_path: Path) -> None:
    toolbox = open_toolbox(tmp_path, config=tmp_path / "typo.toml")
    try:
        tools = {tool.name: tool for tool in toolbox.tools()}
        assert tools["skill_search"].annotations["openWorldHint"] is False
        results = []
        for name, arguments in (
            ("web_search", {"query": "x"}),
            ("web_fetch", {"url": "https://example.org/"}),
            ("skill_search", {"query": "pdf"}),
        ):
            results.append(run(toolbox, name, arguments))
    finally:
        toolbox.close()
    for result in results:
        assert result.is_error is True
        assert result.text == f"{tmp_path / 'typo.toml'}: no such config file (named by --config)."


def test_a_query_without_terms_is_a_tool_error(box: Toolbox) -> None:
    result = run(box, "skill_search", {"query": "?!"})
    assert result.is_error is True and "no search terms" in result.text


def test_opted_in_reranking_opens_the_world_and_reorders(
    tmp_path: Path, httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def answer(request: Request) -> Response:
        candidates = request.get_json()["state"]["candidates"]
        ids = {c["name"]: c["id"] for c in candidates}
        probabilities = {c["id"]: 0.0 for c in candidates}
        probabilities[ids["pdf"]] = 0.9
        probabilities["none"] = 0.1
        selection = {
            "type": "choice",
            "choice": ids["pdf"],
            "confidence": 0.9,
            "probabilities": probabilities,
        }
        body = {"model": "m", "answers": {"selection": selection}, "usage": {}}
        return Response(json.dumps(body), content_type="application/json")

    httpserver.expect_request("/v1/systemone", method="POST").respond_with_handler(answer)
    monkeypatch.setenv("TYPESAFE_API_KEY", "ts-key")
    monkeypatch.setenv("TYPESAFE_BASE_URL", httpserver.url_for("/"))
    config = tmp_path / "config.toml"
    config.write_text("[skill_search.reranking]\nenabled = true\ntimeout_ms = 10000\n")
    toolbox = open_toolbox(tmp_path, config=config)
    try:
        tools = {tool.name: tool for tool in toolbox.tools()}
        assert tools["skill_search"].annotations["openWorldHint"] is True
        result = run(toolbox, "skill_search", {"query": "fill pdf form"})
    finally:
        toolbox.close()
    assert result.structured is not None
    assert result.structured["mode"] == "reranked"
    assert [hit["name"] for hit in result.structured["results"]] == ["pdf"]
    assert len(httpserver.log) == 1


def test_a_reranker_that_falls_back_reports_the_keyword_mode(
    tmp_path: Path, httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    httpserver.expect_request("/v1/systemone", method="POST").respond_with_data("", status=500)
    monkeypatch.setenv("TYPESAFE_API_KEY", "ts-key")
    monkeypatch.setenv("TYPESAFE_BASE_URL", httpserver.url_for("/"))
    config = tmp_path / "config.toml"
    config.write_text("[skill_search.reranking]\nenabled = true\ntimeout_ms = 10000\n")
    toolbox, plain = open_toolbox(tmp_path, config=config), keyword_toolbox(tmp_path)
    try:
        result = run(toolbox, "skill_search", {"query": "fill pdf form"})
        baseline = run(plain, "skill_search", {"query": "fill pdf form"})
    finally:
        toolbox.close()
        plain.close()
    assert len(httpserver.log) == 1  # the reranker was asked, and failed
    assert result.structured == baseline.structured
    assert baseline.structured is not None and baseline.structured["mode"] == "keyword"


def test_a_cancelled_skill_search_makes_no_provider_call(
    tmp_path: Path, httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TYPESAFE_API_KEY", "ts-key")
    monkeypatch.setenv("TYPESAFE_BASE_URL", httpserver.url_for("/"))
    config = tmp_path / "config.toml"
    config.write_text("[skill_search.reranking]\nenabled = true\n")
    toolbox = open_toolbox(tmp_path, config=config)
    tool = {tool.name: tool for tool in toolbox.tools()}["skill_search"]
    cancelled = threading.Event()
    cancelled.set()
    try:
        result = tool.run(tool.check({"query": "fill pdf form"}), cancelled)
    finally:
        toolbox.close()
    assert result.structured is not None and result.structured["results"]  # the baseline
    assert httpserver.log == []


# Argument checks


SCHEMA = {
    "type": "object",
    "properties": {
        "url": {"type": "string"},
        "format": {"type": "string", "enum": ["markdown", "text"], "default": "markdown"},
        "main": {"type": "boolean", "default": True},
        "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 8},
    },
    "required": ["url"],
    "additionalProperties": False,
}


def test_defaults_are_filled_in() -> None:
    assert check_arguments(SCHEMA, {"url": "u"}) == {
        "url": "u",
        "format": "markdown",
        "main": True,
        "limit": 8,
    }


def test_a_whole_number_sent_as_a_float_is_an_integer() -> None:
    checked = check_arguments(SCHEMA, {"url": "u", "limit": 2.0})
    assert checked["limit"] == 2 and isinstance(checked["limit"], int)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (None, "they must be a JSON object"),
        ([], "they must be a JSON object"),
        ({}, "'url' is required"),
        ({"url": "u", "extra": 1}, "unknown argument 'extra'"),
        ({"url": 5}, "'url' must be a string"),
        ({"url": "u", "limit": True}, "'limit' must be an integer"),
        ({"url": "u", "limit": 2.5}, "'limit' must be an integer"),
        ({"url": "u", "limit": 21.0}, "'limit' must be an integer from 1 to 20"),
        ({"url": "u", "limit": 0}, "'limit' must be an integer from 1 to 20"),
        ({"url": "u", "limit": 21}, "'limit' must be an integer from 1 to 20"),
        ({"url": "u", "main": 1}, "'main' must be true or false"),
        ({"url": "u", "format": "html"}, "'format' must be one of markdown, text"),
    ],
)
def test_arguments_breaking_the_schema_are_refused(arguments: object, message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        check_arguments(SCHEMA, arguments)


def test_every_listed_tool_checks_its_own_schema(box: Toolbox) -> None:
    tool: Tool
    for tool in box.tools():
        required = tool.input_schema["required"][0]
        with pytest.raises(ArgumentError):
            tool.check({required: ""})
        checked = tool.check({required: "x"})
        for name, rules in tool.input_schema["properties"].items():
            assert checked[name] == rules.get("default", "x")


def test_web_fetch_reads_a_pdf_and_reads_it_again_from_the_cache(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    from pdfkit import Pdf, Text, paragraph

    pdf = Pdf(title="Rail report").page(
        [Text(72, 720, 24, "Rail report"), *paragraph(72, 680, 11, "The tram runs hourly. " * 9)]
    )
    httpserver.expect_request("/report.pdf").respond_with_data(
        pdf.bytes(), content_type="application/pdf"
    )
    url = httpserver.url_for("/report.pdf")
    toolbox = open_toolbox(tmp_path, config=fetch_config(tmp_path, url))
    try:
        first = run(toolbox, "web_fetch", {"url": url})
        second = run(toolbox, "web_fetch", {"url": url})
    finally:
        toolbox.close()
    assert first.structured is not None and second.structured is not None
    assert first.structured["title"] == "Rail report"
    assert first.structured["content"].startswith("# Rail report\n\nThe tram runs hourly.")
    assert second.structured["content"] == first.structured["content"]
    assert len(httpserver.log) == 1  # the second read came from the fetch cache
