"""Write a skill catalog's JSON entries out as skill folders, as `sift rerank-skills` reads them.

    python3 tools/skill_folders.py ../shared/realdata/skills/catalog.json /tmp/skills-real

Each entry (`{"name", "description", "source", "disable_model_invocation"?}`, the shape of
`../shared/realdata/skills/catalog.json`) becomes `ROOT/<name>/SKILL.md` with that
frontmatter; a name seen again gets its folder suffixed with its repository owner (the real
catalog holds two `skill-creator`s). The README's examples over the real catalog were run on
exactly this; `tests/skills/conftest.py` writes its real-catalog folders with it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def write_catalog(entries: list[dict[str, Any]], root: Path, *, body: str = "") -> None:
    """Write each entry as `root/<folder>/SKILL.md`; a repeated name gets its own folder."""
    folders: set[str] = set()
    for entry in entries:
        folder = entry["name"]
        while folder in folders:
            folder += "-" + entry["source"].split("/")[0]
        folders.add(folder)
        description = entry["description"]
        if "\n" in description:
            block = "".join(f"  {line}\n" for line in description.split("\n"))
            value = "|-\n" + block.rstrip("\n")
        else:
            value = json.dumps(description, ensure_ascii=False)
        lines = [f"name: {entry['name']}", f"description: {value}", "license: see source"]
        if entry.get("disable_model_invocation"):
            lines.append("disable-model-invocation: true")
        path = root / folder / "SKILL.md"
        path.parent.mkdir(parents=True)
        path.write_text("---\n" + "\n".join(lines) + "\n---\n\n" + body + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    """Write the catalog named by argv[0] under the folder argv[1] (which must not exist)."""
    if len(argv) != 2:
        print("usage: python3 tools/skill_folders.py CATALOG.json ROOT", file=sys.stderr)
        return 2
    catalog, root = Path(argv[0]), Path(argv[1])
    if root.exists():
        print(f"skill_folders: {root} exists; choose a new folder", file=sys.stderr)
        return 2
    write_catalog(json.loads(catalog.read_text(encoding="utf-8")), root)
    print(f"wrote {len(list(root.iterdir()))} skill folders in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
