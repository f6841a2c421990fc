"""Client mode of `sift search` and `sift fetch`: one `POST` to a sift server.

    envelope = search_remote("http://127.0.0.1:8787", token, "sqlite wal", k=5, timeout=10.0)

Each way a call can fail becomes one library error, which the CLI maps to an exit code:
401/403 `AuthError` (3), but a 403 `blocked by the site` (a page behind a challenge) is
`Blocked` (4); connection refused, timeout, or an answer that is not sift's —
including a 5xx or a 404 — `UnreachableError` (5), so an agent falls back to its own web
search; 400/413 `QueryError` (2); 422 `NoResultsError` (1). Error sentences name the server
URL but never the token. Proxies and netrc from the environment are ignored: the server is
named explicitly. `search_response` and `fetch_result` read an envelope back into the typed
answer the in-process pipeline gives (`siftlib.backend.GatewayBackend`). A call given a
`cancel` event shuts its connection down once the event is set and raises `Cancelled`: the
gateway sees its client hang up and cancels the work (`siftlib.gateway.hangup`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from siftlib.errors import (
    AuthError,
    Blocked,
    BlockedBySite,
    Cancelled,
    FetchFailed,
    InvalidRequest,
    InvalidURL,
    NoResultsError,
    QueryError,
    SiftError,
    UnreachableError,
    UnreadableContent,
    UnsupportedContent,
    UnsupportedOption,
)

if TYPE_CHECKING:
    import threading

    from siftlib.fetch.models import FetchResult
    from siftlib.search.pipeline import SearchResponse


def search_remote(
    url: str,
    token: str | None,
    query: str,
    *,
    k: int | None,
    timeout: float,
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """Search through a sift server and return its native envelope (search.md §3.1)."""
    body: dict[str, object] = {"query": query}
    if k is not None:
        body["k"] = k
    response = _post(url, "/v1/search", token, body, timeout=timeout, cancel=cancel)
    status = response.status_code
    if status in (400, 413):
        sentence, reason = _refusal(response, "invalid query")
        raise QueryError(sentence, reason=reason)
    if status == 422:
        sentence, reason = _refusal(response, "no search results")
        raise NoResultsError(sentence, _warnings(response), reason=reason)
    if status != 200:
        raise UnreachableError(f"the sift server at {url} answered {status}")
    try:
        envelope = response.json()
    except ValueError:
        envelope = None
    if not isinstance(envelope, dict) or not isinstance(envelope.get("results"), list):
        raise UnreachableError(f"{url} did not answer like a sift server")
    return envelope


def _post(
    url: str,
    path: str,
    token: str | None,
    body: object,
    *,
    timeout: float,
    cancel: threading.Event | None = None,
) -> Any:
    """POST JSON to a sift server; return the response, whatever its status, unless 401/403.

    Raises `Cancelled` once `cancel` is set: the connection is shut down, whatever it waited for.
    """
    import httpx

    from siftlib.net.abort import Abort, Aborted
    from siftlib.net.tls import verify_for

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    abort = Abort()
    try:
        # A server that is down should be known at once; one that is up answers within its
        # own deadline, so only reading waits the whole timeout.
        limits = httpx.Timeout(timeout, connect=min(timeout, 5.0))
        client = httpx.Client(trust_env=False, timeout=limits, verify=verify_for(url))
        with client, abort.on(cancel):
            response = client.post(
                f"{url.rstrip('/')}{path}",
                json=body,
                headers=headers,
                extensions={"trace": abort.trace},
            )
    except Aborted:
        raise Cancelled("cancelled") from None
    except httpx.TimeoutException:
        if abort.aborted:
            raise Cancelled("cancelled") from None
        raise UnreachableError(
            f"the sift server at {url} did not answer in {timeout:g} s"
        ) from None
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        if abort.aborted:
            raise Cancelled("cancelled") from None
        raise UnreachableError(
            f"the sift server at {url} is unreachable ({type(exc).__name__})"
        ) from None
    if response.status_code in (401, 403) and not _blocked_by_site(response):
        hint = "set SIFT_TOKEN or token in client.toml" if not token else "check the token"
        raise AuthError(
            f"the sift server at {url} refused the request ({response.status_code}): {hint}"
        )
    return response


def _blocked_by_site(response: Any) -> bool:
    """Tell a 403 about the page (a challenge page, fetch only) from one about us."""
    try:
        payload = response.json()
    except ValueError:
        return False
    return isinstance(payload, dict) and payload.get("code") == BlockedBySite.code


def _refusal(response: Any, fallback: str) -> tuple[str, str | None]:
    """Return the server's error sentence (`error`, plus `details`) and its reason (`details`).

    The reason stays apart from the label, as the server's own error kept it (`because`).
    """
    try:
        payload = response.json()
    except ValueError:
        return fallback, None
    if not isinstance(payload, dict) or not isinstance(payload.get("error"), str):
        return fallback, None
    error, details = payload["error"], payload.get("details")
    return (f"{error}: {details}", details) if isinstance(details, str) else (error, None)


def _warnings(response: Any) -> list[str]:
    """Return the `warnings` of a 422 answer (why each source failed), if it has them."""
    try:
        payload = response.json()
    except ValueError:
        return []
    found = payload.get("warnings") if isinstance(payload, dict) else None
    return [w for w in found if isinstance(w, str)] if isinstance(found, list) else []


def fetch_remote(
    url: str,
    token: str | None,
    body: dict[str, Any],
    *,
    timeout: float,
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """Fetch a page through a sift server (`POST /v1/fetch`); return its native envelope.

    The server's refusals come back as the library's errors, by the `code` its answer
    carries (`_FETCH_ERRORS`), each with the server's sentence and code: `blocked` and its
    kinds → `Blocked` and its subclasses, `deadline` and `fetch failed` → `FetchFailed`,
    the request's faults → `QueryError`s (and any other 400/413).
    """
    response = _post(url, "/v1/fetch", token, body, timeout=timeout, cancel=cancel)
    status = response.status_code
    try:
        payload = response.json()
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        raise UnreachableError(f"{url} did not answer like a sift server ({status})")
    if status == 200 and isinstance(payload.get("content"), str):
        return payload
    error, code = payload.get("error"), payload.get("code")
    error = error if isinstance(error, str) else ""
    make = _FETCH_ERRORS.get(code) if isinstance(code, str) else None
    if make is not None:
        raise make(error or str(code), payload)
    if status in (400, 413) and error:
        raise QueryError(error)  # a malformed head or body: the server's own sentence
    raise UnreachableError(f"the sift server at {url} answered {status}")


# A `/v1/fetch` error answer's code → the error it is here, with the server's sentence (what
# the sentence names apart, a media type or a failed step, is not on the wire on its own).
_FETCH_ERRORS: dict[str, Callable[[str, Mapping[str, Any]], SiftError]] = {
    Blocked.code: lambda error, _: Blocked("remote", error),
    BlockedBySite.code: lambda error, body: BlockedBySite("", _count(body.get("status")), error),
    UnreadableContent.code: lambda error, _: UnreadableContent("", error),
    UnsupportedContent.code: lambda error, _: UnsupportedContent("", error),
    QueryError.code: lambda error, _: QueryError(error),
    InvalidURL.code: lambda error, _: InvalidURL(error),
    InvalidRequest.code: lambda error, _: InvalidRequest(error),
    UnsupportedOption.code: lambda error, _: UnsupportedOption(error),
    "deadline": lambda error, _: FetchFailed("deadline", error),
    "fetch failed": lambda error, _: FetchFailed("remote", error),
}


def search_response(envelope: Mapping[str, Any]) -> SearchResponse:
    """Return a native search envelope read back into the pipeline's typed answer."""
    from siftlib.hits import Hit
    from siftlib.search.pipeline import SearchResponse
    from siftlib.search.sources import QueryNotes

    sizes = _mapping(envelope.get("sizes"))
    timings = _mapping(envelope.get("timings"))
    hits = [
        Hit(
            url=str(hit.get("url", "")),
            title=str(hit.get("title", "")),
            snippet=str(hit.get("snippet", "")),
            score=_number(hit.get("score")),
            source=str(hit.get("source", "")),
            published=_text(hit.get("published")),
            engines=_count(hit.get("engines")),
        )
        for hit in envelope.get("results", [])
        if isinstance(hit, dict)
    ]
    notes = (_texts(envelope.get(name)) for name in ("answers", "suggestions", "corrections"))
    return SearchResponse(
        results=hits,
        warnings=list(_texts(envelope.get("warnings"))),
        sources_ok=list(_texts(sizes.get("sources_ok"))),
        sources_failed=list(_texts(sizes.get("sources_failed"))),
        search_ms=_count(timings.get("search_ms")),
        rerank_ms=_count(timings.get("rerank_ms")),
        cached=envelope.get("cached") is True,
        notes=QueryNotes(*notes),
    )


def fetch_result(envelope: Mapping[str, Any]) -> FetchResult:
    """Return a native fetch envelope read back into the fetcher's typed answer."""
    from siftlib.fetch.models import FetchResult

    timings = _mapping(envelope.get("timings"))
    media_type = str(envelope.get("content_type", ""))
    url = str(envelope.get("url", ""))
    return FetchResult(
        url=url,
        final_url=str(envelope.get("final_url", url)),
        status=_count(envelope.get("status")),
        content_type=media_type,
        media_type=media_type,
        title=str(envelope.get("title", "")),
        description=str(envelope.get("description", "")),
        language=str(envelope.get("language", "")),
        content=str(envelope.get("content", "")),
        links=list(_texts(envelope.get("links"))),
        truncated=envelope.get("truncated") is True,
        warnings=list(_texts(envelope.get("warnings"))),
        fetch_ms=_count(timings.get("fetch_ms")),
        convert_ms=_count(timings.get("convert_ms")),
        bytes=0,  # not in the envelope
        render_ms=_count(timings["render_ms"]) if "render_ms" in timings else None,
        author=str(envelope.get("author", "")),
        num_pages=_count(envelope["num_pages"]) if "num_pages" in envelope else None,
        cached_at=0.0 if envelope.get("cached") is True else None,  # when is not in the envelope
        page_type=str(envelope.get("page_type", "")),
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _texts(value: object) -> tuple[str, ...]:
    return tuple(str(item) for item in value) if isinstance(value, list) else ()


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _number(value: object) -> float:
    """Return a score as sent (an int stays an int, so it prints back the same), else 0."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else 0
