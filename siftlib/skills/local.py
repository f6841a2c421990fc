"""Local ranking (spec §10): the relevance scorer ranks the catalog and may say no skill fits.

Everything runs on the machine: the catalog's names and descriptions (never bodies), the
Snowball stemmer, the concept vocabulary and the word-piece table shipped in the package.
Nothing is sent anywhere and nothing needs consent, so a project config may choose this mode.

The decision: rank every skill by relevance (`relevance.py`); when the best one's steadied
confidence is under `MIN_CONFIDENCE`, no skill fits and the result is empty. The steadied
confidence is half the plain one (cosine plus half the covered share of the query) and half
the least that stays when any one query term is left out: a near-miss leans on one
coincidental word ("merge sort in c" -> merge-conflict-resolver; without "merge", nothing is
left), while a request that fits holds on through its other words. Declining on the best
skill alone, not filtering each skill by its own confidence, keeps a weak but well-covered
skill from standing in for a declined best one. Otherwise the result is, in relevance order,
every skill at least that confident and scoring within `SCORE_MARGIN` of the best, sliced to
`limit`; `total` counts them, so it holds the skills that compete for the request ("fill in a
word document": a few, not every skill that touches documents).

`MIN_CONFIDENCE` is the lowest threshold at which every writer's no-fit requests, on each of
three catalogs of different domains (`testdata/skills/writers/`), are declined at least 60 %
of the time and all of them 70 %: the worst writer binds, so a threshold tuned where no-fit
requests are easy (everyday chatter against a software catalog) cannot pass for one that
declines an in-domain request no skill covers. Chosen that way without one writer or one
catalog, it lands at 0.352-0.377, and the figures on the left-out one, decided with it, are those
reported (`tests/bench/bench_skills.py`); what else was measured is in
`docs/skills-measurements.md`.

    result = local_search(catalog, "fill in a word document", 5)
    if not result.matches: ...  # no skill fits: details say "selection": "none"
"""

from __future__ import annotations

from siftlib.errors import ToolError
from siftlib.skills.catalog import Catalog
from siftlib.skills.keyword import SkillResult, check_limit, query_terms
from siftlib.skills.relevance import RelevanceIndex

MIN_CONFIDENCE = 0.377
SCORE_MARGIN = 0.1


def local_search(
    catalog: Catalog, query: str, limit: int, *, min_confidence: float = MIN_CONFIDENCE
) -> SkillResult:
    """Return the skills that fit `query` best first, or none when the best is not confident."""
    check_limit(limit)
    if not query_terms(query):
        raise ToolError("the query has no search terms (letters or digits)")
    index = RelevanceIndex.of(catalog)
    relevance = index.score(query)
    best = relevance.best(1)
    steadiness = index.steadiness(query, relevance)
    if not best or steadiness.confidence(best[0].position) < min_confidence:
        return SkillResult(matches=(), total=0, mode="local")
    fitting = [
        position
        for position in relevance.within(best[0].score - SCORE_MARGIN)
        if steadiness.confidence(position) >= min_confidence
    ]
    shown = relevance.best(limit, among=fitting)
    matches = tuple(catalog.skills[s.position] for s in shown)
    return SkillResult(matches, len(fitting), mode="local", scores=tuple(s.score for s in shown))
