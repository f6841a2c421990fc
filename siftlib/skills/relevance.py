"""How well each skill's name and description answers a query: the local relevance scorer.

It feeds the local ranking mode (spec §10) and the shortlist's concept stream (§5.2). Two
signals are fused: what the query says literally (BM25F over stems and reviewed synonyms) and
what it means (the cosine of word-piece embeddings, `meaning.py`), which finds the skill for a
paraphrase that shares no word with it ("hand these fixes to helpers that run at once" ->
dispatching-parallel-agents).

Lexical part. Text is split into the words that carry meaning and stemmed (`text.py`). A
skill is a two-field document, name and the description's `purpose` (without the clauses
saying what the skill is not for, whose words name other skills' work); a term is weighed
BM25F-style: name occurrences count `NAME_WEIGHT` times, each field's occurrences are
normalised by that field's length, the sum saturates with `K1`, and the term's IDF over the
catalog scales it. Each query
term is matched by its own stem (weight 1) and by the stems of the other terms of every
vocabulary concept it belongs to (`SYNONYM_WEIGHT`, below 1 so the literal word outranks its
synonym). Per skill, a query term counts once, by its best match, so a concept with many terms
does not outvote the query's other terms. A hyphenated or slashed compound also counts
written joined ("use-after-free": "useafterfree", as the vocabulary spells it), which stands in
for a query word only in a skill lacking that word. A query word that abbreviates a hyphenated skill
name by a prefix of each of its words ("asan": address-sanitizer, `spelled_out`) is read with
the name's words after it, when neither the catalog nor a vocabulary knows it as a word. Each
skill also gets a coverage: the share of the
query's information (its terms weighed by their IDF, a term the catalog never uses weighing
most) that the skill matches, at the match's weight.

Fusion. A skill's score is its cosine with the query plus `LEXICAL_WEIGHT` x its BM25F score
relative to the query's best, where the words that only say what a requested thing is about
(`text.topic_words`: "make a poster for our PDF workshop") weigh `TOPIC_WEIGHT`, in both
signals; its confidence that it fits, which weighs every word alike, is its cosine plus
`COVERAGE_WEIGHT` x its coverage. A near-miss that shares one word with a skill ("split the
bill between friends") covers little of its query and means something else, and its
confidence falls further when that word is left out (`Steadiness`; the decision is in
`local.py`). A query naming a skill puts that skill first, certain.

The constants were chosen on the development sets of `testdata/skills/`; what was measured,
and what was tried and left out, is in `docs/skills-measurements.md`.

    index = RelevanceIndex.of(catalog)
    ranked = index.rank("combine several pdfs")  # [Scored(position, score, confidence), ...]
"""

from __future__ import annotations

import heapq
import math
import operator
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from siftlib.skills.catalog import Catalog, Skill
from siftlib.skills.meaning import MeaningIndex, table
from siftlib.skills.memo import PerCatalog
from siftlib.skills.text import (
    MAKING,
    WORD,
    abbreviates,
    compounds,
    purpose,
    stem,
    terms,
    topic_words,
    words,
)
from siftlib.skills.vocabulary import concepts

K1 = 1.2
B = 0.75
NAME_WEIGHT = 3.0
SYNONYM_WEIGHT = 0.95
LEXICAL_WEIGHT = 0.5
COVERAGE_WEIGHT = 0.5
STEADY_WEIGHT = 0.5
TOPIC_WEIGHT = 0.5
MAX_LEFT_OUT = 32
MIN_ABBREVIATION = 3
MAX_ABBREVIATION = 12


class Scored(NamedTuple):
    """One skill's relevance: its position in the catalog, score and confidence that it fits."""

    position: int
    score: float
    confidence: float


@lru_cache(maxsize=16384)
def related(term: str) -> frozenset[str]:
    """Return the stems of the other words of every vocabulary concept that stem `term` is in."""
    # Stemming all 1,500 vocabulary words up front costs a cold process a third of a second;
    # Snowball keeps a word's first two letters, so only words sharing them can stem to `term`.
    groups = _groups_by_opening().get(term[:2], ())
    touched = [concept for concept in groups if any(stem(word) == term for word in concept)]
    return frozenset(stem(word) for concept in touched for word in concept) - {term}


@lru_cache(maxsize=1)
def _groups_by_opening() -> dict[str, list[tuple[str, ...]]]:
    """Map each two-letter opening to the concepts with a word that starts with it."""
    groups: dict[str, list[tuple[str, ...]]] = defaultdict(list)
    for concept in concepts().values():
        for opening in dict.fromkeys(word[:2] for word in concept):
            groups[opening].append(concept)
    return groups


class Relevance(NamedTuple):
    """Every skill's score and confidence for one query, by catalog position."""

    scores: list[float]
    confidence: list[float]
    coverage: dict[int, float]  # the share of the query each skill sharing a term matches
    synonyms: dict[int, set[str]]  # per skill: the query terms it covers through a synonym

    def best(self, count: int, among: Iterable[int] | None = None) -> list[Scored]:
        """Return the `count` best skills (of the positions `among`, else of all), best first."""
        positions = range(len(self.scores)) if among is None else among
        # nlargest keeps the earlier position first among equal scores, as sorted() would.
        top = heapq.nlargest(count, positions, key=self.scores.__getitem__)
        return [Scored(p, self.scores[p], self.confidence[p]) for p in top]

    def within(self, min_score: float) -> list[int]:
        """Return the positions of the skills scoring at least `min_score`, in catalog order."""
        return [p for p, score in enumerate(self.scores) if score >= min_score]


@dataclass(frozen=True)
class RelevanceIndex:
    """An inverted index of a catalog's names and descriptions, weighed for BM25F."""

    size: int
    named: dict[str, int]
    # stem -> {position: IDF x saturated field-weighted frequency}
    postings: dict[str, dict[int, float]]
    idf: dict[str, float]
    meaning: MeaningIndex
    joined: frozenset[str]  # the stems of hyphenated or slashed compounds written joined
    # first letter -> the words of each hyphenated name opening with it
    initials: dict[str, list[tuple[str, ...]]]

    @classmethod
    def of(cls, catalog: Catalog) -> RelevanceIndex:
        """Return the index of `catalog`, built the first time (sessions build it at open)."""
        return _INDEXES(catalog)

    @classmethod
    def build(cls, skills: Sequence[Skill]) -> RelevanceIndex:
        """Index the names and descriptions of `skills` (bodies are never read)."""
        purposes = [purpose(skill.description) for skill in skills]
        name_terms = [terms(skill.name.replace("-", " ")) for skill in skills]
        description_terms = [terms(text) for text in purposes]
        average = sum(map(len, description_terms)) / len(skills) if skills else 1.0
        average_name = sum(map(len, name_terms)) / len(skills) if skills else 1.0
        frequencies: dict[str, dict[int, float]] = defaultdict(dict)
        joined: set[str] = set()
        for position, (in_name, in_description) in enumerate(
            zip(name_terms, description_terms, strict=True)
        ):
            step = 1 / (1 - B + B * len(in_description) / (average or 1.0))
            weighted = dict.fromkeys(in_description, 0.0)
            for term in in_description:
                weighted[term] += step
            # Each field is normalised by its own length, as BM25F does: "semgrep" says more
            # of semgrep-rule-creator than of semgrep-rule-variant-creator.
            name_step = NAME_WEIGHT / (1 - B + B * len(in_name) / (average_name or 1.0))
            for term in in_name:
                weighted[term] = weighted.get(term, 0.0) + name_step
            # A compound counts joined too, at its field's step, without lengthening the field.
            description_compounds = compounds(purposes[position])
            name_compounds = compounds(skills[position].name)
            joined.update(description_compounds, name_compounds)
            for term in description_compounds:
                weighted[term] = weighted.get(term, 0.0) + step
            for term in name_compounds:
                weighted[term] = weighted.get(term, 0.0) + name_step
            for term, frequency in weighted.items():
                frequencies[term][position] = frequency * (K1 + 1) / (frequency + K1)
        size = len(skills)
        _groups_by_opening()  # the vocabulary's concepts, read now rather than in a search
        idf = {term: _idf(size, len(docs)) for term, docs in frequencies.items()}
        for term, docs in frequencies.items():
            weight = idf[term]
            for position in docs:
                docs[position] *= weight
        meaning = MeaningIndex.build(
            [
                f"{skill.name.replace('-', ' ')} {text}"
                for skill, text in zip(skills, purposes, strict=True)
            ]
        )
        initials: dict[str, list[tuple[str, ...]]] = defaultdict(list)
        for skill in skills:
            parts = tuple(WORD.findall(skill.name.lower()))
            if len(parts) > 1:
                initials[parts[0][0]].append(parts)
        return cls(
            size, _names(skills), dict(frequencies), idf, meaning, frozenset(joined), dict(initials)
        )

    def spelled_out(self, query: str) -> str:
        """Return `query` with each word that abbreviates a skill's hyphenated name ("turn on
        asan" -> address-sanitizer) followed by the name's words; only a word that neither the
        catalog, the reviewed vocabulary ("ssh") nor the word-piece vocabulary as a whole word
        ("loan" is no log-analysis) knows."""
        pieces = table().rows

        def spell(match: re.Match[str]) -> str:
            word = match.group().lower()
            if (
                not MIN_ABBREVIATION <= len(word) <= MAX_ABBREVIATION
                or not word.isalpha()
                or word in pieces
                or stem(word) in self.idf
                or related(stem(word))
            ):
                return match.group()
            names = [
                " ".join(parts)
                for parts in self.initials.get(word[0], ())
                if abbreviates(word, parts)
            ]
            return " ".join([match.group(), *names])

        return WORD.sub(spell, query)

    def score(self, query: str) -> Relevance:
        """Return every skill's score and confidence for `query`."""
        # What a requested thing is about ranks at half weight; the confidence that a skill
        # fits still weighs the whole request ("make a poster for our PDF workshop").
        query = self.spelled_out(query)
        aside = topic_words(query)
        lexical, coverage, synonyms, named = self.lexical(query, aside)
        confidence = self.meaning.cosines(query)
        scores = self.meaning.cosines(query, aside) if aside else confidence.copy()
        top = max(lexical.values(), default=1.0)
        for position, value in lexical.items():
            scores[position] += LEXICAL_WEIGHT * value / top
            confidence[position] += COVERAGE_WEIGHT * coverage[position]
        if named is not None:  # the query is a skill's name: that skill fits, first
            scores[named] = confidence[named] = math.inf
        return Relevance(scores, confidence, coverage, synonyms)

    def lexical(
        self, query: str, aside: frozenset[str] = frozenset()
    ) -> tuple[dict[int, float], dict[int, float], dict[int, set[str]], int | None]:
        """Return BM25F scores (the terms of words set `aside` at `TOPIC_WEIGHT`) and coverage
        of the skills `query` shares a term with, the query terms each covers through a
        synonym, and the position of the skill `query` names."""
        scores: dict[int, float] = {}
        covered: dict[int, float] = {}
        synonyms: dict[int, set[str]] = {}
        explaining: dict[int, set[str]] = {}  # per skill: its stems already covering a term
        information = 0.0
        postings = self.postings
        query_terms = dict.fromkeys(terms(query))
        topic = {stem(word) for word in aside}
        for term in query_terms:
            weight = self.weight(term)
            information += weight
            best: dict[int, float] = {}
            literal = postings.get(term, {})
            for other in sorted(related(term)):
                for position, value in postings.get(other, {}).items():
                    # A compound written joined stands in for a word the skill lacks, never
                    # beside the word it has ("plan" is no more "multi-step" in writing-plans).
                    if position in literal and other in self.joined:
                        continue
                    value *= SYNONYM_WEIGHT
                    if value > best.get(position, 0.0):
                        best[position] = value
                    # Coverage counts one skill word for one query word: a word the query
                    # says itself, or one that already covers another term, covers no more
                    # ("translate ... into japanese": "translate" is not also "japanese").
                    # Nor does a verb of making ("drafts", "creates") stand in for the thing
                    # a request names ("write a cover letter": a letter is not a draft).
                    if (
                        position in literal
                        or other in _making()
                        or other in query_terms
                        or term in synonyms.get(position, ())
                        or other in explaining.get(position, ())
                    ):
                        continue
                    synonyms.setdefault(position, set()).add(term)
                    explaining.setdefault(position, set()).add(other)
                    covered[position] = covered.get(position, 0.0) + SYNONYM_WEIGHT * weight
            for position, value in literal.items():
                covered[position] = covered.get(position, 0.0) + weight
                if value > best.get(position, 0.0):
                    best[position] = value
            emphasis = TOPIC_WEIGHT if term in topic else 1.0
            for position, value in best.items():
                scores[position] = scores.get(position, 0.0) + value * emphasis
        named = self.named.get(" ".join(WORD.findall(query.lower())))
        share = 1 / information if information else 0.0
        coverage = {position: covered.get(position, 0.0) * share for position in scores}
        return scores, coverage, synonyms, named

    def weight(self, term: str) -> float:
        """Return the information `term` carries about which skill fits: its IDF (a term no
        skill uses weighs most), and none for a verb of making, which nearly every request
        opens with ("write a graphql resolver" asks for a resolver)."""
        if term in _making():
            return 0.0
        return self.idf.get(term, _idf(self.size, 0))

    def steadiness(self, query: str, relevance: Relevance) -> Steadiness:
        """Return how each skill's confidence for `query` holds with one term left out."""
        return Steadiness(self, self.spelled_out(query), relevance)

    def rank(self, query: str) -> list[Scored]:
        """Return every skill, best first for `query`, ties by catalog position."""
        relevance = self.score(query)
        return relevance.best(len(relevance.scores))


class Steadiness:
    """A query's confidences blended with the least each keeps when one term is left out.

    A near-miss leans on one coincidental word ("merge sort in c" -> merge-conflict-resolver):
    without it the skill's cosine and coverage fall away, while a fitting request holds on.
    """

    def __init__(self, index: RelevanceIndex, query: str, relevance: Relevance) -> None:
        pieces = table()
        rows: dict[str, list[int]] = {}  # each term of the query: its words' piece rows
        for word in words(query):
            rows.setdefault(stem(word), []).extend(pieces.tokens(word))
        weights = {term: index.weight(term) for term in rows}
        self._index = index
        self._relevance = relevance
        self._information = sum(weights.values())
        # A one-term query has nothing to leave out: its confidence stands as it is. Of a long
        # one, only the most informative terms are left out in turn, so a hostile query of
        # thousands of words costs no more than one of `MAX_LEFT_OUT`.
        left_out = sorted(weights, key=weights.__getitem__, reverse=True)[:MAX_LEFT_OUT]
        whole = pieces.values([row for term_rows in rows.values() for row in term_rows])
        self._without: dict[str, tuple[float, list[int], float]] = {}
        for term in left_out if len(rows) > 1 else ():
            rest = [a - b for a, b in zip(whole, pieces.values(rows[term]), strict=True)]
            self._without[term] = (weights[term], rest, math.hypot(*rest))

    def confidence(self, position: int) -> float:
        """Return the skill's confidence, half its own and half the least with a term left out."""
        confidence = self._relevance.confidence[position]
        if not self._without or math.isinf(confidence):
            return confidence
        meaning = self._index.meaning
        skill = meaning.vector(position)
        inverse = meaning.inverse_norms[position]
        information = self._information
        covered = self._relevance.coverage.get(position, 0.0) * information
        least = math.inf
        for term, (weight, rest, length) in self._without.items():
            cosine = sum(map(operator.mul, rest, skill)) * inverse / length if length else 0.0
            left = information - weight
            share = (covered - weight * self._match(term, position)) / left if left else 0.0
            least = min(least, cosine + COVERAGE_WEIGHT * share)
        return (1 - STEADY_WEIGHT) * confidence + STEADY_WEIGHT * least

    def _match(self, term: str, position: int) -> float:
        """Return how the skill covers `term`: 1 literally, `SYNONYM_WEIGHT` by synonym, or 0."""
        if position in self._index.postings.get(term, {}):
            return 1.0
        if term in self._relevance.synonyms.get(position, ()):
            return SYNONYM_WEIGHT
        return 0.0


@lru_cache(maxsize=1)
def _making() -> frozenset[str]:
    """Return the stems of the verbs of making (`text.MAKING`)."""
    return frozenset(stem(word) for word in MAKING)


def _names(skills: Sequence[Skill]) -> dict[str, int]:
    """Map each skill's name, as its lowercase words joined by spaces, to its position."""
    named: dict[str, int] = {}
    for position, skill in enumerate(skills):
        named.setdefault(" ".join(WORD.findall(skill.name.lower())), position)
    return named


def _idf(size: int, frequency: int) -> float:
    """Return BM25's IDF, never negative."""
    return math.log(1 + (size - frequency + 0.5) / (frequency + 0.5))


_INDEXES: PerCatalog[RelevanceIndex] = PerCatalog(
    lambda catalog: RelevanceIndex.build(catalog.skills)
)
