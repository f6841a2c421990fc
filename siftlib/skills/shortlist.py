"""The shortlist and the bounded outbound request of spec §5.

The shortlist alternates two streams, deduplicating skills: the lexical stream (every
eligible skill in keyword order, zero scores included) and the concept stream (skills whose
name or description holds an alternate term of a concept the query touches; +8 per name
word, +2 per description word; best first, ties by name). It starts with the concept stream
when no skill has a lexical score, so a synonym-only skill late in the catalog still gets a
slot. At most `max_candidates` are taken.

The request carries only `{"query", "candidates": [{"id", "name", "description"}]}`: names
over `max_name_bytes` are skipped (never truncated), descriptions are cut to
`max_description_bytes` on a code point boundary, and candidates are dropped from the tail
until the compact UTF-8 JSON fits `max_payload_bytes`. IDs `c0`, `c1`, … are given last, so
they stay contiguous. The map from ID to local skill stays in `OutboundRequest.candidates`.

    outcome = build_request(catalog, query, settings)
    if isinstance(outcome, NoRequest): ...  # keyword baseline, no provider call
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from siftlib.skills.catalog import Catalog, Skill
from siftlib.skills.consent import RerankSettings
from siftlib.skills.keyword import keyword_scores, normalise_query, query_terms
from siftlib.skills.relevance import RelevanceIndex

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class OutboundRequest:
    """The request for the provider, and the local skill behind each candidate ID."""

    body: dict[str, Any]
    candidates: tuple[Skill, ...]
    payload: bytes


@dataclass(frozen=True)
class NoRequest:
    """Why no provider request may be sent for this search."""

    reason: str


def build_request(
    catalog: Catalog, query: str, settings: RerankSettings
) -> OutboundRequest | NoRequest:
    """Return the bounded outbound request for `query`, or the reason none may be sent."""
    normalised = normalise_query(query)
    if not query_terms(normalised):
        return NoRequest("query has no terms")
    if not catalog.skills:
        return NoRequest("empty catalog")
    if any(skill.name.lower() == normalised for skill in catalog.skills):
        return NoRequest("query is a skill name")
    if len(normalised.encode("utf-8", "surrogatepass")) > settings.max_query_bytes:
        return NoRequest("query too long")
    fitting = [
        skill
        for skill in shortlist(catalog, normalised, max_candidates=settings.max_candidates)
        if len(skill.name.encode("utf-8")) <= settings.max_name_bytes
    ]
    if not fitting:
        return NoRequest("every shortlisted name is over max_name_bytes")
    descriptions = [truncate_utf8(s.description, settings.max_description_bytes) for s in fitting]
    for count in range(len(fitting), 0, -1):
        body = {
            "query": normalised,
            "candidates": [
                {"id": f"c{i}", "name": fitting[i].name, "description": descriptions[i]}
                for i in range(count)
            ],
        }
        payload = compact_json(body)
        if len(payload) <= settings.max_payload_bytes:
            return OutboundRequest(body=body, candidates=tuple(fitting[:count]), payload=payload)
    return NoRequest("no candidate fits the payload")


def shortlist(catalog: Catalog, query: str, *, max_candidates: int) -> list[Skill]:
    """Return up to `max_candidates` skills, alternating the lexical and concept streams."""
    scored = keyword_scores(catalog, query)
    lexical = [skill for skill, _ in scored]
    concept = concept_stream(catalog, query, max_candidates)
    streams = [concept, lexical] if all(score == 0 for _, score in scored) else [lexical, concept]
    positions = [0, 0]
    taken: list[Skill] = []
    seen: set[str] = set()
    turn = 0
    while len(taken) < max_candidates and any(positions[i] < len(streams[i]) for i in range(2)):
        stream = streams[turn]
        while positions[turn] < len(stream):
            skill = stream[positions[turn]]
            positions[turn] += 1
            if skill.name not in seen:
                seen.add(skill.name)
                taken.append(skill)
                break
        turn = 1 - turn
    return taken


def concept_stream(catalog: Catalog, query: str, count: int) -> list[Skill]:
    """Return the `count` skills the relevance scorer matches best to `query`, best first."""
    return [catalog.skills[s.position] for s in RelevanceIndex.of(catalog).score(query).best(count)]


def truncate_utf8(text: str, max_bytes: int) -> str:
    """Return the longest prefix of `text` whose UTF-8 encoding fits `max_bytes`."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    end = max_bytes
    while end > 0 and encoded[end] & 0xC0 == 0x80:  # a continuation byte: back off
        end -= 1
    return encoded[:end].decode("utf-8")


def compact_json(value: Any) -> bytes:
    """Serialize `value` as JavaScript's `JSON.stringify` does, as UTF-8 bytes."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    if _LONE_SURROGATE.search(text):
        # As in JavaScript strings, a high surrogate followed by a low one is one character;
        # JSON.stringify escapes the surrogates left alone (UTF-8 cannot encode them).
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text.encode("utf-8")
