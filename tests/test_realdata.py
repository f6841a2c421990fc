"""The tests of real recorded data run when `../shared/realdata` is present and skip when not.

A clone outside this workspace has no such sibling folder; its `make test` must still pass.
Both branches run here in a child pytest, the data pointed at through `$SIFT_REALDATA`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REALDATA

REPO = Path(__file__).resolve().parent.parent
# The files holding the tests that read the real data (and so carry the `realdata` marker).
FILES = [
    "test_sources.py",
    "skills/test_rerank.py",
    "skills/test_shortlist.py",
    "skills/test_catalog.py",
    "skills/test_vocabulary.py",
]
READERS = 10


def run_realdata_tests(where: Path, basetemp: Path) -> str:
    """Run every `realdata` test in a child pytest with the data at `where`; return its report.

    The child keeps its temporary files under `basetemp`: in the shared numbered folders it
    would delete the oldest of them, whole earlier runs of the suite (seconds of rm -rf). It
    loads no plugin these tests do not use (xdist, anyio: ~0.15 CPU-s of imports each run).
    """
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-m", "realdata", "-p", "no:cacheprovider"]
        + ["-p", "no:xdist", "-p", "no:anyio", "--basetemp", str(basetemp)]
        + [f"tests/{name}" for name in FILES],
        cwd=REPO,
        env={**os.environ, "SIFT_REALDATA": str(where)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_without_the_real_data_its_tests_skip_saying_why(tmp_path: Path) -> None:
    report = run_realdata_tests(tmp_path / "absent", tmp_path / "child")
    assert f"{READERS} skipped" in report and "passed" not in report
    assert f"no real data at {tmp_path / 'absent'}" in report


def test_with_the_real_data_its_tests_run(tmp_path: Path) -> None:
    if not REALDATA.is_dir():
        pytest.skip(f"no real data at {REALDATA} (../shared/realdata beside the clone)")
    report = run_realdata_tests(REALDATA, tmp_path / "child")
    assert f"{READERS} passed" in report and "skipped" not in report
