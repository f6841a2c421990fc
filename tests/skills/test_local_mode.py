"""Local ranking through `sift rerank-skills` (spec §10): `--mode`, config, `--stdio`, offline."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REALDATA
from docskit import docs_block_after

from siftlib.cli import main
from siftlib.skills.answer import render_json
from siftlib.skills.keyword import keyword_search
from siftlib.skills.mode import DEFAULT_MODE
from siftlib.skills.session import Session

from .conftest import MARKER, write_real_catalog

REPO_ROOT = Path(__file__).resolve().parents[2]
SECRET = "ts-secret-key-local-0123456789"
NONE_DETAILS = {"matches": [], "total": 0, "mode": "local", "selection": "none"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["rerank-skills", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0
    answer: dict[str, Any] = json.loads(out)
    return answer


def stdio(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    lines: list[str],
    *argv: str,
) -> list[dict[str, Any]]:
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code, out, _ = run(capsys, "--stdio", *argv)
    assert code == 0
    return [json.loads(line) for line in out.splitlines()]


@pytest.fixture(scope="module")
def real_catalog_folders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real catalog written out as skill folders once for the module: five tests read it,
    and writing then deleting its 119 folders cost each ~0.3 CPU-s."""
    catalog = REALDATA / "skills" / "catalog.json"
    if not catalog.is_file():
        pytest.skip(f"no real data at {REALDATA} (../shared/realdata beside the clone)")
    root = tmp_path_factory.mktemp("real-skills")
    write_real_catalog(json.loads(catalog.read_text(encoding="utf-8")), root)
    return root


@pytest.fixture
def real_skills_dir(realdata: Path, real_catalog_folders: Path) -> Path:
    """The module's real catalog folders (through `realdata`, so the test is marked so)."""
    return real_catalog_folders


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git project folder with nothing in it yet."""
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    return folder


def write_config(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def names(answer: dict[str, Any]) -> list[str]:
    return [match["name"] for match in answer["details"]["matches"]]


# --- one-shot ----------------------------------------------------------------------------


def test_mode_local_ranks_and_says_so(
    capsys: pytest.CaptureFixture[str], catalog_dir: Path
) -> None:
    keyword = run_json(
        capsys, "fill in an excel workbook", "--mode", "keyword", "--skills-dir", str(catalog_dir)
    )
    assert keyword["details"]["mode"] == "keyword" and keyword["details"]["total"] > 2
    answer = run_json(
        capsys, "fill in an excel workbook", "--mode", "local", "--skills-dir", str(catalog_dir)
    )
    assert names(answer)[0] == "xlsx" and answer["details"]["mode"] == "local"
    assert "selection" not in answer["details"]
    assert answer["content"][0]["text"].startswith("Found ")


def test_mode_local_says_no_skill_fits(
    capsys: pytest.CaptureFixture[str], catalog_dir: Path
) -> None:
    query = "book a table at an italian restaurant"
    assert keyword_search(
        Session.open(config_path=Path("/absent"), skills_dirs=[catalog_dir], cwd=catalog_dir)[
            0
        ].snapshot.catalog,
        query,
        5,
    ).total
    answer = run_json(capsys, query, "--mode", "local", "--skills-dir", str(catalog_dir))
    assert answer == {
        "content": [{"type": "text", "text": "No matching skills found."}],
        "details": NONE_DETAILS,
    }
    code, out, _ = run(capsys, query, "--mode", "local", "--skills-dir", str(catalog_dir))
    assert code == 0 and out == "No matching skills found.\n"


def test_bodies_are_never_read(capsys: pytest.CaptureFixture[str], catalog_dir: Path) -> None:
    # Some fixture skills carry the marker in their body only.
    answer = run_json(capsys, MARKER, "--mode", "local", "--skills-dir", str(catalog_dir))
    assert answer["details"] == NONE_DETAILS


@pytest.mark.parametrize("mode", ["semantic", "LOCAL", "", "reranked"])
def test_a_bad_mode_is_a_tool_error(
    capsys: pytest.CaptureFixture[str], catalog_dir: Path, mode: str
) -> None:
    code, out, _ = run(capsys, "pdf", "--mode", mode, "--json", "--skills-dir", str(catalog_dir))
    assert code == 2 and "mode must be" in json.loads(out)["error"]
    code, out, err = run(capsys, "pdf", "--mode", mode, "--skills-dir", str(catalog_dir))
    assert code == 2 and out == "" and "mode must be" in err


def test_a_session_mode_holds_for_requests_without_their_own(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, catalog_dir: Path
) -> None:
    lines = ['{"query": "excel workbook"}', '{"query": "excel workbook", "mode": "keyword"}']
    local, keyword = stdio(
        capsys, monkeypatch, lines, "--mode", "local", "--skills-dir", str(catalog_dir)
    )
    assert local["details"]["mode"] == "local" and keyword["details"]["mode"] == "keyword"
    code, out, _ = run(capsys, "--stdio", "--mode", "semantic", "--json")
    assert code == 2 and "mode must be" in json.loads(out)["error"]


# --- config ------------------------------------------------------------------------------


def test_global_config_chooses_local(
    capsys: pytest.CaptureFixture[str], catalog_dir: Path, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "config.toml", '[skill_search]\nmode = "local"\n')
    answer = run_json(
        capsys, "excel workbook", "--config", str(config), "--skills-dir", str(catalog_dir)
    )
    assert answer["details"]["mode"] == "local" and names(answer)[0] == "xlsx"


def test_project_config_chooses_local_and_overrides_the_global_one(
    capsys: pytest.CaptureFixture[str], catalog_dir: Path, tmp_path: Path, project: Path
) -> None:
    config = write_config(tmp_path / "config.toml", '[skill_search]\nmode = "keyword"\n')
    write_config(project / ".sift" / "config.toml", '[skill_search]\nmode = "local"\n')
    nested = project / "src"
    nested.mkdir()
    argv = ["excel workbook", "--config", str(config), "--skills-dir", str(catalog_dir)]
    answer = run_json(capsys, *argv, "--cwd", str(nested))
    assert answer["details"]["mode"] == "local"
    # Outside the project, the global config's keyword mode holds.
    assert run_json(capsys, *argv, "--cwd", str(tmp_path))["details"]["mode"] == "keyword"


def test_mode_keyword_overrides_the_config_with_the_exact_baseline(
    capsys: pytest.CaptureFixture[str], catalog_dir: Path, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "config.toml", '[skill_search]\nmode = "local"\n')
    argv = ["--config", str(config), "--skills-dir", str(catalog_dir), "--limit", "3"]
    answer = run_json(capsys, "fill in a form", *argv, "--mode", "keyword")
    session, _ = Session.open(config_path=config, skills_dirs=[catalog_dir], cwd=tmp_path)
    assert answer == render_json(keyword_search(session.snapshot.catalog, "fill in a form", 3))


@pytest.mark.parametrize("value", ['"semantic"', "true", "3"])
def test_an_invalid_configured_mode_is_ignored_with_a_diagnostic(
    capsys: pytest.CaptureFixture[str], catalog_dir: Path, tmp_path: Path, value: str
) -> None:
    config = write_config(tmp_path / "config.toml", f"[skill_search]\nmode = {value}\n")
    code, out, err = run(
        capsys, "pdf", "--json", "--config", str(config), "--skills-dir", str(catalog_dir)
    )
    assert code == 0 and json.loads(out)["details"]["mode"] == DEFAULT_MODE == "local"
    assert "[skill_search] mode must be" in err


def test_a_configured_mode_keeps_reranking_settings_valid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `mode` is a known [skill_search] key: it must not disable an opt-in beside it.
    monkeypatch.setenv("TYPESAFE_API_KEY", "ts-key")  # opted in with a key: nothing to say
    config = write_config(
        tmp_path / "config.toml",
        '[skill_search]\nmode = "local"\n[skill_search.reranking]\nenabled = true\n',
    )
    session, diagnostics = Session.open(config_path=config, skills_dirs=[], cwd=tmp_path)
    assert session.snapshot.settings.enabled and session.snapshot.mode == "local"
    assert diagnostics == []


@pytest.mark.parametrize("key", [SECRET, None])
def test_local_is_the_default_unless_reranking_is_opted_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str | None
) -> None:
    if key is not None:
        monkeypatch.setenv("TYPESAFE_API_KEY", key)
    session, _ = Session.open(config_path=tmp_path / "absent.toml", skills_dirs=[], cwd=tmp_path)
    assert session.snapshot.mode == DEFAULT_MODE == "local"
    # Opted in, reranking's fallback (a missing key included) stays the keyword result (§3).
    config = write_config(tmp_path / "on.toml", "[skill_search.reranking]\nenabled = true\n")
    session, _ = Session.open(config_path=config, skills_dirs=[], cwd=tmp_path)
    assert session.snapshot.mode == "keyword"


def test_a_search_without_a_mode_is_local(
    capsys: pytest.CaptureFixture[str], catalog_dir: Path, tmp_path: Path
) -> None:
    absent = ("--skills-dir", str(catalog_dir), "--cwd", str(tmp_path))  # no config at all
    for query in ("fill in an excel workbook", "book a table at an italian restaurant"):
        assert run_json(capsys, query, *absent) == run_json(
            capsys, query, "--mode", "local", *absent
        )
    assert run_json(capsys, "fill in an excel workbook", *absent)["details"]["mode"] == "local"


def test_opted_in_without_a_key_falls_back_to_the_keyword_result(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    catalog_dir: Path,
    tmp_path: Path,
) -> None:
    monkeypatch.delenv("TYPESAFE_API_KEY", raising=False)
    config = write_config(tmp_path / "on.toml", "[skill_search.reranking]\nenabled = true\n")
    args = ("--config", str(config), "--skills-dir", str(catalog_dir))
    answer = run_json(capsys, "fill in an excel workbook", *args)
    baseline = run_json(capsys, "fill in an excel workbook", "--mode", "keyword", *args)
    assert answer["details"] == {**baseline["details"], "fallback": "missing_key"}
    assert answer["details"]["mode"] == "keyword"


# --- --stdio -----------------------------------------------------------------------------


def test_stdio_requests_choose_their_mode(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    catalog_dir: Path,
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path / "config.toml", '[skill_search]\nmode = "keyword"\n')

    def lines() -> Iterator[bytes]:
        yield b'{"query": "excel workbook", "mode": "local"}\n'
        yield b'{"query": "book a table at an italian restaurant", "mode": "local"}\n'
        yield b'{"query": "excel workbook", "mode": "nope"}\n'
        yield b'{"query": "excel workbook"}\n'
        config.write_text('[skill_search]\nmode = "local"\n')  # changed mid-session...
        yield b'{"op": "reload"}\n'  # ...and read again on reload
        yield b'{"query": "excel workbook"}\n'
        yield b'{"query": "excel workbook", "mode": "keyword"}\n'

    pending = lines()  # read lazily, line by line, as the session reads stdin
    stdin = types.SimpleNamespace(readline=lambda size=-1: next(pending, b""))
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=stdin))
    code, out, _ = run(capsys, "--stdio", "--config", str(config), "--skills-dir", str(catalog_dir))
    assert code == 0
    local, none, bad, keyword, reloaded, configured, forced = map(json.loads, out.splitlines())
    assert local["details"]["mode"] == "local" and names(local)[0] == "xlsx"
    assert none["details"] == NONE_DETAILS
    assert "mode must be" in bad["error"]
    assert keyword["details"]["mode"] == "keyword"
    assert reloaded == {"ok": True}
    assert configured["details"]["mode"] == "local" and forced["details"]["mode"] == "keyword"


# --- offline, and reranking's precedence -------------------------------------------------


def test_local_mode_makes_no_network_activity(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    catalog_dir: Path,
    tmp_path: Path,
    no_network: list[object],
) -> None:
    monkeypatch.setenv("TYPESAFE_API_KEY", SECRET)  # set, but never opted in
    config = write_config(tmp_path / "config.toml", '[skill_search]\nmode = "local"\n')
    argv = ["--config", str(config), "--skills-dir", str(catalog_dir)]
    assert names(run_json(capsys, "excel workbook", *argv))[0] == "xlsx"
    answers = stdio(
        capsys, monkeypatch, ['{"query": "merge pdf files"}', '{"op": "reload"}'], *argv
    )
    assert answers[0]["details"]["mode"] == "local" and answers[1] == {"ok": True}
    assert no_network == []


def test_opted_in_reranking_takes_precedence_and_keyword_forces_the_baseline(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    catalog_dir: Path,
    tmp_path: Path,
    no_network: list[object],
) -> None:
    monkeypatch.setenv("TYPESAFE_API_KEY", SECRET)
    # The longest timeout: a deadline passed while a loaded machine sets up the client would
    # end the search before its one (refused) connection attempt.
    config = write_config(
        tmp_path / "config.toml",
        '[skill_search]\nmode = "local"\n[skill_search.reranking]\nenabled = true\n'
        "timeout_ms = 10000\n",
    )
    argv = ["excel workbook", "--config", str(config), "--skills-dir", str(catalog_dir)]
    # Reranked (the provider is refused here, so the keyword fallback comes back).
    answer = run_json(capsys, *argv, "--mode", "local")
    assert answer["details"]["mode"] == "keyword"
    assert [attempt[0] for attempt in no_network] == [("api.typesafe.ai", 443)]
    # --mode keyword: the baseline, and no provider call at all.
    run_json(capsys, *argv, "--mode", "keyword")
    assert len(no_network) == 1


def test_deterministic_across_processes(catalog_dir: Path, tmp_path: Path) -> None:
    outputs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "HOME": str(tmp_path)}
        completed = subprocess.run(
            [sys.executable, str(REPO_ROOT / "sift.py"), "rerank-skills", "edit my spreadsheet",
             "--mode", "local", "--json", "--skills-dir", str(catalog_dir), "--cwd", str(tmp_path)],
            capture_output=True, text=True, env=env, check=True, timeout=60,
        )  # fmt: skip
        outputs.add(completed.stdout)
    assert len(outputs) == 1 and "xlsx" in outputs.pop()


def test_local_mode_on_the_real_catalog(
    capsys: pytest.CaptureFixture[str], real_skills_dir: Path
) -> None:
    answer = run_json(
        capsys, "fill in a word document", "--mode", "local", "--skills-dir", str(real_skills_dir)
    )
    assert names(answer)[0] == "docx" and answer["details"]["total"] < 10
    answer = run_json(
        capsys, "book a flight to lisbon", "--mode", "local", "--skills-dir", str(real_skills_dir)
    )
    assert answer["details"] == NONE_DETAILS


# The docs' local-mode examples over the real catalog, as written there: the command, then
# its output block, with the catalog written out at /tmp/skills-real.
README_EXAMPLES = (
    'sift rerank-skills "fill in a word document" --mode keyword --limit 1',
    'sift rerank-skills "fill in a word document" --limit 1',
    'sift rerank-skills "book a flight to lisbon" --json',
    'sift rerank-skills "hand several independent fixes to helpers that run at once"',
)


@pytest.mark.parametrize("command", README_EXAMPLES)
def test_the_readme_local_examples_are_real_output(
    command: str, capsys: pytest.CaptureFixture[str], real_skills_dir: Path
) -> None:
    shown = docs_block_after(f"{command} --skills-dir /tmp/skills-real\n")
    argv = command.removeprefix("sift rerank-skills ")
    query = argv[1 : argv.index('"', 1)]
    options = argv[argv.index('"', 1) + 1 :].split()
    code, out, _ = run(capsys, query, *options, "--skills-dir", str(real_skills_dir))
    assert code == 0
    real = out.replace(str(real_skills_dir), "/tmp/skills-real")
    # A long description is shortened in the docs, marked by "[…]".
    head, _, tail = shown.partition(" […]")
    assert real.startswith(head) and real.endswith(tail)
    assert real == shown or "[…]" in shown
