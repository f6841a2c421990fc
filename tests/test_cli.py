"""Rules every `sift` command follows, checked through the command line in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clikit import sift

COMMANDS = [
    ["search", "sqlite wal"],
    ["serve"],
    ["rerank-skills", "pdf form"],
    ["bakeoff", "run", "--queries", "q.txt", "--out", "run"],
    ["bakeoff", "score", "run"],
    ["blind", "run"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_config_named_by_flag_must_exist(command: list[str], tmp_path: Path) -> None:
    absent = tmp_path / "absent.toml"
    done = sift(*command, "--config", str(absent), cwd=tmp_path)
    assert done.returncode == 2
    prog = "sift " + command[0]
    assert done.stderr == f"{prog}: {absent}: no such config file (named by --config)\n"
    assert done.stdout == ""


def test_a_config_named_by_sift_config_must_exist(tmp_path: Path) -> None:
    absent = tmp_path / "absent.toml"
    done = sift("search", "q", env={"SIFT_CONFIG": str(absent)})
    assert (done.returncode, done.stderr) == (
        2,
        f"sift search: {absent}: no such config file (named by $SIFT_CONFIG)\n",
    )


@pytest.mark.parametrize("command", [["search", "q"], ["rerank-skills", "q"]])
def test_json_failures_print_the_error_on_stdout_and_the_sentence_on_stderr(
    command: list[str], tmp_path: Path
) -> None:
    absent = tmp_path / "absent.toml"
    done = sift(*command, "--json", "--config", str(absent))
    assert done.returncode == 2
    message = f"{absent}: no such config file (named by --config)"
    assert json.loads(done.stdout) == {"error": message}
    assert done.stderr == f"sift {command[0]}: {message}\n"


def test_json_usage_errors_speak_json_too() -> None:
    done = sift("search", "q", "--json", "--k", "abc")
    assert done.returncode == 2
    assert json.loads(done.stdout) == {"error": "argument --k: invalid int value: 'abc'"}
    assert "sift search: error: argument --k: invalid int value: 'abc'" in done.stderr


def test_help_lists_init() -> None:
    done = sift("--help")
    assert done.returncode == 0
    assert "write a commented config.toml and a secret.env template" in done.stdout


def test_json_failures_of_fetch_speak_json_too() -> None:
    done = sift("fetch", "nonsense-url", "--json")
    message = "invalid url: an absolute http:// or https:// URL is required"
    assert done.returncode == 2
    assert json.loads(done.stdout) == {"error": message}
    assert done.stderr == f"sift fetch: {message}\n"
