"""`sift rerank-skills --stdio` in a real process, fed what a careless or hostile caller sends.

A bad line gets its `{"error": …}` line and the session goes on; so does a bad config.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def session(
    lines: list[bytes], *, catalog_dir: Path, tmp_path: Path, home: Path, config: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run one stdio session over `lines` and return the finished process."""
    argv = [sys.executable, str(REPO_ROOT / "sift.py"), "rerank-skills", "--stdio"]
    argv += ["--skills-dir", str(catalog_dir)]
    if config is not None:
        argv += ["--config", str(config)]
    return subprocess.run(
        argv,
        input=b"".join(line + b"\n" for line in lines),
        capture_output=True,
        cwd=tmp_path,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin", "XDG_CONFIG_HOME": str(tmp_path / "x")},
        timeout=60,
    )


def test_a_config_that_is_not_utf8_disables_reranking_and_the_session_goes_on(
    catalog_dir: Path, tmp_path: Path, user_home: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_bytes(b"[skill_search]\n# caf\xe9\n")
    query = json.dumps({"query": "pdf", "limit": 1}).encode()
    done = session(
        [query, b'{"op": "reload"}', query],
        catalog_dir=catalog_dir,
        tmp_path=tmp_path,
        home=user_home,
        config=config,
    )
    assert b"Traceback" not in done.stderr
    assert done.returncode == 0
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers[1] == {"ok": True}
    assert [m["name"] for m in answers[2]["details"]["matches"]] == ["pdf"]
    assert answers[0] == answers[2]
    assert done.stderr.decode().count(f"{config}: cannot be read as TOML") == 2


def test_bad_lines_each_get_an_error_line_and_the_session_goes_on(
    catalog_dir: Path, tmp_path: Path, user_home: Path
) -> None:
    query = json.dumps({"query": "pdf", "limit": 1}).encode()
    lines = [
        b"[" * 60_000,  # under the line cap, far over the decoder's depth
        b'{"query": ' + b"[" * 30_000 + b"]" * 30_000 + b"}",
        b"[" * 100_000,
        query,
        b"\xff\xfe",
        query,
    ]
    done = session(lines, catalog_dir=catalog_dir, tmp_path=tmp_path, home=user_home)
    assert b"Traceback" not in done.stderr
    assert done.returncode == 0
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers[0] == answers[1] == {"error": "the line is nested too deeply"}
    assert answers[2] == {"error": "a line is over 65536 bytes"}
    assert [m["name"] for m in answers[3]["details"]["matches"]] == ["pdf"]
    assert answers[4] == {"error": "each line must be one JSON object in UTF-8"}
    assert answers[5] == answers[3]
    assert len(answers) == 6
