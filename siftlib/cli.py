"""The `sift` command: dispatch to a subcommand module before importing it.

Each subcommand module offers `add_arguments(parser)` and `run(args) -> int`. Only the
chosen module is imported, so `sift search` never pays for the server or the bake-off. A
two-word name (`rerank-skills eval`) is a command of its own, chosen by its first two words.

Two rules hold for every command, so they live here: a config file named by `--config` or
`$SIFT_CONFIG` must exist (only the default path may be missing), and under `--json` every
failure, a usage error included, prints `{"error": "…"}` on stdout as well as the sentence
on stderr.

Start-up is measured (`tests/bench/bench_startup.py`): an agent pays it on every command it
shells out to. `sift search` answering from the cache imports what the hit needs (the config
with `tomllib`, the store with `sqlite3`, `hashlib` and `json`, argparse) and nothing else,
and `tests/test_startup.py` holds it to that. Hence, across the modules a hit loads: records
are `NamedTuple`s, not dataclasses (defining a frozen dataclass costs a millisecond or two,
importing `dataclasses` ten); loggers are `siftlib.lazylog.LazyLogger`s, which import
`logging` only for a record that can be shown; httpx, the dialer and the worker pool start
with the first source call.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from typing import NoReturn

from siftlib import __version__

COMMANDS = {
    "init": ("siftlib.commands.init", "write a commented config.toml and a secret.env template"),
    "search": ("siftlib.commands.search", "one web search; prints the fused hits"),
    "fetch": ("siftlib.commands.fetch", "read one web page as clean markdown, through the guard"),
    "serve": ("siftlib.commands.serve", "the HTTP gateway (native and Firecrawl-compatible API)"),
    "rerank-skills": (
        "siftlib.commands.rerank_skills",
        "find the right agent skill in the local catalog",
    ),
    "rerank-skills eval": (
        "siftlib.commands.rerank_skills_eval",
        "measure skill search on labelled queries",
    ),
    "mcp": ("siftlib.commands.mcp", "an MCP server on stdio: web_search, web_fetch, skill_search"),
    "bakeoff": ("siftlib.commands.bakeoff", "compare source configurations on real queries"),
    "blind": ("siftlib.commands.blind", "write blind judging packs for a bake-off run"),
}

USAGE = "usage: sift [--version] <command> [<args>]\n\ncommands:\n" + "".join(
    f"  {name:<20}{summary}\n" for name, (_, summary) in COMMANDS.items()
)


def main(argv: list[str] | None = None) -> int:
    """Run one sift command and return its exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        (sys.stdout if argv else sys.stderr).write(USAGE)
        return 0 if argv else 2
    if argv[0] == "--version":
        print(f"sift {__version__}")
        return 0
    name = argv[0]
    if len(argv) > 1 and f"{name} {argv[1]}" in COMMANDS:
        name, argv = f"{name} {argv[1]}", argv[1:]
    if name not in COMMANDS or " " in argv[0]:
        sys.stderr.write(f"sift: unknown command {name!r}\n\n{USAGE}")
        return 2
    module_name, summary = COMMANDS[name]
    module = importlib.import_module(module_name)
    as_json = "--json" in argv
    parser = _parser_class(as_json)(
        prog=f"sift {name}", description=summary, formatter_class=_Formatter
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="config file (default: $SIFT_CONFIG, then the user config dir)",
    )
    module.add_arguments(parser)
    args = parser.parse_args(argv[1:])
    if name != "init":  # init writes the file --config names
        from siftlib.commands import fail
        from siftlib.config import resolve_config_path
        from siftlib.errors import ConfigError

        try:
            resolve_config_path(args.config)
        except ConfigError as exc:
            return fail(f"sift {name}", exc, 2, as_json=as_json)
    code: int = module.run(args)
    return code


class _Formatter(argparse.HelpFormatter):
    """argparse's help layout, told the terminal width so that it need not import `shutil`.

    argparse builds a formatter for every argument declared, and without a width each one
    asks `shutil.get_terminal_size`: importing `shutil` (with `bz2`, `lzma` and `fnmatch`)
    for that was a visible part of `sift search` start-up.
    """

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_terminal_columns() - 2)  # the 2 argparse keeps free


def _terminal_columns() -> int:
    """Return the width help is laid out to: `$COLUMNS`, else stdout's terminal, else 80."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):  # no stdout, or not a terminal
        return 80


def run() -> int:
    """Run the `sift` console script: `main`, then leave without the final collections."""
    code = main()
    # The process exits next, and what start-up built (modules, classes, parsers) is still
    # referenced: frozen, it is skipped by the garbage collections the interpreter runs on
    # its way out instead of walked object by object, several milliseconds of a cached
    # `sift search` (tests/bench/bench_startup.py). Not in `main`, which tests call in-process.
    gc.freeze()
    return code


def _parser_class(as_json: bool) -> type[argparse.ArgumentParser]:
    """Return an argument parser class whose usage errors also speak JSON under `--json`."""

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            if as_json:
                from siftlib.commands import print_json_error

                print_json_error(message)
            super().error(message)

    return Parser
