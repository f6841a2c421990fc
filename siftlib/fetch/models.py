"""What a fetch is asked and what it answers, in every entry point's terms.

    request = FetchRequest(url="https://example.org/post", format="text")
    result = fetcher.fetch(request)      # a FetchResult; result.to_native() is /v1/fetch's
    page = reader.read(request.url)      # a Page: the body as fetched, before conversion

`FetchResult` is also what the fetch cache keeps (`siftlib.fetch.pagecache`) and what the
gateway's client reads an answer back into (`siftlib.gateway.client.fetch_result`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["FORMATS", "HTML_TYPES", "PDF_TYPE", "FetchRequest", "FetchResult", "Page"]

PDF_TYPE = "application/pdf"
HTML_TYPES = frozenset(("text/html", "application/xhtml+xml"))
FORMATS = ("markdown", "text", "html", "raw_html", "links")


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

    @classmethod
    def of_page(cls, page: Page, **read: Any) -> FetchResult:
        """Return the result of reading `page`: its fetch's facts, and what was `read` of it."""
        return cls(
            url=page.url,
            final_url=page.final_url,
            status=page.status,
            content_type=page.content_type,
            media_type=page.media_type,
            fetch_ms=page.fetch_ms,
            bytes=len(page.body),
            **read,
        )

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
