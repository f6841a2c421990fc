"""Reading one web page, safely: the guarded fetch behind `sift fetch`, `/v1/fetch`, `/v2/scrape`.

    with Fetcher(config.fetch) as fetcher:
        result = fetcher.fetch(FetchRequest(url="https://example.org/post"))
        print(result.title, result.content)      # markdown of the main content

`Fetcher.fetch` runs one fetch under **one wall-clock deadline** (`min(request timeout,
fetch.timeout)`), in order, each step in a module of its own:
- the fetch cache (`siftlib.fetch.pagecache`): a hit younger than the request's max age is
  the answer, and nothing below runs;
- the network (`siftlib.fetch.reader`): the guard vets every hop, connections are pinned to
  the vetted addresses, the body is read and decoded under the byte cap;
- challenge and block pages (`siftlib.fetch.challenge`) fail as `blocked by the site`;
- the conversion (`siftlib.fetch.conversion`), in a killable worker: HTML and text to the
  asked formats, or a PDF's text; an HTML page rendered by the browser when asked
  (`siftlib.fetch.browser`) is converted again from what the browser saw.

Every fetch ends in one log line (`fetch caller=… host=… status=… bytes=… ms=… cache=…`,
never a path or query) and the `fetch_requests` counter; a restricted caller's stays out
of the caller-less aggregates and its host is logged as `-`.
"""

from __future__ import annotations

import functools
import re
import ssl
import threading
import time
from collections.abc import Collection
from types import TracebackType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from siftlib.errors import (
    Blocked,
    BlockedBySite,
    Cancelled,
    FetchFailed,
    QueryError,
    UnreadableContent,
    UnsupportedContent,
)
from siftlib.fetch.models import HTML_TYPES, PDF_TYPE, FetchRequest, FetchResult, Page
from siftlib.fetch.pagecache import PageCache
from siftlib.lazylog import LazyLogger

if TYPE_CHECKING:
    from siftlib.config import FetchConfig
    from siftlib.fetch.browser.renderer import Renderer
    from siftlib.fetch.cache import FetchCache
    from siftlib.fetch.conversion import Converted
    from siftlib.fetch.guard import Guard
    from siftlib.fetch.reader import PageReader
    from siftlib.fetch.workers import WorkerPool
    from siftlib.metrics import Metrics
    from siftlib.net.addresses import Resolver
    from siftlib.net.dial import Connector

# The records are this module's vocabulary too: callers import them here.
__all__ = ["FetchRequest", "FetchResult", "Fetcher", "Page"]

log = LazyLogger("sift")
_HOST_TEXT = re.compile(r"[a-z0-9.:\[\]-]{1,255}")


class Fetcher:
    """Guarded page fetches with pooled pinned connections; one per process, thread-safe."""

    def __init__(
        self,
        settings: FetchConfig,
        *,
        metrics: Metrics | None = None,
        restricted: Collection[str] = (),
        resolver: Resolver | None = None,
        connect: Connector | None = None,
        ssl_context: ssl.SSLContext | None = None,
        pool: WorkerPool | None = None,
        cache: FetchCache | None = None,
    ) -> None:
        self.settings = settings
        self._pool = pool  # None: the process's shared conversion workers
        self.restricted = frozenset(restricted)
        # None: every fetch goes out (`siftlib.fetch.cache`)
        self.cache = (
            None
            if cache is None
            else PageCache(
                cache, max_age=settings.cache_max_age, restricted=self.restricted, metrics=metrics
            )
        )
        self.metrics = metrics
        self._resolver, self._connect, self._ssl_context = resolver, connect, ssl_context
        self._guard: Guard | None = None
        self._reader: PageReader | None = None
        self._opening = threading.Lock()
        self.renderer: Renderer | None = None  # the browser, when `[fetch.browser]` is on
        if settings.browser.enabled:
            from siftlib.fetch.browser.renderer import Renderer

            self.renderer = Renderer(
                settings.browser, guard=self.guard, metrics=metrics, connect=connect
            )

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def guard(self) -> Guard:
        """The rules every hop is vetted by, with the configured pinholes."""
        return self._network()[0]

    @property
    def reader(self) -> PageReader:
        """The guarded GET, with its kept connections."""
        return self._network()[1]

    def _network(self) -> tuple[Guard, PageReader]:
        """Open the guard and the reader with the first fetch: `sift serve` starts without them."""
        with self._opening:
            if self._guard is None or self._reader is None:
                from siftlib.fetch.guard import Guard
                from siftlib.fetch.reader import PageReader

                self._guard = Guard(self.settings.allow, resolver=self._resolver)
                self._reader = PageReader(
                    self.settings,
                    guard=self._guard,
                    connect=self._connect,
                    ssl_context=self._ssl_context,
                )
            return self._guard, self._reader

    def close(self) -> None:
        """Close every kept connection and the browser."""
        with self._opening:
            reader = self._reader
        if reader is not None:
            reader.close()
        if self.renderer is not None:
            self.renderer.close()

    def fetch(self, request: FetchRequest, *, cancel: threading.Event | None = None) -> FetchResult:
        """Fetch a page and convert it as asked, all within one deadline.

        Raise `Blocked`, `FetchFailed`, `QueryError`, or `Cancelled` once `cancel` is set.
        """
        started = time.monotonic()
        status, size, outcome = "error", 0, "error"  # until it ends in a known way
        cache = self.cache
        key = cache.key(request) if cache is not None else ""
        cache_state = "miss"  # also with the cache off: fetch.md §6's line
        try:
            result = cache.get(request, key) if cache is not None else None
            if result is not None:
                status, outcome, cache_state = str(result.status), "ok", "hit"
                return result
            result = self._fetch(request, started, cancel)
            status, size, outcome = str(result.status), result.bytes, "ok"
            if cache is not None:
                cache.put(request, key, result)
            return result
        except Cancelled:
            status = outcome = "cancelled"
            raise
        except Blocked as exc:
            unsupported = isinstance(exc, (UnsupportedContent, UnreadableContent))
            status = outcome = "unsupported" if unsupported else "blocked"
            if request.caller not in self.restricted:  # a caller-less aggregate: fleet only
                self._count("fetch_blocked", rule=exc.rule)
            raise
        except FetchFailed as exc:
            status, outcome = f"failed:{exc.kind}", "failed"
            raise
        except QueryError:
            status = outcome = "invalid"
            raise
        finally:
            self._count("fetch_requests", caller=request.caller, outcome=outcome)
            if size and request.caller not in self.restricted:
                self._count("fetch_bytes", size)
            host = "-" if request.caller in self.restricted else _loggable_host(request.url)
            ms = round((time.monotonic() - started) * 1000)
            log.info(
                "fetch caller=%s host=%s status=%s bytes=%d ms=%d cache=%s",
                request.caller,
                host,
                status,
                size,
                ms,
                cache_state,
            )

    def _count(self, name: str, amount: float = 1, **labels: str) -> None:
        if self.metrics is not None:
            self.metrics.inc(name, amount, **labels)

    def _fetch(
        self, request: FetchRequest, started: float, cancel: threading.Event | None
    ) -> FetchResult:
        from siftlib.fetch.challenge import challenge_of
        from siftlib.fetch.conversion import conversion_pool, convert, read_pdf_page

        pool = self._pool or conversion_pool()
        pool.start(1)  # its imports run while the page is read
        reader = self.reader
        deadline = started + reader.time_limit(request.timeout)
        page = reader.read(request.url, deadline=deadline, cancel=cancel, caller=request.caller)
        if page.media_type in HTML_TYPES or "cf-mitigated" in page.headers:
            what = challenge_of(
                status=page.status, headers=page.headers, body=page.body, url=page.final_url
            )
            if what is not None:
                raise BlockedBySite(what, page.status)
        limit = min(request.max_chars or self.settings.max_chars, self.settings.max_chars)
        if page.media_type == PDF_TYPE:
            return read_pdf_page(
                page,
                request,
                self.settings,
                limit=limit,
                pool=pool,
                deadline=deadline,
                cancel=cancel,
            )

        def converted() -> tuple[Converted, int]:
            return convert(page, request, limit=limit, pool=pool, deadline=deadline, cancel=cancel)

        converted_page, convert_ms = converted()
        rendered = None
        html = page.media_type in HTML_TYPES
        if html and self.renderer is None and (request.render or request.screenshot):
            page.warnings.append("render: the browser is off ([fetch.browser] enabled)")
        if html and self.renderer is not None:
            content = converted_page.document.content
            rendered = self.renderer.rerender(page, request, content, deadline, cancel)
            if rendered is not None:
                converted_page, convert_ms = converted()
        document = converted_page.document
        return FetchResult.of_page(
            page,
            title=document.title,
            description=document.description,
            language=document.language,
            content=document.content,
            links=document.links,
            truncated=page.truncated or converted_page.truncated,
            warnings=[*page.warnings, *converted_page.warnings],
            convert_ms=convert_ms,
            also=document.also,
            render_ms=None if rendered is None else rendered.render_ms,
            screenshot=None if rendered is None else rendered.screenshot,
            page_type=document.page_type,
        )


@functools.lru_cache(maxsize=1024)  # the same pages are asked for again: cache hits
def _loggable_host(url: str) -> str:
    """Return a URL's host for the log line (never its path or query), or "-"."""
    try:
        host = (urlsplit(url.strip()).hostname or "").lower()
    except ValueError:
        return "-"
    return host if _HOST_TEXT.fullmatch(host) else "-"
