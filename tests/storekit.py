"""What the store tests share: two hits of every field and a cache key."""

from __future__ import annotations

from clockkit import HOUR

from siftlib.hits import Hit
from siftlib.store.base import cache_key

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
    "hour_bucket": HOUR,
    "caller_class": "fleet",
}


def key(query: object = KEY_PARTS["query"], **changes: object) -> str:
    """The cache key of KEY_PARTS for `query`, with some other parts changed."""
    return cache_key(**{**KEY_PARTS, "query": query, **changes})  # type: ignore[arg-type]
