"""`sift mcp`: an MCP server on stdio giving agents web search, page reading and skill search.

The protocol stream is the process's original stdout; file descriptor 1 is then pointed at
stderr, so nothing else (a stray print, a library's warning) can ever reach the client.
Logs go to stderr. The process exits 0 at end of input.

    {"mcpServers": {"sift": {"command": "sift", "args": ["mcp"]}}}

`sift mcp --print-config HOST` prints that entry for one agent host instead of serving
(`siftlib.mcp.hosts`): this install's `sift` by absolute path, and the options given here
(`--config`, from `$SIFT_CONFIG` too, `--server`, `--local`, `--skills-dir`, `--cwd`), paths
made absolute, since GUI hosts start servers without the shell's `PATH` or variables. Where
the text goes is said on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from siftlib import __version__
from siftlib.commands.search import add_where_arguments
from siftlib.mcp.hosts import HOSTS

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
    parser.add_argument(
        "--print-config",
        metavar="HOST",
        choices=HOSTS,
        help=f"print the MCP server entry for HOST ({', '.join(HOSTS)}) and exit",
    )


def run(args: argparse.Namespace) -> int:
    """Serve MCP on stdin/stdout until end of input; return 0."""
    if args.print_config:
        return print_config(args)
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


def print_config(args: argparse.Namespace) -> int:
    """Print the host's entry for starting this install's `sift mcp` with these options."""
    from siftlib.mcp.hosts import WHERE, Launch, render

    command = this_sift()
    if command is None:
        print("sift mcp: cannot find this install's sift command", file=sys.stderr)
        return 2
    options = ["mcp"]
    config = args.config or os.environ.get("SIFT_CONFIG")
    if config:
        options += ["--config", os.path.abspath(config)]
    if args.server:
        options += ["--server", args.server]
    if args.local:
        options.append("--local")
    for folder in args.skills_dir:
        options += ["--skills-dir", os.path.abspath(folder)]
    if args.cwd:
        options += ["--cwd", os.path.abspath(args.cwd)]
    sys.stdout.write(render(args.print_config, Launch(command[0], [*command[1:], *options])))
    print(f"sift mcp: put this in {WHERE[args.print_config]}", file=sys.stderr)
    return 0


def this_sift() -> list[str] | None:
    """Return the absolute command line of this install's `sift`, or None."""
    beside = Path(sys.executable).parent / "sift"  # the console script of this venv
    if beside.is_file():
        return [str(beside)]
    script = Path(sys.argv[0])
    if script.name == "sift.py":  # `python sift.py` from a clone
        return [sys.executable, str(script.resolve())]
    import shutil

    found = shutil.which("sift")
    return [os.path.abspath(found)] if found else None
