"""Skill-search fixtures: a private home directory and a writer of skill folders."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from siftlib.skills.catalog import Catalog, Skill

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tools"))
from skill_folders import write_catalog  # noqa: E402  (tools/ is no package)

MARKER = "BODY-MARKER-never-read-by-search"


def catalog_of(*skills: tuple[str, str]) -> Catalog:
    """Build an in-memory catalog of `(name, description)` pairs, in the order given."""
    return Catalog(
        skills=tuple(
            Skill(name, description, Path(f"/s/{name}/SKILL.md"), Path(f"/s/{name}"))
            for name, description in skills
        )
    )


@pytest.fixture
def catalog_dir() -> Path:
    """The hand-written skill folders of `testdata/skills/catalog`."""
    return REPO_ROOT / "testdata" / "skills" / "catalog"


@pytest.fixture
def real_catalog_json(realdata: Path) -> Path:
    """The real catalog of `../shared/realdata` (the test is skipped without the real data)."""
    return realdata / "skills" / "catalog.json"


@pytest.fixture
def write_skill() -> Callable[..., Path]:
    """Return a function writing `<root>/<folder>/SKILL.md` from frontmatter lines and a body."""

    def write(root: Path, folder: str, *frontmatter: str, body: str = "Body.\n") -> Path:
        path = root / folder / "SKILL.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("---\n" + "".join(f"{line}\n" for line in frontmatter) + "---\n" + body)
        return path

    return write


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Record (and refuse) every outbound connection or name lookup."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("network access in a test that must stay offline")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    yield attempts


@pytest.fixture
def real_skills_dir(real_catalog_json: Path, tmp_path: Path) -> Path:
    """Write the real catalog out as skill folders (bodies hold a marker) and return the root."""
    root = tmp_path / "real-skills"
    entries = json.loads(real_catalog_json.read_text(encoding="utf-8"))
    write_real_catalog(entries, root)
    return root


def write_real_catalog(entries: list[dict[str, Any]], root: Path) -> None:
    """Write each entry as a skill folder, as the README's reproduction command does."""
    write_catalog(entries, root, body=MARKER)
