"""Brave's LLM Context API: `GET {url}?q=…` with `X-Subscription-Token`.

Never Brave Web Search (`/res/v1/web/search`). Hits come from `grounding.generic` first
(snippet = its snippets joined by a space), then from any URL key of the `sources` metadata
map that generic missed (title from that entry, empty snippet). `grounding.poi` and
`grounding.map` are local-recall data and are not web hits; a `grounding` that is a
model-written string is never a snippet. Each 2xx call costs one credit. A URL's `age` in
`sources` (`["Wednesday, January 15, 2025", "2025-01-15", "392 days ago"]`, or `null`) gives
`published`: its first element that is an ISO date.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from siftlib.hits import Hit, iso_date
from siftlib.search.canonical_url import canonical_url
from siftlib.search.sources.base import Answer, BadResponse, Source, is_url, load_object, text

if TYPE_CHECKING:
    import httpx


class BraveLLM(Source):
    """Brave Search's LLM Context endpoint."""

    name = "brave_llm"
    key_name = "BRAVE_API_KEY"
    max_query_chars = 400
    max_query_words = 50
    credits_per_call = 1

    def build_request(self, query: str, *, k: int, key: str | None, page: int = 1) -> httpx.Request:
        import httpx

        return httpx.Request(
            "GET",
            self.url,
            params={"q": query},
            headers={"Accept": "application/json", "X-Subscription-Token": key or ""},
        )

    def parse(self, body: bytes) -> Answer:
        data = load_object(body)
        if "grounding" not in data and "sources" not in data:
            raise BadResponse("neither grounding nor sources")
        grounding = data.get("grounding")
        generic = grounding.get("generic") if isinstance(grounding, dict) else None
        sources = data.get("sources")
        metadata = sources if isinstance(sources, dict) else {}
        hits = [
            Hit(
                item["url"],
                text(item.get("title")),
                _join(item.get("snippets")),
                0.0,
                self.name,
                published=_published(metadata.get(item["url"])),
            )
            for item in (generic if isinstance(generic, list) else [])
            if isinstance(item, dict) and is_url(item.get("url"))
        ]
        seen = {canonical_url(hit.url) for hit in hits}
        for url, meta in metadata.items():
            if is_url(url) and canonical_url(url) not in seen:
                seen.add(canonical_url(url))
                title = text(meta.get("title")) if isinstance(meta, dict) else ""
                hits.append(Hit(url, title, "", 0.0, self.name, published=_published(meta)))
        return Answer(hits, credits=self.credits_per_call)


def _published(meta: Any) -> str | None:
    """Return the first ISO date of a `sources` entry's `age` list, if any."""
    age = meta.get("age") if isinstance(meta, dict) else None
    if not isinstance(age, list):
        return None
    dates = (iso_date(item) for item in age if isinstance(item, str) and item[:4].isdigit())
    return next((date for date in dates if date is not None), None)


def _join(snippets: Any) -> str:
    if not isinstance(snippets, list):
        return ""
    return " ".join(s for s in snippets if isinstance(s, str))
