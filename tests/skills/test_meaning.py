"""The shipped word-piece table: it loads, tokenises as BERT does, and ranks by meaning."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from importlib.resources import files

import pytest

from siftlib.skills.meaning import DATA, MAGIC, MeaningIndex, table


def pieces(text: str) -> list[str]:
    words = table()
    by_row = {row: token for token, row in words.rows.items()}
    return [by_row[row] for row in words.tokens(text)]


def test_the_table_ships_in_the_package_and_loads() -> None:
    data = files("siftlib.skills").joinpath(DATA).read_bytes()
    assert data.startswith(MAGIC) and len(data) < 5_000_000  # a few MB, not a model
    words = table()
    assert words.dims == 128 and len(words.rows) > 25_000
    assert {"merge", "pdf", "##s", "spreads"} <= words.rows.keys()


def test_words_split_into_the_longest_pieces_left_to_right() -> None:
    assert pieces("merge") == ["merge"]
    assert pieces("spreadsheet") == ["spreads", "##hee", "##t"]
    assert pieces("PRs") == ["pr", "##s"]


def test_function_words_go_and_accents_are_stripped() -> None:
    assert pieces("please help me with the Résumé") == ["resume"]
    assert pieces("the and of") == []


def test_a_word_that_cannot_split_is_skipped() -> None:
    assert pieces("merge 日本 pdf") == ["merge", "pdf"]
    assert pieces("a" * 101) == []


def test_cosines_rank_by_meaning_without_a_shared_word() -> None:
    index = MeaningIndex.build(
        ["merge pdf files into one", "fix a failing build on ci", "write an email to a customer"]
    )
    combine = index.cosines("combine several documents")
    assert combine[0] == max(combine)
    broke = index.cosines("my compilation broke")
    assert broke[1] == max(broke)
    note = index.cosines("send a note to the buyer")
    assert note[2] == max(note)
    assert all(-1.0 <= c <= 1.0 + 1e-9 for c in combine + broke + note)


def test_a_text_with_itself_has_cosine_one() -> None:
    texts = ["merge pdf files into one", "Kubernetes pods keep restarting"]
    index = MeaningIndex.build(texts)
    assert [index.cosines(text)[n] for n, text in enumerate(texts)] == pytest.approx([1.0, 1.0])


def test_texts_or_queries_without_a_known_piece_have_cosine_zero() -> None:
    index = MeaningIndex.build(["merge pdf files", "日本"])
    assert index.cosines("merge pdfs")[1] == 0.0
    assert index.cosines("the of and") == [0.0, 0.0]
    assert MeaningIndex.build([]).cosines("merge") == []


def test_cosines_equal_the_float_computation() -> None:
    # The packed big-integer arithmetic is exactly the plain dot product over the table.
    texts = ["merge pdf files into one", "write an email", "résumé tips"]
    index = MeaningIndex.build(texts)
    words = table()

    def vector(text: str) -> list[int]:
        rows = words.tokens(text)
        values = [words.packed(row) for row in rows]
        fields = [sum((v >> (32 * d)) & 0xFFFFFFFF for v in values) for d in range(words.dims)]
        return [field - 128 * len(rows) for field in fields]

    query = vector("combine documents")
    for text, cosine in zip(texts, index.cosines("combine documents"), strict=True):
        other = vector(text)
        expected = sum(a * b for a, b in zip(query, other, strict=True)) / (
            math.hypot(*query) * math.hypot(*other)
        )
        assert cosine == pytest.approx(expected, abs=1e-12)


def test_deterministic_across_processes_and_hash_seeds() -> None:
    script = (
        "from siftlib.skills.meaning import MeaningIndex;"
        "i = MeaningIndex.build(['merge pdf files', 'fix the ci build', 'draft an email']);"
        "print(repr(i.cosines('combine my documents')))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("0", "1", "2")
    }
    assert len(outputs) == 1
