"""Reading a PDF's text layer as markdown or plain text (issue 40), with pypdfium2.

    read = read_pdf(data, max_pages=200)      # in a conversion worker: see `Fetcher._pdf`
    if read.problem:                          # "the PDF is encrypted with a password", …
        raise UnreadableContent(read.problem)
    read.markdown, read.text, read.title, read.author, read.num_pages, read.warnings

PDFium (C++) reads hostile bytes, so the fetcher runs `read_pdf` in a conversion worker
process (`siftlib.fetch.workers`) with a memory limit, killed at the fetch's deadline: a crash, a
hang or a memory blow-up costs that one fetch. Everything here returns a `PdfRead`, never
raises: every way a PDF cannot be read is a sentence (`problem`).

Layout, from PDFium's text page (its lines, each with a box and a font size):
- reading order: PDFium's own (the content stream's) unless the page has two columns —
  at least three lines wholly left of the middle and three wholly right of it, and few
  crossing it — then full-width lines (a title) stay where they are and, between them, the
  left column is read before the right one;
- paragraphs: a line joins the one before it unless the gap between them is more than
  0.8 × the font size, the size changes, the column changes, or the previous line ended a
  sentence well short of the column's right edge (a paragraph's last line). A word broken
  with a hyphen at a line's end is joined again when the next line goes on in lower case;
- headings: a line set at least 1.15 × the body size (the size of most characters), in a
  block of at most three lines; the largest such size in the document is `#`, the next
  `##`, smaller ones `###`;
- pages: markdown separates them with a rule (`---`), text with a form feed line.

Decisions: title and author come from the document information (a title falls back to the
first heading, as an HTML page's does); `num_pages` is the page count the document declares,
unless a page past some point cannot be loaded (a page tree that lies about its size), then
the pages that exist. Pages past `max_pages` are not read (a warning says how many). A
document with no text at all on the pages read is a scan without a text layer: a problem,
not an empty success; a page without text among pages with text is a warning.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PdfRead", "read_pdf"]

_HEADING_RATIO = 1.15
_PARAGRAPH_GAP = 0.8
_SENTENCE_END = re.compile(r"[.!?:;\"'”’)]$")
_SOFT_HYPHEN = "\ufffe"
_SPACE = re.compile(r"[ \t\u00a0]+")


@dataclass
class PdfRead:
    """What reading a PDF gave: the text in both forms and the document's metadata."""

    markdown: str = ""
    text: str = ""
    title: str = ""
    author: str = ""
    num_pages: int = 0
    warnings: list[str] = field(default_factory=list)
    problem: str = ""  # set: the PDF cannot be read, and why


@dataclass
class _Line:
    text: str
    left: float
    right: float
    top: float
    bottom: float
    size: float
    column: int = 0  # 0 full width or single column, 1 left, 2 right


def read_pdf(data: bytes, max_pages: int) -> PdfRead:
    """Read at most `max_pages` pages of a PDF's text layer; never raises."""
    try:
        import pypdfium2 as pdfium
    except ImportError:  # pragma: no cover - a dependency
        return PdfRead(problem="no PDF reader is installed")
    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        message = str(exc).lower()
        if "password" in message:
            return PdfRead(problem="the PDF is encrypted with a password")
        return PdfRead(problem="the PDF is broken (it does not parse)")
    try:
        return _read(document, max_pages)
    finally:
        document.close()


def _read(document: Any, max_pages: int) -> PdfRead:
    import pypdfium2 as pdfium

    metadata = document.get_metadata_dict(skip_empty=True)
    declared = len(document)
    read = PdfRead(
        title=_SPACE.sub(" ", metadata.get("Title", "")).strip(),
        author=_SPACE.sub(" ", metadata.get("Author", "")).strip(),
        num_pages=declared,
    )
    pages: list[list[_Line]] = []
    for index in range(min(declared, max_pages)):
        try:
            page = document[index]
        except pdfium.PdfiumError:
            read.num_pages = index
            read.warnings.append(
                f"pdf: the PDF declares {declared} pages but only {index} can be read"
            )
            break
        try:
            pages.append(_lines(page))
        finally:
            page.close()
    if not pages:
        read.problem = "the PDF is broken (no page can be read)"
        return read
    if declared > max_pages and read.num_pages == declared:
        read.warnings.append(
            f"pdf: read the first {max_pages} of {declared} pages (the page limit); "
            f"{declared - max_pages} left out"
        )
    if not any(pages):
        read.problem = "the PDF has no text layer (a scanned document?); sift does no OCR"
        return read
    empty = [str(number) for number, lines in enumerate(pages, 1) if not lines]
    if empty:
        read.warnings.append(f"pdf: no text layer on page {', '.join(empty)} (a scan?)")
    body = _body_size(pages)
    levels = _heading_levels(pages, body)
    markdown_pages, text_pages = [], []
    for lines in pages:
        blocks = _blocks(_ordered(lines), body, levels)
        markdown_pages.append(_render(blocks, plain=False))
        text_pages.append(_render(blocks, plain=True))
        if not read.title:
            read.title = next((text for text, level in blocks if level and level <= 2), "")
    read.markdown = "\n\n---\n\n".join(page for page in markdown_pages) + "\n"
    read.text = "\n\n\f\n".join(page for page in text_pages) + "\n"
    return read


def _lines(page: Any) -> list[_Line]:
    """Return a page's lines, each with its box and font size.

    PDFium joins text on one baseline into one line, even across a column gutter: a line is
    split again where the gap at a space is wider than 1.5 × the font size.
    """
    textpage = page.get_textpage()
    try:
        text = textpage.get_text_range()
        lines: list[_Line] = []
        start = 0
        for piece in text.split("\r\n"):
            cuts = [start + at for at, char in enumerate(piece) if char == " "]
            size = _size(textpage, start) if cuts else 0.0
            begin = start
            for cut in [*cuts, start + len(piece)]:
                if cut < start + len(piece) and not _gutter(textpage, cut, len(text), size):
                    continue
                line = _line(textpage, text, begin, cut)
                if line is not None:
                    lines.append(line)
                begin = cut + 1
            start += len(piece) + 2
        return lines
    finally:
        textpage.close()


def _size(textpage: Any, index: int) -> float:
    """Return the font size of the character at `index`, to a tenth of a point."""
    import pypdfium2.raw as raw

    return round(float(raw.FPDFText_GetFontSize(textpage.raw, index)), 1)


def _gutter(textpage: Any, at: int, length: int, size: float) -> bool:
    """Tell whether the space at index `at` spans a gap wider than 1.5 × the font size."""
    if at == 0 or at + 1 >= length:
        return False
    before = textpage.get_charbox(at - 1)
    after = textpage.get_charbox(at + 1)
    return bool(after[0] - before[2] > 1.5 * size)


def _line(textpage: Any, text: str, begin: int, end: int) -> _Line | None:
    """Return the line of text[begin:end] with its box and font size (None when blank)."""
    piece = text[begin:end]
    stripped = piece.strip()
    if not stripped:
        return None
    first = begin + (len(piece) - len(piece.lstrip()))
    last = begin + len(piece.rstrip()) - 1
    left, bottom, _, top = textpage.get_charbox(first, loose=True)
    _, bottom_last, right, top_last = textpage.get_charbox(last, loose=True)
    # PDFium marks a hyphen at a line's end as U+FFFE, and may already have joined the line.
    stripped = stripped[:-1] + "-" if stripped.endswith(_SOFT_HYPHEN) else stripped
    return _Line(
        text=_SPACE.sub(" ", stripped.replace(_SOFT_HYPHEN, "")),
        left=left,
        right=right,
        top=max(top, top_last),
        bottom=min(bottom, bottom_last),
        size=_size(textpage, first),
    )


def _ordered(lines: list[_Line]) -> list[_Line]:
    """Return a page's lines in reading order: two columns are read one after the other."""
    if len(lines) < 6:
        return lines
    left_edge = min(line.left for line in lines)
    right_edge = max(line.right for line in lines)
    middle = (left_edge + right_edge) / 2
    lefts = [line for line in lines if line.right < middle]
    rights = [line for line in lines if line.left > middle]
    crossing = len(lines) - len(lefts) - len(rights)
    if len(lefts) < 3 or len(rights) < 3 or crossing > len(lines) // 4:
        return lines
    ordered: list[_Line] = []
    columns: tuple[list[_Line], list[_Line]] = ([], [])
    for line in sorted(lines, key=lambda line: -line.top):
        if line.right < middle:
            line.column = 1
            columns[0].append(line)
        elif line.left > middle:
            line.column = 2
            columns[1].append(line)
        else:
            ordered += columns[0] + columns[1] + [line]
            columns[0].clear()
            columns[1].clear()
    return ordered + columns[0] + columns[1]


def _body_size(pages: list[list[_Line]]) -> float:
    """Return the font size most characters are set in."""
    sizes: Counter[float] = Counter()
    for lines in pages:
        for line in lines:
            sizes[line.size] += len(line.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _heading_levels(pages: list[list[_Line]], body: float) -> dict[float, int]:
    """Map each heading size (≥ 1.15 × the body's) to a level: the largest is 1, at most 3."""
    sizes = sorted(
        {line.size for lines in pages for line in lines if line.size >= body * _HEADING_RATIO},
        reverse=True,
    )
    return {size: min(rank, 3) for rank, size in enumerate(sizes, 1)}


def _blocks(lines: list[_Line], body: float, levels: dict[float, int]) -> list[tuple[str, int]]:
    """Join lines into paragraphs and headings: (text, heading level or 0)."""
    blocks: list[tuple[list[_Line], float]] = []
    column_right: dict[int, float] = {}
    for line in lines:
        column_right[line.column] = max(column_right.get(line.column, 0.0), line.right)
    for line in lines:
        if blocks and _continues(blocks[-1][0][-1], line, column_right):
            blocks[-1][0].append(line)
        else:
            blocks.append(([line], line.size))
    out: list[tuple[str, int]] = []
    for group, size in blocks:
        text = _joined([line.text for line in group])
        heading = size >= body * _HEADING_RATIO and len(group) <= 3
        out.append((text, levels.get(size, 3) if heading else 0))
    return out


def _continues(previous: _Line, line: _Line, column_right: dict[int, float]) -> bool:
    """Tell whether `line` goes on with the paragraph `previous` belongs to."""
    if line.column != previous.column or abs(line.size - previous.size) > 0.5:
        return False
    gap = previous.bottom - line.top
    if gap > _PARAGRAPH_GAP * line.size or gap < -line.size:  # far below, or back up
        return False
    short = previous.right < column_right.get(previous.column, 0.0) - 4 * line.size
    return not (short and _SENTENCE_END.search(previous.text))


def _joined(texts: list[str]) -> str:
    """Join a paragraph's lines, mending words broken with a hyphen at a line's end."""
    out = texts[0]
    for text in texts[1:]:
        if out.endswith("-") and len(out) > 1 and out[-2].isalpha() and text[:1].islower():
            out = out[:-1] + text
        else:
            out = f"{out} {text}"
    return out


def _render(blocks: list[tuple[str, int]], *, plain: bool) -> str:
    parts = []
    for text, level in blocks:
        if plain:
            parts.append(text)
        elif level:
            parts.append(f"{'#' * level} {text}")
        else:  # a paragraph starting with "#" is not a heading
            parts.append("\\" + text if text.startswith("#") else text)
    return "\n\n".join(parts)
