"""Which kind of page this is, from cheap signals: URL, schema.org types, platform marks."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

__all__ = ["PAGE_TYPES", "for_sale", "page_type", "product_description", "structured_data"]

PAGE_TYPES = ("article", "forum", "product", "collection", "listing", "documentation", "service")

# A forum's topic carries its number (`/topic/423897-…`); a news site's `/topic/software` is
# a tag page, and `/community/` holds tutorials as often as threads. `/t5/`: Khoros boards.
_FORUM_URL = re.compile(
    r"/t/[^/]+/\d+|/threads?/|/topic/\d|/discussions?/topic/|/questions/\d+|/comments/\w+"
    r"|/issues/\d+|/pull/\d+|/discussions?/\d+|viewtopic\.php|showthread\.php|/forums?/|/t5/"
    r"|/(thread|topic)-\d+|[?&](topic|showtopic|threadid|tid)=\d",
    re.I,
)
_FORUM_MARK = re.compile(
    r"discourse|phpbb|vbulletin|xenforo|invision|vanilla|flarum|nodebb|stackexchange|mybb", re.I
)
_DOCS_URL = re.compile(
    r"^(docs?|developers?|devdocs|wiki|manual|help|learn|api)\.|readthedocs|\.github\.io"
    r"|/(docs?|documentation|manual|reference|api|guides?|tutorials?|wiki|handbook|kb)(/|$)",
    re.I,
)
_DOCS_MARK = re.compile(
    r"sphinx|docutils|mkdocs|docusaurus|gitbook|mediawiki|rustdoc|bookdown|vitepress|docsy"
    r"|readthedocs|javadoc|doxygen|hugo-book|starlight",
    re.I,
)
_PRODUCT_URL = re.compile(r"/(products?|p|dp|item)/[^/]+", re.I)
_COLLECTION_URL = re.compile(
    r"/(collections?|categor(y|ies)|c|cat|shop|store|department)(/|$)", re.I
)
_LISTING_URL = re.compile(
    r"/(news|blog|articles|posts|stories|events|jobs|courses|issues|archive|tags?|topics|"
    r"page/\d+|search|results|directory|list)/?$",
    re.I,
)
_ARTICLE_URL = re.compile(r"/(19|20)\d\d/\d\d?/|/\d{4}-\d\d-\d\d|/blog/[^/]+|/news/[^/]+", re.I)
_ARTICLE_TYPES = ("Article", "NewsArticle", "BlogPosting", "Report", "ScholarlyArticle")
_FORUM_TYPES = ("DiscussionForumPosting", "QAPage", "Comment")


def structured_data(tree: Any) -> list[dict[str, Any]]:
    """Return every JSON-LD object on the page, `@graph`s and lists flattened."""
    found: list[dict[str, Any]] = []
    for script in tree.iter("script"):
        if (script.get("type") or "").strip().lower() != "application/ld+json":
            continue
        try:
            data = json.loads(script.text or "")
        except ValueError:
            continue
        stack = [data]
        while stack:
            item = stack.pop()
            if isinstance(item, list):
                stack.extend(item)
            elif isinstance(item, dict):
                found.append(item)
                stack.extend(
                    v for k, v in item.items() if k == "@graph" or isinstance(v, dict | list)
                )
    return found


def product_description(objects: list[dict[str, Any]]) -> str:
    """Return the longest description a `Product` (or `ProductGroup`) gives of itself."""
    found = [
        item["description"]
        for item in objects
        if isinstance(item.get("description"), str)
        and {"Product", "ProductGroup"} & set(_types([item]))
    ]
    return max(found, key=len, default="")


def for_sale(tree: Any, objects: list[dict[str, Any]]) -> bool:
    """Tell whether the page sells what it shows: a schema.org `Offer`, or og:type product.

    A service page may carry a `Product` for its review stars; only a product has an offer.
    """
    types = _types(objects)
    return bool(types["Offer"] or types["AggregateOffer"]) or _og_type(tree) == "product"


def _og_type(tree: Any) -> str:
    """Return the page's Open Graph type (`og:type`) in lower case, or ""."""
    return next(
        (
            (m.get("content") or "").strip().lower()
            for m in tree.iter("meta")
            if m.get("property") == "og:type"
        ),
        "",
    )


def _types(objects: list[dict[str, Any]]) -> Counter[str]:
    counted: Counter[str] = Counter()
    for item in objects:
        kind = item.get("@type")
        for name in kind if isinstance(kind, list) else [kind]:
            if isinstance(name, str):
                counted[name.rsplit("/", 1)[-1]] += 1
    return counted


def page_type(
    tree: Any, url: str, objects: list[dict[str, Any]], *, default: str = "article"
) -> str:
    """Return the page's type, one of `PAGE_TYPES`; `default` when nothing says which.

    Reading treats a page nothing marks as an article apart from an article (`default=""`):
    on WCXB most such pages are collections, services, listings and products.
    """
    parts = urlsplit(url)
    path = parts.path or "/"
    where = f"{parts.netloc}{path}".lower()
    types = _types(objects)
    head = " ".join(
        f"{m.get('name', '')} {m.get('content', '')} {m.get('property', '')}"
        for m in tree.iter("meta")
        if (m.get("name") or m.get("property") or "").lower()
        in ("generator", "og:type", "og:site_name")
    )
    body = tree.find("body")
    marks = f"{head} {body.get('class', '') if body is not None else ''} {tree.get('class', '')}"
    og_type = _og_type(tree)
    itemtypes = " ".join(str(t) for t in tree.xpath("//@itemtype")[:200])
    if (
        any(types[name] for name in _FORUM_TYPES)
        or "DiscussionForumPosting" in itemtypes
        or _FORUM_MARK.search(marks)
        or _FORUM_URL.search(f"{path}?{parts.query}")
    ):
        return "forum"
    products = types["Product"] + types["ProductGroup"] + itemtypes.count("schema.org/Product")
    if products >= 3 or "product.group" in og_type:
        return "collection"
    # A product's path may pass through its shop or collection (`/store/products/x`,
    # `/collections/mugs/products/x`): the product's own shape is asked first.
    if products or og_type == "product" or _PRODUCT_URL.search(path):
        return "product"
    if _COLLECTION_URL.search(path):
        return "collection"
    if (
        _DOCS_MARK.search(marks)
        or _DOCS_URL.search(where)
        or types["TechArticle"]
        or types["APIReference"]
    ):
        return "documentation"
    if any(types[name] for name in _ARTICLE_TYPES) or og_type == "article":
        return "article"
    # One <article> of paragraphs with a date is a story, wherever it is served.
    story = len(tree.xpath("//article[count(.//p) >= 3 and .//time]")) == 1
    if types["ItemList"] or types["CollectionPage"] or _LISTING_URL.search(path):
        return "article" if story else "listing"
    if (
        _ARTICLE_URL.search(path)
        or story
        or any(m.get("property") == "article:published_time" for m in tree.iter("meta"))
    ):
        return "article"
    if types["FAQPage"] or types["Service"] or types["LocalBusiness"] or path.count("/") <= 2:
        return "service"
    return default
