"""The official MCP Python SDK driving the real `sift mcp` process over stdio.

Each SDK line lives in its own venv (`make contract` builds `.venv-mcp2` with mcp 2.x and
`.venv-mcp1` with mcp 1.26.0, the Hermes 0.19.0 pin): a module here is collected only under
the SDK it is written for, and none under the project's own `.venv`. `sift mcp` runs from
the same venv (`<venv>/bin/sift`), over loopback fakes of SearXNG and the `testdata/`
skill catalog.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from bodykit import fixture_bytes
from gatewaykit import write_config
from pytest_httpserver import HTTPServer

from .kit import CATALOG, REPO, SIFT, GatedSearxng, Setup

try:
    SDK = version("mcp")
except PackageNotFoundError:
    SDK = ""

WRITTEN_FOR = {
    "test_sdk2.py": SDK.startswith("2."),
    "test_print_config.py": SDK.startswith("2."),
    "test_sdk126.py": SDK == "1.26.0",
}
collect_ignore = [module for module, wanted in WRITTEN_FOR.items() if not wanted]


@pytest.fixture
def setup(tmp_path: Path, httpserver: HTTPServer) -> Iterator[Setup]:
    """A SearXNG fake (held by `gate` while a query holds `slow`), a page, config and env."""
    gate = threading.Event()
    searxng = GatedSearxng(fixture_bytes("searxng/wal-typed-and-legacy.json"), gate)
    config = write_config(tmp_path, searxng=searxng.url, timeout="20s")
    page = (REPO / "testdata" / "fetch" / "docs-page.html").read_bytes()
    httpserver.expect_request("/docs").respond_with_data(page, content_type="text/html")
    pinhole = f"{httpserver.host}:{httpserver.port}"
    with config.open("a") as extra:
        extra.write(f'[fetch]\nallow = ["{pinhole}"]\n')
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "SIFT_CONFIG": str(config),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    arguments = {
        "web_search": {"query": "sqlite wal", "limit": 3},
        "web_fetch": {"url": httpserver.url_for("/docs"), "max_chars": 2000},
        "skill_search": {"query": "fill pdf form", "limit": 2},
    }
    yield Setup(SIFT, ["mcp", "--skills-dir", str(CATALOG)], env, searxng, gate, arguments)
    gate.set()
    searxng.close()
