"""What the store tests share: an hour, a day, two hits of every field, and a cache key."""

from __future__ import annotations

from siftlib.search.hits import Hit
from siftlib.store.base import cache_key

NOW = 1_764_475_200.0  # 2025-11-30T04:00:00Z, the start of an hour
DAY = "2025-11-30"
HITS = (
    Hit(
        url="https://a.example/x",
        title="A",
        snippet="first",
        score=0.03,
        source="searxng",
        published="2026-03-02",
        engines=2,
    ),
    Hit(url="https://b.example/y", title="B ☃", snippet="", score=0.0, source="tavily"),
)
KEY_PARTS: dict[str, object] = {
    "query": "SQLite WAL mode",
    "sources": ["searxng", "tavily"],
    "k": 8,
    "merge": "rrf",
    "hour_bucket": "2025-11-30T04",
    "caller_class": "fleet",
}


def key(**changes: object) -> str:
    """The cache key of KEY_PARTS with some parts changed."""
    return cache_key(**{**KEY_PARTS, **changes})  # type: ignore[arg-type]
