"""The main content: trafilatura's, a thread's posts, or the fuller structural pass.

trafilatura picks the article body, with its own settings, as the article benchmark runs it;
only a result under its 250-character minimum is tried again with the minimum at 10
(`_settings`), so a short page keeps its structure instead of a flat dump with its menu.
Its XML tree is renamed to HTML tags in place and rendered as is; where it trimmed the
space at the edge of a link or emphasis ("von<ref>Douglas</ref>"), the space is put back
when the page's own text has it there. Then `main` chooses, by the page type
(`siftlib.fetch.pagetype`): a forum thread whose extraction lost posts is read post by post
(`siftlib.fetch.threads`); an extraction that keeps under a share of the text of the
structural pass (`own_main`: the largest `<article>`/`<main>` holding most of the page,
else the body, without navigation, headers, footers, sidebars, cookie banners, share bars
and comment threads) gives way to that pass, as does a short page's flattened extraction
(docs/page-reading.md, "Page types").
"""

from __future__ import annotations

import copy
import functools
import re
from collections import Counter
from typing import Any

from siftlib.fetch.convert.clean import only_code
from siftlib.fetch.convert.decode import absolute, text_of
from siftlib.fetch.convert.markdown import HEADINGS
from siftlib.fetch.threads import missing_posts, sign, thread

_BOILERPLATE_TAGS = ("nav", "header", "footer", "aside")


_BOILERPLATE = re.compile(
    r"(^|[\s_-])(comments?|share|sharing|social|cookies?|consent|gdpr|banner|related|sidebar"
    r"|newsletter|promo|advert|ads?|breadcrumbs?|subscribe|popup|modal|footer|navbar|nav|menu"
    r"|signup|disqus|outbrain|taboola)($|[\s_-])",
    re.I,
)


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


_HI = {"#b": "b", "#i": "i", "#u": "u", "#t": "code", "#sub": "sub", "#sup": "sup"}


# Parents whose `<code>` is inline, by both names: a parent is renamed before its children.
_INLINE_PARENTS = frozenset(
    ("p", "head", "hi", "ref", "item", "cell", "quote", "li", "td", "th", "blockquote", "a")
    + tuple(f"h{n}" for n in range(1, 7))
)


_SHORT_RESULT = 250  # trafilatura's `min_extracted_size`


# Below this share of the structural pass's text, trafilatura's answer gives way to that
# pass; per page type, chosen on WCXB's tuning half (docs/page-reading.md, "Page types").
_EMPTY_SHARE = 0.4


# Under this share of a thread's text, trafilatura lost posts: the posts are the answer.
_THREAD_SHARE = 0.75


_SHORT_PAGE = 1000  # characters (about 200 words): a pass that drops such a page's structure
# loses it all


# A listing, a collection or a service page: the fuller pass whenever trafilatura keeps less.
_FULLER_SHARE = {"forum": 0.1, "collection": 1.0, "listing": 1.0, "service": 1.0}


# The extractor's passages of at least this many characters are kept in the fuller pass
# even inside a sidebar or a dialog (`own_main`).
_PASSAGE = 40


_PASSAGE_TAGS = ("p", "li", "h1", "h2", "h3", "h4", "h5", "h6", "td", "pre", "blockquote")


# Except on these types, trafilatura's answer gives way to the fuller pass cut to the span
# from its first to its last kept block when that span holds this much more text: it skipped
# blocks in between (text in bare `<div>`s, cards, tab panels). A thread's span brings back
# quotes and signatures, a product's its reviews and recommendations (measured on WCXB), an
# article's its byline and captions, which article benchmarks leave out (on WCXB: even).
_UNSPANNED = ("article", "forum", "product")


_FILLED = 1.05


_SPAN_EDGE = 20  # characters: a kept block shorter than this may be a menu's word


# A product's structured description of at least this many characters, most of whose
# words (this share) the extractor kept, tells that it found the product's own block.
_ANCHOR = 100


_ANCHOR_SHARE = 0.6


_LAST_WORD = re.compile(r"\w+\Z")
_WORD = re.compile(r"\w+")


def main(
    tree: Any, body: Any, base: str, kind: str, warnings: list[str], *, anchor: str = ""
) -> Any:
    """Return the main content: trafilatura's, else a thread's posts or the fuller pass.

    A listing, a collection or a service page spreads its content over many blocks, and
    trafilatura, built for articles, often keeps one card or the hero alone: under a share
    of the text the structural pass (`own_main`) keeps, that fuller pass is the answer,
    and for any page under `_EMPTY_SHARE` of them (docs/page-reading.md, "Page types").
    An extraction holding most of `anchor`'s words (a product's own description, from its
    structured data) found the page's content: it stays whatever its share. One that keeps
    enough skipped blocks in between: the fuller pass from its first to its last kept block
    (`_span`) is the answer when it holds `_FILLED` times its text.
    """
    spare = copy.deepcopy(body)  # before trafilatura, which changes the tree
    posts = thread(tree) if kind == "forum" else None
    extracted = _extracted(tree, base)
    kept = _size(extracted)
    lost = posts is not None and kept < _THREAD_SHARE * _size(posts)
    if lost and missing_posts(posts, "" if extracted is None else text_of(extracted)):
        extracted, kept = posts, _size(posts)
    elif posts is not None and extracted is not None:
        sign(extracted, posts)
    share = _FULLER_SHARE.get(kind, _EMPTY_SHARE)
    if extracted is not None and _holds(extracted, anchor):
        return extracted
    spanned = kind not in _UNSPANNED
    large = extracted is not None and kept > _SHORT_PAGE
    if not spanned and large and kept >= share * _size(spare):
        return extracted  # the fuller pass, at most the whole page, could not win: skip it
    fuller = own_main(spare, _passages(extracted))
    whole = _size(fuller)
    flattened = kept <= whole <= _SHORT_PAGE and _structure(fuller) > 2 * _structure(extracted)
    if extracted is not None and kept >= share * whole and not flattened:
        span = _span(fuller, extracted) if spanned else None
        return span if span is not None and _size(span) >= _FILLED * kept else extracted
    if not whole:
        warnings.append("main content: the page has no text (a page built by script?)")
    elif kept < _EMPTY_SHARE * whole:
        warnings.append(
            f"main content: the extractor kept {kept} of the page's {whole} characters; "
            "this is the page without its navigation, header and footer"
        )
    return fuller


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


def _structure(part: Any) -> int:
    """Count the headings, list items and code blocks in a part."""
    if part is None:
        return 0
    return sum(1 for _ in part.iter("h1", "h2", "h3", "h4", "h5", "h6", "li", "pre"))


def _size(part: Any) -> int:
    """Return a part's size in characters other than whitespace, however its blocks are spaced."""
    return 0 if part is None else len("".join(text_of(part).split()))


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
    return 0 if body is None else len(text_of(body).strip())


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


class _SourceText:
    """The page's text, whitespace folded, made once when first asked for."""

    def __init__(self, tree: Any) -> None:
        self.tree, self.text = tree, ""

    def spaced(self, before: str, after: str) -> bool:
        """Tell whether the page has a space where the extraction joins `before` to `after`."""
        if not (before[-1:].isalnum() and after[:1].isalnum()):
            return False
        left = _LAST_WORD.search(before[-80:])
        right = _WORD.match(after)
        if left is None or right is None:
            return False
        if not self.text:
            self.text = " ".join(text_of(self.tree).split())
        return f"{left[0]}{right[0]}" not in self.text and f"{left[0]} {right[0]}" in self.text


def _respace(element: Any, source: _SourceText) -> None:
    """Restore a space trafilatura trimmed at an inline element's edge ("von<ref>Douglas")."""
    inner, tail = text_of(element), element.tail or ""
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
            element.tag = rend if rend in HEADINGS else "h2"
        elif tag == "list":
            element.tag = "ol" if rend == "ol" else "ul"
        elif tag == "ref":
            element.tag = "a"
            element.set("href", absolute(element.attrib.pop("target", ""), base))
        elif tag == "hi":
            element.tag = _HI.get(rend, "span")
        elif tag == "code":
            parent = element.getparent()
            inline = parent is not None and parent.tag in _INLINE_PARENTS
            element.tag = "code" if inline and "\n" not in (element.text or "") else "pre"
        elif tag == "quote" and only_code(element):
            element.tag = "div"  # trafilatura quotes a <pre> it did not see as code
        elif tag in _XML_TAGS:
            element.tag = _XML_TAGS[tag]
        if tag == "cell" and element.attrib.pop("role", "") == "head":
            element.tag = "th"
    return body


def _holds(extracted: Any, anchor: str) -> bool:
    """Tell whether an extraction holds most of the words of an anchor text of some length."""
    if len(anchor) < _ANCHOR:
        return False
    wanted = Counter(_WORD.findall(anchor.lower()))
    found = Counter(_WORD.findall(text_of(extracted).lower()))
    return sum((wanted & found).values()) >= _ANCHOR_SHARE * sum(wanted.values())


def _span(fuller: Any, extracted: Any) -> Any:
    """Return the fuller pass cut to the first and last blocks the extractor kept, or None.

    In place: what the fuller pass has before the first and after the last kept block goes.
    """
    kept = {text for text in map(_folded, extracted.iter()) if len(text) >= _SPAN_EDGE}
    hits = [
        element
        for element in fuller.iter()
        if isinstance(element.tag, str)
        and (element.text or "").strip()
        and _folded(element) in kept
    ]
    if not hits:
        return None
    for edge, after in ((hits[0], False), (hits[-1], True)):
        node = edge
        while node is not None and node is not fuller:
            for sibling in list(node.itersiblings(preceding=not after)):
                node.getparent().remove(sibling)  # with its tail: the text between the two
            node = node.getparent()
    return fuller


def named(part: Any, name: str) -> None:
    """Put a product's name, as a heading, above an answer that does not name it (in place).

    trafilatura keeps a product's description and often drops the buy box above it, where
    the name is: an agent reading the answer would not know what it describes.
    """
    if not name or name in _folded(part):
        return
    heading = part.makeelement("h1", {})
    heading.text, heading.tail = name, part.text
    part.text = None
    part.insert(0, heading)


def _folded(element: Any) -> str:
    return " ".join(text_of(element).split())


def _passages(extracted: Any) -> list[str]:
    """Return the extractor's longer passages, whitespace folded, to keep in the fuller pass."""
    if extracted is None:
        return []
    found = map(_folded, extracted.iter(*_PASSAGE_TAGS))
    return [text for text in found if len(text) >= _PASSAGE]


def own_main(part: Any, passages: list[str]) -> Any:
    """Return the page's main content by structure: the largest article, else the body.

    A sidebar or a dialog holding mostly `passages` (what the extractor kept: a product's
    description sheet, its details modal) is content, not boilerplate: the fuller pass keeps it.
    """
    candidates = part.xpath(".//article|.//main|.//*[@role='main']|.//*[@itemprop='articleBody']")
    if candidates:
        # The largest, when it holds most of the page: on a listing each card is an <article>.
        largest = max(candidates, key=lambda c: len(text_of(c)))
        if 2 * len(text_of(largest)) >= len(text_of(part)):
            part = largest
    for element in part.xpath(".//*"):
        if element.getparent() is None:
            continue  # inside something already dropped
        marks = f"{element.get('class') or ''} {element.get('id') or ''}"
        boilerplate = element.tag in _BOILERPLATE_TAGS or _BOILERPLATE.search(marks)
        if boilerplate and not (passages and _mostly(element, passages)):
            element.drop_tree()
    return part


def _mostly(element: Any, passages: list[str]) -> bool:
    """Tell whether at least half of an element's text is made of `passages`."""
    text = _folded(element)
    if len(text) < _PASSAGE:
        return False
    return 2 * sum(len(p) for p in passages if p in text) >= len(text)
