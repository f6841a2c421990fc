"""A forum or issue thread's posts, in order, each with its author and date.

trafilatura, built for articles, keeps a thread's text but drops who wrote each post, and
often the later posts. The platforms that dominate (Discourse, phpBB, vBulletin, XenForo,
Stack Exchange, Simple Machines, GitHub and GitLab issues, Reddit-style threads, schema.org
microdata) mark each post's body with a class or `itemprop`; each post is that body, with
the author and date found in the post around it. When the extractor kept every post,
`sign` writes those author and date lines into its answer instead.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

__all__ = ["missing_posts", "sign", "thread"]

# A post's body, by class token or `itemprop`, across the common platforms.
_BODY_CLASSES = frozenset(
    (
        "cooked",  # Discourse
        "postbody",  # phpBB
        "post_message",  # vBulletin
        "postcontent",
        "bbWrapper",  # XenForo
        "message-body",
        "s-prose",  # Stack Exchange
        "post-text",
        "js-comment-body",  # GitHub
        "note-text",  # GitLab
        "md",  # Reddit
        "post-content",
        "post-body",
        "forum-post-body",
    )
)
_BODY_PROPS = frozenset(("text", "articleBody", "commentText"))
_AUTHOR_CLASSES = frozenset(
    (
        "username",
        "author",
        "poster",
        "postauthor",
        "user-name",
        "message-name",
        "creator",
        "user-details",
        "comment-user",
    )
)
_MIN_POSTS = 2
_SIGNED_WORDS = 6  # a post's opening words, found at the start of a block of an extraction
_SIGNED_BLOCKS = ("div", "p", "blockquote", "ul", "ol", "pre", "table", "h2", "h3", "h4")
_OPENING_WORDS = 8
_MAX_AUTHOR = 60  # characters: a longer "author" is a signature or a whole header


def _classes(element: Any) -> set[str]:
    return set((element.get("class") or "").split())


def _is_body(element: Any) -> bool:
    if "inner" in _classes(element) and (element.get("id") or "").startswith("msg_"):
        return True  # Simple Machines Forum: `inner` alone is too common a class
    return bool(_classes(element) & _BODY_CLASSES) or element.get("itemprop") in _BODY_PROPS


def _bodies(root: Any) -> list[Any]:
    """Return the post bodies in page order, none inside another.

    Comments on a post (Stack Exchange's under each answer) are not posts: where at least
    two bodies are not comments, the comments' bodies are left out.
    """
    found: list[Any] = []
    for element in root.iter("div", "section", "article", "td", "span", "blockquote"):
        if _is_body(element) and not any(_is_body(a) for a in element.iterancestors()):
            found.append(element)
    posts = [body for body in found if not _is_comment(body)]
    return posts if len(posts) >= _MIN_POSTS else found


def _is_comment(body: Any) -> bool:
    """Tell whether a body is marked as a comment, on itself or its three nearest parents."""
    for element in (body, *itertools.islice(body.iterancestors(), 3)):
        if any(token.startswith("comment") for token in _classes(element)):
            return True
    return False


def _is_author(element: Any) -> bool:
    return bool(
        _classes(element) & _AUTHOR_CLASSES
        or element.get("itemprop") == "author"
        or element.get("rel") == "author"
    )


def _author_and_date(body: Any) -> tuple[str, str]:
    """Return the author and date written in the post around a body, outside the body."""
    author = date = ""
    if any(_is_author(element) for element in body.iter()):
        return author, date  # the body says who wrote it itself (phpBB)
    container = body
    for _ in range(6):
        container = container.getparent()
        if container is None:
            break
        for element in container.iter():
            if element is body:
                continue
            if any(a is body for a in element.iterancestors()):
                continue
            if not author and _is_author(element):
                name = element if element.tag == "a" else next(element.iter("a"), element)
                text = " ".join(name.text_content().split())
                if 0 < len(text) <= _MAX_AUTHOR:
                    author = text
            if not date and element.tag == "time":
                date = (element.get("datetime") or element.text_content()).strip()
            elif not date and "postinfo" in _classes(element):
                # Simple Machines: the post's own link, named by its date
                link = next(element.iter("a"), None)
                date = " ".join(link.text_content().split()) if link is not None else ""
        if author:
            break
    return author, date


def missing_posts(posts: Any, extracted_text: str) -> bool:
    """Tell whether an extraction lacks any post of a thread (by each post's opening words)."""
    folded = " ".join(extracted_text.split())
    for post in posts.iterchildren("div"):
        opening = " ".join(post.text_content().split()[:_OPENING_WORDS])
        if opening and opening not in folded:
            return True
    return False


def thread(root: Any) -> Any:
    """Return a `<div>` of the thread's title and posts, or None when this is no thread."""
    bodies = _bodies(root)
    if len(bodies) < _MIN_POSTS:
        return None
    out = root.makeelement("div", {})
    heading = next(root.iter("h1"), None)
    if heading is None:
        heading = next(root.iter("h2"), None)
    if heading is not None:
        out.append(copy.deepcopy(heading))
        out[-1].tail = None
    for body in bodies:
        author, date = _author_and_date(body)
        if author or date:
            line = out.makeelement("p", {})
            strong = line.makeelement("strong", {})
            strong.text = author or "unknown"
            line.append(strong)
            strong.tail = f" · {date}" if date else None
            out.append(line)
        post = copy.deepcopy(body)
        post.tag, post.tail = "div", None
        out.append(post)
    return out


def sign(extracted: Any, posts: Any) -> None:
    """Write each post's author and date line into an extraction, before the post's text.

    In place. A post is found by its opening words at the start of a block of the
    extraction (the first such block not found already); a post not found gets no line.
    """
    line = None
    used: set[Any] = set()
    for part in posts.iterchildren():
        if part.tag == "p":
            line = part
            continue
        if part.tag != "div" or line is None:
            continue
        opening = " ".join(part.text_content().split()[:_SIGNED_WORDS])
        for block in extracted.iterdescendants(*_SIGNED_BLOCKS):
            if block in used:
                continue
            if " ".join("".join(block.itertext()).split()).startswith(opening):
                used.update(block.iter())
                signature = copy.deepcopy(line)
                signature.tail = None
                block.addprevious(signature)
                break
        line = None
