"""The install steps of docs/operators.md, run as written in a fresh virtual environment, offline.

The steps are read from the block marked `install-steps`; only the paths move into a
temporary directory (/opt/sift, /etc/sift), `python3` is this interpreter, and `pip install`
takes sift's runtime dependencies from `.venv/wheelhouse` (built by `make contract`) instead of
the package index, without compiling their bytecode (babel's and dateparser's data modules
alone cost seconds; the search at the end imports what it runs). `make dist` is the same
`pip wheel --no-deps` on a copy of the clone, without build isolation (which would fetch
setuptools). The fresh install then searches a fake SearXNG, so the wheel is proven to carry
everything a search needs.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest
from gatewaykit import FakeUpstream

pytestmark = pytest.mark.contract

REPO = Path(__file__).resolve().parents[2]
WHEELHOUSE = REPO / ".venv" / "wheelhouse"


def install_steps() -> list[str]:
    """Return the command lines of the `install-steps` block of docs/operators.md."""
    text = (REPO / "docs" / "operators.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- install-steps:.*?-->\n```bash\n(.*?)```", text, re.DOTALL)
    assert found, "docs/operators.md has no install-steps block"
    return [line.strip() for line in found.group(1).splitlines() if line.strip()]


def run(argv: list[str], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{shlex.join(argv)}\n{done.stdout}\n{done.stderr}"
    return done


def test_the_readme_install_steps_work_in_a_fresh_venv(
    tmp_path: Path, searxng: FakeUpstream
) -> None:
    if not WHEELHOUSE.is_dir():
        pytest.fail(f"{WHEELHOUSE} is missing: `make contract` builds it (the wheels)")
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in ("pyproject.toml", "README.md", "sift.py"):
        shutil.copy(REPO / name, clone / name)
    shutil.copytree(
        REPO / "siftlib", clone / "siftlib", ignore=shutil.ignore_patterns("__pycache__")
    )
    moved = {
        "/opt/sift": str(tmp_path / "opt" / "sift"),
        "/etc/sift": str(tmp_path / "etc" / "sift"),
    }

    steps = install_steps()
    assert steps[0] == "make dist"
    wheel = "sift-0.1.0-py3-none-any.whl"  # the name the README promises
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", "dist", "."], cwd=clone)  # fmt: skip
    assert (clone / "dist" / wheel).is_file()
    # The SPDX form of the licence: setuptools no longer prints its deprecation notice.
    with zipfile.ZipFile(clone / "dist" / wheel) as built:
        metadata = built.read("sift-0.1.0.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    outputs = []
    for step in steps[1:]:
        for old, new in moved.items():
            step = step.replace(old, new)
        argv = shlex.split(step)
        if argv[0] == "python3":
            argv[0] = sys.executable
        if argv[0].endswith("/pip") and argv[1] == "install":
            argv += ["--no-index", "--find-links", str(WHEELHOUSE), "--no-compile"]
        outputs.append(run(argv, cwd=clone).stdout)

    etc, venv_bin = Path(moved["/etc/sift"]), Path(moved["/opt/sift"]) / ".venv" / "bin"
    assert outputs[-1] == "sift 0.1.0\n"
    assert stat.S_IMODE((etc / "secret.env").stat().st_mode) == 0o600
    # The fresh install searches: every runtime dependency came with the wheel.
    config = etc / "config.toml"
    text = config.read_text().replace(
        "[search.searxng]                   # a SearXNG instance with JSON output enabled; free\n"
        "enabled = false\n"
        'url = "http://127.0.0.1:8888"',
        f'[search.searxng]\nenabled = true\nurl = "{searxng.url}"',
    )
    assert f'url = "{searxng.url}"' in text
    config.write_text(text)
    done = run(
        [str(venv_bin / "sift"), "search", "sqlite", "wal", "--config", str(config)], cwd=tmp_path
    )
    assert "https://www.sqlite.org/wal.html" in done.stdout


# What `make install`/`make test` bring and the gateway never needs (pyproject's dev and redis).
DEV_TOOLS = {
    "pytest",
    "pytest-httpserver",
    "pytest-xdist",
    "trustme",
    "ruff",
    "mypy",
    "prometheus-client",
    "redis",
}


def test_make_serve_installs_only_the_gateway_and_it_answers(tmp_path: Path) -> None:
    """`make serve` on a fresh clone, offline from the wheelhouse: the gateway, nothing else."""
    if not (WHEELHOUSE / ".done").is_file():
        pytest.fail(f"{WHEELHOUSE} is missing: `make contract` builds it (the wheels)")
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in ("pyproject.toml", "README.md", "sift.py", "Makefile"):
        shutil.copy(REPO / name, clone / name)
    shutil.copytree(
        REPO / "siftlib", clone / "siftlib", ignore=shutil.ignore_patterns("__pycache__")
    )
    config = tmp_path / "config.toml"
    config.write_text(f'[server]\nlisten = "127.0.0.1:0"\ndb = "{tmp_path / "cache.db"}"\n')
    env = {
        **os.environ,
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(WHEELHOUSE),
        # Not PIP_NO_COMPILE=1: pip reads a variable as its option's value, so that one compiles.
        "PIP_COMPILE": "0",
        "SIFT_CONFIG": str(config),
        "PYTHONUNBUFFERED": "1",
    }
    make = subprocess.Popen(
        ["make", "serve", f"PYTHON={sys.executable}"],
        cwd=clone,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert make.stderr is not None
    said: list[str] = []
    try:
        while not (found := re.search(r"listening on 127\.0\.0\.1:(\d+)", "".join(said))):
            line = make.stderr.readline()
            assert line, f"make serve ended before listening:\n{''.join(said)}"
            said.append(line)
        health = httpx.get(f"http://127.0.0.1:{found.group(1)}/healthz", trust_env=False)
        assert health.status_code == 200 and health.json()["store"] == "sqlite"
    finally:
        os.killpg(make.pid, signal.SIGTERM)
        make.wait(60)
    # What `pip list` shows, read from the same metadata without starting pip (0.7 CPU-s).
    names = "import importlib.metadata as m\nfor d in m.distributions(): print(d.name)"
    listed = run([str(clone / ".venv" / "bin" / "python"), "-I", "-c", names], cwd=clone)
    installed = {name.lower() for name in listed.stdout.split()}
    assert {"httpx", "trafilatura", "platformdirs", "sift"} <= installed
    assert installed & DEV_TOOLS == set()
