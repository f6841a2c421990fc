"""Local ranking (spec §10): the relevance scorer ranks the catalog and may say no skill fits.

Everything runs on the machine: the catalog's names and descriptions (never bodies), the
Snowball stemmer and the concept vocabulary shipped in the package. Nothing is sent anywhere
and nothing needs consent, so a project config may choose this mode.

The decision: rank every skill by relevance; when the best one covers less than
`MIN_COVERAGE` of the query's information, no skill fits and the result is empty. Otherwise
the result is, in relevance order, every skill covering at least that much and scoring at
least `RELATIVE_SCORE` of the best, sliced to `limit`; `total` counts them. The score bar
changes no first match and no decline; it keeps `total` to the skills that compete for the
request ("fill in a word document": 6 of the real catalog, not the 38 that touch documents).

Declining on the best skill alone, rather than on each, was measured: filtering each skill by
coverage lets a weak but well-covered skill stand in for a declined best one, and declined 17
points fewer no-fit queries on the development halves.

`MIN_COVERAGE` is calibrated on the development halves of `testdata/skills/` (the fixture
catalog's and the real catalog's) as the lowest value at which both decline at least 70 % of
their no-fit queries (the issue's target of 60 %, plus a margin): lower thresholds pick the
right skill a little more often and say "no skill fits" much less. The held-out halves only
report (`make bench`).

    result = local_search(catalog, "fill in a word document", 5)
    if not result.matches: ...  # no skill fits: details say "selection": "none"
"""

from __future__ import annotations

from siftlib.errors import ToolError
from siftlib.skills.catalog import Catalog
from siftlib.skills.keyword import SkillResult, check_limit, query_terms

MIN_COVERAGE = 0.35
RELATIVE_SCORE = 0.5


def local_search(
    catalog: Catalog, query: str, limit: int, *, min_coverage: float = MIN_COVERAGE
) -> SkillResult:
    """Return the skills that fit `query` best first, or none when the best covers too little."""
    check_limit(limit)
    if not query_terms(query):
        raise ToolError("the query has no search terms (letters or digits)")
    relevance = catalog.relevance.score(query)
    best = relevance.best(1)
    if not best or best[0].coverage < min_coverage:
        return SkillResult(matches=(), total=0, mode="local")
    bar = {"min_coverage": min_coverage, "min_score": RELATIVE_SCORE * best[0].score}
    total = len(list(relevance.fitting(**bar)))
    matches = tuple(catalog.skills[s.position] for s in relevance.best(limit, **bar))
    return SkillResult(matches=matches, total=total, mode="local")
