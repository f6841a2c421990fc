"""The keyword baseline (spec §3): tokenisation, the rubric, order, limit and errors."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from siftlib.errors import ToolError
from siftlib.skills.catalog import Catalog, Skill, discover
from siftlib.skills.keyword import (
    keyword_scores,
    keyword_search,
    normalise_query,
    query_terms,
)


def catalog_of(*skills: tuple[str, str]) -> Catalog:
    built = [
        Skill(
            name=name,
            description=description,
            file_path=Path(f"/s/{name}/SKILL.md"),
            base_dir=Path(f"/s/{name}"),
        )
        for name, description in skills
    ]
    return Catalog(skills=tuple(sorted(built, key=lambda s: s.name)))


def score(name: str, description: str, query: str) -> int:
    ((_, value),) = keyword_scores(catalog_of((name, description)), query)
    return value


@pytest.fixture
def fixture_catalog(catalog_dir: Path, tmp_path: Path) -> Catalog:
    return discover(skills_dirs=[catalog_dir], cwd=tmp_path)


# --- tokenisation -------------------------------------------------------------------------


def test_normalise_query_trims_and_lowercases() -> None:
    assert normalise_query("  PDF Forms\t\n") == "pdf forms"


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("Fill a PDF form", ["fill", "a", "pdf", "form"]),
        ("pdf PDF pdf, form", ["pdf", "form"]),
        ("snake_case-and.dots", ["snake", "case", "and", "dots"]),
        ("Café—crème 42x", ["café", "crème", "42x"]),
        ("日本語 テスト", ["日本語", "テスト"]),
        ("  ?!_-  ", []),
    ],
)
def test_query_terms(query: str, terms: list[str]) -> None:
    assert query_terms(query) == terms


# --- the rubric, one part at a time ------------------------------------------------------


def test_exact_name_scores_100_plus_terms() -> None:
    # 100 for the name, +8 for "pdf" as a name word, nothing from the description.
    assert score("pdf", "Portable documents.", " PDF ") == 108


def test_name_containing_the_query_scores_40() -> None:
    assert score("pdf-forms", "x", "df-fo") == 40 + 4 + 4  # "df" and "fo" are inside the name


def test_whole_name_word_scores_8_else_contained_4() -> None:
    assert score("pdf-forms", "x", "forms") == 40 + 8
    assert score("pdf-forms", "x", "zzz forms") == 8
    assert score("pdf-forms", "x", "zzz form") == 4


def test_whole_description_word_scores_2_else_contained_1() -> None:
    assert score("tool", "Fill in forms.", "zzz forms") == 2
    assert score("tool", "Fill in forms.", "zzz form") == 1
    assert score("tool", "Fill in formsets.", "zzz forms") == 1


def test_name_and_description_parts_add_up() -> None:
    # name contains the query (40) + "form" inside the name (4) + "form" a description word (2)
    assert score("pdf-forms", "A form filler.", "form") == 46


def test_description_words_use_the_same_tokenisation() -> None:
    assert score("tool", "Handles snake_case names.", "zzz case") == 2
    assert score("tool", "Résumé writing.", "zzz RÉSUMÉ") == 2


def test_repeated_terms_count_once() -> None:
    assert score("tool", "forms", "zzz forms forms FORMS") == 2


# --- hand-computed orders over the fixture catalog ---------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # pdf: 100 exact + 8 name word + 2 description word; pdf-forms: 40 + 8 + 2.
        ("pdf", [("pdf", 110), ("pdf-forms", 50)]),
        # pdf-forms: 100 + (pdf 8 + 2) + (forms 8 + 2); pdf: pdf 8 + 2.
        ("PDF-Forms ", [("pdf-forms", 120), ("pdf", 10)]),
        # webapp-testing: 40 + 4 (inside "testing") + 2; systematic-debugging: 2.
        ("test", [("webapp-testing", 46), ("systematic-debugging", 2)]),
        # pdf-forms: form 4 + 2, fields 2; xlsx: "form" inside "formulas" 1.
        ("Form fields", [("pdf-forms", 8), ("xlsx", 1)]),
        # using-git-worktrees: git 8 + 2; worktree 4 + 1 (both only contained).
        ("git worktree", [("using-git-worktrees", 15)]),
        # Five ties at 2 ("and" in the description), in name order.
        (
            "and",
            [
                ("doc-coauthoring", 2),
                ("pdf", 2),
                ("pdf-forms", 2),
                ("webapp-testing", 2),
                ("xlsx", 2),
            ],
        ),
        ("debugging tests", [("systematic-debugging", 8)]),
        ("quantum chromodynamics", []),
    ],
)
def test_hand_computed_orders(
    fixture_catalog: Catalog, query: str, expected: list[tuple[str, int]]
) -> None:
    scored = [(skill.name, value) for skill, value in keyword_scores(fixture_catalog, query)]
    assert [entry for entry in scored if entry[1] > 0] == expected
    result = keyword_search(fixture_catalog, query, 20)
    assert [skill.name for skill in result.matches] == [name for name, _ in expected]
    assert result.total == len(expected)


def test_scores_include_every_skill_zero_scores_in_name_order(fixture_catalog: Catalog) -> None:
    scored = keyword_scores(fixture_catalog, "pdf")
    assert len(scored) == len(fixture_catalog.skills)
    zeros = [skill.name for skill, value in scored if value == 0]
    assert zeros == sorted(zeros) and len(zeros) == len(fixture_catalog.skills) - 2
    assert [value for _, value in scored] == sorted((v for _, v in scored), reverse=True)


def test_limit_slices_but_total_counts_all(fixture_catalog: Catalog) -> None:
    result = keyword_search(fixture_catalog, "and", 2)
    assert [s.name for s in result.matches] == ["doc-coauthoring", "pdf"]
    assert result.total == 5


def test_ties_follow_the_name_even_for_an_unsorted_catalog() -> None:
    skills = (
        Skill(name="b", description="same", file_path=Path("/b/SKILL.md"), base_dir=Path("/b")),
        Skill(name="a", description="same", file_path=Path("/a/SKILL.md"), base_dir=Path("/a")),
    )
    result = keyword_search(Catalog(skills=skills), "same", 5)
    assert [s.name for s in result.matches] == ["a", "b"]


def test_empty_catalog_is_an_empty_result() -> None:
    result = keyword_search(Catalog(skills=()), "anything", 5)
    assert result.matches == () and result.total == 0


# --- tool errors -----------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", "   ", "?!", "___", "-- / --"])
def test_query_without_terms_is_a_tool_error(fixture_catalog: Catalog, query: str) -> None:
    with pytest.raises(ToolError, match="no search terms"):
        keyword_search(fixture_catalog, query, 5)


@pytest.mark.parametrize("limit", [0, 21, -1, True, False, 5.0, "5", None])
def test_bad_limit_is_a_tool_error(fixture_catalog: Catalog, limit: object) -> None:
    with pytest.raises(ToolError, match="limit must be an integer from 1 to 20"):
        keyword_search(fixture_catalog, "pdf", limit)  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [1, 20])
def test_limit_bounds_are_accepted(fixture_catalog: Catalog, limit: int) -> None:
    assert keyword_search(fixture_catalog, "and", limit).total == 5


def rubric(name: str, description: str, query: str) -> int:
    """§3's rubric read literally, one skill at a time: what the index must reproduce."""
    normalised = query.strip().lower()
    name, description = name.lower(), description.lower()
    total = 100 if normalised == name else 40 if normalised in name else 0
    for term in dict.fromkeys(re.findall(r"[^\W_]+", normalised)):
        if term in name.split("-"):
            total += 8
        elif term in name:
            total += 4
        if term in re.findall(r"[^\W_]+", description):
            total += 2
        elif term in description:
            total += 1
    return total


def random_catalog(rng: random.Random, size: int) -> Catalog:
    syllables = ["a", "pdf", "form", "ing", "é", "x1", "data", "fill", "ré", "2", "ab"]
    joins = [" ", " ", "-", "_", ".", "/", "—", ""]

    def text(words: int) -> str:
        parts = [rng.choice(syllables) + rng.choice(syllables) for _ in range(words)]
        return "".join(p + rng.choice(joins) for p in parts).strip() or "a"

    names = {
        text(rng.randint(1, 3)).replace(" ", "-").upper()[: rng.randint(3, 20)] for _ in range(size)
    }
    return catalog_of(*((name, text(rng.randint(1, 12))) for name in names))


@pytest.mark.parametrize("seed", range(8))
def test_the_index_scores_exactly_as_the_rubric_reads(seed: int) -> None:
    rng = random.Random(seed)
    catalog = random_catalog(rng, rng.choice([3, 40, 300]))
    skills = catalog.skills
    queries = [skills[0].name, skills[-1].name[1:-1], "-", "  A  ", "ing form", "x1 é 2"]
    for _ in range(40):
        skill = rng.choice(skills)
        source = rng.choice([skill.name, skill.description]).lower()
        start = rng.randrange(len(source))
        queries.append(source[start : start + rng.randint(1, 12)] + rng.choice(["", " pdf", " a"]))
    for query in queries:
        expected = [rubric(s.name, s.description, query) for s in skills]
        got = {s.name: value for s, value in keyword_scores(catalog, query)}
        assert [got[s.name] for s in skills] == expected, query
        if not query_terms(query):
            continue
        result = keyword_search(catalog, query, 20)
        ranked = sorted(range(len(skills)), key=lambda i: (-expected[i], skills[i].name))
        positive = [i for i in ranked if expected[i] > 0]
        assert result.total == len(positive), query
        assert [s.name for s in result.matches] == [skills[i].name for i in positive[:20]]
        assert list(result.scores) == [expected[i] for i in positive[:20]]
