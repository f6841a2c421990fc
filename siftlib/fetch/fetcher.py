"""Reading one web page, safely: the guarded fetch behind `sift fetch`, `/v1/fetch`, `/v2/scrape`.

    with Fetcher(config.fetch) as fetcher:
        result = fetcher.fetch(FetchRequest(url="https://example.org/post"))
        print(result.title, result.content)      # markdown of the main content

`Fetcher.fetch` = `Fetcher.read` (the network, this module) + `siftlib.fetch.convert` (the page).

One fetch, under **one wall-clock deadline** (`min(request timeout, fetch.timeout)`):
- each hop is vetted by `siftlib.fetch.guard` (scheme, names, every resolved address public, or an
  `allow` pinhole) and dialled through `siftlib.net.dial.pinned_transport` to exactly the vetted
  addresses, with SNI and certificate verification for the URL's host (system roots, no
  override). Redirects (301, 302, 303, 307, 308) are followed here, at most `max_redirects`,
  each hop re-vetted and re-pinned; a redirect past that is refused before it is sent;
- every socket wait (connect, TLS, each read and write) ends by the deadline
  (`dial.wall_clock`), so a server that drips a byte a second is cut at the deadline;
- only GET, with our `User-Agent`, `Accept` and `Accept-Encoding: gzip, deflate`; no cookies,
  no credentials, no caller headers, no proxy from the environment;
- the head decides: a content type fetch does not read is refused (`UnsupportedContent`)
  before one byte of the body is read; a missing one is sniffed from the first bytes, and a
  binary body refused there (`_sniff`);
- the body is streamed and decoded here (not by httpx), `decompress(max_length=…)`, so the
  `max_bytes` cap applies to the decoded bytes: a decompression bomb stops at the cap, with
  at most one 64 KiB chunk of slack in memory. Past the cap: truncated, with a warning;
- at most `per_host` fetches to one host run at once; the others wait, within the deadline.

Connections: one pinned transport per (origin, vetted addresses), kept alive and reused by
later fetches to the same place (at most 32 kept, least recently used dropped first). A new
answer from DNS gives a new transport, so nothing is ever sent to an address not vetted.

Decisions the spec leaves open: a 304 or 1xx is not followed; a redirect without a usable
`Location` is returned as the page it is; of a `Content-Type` sent twice, the last counts;
the deadline covers a name lookup too (on a small thread pool); errors are
`FetchFailed(kind)` with kind `dns`, `connect`, `tls`, `deadline`, `reset` (the connection
broke), `cut` (the body ended early), `protocol` (not HTTP) or `encoding` (a body we cannot
decode).
"""

from __future__ import annotations

import atexit
import base64
import dataclasses
import functools
import html
import json
import os
import re
import ssl
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx

from siftlib.errors import (
    Blocked,
    BlockedBySite,
    Cancelled,
    FetchFailed,
    QueryError,
    UnreadableContent,
    UnsupportedContent,
)
from siftlib.fetch.cache import Recent
from siftlib.fetch.challenge import challenge_of
from siftlib.fetch.guard import Guard, Hop
from siftlib.fetch.workers import WorkCancelled, WorkerPool, WorkFailed, WorkTimeout
from siftlib.lazylog import LazyLogger
from siftlib.net.dial import (
    CANCEL_POLL,
    Connector,
    Resolver,
    current_cancel,
    pinned_transport,
    wall_clock,
)

if TYPE_CHECKING:
    from siftlib.config import FetchConfig
    from siftlib.fetch.browser.renderer import Renderer
    from siftlib.fetch.cache import FetchCache
    from siftlib.fetch.convert import Document
    from siftlib.fetch.pdf import PdfRead
    from siftlib.metrics import Metrics

__all__ = ["FetchRequest", "FetchResult", "Fetcher", "Page"]

PDF_TYPE = "application/pdf"
# A `.pdf` URL answered with one of these is read as a PDF when its body starts like one.
_GENERIC_TYPES = frozenset(
    ("application/octet-stream", "binary/octet-stream", "application/download")
)
ACCEPTED_TYPES = frozenset(
    (
        *("text/html", "application/xhtml+xml", "text/plain", "text/markdown"),
        *("application/json", PDF_TYPE, "application/x-pdf"),
    )
)
HTML_TYPES = frozenset(("text/html", "application/xhtml+xml"))
FORMATS = ("markdown", "text", "html", "raw_html", "links")
_REDIRECTS = frozenset((301, 302, 303, 307, 308))
_ACCEPT = (
    "text/html,application/xhtml+xml,text/markdown;q=0.9,text/plain;q=0.9,"
    "application/json;q=0.8,*/*;q=0.1"
)
_KEPT_TRANSPORTS = 32
_HOST_TEXT = re.compile(r"[a-z0-9.:\[\]-]{1,255}")
# WHATWG MIME Sniffing: the two signatures of a binary type that can start with text only,
# and the "binary data bytes" no text has (not ESC: ISO-2022-JP text switches sets with it).
_TEXT_LIKE_SIGNATURES = {b"%!PS-Adobe-": "application/postscript"}
_BINARY_BYTE = re.compile(rb"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")

log = LazyLogger("sift")
# Conversion: the worker processes, each call's address-space limit (a 10 MB page converted
# whole peaks near 400 MB), and the HTML size past which main-content extraction is skipped
# (its cost grows with the square of the size: docs "Reading pages", hostile pages).
POOL_SIZE = max(2, min(4, os.cpu_count() or 2))
CONVERT_MEMORY = 1 << 30
# The fetch cache's latest answers kept decoded in memory, in bytes of their stored form.
RECENT_BYTES = 32 * 1024 * 1024
PDF_MEMORY = 1 << 30  # a PDF reader's address space: a 10 MiB PDF of text reads in 200 MB
MAIN_CONTENT_MAX_BYTES = 1 << 20
_PRELOAD = ("siftlib.fetch.fetcher", "siftlib.fetch.convert", "trafilatura")
_POOL: WorkerPool | None = None
_POOL_LOCK = threading.Lock()


@dataclass(frozen=True)
class FetchRequest:
    """One page to read, as a caller asks for it."""

    url: str
    format: str = "markdown"  # one of FORMATS: the result's `content`
    also: tuple[str, ...] = ()  # further FORMATS, in the result's `also`
    main_content: bool = True
    max_chars: int | None = None
    timeout: float | None = None  # seconds; capped by fetch.timeout
    caller: str = "local"
    include: tuple[str, ...] = ()  # CSS selectors: keep only these elements (siftlib.fetch.filters)
    exclude: tuple[str, ...] = ()  # CSS selectors: remove these elements
    pdf: bool = True  # read a PDF's text; False: the file itself, base64 (`parsers: []`)
    pdf_max_pages: int | None = None  # at most fetch.pdf_max_pages
    max_age: float | None = None  # seconds a cached answer may be old; None: fetch.cache_max_age
    store_in_cache: bool = True  # False: fetch without storing the answer
    render: bool | None = None  # None: `[fetch.browser] render` decides; needs the browser on
    wait_for: float = 0.0  # seconds to wait after load, when the page is rendered
    screenshot: bool = False  # a PNG of the rendered page (renders it)


@dataclass
class Page:
    """The body of a page as fetched: decoded bytes, before any conversion."""

    url: str
    final_url: str
    status: int
    content_type: str  # the header as sent, e.g. "text/html; charset=utf-8"
    media_type: str  # "text/html"
    body: bytes
    truncated: bool
    warnings: list[str]
    fetch_ms: int
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names


@dataclass
class FetchResult:
    """A page read and converted: what every entry point answers with."""

    url: str
    final_url: str
    status: int
    content_type: str
    media_type: str
    title: str
    description: str
    language: str
    content: str
    links: list[str]
    truncated: bool
    warnings: list[str]
    fetch_ms: int
    convert_ms: int
    bytes: int
    also: dict[str, str] = field(default_factory=dict, repr=False)
    render_ms: int | None = None  # set when the page was rendered by the browser
    screenshot: str | None = field(default=None, repr=False)
    author: str = ""  # a PDF's document information
    num_pages: int | None = None  # set for a PDF
    cached_at: float | None = None  # epoch seconds: answered from the fetch cache
    page_type: str = ""  # an HTML page's kind (siftlib.fetch.pagetype), else ""
    # A cache hit: the entry as the cache's memory front holds it, so the gateway encodes
    # its answer once per entry, not once per hit (`siftlib.gateway.scrape`).
    stored: FetchResult | None = field(default=None, repr=False, compare=False)

    def as_hit(self, url: str, cached_at: float) -> FetchResult:
        """Return this stored answer as a cache hit for `url` (shallow: it is never changed)."""
        hit = object.__new__(FetchResult)
        hit.__dict__.update(self.__dict__)  # a sixth of what `copy.copy` costs, on every hit
        hit.url, hit.cached_at, hit.stored = url, cached_at, self
        return hit

    def to_native(self) -> dict[str, object]:
        """Return the native `/v1/fetch` envelope (fetch.md §4.1), `rendered` when it was."""
        timings: dict[str, int] = {"fetch_ms": self.fetch_ms, "convert_ms": self.convert_ms}
        rendered: dict[str, object] = {}
        if self.render_ms is not None:
            timings["render_ms"] = self.render_ms
            rendered["rendered"] = True
        pdf: dict[str, object] = {}
        if self.num_pages is not None:
            pdf = {"author": self.author, "num_pages": self.num_pages}
        return {
            "url": self.url,
            "final_url": self.final_url,
            "status": self.status,
            "content_type": self.media_type,
            "title": self.title,
            "description": self.description,
            "language": self.language,
            **pdf,
            "content": self.content,
            "links": self.links,
            "truncated": self.truncated,
            "warnings": self.warnings,
            **({"page_type": self.page_type} if self.page_type else {}),
            **rendered,
            **({"cached": True} if self.cached_at is not None else {}),
            "timings": timings,
        }


@dataclass(frozen=True)
class _Shape:
    """What a conversion needs besides the body: the page's type and what was asked."""

    content_type: str
    media_type: str
    url: str
    format: str
    also: tuple[str, ...]
    main_content: bool
    max_chars: int
    include: tuple[str, ...]
    exclude: tuple[str, ...]


@dataclass
class _Converted:
    """A conversion's outcome, as a worker sends it back."""

    document: Document
    warnings: list[str]
    truncated: bool


def convert_page(body: bytes, shape: _Shape) -> _Converted:
    """Convert a body as asked, every format cut at `max_chars`: run in a conversion worker."""
    from siftlib.fetch.convert import convert

    warnings = []
    main_content = shape.main_content
    html_page = shape.media_type in HTML_TYPES
    if main_content and html_page and len(body) > MAIN_CONTENT_MAX_BYTES:
        main_content = False
        warnings.append(
            f"main content: the page passed {MAIN_CONTENT_MAX_BYTES} bytes, so it is the "
            "whole page (finding the main content of a page this large costs minutes)"
        )
    document = convert(
        body,
        content_type=shape.content_type,
        media_type=shape.media_type,
        url=shape.url,
        format=shape.format,
        also=shape.also,
        main_content=main_content,
        include=shape.include,
        exclude=shape.exclude,
    )
    warnings += document.warnings
    texts, cut = _cut({"": document.content, **document.also}, shape.max_chars, warnings)
    document.content = texts.pop("")
    document.also = texts
    return _Converted(document, warnings, cut)


def _cut(texts: dict[str, str], limit: int, warnings: list[str]) -> tuple[dict[str, str], bool]:
    """Cut every format at `max_chars`; say so in `warnings` when one was longer."""
    cut = any(len(text) > limit for text in texts.values())
    if cut:
        warnings.append(f"truncated: the content passed max_chars ({limit} characters)")
    return {name: text[:limit] for name, text in texts.items()}, cut


@functools.lru_cache(maxsize=4096)  # the same requests come again: that is why they hit
def _fetch_key(request: FetchRequest, caller_class: str) -> str:
    from siftlib.fetch.cache import fetch_key

    return fetch_key(request, caller_class=caller_class)


def _encoded(result: FetchResult) -> bytes:
    """Return a result as the fetch cache keeps it (JSON, without a screenshot)."""
    fields = dataclasses.asdict(result)
    for transient in ("screenshot", "cached_at", "stored"):
        fields.pop(transient, None)
    return json.dumps(fields, ensure_ascii=False).encode()


def _decoded(value: bytes) -> FetchResult | None:
    """Return a stored result, or None when the entry does not read as one."""
    try:
        fields = json.loads(value)
        known = {field.name for field in dataclasses.fields(FetchResult)}
        return FetchResult(**{name: v for name, v in fields.items() if name in known})
    except (ValueError, TypeError, AttributeError):
        return None


def _read_pdf(
    pool: WorkerPool, body: bytes, pages: int, deadline: float, cancel: threading.Event | None
) -> PdfRead:
    """Read a PDF in a worker; what it cannot read is `UnreadableContent` with the reason."""
    from siftlib.fetch.pdf import read_pdf

    try:
        read = pool.run(read_pdf, body, pages, deadline=deadline, memory=PDF_MEMORY, cancel=cancel)
    except WorkTimeout:
        raise FetchFailed("deadline", "fetch failed: deadline (reading the PDF)") from None
    except WorkCancelled:
        raise Cancelled("cancelled") from None
    except WorkFailed as exc:
        if exc.kind == "memory":
            reason = f"the PDF reader passed its memory limit ({PDF_MEMORY} bytes)"
        else:  # PDFium ends its process on a failed allocation too
            reason = "the PDF reader crashed on this file"
        raise UnreadableContent(reason) from None
    if read.problem:
        raise UnreadableContent(read.problem)
    return read


def conversion_pool() -> WorkerPool:
    """Return the process's conversion workers, started on first use, stopped at exit."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = WorkerPool(POOL_SIZE, preload=_PRELOAD)
            atexit.register(_POOL.close)
        return _POOL


class HostSlots:
    """At most `per_host` holders per host at once; the others wait, until a deadline."""

    def __init__(self, per_host: int) -> None:
        self.per_host = per_host
        self._active: dict[str, int] = {}
        self._cond = threading.Condition()

    def acquire(self, host: str, deadline: float, cancel: threading.Event | None = None) -> bool:
        """Take a slot for `host`; False when none freed up before `deadline` (monotonic).

        Raise `Cancelled` when `cancel` is set while waiting.
        """
        with self._cond:
            while self._active.get(host, 0) >= self.per_host:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                if cancel is not None:
                    if cancel.is_set():
                        raise Cancelled("cancelled")
                    left = min(left, CANCEL_POLL)
                self._cond.wait(left)
            self._active[host] = self._active.get(host, 0) + 1
            return True

    def release(self, host: str) -> None:
        """Give a slot back."""
        with self._cond:
            count = self._active.pop(host) - 1
            if count:
                self._active[host] = count
            self._cond.notify_all()


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
        self.cache = cache  # None: every fetch goes out (`siftlib.fetch.cache`)
        self._recent = Recent(RECENT_BYTES)  # the latest answers, decoded (`Recent`)
        if cache is not None and metrics is not None:  # both counters show from the start
            metrics.inc("fetch_cache_hit", 0)
            metrics.inc("fetch_cache_miss", 0)
        self.metrics = metrics
        self.restricted = frozenset(restricted)
        self.guard = Guard(settings.allow, resolver=resolver)
        self._slots = HostSlots(settings.per_host)
        self._connect = connect
        self._ssl_context = ssl_context
        self._transports: OrderedDict[tuple[object, ...], httpx.HTTPTransport] = OrderedDict()
        self._lock = threading.Lock()
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

    def close(self) -> None:
        """Close every kept connection and the lookup threads."""
        with self._lock:
            transports = list(self._transports.values())
            self._transports.clear()
        for transport in transports:
            transport.close()
        if self.renderer is not None:
            self.renderer.close()

    def fetch(self, request: FetchRequest, *, cancel: threading.Event | None = None) -> FetchResult:
        """Fetch a page and convert it as asked, all within one deadline.

        Raise `Blocked`, `FetchFailed`, `QueryError`, or `Cancelled` once `cancel` is set.
        """
        started = time.monotonic()
        status, size, outcome = "error", 0, "error"  # until it ends in a known way
        key = self._cache_key(request)
        cache_state = "miss"  # also with the cache off: fetch.md §6's line
        try:
            result = self._cached(request, key)
            if result is not None:
                status, outcome, cache_state = str(result.status), "ok", "hit"
                return result
            result = self._fetch(request, started, cancel)
            status, size, outcome = str(result.status), result.bytes, "ok"
            self._store(request, key, result)
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

    def _cache_key(self, request: FetchRequest) -> str:
        """Return the request's cache key, or "" when the cache is off for it."""
        if self.cache is None or request.screenshot:
            return ""
        from siftlib.search.plan import caller_class

        return _fetch_key(request, caller_class(request.caller, self.restricted))

    def _cached(self, request: FetchRequest, key: str) -> FetchResult | None:
        """Return a stored answer younger than the request's max age, counting hit or miss."""
        if not key or self.cache is None:
            return None
        limit = self.settings.cache_max_age
        max_age = limit if request.max_age is None else min(request.max_age, limit)
        now = time.time()
        found = self._recent.get(key, now=now, max_age=max_age) if max_age > 0 else None
        if found is None and max_age > 0:
            from siftlib.fetch.cache import CacheFault

            try:
                entry = self.cache.get(key, now=now, max_age=max_age)
            except CacheFault as exc:
                log.warning("fetch cache: read failed (%s); fetching uncached", exc)
                entry = None
            stored = _decoded(entry.value) if entry is not None else None
            if entry is not None and stored is not None:
                found = stored, entry.stored_at
                self._recent.put(key, stored, stored_at=entry.stored_at, size=len(entry.value))
        counted = request.caller not in self.restricted  # a caller-less aggregate: fleet only
        if found is None:
            if counted:
                self._count("fetch_cache_miss")
            return None
        if counted:
            self._count("fetch_cache_hit")
        answer: FetchResult = found[0]
        return answer.as_hit(request.url, found[1])

    def _store(self, request: FetchRequest, key: str, result: FetchResult) -> None:
        """Keep a complete, successful answer (2xx, nothing cut, no warning) in the cache."""
        if not key or self.cache is None or not request.store_in_cache:
            return
        if not 200 <= result.status < 300 or result.truncated or result.warnings:
            return
        from siftlib.fetch.cache import CacheFault

        value, now = _encoded(result), time.time()
        try:
            self.cache.put(key, value, now=now)
        except CacheFault as exc:
            log.warning("fetch cache: write failed (%s); the answer is not kept", exc)
            return
        kept = dataclasses.replace(result, screenshot=None, cached_at=None)
        self._recent.put(key, kept, stored_at=now, size=len(value))

    def _count(self, name: str, amount: float = 1, **labels: str) -> None:
        if self.metrics is not None:
            self.metrics.inc(name, amount, **labels)

    def _fetch(
        self, request: FetchRequest, started: float, cancel: threading.Event | None
    ) -> FetchResult:
        pool = self._pool or conversion_pool()
        pool.start(1)  # its imports run while the page is read
        deadline = started + self._timeout(request.timeout)
        page = self.read(request.url, deadline=deadline, cancel=cancel, caller=request.caller)
        if page.media_type in HTML_TYPES or "cf-mitigated" in page.headers:
            what = challenge_of(
                status=page.status, headers=page.headers, body=page.body, url=page.final_url
            )
            if what is not None:
                raise BlockedBySite(what, page.status)
        limit = min(request.max_chars or self.settings.max_chars, self.settings.max_chars)
        if page.media_type == PDF_TYPE:
            return self._pdf(page, request, limit, pool, deadline, cancel)

        def converted() -> tuple[_Converted, int]:
            started = time.perf_counter()
            shape = _Shape(
                page.content_type,
                page.media_type,
                page.final_url,
                request.format,
                request.also,
                request.main_content,
                limit,
                request.include,
                request.exclude,
            )
            try:
                outcome = pool.run(
                    convert_page,
                    page.body,
                    shape,
                    deadline=deadline,
                    memory=CONVERT_MEMORY,
                    cancel=cancel,
                )
            except WorkTimeout:
                raise FetchFailed(
                    "deadline", "fetch failed: deadline (converting the page)"
                ) from None
            except WorkCancelled:
                raise Cancelled("cancelled") from None
            except WorkFailed as exc:
                why = "the page needs more memory" if exc.kind == "memory" else exc.kind
                raise FetchFailed("convert", f"fetch failed: convert ({why})") from None
            return outcome, round((time.perf_counter() - started) * 1000)

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
        return FetchResult(
            url=page.url,
            final_url=page.final_url,
            status=page.status,
            content_type=page.content_type,
            media_type=page.media_type,
            title=document.title,
            description=document.description,
            language=document.language,
            content=document.content,
            links=document.links,
            truncated=page.truncated or converted_page.truncated,
            warnings=[*page.warnings, *converted_page.warnings],
            fetch_ms=page.fetch_ms,
            convert_ms=convert_ms,
            bytes=len(page.body),
            also=document.also,
            render_ms=None if rendered is None else rendered.render_ms,
            screenshot=None if rendered is None else rendered.screenshot,
            page_type=document.page_type,
        )

    def _pdf(
        self,
        page: Page,
        request: FetchRequest,
        limit: int,
        pool: WorkerPool,
        deadline: float,
        cancel: threading.Event | None,
    ) -> FetchResult:
        """Read a PDF's text in a conversion worker (siftlib.fetch.pdf), or its bytes in base64."""
        if page.truncated:
            raise UnreadableContent(
                f"the PDF is larger than max_bytes ({self.settings.max_bytes} bytes)"
            )
        started = time.perf_counter()
        warnings = list(page.warnings)
        num_pages, title, author = None, "", ""
        if request.pdf:
            pages = min(
                request.pdf_max_pages or self.settings.pdf_max_pages, self.settings.pdf_max_pages
            )
            read = _read_pdf(pool, page.body, pages, deadline, cancel)
            formats = {"markdown": read.markdown, "text": read.text}
            num_pages, title, author = read.num_pages, read.title, read.author
            warnings += read.warnings
        else:
            encoded = base64.b64encode(page.body).decode("ascii")
            formats = {"markdown": encoded, "text": encoded}
        formats["html"] = formats["raw_html"] = f"<pre>{html.escape(formats['text'])}</pre>"
        formats["links"] = ""
        asked = {name: formats[name] for name in (request.format, *request.also)}
        texts, cut = _cut(asked, limit, warnings)
        content = texts.pop(request.format)
        return FetchResult(
            url=page.url,
            final_url=page.final_url,
            status=page.status,
            content_type=page.content_type,
            media_type=page.media_type,
            title=title,
            description="",
            language="",
            content=content,
            links=[],
            truncated=cut,
            warnings=warnings,
            fetch_ms=page.fetch_ms,
            convert_ms=round((time.perf_counter() - started) * 1000),
            bytes=len(page.body),
            also=texts,
            author=author,
            num_pages=num_pages,
        )

    def _timeout(self, asked: float | None) -> float:
        """Return a fetch's time limit: the request's, capped by `fetch.timeout`."""
        return self.settings.timeout if asked is None else min(asked, self.settings.timeout)

    def read(
        self,
        url: str,
        *,
        timeout: float | None = None,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
        caller: str = "local",
    ) -> Page:
        """Fetch a page's body through the guard, following redirects; no conversion.

        It ends by `deadline` (monotonic), else `timeout` from now (capped by the config).
        """
        started = time.monotonic()
        if deadline is None:
            deadline = started + self._timeout(timeout)
        previous: httpx.URL | None = None
        current = url
        with wall_clock(deadline, cancel=cancel):
            for hops in range(self.settings.max_redirects + 1):
                hop = self.guard.vet(
                    current, timeout=deadline - time.monotonic(), previous=previous, caller=caller
                )
                outcome = self._exchange(hop, deadline, started)
                if isinstance(outcome, Page):
                    outcome.url = url
                    return outcome
                if hops == self.settings.max_redirects:
                    break
                previous, current = hop.url, outcome
        raise Blocked("redirects", f"blocked: more than {self.settings.max_redirects} redirects")

    def _exchange(self, hop: Hop, deadline: float, started: float) -> Page | str:
        """Send one hop; return its page, or the absolute URL it redirects to."""
        if not self._slots.acquire(hop.host, deadline, current_cancel()):
            raise FetchFailed("deadline", "fetch failed: deadline (waiting for a per-host slot)")
        try:
            return self._send(hop, deadline, started)
        finally:
            self._slots.release(hop.host)

    def _send(self, hop: Hop, deadline: float, started: float) -> Page | str:
        left = max(deadline - time.monotonic(), 0.001)
        request = httpx.Request(
            "GET",
            hop.url,
            headers={
                "User-Agent": self.settings.user_agent,
                "Accept": _ACCEPT,
                "Accept-Encoding": "gzip, deflate",
            },
            extensions={"timeout": {"connect": left, "read": left, "write": left, "pool": left}},
        )
        with _failures():
            response = self._transport(hop).handle_request(request)
        try:
            location = response.headers.get("location", "").strip()
            if response.status_code in _REDIRECTS and location:
                try:
                    return str(hop.url.join(location))
                except httpx.InvalidURL:
                    pass  # no usable target: the redirect page is the answer
            # Sent twice, a header comes joined ("text/html, text/html; charset=utf-8"): the
            # last one is the type, as for a browser (WHATWG Fetch, "extract a MIME type").
            content_type = (response.headers.get_list("content-type") or [""])[-1].strip()
            media_type = content_type.split(";", 1)[0].strip().lower()
            generic_pdf = media_type in _GENERIC_TYPES and hop.url.path.lower().endswith(".pdf")
            if media_type and media_type not in ACCEPTED_TYPES and not generic_pdf:
                raise UnsupportedContent(media_type)
            body, truncated = self._body(response, "" if generic_pdf else media_type)
            if generic_pdf:
                if not body.startswith(b"%PDF-"):
                    raise UnsupportedContent(media_type)
                media_type = PDF_TYPE
            media_type = PDF_TYPE if media_type == "application/x-pdf" else media_type
            media_type = media_type or _sniff(body)
            warnings = []
            if truncated:
                cap = self.settings.max_bytes
                warnings.append(f"truncated: the page passed max_bytes ({cap} bytes)")
            return Page(
                url=str(hop.url),
                final_url=str(hop.url),
                status=response.status_code,
                content_type=content_type or media_type,
                media_type=media_type,
                body=body,
                truncated=truncated,
                warnings=warnings,
                fetch_ms=round((time.monotonic() - started) * 1000),
                headers=dict(response.headers.items()),
            )
        finally:
            response.close()

    def _body(self, response: httpx.Response, media_type: str) -> tuple[bytes, bool]:
        """Read the decoded body up to `max_bytes`; True when it was cut there."""
        cap = self.settings.max_bytes
        decoder = _decoder(response.headers.get("content-encoding", ""))
        parts: list[bytes] = []
        size = 0
        with _failures(reading=True):
            for chunk in _raw(response):
                data = decoder(chunk, cap - size + 1)
                if not media_type and not size and data:
                    _sniff(data)  # a binary body is refused before more of it is read
                parts.append(data)
                size += len(data)
                if size > cap:
                    return b"".join(parts)[:cap], True
        return b"".join(parts), False

    def _transport(self, hop: Hop) -> httpx.HTTPTransport:
        key = (hop.url.scheme, hop.url.raw_host, hop.url.port, hop.addresses)
        with self._lock:
            transport = self._transports.get(key)
            if transport is not None:
                self._transports.move_to_end(key)
                return transport
            transport = pinned_transport(
                hop.url, hop.addresses, ssl_context=self._ssl_context, connect=self._connect
            )
            self._transports[key] = transport
            dropped = (
                self._transports.popitem(last=False)[1]
                if len(self._transports) > _KEPT_TRANSPORTS
                else None
            )
        if dropped is not None:
            dropped.close()
        return transport


def _raw(response: httpx.Response) -> Iterator[bytes]:
    """Yield the body as it arrives on the wire (still compressed)."""
    stream = response.stream
    assert isinstance(stream, httpx.SyncByteStream)
    yield from stream


Decoder = Callable[[bytes, int], bytes]


def _decoder(encoding: str) -> Decoder:
    """Return a bounded decoder for a `Content-Encoding` (`gzip`, `deflate` or none)."""
    coding = encoding.strip().lower()
    if coding in ("", "identity"):
        return lambda data, room: data
    if coding in ("gzip", "x-gzip"):
        return _Inflate(zlib.MAX_WBITS | 16)
    if coding == "deflate":
        return _Inflate(None)
    raise FetchFailed("encoding", f"fetch failed: encoding ({coding} is not supported)")


class _Inflate:
    """Inflate a stream, never producing more than the room left under the byte cap."""

    def __init__(self, wbits: int | None) -> None:
        self._wbits = wbits
        self._inflater: zlib._Decompress | None = None

    def __call__(self, data: bytes, room: int) -> bytes:
        if self._inflater is None:
            wbits = self._wbits
            if wbits is None:  # "deflate" is zlib-wrapped by the RFC, raw by some servers
                wbits = zlib.MAX_WBITS if len(data) > 1 and _zlib_header(data) else -zlib.MAX_WBITS
            self._inflater = zlib.decompressobj(wbits)
        try:
            return self._inflater.decompress(data, max(room, 1))
        except zlib.error:
            raise FetchFailed("encoding", "fetch failed: encoding (a corrupt body)") from None


def _zlib_header(data: bytes) -> bool:
    return data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0


def _sniff(head: bytes) -> str:
    """Guess the media type of a body sent without one from its first bytes; refuse binary."""
    if head.startswith(b"%PDF-"):
        return PDF_TYPE
    for signature, media_type in _TEXT_LIKE_SIGNATURES.items():
        if head.startswith(signature):
            raise UnsupportedContent(media_type)
    start = head[:1024].lstrip().lower()
    if start.startswith((b"<!doctype html", b"<html", b"<head", b"<body", b"<!--")):
        return "text/html"
    if _BINARY_BYTE.search(start):
        raise UnsupportedContent("application/octet-stream")
    return "text/plain"


@contextmanager
def _failures(*, reading: bool = False) -> Iterator[None]:
    """Translate httpx's transport errors into `FetchFailed` kinds, at this one boundary."""
    try:
        yield
    except httpx.TimeoutException:
        raise FetchFailed("deadline", "fetch failed: deadline") from None
    except httpx.ConnectError as exc:
        raise FetchFailed("tls" if _caused_by(exc, ssl.SSLError) else "connect") from None
    except httpx.RemoteProtocolError:
        raise FetchFailed("cut" if reading else "protocol") from None
    except httpx.TransportError:
        raise FetchFailed("reset") from None


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """Tell whether `kind` is anywhere in an exception's chain of causes."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@functools.lru_cache(maxsize=1024)  # the same pages are asked for again: cache hits
def _loggable_host(url: str) -> str:
    """Return a URL's host for the log line (never its path or query), or "-"."""
    try:
        host = (urlsplit(url.strip()).hostname or "").lower()
    except ValueError:
        return "-"
    return host if _HOST_TEXT.fullmatch(host) else "-"
