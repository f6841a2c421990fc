"""What every source adapter is: build a request from the config URL, map the response.

An adapter knows only its provider's wire format. Threads, deadlines, size limits, caps,
merging and metrics belong to the pipeline that calls it. Paging is the adapter's word and
the pipeline's loop: `next_page` says whether another page could add hits, the pipeline
decides whether there is time for it.

    BadResponse      the body is not the documented shape        → `<name>: bad response`
    Unresponsive     the body is fine but nothing behind it answered → `<name>: unresponsive`

Hostile bodies are `BadResponse`, never another exception: `NaN`/`Infinity` (not JSON, though
`json.loads` takes them), nesting too deep for the decoder (`RecursionError`), and a number
sift uses that is not finite once decoded (`1e999` decodes to infinity) or is out of bounds.
Lone surrogates in text (`"\\ud800"`) become U+FFFD, since a hit must encode as UTF-8; a URL
holding one is not a URL, and its hit is dropped like one without a string URL.
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from siftlib.hits import Hit

if TYPE_CHECKING:
    import httpx


class BadResponse(Exception):
    """The upstream answered 2xx with a body that is not the documented shape."""


class Unresponsive(Exception):
    """The upstream answered with no hits because every engine behind it failed."""


class QueryNotes(NamedTuple):
    """What an upstream says about the query besides hits: answers, suggestions, corrections."""

    answers: tuple[str, ...] = ()
    suggestions: tuple[str, ...] = ()
    corrections: tuple[str, ...] = ()

    def __or__(self, other: QueryNotes) -> QueryNotes:
        """Return both notes in order, each text once."""
        return QueryNotes(
            *(
                tuple(dict.fromkeys((*mine, *theirs)))
                for mine, theirs in zip(self.as_tuple(), other.as_tuple(), strict=True)
            )
        )

    def as_tuple(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        """Return the three lists in the envelope's order."""
        return self.answers, self.suggestions, self.corrections

    def to_dict(self) -> dict[str, list[str]]:
        """Return the non-empty lists under their envelope keys."""
        names = ("answers", "suggestions", "corrections")
        return {
            name: list(texts) for name, texts in zip(names, self.as_tuple(), strict=True) if texts
        }


class Answer(NamedTuple):
    """What one upstream call yielded: hits in the source's own order, and what came with them.

    `unresponsive` names the upstream's own engines that failed to answer (an answer with
    some is partial); `notes` are the upstream's texts about the query, never hits.
    """

    hits: list[Hit]
    credits: int = 0
    unresponsive: tuple[str, ...] = ()
    notes: QueryNotes = QueryNotes()


class Source:
    """One upstream search provider, bound to its configured URL."""

    name: ClassVar[str]
    key_name: ClassVar[str | None] = None
    max_query_chars: ClassVar[int | None] = None
    max_query_words: ClassVar[int | None] = None
    credits_per_call: ClassVar[int] = 0  # what a 2xx answer costs when it does not say

    def __init__(self, url: str) -> None:
        self.url = url

    def query_too_long(self, query: str) -> bool:
        """Tell whether `query` exceeds the provider's documented query cap."""
        if self.max_query_chars is not None and len(query) > self.max_query_chars:
            return True
        return self.max_query_words is not None and len(query.split()) > self.max_query_words

    def build_request(self, query: str, *, k: int, key: str | None, page: int = 1) -> httpx.Request:
        """Return the HTTP request for one search (one page of it)."""
        raise NotImplementedError

    def parse(self, body: bytes) -> Answer:
        """Map a 2xx response body; raise `BadResponse` or `Unresponsive` when it is unusable."""
        raise NotImplementedError

    def next_page(self, *, page: int, got: int, have: int, k: int) -> bool:
        """Tell whether page `page + 1` could add hits: page `page` gave `got`, `have` of `k` in."""
        return False

    def describe_status(self, status: int) -> str:
        """Return the warning kind for a non-2xx status."""
        return str(status)


def load_object(body: bytes) -> dict[str, Any]:
    """Decode a JSON object, or raise `BadResponse`."""
    try:
        value = json.loads(body, parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise BadResponse("not JSON") from exc
    if not isinstance(value, dict):
        raise BadResponse("not a JSON object")
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def _refuse_constant(name: str) -> float:
    raise BadResponse(f"{name} is not JSON")


def text(value: Any) -> str:
    """Return `value` when it is a string (lone surrogates replaced), else the empty string."""
    if not isinstance(value, str):
        return ""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", value)
    return value


def is_url(value: Any) -> bool:
    """Tell whether `value` can be a hit's URL: a string that encodes as UTF-8."""
    if not isinstance(value, str):
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def number(value: Any) -> float:
    """Return `value` as a float when it is a number, 0 when it is none; raise when not finite."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    try:
        result = float(value)
    except OverflowError as exc:
        raise BadResponse("a number out of range") from exc
    if not math.isfinite(result):
        raise BadResponse("a number that is not finite")
    return result


def results_list(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Return `results[]`'s objects that carry a string `url`, or raise `BadResponse`."""
    results = data.get("results")
    if not isinstance(results, list):
        raise BadResponse("no results list")
    return [item for item in results if isinstance(item, dict) and is_url(item.get("url"))]


def texts(value: Any) -> tuple[str, ...]:
    """Return the non-empty strings of a list, in order, once each."""
    if not isinstance(value, list):
        return ()
    return tuple(
        dict.fromkeys(text(item) for item in value if isinstance(item, str) and item.strip())
    )
