"""`sift rerank-skills`: find the right agent skill in the local catalog.

One search per run, or a `--stdio` session answering one JSON request per line. A `Session`
holds an immutable `Snapshot` (catalog, reranking settings, API key) taken at start and at
each `{"op": "reload"}`. Its `search` returns the keyword result, or, once a `reranker` is
plugged in and the user has opted in with a key set, whatever the reranker decides from that
keyword baseline. Requests in a session are answered concurrently by a small thread pool;
answers are written whole, one per line, in request order (the lines carry no IDs, so order
is how a client pairs them).

Diagnostics (shadowed skills, ignored or invalid config) go to stderr; stdout carries only
results. Tool errors exit 2, with `{"error": …}` on stdout under `--json` and `--stdio`.

    $ sift rerank-skills "fill in a pdf form" --limit 3 --json
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from siftlib.config import resolve_config_path
from siftlib.skills.catalog import Catalog, discover
from siftlib.skills.consent import RerankSettings, api_key, load_settings
from siftlib.skills.keyword import (
    DEFAULT_LIMIT,
    SkillResult,
    ToolError,
    check_limit,
    keyword_search,
    query_terms,
)

if TYPE_CHECKING:
    from concurrent.futures import Future

NO_MATCH_TEXT = "No matching skills found."
_DIGITS = re.compile(r"[0-9]+")
_WORKERS = 4

EXAMPLES = """\
examples:
  sift rerank-skills "fill in a pdf form"
  sift rerank-skills "debug a failing test" --limit 3 --json --skills-dir ./skills
  echo '{"query": "make slides", "limit": 2}' | sift rerank-skills --stdio
"""


@dataclass(frozen=True)
class Snapshot:
    """What one session searches with: fixed at session start and replaced on reload."""

    catalog: Catalog
    settings: RerankSettings
    key: str | None = field(default=None, repr=False)


class Reranker(Protocol):
    """Reorders the keyword baseline with the provider (spec §6–§8), or returns it unchanged."""

    def search(
        self, catalog: Catalog, query: str, limit: int, baseline: SkillResult
    ) -> SkillResult: ...

    def close(self) -> None: ...


class Session:
    """A search session over one immutable snapshot."""

    def __init__(self, snapshot: Snapshot, *, reranker: Reranker | None = None) -> None:
        self.snapshot = snapshot
        self.reranker = reranker

    @classmethod
    def open(
        cls,
        *,
        config_path: Path,
        skills_dirs: Sequence[Path],
        cwd: Path,
        home: Path | None = None,
    ) -> tuple[Session, list[str]]:
        """Read config and catalog; return the new session and its diagnostics."""
        settings, diagnostics = load_settings(config_path, cwd=cwd)
        catalog = discover(skills_dirs=skills_dirs, cwd=cwd, home=home)
        catalog.texts  # noqa: B018 - build the search index now, not in the first search
        snapshot = Snapshot(catalog=catalog, settings=settings, key=api_key(settings))
        reranker = None
        if settings.enabled and snapshot.key:
            # Imported only when opted in; the provider client itself is created lazily.
            from siftlib.skills.rerank import Reranker as SystemOneReranker

            reranker = SystemOneReranker(settings, snapshot.key)
        return cls(snapshot, reranker=reranker), [*catalog.diagnostics, *diagnostics]

    def search(self, query: str, limit: int) -> SkillResult:
        """Return the result for `query`: keyword order unless the reranker decides."""
        baseline = keyword_search(self.snapshot.catalog, query, limit)
        snapshot = self.snapshot
        if self.reranker is not None and snapshot.settings.enabled and snapshot.key:
            return self.reranker.search(snapshot.catalog, query, limit, baseline)
        return baseline

    def close(self) -> None:
        """End the session: outstanding reranking work is aborted."""
        if self.reranker is not None:
            self.reranker.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of `sift rerank-skills`."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EXAMPLES
    parser.add_argument("query", nargs="*", help="what the skill should do (or `eval`)")
    parser.add_argument("--limit", metavar="N", help="matches to return, 1-20 (default 5)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument(
        "--skills-dir",
        metavar="DIR",
        action="append",
        default=[],
        help="a skills folder searched first (repeatable)",
    )
    parser.add_argument("--cwd", metavar="DIR", help="project folder (default: working directory)")
    parser.add_argument("--stdio", action="store_true", help="answer JSON requests, one per line")
    parser.add_argument("--fixtures", metavar="FILE", help="eval: labelled queries, one per line")
    parser.add_argument("--max-requests", metavar="N", help="eval: ceiling on provider requests")


def run(args: argparse.Namespace) -> int:
    """Run one search, a `--stdio` session, or the `eval` mode."""
    if args.query[:1] == ["eval"]:
        return _run_eval(args)
    cwd = Path(os.path.abspath(args.cwd or os.getcwd()))
    if not os.path.isdir(cwd):
        return _tool_error(args, f"--cwd {cwd} is not a directory")

    def open_session() -> tuple[Session, list[str]]:
        return Session.open(
            config_path=resolve_config_path(args.config),
            skills_dirs=[Path(d) for d in args.skills_dir],
            cwd=cwd,
        )

    if args.stdio:
        if args.query:
            sys.stderr.write("sift rerank-skills: --stdio takes its queries from stdin\n")
            return 2
        return serve_stdio(open_session, sys.stdin.buffer, sys.stdout)
    query = " ".join(args.query)
    try:
        limit = parse_limit(args.limit)
        if not query_terms(query):
            raise ToolError("the query has no search terms (letters or digits)")
    except ToolError as exc:
        return _tool_error(args, str(exc))
    session, diagnostics = open_session()
    _warn(diagnostics)
    try:
        result = session.search(query, limit)
    finally:
        session.close()
    print(json.dumps(render_json(result)) if args.json else render_text(result))
    return 0


def parse_limit(text: str | None) -> int:
    """Return the `--limit` value as an integer from 1 to 20; raise `ToolError` otherwise."""
    if text is None:
        return DEFAULT_LIMIT
    if not _DIGITS.fullmatch(text.strip()):
        raise ToolError("limit must be an integer from 1 to 20")
    return check_limit(int(text))


def render_text(result: SkillResult) -> str:
    """Return the result as text for an agent: each match, where it is and what to read."""
    if not result.matches:
        return NO_MATCH_TEXT
    shown = len(result.matches)
    lines = [
        f"Found {result.total} matching skill{'s' if result.total != 1 else ''}"
        + (f", showing the best {shown}" if shown < result.total else "")
        + ". Read the SKILL.md of the skill that fits before using it;"
        " relative paths inside it resolve against its base directory."
    ]
    for number, skill in enumerate(result.matches, 1):
        lines += [
            "",
            f"{number}. {skill.name}: {skill.description}",
            f"   Read: {skill.file_path}",
            f"   Base directory: {skill.base_dir}",
        ]
    return "\n".join(lines)


def render_json(result: SkillResult) -> dict[str, Any]:
    """Return the result in the tool-result shape of spec §1."""
    return {
        "content": [{"type": "text", "text": render_text(result)}],
        "details": {
            "matches": [
                {
                    "name": skill.name,
                    "description": skill.description,
                    "filePath": str(skill.file_path),
                    "baseDir": str(skill.base_dir),
                }
                for skill in result.matches
            ],
            "total": result.total,
        },
    }


def serve_stdio(
    open_session: Callable[[], tuple[Session, list[str]]],
    stdin: IO[bytes],
    stdout: IO[str],
) -> int:
    """Answer JSON request lines until EOF; each answer is one whole line, in request order."""
    # Imported here: one-shot searches never pay for the thread pool.
    import queue
    import threading
    from concurrent.futures import ThreadPoolExecutor

    session, diagnostics = open_session()
    _warn(diagnostics)
    answers: queue.Queue[Future[dict[str, Any]] | None] = queue.Queue()

    def write_answers() -> None:
        while (answer := answers.get()) is not None:
            stdout.write(json.dumps(answer.result()) + "\n")
            stdout.flush()

    writer = threading.Thread(target=write_answers, name="rerank-skills-writer", daemon=True)
    writer.start()
    try:
        with ThreadPoolExecutor(_WORKERS, thread_name_prefix="rerank-skills") as pool:
            for raw in stdin:
                if not raw.strip():
                    continue
                try:
                    request = _parse_request(raw)
                except ToolError as exc:
                    answers.put(_done({"error": str(exc)}))
                    continue
                if request is None:
                    previous, (session, diagnostics) = session, open_session()
                    previous.close()
                    _warn(diagnostics)
                    answers.put(_done({"ok": True}))
                else:
                    answers.put(pool.submit(_answer, session, *request))
    finally:
        answers.put(None)
        writer.join()
        session.close()
    return 0


def _parse_request(raw: bytes) -> tuple[str, int] | None:
    """Return a line's (query, limit), or None for a reload; raise `ToolError` if it is bad."""
    try:
        request = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ToolError("each line must be one JSON object in UTF-8") from None
    if not isinstance(request, dict):
        raise ToolError("each line must be one JSON object in UTF-8")
    if "op" in request:
        if request["op"] != "reload":
            raise ToolError('the only op is "reload"')
        return None
    query = request.get("query")
    if not isinstance(query, str):
        raise ToolError('a request needs a "query" string (or "op": "reload")')
    return query, check_limit(request.get("limit", DEFAULT_LIMIT))


def _answer(session: Session, query: str, limit: int) -> dict[str, Any]:
    try:
        return render_json(session.search(query, limit))
    except ToolError as exc:
        return {"error": str(exc)}
    except Exception as exc:  # one failed answer must not end the session
        return {"error": f"search failed ({type(exc).__name__})"}


def _done(answer: dict[str, Any]) -> Future[dict[str, Any]]:
    from concurrent.futures import Future

    future: Future[dict[str, Any]] = Future()
    future.set_result(answer)
    return future


def _run_eval(args: argparse.Namespace) -> int:
    """Hand `sift rerank-skills eval` to the evaluation module."""
    try:
        module = importlib.import_module("siftlib.skills.eval")
    except ModuleNotFoundError as exc:
        if exc.name != "siftlib.skills.eval":
            raise
        sys.stderr.write("sift rerank-skills: eval is not available in this version\n")
        return 2
    code: int = module.run_eval(args)
    return code


def _tool_error(args: argparse.Namespace, message: str) -> int:
    if args.json:
        print(json.dumps({"error": message}))
    else:
        sys.stderr.write(f"sift rerank-skills: {message}\n")
    return 2


def _warn(diagnostics: Sequence[str]) -> None:
    for diagnostic in diagnostics:
        sys.stderr.write(f"sift rerank-skills: {diagnostic}\n")
