"""The teacher text `make vectors` trains the word-piece table on never leaks a query set."""

from __future__ import annotations

import gzip
import importlib.util
import json
from collections import Counter
from itertools import chain
from pathlib import Path

from siftlib.skills.text import terms

REPO = Path(__file__).resolve().parents[2]
REQUESTS = REPO / "tools" / "skill_requests.txt"
CORPUS = REPO / "tools" / "skill_corpus.txt.gz"
SETS = REPO / "testdata" / "skills"

# The corpus tool's own normalisation, the one it drops held-back texts by.
_spec = importlib.util.spec_from_file_location("skill_corpus", REPO / "tools" / "skill_corpus.py")
assert _spec is not None and _spec.loader is not None
skill_corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(skill_corpus)
normal = skill_corpus.normal


def queries() -> list[str]:
    """Every query of every set, development and held-out, of both catalogs."""
    found = []
    for path in sorted(SETS.rglob("*.jsonl")):
        found += [json.loads(line)["query"] for line in path.read_text().splitlines() if line]
    return found


def trigrams(stems: list[str]) -> set[tuple[str, ...]]:
    return {tuple(stems[i : i + 3]) for i in range(len(stems) - 2)}


def test_written_requests_are_distinct_plain_lines() -> None:
    lines = REQUESTS.read_text(encoding="utf-8").splitlines()
    assert len(lines) >= 8000
    assert len({normal(line) for line in lines}) == len(lines)
    assert all(3 <= len(line.split()) <= 40 and line == line.strip() for line in lines)


def test_no_written_request_is_close_to_any_query() -> None:
    # Close: a run of three stems in common, or 40 % of the stems of either in common.
    # |A ∩ B| counted through an index of which queries hold each stem (|A ∪ B| = |A| + |B| -
    # |A ∩ B|); a query sharing no stem with a line is 0 % close and never counted.
    asked = [terms(query) for query in queries()]
    sets = [set(stems) for stems in asked]
    runs = set().union(*map(trigrams, asked))
    holding: dict[str, list[int]] = {}
    for i, other in enumerate(sets):
        for stem in other:
            holding.setdefault(stem, []).append(i)
    for line in REQUESTS.read_text(encoding="utf-8").splitlines():
        stems = terms(line)
        assert not trigrams(stems) & runs, line
        mine = set(stems)
        shared = Counter(chain.from_iterable(holding.get(stem, ()) for stem in mine))
        assert all(n < 0.4 * (len(mine) + len(sets[i]) - n) for i, n in shared.items()), line


def test_no_teacher_sentence_repeats_a_query() -> None:
    asked = {normal(query) for query in queries()}
    corpus = gzip.decompress(CORPUS.read_bytes()).decode("utf-8").splitlines()
    written = REQUESTS.read_text(encoding="utf-8").splitlines()
    assert not {normal(line) for line in corpus + written} & asked
