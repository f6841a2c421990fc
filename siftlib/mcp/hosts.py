"""The MCP server entry each agent host reads, for `sift mcp --print-config HOST`.

    print(render("cursor", Launch("/opt/sift/.venv/bin/sift", ["mcp"])))

GUI hosts (Claude Desktop, Cursor, VS Code) start servers without the login shell's `PATH`
or variables, so the entry names the command by its absolute path and carries every option
(`--config` included, from `$SIFT_CONFIG` when that is what chose the file) in `args`. Each
host's shape, and the file it goes in:

| host | file | shape |
| --- | --- | --- |
| claude-desktop | `claude_desktop_config.json` | `mcpServers.sift: {command, args}` |
| claude-code | `.mcp.json` (project) | `mcpServers.sift: {type: stdio, command, args, env}` |
| cursor | `~/.cursor/mcp.json`, `.cursor/mcp.json` | `mcpServers.sift: {command, args}` |
| vscode | `.vscode/mcp.json` | `servers.sift: {type: stdio, command, args}` |
| hermes | `~/.hermes/config.yaml` | `mcp_servers.sift: {command, args}` (YAML) |

The YAML is written with JSON-quoted strings, which YAML reads as its own double-quoted
scalars, so no YAML library is needed to write it.
"""

from __future__ import annotations

import json
from typing import NamedTuple


class Launch(NamedTuple):
    """How a host starts `sift mcp`: an absolute command and its arguments."""

    command: str
    args: list[str]


# Where each host reads its servers from, said beside the printed entry.
WHERE = {
    "claude-desktop": "claude_desktop_config.json (macOS: ~/Library/Application Support/Claude/, "
    "Windows: %APPDATA%\\Claude\\), merged into its mcpServers; then restart Claude Desktop",
    "claude-code": ".mcp.json at the project root "
    "(or: claude mcp add-json sift '<the sift entry>')",
    "cursor": "~/.cursor/mcp.json (every project) or .cursor/mcp.json (this one)",
    "vscode": ".vscode/mcp.json in the workspace (or the user one: MCP: Open User Configuration)",
    "hermes": "~/.hermes/config.yaml, under mcp_servers",
}
HOSTS = tuple(WHERE)


def render(host: str, launch: Launch) -> str:
    """Return the config text `host` reads to start sift's MCP server as `launch` says."""
    if host == "hermes":
        return (
            "mcp_servers:\n  sift:\n"
            f"    command: {json.dumps(launch.command)}\n"
            f"    args: {json.dumps(launch.args)}\n"
        )
    entry: dict[str, object] = {"command": launch.command, "args": launch.args}
    if host == "claude-code":
        entry = {"type": "stdio", **entry, "env": {}}
    elif host == "vscode":
        entry = {"type": "stdio", **entry}
    key = "servers" if host == "vscode" else "mcpServers"
    return json.dumps({key: {"sift": entry}}, indent=2) + "\n"
