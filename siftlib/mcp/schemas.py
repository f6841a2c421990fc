"""The three MCP tools as `tools/list` shows them, and the checker that holds calls to them.

    tool = web_search(run)                  # a `Tool`: name, schemas, annotations, and `run`
    arguments = tool.check({"query": "x"})  # defaults filled in, or an `ArgumentError`

Each tool has a title, a description written for a model, an input schema (JSON Schema
2020-12, closed, every default written as the property's `default`), an output schema and
annotations (mcp.md §3). The query's length is the search pipeline's own rule
(`siftlib.query`); `limit` is MCP's (1–20, mcp.md §3), not the native API's `k`.

`check_arguments` knows the few keywords these schemas use (types, bounds, enums, `required`,
`additionalProperties: false`, defaults): a call that breaks them is a tool error the model
can correct, not a protocol error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from siftlib.mcp.protocol import ArgumentError, Tool, ToolResult
from siftlib.query import MAX_QUERY_CHARS

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
FETCH_FORMATS = ("markdown", "text", "links")

Run = Callable[[dict[str, Any], threading.Event], ToolResult]

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


def web_search(run: Run) -> Tool:
    """Return the `web_search` tool, run by `run`."""
    return _tool(
        "web_search",
        "Web search",
        WEB_SEARCH,
        {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_QUERY_CHARS,
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
        run=run,
    )


def web_fetch(run: Run) -> Tool:
    """Return the `web_fetch` tool, run by `run`."""
    return _tool(
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
        run=run,
    )


def skill_search(run: Run, *, reranking: bool) -> Tool:
    """Return the `skill_search` tool, run by `run`; open-world only when reranking may call out."""
    return _tool(
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
        run=run,
    )


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
    run: Run,
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
