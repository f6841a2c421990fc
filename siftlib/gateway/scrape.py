"""The fetch routes' wire shapes, as pure functions: `POST /v1/fetch` and `POST /v2/scrape`.

    request = firecrawl_request(body, caller="agent")      # or raises QueryError
    status, payload = 200, firecrawl_answer(result, request)
    data = firecrawl_body(result, request)                  # the same answer, as bytes

No socket and no server here: the gateway decodes the JSON body, calls these, and writes.
A fetch's errors are answered with the gateway's others (`api.error_answer`).

Decisions the spec leaves open:
- A challenge or block page (`siftlib.fetch.challenge`) is a 403 `blocked by the site`, the site's
  status in `metadata.statusCode` (at the top and in `data.metadata`, where a success has
  it; natively `status`): firecrawl-py reads a 403 as "website not supported".
- Error codes are the spec's labels, word for word: `invalid url`, `blocked`,
  `unsupported option`, `deadline`, `unsupported content type`, `fetch failed`; the error
  sentence starts with its label (`blocked: 127.0.0.1 is a loopback address`,
  `fetch failed: dns`). A field of the wrong type is `invalid request`.
- `/v2/scrape` accepts and ignores what Firecrawl's SDK sends by default (`origin`,
  `onlyMainContent`'s companions, `headers` — never forwarded —, `maxAge`,
  `storeInCache`, `parsers`, …); `timeout` is milliseconds. `includeTags`/`excludeTags`
  (`/v1/fetch`: `include`/`exclude`) are CSS selectors, checked here (`siftlib.fetch.filters`).
  `waitFor` (ms) is waited after load only when the page is rendered; it never slows a
  static page. Formats other than `markdown`, `html`, `rawHtml`, `links` (and `screenshot`,
  a PNG data URL, when the gateway has its browser on: it renders the page) and the options
  `actions`, `location` (non-empty) or a `proxy` other than `basic` are refused by name.
- `/v1/fetch` takes `render: true|false` (absent: `[fetch.browser] render` decides).
- A rendered page's metadata says so: `rendered: true`, with `renderMs` (`/v2/scrape`) or
  `timings.render_ms` (`/v1/fetch`); a static page's answer carries neither.
- `maxAge` (ms) and `storeInCache` drive the fetch cache (`siftlib.fetch.cache`);
  `cacheState` says `hit` or `miss`, and a hit carries `cachedAt`. `scrapeId` is a fresh
  random UUID4, on a hit too (from a generator seeded once: an id, not a secret, and a
  system call per answer was a tenth of a hit's time).
- A hit's answer bytes are encoded once per cached entry (`siftlib.gateway.memo`), with
  the two fields that differ per request (`sourceURL`, `scrapeId`; natively `url`) put in.
- `data` carries only the asked formats (markdown when none is asked); the metadata always.
  Warnings (truncation) join into the top-level `warning` string, absent when there is none.
"""

from __future__ import annotations

import datetime
import functools
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from siftlib.errors import (
    InvalidRequest,
    InvalidURL,
    UnsupportedOption,
)
from siftlib.fetch import filters
from siftlib.fetch.models import FetchRequest, FetchResult
from siftlib.gateway import api, wire
from siftlib.gateway.memo import EntryMemo

__all__ = [
    "ScrapeRequest",
    "firecrawl_answer",
    "firecrawl_body",
    "firecrawl_request",
    "native_body",
    "native_request",
]

NATIVE_FORMATS = ("markdown", "text", "html", "links")
FIRECRAWL_FORMATS = {
    "markdown": "markdown",
    "html": "html",
    "rawHtml": "raw_html",
    "links": "links",
}


@dataclass(frozen=True)
class ScrapeRequest:
    """A `/v2/scrape` call: the fetch to make and the formats to answer with."""

    fetch: FetchRequest
    formats: tuple[str, ...]


def native_request(body: Mapping[str, Any], *, caller: str) -> FetchRequest:
    """Decode a `/v1/fetch` body into a `FetchRequest`, or raise `QueryError`."""
    fmt = body.get("format", "markdown")
    if fmt not in NATIVE_FORMATS:
        raise InvalidRequest(f"invalid request: format must be one of {', '.join(NATIVE_FORMATS)}")
    main = _optional(body, "main_content", bool, True)
    render = body.get("render")
    if render is not None and not isinstance(render, bool):
        raise InvalidRequest("invalid request: render must be true or false")
    return FetchRequest(
        url=_url(body),
        format=fmt,
        main_content=main,
        max_chars=_positive(body, "max_chars"),
        caller=caller,
        include=filters.check(body.get("include"), field="include"),
        exclude=filters.check(body.get("exclude"), field="exclude"),
        render=render,
        max_age=_max_age(body, "max_age", 1),
    )


def firecrawl_request(
    body: Mapping[str, Any], *, caller: str, browser: bool = False
) -> ScrapeRequest:
    """Decode a `/v2/scrape` body into a `ScrapeRequest`, or raise `QueryError`.

    `browser` says whether the gateway renders pages: only then is `screenshot` a format.
    """
    formats = body.get("formats")
    if formats is None:
        formats = ["markdown"]
    if not isinstance(formats, list):
        raise InvalidRequest("invalid request: formats must be a list")
    names: list[str] = []
    for item in formats:
        name = item.get("type") if isinstance(item, dict) else item
        if not isinstance(name, str):
            raise InvalidRequest('invalid request: each format is a string or {"type": …}')
        if name not in FIRECRAWL_FORMATS and not (name == "screenshot" and browser):
            raise UnsupportedOption(f"unsupported option: {name}")
        names.append(name)
    for option in ("actions", "location"):
        if body.get(option):
            raise UnsupportedOption(f"unsupported option: {option}")
    proxy = body.get("proxy")
    if proxy not in (None, "basic"):
        raise UnsupportedOption("unsupported option: proxy")
    timeout_ms = _positive(body, "timeout")
    wait_ms = body.get("waitFor") or 0
    if isinstance(wait_ms, bool) or not isinstance(wait_ms, int) or wait_ms < 0:
        raise InvalidRequest("invalid request: waitFor must be a number of milliseconds")
    main = _optional(body, "onlyMainContent", bool, True)
    names = list(dict.fromkeys(names or ["markdown"]))
    texts = [name for name in names if name != "screenshot"] or ["markdown"]
    request = FetchRequest(
        url=_url(body),
        format=FIRECRAWL_FORMATS[texts[0]],
        also=tuple(FIRECRAWL_FORMATS[name] for name in texts[1:]),
        main_content=main,
        timeout=timeout_ms / 1000 if timeout_ms else None,
        caller=caller,
        include=filters.check(body.get("includeTags"), field="includeTags"),
        exclude=filters.check(body.get("excludeTags"), field="excludeTags"),
        wait_for=wait_ms / 1000,
        screenshot="screenshot" in names,
        **_parsers(body.get("parsers")),
        max_age=_max_age(body, "maxAge", 1000),
        store_in_cache=_optional(body, "storeInCache", bool, True),
    )
    return ScrapeRequest(request, tuple(names))


def firecrawl_request_of(data: bytes, *, caller: str, browser: bool = False) -> ScrapeRequest:
    """Decode a `/v2/scrape` body's bytes into a `ScrapeRequest`, or raise.

    An agent sends the same few bodies again and again (a cache hit's are repeats by
    definition), so small ones are decoded once (`_remembered`): a request is a pure function
    of its bytes, its caller and whether the gateway renders. A refusal is never remembered.
    """
    if len(data) > _REMEMBERED_BYTES:
        return firecrawl_request(api.decode_body(data), caller=caller, browser=browser)
    return _remembered(data, caller, browser)


_REMEMBERED_BYTES = 2048  # 256 bodies of at most this: half a MiB at the most


@functools.lru_cache(maxsize=256)
def _remembered(data: bytes, caller: str, browser: bool) -> ScrapeRequest:
    return firecrawl_request(api.decode_body(data), caller=caller, browser=browser)


@functools.lru_cache(maxsize=1024)  # one entry's time, asked for on each of its hits
def _iso(epoch: float) -> str:
    """Return a time as Firecrawl writes one: ISO 8601 in UTC with milliseconds."""
    moment = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _max_age(body: Mapping[str, Any], key: str, per_second: int) -> float | None:
    """Return a request's cache freshness in seconds (`maxAge` in ms, `max_age` in s)."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise InvalidRequest(f"invalid request: {key} must be a number at least 0")
    return float(value) / per_second


def _parsers(value: Any) -> dict[str, Any]:
    """Decode Firecrawl's `parsers`: absent or `["pdf"]` read PDFs, `[]` returns them as base64."""
    if value is None:
        return {}
    if not isinstance(value, list):
        raise InvalidRequest('invalid request: parsers must be a list such as ["pdf"]')
    options: dict[str, Any] = {"pdf": False}
    for item in value:
        kind = item.get("type") if isinstance(item, dict) else item
        if kind != "pdf":
            raise UnsupportedOption(f"unsupported option: parsers {kind!r}")
        options["pdf"] = True
        pages = item.get("maxPages") if isinstance(item, dict) else None
        if pages is not None:
            if isinstance(pages, bool) or not isinstance(pages, int) or pages < 1:
                raise InvalidRequest("invalid request: parsers maxPages must be a positive integer")
            options["pdf_max_pages"] = pages
    return options


def firecrawl_answer(result: FetchResult, request: ScrapeRequest) -> dict[str, Any]:
    """Return Firecrawl's scrape answer for a fetched page (fetch.md §4.2)."""
    return _firecrawl_answer(result, request, _scrape_id())


def firecrawl_body(result: FetchResult, request: ScrapeRequest) -> bytes:
    """Return `firecrawl_answer(result, request)` as the JSON body the gateway sends."""
    stored = result.stored
    if stored is None:
        return wire.json_body(firecrawl_answer(result, request))
    tag = ("firecrawl", request.formats, result.cached_at)
    parts = _PAGES.get(stored, tag, lambda: _template(stored, result, request))
    if len(parts) != 3:
        return wire.json_body(firecrawl_answer(result, request))
    scrape_id = b'"' + _scrape_id().encode() + b'"'
    return parts[0] + wire.json_text(result.url) + parts[1] + scrape_id + parts[2]


def native_body(result: FetchResult) -> bytes:
    """Return `result.to_native()` as the JSON body the gateway sends."""
    stored = result.stored
    if stored is None:
        return wire.json_body(result.to_native())
    parts = _PAGES.get(stored, ("native", result.cached_at), lambda: _template(stored, result))
    if len(parts) != 2:
        return wire.json_body(result.to_native())
    return parts[0] + wire.json_text(result.url) + parts[1]


# Markers standing for what differs per hit in a remembered answer. Each must be found
# exactly once; a page whose own text holds one is encoded per hit, as a fresh page is.
_URL_MARK, _ID_MARK = "\x00sourceURL\x00", "\x00scrapeId\x00"
_PAGES = EntryMemo[tuple[bytes, ...]]()
_IDS = random.Random()  # seeded from os.urandom once


# A UUID's version (4: random) and variant (RFC 4122) bits, as `uuid.UUID(version=4)` sets them.
_UUID4_KEEP = ~((0xF000 << 64) | (0xC000 << 48))
_UUID4_SET = (0x4000 << 64) | (0x8000 << 48)


def _scrape_id() -> str:
    """Return a fresh random UUID4, without a system call (or a `uuid.UUID`) per answer."""
    text = f"{_IDS.getrandbits(128) & _UUID4_KEEP | _UUID4_SET:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _template(
    stored: FetchResult, hit: FetchResult, request: ScrapeRequest | None = None
) -> tuple[bytes, ...]:
    """Return a hit's answer bytes cut where its URL (and scrape id) go; () if they can't be."""
    marked = stored.as_hit(_URL_MARK, hit.cached_at or 0.0)
    marks: tuple[str, ...] = (_URL_MARK,)
    if request is None:
        data = wire.json_body(marked.to_native())
    else:
        data = wire.json_body(_firecrawl_answer(marked, request, _ID_MARK))
        marks = (_URL_MARK, _ID_MARK)
    parts: list[bytes] = []
    for mark in marks:
        head, *rest = data.split(wire.json_text(mark))
        if len(rest) != 1:
            return ()
        parts.append(head)
        data = rest[0]
    return (*parts, data)


def _firecrawl_answer(
    result: FetchResult, request: ScrapeRequest, scrape_id: str
) -> dict[str, Any]:
    contents = {request.fetch.format: result.content, **result.also}
    data: dict[str, Any] = {}
    for name in request.formats:
        if name == "links":
            data["links"] = list(result.links)
        elif name == "screenshot":
            data["screenshot"] = result.screenshot
        else:
            data[name] = contents[FIRECRAWL_FORMATS[name]]
    data["metadata"] = {
        "title": result.title,
        "description": result.description,
        "language": result.language,
        "sourceURL": result.url,
        "url": result.final_url,
        "statusCode": result.status,
        "contentType": result.content_type,
        "proxyUsed": "basic",
        "cacheState": "miss" if result.cached_at is None else "hit",
        "scrapeId": scrape_id,
    }
    if result.page_type:
        data["metadata"]["pageType"] = result.page_type
    if result.render_ms is not None:
        data["metadata"].update(rendered=True, renderMs=result.render_ms)
    if result.cached_at is not None:
        data["metadata"]["cachedAt"] = _iso(result.cached_at)
    if result.num_pages is not None:
        data["metadata"].update(numPages=result.num_pages)
        if result.author:
            data["metadata"].update(author=result.author)
    answer: dict[str, Any] = {"success": True, "data": data}
    if result.warnings:
        answer["warning"] = "; ".join(result.warnings)
    return answer


def _url(body: Mapping[str, Any]) -> str:
    url = body.get("url")
    if not isinstance(url, str) or not url.strip():
        raise InvalidURL("invalid url: url must be a non-empty string")
    return url.strip()


def _optional(body: Mapping[str, Any], key: str, kind: type, default: Any) -> Any:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise InvalidRequest(f"invalid request: {key} must be {kind.__name__}")
    return value


def _positive(body: Mapping[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidRequest(f"invalid request: {key} must be a positive integer")
    return value
