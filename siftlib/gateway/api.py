"""The gateway's API as pure functions: bodies into search requests, outcomes into answers.

The fetch routes' bodies and answers are `siftlib.gateway.scrape`'s; their routes and error shape
are here with the rest: every error answer of the gateway, in both dialects and on every route,
is shaped by `error_answer` (the handler's, the deadline's and the canned shed answer).

    body = decode_body(b'{"query": "sqlite wal", "k": 3}')
    request = native_request(body, caller="ops", default_k=8)     # or firecrawl_request(...)
    answer = firecrawl_answer(searcher.search(request))           # or native_answer(...)
    data = firecrawl_body(searcher.search(request))               # the same answer, as bytes
    status, payload, headers = error_answer(exc, route="/v2/scrape")  # any error's answer

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
import logging
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Any, NamedTuple

from siftlib import __version__
from siftlib.errors import Blocked, BlockedBySite, FetchFailed, NoResultsError, QueryError
from siftlib.gateway import wire
from siftlib.gateway.memo import EntryMemo
from siftlib.hits import Hit
from siftlib.query import check_k
from siftlib.search.pipeline import SearchRequest, SearchResponse

log = logging.getLogger("sift.http")
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
# A fetch error body's `details` by its code: what the caller can do about it.
FETCH_DETAILS = {
    "blocked": "the fetch guard reads public addresses only; [fetch] allow opens one host:port",
    "blocked by the site": "the site answered with a challenge or block page, not the content",
    "unsupported option": "this gateway serves the scrape options its docs list, no others",
    "unsupported content type": "the page is of a content type fetch does not read",
    "unsupported content": "the page's bytes are not in a format fetch reads",
    "deadline": "the fetch ran past its deadline (fetch.timeout, or the request's timeout)",
    "fetch failed": "the page could not be fetched; the error names the step that failed",
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


class ErrorAnswer(NamedTuple):
    """An error's answer: its status, JSON body and header fields."""

    status: HTTPStatus
    payload: dict[str, object]
    headers: dict[str, str]


def error_answer(exc: Exception, *, route: str) -> ErrorAnswer:
    """Return the answer to any error on `route`: the one place error bodies are shaped.

    A fetch route answers its fetch's own errors by their code (`fetch_payload`); every
    other error becomes a `Rejected` (`rejection`), shaped by `error_payload`.
    """
    if route in FETCH_ROUTES and isinstance(exc, Blocked | FetchFailed | QueryError):
        payload = fetch_payload(exc, firecrawl=route == "/v2/scrape")
        return ErrorAnswer(ERROR_STATUS[exc.code], payload, {})
    rejected = rejection(exc, route=route)
    payload = error_payload(rejected, route=route)
    return ErrorAnswer(rejected.status, payload, error_headers(rejected, route=route))


def rejection(exc: Exception, *, route: str) -> Rejected:
    """Return the error answer of an exception: its status, label and sentence."""
    if isinstance(exc, Rejected):
        return exc
    if isinstance(exc, wire.BadHead):
        return Rejected(exc.status, exc.error, exc.details)
    if isinstance(exc, QueryError):
        return Rejected(ERROR_STATUS[exc.code], exc.code, exc.reason)
    if isinstance(exc, NoResultsError):
        status = ERROR_STATUS[exc.code]
        return Rejected(status, exc.code, exc.reason, warnings=exc.warnings)
    # Anything else is ours: logged by type only (its text may carry an upstream's words).
    log.error("internal error on %s: %s", route, type(exc).__name__)
    return Rejected(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error")


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
    return _in_dialect(payload, firecrawl=route.startswith("/v2/"))


def fetch_payload(exc: Blocked | FetchFailed | QueryError, *, firecrawl: bool) -> dict[str, object]:
    """Return the body answering a fetch that ended in `exc`, by its code (fetch.md §4.2).

    A challenge page (a 403: the SDK's "website not supported") carries the site's own status.
    """
    # A failed fetch says the step (its kind), never the text of what failed there.
    error = f"fetch failed: {exc.kind}" if isinstance(exc, FetchFailed) else str(exc)
    details = FETCH_DETAILS.get(exc.code) or wire.details_for(ERROR_STATUS[exc.code])
    payload: dict[str, object] = {"error": error, "code": exc.code, "details": details}
    if isinstance(exc, BlockedBySite):
        if not firecrawl:
            return {**payload, "status": exc.status}
        metadata = {"statusCode": exc.status}
        payload = {**payload, "metadata": metadata, "data": {"metadata": metadata}}
    return _in_dialect(payload, firecrawl=firecrawl)


def _in_dialect(payload: dict[str, object], *, firecrawl: bool) -> dict[str, object]:
    return {"success": False, **payload} if firecrawl else payload


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
