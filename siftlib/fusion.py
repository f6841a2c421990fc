"""Merging: every source's hits become one deduplicated, deterministic list.

All merging lives here (search.md §4 steps 4–5):

- Within one source, a URL seen again (same canonical URL) is dropped before ranking, so a
  source's ranks stay 1, 2, 3 … over distinct pages.
- Across sources, a page keeps the URL and title of the first source (in merge order) that
  returned it; a later, longer snippet replaces the snippet text only.
- `fuse`: reciprocal-rank fusion, score = Σ 1/(60 + rank). Ties break by the best single
  rank, then the attribution source's place in the source order, then first appearance.
  With `prefix` (Tavily under `no_rerank`), that source's hits come first in its own order
  and it is the first source for attribution; the remaining hits still fuse.
- `concatenate`: no merge at all; source order, deduplicated, each hit keeping its own
  source's score (0 where the source has none).

The input is a mapping from source name to that source's hits, already in the source's own
order, and iterated in the fixed source order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from siftlib.canonical_url import canonical_url
from siftlib.hits import Hit

RRF_K = 60


@dataclass
class _Merged:
    """A page while merging: its first hit, the best snippet, and its rank in each source."""

    hit: Hit
    snippet: str
    order: int
    source_index: int
    ranks: list[int] = field(default_factory=list)


def _distinct(hits: Sequence[Hit]) -> list[tuple[str, Hit]]:
    seen: set[str] = set()
    out = []
    for hit in hits:
        key = canonical_url(hit.url)
        if key not in seen:
            seen.add(key)
            out.append((key, hit))
    return out


def _collect(by_source: Mapping[str, Sequence[Hit]], order: Sequence[str]) -> list[_Merged]:
    merged: dict[str, _Merged] = {}
    for source_index, name in enumerate(order):
        for rank, (key, hit) in enumerate(_distinct(by_source.get(name, ())), 1):
            page = merged.get(key)
            if page is None:
                merged[key] = _Merged(hit, hit.snippet, len(merged), source_index, [rank])
                continue
            page.ranks.append(rank)
            if len(hit.snippet) > len(page.snippet):
                page.snippet = hit.snippet
    return list(merged.values())


def fuse(
    by_source: Mapping[str, Sequence[Hit]], *, order: Sequence[str], prefix: str | None = None
) -> list[Hit]:
    """Merge by reciprocal-rank fusion; `prefix` names a source whose order leads."""
    if prefix is not None and by_source.get(prefix):
        order = [prefix, *(name for name in order if name != prefix)]
    else:
        prefix = None
    pages = _collect(by_source, order)
    for page in pages:
        page.hit = replace(page.hit, score=sum(1 / (RRF_K + rank) for rank in page.ranks))

    def rank_key(page: _Merged) -> tuple[int, int, float, int, int, int]:
        if prefix is not None and page.source_index == 0:
            return (0, page.order, 0.0, 0, 0, 0)
        return (1, 0, -page.hit.score, min(page.ranks), page.source_index, page.order)

    return [replace(p.hit, snippet=p.snippet) for p in sorted(pages, key=rank_key)]


def concatenate(by_source: Mapping[str, Sequence[Hit]], *, order: Sequence[str]) -> list[Hit]:
    """Join the sources' lists in source order, deduplicated, keeping each source's score."""
    return [replace(p.hit, snippet=p.snippet) for p in _collect(by_source, order)]
