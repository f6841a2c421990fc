"""The keyword baseline (spec §3): the result every search returns unless reranking decides.

A skill scores 100 when the normalised query is its name, else 40 when its name contains the
query; then, per query term, +8 for a whole word of the name (split on `-`), else +4 when
the name contains the term, and +2 for a whole word of the description, else +1 when the
description contains it. Only positive scores match, best first, ties by name.

    result = keyword_search(catalog, "fill a pdf form", 5)
"""

from __future__ import annotations

from dataclasses import dataclass

from siftlib.errors import ToolError
from siftlib.skills.catalog import WORD, Catalog, Skill

DEFAULT_LIMIT = 5
MAX_LIMIT = 20


@dataclass(frozen=True)
class SkillResult:
    """The skills a search returns, how many matched before the limit, and the mode if shown."""

    matches: tuple[Skill, ...]
    total: int
    mode: str | None = None
    # Why opted-in reranking did not decide this result (`timeout`, `uncertain`, `missing_key`…).
    fallback: str | None = None
    # Each match's score in the ranking that chose it (keyword or local relevance), so a caller
    # reporting scores does not rank the catalog again; empty when a reranker ordered them.
    scores: tuple[float, ...] = ()


def normalise_query(query: str) -> str:
    """Return the query trimmed and lowercased."""
    return query.strip().lower()


def query_terms(query: str) -> list[str]:
    """Return the query's letter/digit runs, lowercased, without repeats, in order."""
    return list(dict.fromkeys(WORD.findall(normalise_query(query))))


def check_limit(limit: object) -> int:
    """Return `limit` if it is an integer from 1 to 20; raise `ToolError` otherwise."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ToolError(f"limit must be an integer from 1 to {MAX_LIMIT}")
    return limit


def keyword_scores(catalog: Catalog, query: str) -> list[tuple[Skill, int]]:
    """Score every eligible skill; return them best first, ties by name, zero scores included."""
    scores = _scores(catalog, query)
    # The catalog is sorted by name and the sort is stable, so ties stay in name order.
    order = sorted(range(len(scores)), key=scores.__getitem__, reverse=True)
    return [(catalog.skills[i], scores[i]) for i in order]


def _scores(catalog: Catalog, query: str) -> list[int]:
    """Return each skill's score, in catalog order."""
    normalised = normalise_query(query)
    rows = catalog.folded
    scores = [100 if normalised == r[0] else 40 if normalised in r[0] else 0 for r in rows]
    for term in query_terms(normalised):
        # Only skills whose name or description holds the term can score for it.
        for index in [i for i, text in enumerate(catalog.texts) if term in text]:
            name, name_words, description, description_words = rows[index]
            in_name = term in name
            if in_name:
                scores[index] += 8 if term in name_words else 4
            if term in description_words:
                scores[index] += 2
            elif not in_name or term in description:  # not in the name: so in the description
                scores[index] += 1
    return scores


def keyword_search(catalog: Catalog, query: str, limit: int) -> SkillResult:
    """Return the keyword result: positive scores only, sliced to `limit`."""
    check_limit(limit)
    if not query_terms(query):
        raise ToolError("the query has no search terms (letters or digits)")
    scores = _scores(catalog, query)
    positive = [i for i, score in enumerate(scores) if score > 0]
    positive.sort(key=scores.__getitem__, reverse=True)  # stable: ties stay in name order
    shown = positive[:limit]
    return SkillResult(
        matches=tuple(catalog.skills[i] for i in shown),
        total=len(positive),
        scores=tuple(scores[i] for i in shown),
    )
