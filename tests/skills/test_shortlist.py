"""The shortlist and the bounded outbound request (spec §5)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from siftlib.skills.catalog import Catalog, Skill, discover
from siftlib.skills.consent import RerankSettings
from siftlib.skills.keyword import keyword_search
from siftlib.skills.shortlist import (
    NoRequest,
    OutboundRequest,
    build_request,
    compact_json,
    shortlist,
    truncate_utf8,
)

MARKER = "BODY-MARKER-never-read-by-search"  # as written by the catalog fixtures
ON = RerankSettings(enabled=True)


def catalog_of(*skills: tuple[str, str]) -> Catalog:
    built = [
        Skill(
            name=name,
            description=description,
            file_path=Path(f"/home/u/.agents/skills/{name}/SKILL.md"),
            base_dir=Path(f"/home/u/.agents/skills/{name}"),
        )
        for name, description in skills
    ]
    return Catalog(skills=tuple(sorted(built, key=lambda s: s.name)))


def request_for(catalog: Catalog, query: str, **settings: object) -> OutboundRequest:
    outcome = build_request(catalog, query, RerankSettings(enabled=True, **settings))  # type: ignore[arg-type]
    assert isinstance(outcome, OutboundRequest), outcome
    return outcome


def ids_and_names(request: OutboundRequest) -> list[tuple[str, str]]:
    return [(c["id"], c["name"]) for c in request.body["candidates"]]


# --- the shortlist ---------------------------------------------------------------------------


def test_synonym_only_skill_last_in_300_gets_a_slot() -> None:
    many = [(f"tool-{n:03d}", f"Builds spreadsheet report number {n}.") for n in range(299)]
    catalog = catalog_of(*many, ("zz-ledger", "Edit Excel workbooks and pivot tables."))
    assert len(catalog.skills) == 300 and catalog.skills[-1].name == "zz-ledger"
    # The keyword baseline never sees the synonym...
    assert "zz-ledger" not in [s.name for s in keyword_search(catalog, "spreadsheet", 20).matches]
    # ...but the concept stream reserves it the second slot, before the lexical stream fills up.
    request = request_for(catalog, "spreadsheet")
    assert ids_and_names(request)[:3] == [
        ("c0", "tool-000"),
        ("c1", "zz-ledger"),
        ("c2", "tool-001"),
    ]
    assert len(request.candidates) == 32
    assert request.candidates[1].name == "zz-ledger"
    assert request.body["query"] == "spreadsheet"  # never expanded with synonyms


def test_a_late_skill_sharing_neither_word_nor_concept_is_left_out() -> None:
    many = [(f"tool-{n:03d}", f"Builds spreadsheet report number {n}.") for n in range(299)]
    catalog = catalog_of(*many, ("zz-ledger", "Edit Excel workbooks and pivot tables."))
    names = [s.name for s in shortlist(catalog, "report", max_candidates=32)]
    assert len(set(names)) == 32 and names[0] == "tool-000" and "zz-ledger" not in names


def test_streams_alternate_lexical_first() -> None:
    catalog = catalog_of(
        ("alpha", "Fix a bug in the parser, the lexer, the printer and the other long parts."),
        ("beta", "Read a traceback."),  # a synonym of "bug" only
        ("delta", "Nothing relevant."),
        ("epsilon", "A bug."),
        ("zeta", "Explain a traceback."),  # a synonym only, and last by name
    )
    names = [s.name for s in shortlist(catalog, "bug", max_candidates=10)]
    # lexical: alpha, epsilon (2 each), then the zero scores by name: beta, delta, zeta.
    # concept (relevance): epsilon (short), beta, zeta (synonyms), alpha (long description).
    assert names == ["alpha", "epsilon", "beta", "zeta", "delta"]


def test_concept_stream_first_when_no_lexical_score() -> None:
    catalog = catalog_of(
        ("a-draw", "Draws pictures."),
        ("b-sheets", "Edit Excel files."),
        ("c-misc", "Miscellaneous."),
    )
    names = [s.name for s in shortlist(catalog, "spreadsheet", max_candidates=10)]
    assert names == ["b-sheets", "a-draw", "c-misc"]


def test_concept_names_weigh_more_than_descriptions() -> None:
    catalog = catalog_of(("a-tool", "Writes csv files."), ("b-excel", "Writes things."))
    names = [s.name for s in shortlist(catalog, "spreadsheet", max_candidates=1)]
    assert names == ["b-excel"]


@pytest.mark.parametrize("max_candidates", [1, 2, 5])
def test_at_most_max_candidates(max_candidates: int) -> None:
    catalog = catalog_of(*[(f"s{n}", "Excel spreadsheet.") for n in range(10)])
    request = request_for(catalog, "spreadsheet", max_candidates=max_candidates)
    assert len(request.candidates) == max_candidates


# --- the request ------------------------------------------------------------------------


def test_request_shape_and_private_map() -> None:
    catalog = catalog_of(
        ("pdf", "Read PDFs."), ("pdf-forms", "Fill PDF forms."), ("xlsx", "Excel.")
    )
    request = request_for(catalog, "  Fill PDF  ")
    assert request.body == {
        "query": "fill pdf",
        "candidates": [
            {"id": "c0", "name": "pdf-forms", "description": "Fill PDF forms."},
            {"id": "c1", "name": "pdf", "description": "Read PDFs."},
            {"id": "c2", "name": "xlsx", "description": "Excel."},
        ],
    }
    assert [s.name for s in request.candidates] == ["pdf-forms", "pdf", "xlsx"]
    assert request.payload == compact_json(request.body)
    for candidate, skill in zip(request.body["candidates"], request.candidates, strict=True):
        assert candidate is not skill and set(candidate) == {"id", "name", "description"}


def test_names_over_the_limit_are_skipped_and_ids_stay_contiguous() -> None:
    catalog = catalog_of(
        ("aaaaa", "pdf one"),  # 5 bytes: kept
        ("bbbbbb", "pdf two"),  # 6 bytes: skipped
        ("ccééé", "pdf three"),  # 8 bytes: skipped
        ("ddd", "pdf four"),
        ("eeeeeeeeee", "pdf five"),  # skipped
        ("fé", "pdf six"),  # 3 bytes: kept
    )
    request = request_for(catalog, "pdf", max_name_bytes=5)
    kept = [s.name for s in shortlist(catalog, "pdf", max_candidates=32)]
    kept = [name for name in kept if name in {"aaaaa", "ddd", "fé"}]
    assert ids_and_names(request) == [(f"c{i}", name) for i, name in enumerate(kept)]
    assert sorted(kept) == ["aaaaa", "ddd", "fé"]


def test_every_name_too_long_means_no_request() -> None:
    outcome = build_request(catalog_of(("toolong", "pdf")), "pdf", RerankSettings(max_name_bytes=3))
    assert isinstance(outcome, NoRequest)


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("abc", 3, "abc"),
        ("abc", 2, "ab"),
        ("aé", 2, "a"),  # é is 2 bytes
        ("aé", 3, "aé"),
        ("a—b", 3, "a"),  # — is 3 bytes
        ("a—b", 4, "a—"),
        ("a😀", 4, "a"),  # 4-byte code point
        ("a😀", 5, "a😀"),
        ("é", 0, ""),
        ("", 0, ""),
    ],
)
def test_truncate_on_a_code_point_boundary(text: str, limit: int, expected: str) -> None:
    assert truncate_utf8(text, limit) == expected


def test_descriptions_are_truncated_but_never_names() -> None:
    catalog = catalog_of(("pdf-tool", "pdf " + "é" * 300))
    request = request_for(catalog, "pdf", max_description_bytes=11)
    assert request.body["candidates"][0] == {
        "id": "c0",
        "name": "pdf-tool",
        "description": "pdf ééé",
    }


def test_empty_descriptions_are_allowed() -> None:
    request = request_for(catalog_of(("pdf", "Read PDFs.")), "read", max_description_bytes=0)
    assert request.body["candidates"] == [{"id": "c0", "name": "pdf", "description": ""}]


def test_query_cap_counts_utf8_bytes() -> None:
    catalog = catalog_of(("tool", "Something."))
    assert request_for(catalog, "éé", max_query_bytes=4).body["query"] == "éé"
    outcome = build_request(catalog, "ééé", RerankSettings(enabled=True, max_query_bytes=5))
    assert outcome == NoRequest("query too long")


def test_query_cap_applies_to_the_normalised_query() -> None:
    catalog = catalog_of(("tool", "Something."))
    assert request_for(catalog, "   ABC   ", max_query_bytes=3).body["query"] == "abc"


def test_payload_is_byte_exact_with_escapes_and_non_ascii() -> None:
    catalog = catalog_of(
        ("quote", 'Says "hi" \\ back—slash café'),
        ("tab", "Line\tone\nline two \u2028 \x01"),
    )
    request = request_for(catalog, 'Café "hi"')
    expected = (
        b'{"query":"caf\xc3\xa9 \\"hi\\"","candidates":['
        b'{"id":"c0","name":"quote",'
        b'"description":"Says \\"hi\\" \\\\ back\xe2\x80\x94slash caf\xc3\xa9"},'
        b'{"id":"c1","name":"tab","description":"Line\\tone\\nline two \xe2\x80\xa8 \\u0001"}]}'
    )
    assert request.payload == expected
    assert json.loads(expected) == request.body

    # Exactly the size fits; one byte less drops the tail candidate and re-serialises.
    exact = request_for(catalog, 'Café "hi"', max_payload_bytes=len(expected))
    assert exact.payload == expected
    smaller = request_for(catalog, 'Café "hi"', max_payload_bytes=len(expected) - 1)
    assert smaller.payload == expected[: expected.index(b',{"id":"c1"')] + b"]}"
    assert [s.name for s in smaller.candidates] == ["quote"]


def test_tail_dropping_keeps_ids_contiguous() -> None:
    catalog = catalog_of(*[(f"s{n:02d}", "pdf " + "x" * 40) for n in range(12)])
    full = request_for(catalog, "pdf", max_payload_bytes=65536)
    assert len(full.candidates) == 12
    for size in (len(full.payload) - 1, 400, 300):
        request = request_for(catalog, "pdf", max_payload_bytes=size)
        assert len(request.payload) <= size
        ids = [c["id"] for c in request.body["candidates"]]
        assert ids == [f"c{i}" for i in range(len(ids))]
        assert 0 < len(ids) < 12
        # The next candidate would not have fitted.
        bigger = request_for(catalog, "pdf", max_candidates=len(ids) + 1, max_payload_bytes=65536)
        assert len(bigger.payload) > size


def test_nothing_fits_means_no_request() -> None:
    catalog = catalog_of(("big", "pdf " + "x" * 2000))
    outcome = build_request(
        catalog,
        "pdf",
        RerankSettings(enabled=True, max_description_bytes=2048, max_payload_bytes=256),
    )
    assert outcome == NoRequest("no candidate fits the payload")


@pytest.mark.parametrize(
    ("catalog", "query", "reason"),
    [
        (catalog_of(), "pdf", "empty catalog"),
        (catalog_of(("pdf", "x"), ("pdf-forms", "y")), " PDF ", "query is a skill name"),
        (catalog_of(("pdf", "x")), "?!", "query has no terms"),
    ],
)
def test_no_request(catalog: Catalog, query: str, reason: str) -> None:
    assert build_request(catalog, query, ON) == NoRequest(reason)


def test_request_carries_no_local_provenance(
    catalog_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    catalog = discover(skills_dirs=[catalog_dir], cwd=tmp_path)
    request = request_for(catalog, "pdf form test", max_candidates=64)
    assert len(request.candidates) == len(catalog.skills)
    text = request.payload.decode("utf-8")
    for forbidden in (
        str(catalog_dir),
        str(tmp_path),
        os.getcwd(),
        "SKILL.md",
        MARKER,
        "filePath",
        "baseDir",
        "testdata",
    ):
        assert forbidden not in text
    assert set(request.body) == {"query", "candidates"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"a": [1, "b"]}, b'{"a":[1,"b"]}'),
        ("\u2028\u2029", '"\u2028\u2029"'.encode()),  # left raw, as JSON.stringify does
        ("\x00\x1f\x7f", b'"\\u0000\\u001f\x7f"'),
        ("\b\f\n\r\t", b'"\\b\\f\\n\\r\\t"'),
        ("/<>&'", b'"/<>&\'"'),
        ("\ud800x", b'"\\ud800x"'),  # a lone surrogate is escaped
        ("\udbf4\ude11", '"\U0010d211"'.encode()),  # a split pair is one character
        ("\ude11\udbf4", b'"\\ude11\\udbf4"'),  # low before high: two lone ones
        ("😀", '"😀"'.encode()),
    ],
)
def test_compact_json_matches_json_stringify(value: object, expected: bytes) -> None:
    assert compact_json(value) == expected


# --- the real catalog ---------------------------------------------------------------------


def test_real_catalog_descriptions_are_truncated_code_point_safely(
    real_catalog_json: Path, real_skills_dir: Path, tmp_path: Path
) -> None:
    entries = json.loads(real_catalog_json.read_text(encoding="utf-8"))
    over = {e["name"] for e in entries if len(e["description"].encode()) > 512}
    assert len(over) == 17
    catalog = discover(skills_dirs=[real_skills_dir], cwd=tmp_path)
    eligible = [s for s in catalog.skills if s.name in over]
    # github-triage is one of the 17 but disabled, so it is never sent.
    assert {s.name for s in eligible} == over - {"github-triage"}
    request = request_for(Catalog(skills=tuple(eligible)), "security review", max_candidates=64)
    assert len(request.candidates) == 16
    for candidate, skill in zip(request.body["candidates"], request.candidates, strict=True):
        sent = candidate["description"].encode("utf-8")
        original = skill.description.encode("utf-8")
        assert len(sent) <= 512 < len(original)
        assert original.startswith(sent)
        assert len(sent) > 512 - 4  # cut at most a partial code point short of the limit
    assert len(request.payload) <= RerankSettings().max_payload_bytes

    whole = request_for(catalog, "find security bugs in smart contracts")
    assert len(whole.candidates) == 32 and len(whole.payload) <= 32768
    assert [c["id"] for c in whole.body["candidates"]] == [f"c{i}" for i in range(32)]
    assert MARKER not in whole.payload.decode()


def test_real_non_ascii_descriptions_cut_inside_a_code_point(real_catalog_json: Path) -> None:
    entries = json.loads(real_catalog_json.read_text(encoding="utf-8"))
    dashed = [e["description"] for e in entries if "—" in e["description"]]
    assert len(dashed) == 12
    for description in dashed:
        encoded = description.encode("utf-8")
        start = encoded.index("—".encode())
        for limit in (start + 1, start + 2):  # inside the 3-byte em dash
            cut = truncate_utf8(description, limit)
            assert cut.encode("utf-8") == encoded[:start]
        assert truncate_utf8(description, start + 3).endswith("—")
