"""From bytes to a parsed page: the charset as a browser reads it, lxml's parser, the head.

1. decode (`decode`): a BOM, else the `Content-Type` charset, else `<meta charset>` or
   http-equiv in the first 4 KiB, else strict UTF-8, else windows-1252 — never an exception
   on bad bytes (undecodable bytes become U+FFFD). As browsers do (WHATWG Encoding), only
   a label for one of the web's encodings counts (`_WEB_ENCODINGS`: not Python's `idna`,
   `punycode`, `undefined` or `utf-7`, which raise, drop bytes or smuggle markup), each
   decoded as a browser does (ISO-8859-1 and ASCII mean windows-1252, Shift_JIS means
   windows-31J, …), and a `<meta>` naming UTF-16 means UTF-8;
2. parse with lxml (libxml2's HTML parser: forgiving, and ten times the speed of the
   stdlib's `html.parser` on a 100 KB page; every element an `HtmlElement`, see
   `_html_parser`); title, description and language from the head
   (`<title>`/`og:title`, `description`/`og:description`, `<html lang>`/`Content-Language`);
   every `http(s)` link, absolute against `<base href>` or the page's URL, in page order,
   without repeats.
"""

from __future__ import annotations

import codecs
import functools
import re
import threading
from typing import Any
from urllib.parse import urljoin, urlsplit

import lxml.etree
import lxml.html

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_:.+-]+)""", re.I)


_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")


_CONTROLS = "".join(map(chr, (*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20))))


_CONTROL = re.compile(f"[{re.escape(_CONTROLS)}]")


# The encodings of the WHATWG Encoding standard, by Python's codec names. A label for any
# other codec is ignored: Python's also hold transforms and encodings no browser knows.
_WEB_ENCODINGS = frozenset(
    (
        *("utf-8", "utf-16-le", "utf-16-be"),
        *("cp866", "koi8-r", "koi8-u", "mac-roman", "mac-cyrillic", "cp874"),
        *(f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)),
        *(f"cp125{n}" for n in range(9)),
        *("gbk", "gb18030", "big5hkscs", "euc_jp", "iso2022_jp", "cp932", "cp949"),
    )
)


# Labels Python reads as one codec and a browser as a larger one (the standard's label table).
_BROWSER_READS = {
    "ascii": "cp1252",
    "iso8859-1": "cp1252",
    "iso8859-9": "cp1254",
    "iso8859-11": "cp874",
    "tis-620": "cp874",
    "gb2312": "gbk",
    "big5": "big5hkscs",
    "shift_jis": "cp932",
    "euc_kr": "cp949",
    "utf-16": "utf-16-le",
}


_PARSERS = threading.local()


_STRING = lxml.etree.XPath("string()", smart_strings=False)


def text_of(element: Any) -> str:
    """Return an element's text: lxml.html's `text_content()`, for lxml.etree elements too."""
    return str(_STRING(element))


def decode(body: bytes, content_type: str = "", *, html_page: bool = False) -> str:
    """Decode a body: BOM, header charset, `<meta>` charset, UTF-8, else windows-1252."""
    if body.startswith(codecs.BOM_UTF8):
        return body[3:].decode("utf-8", "replace")
    if body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return body.decode("utf-16", "replace")
    labels = [
        m.group(1) for m in re.finditer(r"charset\s*=\s*[\"']?([^\s;\"']+)", content_type, re.I)
    ]
    if html_page:
        found = _META_CHARSET.search(body[:4096])
        if found:
            label = found.group(1).decode("ascii", "replace").lower()
            labels.append("utf-8" if label.startswith("utf-16") else label)
    for label in labels:
        codec = _codec(label)
        if codec is not None:
            return body.decode(codec, "replace")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("cp1252", "replace")


def _codec(label: str) -> str | None:
    """Return the Python codec a browser decodes a charset label with, or None if none."""
    try:
        name = codecs.lookup(label.strip()).name
    except (LookupError, ValueError):  # ValueError: a label with a NUL in it
        return None
    name = _BROWSER_READS.get(name, name)
    return name if name in _WEB_ENCODINGS else None


def parse(text: str) -> Any:
    text = _XML_DECLARATION.sub("", text, count=1)
    if any(control in text for control in _CONTROLS):  # 29 scans take a tenth of one regex
        text = _CONTROL.sub("", text)
    if not text.strip():
        return None
    try:
        return lxml.html.document_fromstring(text, parser=_html_parser())
    except (lxml.etree.ParserError, ValueError):
        return None


def _html_parser() -> Any:
    """Return this thread's HTML parser, with every element an `HtmlElement` picked in C.

    lxml.html's own lookup picks a class per tag in Python, for every element object made,
    and trafilatura makes thousands a page (about 1 ms of 35). No method used here or by
    trafilatura is on the per-tag classes (forms, inputs, labels): on 109 real pages every
    format came out the same. One parser per thread, as lxml keeps its default parser:
    `sift serve` converts pages in several threads at once.
    """
    parser = getattr(_PARSERS, "html", None)
    if parser is None:
        parser = _PARSERS.html = lxml.html.HTMLParser()
        parser.set_element_class_lookup(
            lxml.etree.ElementDefaultClassLookup(
                element=lxml.html.HtmlElement,
                comment=lxml.html.HtmlComment,
                pi=lxml.html.HtmlProcessingInstruction,
                entity=lxml.html.HtmlEntity,
            )
        )
    return parser


def _folded(text: str) -> str:
    return " ".join(text.split())


def base_url(tree: Any, url: str) -> str:
    for href in tree.xpath("//base/@href")[:1]:
        joined = urljoin(url, str(href).strip())
        if urlsplit(joined).scheme in ("http", "https"):
            return joined
    return url


def metadata(tree: Any) -> tuple[str, str, str]:
    metas: dict[str, str] = {}
    for element in tree.iter("meta"):
        key = element.get("name") or element.get("property") or element.get("http-equiv") or ""
        value = _folded(element.get("content") or "")
        if value:
            metas.setdefault(key.strip().lower(), value)

    def meta(*names: str) -> str:
        return next((metas[name] for name in names if name in metas), "")

    title = next((_folded(text_of(t)) for t in tree.iter("title")), "") or meta("og:title")
    language = (tree.get("lang") or tree.get("xml:lang") or "").strip()
    language = language or meta("content-language") or meta("og:locale").replace("_", "-")
    return title, meta("description", "og:description", "twitter:description"), language


def links(tree: Any, base: str) -> list[str]:
    found: dict[str, None] = {}
    for anchor in tree.iter("a"):
        target = absolute(anchor.get("href"), base)
        if target:
            found.setdefault(target)
    return list(found)


def absolute(href: str | None, base: str) -> str:
    """Return an http(s) link made absolute, or "" for any other kind."""
    if not href:
        return ""
    href = href.strip()
    if href.startswith(("http://", "https://")) and not any(c in href for c in "\\\t\n "):
        return href  # already absolute: most links on most pages, and urljoin is slow
    if not href or href.startswith("#"):
        return ""  # empty, or a place on this same page
    return _joined(base, href)


@functools.lru_cache(maxsize=4096)
def _joined(base: str, href: str) -> str:
    try:
        joined = urljoin(base, href)
    except ValueError:
        return ""
    return joined if urlsplit(joined).scheme in ("http", "https") else ""
