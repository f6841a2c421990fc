"""Turning a fetched page into markdown, text, cleaned HTML or links (fetch.md §5).

    document = convert(body, content_type="text/html; charset=utf-8", media_type="text/html",
                       url="https://example.org/post", format="markdown", main_content=True)
    document.title, document.content, document.links, document.page_type, document.warnings

HTML goes decode -> clean -> extract -> markdown, one module each: `decode` (bytes to a
parsed page and its head), `clean` (what no reader sees), `extract` (the main content, by
page type: `siftlib.fetch.pagetype`, `siftlib.fetch.threads`), `markdown` (the renderer).

Other types: `text/markdown` and `text/plain` pass through; `application/json` becomes a
fenced `json` block (text: as is). `html` format is the cleaned HTML of the same part of the
page; `raw_html` the decoded page as sent; `links` the link list, one per line.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import lxml.etree

from siftlib.fetch.convert.clean import clean, code_languages, sanitize, wrap_code
from siftlib.fetch.convert.decode import base_url, decode, links, metadata, parse, text_of
from siftlib.fetch.convert.extract import main, named
from siftlib.fetch.convert.markdown import Renderer, squash
from siftlib.fetch.pagetype import for_sale, page_type, product_description, structured_data

__all__ = ["Document", "convert", "decode"]


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


def _product_name(tree: Any) -> str:
    """Return the page's first heading with text: on a product page, the product's name."""
    heading = next((h for h in tree.iter("h1") if text_of(h).strip()), None)
    return squash(text_of(heading)) if heading is not None else ""


def _other(text: str, media_type: str, format: str) -> str:
    """Return a page that is not HTML in one format."""
    if format == "markdown" and media_type == "application/json":
        fence = "````" if "```" in text else "```"
        return f"{fence}json\n{text.strip()}\n{fence}"
    if format == "html":
        return f"<pre>{html.escape(text)}</pre>"
    return "" if format == "links" else text


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
    tree = parse(text)
    if tree is None:
        return Document(also={name: text if name == "raw_html" else "" for name in formats})
    base = base_url(tree, url)
    title, description, language = metadata(tree)
    document = Document(title, description, language, links=links(tree, base))
    objects = structured_data(tree)
    kind = page_type(tree, base, objects, default="")  # "": nothing says what it is
    document.page_type = kind or "article"
    if not document.title:
        heading = tree.find(".//h1")
        document.title = squash(text_of(heading)) if heading is not None else ""
    converted = {"raw_html": text, "links": "\n".join(document.links)}
    if set(formats) - set(converted):
        if include or exclude:
            from siftlib.fetch.filters import keep_and_drop

            tree = keep_and_drop(tree, include=include, exclude=exclude)
            main_content = main_content and not include
        clean(tree, main_content=main_content)
        languages = code_languages(tree)
        part: Any = tree.find("body")
        if part is None:
            part = tree
        if main_content:
            wrap_code(tree)
            anchor = product_description(objects) if kind == "product" else ""
            name = _product_name(tree) if kind == "product" and for_sale(tree, objects) else ""
            part = main(tree, part, base, kind, document.warnings, anchor=anchor)
            named(part, name)
        if "html" in formats:
            sanitize(part)
            converted["html"] = lxml.etree.tostring(part, encoding="unicode", method="html")
        for name in ("markdown", "text"):
            if name in formats:
                renderer = Renderer(
                    base, plain=name == "text", languages=languages, images=not main_content
                )
                converted[name] = renderer.render(part)
    document.also = {name: converted[name] for name in formats}
    return document
