"""Configuration 4, `tavily-direct`: Tavily called the way an agent's own Tavily tool calls it.

No sift pipeline: no fan-out, fusion or cache — one `POST` with the body an agent's Tavily
web-search tool sends, `{"query", "max_results": min(k, 20), "include_raw_content": false,
"include_images": false}`, and the bearer key. It goes through `Searcher.call`, so the SSRF
boundary, `search.timeout`, the body limits, the daily cap and the credit rules are the
pipeline's own: `usage.credits` of a 2xx answer, 1 when absent (agents do not ask for
`usage`), nothing for a non-2xx answer. Hits are kept in Tavily's order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from siftlib.hits import Hit
from siftlib.pipeline import Searcher

NAME = "tavily"
MAX_RESULTS = 20


@dataclass(frozen=True)
class DirectAnswer:
    """What one direct call came to: hits in Tavily's order, credits spent, warnings."""

    hits: list[Hit] = field(default_factory=list)
    credits: int = 0
    warnings: list[str] = field(default_factory=list)


def agent_body(query: str, k: int) -> dict[str, object]:
    """Return the JSON body an agent's own Tavily tool sends."""
    return {
        "query": query,
        "max_results": min(k, MAX_RESULTS),
        "include_raw_content": False,
        "include_images": False,
    }


def search_direct(searcher: Searcher, query: str, *, k: int) -> DirectAnswer:
    """Call Tavily as an agent would, under the daily cap; upstream faults become warnings."""
    request = httpx.Request(
        "POST",
        searcher.config.source(NAME).url,
        json=agent_body(query, k),
        headers={"Authorization": f"Bearer {searcher.key(NAME) or ''}"},
    )
    outcome = searcher.call(NAME, request, caller="bakeoff")
    warnings = [f"{NAME}: {outcome.failure}"] if outcome.failure else []
    return DirectAnswer(hits=outcome.hits[:k], credits=outcome.credits, warnings=warnings)
