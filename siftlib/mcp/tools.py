"""The three MCP tools of `sift mcp`, as thin faces over the search, fetch and skills libraries.

    toolbox = Toolbox(Where(config=None, server=None, local=False), skills=SkillsPlace(...))
    tools = toolbox.tools()          # what `tools/list` shows; each runs through the toolbox
    toolbox.close()

Each tool checks its arguments against its own input schema (a small checker for the few
keywords these schemas use: types, bounds, enums, `additionalProperties: false`, defaults),
calls one library function, and turns the answer into `structuredContent` plus one compact
text block. What the library refuses (an invalid query, no source enabled, every source
failed, an unreachable gateway) comes back as a result with `isError` and one sentence.

Backends open on first use and live as long as the process: the in-process searcher (its
store and pinned clients) and fetcher (its guard and kept connections), or the gateway
client (`--server` / `client.toml`, as `sift search` and `sift fetch`), and the skill
session (config and catalog read once, as a `--stdio` session reads them). Nothing heavy is
imported before a tool needs it: listing tools reads only the reranking consent (for
`skill_search`'s open-world hint), not the catalog, and imports no httpx.

Decisions where mcp.md is silent:
- `web_search.query` in the output is the caller's text; `position` is 1-based after fusion.
- `skill_search.mode` says what produced the result: `reranked` when the opted-in reranker
  decided, `keyword` when it fell back (skills.md §3) or `[skill_search] mode` chose it, or
  `local` (skills.md §10, the default when reranking is not opted in);
  `selection` is `none` when no skill fits (nothing matched, or the reranker or the local
  ranking decided none does), else `matches`; `score` is the local relevance score in local
  mode, else the keyword score (the order is the reranker's when it decided).
- `web_fetch.max_chars` defaults to 20000 (mcp.md) and is capped by `fetch.max_chars`;
  `format: links` gives the page's links, one a line, as the content. The text block is a
  head line (title, final URL, status, truncated) and then the content itself.
- Cancelling a call drops its answer and stops its work: a `skill_search`'s provider call is
  aborted (or never made); in-process, `web_search` closes its upstream requests and gives
  back the reservations of calls not sent, and `web_fetch` stops reading or converting the
  page (its conversion worker is killed). Through a gateway, the request ends at its own
  deadline.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from siftlib.errors import SiftError
from siftlib.mcp.protocol import ArgumentError, Tool, ToolResult

if TYPE_CHECKING:
    from siftlib.fetch.fetcher import Fetcher
    from siftlib.search.pipeline import Searcher
    from siftlib.skills.session import Session

log = logging.getLogger("sift.mcp")

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SEARCH_TIMEOUT = 30.0  # client mode: the gateway answers within its own deadline first
FETCH_TIMEOUT = 75.0  # client mode: above the gateway's longest fetch deadline (60 s)
FETCH_FORMATS = ("markdown", "text", "links")

WEB_SEARCH = (
    "Search the web through sift, the user's own search gateway: one query goes to every "
    "configured search provider at once and the answers come back deduplicated and ranked. "
    "Use it as the first step whenever you need current or external information; it returns "
    "titles, URLs and snippets, never page bodies (read a page with web_fetch). Write the "
    "query as you would type it into a search engine. Results may come from the gateway's "
    "cache (cached: true); warnings name providers that failed while others answered."
)
WEB_FETCH = (
    "Read one web page through sift and get its text back as clean markdown (or plain text, "
    "or the list of its links). Use it on a URL from web_search, or any http(s) URL the user "
    "gave you. By default only the main content comes back (no navigation, ads or comment "
    "threads); set main_content to false for the whole page. Long pages are cut at "
    "max_chars (truncated: true). sift refuses private, local and non-web addresses and "
    "non-text content; a refusal or a failed fetch says why in one sentence."
)
SKILL_SEARCH = (
    "Find the agent skill that fits a task in the local skill catalog (folders holding a "
    "SKILL.md). Describe the task in plain words; the answer lists matching skills, best "
    "first, each with the path of its SKILL.md: read that file before using the skill, and "
    "resolve relative paths in it against its folder. An empty answer (selection: none) means "
    "no skill fits: go on without one. It never reads or runs a skill itself."
)


@dataclass(frozen=True)
class Where:
    """Where searches run: through a gateway (`server`, `client.toml`) or in-process."""

    config: str | None
    server: str | None
    local: bool
    allow_private_upstreams: bool = False


@dataclass(frozen=True)
class SkillsPlace:
    """Which skill catalog to search: extra folders first, then the user's and the project's."""

    skills_dirs: tuple[Path, ...]
    cwd: Path


class Toolbox:
    """The libraries behind the tools, opened on first use and closed together."""

    def __init__(self, where: Where, *, skills: SkillsPlace) -> None:
        self.where = where
        self.skills_place = skills
        self._lock = threading.Lock()
        self._stack = contextlib.ExitStack()
        self._searcher: Searcher | None = None
        self._fetcher: Fetcher | None = None
        self._session: Session | None = None

    def tools(self) -> list[Tool]:
        """Return the tools in the order `tools/list` shows them."""
        reranking = self._reranking_opted_in()
        return [
            _tool(
                "web_search",
                "Web search",
                WEB_SEARCH,
                {
                    "query": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 1500,
                        "description": "What to search for, as typed into a search engine.",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 20,
                        "default": 8,
                        "description": "How many results to return.",
                    },
                },
                required=["query"],
                output=_object(
                    {
                        "query": {"type": "string"},
                        "results": {
                            "type": "array",
                            "items": _object(
                                {
                                    "position": {"type": "integer", "minimum": 1},
                                    "title": {"type": "string"},
                                    "url": {"type": "string"},
                                    "snippet": {"type": "string"},
                                    "source": {"type": "string"},
                                }
                            ),
                        },
                        "warnings": {"type": "array", "items": {"type": "string"}},
                        "cached": {"type": "boolean"},
                    }
                ),
                annotations={"readOnlyHint": True, "openWorldHint": True},
                run=self.web_search,
            ),
            _tool(
                "web_fetch",
                "Read a web page",
                WEB_FETCH,
                {
                    "url": {
                        "type": "string",
                        "minLength": 1,
                        "description": "The page to read: an http or https URL.",
                    },
                    "format": {
                        "type": "string",
                        "enum": list(FETCH_FORMATS),
                        "default": "markdown",
                        "description": "markdown, plain text, or the page's links one a line.",
                    },
                    "main_content": {
                        "type": "boolean",
                        "default": True,
                        "description": "Only the main content (true) or the whole page (false).",
                    },
                    "max_chars": {
                        "type": "integer",
                        "minimum": 1,
                        "default": 20000,
                        "description": "Cut the content at this many characters.",
                    },
                },
                required=["url"],
                output=_object(
                    {
                        "url": {"type": "string"},
                        "final_url": {"type": "string"},
                        "status": {"type": "integer"},
                        "title": {"type": "string"},
                        "content": {"type": "string"},
                        "truncated": {"type": "boolean"},
                        "warnings": {"type": "array", "items": {"type": "string"}},
                    }
                ),
                annotations={"readOnlyHint": True, "openWorldHint": True},
                run=self.web_fetch,
            ),
            _tool(
                "skill_search",
                "Skill search",
                SKILL_SEARCH,
                {
                    "query": {
                        "type": "string",
                        "minLength": 1,
                        "description": "The task, in plain words.",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 10,
                        "default": 5,
                        "description": "How many skills to return at most.",
                    },
                },
                required=["query"],
                output=_object(
                    {
                        "query": {"type": "string"},
                        "mode": {"type": "string", "enum": ["keyword", "local", "reranked"]},
                        "selection": {"type": "string", "enum": ["matches", "none"]},
                        "results": {
                            "type": "array",
                            "items": _object(
                                {
                                    "name": {"type": "string"},
                                    "description": {"type": "string"},
                                    "path": {"type": "string"},
                                    "score": {"type": "number"},
                                }
                            ),
                        },
                    }
                ),
                annotations={"readOnlyHint": True, "openWorldHint": reranking},
                run=self.skill_search,
            ),
        ]

    def close(self) -> None:
        """Close the searcher and its store, the fetcher and the skill session."""
        with self._lock:
            if self._session is not None:
                self._session.close()
            self._stack.close()

    def web_search(self, arguments: dict[str, Any], cancel: threading.Event) -> ToolResult:
        """Run `web_search`: the search pipeline, in-process or through the gateway."""
        query, limit = arguments["query"], arguments["limit"]
        try:
            client = None if self.where.local else _client_config(self.where.server)
            if client is not None:
                from siftlib.gateway.client import search_remote

                envelope = search_remote(
                    client.url, client.token, query, k=limit, timeout=SEARCH_TIMEOUT
                )
            else:
                from siftlib.search.pipeline import SearchRequest

                request = SearchRequest(query=query, k=limit)
                response = self._open_searcher().search(request, cancel=cancel)
                envelope = response.to_native()
        except SiftError as exc:
            return _failure(exc)
        results = [
            {
                "position": position,
                "title": str(hit.get("title", "")),
                "url": str(hit.get("url", "")),
                "snippet": str(hit.get("snippet", "")),
                "source": str(hit.get("source", "")),
            }
            for position, hit in enumerate(envelope.get("results", []), 1)
        ]
        warnings = [str(w) for w in envelope.get("warnings", [])]
        cached = envelope.get("cached") is True
        structured = {"query": query, "results": results, "warnings": warnings, "cached": cached}
        return ToolResult(_search_text(results, warnings, cached), structured)

    def web_fetch(self, arguments: dict[str, Any], cancel: threading.Event) -> ToolResult:
        """Run `web_fetch`: the guarded fetch, in-process or through the gateway."""
        url = arguments["url"]
        asked = {
            "url": url,
            "format": arguments["format"],
            "main_content": arguments["main_content"],
            "max_chars": arguments["max_chars"],
        }
        try:
            client = None if self.where.local else _client_config(self.where.server)
            if client is not None:
                from siftlib.gateway.client import fetch_remote

                envelope = fetch_remote(client.url, client.token, asked, timeout=FETCH_TIMEOUT)
            else:
                from siftlib.fetch.fetcher import FetchRequest

                fetched = self._open_fetcher().fetch(FetchRequest(**asked), cancel=cancel)
                envelope = fetched.to_native()
        except SiftError as exc:
            return _failure(exc)
        structured = {
            "url": str(envelope.get("url", url)),
            "final_url": str(envelope.get("final_url", url)),
            "status": int(envelope.get("status", 0)),
            "title": str(envelope.get("title", "")),
            "content": str(envelope.get("content", "")),
            "truncated": envelope.get("truncated") is True,
            "warnings": [str(w) for w in envelope.get("warnings", [])],
        }
        return ToolResult(_page_text(structured), structured)

    def skill_search(self, arguments: dict[str, Any], cancel: threading.Event) -> ToolResult:
        """Run `skill_search` in the session's mode, reranked when the user opted in."""
        from siftlib.skills.answer import render_text
        from siftlib.skills.keyword import keyword_scores

        query, limit = arguments["query"], arguments["limit"]
        try:
            session = self._skill_session()
            result = session.search(query, limit, cancel=cancel)
        except SiftError as exc:
            return _failure(exc)
        mode = result.mode or "keyword"  # a reranker that fell back gave the keyword result
        scores = result.scores
        if result.matches and not scores:  # a reranker ordered them: report keyword scores
            ranked = keyword_scores(session.snapshot.catalog, query)
            keyword = {skill.name: score for skill, score in ranked}
            scores = tuple(keyword.get(skill.name, 0) for skill in result.matches)
        structured = {
            "query": query,
            "mode": mode,
            "selection": "matches" if result.matches else "none",
            "results": [
                {
                    "name": skill.name,
                    "description": skill.description,
                    "path": str(skill.file_path),
                    "score": _score(score),
                }
                for skill, score in zip(result.matches, scores, strict=True)
            ],
        }
        return ToolResult(render_text(result, catalog=session.snapshot.catalog), structured)

    def _open_searcher(self) -> Searcher:
        """Return the in-process searcher, opening config, store and sources on first use."""
        with self._lock:
            if self._searcher is None:
                from siftlib.commands.search import ENABLE_KEYS
                from siftlib.config import load_config
                from siftlib.errors import ConfigError
                from siftlib.search.pipeline import open_searcher

                config = load_config(self.where.config)
                if not config.enabled_sources:
                    raise ConfigError(
                        f"no search source is enabled: set {ENABLE_KEYS} to true in {config.path}"
                    )
                self._searcher = self._stack.enter_context(
                    open_searcher(
                        config, allow_private_upstreams=self.where.allow_private_upstreams
                    )
                )
            return self._searcher

    def _open_fetcher(self) -> Fetcher:
        """Return the in-process fetcher, reading the `[fetch]` config on first use."""
        with self._lock:
            if self._fetcher is None:
                from siftlib.config import load_config, load_secrets
                from siftlib.errors import ConfigError
                from siftlib.fetch.cache import open_fetch_cache
                from siftlib.fetch.fetcher import Fetcher

                config = load_config(self.where.config)
                if not config.fetch.enabled:
                    raise ConfigError(
                        f"fetch is disabled: set fetch.enabled = true in {config.path}"
                    )
                secrets = load_secrets(config.secret_env, expected=config.secret_env_configured)
                cache = open_fetch_cache(config, secrets)  # pages read again come from it
                if cache is not None:
                    self._stack.callback(cache.close)
                self._fetcher = self._stack.enter_context(Fetcher(config.fetch, cache=cache))
            return self._fetcher

    def _config_path(self) -> Path:
        """Return the global config's path (`--config` > `$SIFT_CONFIG` > the user's)."""
        from siftlib.config import resolve_config_path

        return resolve_config_path(self.where.config)

    def _reranking_opted_in(self) -> bool:
        """Say whether skill search may call the provider: consent and a key (skills.md §4)."""
        from siftlib.skills.consent import api_key, load_settings

        try:
            settings, _ = load_settings(self._config_path(), cwd=self.skills_place.cwd)
        except SiftError:  # a config that cannot be read consents to nothing
            return False
        return settings.enabled and api_key(settings) is not None

    def _skill_session(self) -> Session:
        """Return the skill session, reading config and catalog on first use."""
        with self._lock:
            if self._session is None:
                from siftlib.skills.session import Session

                place = self.skills_place
                self._session, diagnostics = Session.open(
                    config_path=self._config_path(),
                    skills_dirs=list(place.skills_dirs),
                    cwd=place.cwd,
                )
                for diagnostic in diagnostics:
                    log.warning("skills: %s", diagnostic)
            return self._session


def _client_config(server: str | None) -> Any:
    from siftlib.config import load_client_config

    return load_client_config(server)


def _score(score: float) -> float:
    """Return a skill's score as JSON can carry it: a query naming a skill scores it infinite in
    local mode, reported as 100, as the keyword baseline scores a name equal to the query."""
    return 100 if score == math.inf else round(score, 4)


def _failure(exc: SiftError) -> ToolResult:
    """Return a failed result: the library's sentence, and what to do about it where known."""
    from siftlib.errors import UnreachableError

    text = str(exc)
    warnings = getattr(exc, "warnings", [])
    if warnings:
        text += f" ({'; '.join(warnings)})"
    text = text[:1].upper() + text[1:].removesuffix(".")
    # mcp.md §4: one sentence, the way out included.
    text += "; use your built-in web search instead." if isinstance(exc, UnreachableError) else "."
    return ToolResult(text, is_error=True)


def _search_text(results: list[dict[str, Any]], warnings: list[str], cached: bool) -> str:
    """Return the results as numbered blocks of title, URL and snippet, then the caveats."""
    blocks = [
        "\n".join(
            line
            for line in (
                f"{hit['position']}. {' '.join(hit['title'].split())}",
                f"   {hit['url']}",
                f"   {' '.join(hit['snippet'].split())}" if hit["snippet"].strip() else "",
            )
            if line
        )
        for hit in results
    ]
    text = "\n\n".join(blocks) if blocks else "No results."
    if warnings:
        text += "\n\nWarnings: " + "; ".join(warnings) + "."
    if cached:
        text += "\n\n(from sift's cache)"
    return text


def _page_text(page: dict[str, Any]) -> str:
    """Return the page as read: a head line (title, final URL, status), then its content."""
    head = page["title"] or page["final_url"]
    facts = [page["final_url"]] if page["title"] else []
    facts.append(f"status {page['status']}")
    if page["truncated"]:
        facts.append("truncated")
    text = f"{head} ({', '.join(facts)})\n\n{page['content']}"
    if page["warnings"]:
        text += "\n\nWarnings: " + "; ".join(page["warnings"]) + "."
    return text


def _object(properties: Mapping[str, Any], *, required: list[str] | None = None) -> dict[str, Any]:
    """Return a closed object schema; every property is required unless said otherwise."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


def _tool(
    name: str,
    title: str,
    description: str,
    properties: Mapping[str, Any],
    *,
    required: list[str],
    output: Mapping[str, Any],
    annotations: Mapping[str, Any],
    run: Callable[[dict[str, Any], threading.Event], ToolResult],
) -> Tool:
    input_schema = {"$schema": SCHEMA_DIALECT, **_object(properties, required=required)}
    return Tool(
        name=name,
        title=title,
        description=description,
        input_schema=input_schema,
        output_schema={"$schema": SCHEMA_DIALECT, **output},
        annotations={"title": title, **annotations},
        run=run,
        check=lambda arguments: check_arguments(input_schema, arguments),
    )


def check_arguments(schema: Mapping[str, Any], arguments: object) -> dict[str, Any]:
    """Return the arguments with defaults filled in; raise `ArgumentError` if they break it."""
    if not isinstance(arguments, dict):
        raise ArgumentError("Invalid arguments: they must be a JSON object.")
    properties: Mapping[str, Mapping[str, Any]] = schema["properties"]
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        raise ArgumentError(f"Invalid arguments: unknown argument {unknown[0]!r}.")
    checked: dict[str, Any] = {}
    for name, rules in properties.items():
        if name not in arguments:
            if name in schema["required"]:
                raise ArgumentError(f"Invalid arguments: {name!r} is required.")
            if "default" in rules:
                checked[name] = rules["default"]
            continue
        checked[name] = _check_value(name, rules, arguments[name])
    return checked


def _check_value(name: str, rules: Mapping[str, Any], value: object) -> object:
    kind = rules.get("type")
    if kind == "string":
        if not isinstance(value, str):
            raise ArgumentError(f"Invalid arguments: {name!r} must be a string.")
        if len(value) < rules.get("minLength", 0):
            raise ArgumentError(f"Invalid arguments: {name!r} must not be empty.")
        if "maxLength" in rules and len(value) > rules["maxLength"]:
            raise ArgumentError(
                f"Invalid arguments: {name!r} is over {rules['maxLength']} characters."
            )
    elif kind == "integer":
        # JSON Schema's integer is any number with no fractional part: 8.0 is valid.
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ArgumentError(f"Invalid arguments: {name!r} must be an integer.")
        low, high = rules.get("minimum"), rules.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f"from {low} to {high}" if high is not None else f"of at least {low}"
            raise ArgumentError(f"Invalid arguments: {name!r} must be an integer {bounds}.")
    elif kind == "boolean" and not isinstance(value, bool):
        raise ArgumentError(f"Invalid arguments: {name!r} must be true or false.")
    if "enum" in rules and value not in rules["enum"]:
        choices = ", ".join(rules["enum"])
        raise ArgumentError(f"Invalid arguments: {name!r} must be one of {choices}.")
    return value
