"""The writers' sets (`testdata/skills/writers/`) and `eval` over a folder of catalogs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from siftlib.cli import main
from siftlib.skills.fixtures import catalog_folders, load_catalog_json, load_fixtures, load_suites
from siftlib.skills.local import local_search

REPO = Path(__file__).resolve().parents[2]
WRITERS = REPO / "testdata" / "skills" / "writers"
VOICES = ("terse", "chatty", "everyday", "uncovered")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["rerank-skills", "eval", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_three_catalogs_each_with_every_voice() -> None:
    folders = catalog_folders(WRITERS)
    assert [folder.name for folder in folders] == ["business", "fixture", "real"]
    for folder in folders:
        for voice in VOICES:
            lines = (folder / f"{voice}.jsonl").read_text(encoding="utf-8").splitlines()
            expects = [json.loads(line)["expect"] for line in lines]
            if voice in ("everyday", "uncovered"):
                # Everyday life sharing a loose word, and the catalog's domain with no skill.
                assert len(expects) == 12 and set(expects) == {None}
            else:
                assert len(expects) == 18 and expects.count(None) == 6


def test_every_expected_skill_is_in_its_catalog(realdata: Path) -> None:
    suites, warnings = load_suites(catalog_folders(WRITERS), WRITERS)  # checks each name
    assert warnings == []
    assert {name: len(suite.catalog.skills) for name, suite in suites.items()} == {
        "business": 40,
        "fixture": 62,
        "real": 115,
    }


def test_the_issues_loose_word_requests_are_declined(realdata: Path) -> None:
    catalog = load_catalog_json(WRITERS / "real" / "catalog.json")
    # "translate" once covered "japanese" too, through the vocabulary's language concept.
    assert local_search(catalog, "translate this paragraph into Japanese", 5).matches == ()
    assert local_search(catalog, "fix a leaking kitchen faucet", 5).matches == ()
    assert local_search(catalog, "write a terraform module for an s3 bucket", 5).matches == ()
    fitting = local_search(catalog, "fuzz a python module with coverage guidance", 5)
    assert fitting.matches[0].name == "atheris"


def test_a_catalog_listed_as_json(tmp_path: Path) -> None:
    listed = tmp_path / "catalog.json"
    listed.write_text(
        json.dumps(
            [
                {"name": "pdf", "description": "Fill in PDF forms."},
                {"name": "pdf", "description": "A shadowed second pdf skill."},
                {"name": "deploy", "description": "Ship it.", "disable_model_invocation": True},
                {"name": "xlsx", "description": "Edit spreadsheets."},
            ]
        )
    )
    catalog = load_catalog_json(listed)
    assert [(s.name, s.description) for s in catalog.skills] == [
        ("pdf", "Fill in PDF forms."),
        ("xlsx", "Edit spreadsheets."),
    ]
    assert catalog.skills[0].file_path == tmp_path / "pdf" / "SKILL.md"


def write_suites(root: Path) -> None:
    """Two small catalogs, one as folders and one as JSON, with two writers each."""
    folders = root / "software" / "catalog"
    for name, description in (
        ("pdf-forms", "Fill in PDF forms"),
        ("git-bisect", "Find a bad commit"),
    ):
        (folders / name).mkdir(parents=True)
        (folders / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {description}\n---\n"
        )
    (root / "office").mkdir()
    (root / "office" / "catalog.json").write_text(
        json.dumps([{"name": "invoices", "description": "Write invoices for customers"}])
    )
    sets: dict[str, dict[str, list[tuple[str, str | None]]]] = {
        "software": {
            "terse": [("fill pdf forms", "pdf-forms"), ("pasta recipe", None)],
            "chatty": [("hey can you find the bad commit with bisect?", "git-bisect")],
        },
        "office": {"terse": [("write invoices for customers", "invoices"), ("weather", None)]},
    }
    for catalog, by_writer in sets.items():
        for writer, rows in by_writer.items():
            (root / catalog / f"{writer}.jsonl").write_text(
                "".join(json.dumps({"query": q, "expect": e}) + "\n" for q, e in rows)
            )


def test_eval_reports_each_catalog_each_writer_and_all(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_suites(tmp_path)
    code, out, _ = run(capsys, "--fixtures", str(tmp_path), "--json")
    assert code == 0
    report: dict[str, Any] = json.loads(out)
    assert list(report["catalogs"]) == ["office", "software"]
    assert report["catalogs"]["software"]["skills"] == 2
    assert list(report["catalogs"]["software"]["sets"]) == ["chatty", "terse"]
    # The terse writer over both catalogs: two requests expect a skill, two expect none.
    terse = report["writers"]["terse"]["keyword"]
    assert terse["selection"][1] == 2 and terse["no_match"][1] == 2
    assert report["writers"]["chatty"]["local"]["queries"] == 1
    assert report["modes"]["local"]["queries"] == 5
    code, text, _ = run(capsys, "--fixtures", str(tmp_path))
    assert code == 0
    assert "== catalog office: 1 skills" in text and "== catalog software: 2 skills" in text
    assert "== per writer, over every catalog" in text
    assert any(line.split()[:3] == ["terse", "local", "4"] for line in text.splitlines())


def test_a_catalog_the_clone_lacks_is_skipped_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_suites(tmp_path)
    (tmp_path / "office" / "catalog.json").unlink()
    (tmp_path / "office" / "catalog.json").symlink_to(tmp_path / "absent.json")
    code, out, err = run(capsys, "--fixtures", str(tmp_path), "--json")
    assert code == 0
    assert list(json.loads(out)["catalogs"]) == ["software"]
    assert "office: skipped:" in err and "links to a catalog that is not there" in err


def test_a_folder_of_catalogs_none_readable_is_a_tool_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "gone").mkdir()
    (tmp_path / "gone" / "terse.jsonl").write_text('{"query": "x", "expect": null}\n')
    (tmp_path / "gone" / "catalog.json").symlink_to(tmp_path / "absent.json")
    code, out, err = run(capsys, "--fixtures", str(tmp_path), "--json")
    assert code == 2 and "no catalog of the fixtures folder could be read" in out


def test_fixture_lines_name_skills_of_their_own_catalog() -> None:
    suites, _ = load_suites([WRITERS / "business"], WRITERS)
    names = {skill.name for skill in suites["business"].catalog.skills}
    for voice in VOICES:
        for fixture in load_fixtures(
            WRITERS / "business" / f"{voice}.jsonl", suites["business"].catalog
        ):
            assert fixture.expect is None or fixture.expect in names
