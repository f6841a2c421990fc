"""The search hit: the one record every source maps into and every output is built from.

Two facts ride along where an upstream gives them, so agents can weigh a hit:

- `published`: when the page was published, ISO 8601 (`2025-01-15` or
  `2026-02-17T00:00:00`; an instant with a zone is written in UTC, `…Z`). From SearXNG's
  `publishedDate` (else `pubdate`), Brave's `age` and Tavily's `published_date`; a date that
  does not parse is left out rather than guessed.
- `engines`: how many upstream engines or sources returned the URL. A source reports its own
  count (SearXNG: the length of a result's `engines` list) or 0 for "just me"; fusion sums
  them, each source counting at least 1, so every hit of a search carries it: a hit found by
  Brave or Tavily alone is 1, one found by two SearXNG engines and Tavily is 3.

Both appear as extra keys of a native result and of a `/v2/search` hit (names the Firecrawl
SDK does not take for a scraped document, search.md §3.2): `published` only when known,
`engines` on every hit merged by a search (a cache row written before it carried `engines`
has none).

`Hit` is a `NamedTuple`, not a dataclass: `sift search` answering from the cache builds
hits, and a frozen dataclass costs a few milliseconds to define (and `dataclasses` more to
import) where an agent pays for every process start (`tests/bench/bench_startup.py`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import NamedTuple


class Hit(NamedTuple):
    """One search result: where it points, what it says, and who found it."""

    url: str
    title: str
    snippet: str
    score: float
    source: str
    published: str | None = None
    engines: int = 0

    def to_dict(self) -> dict[str, object]:
        """Return the hit as the native API's result object."""
        return {
            "url": self.url,
            "title": self.title,
            "snippet": self.snippet,
            "score": self.score,
            "source": self.source,
            **self.extras(),
        }

    def to_firecrawl(self, position: int) -> dict[str, object]:
        """Return the hit as a `/v2/search` web hit at a 1-based `position`."""
        return {
            "url": self.url,
            "title": self.title,
            "description": self.snippet,
            "position": position,
            **self.extras(),
        }

    def extras(self) -> dict[str, object]:
        """Return the optional facts this hit carries: `published`, `engines`."""
        extras: dict[str, object] = {}
        if self.published is not None:
            extras["published"] = self.published
        if self.engines:
            extras["engines"] = self.engines
        return extras


def iso_date(value: object) -> str | None:
    """Return an upstream date as ISO 8601, or None when it is absent or does not parse."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        try:
            from email.utils import parsedate_to_datetime  # rare: not paid at start-up

            when = parsedate_to_datetime(text)  # RFC 2822, as some news feeds give
        except (TypeError, ValueError, IndexError):
            return None
    if len(text) == 10 and text[4] == "-":
        return when.date().isoformat()
    if when.tzinfo is not None:
        return when.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"
    return when.isoformat()
