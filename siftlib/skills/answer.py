"""The tool-result shape of a skill search (skills.md §1): the agent's text and its JSON twin.

print(render_text(result))             # "Found 3 matching skills, showing the best 2. …"
json.dumps(render_json(result))        # {"content": [...], "details": {"matches", "total", …}}
"""

from __future__ import annotations

from typing import Any

from siftlib.skills.catalog import Catalog
from siftlib.skills.keyword import SkillResult

NO_MATCH_TEXT = "No matching skills found."


def render_text(result: SkillResult, *, catalog: Catalog | None = None) -> str:
    """Return the result as text for an agent: each match, where it is and what to read.

    Given the `catalog` searched, an empty one is said as such, with the folders looked in:
    "no matching skill" would send the user hunting for a better query.
    """
    if catalog is not None and not catalog.skills:
        return "No skills found in: " + ", ".join(map(str, catalog.searched))
    if not result.matches:
        return NO_MATCH_TEXT
    shown = len(result.matches)
    lines = [
        f"Found {result.total} matching skill{'s' if result.total != 1 else ''}"
        + (f", showing the best {shown}" if shown < result.total else "")
        + ". Read the SKILL.md of the skill that fits before using it;"
        " relative paths inside it resolve against its base directory."
    ]
    for number, skill in enumerate(result.matches, 1):
        lines += [
            "",
            f"{number}. {skill.name}: {skill.description}",
            f"   Read: {skill.file_path}",
            f"   Base directory: {skill.base_dir}",
        ]
    return "\n".join(lines)


def render_json(result: SkillResult, *, catalog: Catalog | None = None) -> dict[str, Any]:
    """Return the result in the tool-result shape of spec §1, with `mode` (keyword | local |
    reranked), §10's `selection`, and `fallback` when opted-in reranking did not decide."""
    details: dict[str, Any] = {
        "matches": [
            {
                "name": skill.name,
                "description": skill.description,
                "filePath": str(skill.file_path),
                "baseDir": str(skill.base_dir),
            }
            for skill in result.matches
        ],
        "total": result.total,
    }
    details["mode"] = result.mode or "keyword"
    if result.mode == "local" and not result.matches:
        details["selection"] = "none"  # local ranking decided that no skill fits
    if result.fallback is not None:
        details["fallback"] = result.fallback
    text = render_text(result, catalog=catalog)
    return {"content": [{"type": "text", "text": text}], "details": details}
