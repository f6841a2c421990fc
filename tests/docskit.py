"""The README's output blocks, which the docs tests hold to what commands really print."""

from __future__ import annotations

from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def readme_block_after(marker: str) -> str:
    """Return the first ```output block after `marker` in the README."""
    start = README.index(marker)
    block = README.index("```output\n", start) + len("```output\n")
    return README[block : README.index("```", block)]
