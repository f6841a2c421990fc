"""Turning a fetched page into markdown, text, cleaned HTML or links (fetch.md §5).

    document = convert(body, content_type="text/html; charset=utf-8", media_type="text/html",
                       url="https://example.org/post", format="markdown", main_content=True)
    document.title, document.content, document.links

Steps for HTML:
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
   without repeats;
3. clean: scripts, styles, templates, frames, embedded objects, SVG, form controls, forms
   that hold no article, hidden elements (`hidden`, `aria-hidden`, `display:none`), inline
   `data:` images and 1×1 tracking pixels are dropped;
4. main content (`main_content=True`, the default): trafilatura picks the article body
   (measured on testdata/fetch: it scores above our own heuristic, see
   docs/page-reading.md), with its own settings, as the article benchmark runs it; only a
   result under its 250-character minimum is tried again with the minimum at 10
   (`_settings`), so a
   short page keeps its structure instead of a flat dump with its menu; a `<pre>` reaches it
   as `<pre><code>` (`_wrap_code`), the one shape it always keeps as code; when it finds
   nothing, `_own_main` keeps the largest `<article>`/`<main>`, else the body, without
   navigation, headers, footers, sidebars, cookie banners, share bars and comment threads
   (class and id patterns). trafilatura's XML tree is renamed to HTML
   tags in place and rendered as is (not serialised and parsed again); where it trimmed the
   space at the edge of a link or emphasis ("von<ref>Douglas</ref>"), the space is put back
   when the page's own text has it there;
5. render (`_Renderer`): headings, paragraphs, lists (nested), links with absolute URLs,
   emphasis, inline code, fenced code blocks with their language (from `language-*`,
   `lang-*`, `highlight-*` classes or `data-lang`, recovered by the block's text when the
   extractor dropped the class), block quotes, pipe tables (a table holding block content
   is layout and rendered as blocks), images as `![alt](url)` in full-page mode only.
   Ordered lists are numbered in markdown only; the text format marks every item "- ".
   Spaces at the edges of a link's text go outside the brackets; soft hyphens, zero-width
   spaces, word joiners and BOMs are dropped and letters composed (NFC): invisible to a
   reader, they split words for any tool that reads the text.

Other types: `text/markdown` and `text/plain` pass through; `application/json` becomes a
fenced `json` block (text: as is). `html` format is the cleaned HTML of the same part of the
page; `raw_html` the decoded page as sent; `links` the link list, one per line.
"""

from __future__ import annotations

import codecs
import copy
import functools
import html
import itertools
import re
import threading
import unicodedata
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import lxml.etree
import lxml.html

from siftlib.fetch.pagetype import page_type, structured_data
from siftlib.fetch.threads import missing_posts, thread

__all__ = ["Document", "convert", "decode"]

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
_URL_ATTRIBUTES = frozenset(
    ("href", "src", "action", "formaction", "poster", "background", "cite", "data", "srcset")
    + ("xlink:href", "longdesc", "lowsrc", "dynsrc", "usemap", "codebase", "manifest")
)
# A URL a browser would run: its scheme after the controls and spaces it ignores there.
_JAVASCRIPT = "[\\t\\n\\r]*".join("javascript")  # a browser skips tabs and newlines inside
_SCRIPT_URL = re.compile(f"[\\x00-\\x20]*(?:{_JAVASCRIPT}|vbscript|data)[\\t\\n\\r]*:", re.I)
_WHITESPACE = re.compile(r"[ \t\n\r\f\v]+")
_BR = "\ue000"  # a line break inside a paragraph, kept through whitespace folding
_BREAK = re.compile(f" ?{_BR} ?")
# Invisible marks that split a word for a reader's tools but show nothing: soft hyphen,
# zero-width space, word joiner, BOM (ZWJ/ZWNJ stay: scripts and emoji need them).
_INVISIBLE_MARKS = "\u00ad\u200b\u2060\ufeff"
_INVISIBLE = re.compile(f"[{_INVISIBLE_MARKS}]")
_LANGUAGE = re.compile(r"(?:^|\s)(?:language|lang|highlight|brush)[-:]\s*([A-Za-z0-9_+#.-]+)")
_DROPPED = (
    "script",
    "style",
    "noscript",
    "template",
    "iframe",
    "frame",
    "frameset",
    "object",
    "embed",
    "applet",
    "svg",
    "math",
    "canvas",
    "input",
    "link",
    "meta",
    "head",
)
# Controls and dialogs are dropped, but unwrapped when they hold a page's worth of text:
# libxml2 nests everything after an unclosed `<button>` inside it (a real recipe page lost
# 22,000 of its 22,700 characters that way).
_FORM_CONTROLS = "//button|//select|//textarea|//dialog"
_CONTROL_TEXT = 200
_REVEALED = re.compile(r"(^|[\s_-])(tabs?|tabpanel|accordion|collapse)($|[\s_-])", re.I)
_FORM_TEXT = 1000  # a form holding more is the page (ASP.NET wraps every page in one)
# Candidates only: the style is read in Python (an XPath translate() on every element is
# slower than the whole cleaning step), as CSS reads it: in any case, spaces anywhere.
_HIDDEN = "//*[@hidden or @aria-hidden or @style]"
_HIDDEN_STYLES = ("display:none", "visibility:hidden")
_STYLE_SIZE = re.compile(r"(?:^|;)(width|height):([^;!]*)")
_BOILERPLATE_TAGS = ("nav", "header", "footer", "aside")
_BOILERPLATE = re.compile(
    r"(^|[\s_-])(comments?|share|sharing|social|cookies?|consent|gdpr|banner|related|sidebar"
    r"|newsletter|promo|advert|ads?|breadcrumbs?|subscribe|popup|modal|footer|navbar|nav|menu"
    r"|signup|disqus|outbrain|taboola)($|[\s_-])",
    re.I,
)
_BLOCKS = frozenset(
    (
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "center",
        "dd",
        "details",
        "dir",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hgroup",
        "hr",
        "html",
        "li",
        "main",
        "menu",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
        "caption",
    )
)
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
# trafilatura's XML tags and `hi` renditions, as HTML.
_XML_TAGS = {
    "item": "li",
    "quote": "blockquote",
    "row": "tr",
    "cell": "td",
    "lb": "br",
    "graphic": "img",
    "div": "div",
}
_EMPHASIS = {"strong": "**", "b": "**", "em": "*", "i": "*", "del": "~~", "s": "~~"}
_HI = {"#b": "b", "#i": "i", "#u": "u", "#t": "code", "#sub": "sub", "#sup": "sup"}
# Parents whose `<code>` is inline, by both names: a parent is renamed before its children.
_INLINE_PARENTS = frozenset(
    ("p", "head", "hi", "ref", "item", "cell", "quote", "li", "td", "th", "blockquote", "a")
    + tuple(f"h{n}" for n in range(1, 7))
)
# A table holding these is page layout, not data: its cells are rendered as blocks.
_LAYOUT_TABLE = (
    ".//table|.//ul|.//ol|.//h1|.//h2|.//h3|.//pre|.//blockquote|.//td[string-length() > 400]"
)
_PARSERS = threading.local()
_SHORT_RESULT = 250  # trafilatura's `min_extracted_size`
# Below this share of the structural pass's words, trafilatura's answer gives way to that
# pass; per page type, chosen on WCXB's tuning half (README "Page types").
_EMPTY_SHARE = 0.4
# Under this share of a thread's words, trafilatura lost posts: the posts are the answer.
_THREAD_SHARE = 0.75
_SHORT_PAGE = 200  # words: on a page this short, a pass that drops its structure loses it all
_FULLER_SHARE = {"forum": 0.1, "product": 0.5, "collection": 0.6, "listing": 0.6, "service": 0.6}
_ANCHOR_MARKS = frozenset(("¶", "#", "§", "🔗"))
_STRING = lxml.etree.XPath("string()", smart_strings=False)
_LAST_WORD = re.compile(r"\w+\Z")
_FIRST_WORD = re.compile(r"\w+")
_WORD = re.compile(r"\w+")


def _text(element: Any) -> str:
    """Return an element's text: lxml.html's `text_content()`, for lxml.etree elements too."""
    return str(_STRING(element))


@dataclass
class Document:
    """A page converted: its metadata and the content in the asked format."""

    title: str = ""
    description: str = ""
    language: str = ""
    content: str = ""
    links: list[str] = field(default_factory=list)
    also: dict[str, str] = field(default_factory=dict)  # further formats asked for
    page_type: str = ""  # HTML only: one of `siftlib.fetch.pagetype.PAGE_TYPES`
    warnings: list[str] = field(default_factory=list)


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


def convert(
    body: bytes,
    *,
    content_type: str,
    media_type: str,
    url: str,
    format: str = "markdown",
    also: tuple[str, ...] = (),
    main_content: bool = True,
    include: tuple[str, ...] = (),
    exclude: tuple[str, ...] = (),
) -> Document:
    """Convert a fetched body into a `Document` in `format`, and in each of `also`."""
    is_html = media_type in ("text/html", "application/xhtml+xml")
    text = decode(body, content_type, html_page=is_html)
    if is_html:
        document = convert_html(
            text,
            url=url,
            formats=(format, *also),
            main_content=main_content,
            include=include,
            exclude=exclude,
        )
    else:
        document = Document()
        document.also = {name: _other(text, media_type, name) for name in (format, *also)}
    document.content = document.also.pop(format, "")
    return document


def _other(text: str, media_type: str, format: str) -> str:
    """Return a page that is not HTML in one format."""
    if format == "markdown" and media_type == "application/json":
        fence = "````" if "```" in text else "```"
        return f"{fence}json\n{text.strip()}\n{fence}"
    if format == "html":
        return f"<pre>{html.escape(text)}</pre>"
    return "" if format == "links" else text


def _sanitize(part: Any) -> None:
    """Drop event handlers (`on*`) and script URLs from the HTML a caller may render.

    Scripts, frames and objects are gone already (`_clean`); what is left could still run
    code where the `html` format is shown: `<a href="javascript:…">`, `<img onerror=…>`.
    """
    for element in part.iter():
        if not isinstance(element.tag, str):
            continue  # a comment or processing instruction
        for name in list(element.attrib):
            value = element.attrib[name]
            if name.lower().startswith("on") or (
                name.lower() in _URL_ATTRIBUTES and _SCRIPT_URL.match(value)
            ):
                del element.attrib[name]


def convert_html(
    text: str,
    *,
    url: str,
    formats: tuple[str, ...] = ("markdown",),
    main_content: bool = True,
    include: tuple[str, ...] = (),
    exclude: tuple[str, ...] = (),
) -> Document:
    """Convert an HTML page (already decoded); each of `formats` lands in `Document.also`.

    `include`/`exclude` are CSS selectors applied before anything else is dropped
    (`siftlib.fetch.filters`); with `include`, its matches are the content as they are.
    """
    tree = _parse(text)
    if tree is None:
        return Document(also={name: text if name == "raw_html" else "" for name in formats})
    base = _base_url(tree, url)
    title, description, language = _metadata(tree)
    document = Document(title, description, language, links=_links(tree, base))
    document.page_type = page_type(tree, base, structured_data(tree))
    if not document.title:
        heading = tree.find(".//h1")
        document.title = _squash(_text(heading)) if heading is not None else ""
    converted = {"raw_html": text, "links": "\n".join(document.links)}
    if set(formats) - set(converted):
        if include or exclude:
            from siftlib.fetch.filters import keep_and_drop

            tree = keep_and_drop(tree, include=include, exclude=exclude)
            main_content = main_content and not include
        _clean(tree, main_content=main_content)
        languages = _code_languages(tree)
        part: Any = tree.find("body")
        if part is None:
            part = tree
        if main_content:
            _wrap_code(tree)
            part = _main(tree, part, base, document)
        if "html" in formats:
            _sanitize(part)
            converted["html"] = lxml.etree.tostring(part, encoding="unicode", method="html")
        for name in ("markdown", "text"):
            if name in formats:
                renderer = _Renderer(
                    base, plain=name == "text", languages=languages, images=not main_content
                )
                converted[name] = renderer.render(part)
    document.also = {name: converted[name] for name in formats}
    return document


def _parse(text: str) -> Any:
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


def _base_url(tree: Any, url: str) -> str:
    for href in tree.xpath("//base/@href")[:1]:
        joined = urljoin(url, str(href).strip())
        if urlsplit(joined).scheme in ("http", "https"):
            return joined
    return url


def _metadata(tree: Any) -> tuple[str, str, str]:
    metas: dict[str, str] = {}
    for element in tree.iter("meta"):
        key = element.get("name") or element.get("property") or element.get("http-equiv") or ""
        value = _squash(element.get("content") or "")
        if value:
            metas.setdefault(key.strip().lower(), value)

    def meta(*names: str) -> str:
        return next((metas[name] for name in names if name in metas), "")

    title = next((_squash(_text(t)) for t in tree.iter("title")), "") or meta("og:title")
    language = (tree.get("lang") or tree.get("xml:lang") or "").strip()
    language = language or meta("content-language") or meta("og:locale").replace("_", "-")
    return title, meta("description", "og:description", "twitter:description"), language


def _links(tree: Any, base: str) -> list[str]:
    found: dict[str, None] = {}
    for anchor in tree.iter("a"):
        target = _absolute(anchor.get("href"), base)
        if target:
            found.setdefault(target)
    return list(found)


def _absolute(href: str | None, base: str) -> str:
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


def _clean(tree: Any, *, main_content: bool) -> None:
    lxml.etree.strip_elements(tree, *_DROPPED, lxml.etree.Comment, with_tail=False)
    for control in tree.xpath(_FORM_CONTROLS):
        if control.getparent() is None:
            continue
        if len(_text(control)) > _CONTROL_TEXT:
            control.drop_tag()
        else:
            control.drop_tree()
    for element in tree.xpath(_HIDDEN):
        style = _style(element)
        hidden = (
            element.get("hidden") is not None
            or (element.get("aria-hidden") or "").strip().lower() == "true"
            or any(hidden in style for hidden in _HIDDEN_STYLES)
        )
        # A large hidden part is a tab, an accordion or a page shown by script: in main-content
        # mode the extractor judges it (product specs and FAQ answers sit in such parts).
        if hidden and not (main_content and _revealed(element)):
            element.drop_tree()
    for image in tree.xpath("//img"):
        src = (image.get("src") or "").strip().lower()
        if src.startswith("data:") or not src or _tracking_pixel(image):
            image.drop_tree()
    for anchor in tree.xpath("//a[string-length(normalize-space()) < 3]"):
        # Heading permalinks (Sphinx's ¶, GitHub's #): a mark, not content.
        if _text(anchor).strip() in _ANCHOR_MARKS:
            anchor.drop_tree()
    for form in tree.xpath("//form"):
        # Some sites wrap the whole page in one <form> (ASP.NET): keep a form with an article.
        if len(_text(form)) < _FORM_TEXT:
            form.drop_tree()


def _revealed(element: Any) -> bool:
    """Tell whether a hidden part is content a reader reveals: a tab, an accordion, a long part."""
    marks = f"{element.get('class') or ''} {element.get('role') or ''}"
    return bool(_REVEALED.search(marks)) or len(_text(element)) > _CONTROL_TEXT


def _style(element: Any) -> str:
    """Return an element's inline style in lower case, without whitespace."""
    return "".join((element.get("style") or "").split()).lower()


def _tracking_pixel(image: Any) -> bool:
    """Tell whether an image is at most 1×1 pixel, by its style or else its attributes."""
    sizes = dict(_STYLE_SIZE.findall(_style(image)))  # the last of each wins, as in CSS
    for side in ("width", "height"):
        size = sizes.get(side, image.get(side) or "").strip().lower()
        if size.removesuffix("px") not in ("0", "1"):
            return False
    return True


def _code_languages(tree: Any) -> dict[str, str]:
    """Map each code block's text to its language, for when the extractor drops the class."""
    found: dict[str, str] = {}
    for pre in tree.iter("pre"):
        language = _language_of(pre)
        if language:
            found[_code_key(_text(pre))] = language
    return found


def _language_of(pre: Any) -> str:
    # Sphinx and Pygments mark the wrapper (`<div class="highlight-python">`), not the pre.
    for element in (pre, *pre.iterchildren("code"), *itertools.islice(pre.iterancestors(), 2)):
        if element.get("data-lang"):
            return str(element.get("data-lang")).strip().lower()
        match = _LANGUAGE.search(element.get("class") or "")
        if match:
            return str(match.group(1)).lower()
    return ""


def _wrap_code(tree: Any) -> None:
    """Put the content of each `<pre>` in a `<code>`, so the extractor keeps it as code."""
    # trafilatura takes a `<pre>` for code only with a lone `<code>` child, a `lang` or a
    # highlighter's marks; any other is a quote, and its lines run together.
    for pre in list(tree.iter("pre")):
        if not _only_code(pre):
            code = pre.makeelement("code", {})
            code.text, pre.text = pre.text, None
            code.extend(list(pre))  # moves the children, each with its tail
            pre.append(code)


def _code_key(text: str) -> str:
    return " ".join(text.split())[:400]


def _extracted(tree: Any, base: str) -> Any:
    """Return trafilatura's main content as an HTML `<body>`, or None when it finds none."""
    body = _trafilatura_body(tree, short_pages=False)
    length = _length(body)
    if length < _SHORT_RESULT:
        # Under its minimum, trafilatura may answer with a flat baseline of the whole page,
        # menu and footer included: a short page's article, found with the minimum at 10
        # characters, keeps its structure unless it is less than half of that text.
        structured = _trafilatura_body(tree, short_pages=True)
        structured_length = _length(structured)
        if 2 * structured_length >= length:
            body, length = structured, structured_length
    if not length:
        return None
    return _as_html(body, base, _SourceText(tree))


def _main(tree: Any, body: Any, base: str, document: Document) -> Any:
    """Return the main content: trafilatura's, else a thread's posts or the fuller pass.

    A listing, a collection or a service page spreads its content over many blocks, and
    trafilatura, built for articles, often keeps one card or the hero alone: under a share
    of the words the structural pass (`_own_main`) keeps, that fuller pass is the answer,
    and for any page under `_EMPTY_SHARE` of them (README "Page types").
    """
    fuller = _own_main(copy.deepcopy(body))  # before trafilatura, which changes the tree
    whole = _words(fuller)
    posts = thread(tree) if document.page_type == "forum" else None
    extracted = _extracted(tree, base)
    kept = _words(extracted)
    lost = posts is not None and kept < _THREAD_SHARE * _words(posts)
    if lost and missing_posts(posts, "" if extracted is None else _text(extracted)):
        extracted, kept = posts, _words(posts)
    share = _FULLER_SHARE.get(document.page_type, _EMPTY_SHARE)
    flattened = kept <= whole <= _SHORT_PAGE and _structure(fuller) > 2 * _structure(extracted)
    if extracted is not None and kept >= share * whole and not flattened:
        return extracted
    if not whole:
        document.warnings.append("main content: the page has no text (a page built by script?)")
    elif kept < _EMPTY_SHARE * whole:
        document.warnings.append(
            f"main content: the extractor kept {kept} of the page's {whole} words; "
            "this is the page without its navigation, header and footer"
        )
    return fuller


def _structure(part: Any) -> int:
    """Count the headings, list items and code blocks in a part."""
    if part is None:
        return 0
    return sum(1 for _ in part.iter("h1", "h2", "h3", "h4", "h5", "h6", "li", "pre"))


def _words(part: Any) -> int:
    # Text pieces apart: `_text` runs blocks together ("Nestedouter one").
    return 0 if part is None else len(_WORD.findall(" ".join(part.itertext())))


def _trafilatura_body(tree: Any, *, short_pages: bool) -> Any:
    import trafilatura

    found = trafilatura.bare_extraction(
        tree,
        config=_settings(short_pages),
        include_comments=True,
        include_tables=True,
        include_images=False,
        include_formatting=True,
        include_links=True,
        with_metadata=False,
        # Not "python": that format also renders the body as plain text (a quarter of a
        # conversion), and only the body is used here.
        output_format="xml",
    )
    return getattr(found, "body", None)


def _length(body: Any) -> int:
    # Unfolded, as trafilatura measures its own result: folding 100 KB costs a millisecond.
    return 0 if body is None else len(_text(body).strip())


@functools.cache
def _settings(short_pages: bool) -> Any:
    """Return trafilatura's settings; for short pages with its minimum result at 10 characters.

    Not for every page: the minimum (250) also decides, among other things, when `<div>`s
    count as paragraphs, and on 109 real pages lowering it everywhere lost whole paragraphs
    on some (agreement with trafilatura's own text 0.990 -> 0.988).
    """
    from trafilatura.settings import DEFAULT_CONFIG

    if not short_pages:
        return DEFAULT_CONFIG
    config = copy.deepcopy(DEFAULT_CONFIG)
    config["DEFAULT"]["min_extracted_size"] = "10"
    return config


def _only_code(element: Any) -> bool:
    children = list(element)
    return (
        len(children) == 1
        and children[0].tag == "code"
        and not (element.text or "").strip()
        and not (children[0].tail or "").strip()
    )


class _SourceText:
    """The page's text, whitespace folded, made once when first asked for."""

    def __init__(self, tree: Any) -> None:
        self.tree, self.text = tree, ""

    def spaced(self, before: str, after: str) -> bool:
        """Tell whether the page has a space where the extraction joins `before` to `after`."""
        if not (before[-1:].isalnum() and after[:1].isalnum()):
            return False
        left = _LAST_WORD.search(before[-80:])
        right = _FIRST_WORD.match(after)
        if left is None or right is None:
            return False
        if not self.text:
            self.text = " ".join(_text(self.tree).split())
        return f"{left[0]}{right[0]}" not in self.text and f"{left[0]} {right[0]}" in self.text


def _respace(element: Any, source: _SourceText) -> None:
    """Restore a space trafilatura trimmed at an inline element's edge ("von<ref>Douglas")."""
    inner, tail = _text(element), element.tail or ""
    previous, parent = element.getprevious(), element.getparent()
    if previous is not None and source.spaced(previous.tail or "", inner):
        previous.tail += " "
    elif previous is None and source.spaced(parent.text or "", inner):
        parent.text += " "
    if source.spaced(inner, tail):
        element.tail = " " + tail


def _as_html(body: Any, base: str, source: _SourceText) -> Any:
    """Rename trafilatura's XML vocabulary (`head`, `list`, `ref`, `hi`, …) to HTML, in place.

    Its own HTML output turns inline code into `<pre>`; its tree still tells them apart.
    """
    for element in body.iter():
        tag, rend = element.tag, element.get("rend", "")
        if rend:
            del element.attrib["rend"]  # only where set: `attrib` is a new proxy object per call
        if tag in ("ref", "hi"):
            _respace(element, source)
        if tag == "head":
            element.tag = rend if rend in _HEADINGS else "h2"
        elif tag == "list":
            element.tag = "ol" if rend == "ol" else "ul"
        elif tag == "ref":
            element.tag = "a"
            element.set("href", _absolute(element.attrib.pop("target", ""), base))
        elif tag == "hi":
            element.tag = _HI.get(rend, "span")
        elif tag == "code":
            parent = element.getparent()
            inline = parent is not None and parent.tag in _INLINE_PARENTS
            element.tag = "code" if inline and "\n" not in (element.text or "") else "pre"
        elif tag == "quote" and _only_code(element):
            element.tag = "div"  # trafilatura quotes a <pre> it did not see as code
        elif tag in _XML_TAGS:
            element.tag = _XML_TAGS[tag]
        if tag == "cell" and element.attrib.pop("role", "") == "head":
            element.tag = "th"
    return body


def _own_main(part: Any) -> Any:
    """Return the page's main content by structure: the largest article, else the body."""
    candidates = part.xpath(".//article|.//main|.//*[@role='main']|.//*[@itemprop='articleBody']")
    if candidates:
        # The largest, when it holds most of the page: on a listing each card is an <article>.
        largest = max(candidates, key=lambda c: len(_text(c)))
        if 2 * len(_text(largest)) >= len(_text(part)):
            part = largest
    for element in part.xpath(".//*"):
        if element.getparent() is None:
            continue  # inside something already dropped
        marks = f"{element.get('class') or ''} {element.get('id') or ''}"
        if element.tag in _BOILERPLATE_TAGS or _BOILERPLATE.search(marks):
            element.drop_tree()
    return part


def _squash(text: str) -> str:
    """Fold whitespace runs to one space; keep explicit line breaks."""
    folded = " ".join(text.split())  # ~3x a regex substitution; NBSP folds to a space too
    if _BR not in folded:
        return folded
    return _BREAK.sub("\n", folded).strip("\n ")


class _Renderer:
    """Markdown (or plain text) from an HTML element, block by block."""

    def __init__(self, base: str, *, plain: bool, languages: dict[str, str], images: bool) -> None:
        self.base, self.plain, self.languages, self.images = base, plain, languages, images

    def render(self, element: Any) -> str:
        """Return the element's content as markdown (or text)."""
        text = "\n\n".join(block for block in self._blocks(element) if block.strip())
        # Each pass only where needed: a regex over a 100 KB page costs about a millisecond.
        if "\n\n\n" in text:
            text = re.sub(r"\n{3,}", "\n\n", text)
        if any(mark in text for mark in _INVISIBLE_MARKS):
            text = _INVISIBLE.sub("", text)
        # Composed (NFC) letters: a decomposed "u" + diaeresis is two pieces to a word splitter.
        return unicodedata.normalize("NFC", text).strip() + "\n"

    def _blocks(self, element: Any) -> list[str]:
        blocks: list[str] = []
        line: list[str] = [element.text or ""]

        def flush() -> None:
            text = _squash("".join(line))
            if text:
                blocks.append(text)
            line.clear()

        for child in element:
            tag = child.tag if isinstance(child.tag, str) else ""
            if tag in _BLOCKS:
                flush()
                blocks.extend(self._block(child, tag))
            elif tag:
                line.append(self._inline(child))
            line.append(child.tail or "")
        flush()
        return blocks

    def _block(self, element: Any, tag: str) -> list[str]:
        if tag in _HEADINGS:
            text = _squash(self._inline_children(element)).replace("\n", " ")
            if not text:
                return []
            return [text if self.plain else f"{'#' * _HEADINGS[tag]} {text}"]
        if tag == "pre":
            return [self._code(element)]
        if tag in ("ul", "ol", "menu", "dir"):
            return [self._list(element, ordered=tag == "ol")]
        if tag == "blockquote":
            inner = "\n\n".join(self._blocks(element))
            if self.plain or not inner:
                return [inner]
            return ["\n".join(f"> {row}".rstrip() for row in inner.split("\n"))]
        if tag == "table":
            return self._table(element)
        if tag == "hr":
            return [] if self.plain else ["---"]
        return self._blocks(element)

    def _inline_children(self, element: Any) -> str:
        parts = [element.text or ""]
        for child in element:
            if isinstance(child.tag, str):
                parts.append(self._inline(child))
            parts.append(child.tail or "")
        return "".join(parts)

    def _inline(self, element: Any) -> str:
        tag = element.tag
        if tag == "br":
            return _BR
        if tag == "img":
            return self._image(element)
        if tag in ("code", "kbd", "samp", "tt"):
            code = _WHITESPACE.sub(" ", _text(element))
            if self.plain or not code.strip():
                return code
            tick = "``" if "`" in code else "`"
            return f"{tick}{code}{tick}"
        inner = self._inline_children(element)
        if tag in ("p", "div"):
            return f"{_BR}{inner}{_BR}"  # a paragraph inside a table cell: its own line
        if self.plain or not inner.strip():
            return inner
        # Spaces at the edges stay outside the markup: `[Platz ](u)angesiedelt` glues words.
        lead = inner[: len(inner) - len(inner.lstrip())]
        trail = inner[len(inner.rstrip()) :]
        if tag == "a":
            target = _absolute(element.get("href"), self.base)
            text = _squash(inner).replace("\n", " ")
            return f"{lead}[{text}]({target}){trail}" if target and text else inner
        marker = _EMPHASIS.get(tag)
        if marker is None:
            return inner
        return f"{lead}{marker}{inner.strip()}{marker}{trail}"

    def _image(self, element: Any) -> str:
        src = _absolute(element.get("src"), self.base)
        if not self.images or self.plain or not src:
            return ""
        alt = _squash(element.get("alt") or "").replace("]", "")
        return f"![{alt}]({src})"

    def _code(self, element: Any) -> str:
        for br in element.iter("br"):
            br.tail = "\n" + (br.tail or "")
        text = _text(element).strip("\n")
        if self.plain:
            return text
        language = _language_of(element) or self.languages.get(_code_key(text), "")
        fence = "~~~" if "```" in text else "```"
        return f"{fence}{language}\n{text}\n{fence}"

    def _list(self, element: Any, *, ordered: bool) -> str:
        rows = []
        number = int(element.get("start", "1")) if str(element.get("start", "1")).isdigit() else 1
        for item in element:
            if not isinstance(item.tag, str):
                continue
            # Numbers are markdown's syntax for order; in plain text they are words of their
            # own ("1", "2") that the page's text does not have, as trafilatura's text has not.
            marker = f"{number}. " if ordered and not self.plain else "- "
            number += 1
            body = "\n".join(self._blocks(item)) if item.tag == "li" else _squash(_text(item))
            if not body.strip():
                continue
            indent = " " * len(marker)
            lines = body.split("\n")
            rows.append(
                marker
                + lines[0]
                + "".join(f"\n{indent}{row}" if row else "\n" for row in lines[1:])
            )
        return "\n".join(rows)

    def _table(self, element: Any) -> list[str]:
        if element.xpath(_LAYOUT_TABLE):
            return self._blocks(element)  # a layout table: its cells are content blocks
        rows = element.xpath("./tr|./thead/tr|./tbody/tr|./tfoot/tr")
        br = " " if self.plain else "<br>"  # a pipe table's cell is one line
        grid = [
            [
                _squash(self._inline_children(cell)).replace("\n", br).replace("|", "\\|")
                for cell in row.xpath("./td|./th")
            ]
            for row in rows
        ]
        grid = [row for row in grid if any(row)]
        if not grid:
            return []
        if self.plain:
            return ["\n".join(" | ".join(row) for row in grid)]
        width = max(len(row) for row in grid)
        grid = [row + [""] * (width - len(row)) for row in grid]
        if width > 1 and all(
            row[0].tag == "th" and row[-1].tag == "td" for row in rows if len(row) > 1
        ):
            grid.insert(0, [""] * width)  # a key-value table: its first row is data, not a head
        lines = [f"| {' | '.join(grid[0])} |".replace("  ", " "), "|" + "---|" * width]
        lines += [f"| {' | '.join(row)} |" for row in grid[1:]]
        caption = element.find("caption")
        head = [_squash(_text(caption))] if caption is not None else []
        return head + ["\n".join(lines)]
