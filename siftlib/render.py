"""Hits and pages as text: for a terminal (`sift search`, `sift fetch`) and for a model (MCP).

    print(terminal_hits(response.results))          # title, URL, snippet; a blank line between
    text = model_hits(results, warnings, cached)    # numbered blocks, then the caveats

Side by side so that the two faces of one result stay alike where they should: every hit is
its title, its URL and its snippet with runs of whitespace collapsed, and a page is its
content. They differ where their readers do: a terminal's hits carry no numbers (a script
splits them on blank lines) and warnings go to stderr; a model's hits are numbered, and the
warnings and the cache say so in the text itself (mcp.md §3: the same facts, never the JSON).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from siftlib.hits import Hit


def terminal_hits(hits: Sequence[Hit]) -> str:
    """Return hits as `sift search` prints them: title, URL, snippet, a blank line between."""
    blocks = []
    for hit in hits:
        title, url, snippet = (" ".join(text.split()) for text in (hit.title, hit.url, hit.snippet))
        # An empty snippet leaves no empty line: a blank line is what separates hits.
        blocks.append("\n".join([title, url, snippet] if snippet else [title, url]))
    return "\n\n".join(blocks)


def terminal_page(content: str) -> str:
    """Return a page's content as `sift fetch` prints it: ending in one newline, if any text."""
    return content if content.endswith("\n") or not content else content + "\n"


def model_hits(results: Sequence[Mapping[str, Any]], warnings: Sequence[str], cached: bool) -> str:
    """Return `web_search` results as numbered blocks of title, URL and snippet, then caveats."""
    blocks = [
        "\n".join(
            line
            for line in (
                f"{hit['position']}. {' '.join(hit['title'].split())}",
                f"   {hit['url']}",
                f"   {' '.join(hit['snippet'].split())}" if hit["snippet"].strip() else "",
            )
            if line
        )
        for hit in results
    ]
    text = "\n\n".join(blocks) if blocks else "No results."
    if warnings:
        text += "\n\nWarnings: " + "; ".join(warnings) + "."
    if cached:
        text += "\n\n(from sift's cache)"
    return text


def model_page(page: Mapping[str, Any]) -> str:
    """Return a `web_fetch` page: a head line (title, final URL, status), then its content."""
    head = page["title"] or page["final_url"]
    facts = [page["final_url"]] if page["title"] else []
    facts.append(f"status {page['status']}")
    if page["truncated"]:
        facts.append("truncated")
    text = f"{head} ({', '.join(facts)})\n\n{page['content']}"
    if page["warnings"]:
        text += "\n\nWarnings: " + "; ".join(page["warnings"]) + "."
    return text
