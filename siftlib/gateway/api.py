"""The gateway's API as pure functions: bodies into search requests, outcomes into answers.

The fetch routes' bodies and answers are `siftlib.gateway.scrape`'s; their routes and error shape
are here with the rest.

    body = decode_body(b'{"query": "sqlite wal", "k": 3}')
    request = native_request(body, caller="ops", default_k=8)     # or firecrawl_request(...)
    answer = firecrawl_answer(searcher.search(request))           # or native_answer(...)
    data = firecrawl_body(searcher.search(request))               # the same answer, as bytes
    payload = error_payload(Rejected(HTTPStatus.NOT_FOUND, "not found"), route="/v2/search")

No sockets here: the handler (`siftlib.gateway.server`) reads the bytes and writes the answer.

Decisions the spec leaves open:
- Error bodies: `{"error": "invalid query" | "no search results" | …, "details": "<why>"}`
  (`"success": false` added on every `/v2/` path, malformed heads included); `details` is
  what Firecrawl itself uses, and every error body carries it (the fetch routes' beside
  their `code`): the error's own reason, else a sentence on its status
  (`wire.details_for`), so an SDK never prints "No additional error details provided."
  A 422 also carries the search's `warnings` (`tavily: 429`:
  source and kind, never upstream text).
- Unknown fields are ignored on both search routes; `/v2/search` `limit` null means absent,
  and a limit outside 1–20 is clamped (Firecrawl's own range), not refused.
- `/healthz` is `degraded` with `search: no source enabled` when nothing is enabled (every
  search would be a 422), besides the searcher's own list (missing key, daily cap, dns
  failed, refused, failing). `sources` holds each enabled source's state (`ok`, `failing`,
  `missing key`, `capped`), recent outcome count, success rate and p50/p90 latency
  (`siftlib.search.health`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from siftlib import __version__
from siftlib.gateway import wire
from siftlib.gateway.memo import EntryMemo
from siftlib.hits import Hit
from siftlib.query import check_k
from siftlib.search.pipeline import SearchRequest, SearchResponse

FIRECRAWL_DEFAULT_LIMIT = 5
FIRECRAWL_MAX_LIMIT = 20
ROUTES = {
    "/v1/search": ("POST",),
    "/v2/search": ("POST",),
    "/v1/fetch": ("POST",),
    "/v2/scrape": ("POST",),
    "/healthz": ("GET",),
    "/metrics": ("GET",),
}
FETCH_ROUTES = frozenset(("/v1/fetch", "/v2/scrape"))
# What an error becomes, by the `code` it carries (`siftlib.errors`): one status on every
# route and in both dialects, native and Firecrawl's.
ERROR_STATUS = {
    "invalid query": HTTPStatus.BAD_REQUEST,
    "invalid url": HTTPStatus.BAD_REQUEST,
    "invalid request": HTTPStatus.BAD_REQUEST,
    "unsupported option": HTTPStatus.BAD_REQUEST,
    "blocked": HTTPStatus.BAD_REQUEST,
    "blocked by the site": HTTPStatus.FORBIDDEN,
    "deadline": HTTPStatus.REQUEST_TIMEOUT,
    "unsupported content type": HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
    "unsupported content": HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
    "no search results": HTTPStatus.UNPROCESSABLE_ENTITY,
    "fetch failed": HTTPStatus.INTERNAL_SERVER_ERROR,
}


class Rejected(Exception):
    """A request the gateway answers with an error status."""

    def __init__(
        self,
        status: HTTPStatus,
        error: str,
        details: str | None = None,
        *,
        warnings: list[str] | None = None,
    ) -> None:
        super().__init__(error)
        self.status, self.error, self.details = status, error, details
        self.warnings = warnings


def route_label(route: str) -> str:
    """Return a route's name for logs and metrics: a known route, else `other`."""
    return route if route in ROUTES else "other"


def decode_body(data: bytes) -> dict[str, Any]:
    """Return a request body as a JSON object, or raise `Rejected`."""
    try:
        body = json.loads(data)
    except (ValueError, RecursionError):
        raise Rejected(
            HTTPStatus.BAD_REQUEST, "invalid query", "the body is not valid JSON"
        ) from None
    if not isinstance(body, dict):
        raise Rejected(HTTPStatus.BAD_REQUEST, "invalid query", "the body must be a JSON object")
    return body


def native_request(body: Mapping[str, Any], *, caller: str, default_k: int) -> SearchRequest:
    """Return the search a `POST /v1/search` body asks for (search.md §3.1)."""
    k = body.get("k")
    k = default_k if k is None else check_k(k)  # a QueryError: 400 `invalid query`
    for name in ("rerank", "digest"):
        if body.get(name) is not None and not isinstance(body[name], bool):
            raise Rejected(HTTPStatus.BAD_REQUEST, "invalid query", f"{name} must be true or false")
    question = body.get("question")
    if question is not None and not isinstance(question, str):
        raise Rejected(HTTPStatus.BAD_REQUEST, "invalid query", "question must be a string")
    return SearchRequest(
        query=_query(body),
        k=k,
        rerank=body.get("rerank"),
        digest=bool(body.get("digest")),
        caller=caller,
    )


def firecrawl_request(body: Mapping[str, Any], *, caller: str) -> SearchRequest:
    """Return the search a `POST /v2/search` body asks for: web hits only, never a scrape."""
    limit = body.get("limit")
    if limit is None:
        limit = FIRECRAWL_DEFAULT_LIMIT
    elif isinstance(limit, bool) or not isinstance(limit, int):
        raise Rejected(HTTPStatus.BAD_REQUEST, "invalid query", "limit must be an integer")
    limit = min(max(limit, 1), FIRECRAWL_MAX_LIMIT)
    return SearchRequest(query=_query(body), k=limit, caller=caller)


def native_answer(response: SearchResponse) -> dict[str, object]:
    """Return the native envelope of a search's outcome."""
    return response.to_native()


def native_body(response: SearchResponse) -> bytes:
    """Return `native_answer(response)` as the JSON body the gateway sends."""
    rest = response.to_native()
    del rest["results"]
    return b'{"results": ' + _ENCODED.native(response) + b", " + wire.json_body(rest)[1:]


def firecrawl_body(response: SearchResponse) -> bytes:
    """Return `firecrawl_answer(response)` as the JSON body the gateway sends."""
    return b'{"success": true, "data": {"web": ' + _ENCODED.web(response) + b"}}\n"


class EncodedHits:
    """The JSON of a search's hits in each dialect, kept for recent cache hits' entries.

    A cache hit carries the very tuple the store's memory front holds (`stored`), so its JSON
    is encoded once per entry (`siftlib.gateway.memo`); fresh searches are encoded each time.
    """

    def __init__(self, entries: int = 1024) -> None:
        self._memo = EntryMemo[bytes](entries)

    def web(self, response: SearchResponse) -> bytes:
        """Return the `/v2/search` `web` array of a search's hits."""
        return self._encoded(response, "web", _web)

    def native(self, response: SearchResponse) -> bytes:
        """Return the native `results` array of a search's hits."""
        return self._encoded(response, "native", lambda hits: [h.to_dict() for h in hits])

    def _encoded(
        self, response: SearchResponse, dialect: str, build: Callable[[Sequence[Hit]], object]
    ) -> bytes:
        hits = response.stored
        if hits is None:
            return wire.json_text(build(response.results))
        return self._memo.get(hits, dialect, lambda: wire.json_text(build(hits)))


def _web(hits: Sequence[Hit]) -> list[dict[str, object]]:
    return [hit.to_firecrawl(i) for i, hit in enumerate(hits, 1)]


_ENCODED = EncodedHits()


def firecrawl_answer(response: SearchResponse) -> dict[str, object]:
    """Return Firecrawl's `/v2/search` shape of a search's outcome."""
    return {"success": True, "data": {"web": _web(response.results)}}


def health_answer(
    degraded: list[str],
    *,
    sources: dict[str, dict[str, object]],
    store: str,
    browser: dict[str, object] | None = None,
) -> dict[str, object]:
    """Return the `/healthz` answer: the degraded list, each source's record, the store kind.

    With `[fetch.browser]` on, `browser` says whether it can render (`available`) and whether
    it is running now; an unavailable browser degrades the gateway, naming why.
    """
    if not sources:
        degraded = ["search: no source enabled", *degraded]
    if browser is not None and not browser["available"]:
        degraded = [*degraded, f"browser: {browser.get('problem') or 'unavailable'}"]
    answer: dict[str, object] = {
        "status": "degraded" if degraded else "ok",
        "degraded": degraded,
        "sources": sources,
        "store": store,
        "version": __version__,
    }
    if browser is not None:
        answer["browser"] = browser
    return answer


def error_payload(exc: Rejected, *, route: str) -> dict[str, object]:
    """Return the JSON body of an error answer, Firecrawl's shape on every `/v2/` path.

    The fetch routes answer `{"error": "<sentence>", "code": "<label>"}` (fetch.md §4.2),
    the sentence starting with its label; their bodies are requests, not queries.
    """
    payload: dict[str, object]
    if route in FETCH_ROUTES:
        label = "invalid request" if exc.error == "invalid query" else exc.error
        error = f"{label}: {exc.details}" if exc.details else label
        payload = {"error": error, "code": label, "details": wire.details_for(exc.status)}
    else:
        payload = {"error": exc.error, "details": exc.details or wire.details_for(exc.status)}
        if exc.warnings is not None:
            payload["warnings"] = exc.warnings
    return {"success": False, **payload} if route.startswith("/v2/") else payload


def error_headers(exc: Rejected, *, route: str) -> dict[str, str]:
    """Return the header fields an error answer needs (`WWW-Authenticate`, `Allow`)."""
    if exc.status == HTTPStatus.UNAUTHORIZED:
        return {"WWW-Authenticate": 'Bearer realm="sift"'}
    if exc.status == HTTPStatus.METHOD_NOT_ALLOWED:
        return {"Allow": ", ".join(ROUTES[route])}
    return {}


def _query(body: Mapping[str, Any]) -> str:
    query = body.get("query")
    if query is None:  # `{"q": …}` and other near misses: name the field that is missing
        raise Rejected(HTTPStatus.BAD_REQUEST, "invalid query", "query is required")
    if not isinstance(query, str):
        raise Rejected(HTTPStatus.BAD_REQUEST, "invalid query", "query must be a string")
    return query
