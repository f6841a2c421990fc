"""`sift mcp`: an MCP server on stdio giving agents web search, page reading and skill search.

The protocol stream is the process's original stdout; file descriptor 1 is then pointed at
stderr, so nothing else (a stray print, a library's warning) can ever reach the client.
Logs go to stderr. The process exits 0 at end of input.

    {"mcpServers": {"sift": {"command": "sift", "args": ["mcp"]}}}
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from siftlib import __version__
from siftlib.commands.search import add_where_arguments

INSTRUCTIONS = (
    "sift is the user's own web-search gateway and skill catalog. Use web_search first for "
    "anything on the web, web_fetch to read a page it found, and skill_search to find a "
    "skill for a task."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of `sift mcp`."""
    parser.epilog = 'example: {"mcpServers": {"sift": {"command": "sift", "args": ["mcp"]}}}'
    add_where_arguments(parser)
    parser.add_argument(
        "--skills-dir",
        metavar="DIR",
        action="append",
        default=[],
        help="a skills folder searched first (repeatable)",
    )
    parser.add_argument("--cwd", metavar="DIR", help="project folder (default: working directory)")


def run(args: argparse.Namespace) -> int:
    """Serve MCP on stdin/stdout until end of input; return 0."""
    from siftlib.logs import configure_logging
    from siftlib.mcp.protocol import Server, ServerInfo
    from siftlib.mcp.tools import SkillsPlace, Toolbox, Where

    protocol_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    configure_logging()
    cwd = Path(os.path.abspath(args.cwd or os.getcwd()))
    toolbox = Toolbox(
        Where(
            config=args.config,
            server=args.server,
            local=args.local,
            allow_private_upstreams=args.allow_private_upstreams,
        ),
        skills=SkillsPlace(
            skills_dirs=tuple(Path(d) for d in args.skills_dir),
            cwd=cwd,
        ),
    )
    info = ServerInfo(name="sift", title="sift", version=__version__, instructions=INSTRUCTIONS)
    try:
        return Server(toolbox.tools, info=info).serve(sys.stdin.buffer, protocol_out)
    finally:
        toolbox.close()
        with contextlib.suppress(BrokenPipeError):  # a client that stopped reading
            protocol_out.close()
