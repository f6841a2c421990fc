"""Rendering an HTML part as markdown or plain text, block by block.

Headings, paragraphs, lists (nested), links with absolute URLs, emphasis, inline code,
fenced code blocks with their language (from `language-*`, `lang-*`, `highlight-*` classes
or `data-lang`, recovered by the block's text when the extractor dropped the class), block
quotes, pipe tables (a table holding block content is layout and rendered as blocks; inline
code, links and line breaks stay inside a cell; a key-value table gets an empty head), images
as `![alt](url)` in full-page mode only. Ordered lists are numbered in markdown only; the
text format marks every item "- ". Spaces at the edges of a link's text go outside the
brackets; soft hyphens, zero-width spaces, word joiners and BOMs are dropped and letters
composed (NFC): invisible to a reader, they split words for any tool that reads the text.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from siftlib.fetch.convert.clean import code_key, language_of
from siftlib.fetch.convert.decode import absolute, text_of

_WHITESPACE = re.compile(r"[ \t\n\r\f\v]+")


_BR = "\ue000"  # a line break inside a paragraph, kept through whitespace folding


_BREAK = re.compile(f" ?{_BR} ?")


# Invisible marks that split a word for a reader's tools but show nothing: soft hyphen,
# zero-width space, word joiner, BOM (ZWJ/ZWNJ stay: scripts and emoji need them).
_INVISIBLE_MARKS = "\u00ad\u200b\u2060\ufeff"


_INVISIBLE = re.compile(f"[{_INVISIBLE_MARKS}]")


_BLOCKS = frozenset(
    (
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "center",
        "dd",
        "details",
        "dir",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hgroup",
        "hr",
        "html",
        "li",
        "main",
        "menu",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
        "caption",
    )
)


HEADINGS = {f"h{n}": n for n in range(1, 7)}


_EMPHASIS = {"strong": "**", "b": "**", "em": "*", "i": "*", "del": "~~", "s": "~~"}


# A table holding these is page layout, not data: its cells are rendered as blocks.
_LAYOUT_TABLE = (
    ".//table|.//ul|.//ol|.//h1|.//h2|.//h3|.//pre|.//blockquote|.//td[string-length() > 400]"
)


def squash(text: str) -> str:
    """Fold whitespace runs to one space; keep explicit line breaks."""
    folded = " ".join(text.split())  # ~3x a regex substitution; NBSP folds to a space too
    if _BR not in folded:
        return folded
    return _BREAK.sub("\n", folded).strip("\n ")


def _holds_blocks(element: Any) -> bool:
    """Tell whether an inline element holds block elements (headings, lists, paragraphs)."""
    return any(True for _ in element.iter(*_BLOCKS))


class Renderer:
    """Markdown (or plain text) from an HTML element, block by block."""

    def __init__(self, base: str, *, plain: bool, languages: dict[str, str], images: bool) -> None:
        self.base, self.plain, self.languages, self.images = base, plain, languages, images

    def render(self, element: Any) -> str:
        """Return the element's content as markdown (or text)."""
        text = "\n\n".join(block for block in self._blocks(element) if block.strip())
        # Each pass only where needed: a regex over a 100 KB page costs about a millisecond.
        if "\n\n\n" in text:
            text = re.sub(r"\n{3,}", "\n\n", text)
        if any(mark in text for mark in _INVISIBLE_MARKS):
            text = _INVISIBLE.sub("", text)
        # Composed (NFC) letters: a decomposed "u" + diaeresis is two pieces to a word splitter.
        return unicodedata.normalize("NFC", text).strip() + "\n"

    def _blocks(self, element: Any) -> list[str]:
        blocks: list[str] = []
        line: list[str] = [element.text or ""]

        def flush() -> None:
            text = squash("".join(line))
            if text:
                blocks.append(text)
            line.clear()

        for child in element:
            tag = child.tag if isinstance(child.tag, str) else ""
            if tag in _BLOCKS:
                flush()
                blocks.extend(self._block(child, tag))
            elif tag and tag != "a" and _holds_blocks(child):
                # A `<span>` or a custom element (`<n-tabs>`) around headings and lists:
                # their blocks stay blocks, not one line of glued words ("timesOptimize").
                flush()
                blocks.extend(self._blocks(child))
            elif tag:
                line.append(self._inline(child))
            line.append(child.tail or "")
        flush()
        return blocks

    def _block(self, element: Any, tag: str) -> list[str]:
        if tag in HEADINGS:
            text = squash(self._inline_children(element)).replace("\n", " ")
            if not text:
                return []
            return [text if self.plain else f"{'#' * HEADINGS[tag]} {text}"]
        if tag == "pre":
            return [self._code(element)]
        if tag in ("ul", "ol", "menu", "dir"):
            return [self._list(element, ordered=tag == "ol")]
        if tag == "blockquote":
            inner = "\n\n".join(self._blocks(element))
            if self.plain or not inner:
                return [inner]
            return ["\n".join(f"> {row}".rstrip() for row in inner.split("\n"))]
        if tag == "table":
            return self._table(element)
        if tag == "hr":
            return [] if self.plain else ["---"]
        return self._blocks(element)

    def _inline_children(self, element: Any) -> str:
        parts = [element.text or ""]
        for child in element:
            if isinstance(child.tag, str):
                parts.append(self._inline(child))
            parts.append(child.tail or "")
        return "".join(parts)

    def _inline(self, element: Any) -> str:
        tag = element.tag
        if tag == "br":
            return _BR
        if tag == "img":
            return self._image(element)
        if tag in ("code", "kbd", "samp", "tt"):
            code = _WHITESPACE.sub(" ", text_of(element))
            if self.plain or not code.strip():
                return code
            tick = "``" if "`" in code else "`"
            return f"{tick}{code}{tick}"
        inner = self._inline_children(element)
        if tag in _BLOCKS:
            # A paragraph in a table cell, a heading or list item inside a link: its own line.
            return f"{_BR}{inner}{_BR}"
        if self.plain or not inner.strip():
            return inner
        # Spaces at the edges stay outside the markup: `[Platz ](u)angesiedelt` glues words.
        lead = inner[: len(inner) - len(inner.lstrip())]
        trail = inner[len(inner.rstrip()) :]
        if tag == "a":
            target = absolute(element.get("href"), self.base)
            text = squash(inner).replace("\n", " ")
            return f"{lead}[{text}]({target}){trail}" if target and text else inner
        marker = _EMPHASIS.get(tag)
        if marker is None:
            return inner
        return f"{lead}{marker}{inner.strip()}{marker}{trail}"

    def _image(self, element: Any) -> str:
        src = absolute(element.get("src"), self.base)
        if not self.images or self.plain or not src:
            return ""
        alt = squash(element.get("alt") or "").replace("]", "")
        return f"![{alt}]({src})"

    def _code(self, element: Any) -> str:
        for br in element.iter("br"):
            br.tail = "\n" + (br.tail or "")
        text = text_of(element).strip("\n")
        if self.plain:
            return text
        language = language_of(element) or self.languages.get(code_key(text), "")
        fence = "~~~" if "```" in text else "```"
        return f"{fence}{language}\n{text}\n{fence}"

    def _list(self, element: Any, *, ordered: bool) -> str:
        rows = []
        number = int(element.get("start", "1")) if str(element.get("start", "1")).isdigit() else 1
        for item in element:
            if not isinstance(item.tag, str):
                continue
            # Numbers are markdown's syntax for order; in plain text they are words of their
            # own ("1", "2") that the page's text does not have, as trafilatura's text has not.
            marker = f"{number}. " if ordered and not self.plain else "- "
            number += 1
            body = "\n".join(self._blocks(item)) if item.tag == "li" else squash(text_of(item))
            if not body.strip():
                continue
            indent = " " * len(marker)
            lines = body.split("\n")
            rows.append(
                marker
                + lines[0]
                + "".join(f"\n{indent}{row}" if row else "\n" for row in lines[1:])
            )
        return "\n".join(rows)

    def _table(self, element: Any) -> list[str]:
        if element.xpath(_LAYOUT_TABLE):
            return self._blocks(element)  # a layout table: its cells are content blocks
        rows = element.xpath("./tr|./thead/tr|./tbody/tr|./tfoot/tr")
        br = " " if self.plain else "<br>"  # a pipe table's cell is one line
        grid = [
            [
                squash(self._inline_children(cell)).replace("\n", br).replace("|", "\\|")
                for cell in row.xpath("./td|./th")
            ]
            for row in rows
        ]
        grid = [row for row in grid if any(row)]
        if not grid:
            return []
        if self.plain:
            return ["\n".join(" | ".join(row) for row in grid)]
        width = max(len(row) for row in grid)
        grid = [row + [""] * (width - len(row)) for row in grid]
        if width > 1 and all(
            row[0].tag == "th" and row[-1].tag == "td" for row in rows if len(row) > 1
        ):
            grid.insert(0, [""] * width)  # a key-value table: its first row is data, not a head
        lines = [f"| {' | '.join(grid[0])} |".replace("  ", " "), "|" + "---|" * width]
        lines += [f"| {' | '.join(row)} |" for row in grid[1:]]
        caption = element.find("caption")
        head = [squash(text_of(caption))] if caption is not None else []
        return head + ["\n".join(lines)]
