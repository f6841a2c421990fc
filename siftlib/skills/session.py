"""A skill-search session: one immutable snapshot searched, and the `--stdio` loop around it.

A `Session` holds a `Snapshot` (catalog, reranking settings, API key, configured mode) taken at
start and at each `{"op": "reload"}`. Its `search` returns, in this order of precedence: the
keyword baseline when the search asks for `keyword` mode; whatever the `Reranker` decides from
the keyword baseline once the user has opted in with a key set; the local ranking in `local`
mode (the search's own, else the configured one, spec §10); else the keyword result. In
`serve_stdio`, requests are answered concurrently by a small thread pool; answers are written
whole, one per line, in request order (the lines carry no IDs, so order is how a client pairs
them). A bad line gets an `{"error": …}` line and the session goes on: one that is not a JSON
object (nesting too deep for the decoder included), and one over `MAX_LINE_BYTES` (64 KiB, the
gateway's body cap), which is skipped to its end unread, so a line of unbounded length never
sits whole in memory.

Opted-in reranking that does not decide a search says why, in the result's `fallback`:
`missing_key` (no `TYPESAFE_API_KEY`; also a diagnostic at session start), `uncertain`, or the
reason of the skip or failure (`timeout`, `server_error`, `exact_name`, …). The first failed
provider call of a session is also said once through `notify` (stderr for the CLI), so a
broken provider is not mistaken for a poor ranking. The reason comes from the reranker's
observer, called on the searching thread before `search` returns.

    session, diagnostics = Session.open(config_path=path, skills_dirs=[], cwd=Path.cwd())
    result = session.search("fill in a pdf form", 5, mode="local")
    session.close()
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from siftlib.errors import ToolError
from siftlib.skills.answer import render_json
from siftlib.skills.catalog import Catalog, discover
from siftlib.skills.consent import RerankSettings, api_key, load_settings
from siftlib.skills.keyword import (
    DEFAULT_LIMIT,
    KeywordIndex,
    SkillResult,
    check_limit,
    keyword_search,
)
from siftlib.skills.local import local_search
from siftlib.skills.mode import DEFAULT_MODE, check_mode, configured_mode

if TYPE_CHECKING:
    from concurrent.futures import Future

_WORKERS = 4
MAX_LINE_BYTES = 64 * 1024


@dataclass(frozen=True)
class Snapshot:
    """What one session searches with: fixed at session start and replaced on reload."""

    catalog: Catalog
    settings: RerankSettings
    key: str | None = field(default=None, repr=False)
    mode: str = DEFAULT_MODE


class Reranker(Protocol):
    """Reorders the keyword baseline (spec §6–§8), or returns it unchanged."""

    def search(
        self,
        catalog: Catalog,
        query: str,
        limit: int,
        baseline: SkillResult,
        *,
        cancel: threading.Event | None = None,
    ) -> SkillResult: ...

    def close(self) -> None: ...


class Session:
    """A search session over one immutable snapshot."""

    def __init__(
        self,
        snapshot: Snapshot,
        *,
        reranker: Reranker | None = None,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.reranker = reranker
        self._notify = notify
        self._failure_said = threading.Event()
        self._last = threading.local()  # this thread's last reranking decision

    @classmethod
    def open(
        cls,
        *,
        config_path: Path,
        skills_dirs: Sequence[Path],
        cwd: Path,
        home: Path | None = None,
        mode: str | None = None,
        notify: Callable[[str], None] | None = None,
    ) -> tuple[Session, list[str]]:
        """Read config and catalog and build the indexes the session's searches will use.

        `mode` is the mode searches ask for when the caller knows it (a one-shot's `--mode`);
        else the configured one decides. The indexes are built here, at session start and at
        each reload, so that no search, and no provider deadline (§8), pays for them.
        """
        settings, diagnostics = load_settings(config_path, cwd=cwd)
        configured, mode_diagnostics = configured_mode(
            config_path, cwd=cwd, reranking=settings.enabled
        )
        catalog = discover(skills_dirs=skills_dirs, cwd=cwd, home=home)
        snapshot = Snapshot(
            catalog=catalog, settings=settings, key=api_key(settings), mode=configured
        )
        opted_in = settings.enabled and bool(snapshot.key)
        KeywordIndex.of(catalog)  # every mode computes the keyword result or falls back to it
        if (mode or configured) == "local" or (opted_in and mode != "keyword"):
            # Local mode ranks with it; reranking's shortlist draws its concept stream from it.
            from siftlib.skills.relevance import RelevanceIndex

            RelevanceIndex.of(catalog)
        session = cls(snapshot, notify=notify)
        if settings.enabled and snapshot.key:
            # Imported only when opted in; the client is set up now, its connection on a send.
            from siftlib.skills.rerank import SystemOneReranker

            reranker = SystemOneReranker(settings, snapshot.key, observers=[session._observe])
            reranker.prepare()
            session.reranker = reranker
        elif settings.enabled:
            diagnostics.append(
                f"{config_path}: reranking is enabled but TYPESAFE_API_KEY is not set;"
                f" searching with {configured} ranking instead"
            )
        diagnostics += mode_diagnostics
        return session, [*catalog.diagnostics, *diagnostics]

    def search(
        self,
        query: str,
        limit: int,
        *,
        mode: str | None = None,
        cancel: threading.Event | None = None,
    ) -> SkillResult:
        """Return the result for `query` in `mode` (default: configured); `cancel` aborts it."""
        snapshot = self.snapshot
        opted_in = self.reranker is not None and snapshot.settings.enabled and snapshot.key
        if mode != "keyword" and opted_in:
            baseline = keyword_search(snapshot.catalog, query, limit)
            self._last.fallback = None
            result = self.reranker.search(  # type: ignore[union-attr]
                snapshot.catalog, query, limit, baseline, cancel=cancel
            )
            if result is baseline:  # the reranker did not decide: say why
                return dataclasses.replace(result, fallback=self._last.fallback or "internal")
            return dataclasses.replace(result, mode="reranked")
        if (mode or snapshot.mode) == "local":
            result = local_search(snapshot.catalog, query, limit)
        else:
            result = keyword_search(snapshot.catalog, query, limit)
        if mode != "keyword" and snapshot.settings.enabled:
            return dataclasses.replace(result, fallback="missing_key")
        return result

    def close(self) -> None:
        """End the session: outstanding reranking work is aborted."""
        if self.reranker is not None:
            self.reranker.close()

    def _observe(self, event: object) -> None:
        """Note why reranking did not decide; say the session's first provider failure."""
        from siftlib.skills.decide import Decision
        from siftlib.skills.observe import SearchObservation

        if not isinstance(event, SearchObservation):
            return
        if event.decision is Decision.UNCERTAIN:
            self._last.fallback = "uncertain"
        elif event.decision in (Decision.FAILURE, Decision.SKIPPED):
            self._last.fallback = event.reason.value
        if event.decision is Decision.FAILURE and not self._failure_said.is_set():
            self._failure_said.set()
            if self._notify is not None:
                self._notify(
                    f"reranking failed ({event.reason.value}); showing keyword results"
                    " (said once per session)"
                )


def serve_stdio(
    open_session: Callable[[], tuple[Session, list[str]]],
    stdin: IO[bytes],
    stdout: IO[str],
    *,
    warn: Callable[[Sequence[str]], None],
    mode: str | None = None,
) -> int:
    """Answer JSON request lines until EOF, in `mode` unless a request names its own."""
    # Imported here: one-shot searches never pay for the thread pool.
    import queue
    from concurrent.futures import ThreadPoolExecutor

    session, diagnostics = open_session()
    warn(diagnostics)
    answers: queue.Queue[Future[dict[str, Any]] | None] = queue.Queue()

    def write_answers() -> None:
        while (answer := answers.get()) is not None:
            stdout.write(json.dumps(answer.result()) + "\n")
            stdout.flush()

    writer = threading.Thread(target=write_answers, name="rerank-skills-writer", daemon=True)
    writer.start()
    try:
        with ThreadPoolExecutor(_WORKERS, thread_name_prefix="rerank-skills") as pool:
            while raw := stdin.readline(MAX_LINE_BYTES + 1):
                if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    _skip_line(stdin)
                    answers.put(_done({"error": f"a line is over {MAX_LINE_BYTES} bytes"}))
                    continue
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
                    warn(diagnostics)
                    answers.put(_done({"ok": True}))
                else:
                    query, limit, asked = request
                    answers.put(pool.submit(_answer, session, query, limit, asked or mode))
    finally:
        answers.put(None)
        writer.join()
        session.close()
    return 0


def _parse_request(raw: bytes) -> tuple[str, int, str | None] | None:
    """Return a line's (query, limit, mode), or None for a reload; raise `ToolError` if bad."""
    try:
        request = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ToolError("each line must be one JSON object in UTF-8") from None
    except RecursionError:
        raise ToolError("the line is nested too deeply") from None
    if not isinstance(request, dict):
        raise ToolError("each line must be one JSON object in UTF-8")
    if "op" in request:
        if request["op"] != "reload":
            raise ToolError('the only op is "reload"')
        return None
    query = request.get("query")
    if not isinstance(query, str):
        raise ToolError('a request needs a "query" string (or "op": "reload")')
    mode = check_mode(request["mode"]) if "mode" in request else None
    return query, check_limit(request.get("limit", DEFAULT_LIMIT)), mode


def _skip_line(stdin: IO[bytes]) -> None:
    """Read past the rest of an over-long line, a bounded chunk at a time."""
    while (chunk := stdin.readline(MAX_LINE_BYTES)) and not chunk.endswith(b"\n"):
        pass


def _answer(session: Session, query: str, limit: int, mode: str | None) -> dict[str, Any]:
    try:
        return render_json(
            session.search(query, limit, mode=mode), catalog=session.snapshot.catalog
        )
    except ToolError as exc:
        return {"error": str(exc)}
    except Exception as exc:  # one failed answer must not end the session
        return {"error": f"search failed ({type(exc).__name__})"}


def _done(answer: dict[str, Any]) -> Future[dict[str, Any]]:
    from concurrent.futures import Future

    future: Future[dict[str, Any]] = Future()
    future.set_result(answer)
    return future
