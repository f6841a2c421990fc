"""What each route does, in one table.

    routes.serve(handler, "POST", started)          # answers the request, or raises
    handler.reject(exc)                             # any error, by `api.error_answer`

A route's methods are the contract's (`api.ROUTES`); `ENDPOINTS` names the function serving
it and whether it needs a caller token (only `/healthz` does not). In open mode every request
passes `check_local_origin` first. Searches and fetches run in the server's slots
(`GatewayServer.run_search`, `run_fetch`), `answer_late` answering for them at their deadline
from the deadline thread. A route raises its errors; the handler answers each through
`api.error_answer`, the one place error bodies are shaped (status by the code each error
carries, `api.ERROR_STATUS`, in both dialects).
"""

from __future__ import annotations

import functools
import socket
from collections.abc import Callable
from contextlib import suppress
from http import HTTPStatus
from typing import TYPE_CHECKING, NamedTuple

from siftlib.errors import FetchFailed
from siftlib.gateway import api, prometheus, wire
from siftlib.gateway.api import Rejected
from siftlib.metrics import visible_to

if TYPE_CHECKING:
    from siftlib.gateway.handler import Handler
    from siftlib.search.pipeline import SearchRequest, SearchResponse


def healthz(handler: Handler, caller: str, started: float) -> None:
    """`GET /healthz`: the degraded list, each source's record, the store and the browser."""
    server = handler.server
    checkup = server.searcher.checkup()
    renderer = server.fetcher.renderer if server.fetcher is not None else None
    answer = api.health_answer(
        checkup.degraded,
        sources=checkup.sources,
        store=server.searcher.config.store_kind,
        browser=None if renderer is None else renderer.health(),
    )
    handler.send_json(HTTPStatus.OK, answer)


def metrics(handler: Handler, caller: str, started: float) -> None:
    """`GET /metrics`: JSON, or Prometheus text when asked; only what the caller may see."""
    server = handler.server
    snapshot = server.searcher.metrics_snapshot()
    answer = visible_to(snapshot, viewer=caller, restricted=server.restricted)
    query = handler.path.partition("?")[2]
    if not prometheus.wants_prometheus(handler.field("accept"), query):
        handler.send_json(HTTPStatus.OK, answer)
        return
    text = prometheus.render(answer, server.searcher.metrics.histograms())
    handler.send(HTTPStatus.OK, text.encode(), prometheus.CONTENT_TYPE)


def native_search(handler: Handler, caller: str, started: float) -> None:
    """`POST /v1/search`: the native envelope (search.md §3.1)."""
    body = handler.read_body()
    request = api.native_request(body, caller=caller, default_k=handler.server.default_k)
    data = api.native_body(run_search(handler, request, started))
    handler.send(HTTPStatus.OK, data, "application/json")


def firecrawl_search(handler: Handler, caller: str, started: float) -> None:
    """`POST /v2/search`: Firecrawl's web hits."""
    request = api.firecrawl_request(handler.read_body(), caller=caller)
    data = api.firecrawl_body(run_search(handler, request, started))
    handler.send(HTTPStatus.OK, data, "application/json")


def fetch(handler: Handler, caller: str, started: float) -> None:
    """`POST /v1/fetch` and `POST /v2/scrape`: a refused or failed fetch is an answer too."""
    from siftlib.gateway import scrape

    data = handler.read_bytes()
    firecrawl = handler.route == "/v2/scrape"
    if firecrawl:
        fetcher = handler.server.fetcher
        browser = fetcher is not None and fetcher.renderer is not None
        asked = scrape.firecrawl_request_of(data, caller=caller, browser=browser)
        request = asked.fetch
    else:
        request = scrape.native_request(api.decode_body(data), caller=caller)
    result = handler.server.run_fetch(
        request,
        started=started,
        on_expiry=functools.partial(answer_late, handler),
        connection=handler.connection,
    )
    answer = scrape.firecrawl_body(result, asked) if firecrawl else scrape.native_body(result)
    handler.send(HTTPStatus.OK, answer, "application/json")


def run_search(handler: Handler, request: SearchRequest, started: float) -> SearchResponse:
    """Run a search in a slot; past its deadline the handler answers 503 at once."""
    return handler.server.run_search(
        request,
        started=started,
        on_expiry=functools.partial(answer_late, handler),
        connection=handler.connection,
    )


class Endpoint(NamedTuple):
    """The function serving a route, and whether it needs a caller token."""

    serve: Callable[[Handler, str, float], None]
    needs_token: bool = True


ENDPOINTS = {
    "/v1/search": Endpoint(native_search),
    "/v2/search": Endpoint(firecrawl_search),
    "/v1/fetch": Endpoint(fetch),
    "/v2/scrape": Endpoint(fetch),
    "/healthz": Endpoint(healthz, needs_token=False),
    "/metrics": Endpoint(metrics),
}
assert ENDPOINTS.keys() == api.ROUTES.keys(), "every route of the contract has an endpoint"


def serve(handler: Handler, method: str, started: float) -> None:
    """Route before auth (an unknown path is a 404, a wrong method a 405), then answer."""
    route = handler.route
    allowed = api.ROUTES.get(route)
    if allowed is None:
        raise Rejected(HTTPStatus.NOT_FOUND, "not found")
    if method not in allowed:
        raise Rejected(HTTPStatus.METHOD_NOT_ALLOWED, "method not allowed")
    server = handler.server
    if server.open_mode:
        check_local_origin(handler, method)
    endpoint = ENDPOINTS[route]
    caller = "local"
    if endpoint.needs_token:
        found = server.authenticate(handler.field("authorization"))
        if found is None:
            raise Rejected(HTTPStatus.UNAUTHORIZED, "missing or invalid bearer token")
        caller = found
        handler.restricted_caller = caller in server.restricted
    endpoint.serve(handler, caller, started)


def check_local_origin(handler: Handler, method: str) -> None:
    """In open mode, refuse what a web page could send: a foreign Host, a non-JSON POST."""
    from siftlib.gateway.server import is_local_host  # open mode only; no import cycle

    port = handler.server.server_port
    if not is_local_host(handler.field("host") or "", port):
        raise Rejected(
            HTTPStatus.FORBIDDEN,
            "forbidden",
            f"without caller tokens the Host must be 127.0.0.1:{port}, [::1]:{port} "
            f"or localhost:{port}",
        )
    if method == "POST" and not wire.declares_json(handler.fields):
        raise Rejected(
            HTTPStatus.FORBIDDEN,
            "forbidden",
            "without caller tokens a POST must be sent as Content-Type: application/json",
        )


def answer_late(handler: Handler) -> None:
    """Answer from the deadline thread while the work runs on (never blocks): 503 or 408."""
    route = handler.route
    late: Exception = Rejected(HTTPStatus.SERVICE_UNAVAILABLE, "search deadline exceeded")
    if route in api.FETCH_ROUTES:
        late = FetchFailed("deadline")
    status, payload, _ = api.error_answer(late, route=route)
    data = wire.encode_json(status, payload, {}, server=handler.server_version, close=True)
    handler.server.metrics.inc("http_shed", reason="deadline")
    handler.count(status)
    with suppress(OSError):
        handler.connection.send(data, socket.MSG_DONTWAIT)
        handler.connection.shutdown(socket.SHUT_WR)
