"""bakeoff/BAKEOFF.md, the operator's protocol: it stands alone, and says how queries count."""

from __future__ import annotations

from pathlib import Path

PROTOCOL = Path(__file__).resolve().parents[2] / "bakeoff" / "BAKEOFF.md"


def test_the_protocol_stands_alone() -> None:
    text = PROTOCOL.read_text(encoding="utf-8")
    assert "spec/" not in text  # the spec is not in the repository an operator has
    for name in ("results.jsonl", "meta.json", "packs/A.json", "key/key.json", "judgments.csv"):
        assert f"`{name}`" in text  # every file of a run is described here


def test_the_protocol_says_both_query_numberings() -> None:
    text = " ".join(PROTOCOL.read_text(encoding="utf-8").split())
    assert "`query_index` in `results.jsonl` counts from 0" in text
    assert "`number` in the packs and `query` in `judgments.csv` count from 1" in text
    assert "`number = query_index + 1`" in text
