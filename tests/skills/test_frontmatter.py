"""The frontmatter parser: the YAML subset of `SKILL.md` frontmatter that skills use."""

from __future__ import annotations

from typing import Any

import pytest

from siftlib.skills.frontmatter import parse_frontmatter


def parse(text: str) -> dict[str, Any]:
    return dict(parse_frontmatter(text.splitlines()))


@pytest.mark.parametrize(
    ("text", "description"),
    [
        ("description: plain words here", "plain words here"),
        ("description: plain with comment # dropped", "plain with comment"),
        ('description: "say \\"hi\\" \\\\ caf\\u00e9\\t!"', 'say "hi" \\ café\t!'),
        ("description: 'it''s quoted: yes'", "it's quoted: yes"),
        ('description: "two\n  lines\n\n  paragraph"', "two lines\nparagraph"),
        ('description: "escaped\\\n  break"', "escapedbreak"),
        ("description: 'single\n  folded'", "single folded"),
        ("description: >\n  folded one\n  folded two\n\n  next\n", "folded one folded two\nnext\n"),
        ("description: >-\n  a\n    indented\n  b", "a\n  indented\nb"),
        ("description: |\n  line one\n  line two\n", "line one\nline two\n"),
        ("description: |-\n  keep\n  lines", "keep\nlines"),
        ("description: |+\n  kept\n\n", "kept\n\n"),
        ("description: >2\n   more\n  base", " more\nbase\n"),
        ("description:\n  plain on\n  next lines", "plain on next lines"),
        ("description: first line\n  continues here", "first line continues here"),
        ("description: Use when: colons appear", "Use when: colons appear"),
        ("description: — em dash ünïcode", "— em dash ünïcode"),
        # As PyYAML writes long double-quoted values: escaped breaks, "\ " for a space.
        ('"description": "Creating art\\\n  \\ with code."', "Creating art with code."),
        ("'description': 'quoted key'", "quoted key"),
    ],
)
def test_frontmatter_scalar_styles(text: str, description: str) -> None:
    assert parse(text)["description"] == description


def test_frontmatter_skips_nested_values_and_comments() -> None:
    fields = parse(
        "# a comment\n"
        "name: tool\n"
        "allowed-tools:\n"
        "  - Read\n"
        "- Bash\n"
        "metadata:\n"
        "  short-description: not the description\n"
        "  description: nested, not top level\n"
        "description: the real one\n"
        "disable-model-invocation: true"
    )
    assert fields["name"] == "tool"
    assert fields["description"] == "the real one"
    assert fields["metadata"] is None
    assert fields["allowed-tools"] is None
    assert fields["disable-model-invocation"] is True


@pytest.mark.parametrize(
    ("value", "expected"),
    [("true", True), ("True", True), ("TRUE", True), ("false", "false"), ("yes", "yes")],
)
def test_frontmatter_booleans(value: str, expected: object) -> None:
    assert parse(f"disable-model-invocation: {value}")["disable-model-invocation"] == expected


@pytest.mark.parametrize("value", ["", "~", "null", '"unterminated'])
def test_frontmatter_empty_values_are_none(value: str) -> None:
    assert parse(f"description: {value}")["description"] is None
