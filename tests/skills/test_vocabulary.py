"""The concept vocabulary: a reviewed table of single-word synonym concepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from siftlib.skills.relevance import related
from siftlib.skills.text import WORD
from siftlib.skills.vocabulary import concepts

REPO = Path(__file__).resolve().parents[2]
SETS = REPO / "testdata" / "skills"

# Words that would touch most skills, so they must never be a concept's term.
GENERIC = {
    "a", "an", "and", "the", "for", "with", "use", "using", "when", "file", "files", "code",
    "skill", "work", "make", "create", "build", "help", "task", "tool", "data", "user", "new",
    "key", "run", "check", "any",
}  # fmt: skip

REQUIRED = (
    "testing", "deployment", "documents", "spreadsheets", "images", "git", "code-review",
    "debugging", "databases", "web-scraping", "writing", "planning", "security", "parallel",
    "verify", "property",
)  # fmt: skip


def test_hundreds_of_reviewed_concepts() -> None:
    table = concepts()
    assert set(REQUIRED) <= set(table)
    assert len(table) >= 150
    assert sum(map(len, table.values())) >= 1500


def test_terms_are_single_lowercase_words() -> None:
    # One test over every concept, each fault named with its concept: as ~800 parametrized
    # cases the per-test set-up cost more than a second of CPU for microseconds of checking.
    faults = []
    for concept, terms in sorted(concepts().items()):
        if len(terms) < 3:
            faults.append(f"{concept}: a concept needs alternates")
        if len(set(terms)) != len(terms):
            faults.append(f"{concept}: a term is listed twice")
        for term in terms:
            if not (WORD.fullmatch(term) and term == term.lower()):
                faults.append(f"{concept}: {term!r} is not a single lowercase word")
            if term in GENERIC:
                faults.append(f"{concept}: {term!r} is generic")
    assert faults == []


# Terms that came before the held-out halves: the earlier vocabulary's, and the misses the
# issue that asked for this scorer names ("randomized round-trip tests in QuickCheck style").
EARLIER = {
    "acrobat", "container", "containers", "crashes", "keynote", "lint", "picture", "roadmap",
    "xls", "randomized", "round", "trip", "quickcheck",
}  # fmt: skip
# Terms the vocabulary held (main at 5a9dfc8) before the mixed held-out sets were written,
# blind to it, with these words: they came first, so the sets could not have taught them.
BEFORE_MIXED = {
    "announcement", "batch", "billing", "brainstorm", "charge", "courteous", "crash",
    "critique", "dedupe", "dump", "finish", "generic", "grade", "headless", "helper", "ideas",
    "lemma", "matches", "modernize", "money", "morning", "nightly", "outside", "prints",
    "proof", "reason", "recording", "sample", "stamp", "standup", "survey", "tdd", "trend",
    "watermark",
}  # fmt: skip


def words_of(*paths: Path) -> set[str]:
    found: set[str] = set()
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            found |= set(WORD.findall(json.loads(line)["query"].lower()))
    return found


def test_no_term_comes_only_from_a_held_out_query(realdata: Path) -> None:
    # A held-out word may be a term only when a development query or a catalog uses it too:
    # the vocabulary grows from the development halves, never from the held-out ones (the
    # no-shared-word stress sets `heldout.jsonl` and the mixed sets `heldout_mixed.jsonl`).
    held_out_files = sorted(SETS.glob("*/heldout*.jsonl"))
    assert len(held_out_files) == 4, "both catalogs have a stress set and a mixed set"
    held_out = words_of(*held_out_files)
    seen = words_of(*SETS.glob("*/dev*.jsonl"))
    for skill_file in (SETS / "eval" / "catalog").glob("*/SKILL.md"):
        seen |= set(WORD.findall(skill_file.read_text(encoding="utf-8").lower()))
    # The vocabulary also draws on the real catalog, so without it this cannot be judged.
    real = realdata / "skills" / "catalog.json"
    for entry in json.loads(real.read_text(encoding="utf-8")):
        seen |= set(WORD.findall(f"{entry['name']} {entry['description']}".lower()))
    terms = {term for concept in concepts().values() for term in concept}
    assert sorted(terms & held_out - seen - EARLIER - BEFORE_MIXED) == []


# Links found joining unrelated jobs once synonyms weighed nearly as much as words, most by
# Snowball stemming two senses alike: "performative"/"performance", "blindly"/"blind" (of
# accessibility), "personality"/"person", "profile"/"profiling", "fixed"/"fix", and
# "documentation"/"document" (a file to fill in is not prose to write).
UNRELATED = (
    ("blind", "perform"), ("person", "profil"), ("fix", "proof"), ("bounc", "anim"),
    ("implement", "plan"), ("work", "proof"), ("form", "docx"), ("document", "prose"),
)  # fmt: skip


@pytest.mark.parametrize(("term", "other"), UNRELATED)
def test_no_concept_joins_unrelated_jobs(term: str, other: str) -> None:
    assert other not in related(term)
