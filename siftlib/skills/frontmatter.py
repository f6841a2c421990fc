"""The frontmatter of a `SKILL.md`: read without its body, parsed as the YAML subset skills use.

Only the lines between the opening and the closing `---` are read, line by line (at most 64
KiB): a skill's body is never loaded. The subset is what agent skills write: top-level
`key: value` pairs whose values may be plain, single- or double-quoted, or `|`/`>` block
scalars, on one line or several. Nested mappings and lists are skipped (their value is None),
since only `name`, `description` and `disable-model-invocation` matter to skill search.
Writing a parser rather than depending on PyYAML keeps the reading bounded and the catalog
free of a YAML library's type coercions (`on`, dates, octal numbers).

    fields = parse_frontmatter(read_frontmatter(Path("skills/pdf/SKILL.md")))
    fields.get("description")
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

MAX_FRONTMATTER_BYTES = 64 * 1024
_KEY = re.compile(r"""("[^"\\]*"|'[^']*'|[A-Za-z0-9_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]+(.*))?""")
_DOUBLE_RUN = re.compile(r'[^"\\\n]+')
_SINGLE_RUN = re.compile(r"[^'\n]+")
_BLOCK_HEADER = re.compile(r"([|>])([+-]?)([1-9]?)([+-]?)(?:[ \t]+#.*)?")
_TRUE = ("true", "True", "TRUE")
_NULL = ("", "~", "null", "Null", "NULL")


class FrontmatterError(ValueError):
    """A `SKILL.md` has no readable frontmatter."""


def read_frontmatter(path: Path) -> list[str]:
    """Return the lines between the opening and closing `---` of `path`, reading no further."""
    with path.open("rb") as f:
        first = f.readline(MAX_FRONTMATTER_BYTES)
        if first.removeprefix(b"\xef\xbb\xbf").rstrip() != b"---":
            raise FrontmatterError("it does not start with a --- frontmatter line")
        size = len(first)
        lines = []
        while True:
            line = f.readline(MAX_FRONTMATTER_BYTES)
            size += len(line)
            if not line or size > MAX_FRONTMATTER_BYTES:
                raise FrontmatterError("the frontmatter has no closing --- line within 64 KiB")
            if line.rstrip() == b"---":
                break
            try:
                lines.append(line.decode("utf-8").rstrip("\r\n"))
            except UnicodeDecodeError:
                raise FrontmatterError("the frontmatter is not valid UTF-8") from None
    return lines


def parse_frontmatter(lines: Sequence[str]) -> dict[str, str | bool | None]:
    """Parse top-level scalar keys of frontmatter lines; nested values become None."""
    fields: dict[str, str | bool | None] = {}
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if _continues(line) or line.lstrip().startswith("#"):
            continue
        match = _KEY.fullmatch(line.rstrip())
        if match is None:
            continue
        block = []
        while index < len(lines) and _continues(lines[index]):
            block.append(lines[index])
            index += 1
        key = match.group(1)
        if key[0] in "\"'":
            key = key[1:-1]
        fields[key] = _scalar((match.group(2) or "").strip(), block)
    return fields


def _continues(line: str) -> bool:
    """Tell whether a line belongs to the value of the key above it."""
    return not line.strip() or line[0] in " \t" or line == "-" or line.startswith("- ")


def _scalar(head: str, block: list[str]) -> str | bool | None:
    """Return the value that starts with `head` and continues over `block`."""
    if head[:1] in ('"', "'"):
        return _quoted("\n".join([head, *block]))
    header = _BLOCK_HEADER.fullmatch(head)
    if header:
        style, chomp, indent = header.group(1), header.group(2) or header.group(4), header.group(3)
        return _block(block, folded=style == ">", chomp=chomp, indent=int(indent or 0))
    content = [line.strip() for line in block]
    if not head and any(_looks_nested(line) for line in content if line):
        return None
    plain = _fold([_strip_comment(head), *content] if head else content).strip()
    if plain in _TRUE:
        return True
    return None if plain in _NULL else plain


def _looks_nested(line: str) -> bool:
    return line == "-" or line.startswith("- ") or _KEY.fullmatch(line) is not None


def _strip_comment(text: str) -> str:
    cut = text.find(" #")
    return text if cut < 0 else text[:cut].rstrip()


def _fold(lines: list[str]) -> str:
    """Join stripped lines as YAML folds flow scalars: one break is a space, blank lines break."""
    out = ""
    blanks = 0
    for position, line in enumerate(lines):
        if position and not line:
            blanks += 1
            continue
        if position:
            out += "\n" * blanks if blanks else " "
        out += line
        blanks = 0
    return out + "\n" * blanks if blanks else out


def _quoted(text: str) -> str | None:
    """Parse a single- or double-quoted scalar, possibly over several lines."""
    quote, body = text[0], text[1:]
    plain = _DOUBLE_RUN if quote == '"' else _SINGLE_RUN
    lines: list[str] = []
    current = ""
    position = 0
    while position < len(body):
        run = plain.match(body, position)
        if run:
            current += run.group()
            position = run.end()
            continue
        char = body[position]
        position += 1
        if char == quote:
            if quote == "'" and body[position : position + 1] == "'":
                current += "'"
                position += 1
                continue
            return _fold([*lines, current])
        if char == "\n":
            lines.append(current.rstrip(" \t"))
            while position < len(body) and body[position] in " \t":
                position += 1
            current = ""
        elif char == "\\" and quote == '"':
            if body[position : position + 1] == "\n":
                # An escaped line break joins the lines with nothing between them.
                position += 1
                while position < len(body) and body[position] in " \t":
                    position += 1
                continue
            escaped, position = _escape(body, position)
            current += escaped
        else:
            current += char
    return None  # unterminated: not a string YAML would accept


_ESCAPES = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f",
    "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85",
    "_": "\xa0", "L": "\u2028", "P": "\u2029",
}  # fmt: skip
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


def _escape(body: str, position: int) -> tuple[str, int]:
    """Decode the double-quoted escape at `position` (just after the backslash)."""
    code = body[position : position + 1]
    if code in _ESCAPES:
        return _ESCAPES[code], position + 1
    width = _HEX_ESCAPES.get(code)
    digits = body[position + 1 : position + 1 + width] if width else ""
    if width and len(digits) == width and all(c in "0123456789abcdefABCDEF" for c in digits):
        value = int(digits, 16)
        if value <= 0x10FFFF:
            return chr(value), position + 1 + width
    return "\\" + code, position + 1  # unknown escape: kept as written


def _block(lines: list[str], *, folded: bool, chomp: str, indent: int) -> str:
    """Return a `|` or `>` block scalar's text with YAML's chomping applied."""
    if not indent:
        widths = [len(line) - len(line.lstrip(" ")) for line in lines if line.strip()]
        indent = widths[0] if widths else 0
    content = [line[indent:] if line.strip() else "" for line in lines]
    while content and not content[-1]:
        content.pop()
    trailing = len(lines) - len(content)
    text = _fold_block(content) if folded else "\n".join(content)
    if chomp == "-" or not content:
        return text
    return text + ("\n" * (trailing + 1) if chomp == "+" else "\n")


def _fold_block(content: list[str]) -> str:
    """Fold `>` lines: a single break between plain lines is a space, blank lines are breaks."""
    lead = 0
    while lead < len(content) and not content[lead]:
        lead += 1
    if lead == len(content):
        return ""
    text, previous, blanks = "\n" * lead + content[lead], content[lead], 0
    for line in content[lead + 1 :]:
        if not line:
            blanks += 1
            continue
        if previous[0].isspace() or line[0].isspace():
            text += "\n" * (blanks + 1)  # more-indented lines keep their breaks
        else:
            text += "\n" * blanks if blanks else " "
        text += line
        previous, blanks = line, 0
    return text
