"""One headless Chromium per gateway, shared by its renders: started late, restarted when ill.

    renderer = Renderer(config.fetch.browser, guard=fetcher.guard, metrics=metrics)
    rendered = renderer.render("https://example.org/app", deadline=deadline, wait_for=3.0)
    renderer.close()

Lifecycle: the browser starts on the first render (never at gateway start, so a gateway that
never renders never pays for it), in a fresh temporary profile, with the switches of
`chromium_argv`: `executable = "auto"` starts `chromium-headless-shell` when it is installed
(Chromium's own build for automation, far cheaper per render than the desktop browser), else
`chromium`. Its launch runs on a thread of its own and a render waits for it only until its
own deadline, so a slow first launch costs the first render, not a stuck request. The
browser is killed (its whole process group) and started again on the next render when it
exits or crashes, when it leaves a call unanswered (a hung browser), or when its processes
together hold more than `memory_bound` bytes of RSS (`MEMORY_BOUND`; checked while every
render waits).
At most `pages` renders run at once; the others wait, within their deadline.

Popups: the headless shell opens none (`--block-new-web-contents`; chromium ignores it); in
either browser `window.open` is disabled in every page, and a watcher closes any other page
that appears in a render's context (a link or form aimed at a new window).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from siftlib.errors import Blocked, Cancelled, FetchFailed
from siftlib.fetch.browser.cdp import BrowserGone, CallFailed, Pipe
from siftlib.fetch.browser.processes import tree
from siftlib.fetch.browser.proxy import Refusal, RenderProxy
from siftlib.fetch.browser.session import Hung, Rendered, render_once
from siftlib.fetch.browser.shell import shell_reason

if TYPE_CHECKING:
    from siftlib.config import BrowserConfig
    from siftlib.fetch.fetcher import FetchRequest, Page
    from siftlib.fetch.guard import Guard
    from siftlib.metrics import Metrics
    from siftlib.net.dial import Connector

__all__ = ["BROWSERS", "Renderer", "browser_command", "chromium_argv"]

MEMORY_BOUND = 2 * 1024**3  # RSS of every browser process together
LAUNCH_TIMEOUT = 60.0  # a launch slower than this is a broken browser
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
BROWSERS = ("chromium-headless-shell", "chromium")  # what "auto" starts: the first installed

log = logging.getLogger("sift")


def browser_command(executable: str) -> str:
    """Return the browser to start: `executable`, or for "auto" the first of `BROWSERS` on PATH."""
    if executable != "auto":
        return executable
    return next((name for name in BROWSERS if shutil.which(name)), BROWSERS[0])


def chromium_argv(executable: str, profile: str, proxy: str) -> list[str]:
    """Return the command line of a guarded headless browser (see the module docstring)."""
    argv = [
        executable,
        "--headless",
        "--remote-debugging-pipe",
        f"--user-data-dir={profile}",
        f"--proxy-server={proxy}",
        "--proxy-bypass-list=<-loopback>",  # loopback goes through the proxy too
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",  # no lookups of its own
        "--disable-quic",
        # WebRTC sends no UDP a proxy cannot carry: chromium's switch, then the headless shell's.
        "--webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--block-new-web-contents",  # the headless shell opens no popup at all
        # One renderer per context, iframes in it: the page's Fetch interception sees them.
        "--disable-features=IsolateOrigins,site-per-process,MediaRouter,OptimizationHints,"
        "Translate,InterestFeedContentSuggestions,AutofillServerCommunication",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-domain-reliability",
        "--disable-sync",
        "--disable-extensions",
        "--disable-default-apps",
        "--disable-breakpad",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-client-side-phishing-detection",
        "--deny-permission-prompts",
        "--mute-audio",
        "--no-first-run",
        "--no-default-browser-check",
        "--no-pings",
        "--password-store=basic",
        "--use-mock-keychain",
        "--js-flags=--max-old-space-size=512",
        "--window-size=1280,800",
    ]
    if os.geteuid() == 0:  # Chromium refuses to start sandboxed as root
        argv.append("--no-sandbox")
    return [*argv, "about:blank"]


class _Browser:
    """A launched browser: its pipe, its profile and the proxy that refuses its own traffic."""

    def __init__(self, executable: str, guard: Guard) -> None:
        self.profile = tempfile.mkdtemp(prefix="sift-chromium-")
        # Traffic outside a render's context (none is expected) meets a proxy refusing all.
        self.fallback = RenderProxy(guard, deadline=float("inf"), max_bytes=0, owner=None)
        try:
            self.pipe = Pipe.launch(chromium_argv(executable, self.profile, self.fallback.url))
        except OSError:
            self.fallback.close()
            shutil.rmtree(self.profile, ignore_errors=True)
            raise
        self.fallback.owner = self.pipe.pid
        # Each render's context and its first page (the render's own); later pages are popups.
        self.contexts: dict[str, str | None] = {}

    def ready(self) -> None:
        """Wait for the browser to answer, and start watching for popups."""
        self.pipe.call("Browser.getVersion", timeout=LAUNCH_TIMEOUT)
        self.pipe.call("Target.setDiscoverTargets", {"discover": True}, timeout=LAUNCH_TIMEOUT)
        threading.Thread(target=self._close_popups, name="sift-popups", daemon=True).start()

    def _close_popups(self) -> None:
        """Close every page of a render's context but its first one (the render's own)."""
        while self.pipe.alive:
            event = self.pipe.browser.next_event(timeout=1.0)
            if event is None or event[0] != "Target.targetCreated":
                continue
            info = event[1].get("targetInfo", {})
            context = info.get("browserContextId")
            if info.get("type") != "page" or context not in self.contexts:
                continue
            if self.contexts[context] is None:
                self.contexts[context] = info.get("targetId")
            elif self.contexts[context] != info.get("targetId"):
                with contextlib.suppress(BrowserGone):
                    self.pipe.send("Target.closeTarget", {"targetId": info.get("targetId")})

    def rss(self) -> int:
        """Return the resident memory of every process of the browser, in bytes."""
        total = 0
        for pid in tree(self.pipe.pid):
            with (
                contextlib.suppress(OSError, ValueError, IndexError),
                open(f"/proc/{pid}/statm", encoding="ascii") as statm,
            ):
                total += int(statm.read().split()[1]) * _PAGE_SIZE
        return total

    def kill(self) -> None:
        """End the browser, its proxy of last resort and its profile."""
        self.pipe.kill()
        self.fallback.close()
        shutil.rmtree(self.profile, ignore_errors=True)


class Renderer:
    """Renders pages in one shared headless Chromium, every byte through a guarded proxy."""

    def __init__(
        self,
        settings: BrowserConfig,
        *,
        guard: Guard,
        metrics: Metrics | None = None,
        connect: Connector | None = None,
    ) -> None:
        self.settings = settings
        self.guard = guard
        self.metrics = metrics
        self.memory_bound = MEMORY_BOUND  # the tests prove the bound at a smaller scale
        self._connect = connect
        self._slots = threading.BoundedSemaphore(settings.pages)
        self._lock = threading.Lock()
        self._browser: _Browser | None = None
        self._launching: Future[_Browser] | None = None
        self._closed = False
        self.problem: str | None = None  # why the last launch failed, for /healthz

    def health(self) -> dict[str, object]:
        """Say whether a render can run (the executable is there, the last launch worked)."""
        problem = self.problem
        command = browser_command(self.settings.executable)
        if shutil.which(command) is None:
            problem = f"{command} is not installed (apt-get install {BROWSERS[0]})"
        with self._lock:
            running = self._browser is not None and self._browser.pipe.alive
        health: dict[str, object] = {"available": problem is None, "running": running}
        if problem is not None:
            health["problem"] = problem
        return health

    def rerender(
        self,
        page: Page,
        request: FetchRequest,
        content: str,
        deadline: float,
        cancel: threading.Event | None = None,
    ) -> Rendered | None:
        """Render a statically fetched HTML page when asked or when it looks like a shell.

        On success the page's body, type, status and final URL become the rendered ones.
        A render the guard refused at the top level raises `Blocked`; any other failed render
        leaves the static page as it was, with a warning saying why.
        """
        if request.render is False and not request.screenshot:
            return None
        asked = request.render or request.screenshot or self.settings.render == "always"
        if not asked and shell_reason(page.body, content) is None:
            return None
        try:
            rendered = self.render(
                page.final_url,
                deadline=deadline,
                wait_for=request.wait_for,
                screenshot=request.screenshot,
                cancel=cancel,
            )
        except FetchFailed as exc:
            page.warnings.append(f"render failed: {exc}; the static page is returned")
            return None
        page.body = rendered.html.encode("utf-8", "surrogatepass")
        page.content_type = page.media_type = "text/html"
        page.content_type = "text/html; charset=utf-8"
        page.final_url = rendered.final_url
        page.status = rendered.status
        page.warnings.extend(rendered.warnings)
        return rendered

    def render(
        self,
        url: str,
        *,
        deadline: float,
        wait_for: float = 0.0,
        screenshot: bool = False,
        cancel: threading.Event | None = None,
    ) -> Rendered:
        """Render `url`; raise `Blocked`, `FetchFailed` (`deadline`, `crash`, …) or `Cancelled`."""
        if not self._slots.acquire(timeout=max(deadline - time.monotonic(), 0.0)):
            raise self._failed("deadline", "waiting for a free page")
        try:
            return self._render(url, deadline, wait_for, screenshot, cancel)
        finally:
            self._slots.release()

    def close(self) -> None:
        """Stop the browser; later renders fail."""
        with self._lock:
            self._closed = True
            browser, self._browser = self._browser, None
            launching = self._launching
        if browser is not None:
            browser.kill()
        if launching is not None:
            launching.add_done_callback(lambda done: _kill_launched(done))

    def _render(
        self,
        url: str,
        deadline: float,
        wait_for: float,
        screenshot: bool,
        cancel: threading.Event | None,
    ) -> Rendered:
        browser = self._ready(deadline)
        proxy = RenderProxy(
            self.guard,
            deadline=deadline,
            max_bytes=self.settings.max_bytes,
            owner=browser.pipe.pid,
            connect=self._connect,
            on_refusal=self._refused,
        )
        budget = deadline - time.monotonic()
        reserve = min(2.5, max(budget * 0.3, 0.5))

        def check_memory() -> None:
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled")
            if browser.rss() > self.memory_bound:
                self._restart(browser, "memory")
                raise self._failed("memory", "the browser passed its memory bound")

        try:
            rendered = render_once(
                browser.pipe,
                proxy,
                url,
                deadline=deadline,
                wait_for=wait_for,
                screenshot=screenshot,
                reserve=reserve,
                check=_every(0.2, check_memory),
                contexts=browser.contexts,
            )
        except Hung:
            self._restart(browser, "hung")
            raise self._failed("deadline", "the page did not answer") from None
        except FetchFailed as exc:
            if not browser.pipe.alive:
                self._restart(browser, "crash")
            self._count("browser_render_failures", kind=exc.kind)
            raise
        except Blocked:
            self._count("browser_render_failures", kind="blocked")
            raise
        finally:
            proxy.close()
        self._count("browser_renders")
        if browser.rss() > self.memory_bound:
            self._restart(browser, "memory")
        return rendered

    def _ready(self, deadline: float) -> _Browser:
        """Return the running browser, launching one (on its own thread) when there is none."""
        with self._lock:
            if self._closed:
                raise FetchFailed("render", "fetch failed: render (the browser is shut down)")
            if self._browser is not None and self._browser.pipe.alive:
                return self._browser
            if self._browser is not None:  # exited since the last render
                self._browser.kill()
                self._browser = None
                self._count("browser_restarts", reason="crash")
            launching = self._launching
            if launching is None:
                launching = self._launching = Future()
                threading.Thread(
                    target=self._launch, args=(launching,), name="sift-browser", daemon=True
                ).start()
        try:
            return launching.result(timeout=max(deadline - time.monotonic(), 0.0))
        except TimeoutError:
            raise self._failed("deadline", "the browser was still starting") from None
        except (OSError, BrowserGone, CallFailed) as exc:
            raise self._failed("launch", f"the browser did not start: {exc}") from None

    def _launch(self, launching: Future[_Browser]) -> None:
        browser: _Browser | None = None
        try:
            browser = _Browser(browser_command(self.settings.executable), self.guard)
            browser.ready()
        except (OSError, BrowserGone, CallFailed) as exc:
            if browser is not None:
                browser.kill()
            self.problem = f"the browser did not start ({type(exc).__name__})"
            log.warning("browser: %s", self.problem)
            with self._lock:
                self._launching = None
            launching.set_exception(exc)
            return
        with self._lock:
            self.problem = None
            self._launching = None
            if self._closed:
                browser.kill()
                launching.set_exception(BrowserGone("the renderer is closed"))
                return
            self._browser = browser
        launching.set_result(browser)

    def _restart(self, browser: _Browser, reason: str) -> None:
        """Kill `browser` (the next render starts another one) and count why."""
        with self._lock:
            if self._browser is browser:
                self._browser = None
            else:
                return
        browser.kill()
        self._count("browser_restarts", reason=reason)
        log.warning("browser: restarted (%s)", reason)

    def _refused(self, refusal: Refusal) -> None:
        self._count("browser_proxy_refusals", rule=refusal.rule)

    def _failed(self, kind: str, why: str) -> FetchFailed:
        self._count("browser_render_failures", kind=kind)
        return FetchFailed(
            kind if kind == "deadline" else "render", f"fetch failed: {kind} ({why})"
        )

    def _count(self, name: str, amount: float = 1, **labels: str) -> None:
        if self.metrics is not None:
            self.metrics.inc(name, amount, **labels)


def _kill_launched(done: Future[_Browser]) -> None:
    if done.exception() is None:
        done.result().kill()


def _every(seconds: float, check: Callable[[], None]) -> Callable[[], None]:
    """Return a function that calls `check` at most once every `seconds`."""
    last = [0.0]

    def maybe() -> None:
        now = time.monotonic()
        if now - last[0] >= seconds:
            last[0] = now
            check()

    return maybe
