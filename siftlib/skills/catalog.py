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

Only the frontmatter is read (`frontmatter.py`): a skill's body is never loaded. Descriptions
are stripped of surrounding whitespace. The catalog is discovery only: the indexes searches
use are built from it and cached by their own modules (`keyword.KeywordIndex.of`,
`relevance.RelevanceIndex.of`).

    catalog = discover(skills_dirs=[Path("skills")], cwd=Path.cwd())
    for skill in catalog.skills: ...
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from siftlib.skills.frontmatter import FrontmatterError, parse_frontmatter, read_frontmatter

MAX_DESCRIPTION_CHARS = 1024
MAX_DEPTH = 6
MAX_FOLDERS = 5000
_NAME = re.compile(r"[a-z0-9-]{1,64}")
_USER_ROOTS = (".agents/skills", ".pi/agent/skills", ".claude/skills")
_PROJECT_ROOTS = (".agents/skills", ".pi/skills", ".claude/skills")


@dataclass(frozen=True)
class Skill:
    """One skill: its name, description and where its `SKILL.md` lives."""

    name: str
    description: str
    file_path: Path
    base_dir: Path


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
