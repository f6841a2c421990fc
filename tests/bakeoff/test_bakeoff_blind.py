"""`sift blind`: packs with nothing but rank/url/title/snippet, a 0600 key, a blank sheet,
idempotent and locked against a concurrent run."""

from __future__ import annotations

import fcntl
import json
import os
import random
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from siftlib.bakeoff.blind import write_missing
from siftlib.bakeoff.rundir import read_run
from siftlib.cli import main

from .conftest import make_run, snapshot

ROOT = Path(__file__).resolve().parents[2]
ALL = ("searxng", "searxng+brave", "searxng+brave+tavily", "tavily-direct")


def _sift(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "sift.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_packs_hold_only_the_four_hit_fields(tmp_path):
    run_dir = make_run(tmp_path / "run")
    assert main(["blind", str(run_dir)]) == 0
    key = json.loads((run_dir / "key" / "key.json").read_text())
    assert sorted(key) == ["A", "B", "C", "D"] and sorted(key.values()) == sorted(ALL)
    assert sorted(p.name for p in (run_dir / "packs").iterdir()) == [
        "A.json",
        "B.json",
        "C.json",
        "D.json",
    ]
    run = read_run(run_dir)
    for letter, config in key.items():
        text = (run_dir / "packs" / f"{letter}.json").read_text()
        pack = json.loads(text)
        assert list(pack) == ["queries"]
        # 1-based, as the queries file's lines are numbered in an editor.
        assert [q["number"] for q in pack["queries"]] == [1, 2, 3]
        for entry in pack["queries"]:
            assert list(entry) == ["number", "query", "hits"]
            assert entry["query"] == f"query number {entry['number'] - 1}"
            for hit in entry["hits"]:
                assert list(hit) == ["rank", "url", "title", "snippet"]
            # The pack is that configuration's own result list, in order.
            assert entry["hits"] == run.line(config, entry["number"] - 1).hits
        for secret in ("searxng", "brave", "tavily", "warning", "latency", "credits", "score"):
            assert secret not in text


def test_extra_fields_in_results_never_reach_a_pack(tmp_path):
    run_dir = make_run(tmp_path / "run", configs=("searxng",), queries=1)
    line = json.loads((run_dir / "results.jsonl").read_text())
    line["hits"][0].update(score=0.5, source="searxng")
    (run_dir / "results.jsonl").write_text(json.dumps(line) + "\n")
    assert main(["blind", str(run_dir)]) == 0
    hit = json.loads((run_dir / "packs" / "A.json").read_text())["queries"][0]["hits"][0]
    assert hit == {
        "rank": 1,
        "url": "https://site0.example/q0/r1",
        "title": "Title 0-0-1",
        "snippet": "Snippet 0 1",
    }


def test_the_key_is_readable_only_by_its_owner(tmp_path):
    run_dir = make_run(tmp_path / "run")
    old = os.umask(0)  # even a permissive umask must not widen the key
    try:
        assert main(["blind", str(run_dir)]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((run_dir / "key" / "key.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((run_dir / "key").stat().st_mode) == 0o700


def test_the_sheet_is_blank_one_row_per_query_and_pack(tmp_path):
    run_dir = make_run(tmp_path / "run", queries=2)
    assert main(["blind", str(run_dir)]) == 0
    assert (run_dir / "judgments.csv").read_text() == (
        "query,pack,found\n1,A,\n1,B,\n1,C,\n1,D,\n2,A,\n2,B,\n2,C,\n2,D,\n"
    )


def test_a_second_blind_leaves_every_file_byte_identical(tmp_path, capsys):
    run_dir = make_run(tmp_path / "run")
    assert main(["blind", str(run_dir)]) == 0
    before = snapshot(run_dir)
    capsys.readouterr()
    assert main(["blind", str(run_dir)]) == 0
    assert snapshot(run_dir) == before
    assert capsys.readouterr() == ("", "")  # quiet for cron


def test_a_judged_sheet_is_never_overwritten(tmp_path):
    run_dir = make_run(tmp_path / "run", queries=1)
    assert main(["blind", str(run_dir)]) == 0
    judged = "query,pack,found\n1,A,1\n1,B,0\n1,C,1\n1,D,0\n"
    (run_dir / "judgments.csv").write_text(judged)
    assert main(["blind", str(run_dir)]) == 0
    assert (run_dir / "judgments.csv").read_text() == judged


def test_a_lost_pack_is_rebuilt_from_the_key_with_the_same_bytes(tmp_path):
    run_dir = make_run(tmp_path / "run")
    assert main(["blind", str(run_dir)]) == 0
    before = snapshot(run_dir)
    (run_dir / "packs" / "B.json").unlink()
    assert main(["blind", str(run_dir)]) == 0
    assert snapshot(run_dir) == before


def test_packs_without_their_key_are_refused(tmp_path, capsys):
    run_dir = make_run(tmp_path / "run")
    assert main(["blind", str(run_dir)]) == 0
    (run_dir / "key" / "key.json").unlink()
    packs = snapshot(run_dir / "packs")
    assert main(["blind", str(run_dir)]) == 2
    assert "mapping is lost" in capsys.readouterr().err
    assert snapshot(run_dir / "packs") == packs
    assert not (run_dir / "key" / "key.json").exists()


def test_an_unfinished_run_is_refused(tmp_path, capsys):
    run_dir = make_run(tmp_path / "run")
    (run_dir / "meta.json").unlink()
    assert main(["blind", str(run_dir)]) == 2
    assert "has not finished" in capsys.readouterr().err
    assert not (run_dir / "packs").exists()


def test_a_run_missing_lines_is_refused(tmp_path, capsys):
    run_dir = make_run(tmp_path / "run", queries=2)
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    (run_dir / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    assert main(["blind", str(run_dir)]) == 2
    assert "incomplete" in capsys.readouterr().err


def test_only_configurations_that_ran_get_packs(tmp_path):
    run_dir = make_run(
        tmp_path / "run",
        configs=("searxng", "searxng+brave"),
        not_run={
            "searxng+brave+tavily": "missing key: tavily",
            "tavily-direct": "missing key: tavily",
        },
    )
    assert main(["blind", str(run_dir)]) == 0
    key = json.loads((run_dir / "key" / "key.json").read_text())
    assert sorted(key) == ["A", "B"] and sorted(key.values()) == ["searxng", "searxng+brave"]
    assert sorted(p.name for p in (run_dir / "packs").iterdir()) == ["A.json", "B.json"]


def test_a_line_skipped_at_the_ceiling_is_an_empty_list(tmp_path):
    run_dir = make_run(tmp_path / "run", skipped={("tavily-direct", 1)})
    assert main(["blind", str(run_dir)]) == 0
    key = json.loads((run_dir / "key" / "key.json").read_text())
    letter = next(x for x, c in key.items() if c == "tavily-direct")
    pack = json.loads((run_dir / "packs" / f"{letter}.json").read_text())
    assert [len(q["hits"]) for q in pack["queries"]] == [2, 0, 2]


def test_the_key_is_a_shuffle_of_the_configurations(tmp_path):
    # Over many draws from OS randomness, every configuration lands on pack A at least once.
    seen = set()
    for n in range(40):
        run_dir = make_run(tmp_path / f"run{n}", queries=1)
        assert main(["blind", str(run_dir)]) == 0
        seen.add(json.loads((run_dir / "key" / "key.json").read_text())["A"])
    assert seen == set(ALL)  # fails with probability 4 × (3/4)^40 ≈ 4e-5


def _blocked_on_flock(pid: int) -> bool:
    # /proc/locks lists a process waiting for a lock as "N: -> FLOCK ADVISORY WRITE <pid> …".
    return any(
        "->" in line and line.split()[5] == str(pid)
        for line in Path("/proc/locks").read_text().splitlines()
        if len(line.split()) > 5
    )


def test_a_second_run_waits_for_the_lock_then_finds_the_packs(tmp_path):
    run_dir = make_run(tmp_path / "run")
    fd = os.open(run_dir / ".blind.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a first run, mid-way
    try:
        second = _sift("blind", str(run_dir))
        deadline = time.monotonic() + 60
        while not _blocked_on_flock(second.pid):
            assert second.poll() is None, second.communicate()
            assert time.monotonic() < deadline, "the second run never reached the lock"
            time.sleep(0.02)
        assert not (run_dir / "packs").exists()  # it waits rather than writing
        written = write_missing(read_run(run_dir), rng=random.Random(7))  # the first run's work
        assert len(written) == 6
        before = snapshot(run_dir)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    out, err = second.communicate(timeout=60)
    assert (second.returncode, out, err) == (0, "", "")
    assert snapshot(run_dir) == before


@pytest.mark.parametrize("attempt", range(3))
def test_two_concurrent_runs_do_not_race(tmp_path, attempt):
    run_dir = make_run(tmp_path / "run", queries=30)
    first, second = _sift("blind", str(run_dir)), _sift("blind", str(run_dir))
    results = [p.communicate(timeout=60) + (p.returncode,) for p in (first, second)]
    assert [r[2] for r in results] == [0, 0], results
    assert sum(bool(r[0]) for r in results) == 1  # exactly one of them wrote the material
    key = json.loads((run_dir / "key" / "key.json").read_text())
    run = read_run(run_dir)
    for letter, config in key.items():  # the packs match the one key that exists
        pack = json.loads((run_dir / "packs" / f"{letter}.json").read_text())
        assert pack["queries"][5]["hits"] == run.line(config, 5).hits
    assert not [p for p in run_dir.rglob("*.tmp")]
