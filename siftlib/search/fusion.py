"""Merging: every source's hits become one deduplicated, deterministic list.

All merging lives here (search.md §4 steps 4–5):

- One rule for a page seen twice, within one source or across sources: it keeps the URL
  and title of its first appearance (first source in merge order, then best rank); a later,
  longer snippet replaces the snippet text only; a `published` date missing so far is
  taken from the later one.
- Within one source, a URL seen again (same canonical URL) is folded into its first
  appearance before ranking, so a source's ranks stay 1, 2, 3 … over distinct pages; its
  engine count is the larger of the two (the two lists may overlap).
- Across sources, `engines` adds up: each source counts its own engines, or 1 when it
  reports none, so every merged hit carries at least 1 (a Brave-only hit is 1).
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

import math
from collections.abc import Mapping, Sequence

from siftlib.hits import Hit
from siftlib.search.canonical_url import canonical_url

RRF_K = 60


class _Merged:
    """A page while merging: its first hit, what later sightings add, its rank per source."""

    __slots__ = ("hit", "order", "source_index", "ranks", "engines")

    def __init__(self, hit: Hit, order: int, source_index: int) -> None:
        self.hit, self.order, self.source_index = hit, order, source_index
        self.ranks: list[int] = []  # per source that has the page, in source order
        self.engines: list[int] = []

    def result(self) -> Hit:
        """Return the merged hit with its engine count: each source's engines, at least 1."""
        return self.hit._replace(engines=sum(max(n, 1) for n in self.engines))


def _seen_again(first: Hit, later: Hit) -> Hit:
    """Fold a later sighting of a page into its first: longer snippet, a missing date."""
    if len(later.snippet) > len(first.snippet):
        first = first._replace(snippet=later.snippet)
    if first.published is None and later.published is not None:
        first = first._replace(published=later.published)
    return first


def distinct(hits: Sequence[Hit]) -> dict[str, Hit]:
    """Fold one source's repeated pages into their first appearance, keeping rank order."""
    out: dict[str, Hit] = {}
    for hit in hits:
        key = canonical_url(hit.url)
        first = out.get(key)
        if first is None:
            out[key] = hit
        else:
            out[key] = _seen_again(first, hit)._replace(engines=max(first.engines, hit.engines))
    return out


def _collect(by_source: Mapping[str, Sequence[Hit]], order: Sequence[str]) -> list[_Merged]:
    merged: dict[str, _Merged] = {}
    for source_index, name in enumerate(order):
        for rank, (key, hit) in enumerate(distinct(by_source.get(name, ())).items(), 1):
            page = merged.get(key)
            if page is None:
                page = merged[key] = _Merged(hit, len(merged), source_index)
            else:
                page.hit = _seen_again(page.hit, hit)
            page.ranks.append(rank)
            page.engines.append(hit.engines)
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
        # fsum rounds the exact sum once, so equal rank sets score equal whatever their source
        # order, and ties fall to the rules below rather than to rounding.
        page.hit = page.hit._replace(score=math.fsum(1 / (RRF_K + rank) for rank in page.ranks))

    def rank_key(page: _Merged) -> tuple[int, int, float, int, int, int]:
        if prefix is not None and page.source_index == 0:
            return (0, page.order, 0.0, 0, 0, 0)
        return (1, 0, -page.hit.score, min(page.ranks), page.source_index, page.order)

    return [page.result() for page in sorted(pages, key=rank_key)]


def concatenate(by_source: Mapping[str, Sequence[Hit]], *, order: Sequence[str]) -> list[Hit]:
    """Join the sources' lists in source order, deduplicated, keeping each source's score."""
    return [page.result() for page in _collect(by_source, order)]
