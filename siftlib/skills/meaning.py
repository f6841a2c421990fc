"""What a text means, as a vector: the static word-piece embeddings behind local skill search.

Words that share no letters can mean the same ("hand fixes to helpers that run at once" and
"dispatching parallel agents"); stemming and a reviewed vocabulary only reach the synonyms
someone wrote down. `wordpieces.bin`, shipped in the package, holds a vector for each of
27,558 word pieces of the sentence-embedding model all-mpnet-base-v2 (Apache-2.0), distilled
by `tools/skill_vectors.py` (`make vectors`): each piece embedded on its own by the model,
then trained so that the mean of a sentence's pieces points where the model's embedding of the
whole sentence points (72,943 sentences: what software does, and requests as people type
them to agents), reduced by PCA to 128 dimensions and quantised to int8 with one scale. A
text's vector is the mean of its pieces' vectors; nothing else of the model runs here, and
nothing is downloaded.

Tokenisation is BERT's: lowercase, accents stripped, words split into the longest vocabulary
pieces left to right ("spreadsheet" -> "spreads", "##hee", "##t"); a word that cannot be split
is skipped, as BERT's `[UNK]` would say nothing. Function words are dropped first.

Speed, in pure Python: cosines against 10,000 skills in 128 dimensions take about 100 ms as
float loops. Instead vectors are packed into big integers, one fixed-width field per value
(offset to stay non-negative), so that CPython's C loops do the arithmetic: a text's vector is
the sum of its pieces' packed rows (one addition per piece), and a query's dot products with
every skill are 128 big-integer multiply-adds over per-dimension columns that hold one field
per skill, read back at once. All of it is exact integer arithmetic, so ranking is
deterministic.

    index = MeaningIndex.build(["merge pdf files", "fix a failing build"])
    index.cosines("combine several documents")  # about [0.63, 0.11]: one per text
"""

from __future__ import annotations

import math
import struct
import sys
import unicodedata
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files

from siftlib.skills.text import words

DATA = "wordpieces.bin"
MAGIC = b"SIFTWPV1"
MAX_WORD = 100  # BERT's limit: a longer "word" is not language
_OFFSET = 128  # an int8 value is packed as value + 128, in 0..255
_ROW_FIELD = 4  # bytes per field of a packed row: sums of up to 2**24 pieces never carry
_COLUMN_FIELD = 8  # bytes per field of a column: a query's dot product with one skill
# Added to every column field, so a negative dot product borrows nothing: its size stays under
# 2**62 while query and text hold under a million pieces each (frontmatter is capped at 64 KiB).
_BIAS = 1 << 62
_SHIFT = bytes(byte ^ 0x80 for byte in range(256))  # an int8's byte -> value + 128


class Table:
    """The word-piece vocabulary and its int8 vectors, each row packed on first use."""

    def __init__(self, dims: int, vocabulary: list[str], values: bytes) -> None:
        self.dims = dims
        self.rows = {token: row for row, token in enumerate(vocabulary)}
        self._values = values.translate(_SHIFT)
        self._packed: dict[int, int] = {}

    def pieces(self, word: str) -> tuple[int, ...]:
        """Return the rows of `word`'s longest-match word pieces, or none if it cannot split."""
        if len(word) > MAX_WORD:
            return ()
        found: list[int] = []
        start = 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                row = self.rows.get(piece)
                if row is not None:
                    found.append(row)
                    start = end
                    break
            else:
                return ()
        return tuple(found)

    def tokens(self, text: str, aside: frozenset[str] = frozenset()) -> list[int]:
        """Return the rows of the word pieces of the words of `text` that carry meaning; with
        words set `aside`, every other word's rows twice, so those weigh half as much."""
        plain = text.lower()
        if not plain.isascii():
            plain = unicodedata.normalize("NFD", plain)
            plain = "".join(c for c in plain if unicodedata.category(c) != "Mn")
        if not aside:
            return [row for word in words(plain) for row in _pieces(self, word)]
        return [
            row
            for word in words(plain)
            for row in _pieces(self, word) * (1 if word in aside else 2)
        ]

    def packed(self, row: int) -> int:
        """Return a row as one integer, a `_ROW_FIELD`-byte field of value + 128 per dimension."""
        number = self._packed.get(row)
        if number is None:
            widened = bytearray(self.dims * _ROW_FIELD)
            widened[::_ROW_FIELD] = self._values[row * self.dims : (row + 1) * self.dims]
            number = int.from_bytes(widened, "little")
            self._packed[row] = number  # one dict store: safe across threads
        return number

    def vector(self, text: str, aside: frozenset[str] = frozenset()) -> tuple[bytes, int]:
        """Return the sum of `text`'s piece vectors as packed fields (value + 128 x count), and
        the count of pieces (0 when it has no known piece); words set `aside` weigh half."""
        return self.total(self.tokens(text, aside))

    def total(self, rows: Sequence[int]) -> tuple[bytes, int]:
        """Return the sum of the vectors of `rows` as packed fields, and their count."""
        total = sum(map(self.packed, rows))
        return total.to_bytes(self.dims * _ROW_FIELD, "little"), len(rows)

    def values(self, rows: Sequence[int]) -> list[int]:
        """Return the sum of the vectors of `rows`, one value per dimension."""
        return _values(*self.total(rows))


@lru_cache(maxsize=65536)
def _pieces(words: Table, word: str) -> tuple[int, ...]:
    return words.pieces(word)


@lru_cache(maxsize=1)
def table() -> Table:
    """Load the shipped table (once per process, on first use by local mode or the shortlist)."""
    data = files("siftlib.skills").joinpath(DATA).read_bytes()
    if data[:8] != MAGIC:
        raise ValueError(f"{DATA} is not a word-piece table")
    count, dims, _scale, vocabulary_bytes = struct.unpack_from("<IIfI", data, 8)
    start = 8 + 16
    vocabulary = data[start : start + vocabulary_bytes].decode("utf-8").split("\n")
    values = data[start + vocabulary_bytes :]
    if len(vocabulary) != count or len(values) != count * dims:
        raise ValueError(f"{DATA} is truncated")
    return Table(dims, vocabulary, values)


def _fields(packed: bytes, width: int) -> array[int]:
    """Return the unsigned little-endian fields of `width` bytes (4 or 8) in `packed`."""
    fields = array("I" if width == 4 else "Q", packed)
    if fields.itemsize != width:
        raise RuntimeError(f"no {width}-byte unsigned array type on this platform")
    if sys.byteorder == "big":
        fields.byteswap()
    return fields


def _values(packed: bytes, count: int) -> list[int]:
    """Return the values of a packed vector sum of `count` pieces."""
    shift = _OFFSET * count
    return [field - shift for field in _fields(packed, _ROW_FIELD)]


@dataclass(frozen=True)
class MeaningIndex:
    """The vectors of a catalog's texts, packed by dimension for fast cosines with a query."""

    size: int
    columns: tuple[int, ...]  # per dimension: each text's value + 128 x count, in one field
    counts: array[int]  # per text: its number of pieces
    inverse_norms: array[float]  # per text: 1 / its vector's length (0 for no vector)
    rows: bytes  # each text's packed vector sum, one after another

    @classmethod
    def build(cls, texts: Sequence[str]) -> MeaningIndex:
        """Sum each text's piece vectors once (a text with no known piece gets none)."""
        words = table()
        dims = words.dims
        rows = bytearray()
        counts = array("q")
        inverse_norms = array("d")
        for text in texts:
            packed, count = words.vector(text)
            rows += packed
            counts.append(count)
            length = math.hypot(*_values(packed, count))
            inverse_norms.append(1 / length if length else 0.0)
        # Transpose: dimension d of every text, one `_COLUMN_FIELD`-byte field per text.
        stride = dims * _ROW_FIELD
        columns = []
        for dim in range(dims):
            widened = bytearray(len(texts) * _COLUMN_FIELD)
            for byte in range(_ROW_FIELD):
                widened[byte::_COLUMN_FIELD] = rows[dim * _ROW_FIELD + byte :: stride]
            columns.append(int.from_bytes(widened, "little"))
        return cls(len(texts), tuple(columns), counts, inverse_norms, bytes(rows))

    def vector(self, position: int) -> list[int]:
        """Return the vector sum of the text at `position`, one value per dimension."""
        stride = len(self.columns) * _ROW_FIELD
        return _values(
            self.rows[position * stride : (position + 1) * stride], self.counts[position]
        )

    def cosines(self, query: str, aside: frozenset[str] = frozenset()) -> list[float]:
        """Return the cosine between `query` (its words set `aside` at half weight) and each
        text, in catalog order (0 if unknown)."""
        packed, count = table().vector(query, aside)
        vector = _values(packed, count)
        length = math.hypot(*vector)
        if not length or not self.size:
            return [0.0] * self.size
        total = int.from_bytes(_BIAS.to_bytes(_COLUMN_FIELD, "little") * self.size, "little")
        for value, column in zip(vector, self.columns, strict=True):
            total += value * column
        # Each field holds BIAS + sum(q x (s + 128 x count)); take the offsets back out.
        offset = _OFFSET * sum(vector)
        fields = _fields(total.to_bytes(self.size * _COLUMN_FIELD, "little"), _COLUMN_FIELD)
        scale = 1 / length
        return [
            (field - _BIAS - offset * count) * scale * inverse
            for field, count, inverse in zip(fields, self.counts, self.inverse_norms, strict=True)
        ]
