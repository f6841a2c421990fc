"""Labelled queries and the catalogs they are labelled against (`sift rerank-skills eval`).

A fixtures file holds one `{"query": "…", "expect": "<skill name>" | null}` object per line;
a folder of them is a set per file; a folder of catalog folders (`catalog/` or `catalog.json`
beside each one's sets) is a suite per catalog (`testdata/skills/writers/`).

    suites, warnings = load_suites(catalog_folders(Path("testdata/skills/writers")), Path.cwd())
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from siftlib.errors import ToolError
from siftlib.skills.catalog import Catalog, Skill, discover
from siftlib.skills.keyword import query_terms


@dataclass(frozen=True)
class Fixture:
    """One labelled query: the skill it should find, or None when no skill fits."""

    query: str
    expect: str | None


def load_fixtures(path: Path, catalog: Catalog) -> list[Fixture]:
    """Read the labelled queries; raise `ToolError` naming the first bad line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"cannot read fixtures {path}: {exc.__class__.__name__}") from None
    names = {skill.name for skill in catalog.skills}
    fixtures = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            item = json.loads(line)
        except ValueError:
            raise ToolError(f"{where}: not a JSON object") from None
        if not isinstance(item, dict) or set(item) != {"query", "expect"}:
            raise ToolError(f'{where}: expected {{"query": …, "expect": …}}')
        query, expect = item["query"], item["expect"]
        if not isinstance(query, str) or not query_terms(query):
            raise ToolError(f"{where}: the query has no search terms")
        if expect is not None and not isinstance(expect, str):
            raise ToolError(f"{where}: expect must be a skill name or null")
        if expect is not None and expect not in names:
            raise ToolError(f"{where}: expected skill {expect!r} is not in the catalog")
        fixtures.append(Fixture(query, expect))
    if not fixtures:
        raise ToolError(f"{path}: no labelled queries")
    return fixtures


def load_catalog(folders: Sequence[Path]) -> Catalog:
    """Discover the skills under `folders` only."""
    roots = [Path(os.path.abspath(folder)) for folder in folders]
    for root in roots:
        if not root.is_dir():
            raise ToolError(f"skills directory {root} not found")
    found = discover(skills_dirs=roots, cwd=roots[0], home=roots[0])
    inside = tuple(s for s in found.skills if any(s.base_dir.is_relative_to(r) for r in roots))
    return Catalog(skills=inside, diagnostics=found.diagnostics)


def fixture_files(path: Path) -> list[Path]:
    """Return the fixtures files `path` names: itself, or a folder's `*.jsonl` files."""
    if not path.is_dir():
        return [path]
    files = sorted(path.glob("*.jsonl"))
    if not files:
        raise ToolError(f"{path}: no *.jsonl fixtures files")
    return files


def choose_catalog(fixtures_path: Path, skills_dirs: Sequence[Path], cwd: Path) -> Catalog:
    """Return the catalog to evaluate on: `skills_dirs`, else `catalog/` or `catalog.json`
    beside the fixtures, else the catalog a search from `cwd` would use."""
    beside = (fixtures_path if fixtures_path.is_dir() else fixtures_path.parent) / "catalog"
    if skills_dirs:
        return load_catalog(skills_dirs)
    if beside.is_dir():
        return load_catalog([beside])
    listed = beside.with_suffix(".json")
    if listed.is_file():
        return load_catalog_json(listed)
    if listed.is_symlink():  # e.g. a link to ../shared, which a clone may lack
        raise ToolError(f"{listed} links to a catalog that is not there")
    return discover(cwd=cwd)


def load_catalog_json(path: Path) -> Catalog:
    """Read a catalog listed as JSON, `[{"name", "description", "disable_model_invocation"?}]`
    (the form of `../shared/realdata/skills/catalog.json`), as discovery would see it: the
    first skill of a name wins and disabled ones are left out. Paths point beside the file."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ToolError(f"cannot read catalog {path}: {exc.__class__.__name__}") from None
    if not isinstance(entries, list):
        raise ToolError(f"{path}: expected a list of skills")
    root = Path(os.path.abspath(path.parent))
    first: dict[str, tuple[Skill, bool]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(key), str) and entry[key] for key in ("name", "description")
        ):
            raise ToolError(f"{path}: each skill needs a name and a description")
        folder = root / entry["name"]
        skill = Skill(entry["name"], entry["description"], folder / "SKILL.md", folder)
        first.setdefault(skill.name, (skill, entry.get("disable_model_invocation") is True))
    return Catalog(skills=tuple(skill for skill, disabled in first.values() if not disabled))


@dataclass(frozen=True)
class Suite:
    """One catalog and its labelled sets, each set a writer's, named by its file's stem."""

    catalog: Catalog
    sets: dict[str, list[Fixture]]


def catalog_folders(path: Path) -> list[Path]:
    """Return the subfolders of `path` that hold fixtures when `path` itself holds none (a
    folder of catalogs), else nothing."""
    if not path.is_dir() or any(path.glob("*.jsonl")):
        return []
    return sorted(sub for sub in path.iterdir() if sub.is_dir() and any(sub.glob("*.jsonl")))


def load_suites(folders: Sequence[Path], cwd: Path) -> tuple[dict[str, Suite], list[str]]:
    """Read each catalog folder's catalog and sets; return them by folder name, and a warning
    for each catalog that is not there (a link to shared data a clone lacks)."""
    suites: dict[str, Suite] = {}
    warnings: list[str] = []
    for folder in folders:
        try:
            catalog = choose_catalog(folder, [], cwd)
        except ToolError as exc:
            warnings.append(f"{folder.name}: skipped: {exc}")
            continue
        suites[folder.name] = Suite(catalog, load_sets(folder, catalog))
    if not suites:
        raise ToolError("no catalog of the fixtures folder could be read")
    return suites, warnings


def load_sets(fixtures_path: Path, catalog: Catalog) -> dict[str, list[Fixture]]:
    """Read every fixtures file `fixtures_path` names, each a set named by its file's stem."""
    return {path.stem: load_fixtures(path, catalog) for path in fixture_files(fixtures_path)}
