"""Build tools/skill_corpus.txt.gz: the sentences `make vectors` teaches the word-piece table on.

Short, plain statements of what a piece of software does, because that is what a skill's
description and a person's request are. Three sources, all on a Debian bookworm machine:
- the first line of every package description in bookworm's `main` archive (Debian's apt
  lists), which name a tool's job in a few words;
- the NAME line of every installed manual page (`apropos -l .`);
- the prose sentences of Python's own documentation topics (`pydoc_data.topics`).
Distinct sentences of 3 to 40 words are kept. None of sift's query sets or catalogs is read
except to drop any sentence that repeats a query or a skill's description word for word, so the
table never sees its own tests. Run once, by hand, and the output is committed: the apt lists
and manual pages of a machine change with its updates, so `make vectors` reads the committed
file and stays reproducible.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from siftlib.skills.frontmatter import parse_frontmatter, read_frontmatter  # noqa: E402

LISTS = Path("/var/lib/apt/lists")
PACKAGES = "deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages.lz4"
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
MAX_WORDS = 40
HEADING = re.compile(r"(?m)^.*\n[*=-]{3,}$")  # a title and the line that underlines it


def debian() -> list[str]:
    """Return the first description line of each package in bookworm's main archive."""
    text = subprocess.run(
        ["lz4", "-dc", str(LISTS / PACKAGES)], capture_output=True, check=True, text=True
    ).stdout
    field = "Description: "
    return [line[len(field) :] for line in text.splitlines() if line.startswith(field)]


def manuals() -> list[str]:
    """Return the NAME line's description of each installed manual page."""
    text = subprocess.run(["apropos", "-l", "."], capture_output=True, text=True).stdout
    return [line.split(" - ", 1)[1] for line in text.splitlines() if " - " in line]


def python_docs() -> list[str]:
    """Return the prose sentences of Python's documentation topics (not code, not grammar)."""
    from pydoc_data.topics import topics

    found = []
    for text in topics.values():
        text = HEADING.sub("", text)
        for paragraph in re.split(r"\n\s*\n", text):
            if paragraph.startswith((" ", "+", "|")) or "::=" in paragraph or ">>>" in paragraph:
                continue  # code, a table or grammar
            found.extend(SENTENCE_END.split(" ".join(paragraph.split())))
    return found


def held_back() -> set[str]:
    """Return every query and skill description sift is measured on, normalised."""
    texts = set()
    for path in (ROOT / "testdata" / "skills").rglob("*.jsonl"):
        texts.update(json.loads(line)["query"] for line in path.read_text().splitlines() if line)
    # Every fixture skill, the disabled and shadowed ones too, read by sift's own parser.
    for path in (ROOT / "testdata" / "skills").rglob("SKILL.md"):
        description = parse_frontmatter(read_frontmatter(path)).get("description")
        if isinstance(description, str):
            texts.add(description)
    real = ROOT.parent / "shared" / "realdata" / "skills" / "catalog.json"
    if real.exists():
        texts.update(skill.get("description", "") for skill in json.loads(real.read_text()))
    return {normal(text) for text in texts}


def normal(text: str) -> str:
    """Return `text` lowercased with its whitespace collapsed and end punctuation dropped."""
    return " ".join(text.lower().split()).rstrip(".")


def main(target: Path) -> None:
    """Gather, filter and write the corpus, one sentence per line, in a stable order."""
    held = held_back()
    seen: set[str] = set()
    kept = []
    for sentence in debian() + manuals() + python_docs():
        key = normal(sentence)
        if key in seen or key in held or not 3 <= len(key.split()) <= MAX_WORDS:
            continue
        seen.add(key)
        kept.append(" ".join(sentence.split()))
    text = "\n".join(kept).encode("utf-8") + b"\n"
    target.write_bytes(gzip.compress(text, mtime=0))  # no time, no name: the same input, same bytes
    print(f"{target}: {len(kept)} sentences")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
