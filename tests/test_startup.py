"""What the commands agents run most import: a cache hit needs no HTTP client.

Nor `logging`, `dataclasses` (with `inspect`), `concurrent.futures`, `shutil` or
`platformdirs`: each was a visible part of `sift search` start-up, and a hit logs nothing
anyone is shown, defines no dataclass, calls no source, lays out no help and finds its
config in the XDG directories without platformdirs (`tests/bench/bench_startup.py`
measures the time).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bodykit import fixture_bytes
from pytest_httpserver import HTTPServer

PROBE = """
import sys
from siftlib.cli import main
code = main(sys.argv[1:])
heavy = ("httpx", "siftlib.net.dial", "siftlib.gateway.server", "logging", "dataclasses", "inspect",
         "concurrent.futures", "shutil", "platformdirs", "siftlib.fetch.guard")
print("loaded:", ",".join(m for m in heavy if m in sys.modules))
sys.exit(code)
"""


def search(config: Path | None, *extra: str) -> subprocess.CompletedProcess[str]:
    where = ["--config", str(config)] if config is not None else []
    argv = [sys.executable, "-c", PROBE, "search", "--local", *where, *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def write_config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[server]\ndb = "{tmp_path / "server.db"}"\nsecret_env = "{tmp_path / "secret.env"}"\n'
        f'[search.searxng]\nenabled = true\nurl = "{url}"\n'
    )
    (tmp_path / "secret.env").write_text("")
    (tmp_path / "secret.env").chmod(0o600)
    return path


def serve_searxng(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/search").respond_with_data(
        fixture_bytes("searxng/wal-typed-and-legacy.json"),
        content_type="application/json",
    )


def test_a_cache_hit_imports_no_http_client_and_a_miss_does(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    serve_searxng(httpserver)
    config = write_config(tmp_path, httpserver.url_for("/").rstrip("/"))
    miss = search(config, "sqlite wal mode")
    assert miss.returncode == 0, miss.stderr
    assert "loaded: httpx,siftlib.net.dial,logging," in miss.stdout
    hit = search(config, "sqlite wal mode")
    assert hit.returncode == 0, hit.stderr
    assert hit.stdout.endswith("loaded: \n")
    assert hit.stdout.split("loaded:")[0] == miss.stdout.split("loaded:")[0]
    assert len(httpserver.log) == 1


def test_a_pinhole_in_the_config_costs_a_cache_hit_no_import(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    serve_searxng(httpserver)
    config = write_config(tmp_path, httpserver.url_for("/").rstrip("/"))
    config.write_text(config.read_text() + '[fetch]\nallow = ["127.0.0.1:8080", "[::1]:9"]\n')
    assert search(config, "sqlite wal mode").returncode == 0
    hit = search(config, "sqlite wal mode")
    assert (hit.returncode, hit.stderr) == (0, "")
    assert hit.stdout.endswith("loaded: \n")
    assert len(httpserver.log) == 1


def test_a_cache_hit_with_the_config_in_the_user_config_dir_loads_none_either(
    httpserver: HTTPServer,
) -> None:
    serve_searxng(httpserver)
    home = Path(os.environ["XDG_CONFIG_HOME"]) / "sift"  # a temp dir (conftest.py)
    home.mkdir(parents=True)
    url = httpserver.url_for("/").rstrip("/")
    (home / "config.toml").write_text(f'[search.searxng]\nenabled = true\nurl = "{url}"\n')
    assert search(None, "sqlite wal mode").returncode == 0
    hit = search(None, "sqlite wal mode")
    assert (hit.returncode, hit.stderr) == (0, "")
    assert hit.stdout.startswith("Write-Ahead Logging\n")
    assert hit.stdout.endswith("loaded: \n")
    assert len(httpserver.log) == 1
    assert (Path(os.environ["XDG_STATE_HOME"]) / "sift" / "cache.db").exists()


def test_an_unresolvable_source_is_still_named_when_its_client_opens_late(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, "http://sift-test.invalid")
    result = search(config, "sqlite wal mode", "--allow-private-upstreams")
    assert result.returncode == 1
    assert "searxng: dns failed" in result.stderr


def test_the_console_script_freezes_what_start_up_built_before_the_process_ends() -> None:
    probe = (
        "import gc, sys\n"
        "from siftlib.cli import run\n"
        "code = run()\n"
        "print('frozen:', gc.get_freeze_count() > 1000)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "--version"], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.splitlines()[-1]) == (0, "frozen: True")
