"""Local ranking (spec §10): the relevance ranking, and "no skill fits" below the threshold."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from siftlib.errors import ToolError
from siftlib.skills.catalog import Catalog, discover
from siftlib.skills.keyword import keyword_search
from siftlib.skills.local import MIN_CONFIDENCE, local_search
from siftlib.skills.relevance import MAX_LEFT_OUT, RelevanceIndex
from siftlib.skills.text import STOP_WORDS, WORD, stem, terms

from .conftest import MARKER, catalog_of

CATALOG = catalog_of(
    ("docx", "Create, read and edit Word documents (.docx): tables, headings, comments."),
    ("pdf", "Merge, split and fill in PDF files and forms."),
    ("xlsx", "Open and edit Excel spreadsheets: formulas, charts and pivot tables."),
    ("systematic-debugging", "Use when encountering any bug or test failure."),
    ("brainstorming", "Explore ideas, requirements and design before implementation."),
)


def names(catalog: Catalog, query: str, limit: int = 5) -> list[str]:
    return [skill.name for skill in local_search(catalog, query, limit).matches]


def test_the_fitting_skill_comes_first_where_keyword_matches_nearly_all() -> None:
    assert keyword_search(CATALOG, "edit a word document", 5).total == 5
    assert names(CATALOG, "edit a word document")[0] == "docx"


def test_a_synonym_only_query_finds_its_skill() -> None:
    assert names(CATALOG, "my workbook formulas are broken")[0] == "xlsx"
    assert names(CATALOG, "my test keeps crashing")[0] == "systematic-debugging"


def test_without_a_fitting_skill_nothing_fits() -> None:
    # "fill" and "table" touch skills, but most of what is asked is outside the catalog.
    result = local_search(CATALOG, "book a table at an italian restaurant", 5)
    assert result.matches == () and result.total == 0
    assert keyword_search(CATALOG, "book a table at an italian restaurant", 5).total > 0


def test_the_same_query_fits_once_a_fitting_skill_is_added() -> None:
    query = "book a table at an italian restaurant"
    with_one = catalog_of(
        *((s.name, s.description) for s in CATALOG.skills),
        ("restaurant-booking", "Book a table at a restaurant for dinner."),
    )
    assert names(with_one, query) == ["restaurant-booking"]


def test_the_threshold_decides() -> None:
    query = "merge pdf files for my grandmother's birthday"
    relevance = RelevanceIndex.of(CATALOG).score(query)
    (best,) = relevance.best(1)
    confidence = RelevanceIndex.of(CATALOG).steadiness(query, relevance).confidence(best.position)
    assert local_search(CATALOG, query, 5, min_confidence=confidence).matches
    assert not local_search(CATALOG, query, 5, min_confidence=confidence + 0.01).matches
    assert 0 < MIN_CONFIDENCE < 1


def without_term(query: str, term: str) -> str:
    return " ".join(w for w in WORD.findall(query.lower()) if w in STOP_WORDS or stem(w) != term)


@pytest.mark.parametrize(
    "query",
    ["merge sort in c", "fill in the tax forms as a pdf", "my merged pdfs and merging", "pdf"],
)
def test_steadiness_is_the_least_confidence_left_with_a_term_left_out(query: str) -> None:
    index = RelevanceIndex.of(CATALOG)
    relevance = index.score(query)
    steadiness = index.steadiness(query, relevance)
    query_terms = dict.fromkeys(terms(query))
    for position in range(len(CATALOG.skills)):
        own = relevance.confidence[position]
        left = [index.score(without_term(query, t)).confidence[position] for t in query_terms]
        expected = (own + min(left)) / 2 if len(query_terms) > 1 else own
        assert steadiness.confidence(position) == pytest.approx(expected, abs=1e-12)


def test_of_a_long_query_only_the_most_informative_terms_are_left_out() -> None:
    index = RelevanceIndex.of(CATALOG)
    query = " ".join(f"zqx{n}" for n in range(MAX_LEFT_OUT)) + " merge pdf"  # 2 words past the cap
    relevance = index.score(query)
    pdf = [skill.name for skill in CATALOG.skills].index("pdf")
    own = relevance.confidence[pdf]
    # Made-up words are the most informative (no skill uses them), so "merge" and "pdf" stay in.
    kept = sorted(dict.fromkeys(terms(query)), key=lambda t: index.idf.get(t, math.inf))[2:]
    left = [index.score(without_term(query, t)).confidence[pdf] for t in kept]
    assert index.steadiness(query, relevance).confidence(pdf) == pytest.approx(
        (own + min(left)) / 2
    )
    every = min(index.score(without_term(query, t)).confidence[pdf] for t in terms(query))
    assert min(left) > every  # leaving out "pdf" would have cost the most


def test_a_near_miss_leaning_on_one_word_loses_more_confidence_than_a_request() -> None:
    catalog = catalog_of(*((s.name, s.description) for s in CATALOG.skills))
    index = RelevanceIndex.of(catalog)

    def lost(query: str) -> float:
        relevance = index.score(query)
        (best,) = relevance.best(1)
        return best.confidence - index.steadiness(query, relevance).confidence(best.position)

    assert lost("merge sort in c") > lost("merge pdf files") + 0.05


def test_total_counts_every_fitting_skill_before_the_limit() -> None:
    catalog = catalog_of(*[(f"pdf-{n}", f"Merge PDF files, way {n}.") for n in range(7)])
    result = local_search(catalog, "merge pdf files", 3)
    every = local_search(catalog, "merge pdf files", 7)
    assert result.matches == every.matches[:3] and result.total == every.total == 7


def test_a_query_naming_a_skill_finds_it_first() -> None:
    assert names(CATALOG, "systematic-debugging") == ["systematic-debugging"]


@pytest.mark.parametrize(("query", "limit"), [("!!", 5), ("   ", 5), ("pdf", 0), ("pdf", 21)])
def test_tool_errors_as_in_keyword_mode(query: str, limit: int) -> None:
    with pytest.raises(ToolError):
        local_search(CATALOG, query, limit)


def test_an_empty_catalog_fits_nothing() -> None:
    assert local_search(catalog_of(), "merge pdf", 5).matches == ()


def test_deterministic() -> None:
    runs = {tuple(names(CATALOG, "edit my spreadsheet and pdf forms")) for _ in range(5)}
    fresh = catalog_of(*((s.name, s.description) for s in CATALOG.skills))
    runs.add(tuple(names(fresh, "edit my spreadsheet and pdf forms")))
    assert len(runs) == 1


def test_bodies_are_never_read(tmp_path: Path, write_skill: Callable[..., Path]) -> None:
    write_skill(tmp_path, "alpha", "name: alpha", "description: Merge PDF files.", body=MARKER)
    write_skill(tmp_path, "beta", "name: beta", "description: Edit spreadsheets.", body=MARKER)
    catalog = discover(skills_dirs=[tmp_path], cwd=tmp_path)
    assert local_search(catalog, MARKER, 5).matches == ()
    assert names(catalog, "merge pdf") == ["alpha"]


def test_no_network(no_network: list[object]) -> None:
    assert names(CATALOG, "merge pdf files") == ["pdf"]
    assert no_network == []
