"""When `render = "auto"` renders: the static page looks like an application shell.

    reason = shell_reason(page.body, document.content)   # e.g. "an empty #root", or None

A page is rendered when it has at least one script (a page without scripts cannot build
anything) and one of these holds, checked in this order:
- a script-built root is empty: an element with id `root`, `app`, `__next`, `__nuxt`,
  `___gatsby` or `svelte` holding nothing but whitespace and comments;
- a `<noscript>` asks for JavaScript ("enable JavaScript", "requires JavaScript", …) and the
  page shows fewer than `HINTED_TEXT` characters of text;
- the page shows fewer than `LITTLE_TEXT` characters of text (outside scripts, styles,
  templates and `<noscript>`);
- the main content the static conversion found is near-empty (fewer than `NEAR_EMPTY`
  characters).
"""

from __future__ import annotations

import re

__all__ = ["shell_reason"]

LITTLE_TEXT = 200
HINTED_TEXT = 1500
NEAR_EMPTY = 80
_HEAD = 2 * 1024 * 1024  # a shell is small; a page past this is read only this far

_SCRIPT = re.compile(rb"<script\b", re.I)
_EMPTY_ROOT = re.compile(
    r"<([a-z][a-z0-9]*)\b[^>]*\bid\s*=\s*[\"']?(root|app|__next|__nuxt|___gatsby|svelte)\b[\"']?"
    r"[^>]*>(?:\s|<!--.*?-->)*</\1\s*>",
    re.I | re.S,
)
_INVISIBLE = re.compile(
    r"<(script|style|noscript|template|svg)\b.*?</\1\s*>|<!--.*?-->|<head\b.*?</head\s*>",
    re.I | re.S,
)
_NOSCRIPT = re.compile(r"<noscript\b[^>]*>(.*?)</noscript\s*>", re.I | re.S)
_ASKS_FOR_JS = re.compile(
    r"(enable|turn on|requires?|need|needs|without|disabled)\W+(?:\w+\W+){0,3}javascript|"
    r"javascript\W+(?:\w+\W+){0,3}(required|disabled|enabled|needed)",
    re.I,
)
_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")
_ENTITY = re.compile(r"&[#a-z0-9]+;", re.I)


def shell_reason(html: bytes, content: str) -> str | None:
    """Return why a static HTML page should be rendered, or None when it reads as it is."""
    head = html[:_HEAD]
    if not _SCRIPT.search(head):
        return None
    text = head.decode("utf-8", "replace")
    root = _EMPTY_ROOT.search(text)
    if root:
        return f"an empty #{root.group(2)}"
    visible = len(
        _SPACE.sub(" ", _ENTITY.sub(" ", _TAG.sub(" ", _INVISIBLE.sub(" ", text)))).strip()
    )
    hint = any(_ASKS_FOR_JS.search(_TAG.sub(" ", inner)) for inner in _NOSCRIPT.findall(text))
    if hint and visible < HINTED_TEXT:
        return "a <noscript> asking for JavaScript"
    if visible < LITTLE_TEXT:
        return "little visible text"
    if len(content.strip()) < NEAR_EMPTY:
        return "a near-empty main content"
    return None
