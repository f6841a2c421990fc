"""Configuration 4, `tavily-direct`: Tavily called the way an agent's own Tavily tool calls it.

No sift pipeline: no fan-out, fusion or cache — one `POST` with the body an agent's Tavily
web-search tool sends (`siftlib.search.sources.tavily.agent_request`, the wire format's home).
It goes through `Searcher.call`, which hands the key to that builder itself, so the SSRF
boundary, `search.timeout`, the body limits, the daily cap and the credit rules are the
pipeline's own: `usage.credits` of a 2xx answer, 1 when absent (agents do not ask for
`usage`), nothing for a non-2xx answer. Hits are kept in Tavily's order.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from siftlib.hits import Hit
from siftlib.search.pipeline import Searcher
from siftlib.search.sources import tavily

NAME = "tavily"


@dataclass(frozen=True)
class DirectAnswer:
    """What one direct call came to: hits in Tavily's order, credits spent, warnings."""

    hits: list[Hit] = field(default_factory=list)
    credits: int = 0
    warnings: list[str] = field(default_factory=list)


def search_direct(searcher: Searcher, query: str, *, k: int) -> DirectAnswer:
    """Call Tavily as an agent would, under the daily cap; upstream faults become warnings."""
    build = functools.partial(tavily.agent_request, searcher.config.source(NAME).url, query, k)
    outcome = searcher.call(NAME, build, caller="bakeoff")
    warnings = [f"{NAME}: {outcome.failure}"] if outcome.failure else []
    return DirectAnswer(hits=list(outcome.hits[:k]), credits=outcome.credits, warnings=warnings)
