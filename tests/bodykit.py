"""Fake upstream bodies: the recorded ones in `testdata/`, and the providers' envelopes around
results a fake makes up (SearXNG's and Tavily's JSON, as the real services answer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TESTDATA = Path(__file__).resolve().parent.parent / "testdata"
TESTDATA_FETCH = TESTDATA / "fetch"


def fixture_bytes(name: str) -> bytes:
    """Return a recorded body from `testdata/`, e.g. `tavily/standard.json`."""
    return (TESTDATA / name).read_bytes()


def fixture_text(name: str) -> str:
    """Return a recorded body from `testdata/` as text."""
    return (TESTDATA / name).read_text()


def searxng_answer(query: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    """Return SearXNG's JSON answer around `results`, best first."""
    return {
        "query": query,
        "number_of_results": 0,
        "results": results,
        "answers": [],
        "corrections": [],
        "infoboxes": [],
        "suggestions": [],
        "unresponsive_engines": [],
    }


def tavily_answer(
    query: str, results: list[dict[str, Any]], *, response_time: float
) -> dict[str, Any]:
    """Return Tavily's `/search` answer around `results`, without `usage` (the caller adds it)."""
    return {
        "query": query,
        "follow_up_questions": None,
        "answer": None,
        "images": [],
        "results": results,
        "response_time": response_time,
    }


def searxng_body(n: int, *, prefix: str = "https://example.org/page") -> bytes:
    """Return a SearXNG JSON answer with `n` results, best first."""
    results = [
        {"url": f"{prefix}{i}", "title": f"Page {i}", "content": f"About page {i}.", "score": n - i}
        for i in range(n)
    ]
    return json.dumps({"query": "q", "results": results, "unresponsive_engines": []}).encode()
