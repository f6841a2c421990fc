"""The skill catalog: skill folders found on disk, described by their `SKILL.md` frontmatter.

Roots are searched in a fixed order (spec §2): `--skills-dir` arguments; the user folders
`~/.agents/skills`, `~/.pi/agent/skills`, `~/.claude/skills`; then the project folders
`.agents/skills`, `.pi/skills`, `.claude/skills` in the working directory and each parent up
to the git root (the nearest folder holding `.git`). Outside a git repository only the working
directory itself is a project folder, so nothing above it is ever trusted.

Within a root, a folder holding `SKILL.md` is one skill; other folders are searched in name
order, skipping hidden ones and `node_modules` (as agents do). The first skill of a name wins;
later ones are reported as shadowed. Skills with `disable-model-invocation: true` are left out.

A root is resolved once (a symlinked `~/.claude/skills` is fine), but nothing inside it is
followed out of it: a folder or `SKILL.md` whose real path lies outside the root's is skipped
with a diagnostic, so a link to `/` cannot walk the filesystem or pick up another process's
`/proc/<pid>/cwd/SKILL.md` (whose name and description reranking would send to the provider).
Skills are expected a level or two down, so a walk stops `MAX_DEPTH` folders below the root
and after `MAX_FOLDERS` folders per root, each with one diagnostic.

Only the frontmatter is read, line by line up to its closing `---` (at most 64 KiB): a skill's
body is never loaded. The frontmatter is the YAML subset agent skills use: top-level
`key: value` pairs whose values may be plain, single- or double-quoted, or `|`/`>` block
scalars, on one line or several. Nested mappings and lists are skipped, since only `name`,
`description` and `disable-model-invocation` matter here. Descriptions are stripped of
surrounding whitespace.

    catalog = discover(skills_dirs=[Path("skills")], cwd=Path.cwd())
    for skill in catalog.skills: ...
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from siftlib.skills.keyword import KeywordIndex
    from siftlib.skills.relevance import RelevanceIndex

WORD = re.compile(r"[^\W_]+")
MAX_FRONTMATTER_BYTES = 64 * 1024
MAX_DESCRIPTION_CHARS = 1024
MAX_DEPTH = 6
MAX_FOLDERS = 5000
_NAME = re.compile(r"[a-z0-9-]{1,64}")
_KEY = re.compile(r"""("[^"\\]*"|'[^']*'|[A-Za-z0-9_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]+(.*))?""")
_DOUBLE_RUN = re.compile(r'[^"\\\n]+')
_SINGLE_RUN = re.compile(r"[^'\n]+")
_BLOCK_HEADER = re.compile(r"([|>])([+-]?)([1-9]?)([+-]?)(?:[ \t]+#.*)?")
_USER_ROOTS = (".agents/skills", ".pi/agent/skills", ".claude/skills")
_PROJECT_ROOTS = (".agents/skills", ".pi/skills", ".claude/skills")
_TRUE = ("true", "True", "TRUE")
_NULL = ("", "~", "null", "Null", "NULL")


@dataclass(frozen=True)
class Skill:
    """One skill: its name, description and where its `SKILL.md` lives."""

    name: str
    description: str
    file_path: Path
    base_dir: Path


class Folded(NamedTuple):
    """A skill's name and description lowercased, with their words, ready for matching."""

    name: str
    name_words: frozenset[str]
    description: str
    description_words: frozenset[str]


@dataclass(frozen=True)
class Catalog:
    """The eligible skills, sorted by name, and what was noticed while finding them."""

    skills: tuple[Skill, ...]
    diagnostics: tuple[str, ...] = ()
    searched: tuple[Path, ...] = ()  # the skill folders looked in, in search order

    def __post_init__(self) -> None:
        # Keyword ties are broken by name through stable sorts, so the order is an invariant.
        names = [skill.name for skill in self.skills]
        if any(a > b for a, b in zip(names, names[1:], strict=False)):
            object.__setattr__(self, "skills", tuple(sorted(self.skills, key=_by_name)))

    @cached_property
    def folded(self) -> tuple[Folded, ...]:
        """Return the lowercased form of every skill, computed once per catalog."""
        folded = []
        for skill in self.skills:
            name, description = skill.name.lower(), skill.description.lower()
            folded.append(
                Folded(
                    name=name,
                    name_words=frozenset(name.split("-")),
                    description=description,
                    description_words=frozenset(WORD.findall(description)),
                )
            )
        return tuple(folded)

    @cached_property
    def relevance(self) -> RelevanceIndex:
        """Return the relevance index of the names and descriptions, built once per catalog."""
        from siftlib.skills.relevance import RelevanceIndex  # only local and reranked searches

        return RelevanceIndex.build(self.skills)

    @cached_property
    def keyword_index(self) -> KeywordIndex:
        """Return the index keyword search looks its terms up in, built once per catalog."""
        from siftlib.skills.keyword import KeywordIndex  # it imports this module

        return KeywordIndex.build(self.folded)


class FrontmatterError(ValueError):
    """A `SKILL.md` has no readable frontmatter."""


def discover(*, skills_dirs: Sequence[Path] = (), cwd: Path, home: Path | None = None) -> Catalog:
    """Find every skill under the roots of spec §2 and return the eligible ones."""
    cwd = Path(os.path.abspath(cwd))
    home = Path(os.path.abspath(Path.home() if home is None else home))
    diagnostics: list[str] = []
    roots: list[Path] = []
    for folder in skills_dirs:
        root = Path(os.path.abspath(folder))
        if os.path.isdir(root):
            roots.append(root)
        else:
            diagnostics.append(f"{root}: skills directory not found")
    roots += [home / sub for sub in _USER_ROOTS]
    roots += [folder / sub for folder in project_folders(cwd) for sub in _PROJECT_ROOTS]

    winners: dict[str, tuple[Skill, bool]] = {}
    for root in roots:
        for folder in _skill_folders(root, diagnostics):
            loaded = _load(folder, diagnostics)
            if loaded is None:
                continue
            skill, disabled = loaded
            first = winners.get(skill.name)
            if first is None:
                winners[skill.name] = (skill, disabled)
            elif os.path.realpath(first[0].file_path) != os.path.realpath(skill.file_path):
                diagnostics.append(
                    f"{skill.file_path}: skill {skill.name!r} is shadowed by {first[0].file_path}"
                )
    eligible = sorted((s for s, disabled in winners.values() if not disabled), key=_by_name)
    return Catalog(skills=tuple(eligible), diagnostics=tuple(diagnostics), searched=tuple(roots))


def project_folders(cwd: Path) -> list[Path]:
    """Return `cwd` and its parents up to the git root, nearest first (only `cwd` outside git)."""
    chain = [cwd, *cwd.parents]
    for index, folder in enumerate(chain):
        if os.path.lexists(folder / ".git"):  # os.path: an unreadable folder is no error
            return chain[: index + 1]
    return [cwd]


def project_configs(cwd: Path) -> list[Path]:
    """Return the project configs that exist (`.sift/config.toml` in `project_folders`)."""
    paths = [folder / ".sift" / "config.toml" for folder in project_folders(cwd)]
    return [path for path in paths if os.path.isfile(path)]


def _by_name(skill: Skill) -> str:
    return skill.name


def _skill_folders(root: Path, diagnostics: list[str]) -> Iterator[Path]:
    """Yield the skill folders under `root` in name order, never leaving it through a symlink."""
    inside = os.path.join(os.path.realpath(root), "")
    seen: set[str] = set()
    stack = [(root, 0)]
    too_deep = False
    while stack:
        folder, depth = stack.pop()
        real = os.path.realpath(folder)
        if not os.path.join(real, "").startswith(inside):
            diagnostics.append(f"{folder}: leads outside the skills root {root}; not followed")
            continue
        if real in seen:
            continue
        seen.add(real)
        if len(seen) > MAX_FOLDERS:
            diagnostics.append(f"{root}: over {MAX_FOLDERS} folders; the rest are not searched")
            return
        skill_file = folder / "SKILL.md"
        if os.path.isfile(skill_file):
            if os.path.realpath(skill_file).startswith(inside):
                yield folder
            else:
                diagnostics.append(f"{skill_file}: leads outside the skills root {root}; not read")
            continue
        try:
            with os.scandir(folder) as entries:
                subfolders = [
                    e.name
                    for e in entries
                    if not e.name.startswith(".") and e.name != "node_modules" and _is_dir(e)
                ]
        except OSError:
            continue
        if subfolders and depth == MAX_DEPTH:
            if not too_deep:
                too_deep = True
                diagnostics.append(f"{root}: folders over {MAX_DEPTH} levels deep are not searched")
            continue
        stack.extend((folder / name, depth + 1) for name in sorted(subfolders, reverse=True))


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:  # e.g. a symlink into a folder we may not read
        return False


def _load(folder: Path, diagnostics: list[str]) -> tuple[Skill, bool] | None:
    """Return the skill in `folder` and whether it is disabled, or None if it is not a skill."""
    file_path = folder / "SKILL.md"
    try:
        fields = parse_frontmatter(read_frontmatter(file_path))
    except (OSError, FrontmatterError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        diagnostics.append(f"{file_path}: not loaded: {reason}")
        return None
    description = fields.get("description")
    if not isinstance(description, str) or not description.strip():
        diagnostics.append(f"{file_path}: not loaded: the description is missing or empty")
        return None
    description = description.strip()
    name = fields.get("name")
    if not isinstance(name, str) or not name.strip():
        name = folder.name
    name = name.strip()
    if not _NAME.fullmatch(name):
        diagnostics.append(f"{file_path}: name {name!r} is not 1-64 characters of a-z, 0-9 and -")
    if len(description) > MAX_DESCRIPTION_CHARS:
        diagnostics.append(
            f"{file_path}: description is {len(description)} characters,"
            f" over the {MAX_DESCRIPTION_CHARS} expected"
        )
    disabled = fields.get("disable-model-invocation") is True
    return Skill(name=name, description=description, file_path=file_path, base_dir=folder), disabled


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
