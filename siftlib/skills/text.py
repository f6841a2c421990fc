r"""The text rules every skill scorer shares: what a word is, which words carry meaning, stems.

A word is a Unicode letter/digit run (`[^\W_]+`), as spec §3 defines a keyword term. Local
scoring (`relevance.py`, `meaning.py`) also drops function words and request fluff
("please", "help me"), which say nothing about which skill is meant, and stems with
Snowball's English stemmer, so "merging", "merged" and "merge" are one term. Keyword search
uses only `WORD`: its rules are the contract's, unchanged by the local scorer's.

    terms("Merging the PDFs, please")  # ['merg', 'pdf']
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

WORD = re.compile(r"[^\W_]+")
_VOWEL = re.compile("[aeiouy]")

# Function words and request fluff: they say nothing about which skill is meant.
STOP_WORDS = frozenset(
    """
    a about above after again all also am an and any are as at be been before being below
    between both but by can could did do does doing done don down during each either else
    etc even ever every few for from further get gets getting give go going got had has have
    having he her here hers him his how however i if im in into is isn it its itself ive
    just let lets like ll me might mine more most much must my myself need needs no nor not
    now of off on once one only or other our ours out over own per please re really s same
    she should so some something somebody such t than that the their theirs them then there
    these they thing things this those through to too try under until up upon us use used
    using ve very via want wants was way we were what whatever when where whether which
    while who whom why will with within without would yet you your yours yourself d m o y ok
    okay hey hi help make makes made kind sort lot lots
    """.split()  # noqa: SIM905 - a word list reads better as prose
)


class _Stemmer(Protocol):
    def stemWord(self, word: str) -> str: ...  # noqa: N802 - snowballstemmer's name


# Concurrent `--stdio` searches stemmed at once and corrupted the shared stemmer
# (IndexError inside snowballstemmer, served as a reranking "internal" failure).
_STEM_LOCK = threading.Lock()


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Return the Snowball English stem of a lowercase word."""
    if not word.isalpha():
        return word  # numbers and codes ("00042", "p5", "x86") have no English inflection
    with _STEM_LOCK:  # one Snowball stemmer keeps its state in itself: not thread-safe
        stemmed = _stemmer().stemWord(word)
    if stemmed == word and len(word) >= 3 and word[-1] == "s" and not _VOWEL.search(word[:-1]):
        return word[:-1]  # an acronym's plural ("pdfs", "csvs", "prs"), which Snowball keeps
    return stemmed


@lru_cache(maxsize=1)
def _stemmer() -> _Stemmer:
    import snowballstemmer  # imported on first use: keyword searches never load it

    english: _Stemmer = snowballstemmer.stemmer("english")
    return english


# A description's clause saying what the skill is not for ("Do NOT use for PDFs, spreadsheets",
# "- not for hunting new bugs") names other skills' work: the index leaves it out.
_NOT_FOR = re.compile(
    r"(?:^|(?<=[.;:!?])|\s[-\u2013\u2014]\s|,\s)\s*"
    r"(?:do\s+not|don't|does\s+not|not|never)\s+(?:use|trigger|for|run)\b[^.;]*[.;]?",
    re.IGNORECASE,
)


def purpose(description: str) -> str:
    """Return `description` without the clauses that say what the skill is not for."""
    return _NOT_FOR.sub("", description)


# A request names the thing it wants first and what that thing is about after "about" or
# "regarding" ("a note to everyone about the office move"). After "for", only when the clause
# opens with a verb of making ("make a poster for our PDF-reading workshop": a poster, not a
# PDF); after "review", "check" or "look", what follows "for" is what is looked for ("review
# the handler for SQL injection").
TOPIC_MARKERS = frozenset(("about", "regarding"))
MAKING_MARKERS = frozenset(("for",))
MAKING = frozenset(
    """
    make write create draft build generate produce compose design prepare put draw sketch
    """.split()  # noqa: SIM905 - a word list reads better as prose
)
_CLAUSE = re.compile(r"[,;:.!?()\n]|\s[-\u2013\u2014]\s")


def topic_words(query: str) -> frozenset[str]:
    """Return the words of `query` that only say what the requested thing is about."""
    head: set[str] = set()
    topic: set[str] = set()
    for clause in _CLAUSE.split(query.lower()):
        opening = ""
        said = inside = False
        for word in WORD.findall(clause):
            if not opening and (word in MAKING or word not in STOP_WORDS):
                opening = word
            if (
                not inside
                and said
                and (word in TOPIC_MARKERS or (word in MAKING_MARKERS and opening in MAKING))
            ):
                inside = True
            elif word not in STOP_WORDS:
                (topic if inside else head).add(word)
                said = True
    return frozenset(topic - head)


# A compound written with hyphens or slashes ("use-after-free", "red/green/refactor").
_COMPOUND = re.compile(r"[^\W_]+(?:[-/][^\W_]+)+")
_JOINER = re.compile(r"[-/]")


def compounds(text: str) -> list[str]:
    """Return the stems of the hyphenated or slashed compounds of `text` written joined, whole
    and by each adjacent pair ("test-driven-development": "testdrivendevelop", "testdriven",
    "drivendevelop"), as the vocabulary and many writers spell them ("useafterfree")."""
    joined: list[str] = []
    for compound in _COMPOUND.findall(text.lower()):
        parts = _JOINER.split(compound)
        spans = [parts]
        if len(parts) > 2:
            spans += [parts[i : i + 2] for i in range(len(parts) - 1)]
        joined += [stem("".join(span)) for span in spans]
    return joined


def abbreviates(word: str, name: Sequence[str]) -> bool:
    """Return whether `word` spells the words of `name` in order, each by a prefix of it, as
    people shorten hyphenated names: "tdd" (test-driven-development), "asan" (address-sanitizer).
    """
    if not name:
        return not word
    head = name[0]
    return any(
        word[:length] == head[:length] and abbreviates(word[length:], name[1:])
        for length in range(min(len(word) - len(name) + 1, len(head)), 0, -1)
    )


def words(text: str) -> list[str]:
    """Return the lowercase words of `text` that carry meaning, in order, with repeats."""
    return [word for word in WORD.findall(text.lower()) if word not in STOP_WORDS]


def terms(text: str) -> list[str]:
    """Return the stems of the words in `text` that carry meaning, in order, with repeats."""
    return [stem(word) for word in words(text)]
