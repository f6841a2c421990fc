"""Docs that cannot drift: every command documented with an example, real output still real."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from docskit import README, docs_block_after

from siftlib.cli import COMMANDS, main

REPO = Path(__file__).resolve().parent.parent
DEMO = "/tmp/skills-demo"  # where the README's skill examples say the catalog was copied


def help_text(name: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*name.split(), "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_is_in_the_readme(name: str) -> None:
    assert f"sift {name}" in README, f"README never shows `sift {name}`"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_help_carries_an_example(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = help_text(name, capsys)
    _, found, example = text.partition("example")
    assert found, f"`sift {name} --help` has no example"
    assert name.split()[-1] in example


def test_the_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    listed = capsys.readouterr().out
    for name in COMMANDS:
        assert re.search(rf"^  {re.escape(name)}  ", listed, re.M), name


IMPORTS_PROBE = """
import sys
from siftlib.cli import main
code = main(sys.argv[1:])
heavy = (
    "siftlib.gateway.server", "siftlib.gateway.wire", "siftlib.gateway.api", "http.server",
    "siftlib.bakeoff",
)
print(" ".join(m for m in heavy if m in sys.modules) or "-")
"""


@pytest.mark.parametrize("local", [True, False], ids=["in-process", "client"])
def test_sift_search_never_imports_the_server(tmp_path: Path, local: bool) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[server]\ndb = "{tmp_path / "cache.db"}"\n')
    argv = ["search", "sqlite wal", "--config", str(config)]
    argv += ["--local"] if local else ["--server", "http://127.0.0.1:9"]
    done = subprocess.run(
        [sys.executable, "-c", IMPORTS_PROBE, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SIFT_CONFIG": str(config)},
    )
    assert done.stdout.strip().splitlines()[-1] == "-", done.stdout + done.stderr


def run_in_demo(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Run a command over the fixture catalog copied as the README says; paths as printed there."""
    demo = tmp_path / "skills-demo"
    shutil.copytree(REPO / "testdata" / "skills" / "catalog", demo)
    assert main([*argv, "--skills-dir", str(demo)]) == 0
    return capsys.readouterr().out.replace(str(demo), DEMO)


def test_the_readme_skill_search_text_is_real_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = run_in_demo(["rerank-skills", "pdf form", "--limit", "2"], tmp_path, capsys)
    marker = 'sift rerank-skills "pdf form" --limit 2 --skills-dir testdata/skills/catalog'
    assert out == docs_block_after(marker)


def test_the_readme_skill_search_json_is_real_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = run_in_demo(["rerank-skills", "pdf form", "--limit", "1", "--json"], tmp_path, capsys)
    shown = json.loads(docs_block_after("`--json` prints the tool-result shape").strip())
    real = json.loads(out)
    assert real["details"] == shown["details"]
    # The text is shortened in the README after its first sentence, marked by "…".
    head = shown["content"][0]["text"].removesuffix(" …")
    assert real["content"][0]["text"].startswith(head)


def test_the_readme_eval_example_is_real_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no project config or skill folder joins in
    fixtures = REPO / "testdata" / "skills" / "eval" / "dev.jsonl"
    assert main(["rerank-skills", "eval", "--fixtures", str(fixtures)]) == 0
    out = capsys.readouterr().out
    shown = docs_block_after("sift rerank-skills eval --fixtures testdata/skills/eval/dev.jsonl\n")
    # Latencies vary from run to run: every other column must be as the README shows it.
    assert list(map(without_latency, out.splitlines())) == list(
        map(without_latency, shown.splitlines())
    )


def without_latency(line: str) -> list[str]:
    """Split an eval report line into its fields, dropping a mode row's p50 and p90 columns."""
    fields = line.split()
    if fields[:1] in (["keyword"], ["local"], ["reranked"]) and len(fields) == 10:
        del fields[5:7]
    return fields
