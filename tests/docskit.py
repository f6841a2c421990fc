"""The docs' output blocks, which the docs tests hold to what commands really print."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
# The README and every page under docs/, by path relative to the repository.
PAGES = {"README.md": README} | {
    str(page.relative_to(REPO)): page.read_text(encoding="utf-8")
    for page in sorted((REPO / "docs").rglob("*.md"))
}


def docs_block_after(marker: str) -> str:
    """Return the first ```output block after `marker`, on the one page that shows it."""
    pages = [text for text in PAGES.values() if marker in text]
    assert len(pages) == 1, f"{marker!r} is on {len(pages)} pages of the docs, not one"
    text = pages[0]
    start = text.index(marker)
    block = text.index("```output\n", start) + len("```output\n")
    return text[block : text.index("```", block)]
