"""The keyword baseline (spec §3): the result every search returns unless reranking decides.

A skill scores 100 when the normalised query is its name, else 40 when its name contains the
query; then, per query term, +8 for a whole word of the name (split on `-`), else +4 when
the name contains the term, and +2 for a whole word of the description, else +1 when the
description contains it. Only positive scores match, best first, ties by name.

    result = keyword_search(catalog, "fill a pdf form", 5)
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import NamedTuple

from siftlib.errors import ToolError
from siftlib.skills.catalog import Catalog, Skill
from siftlib.skills.memo import PerCatalog
from siftlib.skills.text import WORD

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


class Folded(NamedTuple):
    """A skill's name and description lowercased, with their words, ready for matching."""

    name: str
    name_words: frozenset[str]
    description: str
    description_words: frozenset[str]

    @classmethod
    def of(cls, skill: Skill) -> Folded:
        """Return `skill`'s name and description lowercased, and their words."""
        name, description = skill.name.lower(), skill.description.lower()
        return cls(
            name, frozenset(name.split("-")), description, frozenset(WORD.findall(description))
        )


class Runs:
    """One field's letter/digit runs over the catalog, to find the skills whose field holds a term.

    A query term is itself a letter/digit run, so wherever it occurs in a field it lies inside
    one of the field's runs: the skills holding it are those having a run that holds it. The
    catalog has far fewer distinct runs than text, so most terms are found by scanning the runs
    joined into one string; a term inside very many runs is faster tested field by field.
    """

    def __init__(self, fields: Sequence[str], runs_per_field: Iterable[Iterable[str]]) -> None:
        postings: dict[str, list[int]] = defaultdict(list)
        for position, runs in enumerate(runs_per_field):
            for run in runs:
                postings[run].append(position)
        self.fields = fields
        self.postings = dict(postings)  # run -> positions of the skills with it, ascending
        self._runs = tuple(self.postings)
        self._joined = "\n".join(self._runs)
        self._starts = list(accumulate((len(run) + 1 for run in self._runs), initial=0))

    def holding(self, term: str) -> set[int]:
        """Return the positions of the skills whose field contains `term`."""
        joined, starts = self._joined, self._starts
        # Past this many runs, one test per field is cheaper than looking up each run found.
        if joined.count(term) > len(self.fields) // 5:
            return {position for position, field in enumerate(self.fields) if term in field}
        found: set[int] = set()
        at = joined.find(term)
        while at != -1:
            number = bisect_right(starts, at) - 1
            found.update(self.postings[self._runs[number]])
            at = joined.find(term, starts[number + 1])  # on from the next run
        return found


@dataclass(frozen=True)
class KeywordIndex:
    """Where each name and description run is, for keyword scoring (built once per catalog)."""

    folded: tuple[Folded, ...]
    names: Runs
    descriptions: Runs
    name_words: dict[str, list[int]]  # name split on "-" -> positions

    @classmethod
    def of(cls, catalog: Catalog) -> KeywordIndex:
        """Return the index of `catalog`, built the first time (sessions build it at open)."""
        return _INDEXES(catalog)

    @classmethod
    def build(cls, skills: Sequence[Skill]) -> KeywordIndex:
        """Index the lowercased names and descriptions of `skills`."""
        folded = tuple(map(Folded.of, skills))
        name_words: dict[str, list[int]] = defaultdict(list)
        for position, skill in enumerate(folded):
            for word in skill.name_words:
                name_words[word].append(position)
        return cls(
            folded=folded,
            names=Runs([s.name for s in folded], (set(WORD.findall(s.name)) for s in folded)),
            descriptions=Runs(
                [s.description for s in folded], (s.description_words for s in folded)
            ),
            name_words=dict(name_words),
        )


_INDEXES: PerCatalog[KeywordIndex] = PerCatalog(lambda catalog: KeywordIndex.build(catalog.skills))


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
    scores, _ = _scores(catalog, query)
    # The catalog is sorted by name and the sort is stable, so ties stay in name order.
    order = sorted(range(len(scores)), key=scores.__getitem__, reverse=True)
    return [(catalog.skills[i], scores[i]) for i in order]


def _scores(catalog: Catalog, query: str) -> tuple[list[int], set[int]]:
    """Return each skill's score, in catalog order, and the positions that scored."""
    index = KeywordIndex.of(catalog)
    normalised = normalise_query(query)
    scores = [0] * len(catalog.skills)
    scored: set[int] = set()
    named: Iterable[int] = range(len(scores))  # with no term, any name may hold the query
    for number, term in enumerate(query_terms(normalised)):
        in_name = index.names.holding(term)
        in_description = index.descriptions.holding(term)
        whole = index.descriptions.postings.get(term, ())
        scored |= in_name
        scored |= in_description
        for position in in_name:
            scores[position] += 4
        for position in index.name_words.get(term, ()):  # a whole word of the name: +4 more
            scores[position] += 4
        for position in whole:
            scores[position] += 2
        in_description.difference_update(whole)
        for position in in_description:
            scores[position] += 1
        if number == 0:
            named = in_name  # a name holds the whole query only if it holds its first term
    for position in named:
        name = index.folded[position].name
        if normalised in name:
            scores[position] += 100 if normalised == name else 40
            scored.add(position)
    return scores, scored


def keyword_search(catalog: Catalog, query: str, limit: int) -> SkillResult:
    """Return the keyword result: positive scores only, sliced to `limit`."""
    check_limit(limit)
    if not query_terms(query):
        raise ToolError("the query has no search terms (letters or digits)")
    scores, scored = _scores(catalog, query)
    positive = sorted(scored)
    positive.sort(key=scores.__getitem__, reverse=True)  # stable: ties stay in name order
    shown = positive[:limit]
    return SkillResult(
        matches=tuple(catalog.skills[i] for i in shown),
        total=len(positive),
        scores=tuple(scores[i] for i in shown),
    )
