"""The keyword baseline (spec §3): the result every search returns unless reranking decides.

A skill scores 100 when the normalised query is its name, else 40 when its name contains the
query; then, per query term, +8 for a whole word of the name (split on `-`), else +4 when
the name contains the term, and +2 for a whole word of the description, else +1 when the
description contains it. Only positive scores match, best first, ties by name.

    result = keyword_search(catalog, "fill a pdf form", 5)
"""

from __future__ import annotations

from dataclasses import dataclass

from siftlib.errors import SiftError
from siftlib.skills.catalog import WORD, Catalog, Skill

DEFAULT_LIMIT = 5
MAX_LIMIT = 20


class ToolError(SiftError):
    """The caller's query or limit is invalid."""


@dataclass(frozen=True)
class SkillResult:
    """The skills a search returns, and how many matched before the limit."""

    matches: tuple[Skill, ...]
    total: int


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
    normalised = normalise_query(query)
    terms = query_terms(normalised)
    scored = []
    for skill, folded in zip(catalog.skills, catalog.folded, strict=True):
        name, description = folded.name, folded.description
        if normalised == name:
            score = 100
        elif normalised in name:
            score = 40
        else:
            score = 0
        for term in terms:
            if term in folded.name_words:
                score += 8
            elif term in name:
                score += 4
            if term in folded.description_words:
                score += 2
            elif term in description:
                score += 1
        scored.append((skill, score))
    scored.sort(key=_keyword_order)
    return scored


def _keyword_order(entry: tuple[Skill, int]) -> tuple[int, str]:
    return -entry[1], entry[0].name


def keyword_search(catalog: Catalog, query: str, limit: int) -> SkillResult:
    """Return the keyword result: positive scores only, sliced to `limit`."""
    check_limit(limit)
    if not query_terms(query):
        raise ToolError("the query has no search terms (letters or digits)")
    positive = [skill for skill, score in keyword_scores(catalog, query) if score > 0]
    return SkillResult(matches=tuple(positive[:limit]), total=len(positive))
