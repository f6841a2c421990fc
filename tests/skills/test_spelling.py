"""How skill names and requests are spelled: abbreviations, compounds and code-ish tokens."""

from __future__ import annotations

from siftlib.skills.catalog import Catalog
from siftlib.skills.relevance import MAX_ABBREVIATION, RelevanceIndex, related
from siftlib.skills.text import abbreviates, compounds, stem, terms

from .conftest import catalog_of

FUZZING = catalog_of(
    ("address-sanitizer", "Detects memory errors while fuzzing C code."),
    ("harness-writing", "Writes fuzzing harnesses for C libraries."),
    ("shell-script-hardening", "Make bash scripts robust: quoting, traps and strict mode."),
    ("log-analysis", "Reads server logs and finds the errors in them."),
)


def first(catalog: Catalog, query: str) -> str:
    return catalog.skills[RelevanceIndex.of(catalog).rank(query)[0].position].name


def test_a_word_abbreviates_a_name_by_a_prefix_of_each_of_its_words_in_order() -> None:
    assert abbreviates("asan", ["address", "sanitizer"])
    assert abbreviates("tdd", ["test", "driven", "development"])
    assert not abbreviates("td", ["test", "driven", "development"])  # a word left out
    assert not abbreviates("sana", ["address", "sanitizer"])  # out of order
    assert not abbreviates("asanx", ["address", "sanitizer"])  # letters left over


def test_an_abbreviated_name_finds_its_skill_first() -> None:
    index = RelevanceIndex.of(FUZZING)
    assert index.spelled_out("turn on asan, my harness") == (
        "turn on asan address sanitizer, my harness"
    )
    assert first(FUZZING, "turn on asan for my harness") == "address-sanitizer"
    assert first(FUZZING, "turn on sanitizing for my harness") == "harness-writing"


def test_a_known_word_is_not_read_as_an_abbreviation() -> None:
    index = RelevanceIndex.of(FUZZING)
    # "ssh" is a word of the reviewed vocabulary, "loan" a whole word piece, "address" a word
    # of the catalog: none of them is shell-script-hardening, log-analysis or address-sanitizer.
    for query in ("set up ssh keys", "apply for a loan", "address this for me"):
        assert index.spelled_out(query) == query


def test_a_word_too_long_or_not_alphabetic_is_not_read_as_an_abbreviation() -> None:
    index = RelevanceIndex.of(catalog_of(("a" * 8 + "-" + "b" * 8, "Something."), ("x-y", "Z.")))
    long_word = "a" * MAX_ABBREVIATION + "b"
    assert index.spelled_out(long_word) == long_word
    assert index.spelled_out("ab2") == "ab2"


def test_hyphenated_slashed_and_spaced_compounds_are_the_same_terms() -> None:
    spaced = terms("red green refactor")
    assert terms("red-green-refactor") == terms("red/green/refactor") == spaced
    assert terms("use-after-free") == terms("use after free")


def test_code_tokens_are_their_words() -> None:
    assert terms("flag every eval() call") == terms("flag every eval call")
    assert terms("call os.system() or __import__") == terms("call os system or import")


def test_compounds_are_also_indexed_joined_whole_and_by_adjacent_pairs() -> None:
    assert compounds("red/green/refactor, use-after-free") == [
        "redgreenrefactor",
        "redgreen",
        "greenrefactor",
        stem("useafterfree"),
        stem("useafter"),
        stem("afterfree"),
    ]
    assert compounds("test-driven") == ["testdriven"]
    assert compounds("a plain sentence") == []


def test_a_joined_compound_of_the_vocabulary_matches_the_hyphenated_skill() -> None:
    # The vocabulary writes "testdriven" beside "red", "green" and "refactor".
    catalog = catalog_of(
        ("test-driven-development", "Use when implementing any feature, before the code."),
        ("endpoint-design", "Design new REST endpoints: routes, status codes, versions."),
    )
    index = RelevanceIndex.of(catalog)
    assert "testdriven" in index.joined
    tdd = [skill.name for skill in catalog.skills].index("test-driven-development")
    _, coverage, synonyms, _ = index.lexical("red green refactor")
    assert synonyms[tdd] and coverage[tdd] > 0  # the spaced name words alone share nothing


def test_a_joined_compound_never_stands_in_beside_the_word_the_skill_has() -> None:
    # "overflow" and "useafterfree" share a vocabulary concept; code-checker says "overflow"
    # itself, so its rarer compound must not lift that common word's weight.
    catalog = catalog_of(
        ("code-checker", "Finds an overflow or a use-after-free."),
        ("overflow-guard", "Guards against overflow."),
        ("overflow-report", "Reports an overflow."),
        ("other", "Something else."),
    )
    index = RelevanceIndex.of(catalog)
    assert stem("useafterfree") in related("overflow") and stem("useafterfree") in index.joined
    checker = [skill.name for skill in catalog.skills].index("code-checker")
    scores, _, _, _ = index.lexical("overflow")
    assert scores[checker] == index.postings["overflow"][checker]
