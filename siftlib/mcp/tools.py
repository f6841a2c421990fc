"""The three MCP tools of `sift mcp`, as thin faces over the search, fetch and skills libraries.

    toolbox = Toolbox(Where(config=None, server=None, local=False), skills=SkillsPlace(...))
    tools = toolbox.tools()          # what `tools/list` shows; each runs through the toolbox
    toolbox.close()

Each tool's schemas are in `siftlib.mcp.schemas`, which also checks its arguments. A tool
calls one library function and turns the typed answer into `structuredContent` plus one
compact text block (`siftlib.render`). What the library refuses (an invalid query, no source
enabled, every source failed, an unreachable gateway) comes back as a result with `isError`
and one sentence.

Search and fetch run on one `Backend` (`siftlib.backend`, as for `sift search` and
`sift fetch`), opened on first use and kept as long as the process: in-process (the
searcher with its store and pinned clients, the fetcher with its guard and kept
connections) or a gateway (`--server` / `client.toml`). So is the skill session (config
and catalog read once, as a `--stdio` session reads them). Nothing heavy is imported
before a tool needs it: listing tools reads only the reranking consent (for `skill_search`'s
open-world hint), not the catalog, and imports no httpx.

Decisions where mcp.md is silent:
- `web_search.query` in the output is the caller's text; `position` is 1-based after fusion.
- `skill_search.mode` says what produced the result: `reranked` when the opted-in reranker
  decided, `keyword` when it fell back (skills.md §3) or `[skill_search] mode` chose it, or
  `local` (skills.md §10, the default when reranking is not opted in);
  `selection` is `none` when no skill fits (nothing matched, or the reranker or the local
  ranking decided none does), else `matches`; `score` is the local relevance score in local
  mode, else the keyword score (the order is the reranker's when it decided).
- `web_fetch.max_chars` defaults to 20000 (mcp.md) and is capped by `fetch.max_chars`;
  `format: links` gives the page's links, one a line, as the content. The text block is a
  head line (title, final URL, status, truncated) and then the content itself.
- Cancelling a call drops its answer and stops its work: a `skill_search`'s provider call is
  aborted (or never made); in-process, `web_search` closes its upstream requests and gives
  back the reservations of calls not sent, and `web_fetch` stops reading or converting the
  page (its conversion worker is killed). Through a gateway, the request's connection is
  shut down, and the gateway cancels the search or fetch of a client that hung up.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from siftlib.errors import SiftError
from siftlib.mcp import schemas
from siftlib.mcp.protocol import Tool, ToolResult

if TYPE_CHECKING:
    from siftlib.backend import Backend
    from siftlib.skills.session import Session

log = logging.getLogger("sift.mcp")


@dataclass(frozen=True)
class Where:
    """Where searches run: through a gateway (`server`, `client.toml`) or in-process."""

    config: str | None
    server: str | None
    local: bool
    allow_private_upstreams: bool = False


@dataclass(frozen=True)
class SkillsPlace:
    """Which skill catalog to search: extra folders first, then the user's and the project's."""

    skills_dirs: tuple[Path, ...]
    cwd: Path


class Toolbox:
    """The libraries behind the tools, opened on first use and closed together."""

    def __init__(self, where: Where, *, skills: SkillsPlace) -> None:
        self.where = where
        self.skills_place = skills
        self._lock = threading.Lock()
        self._backend: Backend | None = None
        self._session: Session | None = None

    def tools(self) -> list[Tool]:
        """Return the tools in the order `tools/list` shows them."""
        return [
            schemas.web_search(self.web_search),
            schemas.web_fetch(self.web_fetch),
            schemas.skill_search(self.skill_search, reranking=self._reranking_opted_in()),
        ]

    def close(self) -> None:
        """Close the backend (searcher, store, fetcher) and the skill session."""
        with self._lock:
            if self._session is not None:
                self._session.close()
            if self._backend is not None:
                self._backend.close()

    def web_search(self, arguments: dict[str, Any], cancel: threading.Event) -> ToolResult:
        """Run `web_search`: the search pipeline, in-process or through the gateway."""
        from siftlib.render import model_hits
        from siftlib.search.pipeline import SearchRequest

        query, limit = arguments["query"], arguments["limit"]
        try:
            request = SearchRequest(query=query, k=limit)
            response = self._open_backend().search(request, cancel=cancel)
        except SiftError as exc:
            return _failure(exc)
        results = [
            {
                "position": position,
                "title": hit.title,
                "url": hit.url,
                "snippet": hit.snippet,
                "source": hit.source,
            }
            for position, hit in enumerate(response.results, 1)
        ]
        structured = {
            "query": query,
            "results": results,
            "warnings": response.warnings,
            "cached": response.cached,
        }
        return ToolResult(model_hits(results, response.warnings, response.cached), structured)

    def web_fetch(self, arguments: dict[str, Any], cancel: threading.Event) -> ToolResult:
        """Run `web_fetch`: the guarded fetch, in-process or through the gateway."""
        from siftlib.fetch.fetcher import FetchRequest
        from siftlib.render import model_page

        request = FetchRequest(
            url=arguments["url"],
            format=arguments["format"],
            main_content=arguments["main_content"],
            max_chars=arguments["max_chars"],
        )
        try:
            page = self._open_backend().fetch(request, cancel=cancel)
        except SiftError as exc:
            return _failure(exc)
        structured = {
            "url": page.url,
            "final_url": page.final_url,
            "status": page.status,
            "title": page.title,
            "content": page.content,
            "truncated": page.truncated,
            "warnings": page.warnings,
        }
        return ToolResult(model_page(structured), structured)

    def skill_search(self, arguments: dict[str, Any], cancel: threading.Event) -> ToolResult:
        """Run `skill_search` in the session's mode, reranked when the user opted in."""
        from siftlib.skills.answer import render_text
        from siftlib.skills.keyword import keyword_scores

        query, limit = arguments["query"], arguments["limit"]
        try:
            session = self._skill_session()
            result = session.search(query, limit, cancel=cancel)
        except SiftError as exc:
            return _failure(exc)
        mode = result.mode or "keyword"  # a reranker that fell back gave the keyword result
        scores = result.scores
        if result.matches and not scores:  # a reranker ordered them: report keyword scores
            ranked = keyword_scores(session.snapshot.catalog, query)
            keyword = {skill.name: score for skill, score in ranked}
            scores = tuple(keyword.get(skill.name, 0) for skill in result.matches)
        structured = {
            "query": query,
            "mode": mode,
            "selection": "matches" if result.matches else "none",
            "results": [
                {
                    "name": skill.name,
                    "description": skill.description,
                    "path": str(skill.file_path),
                    "score": _score(score),
                }
                for skill, score in zip(result.matches, scores, strict=True)
            ],
        }
        return ToolResult(render_text(result, catalog=session.snapshot.catalog), structured)

    def _open_backend(self) -> Backend:
        """Return the backend of search and fetch, opened on first use (`siftlib.backend`)."""
        with self._lock:
            if self._backend is None:
                from siftlib.backend import open_backend

                where = self.where
                self._backend = open_backend(
                    config=where.config,
                    server=where.server,
                    local=where.local,
                    allow_private_upstreams=where.allow_private_upstreams,
                )
            return self._backend

    def _config_path(self) -> Path:
        """Return the global config's path (`--config` > `$SIFT_CONFIG` > the user's)."""
        from siftlib.config import resolve_config_path

        return resolve_config_path(self.where.config)

    def _reranking_opted_in(self) -> bool:
        """Say whether skill search may call the provider: consent and a key (skills.md §4)."""
        from siftlib.skills.consent import api_key, load_settings

        try:
            settings, _ = load_settings(self._config_path(), cwd=self.skills_place.cwd)
        except SiftError:  # a config that cannot be read consents to nothing
            return False
        return settings.enabled and api_key(settings) is not None

    def _skill_session(self) -> Session:
        """Return the skill session, reading config and catalog on first use."""
        with self._lock:
            if self._session is None:
                from siftlib.skills.session import Session

                place = self.skills_place
                self._session, diagnostics = Session.open(
                    config_path=self._config_path(),
                    skills_dirs=list(place.skills_dirs),
                    cwd=place.cwd,
                )
                for diagnostic in diagnostics:
                    log.warning("skills: %s", diagnostic)
            return self._session


def _score(score: float) -> float:
    """Return a skill's score as JSON can carry it: a query naming a skill scores it infinite in
    local mode, reported as 100, as the keyword baseline scores a name equal to the query."""
    return 100 if score == math.inf else round(score, 4)


def _failure(exc: SiftError) -> ToolResult:
    """Return a failed result: the library's sentence, and what to do about it where known."""
    from siftlib.errors import UnreachableError

    text = str(exc)
    warnings = getattr(exc, "warnings", [])
    if warnings:
        text += f" ({'; '.join(warnings)})"
    text = text[:1].upper() + text[1:].removesuffix(".")
    # mcp.md §4: one sentence, the way out included.
    text += "; use your built-in web search instead." if isinstance(exc, UnreachableError) else "."
    return ToolResult(text, is_error=True)
