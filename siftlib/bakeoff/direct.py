"""Configuration 4, `tavily-direct`: Tavily called the way an agent's own Tavily tool calls it.

No sift pipeline: one `POST` with the body an agent's Tavily web-search tool sends —
`{"query", "max_results": min(k, 20), "include_raw_content": false, "include_images": false}`
and the bearer key — through the source's pinned client (so the SSRF boundary still holds),
under `search.timeout`. The answer is mapped by the Tavily adapter, kept in Tavily's order.

Credits: `usage.credits` of a 2xx answer, 1 when absent (agents do not ask for `usage`); a
non-2xx answer spends nothing. The daily cap applies as in the pipeline: one credit reserved
before the call, given back when the call never left, settled to the actual credits after a
2xx answer, kept on a timeout (Tavily may have charged) — the pipeline's rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from siftlib.hits import Hit
from siftlib.pipeline import Searcher, utc_day

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
    import httpx

    from siftlib.dial import UpstreamRefused
    from siftlib.sources import BadResponse
    from siftlib.sources.tavily import Tavily

    store, source = searcher.store, searcher.config.source(NAME)
    day = utc_day(searcher.clock())
    reserved = 0
    if source.daily_credit_cap and store is not None:
        if not store.reserve(NAME, day=day, cap=source.daily_credit_cap, credits=1):
            return DirectAnswer(warnings=[f"{NAME}: daily cap"])
        reserved = 1

    def settle(actual: int | None) -> None:
        # actual=None: the call never left, so the reservation goes back.
        if reserved and store is not None:
            if actual is None:
                store.release(NAME, day=day, reserved=reserved)
            else:
                store.settle(NAME, day=day, reserved=reserved, actual=actual)

    try:
        response = searcher.upstream(NAME).client.post(
            source.url,
            json=agent_body(query, k),
            headers={"Authorization": f"Bearer {searcher.key(NAME) or ''}"},
            timeout=searcher.config.timeout,
        )
    except (UpstreamRefused, httpx.ConnectError, httpx.ConnectTimeout):
        settle(None)
        return DirectAnswer(warnings=[f"{NAME}: connection failed"])
    except httpx.TimeoutException:
        return DirectAnswer(warnings=[f"{NAME}: timeout"])
    except httpx.HTTPError:
        settle(0)
        return DirectAnswer(warnings=[f"{NAME}: connection failed"])
    if not 200 <= response.status_code < 300:
        settle(0)
        return DirectAnswer(warnings=[f"{NAME}: {response.status_code}"])
    try:
        answer = Tavily(source.url).parse(response.content)
    except BadResponse:
        settle(0)  # as in the pipeline: only a mapped answer counts its credits
        return DirectAnswer(warnings=[f"{NAME}: bad response"])
    settle(answer.credits)
    return DirectAnswer(hits=answer.hits[:k], credits=answer.credits)
