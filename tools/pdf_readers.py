"""Compare PDF text readers on a generated document: speed per page and text fidelity.

    .venv/bin/pip install pypdf pdfminer.six      # the candidates sift does not depend on
    .venv/bin/python tools/pdf_readers.py

The document (tests/pdfkit.py): 30 single-column pages of a heading and four paragraphs,
then one two-column page set line by line across both columns. Fidelity is the word 4-gram
F1 (tests/fetchkit.py) of each reader's text against the words written. README "PDFs" holds
the figures and the choice.
"""

from __future__ import annotations

import io
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent / "tests")]

from fetchkit import shingle_f1  # noqa: E402
from pdfkit import Pdf, Text, paragraph  # noqa: E402

PAGES = 30
VOCABULARY = [
    "the",
    "council",
    "voted",
    "tram",
    "decade",
    "debate",
    "building",
    "starts",
    "spring",
    "fare",
    "stay",
    "promise",
    "route",
    "harbour",
    "campus",
    "line",
    "station",
    "hourly",
    "service",
    "night",
    "weekend",
    "ticket",
    "budget",
    "million",
    "euro",
    "bridge",
    "river",
    "crossing",
    "works",
    "closed",
    "detour",
    "bus",
    "replacement",
]


def document() -> tuple[bytes, str, str]:
    """Return the PDF, the single-column pages' words and the two-column page's words."""
    pick = random.Random(4)

    def words(count: int) -> str:
        return " ".join(pick.choice(VOCABULARY) for _ in range(count))

    pdf = Pdf(title="Report")
    written = []
    for number in range(1, PAGES + 1):
        lines = [Text(72, 740, 18, f"Section {number}", bold=True)]
        written.append(f"Section {number}")
        top = 710.0
        for _ in range(4):
            text = words(90)
            block = paragraph(72, top, 10, text)
            lines += block
            written.append(text)
            top -= len(block) * 13.5 + 12
        pdf.page(lines)
    left, right = words(200), words(200)
    columns = zip(
        paragraph(50, 700, 10, left, width=240),
        paragraph(320, 700, 10, right, width=240),
        strict=False,
    )
    pdf.page([line for pair in columns for line in pair])
    return pdf.bytes(), " ".join(written), f"{left} {right}"


def pdfium(data: bytes) -> list[str]:
    import pypdfium2

    pages = pypdfium2.PdfDocument(data)
    return [pages[i].get_textpage().get_text_range() for i in range(len(pages))]


def pypdf(data: bytes) -> list[str]:
    import pypdf

    return [page.extract_text() for page in pypdf.PdfReader(io.BytesIO(data)).pages]


def pdfminer(data: bytes) -> list[str]:
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LTTextContainer

    return [
        " ".join(part.get_text() for part in page if isinstance(part, LTTextContainer))
        for page in extract_pages(io.BytesIO(data))
    ]


def sift(data: bytes) -> list[str]:
    from siftlib.fetch.pdf import read_pdf

    return read_pdf(data, max_pages=1000).text.split("\n\n\f\n")


def main() -> None:
    data, single, double = document()
    readers: list[tuple[str, Callable[[bytes], list[str]]]] = [
        ("pypdfium2", pdfium),
        ("pypdf", pypdf),
        ("pdfminer.six", pdfminer),
        ("sift (pypdfium2 + layout)", sift),
    ]
    for name, reader in readers:
        try:
            reader(data)  # warm: imports, caches
        except ImportError:
            print(f"{name:26s} not installed")
            continue
        started = time.perf_counter()
        pages = reader(data)
        per_page = (time.perf_counter() - started) * 1000 / (PAGES + 1)
        one = shingle_f1(single, " ".join(pages[:PAGES]))
        two = shingle_f1(double, pages[PAGES])
        print(f"{name:26s} {per_page:6.1f} ms/page  F1 one column {one:.3f}  two columns {two:.3f}")


if __name__ == "__main__":
    main()
