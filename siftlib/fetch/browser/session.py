"""One render in its own browser context: navigate, wait, read the DOM, dispose.

    rendered = render_once(pipe, proxy, "https://example.org/app", deadline=..., wait_for=0.0)

The steps, each bounded by the render's deadline (`reserve` seconds are kept back for
reading the DOM and disposing of the context):
1. `Target.createBrowserContext` with the render's own proxy (`proxyServer`, and
   `<-loopback>` so loopback is proxied too), downloads denied, one page in it;
2. the page's domains: service workers bypassed, media and font requests failed before they
   are sent (`Fetch.enable` with those resource types only), `window.open` disabled;
3. `Page.navigate`, then wait for the load event, then `wait_for`, then for the network to be
   quiet (no byte through the proxy) for `QUIET` seconds, at most `SETTLE` seconds after
   load. The Network domain stays off: its events for every request of a page that sends
   thousands made the renderer itself too slow to read;
4. the main frame must have ended on the URL's own document: a navigation the proxy refused
   (the first URL, a redirect, a script or a meta refresh) is `Blocked` with the guard's
   sentence; an error page or a scheme other than http(s) is a `FetchFailed`;
5. `document.documentElement.outerHTML` (and a PNG screenshot when asked).
A crashed page is `FetchFailed("crash")`; a page that answers nothing by the deadline (a script
that never yields) is `FetchFailed("deadline")`. The context is disposed of in every case; when
even that gets no answer the caller restarts the browser (`Hung`).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from siftlib.errors import Blocked, FetchFailed
from siftlib.fetch.browser.cdp import BrowserGone, CallFailed, Pipe, Session
from siftlib.fetch.browser.proxy import RenderProxy

__all__ = ["Hung", "Rendered", "render_once"]

QUIET = 0.5  # seconds without a request in flight: the page has settled
SETTLE = 3.0  # longest wait for the network to settle after load (beyond `wait_for`)
_DISPOSE = 3.0  # seconds the browser gets to tear a context down
_BLOCKED_TYPES = ("Media", "Font")
_NO_POPUPS = "window.open = function () { return null; };"
# The DOM as it is now, and the status of the document's own response (0 when unknown).
_READ = (
    "[document.documentElement.outerHTML,"
    " (performance.getEntriesByType('navigation')[0] || {}).responseStatus || 0]"
)


class Hung(Exception):
    """The browser did not answer for its own context: restart it."""


@dataclass
class Rendered:
    """A page as the browser left it: its DOM, where it ended and how long it took."""

    final_url: str
    status: int
    html: str
    render_ms: int
    warnings: list[str] = field(default_factory=list)
    screenshot: str | None = None  # a data: URL of a PNG


@dataclass
class _Watch:
    """What the events of one page said so far."""

    frame: str = ""
    loaded: bool = False
    crashed: bool = False
    document_url: str = ""
    failed: bool = False  # the main frame shows an error page instead of `document_url`


def render_once(
    pipe: Pipe,
    proxy: RenderProxy,
    url: str,
    *,
    deadline: float,
    wait_for: float,
    screenshot: bool,
    reserve: float,
    check: Callable[[], None] | None = None,  # called while waiting; may raise to stop
    contexts: dict[str, str | None] | None = None,
) -> Rendered:
    """Render `url` in a fresh context behind `proxy`; raise `Blocked`, `FetchFailed`, `Hung`."""
    started = time.monotonic()
    context = ""
    try:
        context = pipe.call(
            "Target.createBrowserContext",
            {"disposeOnDetach": True, "proxyServer": proxy.url, "proxyBypassList": "<-loopback>"},
            timeout=_left(deadline),
        )["browserContextId"]
        if contexts is not None:  # registered before its first page exists: see `Renderer`
            contexts[context] = None
        pipe.call(
            "Browser.setDownloadBehavior",
            {"behavior": "deny", "browserContextId": context},
            timeout=_left(deadline),
        )
        target = pipe.call(
            "Target.createTarget",
            {"url": "about:blank", "browserContextId": context},
            timeout=_left(deadline),
        )["targetId"]
        page = pipe.attach(target, timeout=_left(deadline))
        try:
            return _render(
                page,
                proxy,
                url,
                deadline=deadline,
                wait_for=wait_for,
                screenshot=screenshot,
                reserve=reserve,
                started=started,
                check=check,
            )
        finally:
            page.detach()
    except BrowserGone:
        raise FetchFailed("deadline", "fetch failed: deadline (the page did not answer)") from None
    except CallFailed as exc:
        raise FetchFailed("render", f"fetch failed: render ({exc})") from None
    finally:
        if context:
            if contexts is not None:
                contexts.pop(context, None)
            _dispose(pipe, context)


def _dispose(pipe: Pipe, context: str) -> None:
    if not pipe.alive:
        return
    try:
        pipe.call("Target.disposeBrowserContext", {"browserContextId": context}, timeout=_DISPOSE)
    except CallFailed:
        pass
    except BrowserGone:
        raise Hung("the browser did not dispose of a render's context") from None


def _render(
    page: Session,
    proxy: RenderProxy,
    url: str,
    *,
    deadline: float,
    wait_for: float,
    screenshot: bool,
    reserve: float,
    started: float,
    check: Callable[[], None] | None,
) -> Rendered:
    read_at = deadline - reserve
    for method, params in (
        ("Page.enable", None),
        ("Network.setBypassServiceWorker", {"bypass": True}),
        ("Fetch.enable", {"patterns": [{"resourceType": kind} for kind in _BLOCKED_TYPES]}),
        ("Page.addScriptToEvaluateOnNewDocument", {"source": _NO_POPUPS}),
    ):
        page.call(method, params, timeout=_left(deadline))
    watch = _Watch()
    answer = page.call("Page.navigate", {"url": url}, timeout=_left(read_at))
    watch.frame = str(answer.get("frameId", ""))
    watch.document_url = url
    if answer.get("errorText"):
        _navigation_failed(proxy, url, str(answer["errorText"]))
    warnings: list[str] = []
    _pump(page, watch, until=lambda: watch.loaded, end=read_at, check=check)
    if not watch.loaded:
        warnings.append("rendered: the page had not finished loading at the deadline")
    else:
        loaded_at = time.monotonic()
        _pump(
            page,
            watch,
            until=lambda: False,
            end=min(read_at, loaded_at + wait_for),
            check=check,
        )
        settled = time.monotonic()

        def quiet() -> bool:
            return watch.loaded and min(proxy.idle(), time.monotonic() - settled) >= QUIET

        _pump(page, watch, until=quiet, end=min(read_at, settled + SETTLE), check=check)
    if watch.crashed:
        raise FetchFailed("crash", "fetch failed: crash (the page crashed the renderer)")
    final = watch.document_url
    refusal = proxy.refused_for(final, failed=watch.failed)
    if refusal is not None:
        raise Blocked(refusal.rule, refusal.sentence)
    if watch.failed:
        _navigation_failed(proxy, final, "the page could not be reached")
    if urlsplit(final).scheme.lower() not in ("http", "https"):
        raise Blocked("scheme", "blocked: the page navigated away from http and https")
    if proxy.over_cap:
        warnings.append(f"truncated: the render passed its byte cap ({proxy.max_bytes} bytes)")
    read = page.call(
        "Runtime.evaluate", {"expression": _READ, "returnByValue": True}, timeout=_left(deadline)
    )
    value = read.get("result", {}).get("value")
    html, status = value if isinstance(value, list) and len(value) == 2 else ("", 0)
    shot = None
    if screenshot:
        picture = page.call("Page.captureScreenshot", {"format": "png"}, timeout=_left(deadline))
        shot = "data:image/png;base64," + str(picture.get("data", ""))
        base64.b64decode(shot.split(",", 1)[1], validate=True)  # a real PNG, or a failure
    return Rendered(
        final_url=final,
        status=status if isinstance(status, int) and status else 200,
        html="<!DOCTYPE html>" + (html if isinstance(html, str) else ""),
        render_ms=round((time.monotonic() - started) * 1000),
        warnings=warnings,
        screenshot=shot,
    )


def _pump(
    page: Session,
    watch: _Watch,
    *,
    until: Callable[[], bool],
    end: float,
    check: Callable[[], None] | None,
) -> None:
    """Handle the page's events until `until()` holds or `end` (monotonic) passes."""
    while not until() and not watch.crashed:
        left = end - time.monotonic()
        if left <= 0:
            return
        if check is not None:
            check()
        event = page.next_event(timeout=min(left, 0.1))
        if event is not None:
            _note(page, watch, *event)


def _note(page: Session, watch: _Watch, method: str, params: dict[str, Any]) -> None:
    if method == "Page.loadEventFired":
        watch.loaded = True
    elif method in ("Inspector.targetCrashed", "sift.gone"):
        watch.crashed = True
    elif method == "Page.frameRequestedNavigation" and params.get("frameId") == watch.frame:
        watch.loaded = False  # a script or a refresh navigates: wait for that page's load
    elif method == "Page.frameNavigated":
        frame = params.get("frame", {})
        if frame.get("id") == watch.frame:
            unreachable = frame.get("unreachableUrl")
            watch.document_url = str(unreachable or frame.get("url", ""))
            watch.failed = bool(unreachable)
    elif method == "Fetch.requestPaused":  # a media or font request: failed before it is sent
        failure = {"requestId": params["requestId"], "errorReason": "BlockedByClient"}
        page.send("Fetch.failRequest", failure)


def _navigation_failed(proxy: RenderProxy, url: str, error: str) -> None:
    refusal = proxy.refused_for(url, failed=True)
    if refusal is not None:
        raise Blocked(refusal.rule, refusal.sentence)
    kind = "deadline" if "TIMED_OUT" in error else "connect"
    raise FetchFailed(kind, f"fetch failed: {kind} ({error})")


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.0)
