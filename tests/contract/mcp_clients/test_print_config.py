"""`sift mcp --print-config HOST`: each host's entry, parsed, starts a server the SDK can use.

For every host the printed text is parsed as that host parses it (JSON, or YAML for Hermes),
its `sift` entry is started exactly as written, with no `PATH` and no sift variable in the
environment (as a GUI host starts it), and mcp 2.x's `Client` lists the tools and searches.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import StdioServerParameters
from mcp.client import Client

from .kit import CATALOG, SIFT, Setup

pytestmark = pytest.mark.contract

HOSTS = ["claude-desktop", "claude-code", "cursor", "vscode", "hermes"]


def entry(host: str, printed: str) -> dict[str, Any]:
    """Return the `sift` server entry from a host's config text."""
    if host == "hermes":
        found: dict[str, Any] = yaml.safe_load(printed)["mcp_servers"]["sift"]
        return found
    parsed = json.loads(printed)
    return dict(parsed["servers" if host == "vscode" else "mcpServers"]["sift"])


@pytest.mark.parametrize("host", HOSTS)
def test_each_printed_config_starts_sift_mcp_as_it_says(
    setup: Setup, host: str, tmp_path: Path
) -> None:
    printed = subprocess.run(
        [SIFT, "mcp", "--print-config", host, "--skills-dir", str(CATALOG)],
        env=setup.env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert printed.stderr.startswith("sift mcp: put this in ")
    server = entry(host, printed.stdout)
    assert server["command"] == SIFT and os.path.isabs(server["command"])
    config = setup.env["SIFT_CONFIG"]
    assert server["args"] == ["mcp", "--config", config, "--skills-dir", str(CATALOG)]
    if host in ("claude-code", "vscode"):
        assert server["type"] == "stdio"
    # A GUI host: no shell PATH, no $SIFT_CONFIG; only what the entry says (and a home).
    bare = {"HOME": str(tmp_path), "XDG_STATE_HOME": setup.env["XDG_STATE_HOME"]}
    launched = StdioServerParameters(
        command=server["command"], args=server["args"], env={**bare, **server.get("env", {})}
    )

    async def session() -> tuple[set[str], Any]:
        async with Client(launched, mode="legacy") as mcp:
            listed = await mcp.list_tools()
            found = await mcp.call_tool("web_search", {"query": "sqlite wal", "limit": 2})
            return {tool.name for tool in listed.tools}, found

    names, found = anyio.run(session)
    assert names == {"web_search", "web_fetch", "skill_search"}
    assert found.is_error is False
    assert len(found.structured_content["results"]) == 2
    assert len(setup.searxng.calls) == 1
