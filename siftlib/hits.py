"""The search hit: the one record every source maps into and every output is built from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hit:
    """One search result: where it points, what it says, and who found it."""

    url: str
    title: str
    snippet: str
    score: float
    source: str

    def to_dict(self) -> dict[str, object]:
        """Return the hit as the native API's result object."""
        return {
            "url": self.url,
            "title": self.title,
            "snippet": self.snippet,
            "score": self.score,
            "source": self.source,
        }
