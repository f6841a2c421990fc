"""The relevance scorer: stems, BM25F weights, synonym concepts, query coverage, and their
fusion with the word-piece embeddings."""

from __future__ import annotations

import math

import pytest

from siftlib.skills.catalog import Catalog
from siftlib.skills.relevance import LEXICAL_WEIGHT, SYNONYM_WEIGHT, RelevanceIndex, related
from siftlib.skills.text import purpose, stem, terms, topic_words
from siftlib.skills.vocabulary import concepts

from .conftest import catalog_of


def lexical(catalog: Catalog, query: str) -> list[tuple[str, float]]:
    """Each skill sharing a term with `query`, with its coverage, in BM25F order."""
    scores, coverage, _, _ = RelevanceIndex.of(catalog).lexical(query)
    order = sorted(scores, key=lambda p: (-scores[p], p))
    return [(catalog.skills[p].name, coverage[p]) for p in order]


def first(catalog: Catalog, query: str) -> str:
    """The skill local ranking puts first for `query`."""
    return catalog.skills[RelevanceIndex.of(catalog).rank(query)[0].position].name


def ranked_names(catalog: Catalog, query: str) -> list[str]:
    return [name for name, _ in lexical(catalog, query)]


def test_terms_drop_function_words_and_stem_the_rest() -> None:
    assert terms("Please help me merge these PDFs") == ["merg", "pdf"]
    assert terms("merging merged merges") == ["merg", "merg", "merg"]
    assert terms("pdfs csvs PRs") == ["pdf", "csv", "pr"]  # plural acronyms, too
    assert terms("the and of to") == []


def test_inflections_match_through_the_stemmer() -> None:
    catalog = catalog_of(("pdf-tools", "Merges several files."), ("other", "Paints walls."))
    assert ranked_names(catalog, "merging") == ["pdf-tools"]


def test_a_synonym_finds_a_skill_that_shares_no_word() -> None:
    catalog = catalog_of(("ledger", "Edit Excel workbooks."), ("canvas", "Draw on a canvas."))
    ((name, coverage),) = lexical(catalog, "fix my spreadsheet")
    assert name == "ledger"
    # "spreadsheet" is matched by a synonym, "fix" by nothing: partial coverage.
    assert 0 < coverage < SYNONYM_WEIGHT


def test_the_literal_word_outranks_its_synonym() -> None:
    catalog = catalog_of(("a-tool", "Edit Excel files."), ("b-tool", "Edit spreadsheet files."))
    assert ranked_names(catalog, "spreadsheet") == ["b-tool", "a-tool"]


def test_the_name_weighs_more_than_the_description() -> None:
    catalog = catalog_of(("a-tool", "Reads csv files."), ("csv", "Reads files."))
    assert ranked_names(catalog, "csv") == ["csv", "a-tool"]


def test_a_query_term_counts_once_however_many_synonyms_match() -> None:
    catalog = catalog_of(
        ("a-sheets", "Excel xlsx workbook pivot formulas."),
        ("b-report", "A spreadsheet in a pdf report."),
    )
    (report, covered), (_, sheets) = lexical(catalog, "spreadsheet pdf")
    assert report == "b-report" and covered == 1.0
    assert sheets == pytest.approx(SYNONYM_WEIGHT / 2)


def test_rare_words_weigh_more_than_common_ones() -> None:
    catalog = catalog_of(
        ("alpha", "Fuzz parsers."),
        ("beta", "Review parsers."),
        ("gamma", "Review services."),
        ("delta", "Review clients."),
    )
    assert ranked_names(catalog, "review fuzz")[0] == "alpha"


def test_a_query_naming_a_skill_puts_it_first_for_certain() -> None:
    catalog = catalog_of(("git-bisect", "Find a regression."), ("bisect-git", "Git bisect git."))
    first = RelevanceIndex.of(catalog).rank("Git-Bisect")[0]
    assert catalog.skills[first.position].name == "git-bisect"
    assert first.score == first.confidence == math.inf


def test_unknown_words_lower_the_coverage() -> None:
    catalog = catalog_of(("pdf-merge", "Merge PDF files into one."))
    ((_, full),) = lexical(catalog, "merge pdf files")
    ((_, near_miss),) = lexical(catalog, "merge my sourdough starter recipes")
    assert full == 1.0 and near_miss < 0.35


def test_no_shared_term_and_no_terms_match_nothing_lexically() -> None:
    catalog = catalog_of(("pdf-merge", "Merge PDF files."))
    assert lexical(catalog, "zebra") == []
    assert lexical(catalog, "please help me") == []
    assert RelevanceIndex.of(catalog_of()).rank("merge") == []


def test_meaning_finds_a_skill_that_shares_no_word_or_synonym() -> None:
    catalog = catalog_of(
        ("invoice-maker", "Bill customers for hours worked."),
        ("audio-notes", "Turn recorded speech into written text."),
        ("chess-coach", "Teach board game openings."),
    )
    query = "what did the speaker say in this mp3"
    assert lexical(catalog, query) == []
    first, *others = RelevanceIndex.of(catalog).rank(query)
    assert catalog.skills[first.position].name == "audio-notes"
    assert all(first.score > other.score + 0.3 for other in others)


def test_every_skill_is_ranked_and_a_shared_word_adds_to_the_meaning() -> None:
    catalog = catalog_of(("pdf-merge", "Merge PDF files."), ("sheets", "Edit spreadsheets."))
    scores = RelevanceIndex.of(catalog).score("merge pdf files").scores
    assert len(scores) == 2 and scores[0] > scores[1] + LEXICAL_WEIGHT / 2


def test_ranking_is_deterministic_across_builds() -> None:
    skills = [(f"skill-{n:02d}", f"Review {'code ' * (n % 3)}and tests {n}.") for n in range(40)]
    first = RelevanceIndex.of(catalog_of(*skills)).rank("review tests")
    again = RelevanceIndex.build(catalog_of(*reversed(skills)).skills).rank("review tests")
    assert first == again
    assert first == sorted(first, key=lambda s: (-s.score, s.position))


def test_stemming_from_many_threads_at_once_gives_the_same_stems() -> None:
    # One Snowball stemmer is shared; unguarded, concurrent calls corrupt its state.
    import threading

    prefixes = ("walk", "form", "render", "deploy", "test")
    suffixes = ("ing", "ed", "s", "ation", "ers", "ingly", "ness", "ments")
    words = [f"{prefix}{suffix}" for prefix in prefixes for suffix in suffixes]
    words = [f"{w}{'x' * n}ing" for w in words for n in range(25)]
    stem.cache_clear()
    expected = {w: stem(w) for w in words}
    stem.cache_clear()
    found: dict[str, str] = {}
    errors: list[BaseException] = []

    def work(part: list[str]) -> None:
        try:
            for word in part:
                found[word] = stem(word)
        except BaseException as exc:  # the corruption shows as IndexError inside the stemmer
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(words[i::8],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and found == expected


def test_stems_keep_the_first_two_letters_related_relies_on() -> None:
    words = {word for group in concepts().values() for word in group}
    assert all(stem(word)[:2] == word[:2] for word in words)
    assert {"excel", "workbook", "xlsx"} <= related("spreadsheet")
    assert "spreadsheet" not in related("spreadsheet")
    assert related("zebra") == frozenset()


def test_a_description_is_indexed_without_what_the_skill_is_not_for() -> None:
    described = "Create Word documents. Do NOT use for PDFs, spreadsheets or slides."
    assert purpose(described) == "Create Word documents."
    assert purpose("Triage a finding - not for hunting new bugs.") == "Triage a finding"
    assert purpose("Review diffs; Not for initial discovery.") == "Review diffs;"
    assert purpose("Checks that nothing is left out.") == "Checks that nothing is left out."
    catalog = catalog_of(
        ("word-docs", described),
        ("pdf-tools", "Edit, merge and protect PDF files."),
    )
    assert ranked_names(catalog, "spreadsheets") == []
    assert first(catalog, "password-protect the pdf") == "pdf-tools"


def test_what_a_requested_thing_is_about_is_set_aside() -> None:
    assert topic_words("make a poster for our PDF-reading workshop") == {
        "pdf",
        "reading",
        "workshop",
    }
    assert topic_words("a note to everyone at work about the office move") == {"office", "move"}
    assert topic_words("let's put together an RFC for switching to passkeys") == {
        "switching",
        "passkeys",
    }
    # After a verb of looking, "for" introduces what is looked for: nothing is set aside.
    assert topic_words("review the login handler for SQL injection") == frozenset()
    assert topic_words("look for xss in the comment form") == frozenset()
    # A marker opening a clause has no head before it; a word also in the head stays.
    assert topic_words("about the pdf: make a pdf poster") == frozenset()
    assert topic_words("for the record, write a poem") == frozenset()


def test_a_requested_thing_ranks_above_what_it_is_about() -> None:
    catalog = catalog_of(
        ("slide-decks", "Build slide decks and presentations."),
        ("threat-modeling", "Model the threats to a system and rank them by risk."),
        ("pdf-tools", "Merge, split and read PDF files."),
        ("git-helper", "Rewrite git history."),
    )
    assert first(catalog, "make a slide deck about our threat model") == "slide-decks"
    assert first(catalog, "make slides, our threat model") == "threat-modeling"
    assert first(catalog, "review the slides for threat model gaps") == "threat-modeling"
    # The confidence still weighs the whole request, topic words included.
    index = RelevanceIndex.of(catalog)
    whole = index.score("make a slide deck about our threat model").confidence
    assert whole == index.score("make a slide deck, our threat model").confidence


def test_a_verb_of_making_says_nothing_about_which_skill_fits() -> None:
    catalog = catalog_of(
        ("goal-commands", "Drafts goal commands for long tasks."),
        ("release-notes", "Write release notes for users."),
        ("other", "Paints walls."),
    )
    index = RelevanceIndex.of(catalog)
    assert index.weight(stem("write")) == index.weight(stem("drafting")) == 0.0
    # "write" still ranks the skill that says it, but covers none of the request; and
    # "drafts", a concept away from "letter", ranks without covering it either.
    assert dict(lexical(catalog, "write a cover letter")) == {
        "goal-commands": 0.0,
        "release-notes": 0.0,
    }
    assert dict(lexical(catalog, "write release notes")) == {
        "release-notes": pytest.approx(1.0),
        "goal-commands": 0.0,
    }
    # A request of making verbs alone has no information to cover: nothing divides by zero.
    assert dict(lexical(catalog, "write")) == {"release-notes": 0.0, "goal-commands": 0.0}
    relevance = index.score("write draft")
    steadiness = index.steadiness("write draft", relevance)
    assert all(math.isfinite(steadiness.confidence(p)) for p in range(3))
