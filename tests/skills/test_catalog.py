"""Catalog discovery (spec §2): roots, order, shadowing, exclusion, lazy frontmatter."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from siftlib.skills.catalog import Catalog, discover, project_folders
from siftlib.skills.frontmatter import MAX_FRONTMATTER_BYTES
from siftlib.skills.keyword import keyword_search

MARKER = "BODY-MARKER-never-read-by-search"


def names(catalog: Catalog) -> list[str]:
    return [skill.name for skill in catalog.skills]


# --- one root --------------------------------------------------------------------------


def test_fixture_catalog(catalog_dir: Path, tmp_path: Path) -> None:
    catalog = discover(skills_dirs=[catalog_dir], cwd=tmp_path)
    assert names(catalog) == [
        "Bad_Name",
        "doc-coauthoring",  # no name in the frontmatter: the folder's name
        "frontend-design",  # two folders deep
        "pdf",
        "pdf-forms",
        "systematic-debugging",
        "using-git-worktrees",
        "webapp-testing",
        "xlsx",
    ]  # git-cleanup is disabled; broken has no description
    by_name = {skill.name: skill for skill in catalog.skills}
    assert by_name["pdf"].description == "Read, merge and split PDF documents."
    assert by_name["systematic-debugging"].description == (
        "Use when a test fails or a bug appears.\nFind the root cause before fixing."
    )
    assert by_name["using-git-worktrees"].description == (
        "Create isolated git worktrees for feature work."
    )
    skill = by_name["frontend-design"]
    assert skill.base_dir == catalog_dir / "nested" / "deeper" / "frontend-design"
    assert skill.file_path == skill.base_dir / "SKILL.md"
    assert skill.file_path.is_absolute()
    assert len(catalog.diagnostics) == 2
    assert "Bad_Name" in catalog.diagnostics[0] and "a-z, 0-9 and -" in catalog.diagnostics[0]
    assert "broken" in catalog.diagnostics[1] and "description" in catalog.diagnostics[1]


def test_relative_skills_dir_gives_absolute_paths(
    write_skill: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_skill(tmp_path / "skills", "one", "description: d")
    monkeypatch.chdir(tmp_path)
    (skill,) = discover(skills_dirs=[Path("skills")], cwd=Path(".")).skills
    assert skill.file_path == tmp_path / "skills" / "one" / "SKILL.md"
    assert skill.base_dir == tmp_path / "skills" / "one"


def test_a_skills_dir_that_is_itself_a_skill(
    write_skill: Callable[..., Path], tmp_path: Path
) -> None:
    write_skill(tmp_path, "solo", "name: solo", "description: d")
    assert names(discover(skills_dirs=[tmp_path / "solo"], cwd=tmp_path)) == ["solo"]


def test_missing_skills_dir_is_a_diagnostic(tmp_path: Path) -> None:
    catalog = discover(skills_dirs=[tmp_path / "absent"], cwd=tmp_path)
    assert catalog.skills == ()
    assert catalog.diagnostics == (f"{tmp_path / 'absent'}: skills directory not found",)


def test_hidden_folders_and_node_modules_are_skipped(
    write_skill: Callable[..., Path], tmp_path: Path
) -> None:
    write_skill(tmp_path, ".hidden/a", "name: a", "description: d")
    write_skill(tmp_path, "node_modules/b", "name: b", "description: d")
    write_skill(tmp_path, "c", "name: c", "description: d")
    assert names(discover(skills_dirs=[tmp_path], cwd=tmp_path)) == ["c"]


def test_a_skill_folder_is_not_searched_further(
    write_skill: Callable[..., Path], tmp_path: Path
) -> None:
    write_skill(tmp_path, "outer", "name: outer", "description: d")
    write_skill(tmp_path, "outer/inner", "name: inner", "description: d")
    assert names(discover(skills_dirs=[tmp_path], cwd=tmp_path)) == ["outer"]


def test_symlink_loops_end(write_skill: Callable[..., Path], tmp_path: Path) -> None:
    write_skill(tmp_path, "a/skill", "name: skill", "description: d")
    (tmp_path / "a" / "loop").symlink_to(tmp_path / "a")
    catalog = discover(skills_dirs=[tmp_path], cwd=tmp_path)
    assert names(catalog) == ["skill"]
    assert catalog.diagnostics == ()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("name: x\ndescription: d\n", "does not start with"),
        ("---\nname: x\ndescription: d\n", "no closing ---"),
        ("---\ndescription: " + "d" * MAX_FRONTMATTER_BYTES + "\n---\n", "no closing ---"),
        ("---\nname: x\ndescription:   \n---\n", "missing or empty"),
        ("---\nname: x\n---\n", "missing or empty"),
    ],
)
def test_not_a_skill(tmp_path: Path, content: str, reason: str) -> None:
    path = tmp_path / "x" / "SKILL.md"
    path.parent.mkdir()
    path.write_text(content)
    catalog = discover(skills_dirs=[tmp_path], cwd=tmp_path)
    assert catalog.skills == ()
    (diagnostic,) = catalog.diagnostics
    assert diagnostic.startswith(f"{path}: not loaded") and reason in diagnostic


def test_invalid_utf8_frontmatter_is_not_a_skill(tmp_path: Path) -> None:
    path = tmp_path / "x" / "SKILL.md"
    path.parent.mkdir()
    path.write_bytes(b"---\nname: x\ndescription: caf\xe9\n---\n")
    catalog = discover(skills_dirs=[tmp_path], cwd=tmp_path)
    assert catalog.skills == () and "UTF-8" in catalog.diagnostics[0]


def test_bom_and_crlf_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "x" / "SKILL.md"
    path.parent.mkdir()
    path.write_bytes(b"\xef\xbb\xbf---\r\nname: x\r\ndescription: windows\r\n---\r\nbody\r\n")
    (skill,) = discover(skills_dirs=[tmp_path], cwd=tmp_path).skills
    assert (skill.name, skill.description) == ("x", "windows")


def test_long_description_loads_with_a_diagnostic(
    write_skill: Callable[..., Path], tmp_path: Path
) -> None:
    write_skill(tmp_path, "long", "description: " + "é" * 1025)
    write_skill(tmp_path, "limit", "description: " + "é" * 1024)
    catalog = discover(skills_dirs=[tmp_path], cwd=tmp_path)
    assert names(catalog) == ["limit", "long"]
    (diagnostic,) = catalog.diagnostics
    assert "long/SKILL.md" in diagnostic and "1025 characters" in diagnostic


@pytest.mark.parametrize("name", ["UPPER", "under_score", "x" * 65, "spa ce", "ünï"])
def test_unusual_names_load_with_a_diagnostic(
    write_skill: Callable[..., Path], tmp_path: Path, name: str
) -> None:
    write_skill(tmp_path, "folder", f"name: {name}", "description: d")
    catalog = discover(skills_dirs=[tmp_path], cwd=tmp_path)
    assert names(catalog) == [name]
    assert len(catalog.diagnostics) == 1 and "is not 1-64 characters" in catalog.diagnostics[0]


def test_sixty_four_character_name_is_fine(
    write_skill: Callable[..., Path], tmp_path: Path
) -> None:
    write_skill(tmp_path, "folder", "name: " + "a-1" * 21 + "b", "description: d")
    assert discover(skills_dirs=[tmp_path], cwd=tmp_path).diagnostics == ()


# --- roots, order and shadowing ----------------------------------------------------------


def test_root_order_and_first_duplicate_wins(
    write_skill: Callable[..., Path], tmp_path: Path, user_home: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    cwd = repo / "sub"
    roots = [
        tmp_path / "dir1",
        tmp_path / "dir2",
        user_home / ".agents" / "skills",
        user_home / ".pi" / "agent" / "skills",
        user_home / ".claude" / "skills",
        cwd / ".agents" / "skills",
        cwd / ".pi" / "skills",
        cwd / ".claude" / "skills",
        repo / ".agents" / "skills",
        repo / ".pi" / "skills",
        repo / ".claude" / "skills",
    ]
    for rank, root in enumerate(roots):
        # Every root holds "shared" plus one skill of its own.
        write_skill(root, "shared", "name: shared", f"description: from root {rank}")
        write_skill(root, f"own{rank}", f"name: own-{rank:02d}", "description: d")
    catalog = discover(skills_dirs=[roots[0], roots[1]], cwd=cwd)
    assert names(catalog) == [f"own-{rank:02d}" for rank in range(len(roots))] + ["shared"]
    assert catalog.skills[-1].description == "from root 0"
    shadowed = [d for d in catalog.diagnostics if "is shadowed by" in d]
    assert shadowed == [
        f"{root / 'shared' / 'SKILL.md'}: skill 'shared' is shadowed by "
        f"{roots[0] / 'shared' / 'SKILL.md'}"
        for root in roots[1:]
    ]


def test_nearest_project_folder_wins(write_skill: Callable[..., Path], tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    cwd = tmp_path / "a" / "b"
    write_skill(tmp_path / ".claude" / "skills", "s", "name: s", "description: root")
    write_skill(tmp_path / "a" / ".pi" / "skills", "s", "name: s", "description: middle")
    write_skill(cwd / ".agents" / "skills", "t", "name: t", "description: d")
    catalog = discover(cwd=cwd)
    assert [(s.name, s.description) for s in catalog.skills] == [("s", "middle"), ("t", "d")]


def test_nothing_above_the_git_root(write_skill: Callable[..., Path], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".git").write_text("gitdir: elsewhere\n")  # a worktree's .git is a file
    write_skill(tmp_path / ".agents" / "skills", "above", "name: above", "description: d")
    write_skill(repo / ".agents" / "skills", "inside", "name: inside", "description: d")
    assert names(discover(cwd=repo / "deep" / "er")) == ["inside"]
    assert project_folders(repo / "x") == [repo / "x", repo]


def test_outside_git_only_the_working_directory(
    write_skill: Callable[..., Path], tmp_path: Path
) -> None:
    cwd = tmp_path / "work"
    write_skill(tmp_path / ".agents" / "skills", "parent", "name: parent", "description: d")
    write_skill(cwd / ".agents" / "skills", "here", "name: here", "description: d")
    assert names(discover(cwd=cwd)) == ["here"]


def test_disabled_skill_is_excluded_but_still_shadows(
    write_skill: Callable[..., Path], tmp_path: Path
) -> None:
    write_skill(
        tmp_path / "first", "x", "name: x", "description: d", "disable-model-invocation: true"
    )
    write_skill(tmp_path / "second", "x", "name: x", "description: later")
    write_skill(
        tmp_path / "second", "y", "name: y", "description: d", "disable-model-invocation: false"
    )
    catalog = discover(skills_dirs=[tmp_path / "first", tmp_path / "second"], cwd=tmp_path)
    assert names(catalog) == ["y"]
    assert "is shadowed by" in catalog.diagnostics[0]


def test_same_folder_reached_twice_is_not_shadowing(
    write_skill: Callable[..., Path], tmp_path: Path
) -> None:
    write_skill(tmp_path / "skills", "x", "name: x", "description: d")
    (tmp_path / "alias").symlink_to(tmp_path / "skills")
    catalog = discover(skills_dirs=[tmp_path / "skills", tmp_path / "alias"], cwd=tmp_path)
    assert names(catalog) == ["x"] and catalog.diagnostics == ()


# --- laziness ---------------------------------------------------------------------------


class _Recorder:
    """A file wrapper that keeps every byte handed to the reader."""

    def __init__(self, file: Any, log: list[bytes]) -> None:
        self._file, self._log = file, log

    def __enter__(self) -> _Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def __iter__(self) -> Iterator[bytes]:
        for line in self._file:
            self._log.append(line)
            yield line

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._file, name)
        if name not in ("read", "readline", "readlines", "read1", "readinto"):
            return attribute

        def recorded(*args: Any) -> Any:
            data = attribute(*args)
            self._log.append(data if isinstance(data, bytes) else repr(data).encode())
            return data

        return recorded


def test_bodies_are_never_read(
    catalog_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed_out: list[bytes] = []
    real_open = Path.open

    def observed_open(self: Path, *args: Any, **kwargs: Any) -> Any:
        return _Recorder(real_open(self, *args, **kwargs), handed_out)

    monkeypatch.setattr(Path, "open", observed_open)
    opened: list[str] = []
    watching = True

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if watching and event == "open" and isinstance(args[0], str | bytes | Path):
            opened.append(str(args[0]))

    sys.addaudithook(audit)  # hooks cannot be removed: `watching` switches this one off
    try:
        big = tmp_path / "big" / "SKILL.md"
        big.parent.mkdir()
        big.write_text("---\nname: big\ndescription: d\n---\n" + "x" * 1_000_000 + MARKER)
        catalog = discover(skills_dirs=[catalog_dir, tmp_path], cwd=tmp_path)
        assert "big" in names(catalog) and "pdf" in names(catalog)
        read = b"".join(handed_out)
        assert b"description: d" in read  # the recorder does see frontmatter
        assert MARKER.encode() not in read
        assert len(read) < 2000
        assert all(path.endswith("SKILL.md") for path in opened)

        opened.clear()
        handed_out.clear()
        keyword_search(catalog, "never read body marker pdf", 5)
        assert opened == [] and handed_out == []
    finally:
        watching = False


# --- the real catalog ---------------------------------------------------------------------


def test_real_catalog(real_catalog_json: Path, real_skills_dir: Path, tmp_path: Path) -> None:
    entries = json.loads(real_catalog_json.read_text(encoding="utf-8"))
    assert len(entries) == 119
    catalog = discover(skills_dirs=[real_skills_dir], cwd=tmp_path)

    disabled = {e["name"] for e in entries if e.get("disable_model_invocation")}
    assert disabled == {"firebase-apk-scanner", "git-cleanup", "github-triage"}
    assert not disabled & set(names(catalog))
    assert len(catalog.skills) == 119 - 1 - 3  # one shadowed duplicate, three disabled
    assert names(catalog) == sorted(names(catalog))

    # Every value survives the trip through frontmatter unchanged.
    first = {}
    for entry in entries:
        first.setdefault(entry["name"], entry)
    for skill in catalog.skills:
        assert skill.description == first[skill.name]["description"]
    creators = [e for e in entries if e["name"] == "skill-creator"]
    assert len(creators) == 2
    (creator,) = [s for s in catalog.skills if s.name == "skill-creator"]
    assert creator.description == creators[0]["description"]  # anthropics/skills, first

    assert sorted(catalog.diagnostics) == sorted(
        [
            f"{real_skills_dir / 'skill-creator-openai' / 'SKILL.md'}: skill 'skill-creator'"
            f" is shadowed by {real_skills_dir / 'skill-creator' / 'SKILL.md'}",
            f"{real_skills_dir / 'claude-api' / 'SKILL.md'}: description is 1068 characters,"
            " over the 1024 expected",
        ]
    )


# --- symlinks and bounds ---------------------------------------------------------------------


def test_a_symlink_out_of_the_root_is_not_followed(
    write_skill: Callable[..., Path], tmp_path: Path
) -> None:
    root, elsewhere = tmp_path / "skills", tmp_path / "elsewhere"
    write_skill(root, "mine", "name: mine", "description: d")
    write_skill(elsewhere, "theirs", "name: theirs", "description: d")
    (root / "to-root-fs").symlink_to("/")
    (root / "to-elsewhere").symlink_to(elsewhere)
    (root / "skill-link").symlink_to(elsewhere / "theirs")
    (root / "file-link").mkdir()
    (root / "file-link" / "SKILL.md").symlink_to(elsewhere / "theirs" / "SKILL.md")
    catalog = discover(skills_dirs=[root], cwd=tmp_path)
    assert names(catalog) == ["mine"]
    assert sorted(catalog.diagnostics) == [
        f"{root / 'file-link' / 'SKILL.md'}: leads outside the skills root {root}; not read",
        f"{root / 'skill-link'}: leads outside the skills root {root}; not followed",
        f"{root / 'to-elsewhere'}: leads outside the skills root {root}; not followed",
        f"{root / 'to-root-fs'}: leads outside the skills root {root}; not followed",
    ]


def test_a_symlinked_root_and_links_inside_it_are_followed(
    write_skill: Callable[..., Path], tmp_path: Path
) -> None:
    real = tmp_path / "dotfiles" / "skills"
    write_skill(real, "group/one", "name: one", "description: d")
    (real / "alias").symlink_to(real / "group")
    (tmp_path / "root").symlink_to(real)
    catalog = discover(skills_dirs=[tmp_path / "root"], cwd=tmp_path)
    assert names(catalog) == ["one"] and catalog.diagnostics == ()


def test_the_walk_is_bounded_in_depth(
    write_skill: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("siftlib.skills.catalog.MAX_DEPTH", 2)
    write_skill(tmp_path, "a/shallow", "name: shallow", "description: d")
    write_skill(tmp_path, "a/b/deep", "name: deep", "description: d")
    catalog = discover(skills_dirs=[tmp_path], cwd=tmp_path)
    assert names(catalog) == ["shallow"]
    assert catalog.diagnostics == (f"{tmp_path}: folders over 2 levels deep are not searched",)


def test_the_walk_is_bounded_in_folders(
    write_skill: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("siftlib.skills.catalog.MAX_FOLDERS", 3)
    for name in ("a", "b", "c", "d"):
        write_skill(tmp_path, name, f"name: {name}", "description: d")
    catalog = discover(skills_dirs=[tmp_path], cwd=tmp_path)
    assert names(catalog) == ["a", "b"]  # the root itself is the first folder
    assert catalog.diagnostics == (f"{tmp_path}: over 3 folders; the rest are not searched",)
