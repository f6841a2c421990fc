"""The plan of one search: whom to ask, how to merge their hits, and the cache key it is under.

    planned, skipped = choose_sources(request, query, day, warnings, fanout=f, accounts=a)
    key = search_key(config, request, query, planned, k=8, merge="rrf", now=time.time())

A source is planned when it is enabled, keyed, reachable (its client, once open, reports no
problem), takes a query this long and is under its daily cap; each one left out is a warning
and a counted failure (`siftlib.search.accounting`). The cache key names each planned source
with its configured URL, `k`, the merge, the hour and the caller's partition, so a plan that
changes is never answered with another plan's hits.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from siftlib.store.base import cache_key

if TYPE_CHECKING:
    from siftlib.config import Config
    from siftlib.search.accounting import Accounts
    from siftlib.search.fanout import FanOut
    from siftlib.search.pipeline import SearchRequest


def hour_bucket(now: float) -> str:
    """Return the cache's hour bucket, UTC `YYYY-MM-DDTHH`."""
    return _hour_text(int(now // 3600))


def utc_day(now: float) -> str:
    """Return the daily cap's day, UTC `YYYY-MM-DD`."""
    return _hour_text(int(now // 3600))[:10]


@functools.lru_cache(maxsize=4)
def _hour_text(hour: int) -> str:
    # Every search needs both texts; formatting them once an hour keeps strftime off the hot path.
    return time.strftime("%Y-%m-%dT%H", time.gmtime(hour * 3600))


def caller_class(caller: str, restricted: Collection[str]) -> str:
    """Return the cache partition: `fleet`, or a restricted caller's own `restricted:<name>`."""
    return f"restricted:{caller}" if caller in restricted else "fleet"


def choose_sources(
    request: SearchRequest,
    query: str,
    day: str,
    warnings: list[str],
    *,
    fanout: FanOut,
    accounts: Accounts,
) -> tuple[list[str], list[str]]:
    """Choose the sources to call: enabled, keyed, reachable, under their caps.

    The sources skipped come back too; each is a warning, a counted and logged failure.
    """
    plan: list[str] = []
    skipped: list[str] = []
    daily = accounts.planning_credits(day)
    for name, adapter in fanout.adapters.items():
        if request.sources is not None and name not in request.sources:
            continue
        problem = fanout.opened_problem(name)
        why = "missing key" if fanout.missing_key(name) else problem
        if why is None and adapter.query_too_long(query):
            why = "query too long"
        if why is None and accounts.capped(name, daily):
            why = "daily cap"
        if why is None:
            plan.append(name)
            continue
        accounts.skip(name, why, warnings, skipped)
        if why == problem:  # the upstream's own state, unlike a key or cap
            accounts.health.record(name, ok=False, ms=None)
    return plan, skipped


def merge_mode(config: Config, rerank: bool, planned: Sequence[str]) -> str:
    """Return how the planned sources' hits merge: `concat`, `rrf` or `rrf+tavily-prefix`."""
    if not rerank:
        return "concat"
    tavily = config.source("tavily")
    return "rrf+tavily-prefix" if tavily.no_rerank and "tavily" in planned else "rrf"


def search_key(
    config: Config,
    request: SearchRequest,
    query: str,
    planned: Sequence[str],
    *,
    k: int,
    merge: str,
    now: float,
) -> str:
    """Return the cache key of a planned search."""
    return cache_key(
        query=query,
        # Each source with its configured URL: pointing one elsewhere (a reload, an
        # edited config) must never serve the old upstream's entries.
        sources=[f"{name} {config.source(name).url}" for name in planned],
        k=k,
        merge=merge,
        hour_bucket=hour_bucket(now),
        caller_class=caller_class(request.caller, config.permit_restricted),
    )
