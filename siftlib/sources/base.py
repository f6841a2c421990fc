"""What every source adapter is: build a request from the config URL, map the response.

An adapter knows only its provider's wire format. Threads, deadlines, size limits, caps,
merging and metrics belong to the pipeline that calls it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx

from siftlib.hits import Hit


class BadResponse(Exception):
    """The upstream answered 2xx with a body that is not the documented shape."""


@dataclass(frozen=True)
class Answer:
    """What one upstream call yielded: hits in the source's own order, and credits spent."""

    hits: list[Hit]
    credits: int = 0


class Source:
    """One upstream search provider, bound to its configured URL."""

    name: ClassVar[str]
    key_name: ClassVar[str | None] = None
    max_query_chars: ClassVar[int | None] = None
    max_query_words: ClassVar[int | None] = None

    def __init__(self, url: str) -> None:
        self.url = url

    def query_too_long(self, query: str) -> bool:
        """Tell whether `query` exceeds the provider's documented query cap."""
        if self.max_query_chars is not None and len(query) > self.max_query_chars:
            return True
        return self.max_query_words is not None and len(query.split()) > self.max_query_words

    def build_request(self, query: str, *, k: int, key: str | None) -> httpx.Request:
        """Return the HTTP request for one search."""
        raise NotImplementedError

    def parse(self, body: bytes) -> Answer:
        """Map a 2xx response body into hits; raise `BadResponse` when it is not usable."""
        raise NotImplementedError

    def describe_status(self, status: int) -> str:
        """Return the warning kind for a non-2xx status."""
        return str(status)


def load_object(body: bytes) -> dict[str, Any]:
    """Decode a JSON object, or raise `BadResponse`."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadResponse("not JSON") from exc
    if not isinstance(value, dict):
        raise BadResponse("not a JSON object")
    return value


def text(value: Any) -> str:
    """Return `value` when it is a string, else the empty string."""
    return value if isinstance(value, str) else ""


def number(value: Any) -> float:
    """Return `value` as a float when it is a real number, else 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value)


def map_results(data: dict[str, Any], source: str) -> list[Hit]:
    """Map `results[].url|title|content|score` to hits, dropping those without a string URL."""
    results = data.get("results")
    if not isinstance(results, list):
        raise BadResponse("no results list")
    return [
        Hit(
            url=item["url"],
            title=text(item.get("title")),
            snippet=text(item.get("content")),
            score=number(item.get("score")),
            source=source,
        )
        for item in results
        if isinstance(item, dict) and isinstance(item.get("url"), str)
    ]
