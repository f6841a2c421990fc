"""Tavily's search API: `POST {url}` with a bearer key and a fixed JSON body.

Only `/search` is ever called (never `/extract`, `/crawl` or `/map`). The body asks for no
answer, no raw content and no images, and for `usage` so credits can be metered; `answer`
is never returned or stored even when Tavily sends one. Results are kept in Tavily's order
(not re-sorted by score). An answer without `usage.credits` counts one credit; credits
that are not a number from 0 to `MAX_CREDITS` (a basic search costs 1, an advanced one 2)
make the answer a `BadResponse`, so a hostile `1e30` never reaches the daily total.
A result's `published_date` (news results carry one) becomes `published`.

`agent_request` is the other body sift sends Tavily, for the bake-off's `tavily-direct`
configuration: the one an agent's own Tavily web-search tool sends, `{"query", "max_results":
min(k, 20), "include_raw_content": false, "include_images": false}` (no `usage`: an answer
without it counts one credit).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from siftlib.hits import Hit, iso_date
from siftlib.search.sources.base import (
    Answer,
    BadResponse,
    Source,
    load_object,
    number,
    results_list,
    text,
)

if TYPE_CHECKING:
    import httpx

MAX_RESULTS = 20
MAX_CREDITS = 100


def request_body(query: str, k: int) -> dict[str, object]:
    """Return the exact JSON body of a Tavily search."""
    return {
        "query": query,
        "max_results": min(k, MAX_RESULTS),
        "search_depth": "basic",
        "include_answer": False,
        "include_raw_content": False,
        "include_images": False,
        "include_usage": True,
    }


def agent_request(url: str, query: str, k: int, key: str | None) -> httpx.Request:
    """Return the request an agent's own Tavily tool sends for `query`."""
    import httpx

    body = {
        "query": query,
        "max_results": min(k, MAX_RESULTS),
        "include_raw_content": False,
        "include_images": False,
    }
    return httpx.Request("POST", url, json=body, headers={"Authorization": f"Bearer {key or ''}"})


class Tavily(Source):
    """Tavily's search endpoint."""

    name = "tavily"
    key_name = "TAVILY_API_KEY"
    max_query_chars = 400
    credits_per_call = 1  # an answer with no `usage.credits`

    def build_request(self, query: str, *, k: int, key: str | None, page: int = 1) -> httpx.Request:
        import httpx

        return httpx.Request(
            "POST",
            self.url,
            json=request_body(query, k),
            headers={"Accept": "application/json", "Authorization": f"Bearer {key or ''}"},
        )

    def parse(self, body: bytes) -> Answer:
        data = load_object(body)
        hits = [
            Hit(
                url=item["url"],
                title=text(item.get("title")),
                snippet=text(item.get("content")),
                score=number(item.get("score")),
                source=self.name,
                published=iso_date(item.get("published_date")),
            )
            for item in results_list(data)
        ]
        return Answer(hits, credits=credits_used(data))


def credits_used(data: dict[str, object]) -> int:
    """Return the credits an answer reports in `usage.credits`, or 1 when it reports none."""
    usage = data.get("usage")
    credits = usage.get("credits") if isinstance(usage, dict) else None
    if credits is None:
        return Tavily.credits_per_call
    if isinstance(credits, bool) or not isinstance(credits, int | float):
        raise BadResponse("usage.credits is not a number")
    spent = number(credits)
    if not 0 <= spent <= MAX_CREDITS:
        raise BadResponse("usage.credits is out of bounds")
    return math.ceil(spent)
