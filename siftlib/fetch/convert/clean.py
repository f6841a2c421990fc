"""Cleaning a parsed page before extraction: what no reader sees, and controls that hide text.

Scripts, styles, templates, frames, embedded objects, SVG, form controls (unwrapped when
they hold a page's worth of text), forms that are not the page, hidden elements (`hidden`,
`aria-hidden`, `display:none`; in main-content mode a hidden tab, accordion or long part
reaches the extractor; a card's second link, hidden from screen readers only, is seen and
stays), cookie-consent banners and dialogs (in main-content mode), inline `data:` images,
1×1 tracking pixels, heading permalinks and code blocks' line-number gutters are dropped; a
`<pre>` reaches the extractor as `<pre><code>` (`wrap_code`), the one shape it always keeps
as code.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import lxml.etree

from siftlib.fetch.convert.decode import text_of

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
_URL_ATTRIBUTES = frozenset(
    ("href", "src", "action", "formaction", "poster", "background", "cite", "data", "srcset")
    + ("xlink:href", "longdesc", "lowsrc", "dynsrc", "usemap", "codebase", "manifest")
)
# A URL a browser would run: its scheme after the controls and spaces it ignores there.
_JAVASCRIPT = "[\\t\\n\\r]*".join("javascript")  # a browser skips tabs and newlines inside
_SCRIPT_URL = re.compile(f"[\\x00-\\x20]*(?:{_JAVASCRIPT}|vbscript|data)[\\t\\n\\r]*:", re.I)
_FORM_CONTROLS = "//button|//select|//textarea|//dialog"


_CONTROL_TEXT = 200


_REVEALED = re.compile(r"(^|[\s_-])(tabs?|tabpanel|accordion|collapse)($|[\s_-])", re.I)


# Cookie-consent managers (OneTrust, Cookiebot, Didomi, WordPress GDPR plugins, …) by their
# marks, and any dialog that speaks of cookies: a page's own words are never in them.
_CONSENT = re.compile(
    r"onetrust|cookiebot|didomi|(^|[\s_-])(consent|gdpr)($|[\s_-])|cookies?[-_]?"
    r"(banner|bar|consent|notice|law|popup|policy|settings|preferences|modal|dialog|wall)",
    re.I,
)


_CONSENT_TAGS = ("div", "section", "aside", "dialog")


_FORM_TEXT = 1000  # a form holding more is the page (ASP.NET wraps every page in one)


# Candidates only: the style is read in Python (an XPath translate() on every element is
# slower than the whole cleaning step), as CSS reads it: in any case, spaces anywhere.
_HIDDEN = "//*[@hidden or @aria-hidden or @style]"


_HIDDEN_STYLES = ("display:none", "visibility:hidden")


_STYLE_SIZE = re.compile(r"(?:^|;)(width|height):([^;!]*)")


# Line-number gutters of code blocks, by the highlighters' class names.
_GUTTER = re.compile(
    r"(^|[\s_-])(linenos?|linenodiv|line-?numbers?|line-?nums?|lineno-?s?|gutter|blob-num"
    r"|hljs-ln-numbers|hljs-ln-n|ln-num|code-line-number|rouge-gutter)($|\s)",
    re.I,
)


_GUTTER_CANDIDATES = (
    "//pre//*[@class]|//code//*[@class]|//td|//th[@class]|//pre|//*[contains(@class, 'lineno')]"
    "|//*[contains(@class, 'gutter')]|//*[contains(@class, 'line-number')]"
    "|//*[contains(@class, 'linenumber')]"
)


_ANCHOR_MARKS = frozenset(("¶", "#", "§", "🔗"))


def clean(tree: Any, *, main_content: bool) -> None:
    lxml.etree.strip_elements(tree, *_DROPPED, lxml.etree.Comment, with_tail=False)
    for control in tree.xpath(_FORM_CONTROLS):
        if control.getparent() is None:
            continue
        if len(text_of(control)) > _CONTROL_TEXT:
            control.drop_tag()
        else:
            control.drop_tree()
    for element in tree.xpath(_HIDDEN):
        style = _style(element)
        hidden = (
            element.get("hidden") is not None
            or ((element.get("aria-hidden") or "").strip().lower() == "true" and not _seen(element))
            or any(hidden in style for hidden in _HIDDEN_STYLES)
        )
        # A large hidden part is a tab, an accordion or a page shown by script: in main-content
        # mode the extractor judges it (product specs and FAQ answers sit in such parts).
        if hidden and not (main_content and _revealed(element)):
            element.drop_tree()
    if main_content:
        # Banners are blocks; an XPath testing every element's marks cost 2 ms on a 100 KB page.
        for element in [e for e in tree.iter(*_CONSENT_TAGS) if _consent(e)]:
            if element.getparent() is not None:
                element.drop_tree()
    for image in tree.xpath("//img"):
        src = (image.get("src") or "").strip().lower()
        if src.startswith("data:") or not src or _tracking_pixel(image):
            image.drop_tree()
    for anchor in tree.xpath("//a[string-length(normalize-space()) < 3]"):
        # Heading permalinks (Sphinx's ¶, GitHub's #): a mark, not content.
        if text_of(anchor).strip() in _ANCHOR_MARKS:
            anchor.drop_tree()
    for form in tree.xpath("//form"):
        # Some sites wrap the whole page in one <form> (ASP.NET): keep a form with an article.
        if len(text_of(form)) < _FORM_TEXT:
            form.drop_tree()
    drop_line_numbers(tree)


def drop_line_numbers(tree: Any) -> None:
    """Drop a code block's line-number gutter: the code stays, the numbers go.

    A gutter is an element marked as one (Pygments' `linenos`, GitHub's `blob-num`,
    highlight.js's `hljs-ln-numbers`, `gutter`, …) holding only numbers, or a table cell or
    `<pre>` of numbers counting up by one beside a cell holding code.
    """
    for element in tree.xpath(_GUTTER_CANDIDATES):
        if element.getparent() is None or not _only_numbers(text_of(element)):
            continue
        marks = f"{element.get('class') or ''} {element.get('id') or ''}"
        if _GUTTER.search(marks) or _gutter_beside_code(element):
            table = next(element.iterancestors("table"), None)
            element.drop_tree()
            if table is not None:
                _unwrap_lone_cell(table)


def _unwrap_lone_cell(table: Any) -> None:
    """Put a table left with one cell (the code beside a dropped gutter) in its place."""
    cells = table.xpath(".//td|.//th")
    if len(cells) != 1 or table.getparent() is None:
        return
    holder = table.makeelement("div", {})
    holder.text = cells[0].text
    holder.extend(list(cells[0]))
    holder.tail = table.tail
    table.getparent().replace(table, holder)


def _only_numbers(text: str) -> bool:
    return bool(text.strip()) and all(word.isdigit() for word in text.split())


def _gutter_beside_code(element: Any) -> bool:
    """Tell whether an unmarked run of numbers counting up by one sits beside code."""
    numbers = [int(word) for word in text_of(element).split()]
    if len(numbers) < 2 or numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        return False
    cell = next(element.iterancestors("td", "th"), None) if element.tag == "pre" else element
    if cell is None or cell.tag not in ("td", "th"):
        return False
    return any(
        sibling.tag in ("td", "th") and sibling.xpath(".//pre|.//code")
        for sibling in cell.itersiblings()
    )


def _revealed(element: Any) -> bool:
    """Tell whether a hidden part is content a reader reveals: a tab, an accordion, a long part."""
    marks = f"{element.get('class') or ''} {element.get('role') or ''}"
    return bool(_REVEALED.search(marks)) or len(text_of(element)) > _CONTROL_TEXT


def _seen(element: Any) -> bool:
    """Tell whether an `aria-hidden` element is seen: a card's second, unfocusable link.

    A card links its title and again its picture or summary; the second link is hidden from
    screen readers and the keyboard (`tabindex="-1"`) so it is not announced twice, but its
    text (a teaser's summary) is on the screen.
    """
    return element.tag == "a" and (element.get("tabindex") or "").strip() == "-1"


def _consent(element: Any) -> bool:
    """Tell whether an element is a cookie-consent banner or dialog."""
    for mark in (element.get("class"), element.get("id")):
        if mark and _CONSENT.search(mark):
            return True
    dialog = element.get("role") == "dialog" or element.get("aria-modal") == "true"
    return dialog and "cookie" in text_of(element).lower()


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


def code_languages(tree: Any) -> dict[str, str]:
    """Map each code block's text to its language, for when the extractor drops the class."""
    found: dict[str, str] = {}
    for pre in tree.iter("pre"):
        language = language_of(pre)
        if language:
            found[code_key(text_of(pre))] = language
    return found


def language_of(pre: Any) -> str:
    # Sphinx and Pygments mark the wrapper (`<div class="highlight-python">`), not the pre;
    # with line numbers, three levels up.
    for element in (pre, *pre.iterchildren("code"), *itertools.islice(pre.iterancestors(), 3)):
        if element.get("data-lang"):
            return str(element.get("data-lang")).strip().lower()
        match = _LANGUAGE.search(element.get("class") or "")
        if match:
            return str(match.group(1)).lower()
    return ""


def wrap_code(tree: Any) -> None:
    """Put the content of each `<pre>` in a `<code>`, so the extractor keeps it as code."""
    # trafilatura takes a `<pre>` for code only with a lone `<code>` child, a `lang` or a
    # highlighter's marks; any other is a quote, and its lines run together.
    for pre in list(tree.iter("pre")):
        if not only_code(pre):
            code = pre.makeelement("code", {})
            code.text, pre.text = pre.text, None
            code.extend(list(pre))  # moves the children, each with its tail
            pre.append(code)


def code_key(text: str) -> str:
    return " ".join(text.split())[:400]


def only_code(element: Any) -> bool:
    children = list(element)
    return (
        len(children) == 1
        and children[0].tag == "code"
        and not (element.text or "").strip()
        and not (children[0].tail or "").strip()
    )


def sanitize(part: Any) -> None:
    """Drop event handlers (`on*`) and script URLs from the HTML a caller may render.

    Scripts, frames and objects are gone already (`clean`); what is left could still run
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
