"""The concept vocabulary: a reviewed table of single-word synonym concepts."""

from __future__ import annotations

import pytest

from siftlib.skills.catalog import WORD
from siftlib.skills.vocabulary import CONCEPTS, alternate_terms

# Words that would touch most skills, so they must never be a concept's term.
GENERIC = {
    "a", "an", "and", "the", "for", "with", "use", "using", "when", "file", "files", "code",
    "skill", "skills", "work", "make", "create", "build", "help", "task", "tasks", "tool",
    "tools", "data", "user", "new", "update", "key", "run", "check", "project", "any",
}  # fmt: skip

REQUIRED = (
    "testing", "deployment", "documents", "spreadsheets", "images", "git", "code-review",
    "debugging", "databases", "web-scraping", "writing", "planning", "security",
)  # fmt: skip


def test_the_required_concepts_are_there() -> None:
    assert set(REQUIRED) <= set(CONCEPTS)


@pytest.mark.parametrize("concept", sorted(CONCEPTS))
def test_terms_are_single_lowercase_words(concept: str) -> None:
    terms = CONCEPTS[concept]
    assert len(terms) >= 3, "a concept needs alternates"
    assert len(set(terms)) == len(terms), "a term is listed twice"
    for term in terms:
        assert WORD.fullmatch(term) and term == term.lower(), term
        assert term not in GENERIC, term


@pytest.mark.parametrize(
    ("query", "present", "absent"),
    [
        (["spreadsheet"], {"excel", "xlsx", "csv", "spreadsheets"}, {"spreadsheet", "pdf"}),
        (["fix", "bug"], {"debugging", "crash", "traceback"}, {"bug", "fix"}),
        (["pdf"], {"docx", "forms"}, {"pdf", "excel"}),
        (["scrape", "website"], {"crawler", "html", "scraping"}, {"scrape", "website"}),
    ],
)
def test_alternates_exclude_the_query_terms(
    query: list[str], present: set[str], absent: set[str]
) -> None:
    alternates = alternate_terms(query)
    assert present <= alternates
    assert not absent & alternates


def test_untouched_query_has_no_alternates() -> None:
    assert alternate_terms(["quantum", "chromodynamics"]) == frozenset()
    assert alternate_terms([]) == frozenset()


def test_a_term_in_two_concepts_touches_both() -> None:
    alternates = alternate_terms(["audit"])
    assert "review" in alternates and "vulnerability" in alternates
