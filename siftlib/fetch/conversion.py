"""Turning a fetched page into the asked formats, in the conversion workers.

    converted, convert_ms = convert(page, request, limit=limit, pool=pool, deadline=deadline)
    result = read_pdf_page(page, request, settings, limit=limit, pool=pool, deadline=deadline)

HTML, text and JSON go through `siftlib.fetch.convert`, PDFs through `siftlib.fetch.pdf`, each
in a worker process of `conversion_pool()` (`siftlib.fetch.workers`): bounded in memory, killed
at the fetch's deadline, so a page that costs minutes or a parser that crashes costs one
failed fetch, never the gateway. Every format is cut at `max_chars` in one place (`_cut`).
"""

from __future__ import annotations

import atexit
import base64
import html
import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from siftlib.errors import Cancelled, FetchFailed, UnreadableContent
from siftlib.fetch.models import HTML_TYPES, FetchRequest, FetchResult, Page
from siftlib.fetch.workers import WorkCancelled, WorkerPool, WorkFailed, WorkTimeout

if TYPE_CHECKING:
    from siftlib.config import FetchConfig
    from siftlib.fetch.convert import Document
    from siftlib.fetch.pdf import PdfRead

__all__ = ["Converted", "convert", "convert_page", "conversion_pool", "read_pdf_page"]

# Conversion: the worker processes, each call's address-space limit (a 10 MB page converted
# whole peaks near 400 MB), and the HTML size past which main-content extraction is skipped
# (its cost grows with the square of the size: docs "Reading pages", hostile pages).
POOL_SIZE = max(2, min(4, os.cpu_count() or 2))
CONVERT_MEMORY = 1 << 30
PDF_MEMORY = 1 << 30  # a PDF reader's address space: a 10 MiB PDF of text reads in 200 MB
MAIN_CONTENT_MAX_BYTES = 1 << 20
_PRELOAD = ("siftlib.fetch.conversion", "siftlib.fetch.convert", "trafilatura")
_POOL: WorkerPool | None = None
_POOL_LOCK = threading.Lock()


def conversion_pool() -> WorkerPool:
    """Return the process's conversion workers, started on first use, stopped at exit."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = WorkerPool(POOL_SIZE, preload=_PRELOAD)
            atexit.register(_POOL.close)
        return _POOL


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
class Converted:
    """A conversion's outcome, as a worker sends it back."""

    document: Document
    warnings: list[str]
    truncated: bool


def convert_page(body: bytes, shape: _Shape) -> Converted:
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
    return Converted(document, warnings, cut)


def _cut(texts: dict[str, str], limit: int, warnings: list[str]) -> tuple[dict[str, str], bool]:
    """Cut every format at `max_chars`; say so in `warnings` when one was longer."""
    cut = any(len(text) > limit for text in texts.values())
    if cut:
        warnings.append(f"truncated: the content passed max_chars ({limit} characters)")
    return {name: text[:limit] for name, text in texts.items()}, cut


def convert(
    page: Page,
    request: FetchRequest,
    *,
    limit: int,
    pool: WorkerPool,
    deadline: float,
    cancel: threading.Event | None = None,
) -> tuple[Converted, int]:
    """Convert a page as asked in a conversion worker; return it with the time it took (ms)."""
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
        raise FetchFailed("deadline", "fetch failed: deadline (converting the page)") from None
    except WorkCancelled:
        raise Cancelled("cancelled") from None
    except WorkFailed as exc:
        why = "the page needs more memory" if exc.kind == "memory" else exc.kind
        raise FetchFailed("convert", f"fetch failed: convert ({why})") from None
    return outcome, round((time.perf_counter() - started) * 1000)


def read_pdf_page(
    page: Page,
    request: FetchRequest,
    settings: FetchConfig,
    *,
    limit: int,
    pool: WorkerPool,
    deadline: float,
    cancel: threading.Event | None,
) -> FetchResult:
    """Read a PDF's text in a conversion worker (siftlib.fetch.pdf), or its bytes in base64."""
    if page.truncated:
        raise UnreadableContent(f"the PDF is larger than max_bytes ({settings.max_bytes} bytes)")
    started = time.perf_counter()
    warnings = list(page.warnings)
    num_pages, title, author = None, "", ""
    if request.pdf:
        pages = min(request.pdf_max_pages or settings.pdf_max_pages, settings.pdf_max_pages)
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
    return FetchResult.of_page(
        page,
        title=title,
        description="",
        language="",
        content=content,
        links=[],
        truncated=cut,
        warnings=warnings,
        convert_ms=round((time.perf_counter() - started) * 1000),
        also=texts,
        author=author,
        num_pages=num_pages,
    )


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
