"""Test kit: a real SearXNG on loopback, run from `make searxng`'s venv with deploy/'s settings.

    with real_searxng(tmp_path, engine_url=page.url) as instance:
        httpx.get(f"{instance.url}/search", params={"q": "wal", "format": "json"})

SearXNG is installed from the source tarball in `../shared/vendor/` (it is not on PyPI) into
`.venv-searxng/` by `make searxng`, which `make test` runs. The settings are
`deploy/searxng/settings.yml` exactly as shipped, with one change a test makes to any
instance: its engines are only `sift-loopback`, SearXNG's generic `json_engine` reading a
loopback page the test serves (no test reaches the internet). The port comes from
`SEARXNG_PORT`, which SearXNG reads over the file's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from gatewaykit import free_port

REPO = Path(__file__).resolve().parent.parent
VENDOR = REPO.parent / "shared" / "vendor"
VENV = REPO / ".venv-searxng"
SETTINGS = REPO / "deploy" / "searxng" / "settings.yml"
ENGINE = "sift-loopback"

# The test's engine, in place of SearXNG's default (internet) engines.
_ENGINE_OVERRIDE = """\
use_default_settings:
  engines:
    keep_only: [{name}]

engines:
  - name: {name}
    engine: json_engine
    shortcut: sl
    categories: [general]
    search_url: {url}/?q={{query}}
    results_query: items
    url_query: link
    title_query: name
    content_query: text
    enable_http: true          # a loopback page; SearXNG engines speak https only by default
    timeout: 5.0
"""


def page_body(count: int) -> bytes:
    """Return the loopback engine's JSON page: `count` items, best first."""
    items = [
        {
            "link": f"https://docs.example.org/wal/{i}",
            "name": f"WAL page {i}",
            "text": f"About write-ahead logging, part {i}.",
        }
        for i in range(count)
    ]
    return json.dumps({"items": items}).encode()


def require_searxng() -> None:
    """Skip when the vendored tarball is absent; fail when it is there but not installed."""
    if not any(VENDOR.glob("searxng-*.tar.gz")):
        pytest.skip(f"no SearXNG source tarball in {VENDOR} (../shared/vendor beside the clone)")
    if not (VENV / ".installed").is_file():
        pytest.fail(f"{VENV} is not built: `make searxng` (run by `make test`) installs it")


def settings_text(engine_url: str, *, edit: Callable[[str], str] = lambda text: text) -> str:
    """Return deploy/'s settings with the test engine swapped in (and `edit` applied)."""
    text = SETTINGS.read_text(encoding="utf-8")
    assert text.count("use_default_settings: true\n") == 1, "deploy settings changed shape"
    override = _ENGINE_OVERRIDE.format(name=ENGINE, url=engine_url)
    return edit(text.replace("use_default_settings: true\n", "") + "\n" + override)


@dataclass
class Instance:
    """A running SearXNG: where it answers and what it logged."""

    url: str
    log: Path


@contextmanager
def real_searxng(
    directory: Path,
    *,
    engine_url: str,
    edit: Callable[[str], str] = lambda text: text,
    argv: Callable[[int], list[str]] | None = None,
) -> Iterator[Instance]:
    """Start SearXNG with deploy/'s settings on a free loopback port; stop it by pid after.

    `argv(port)` is the command line (default: `python -m searx.webapp`, which reads the
    port from `SEARXNG_PORT`), run in the unpacked source with the venv's `bin` on `PATH`.
    """
    require_searxng()
    directory.mkdir(parents=True, exist_ok=True)
    settings = directory / "settings.yml"
    settings.write_text(settings_text(engine_url, edit=edit), encoding="utf-8")
    port = free_port()
    command = argv(port) if argv else [str(VENV / "bin" / "python"), "-m", "searx.webapp"]
    log = directory / "searxng.log"
    env = {
        "PATH": f"{VENV / 'bin'}:{os.environ.get('PATH', '')}",
        "HOME": str(directory),
        "SEARXNG_SETTINGS_PATH": str(settings),
        "SEARXNG_PORT": str(port),
        # Where SearXNG keeps its engine and favicon caches (else /tmp, shared by every run).
        "TMPDIR": str(directory),
    }
    with log.open("w") as out:
        proc = subprocess.Popen(
            command,
            cwd=VENV / "src",
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(proc, url, log)
        yield Instance(url, log)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    """Poll /healthz until SearXNG answers, with one client (each new one loads the CA file)."""
    deadline = time.monotonic() + 90
    with httpx.Client(trust_env=False, timeout=2) as client:
        while True:
            assert proc.poll() is None, f"SearXNG exited {proc.returncode}:\n{log.read_text()}"
            try:
                if client.get(f"{url}/healthz").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"SearXNG did not answer:\n{log.read_text()}"
            time.sleep(0.2)
