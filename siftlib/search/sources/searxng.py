"""SearXNG's JSON API: `GET {url}/search?q=…&format=json&pageno=N`.

Results come unsorted and in two shapes (typed and legacy) in one answer; `url`, `title`,
`content` and `score` make the hit, sorted by `score` within the page (stable), pages in
order. `publishedDate` (else `pubdate`) becomes `published`, the length of `engines` the
hit's engine count. `number_of_results` may be absent (removed upstream in 2026) and is not
used. A 403 means the instance has JSON output disabled.

What SearXNG says beside the results (checked against searx/webutils.py `get_json_response`
at 9fea412):

- `unresponsive_engines`: `[name, reason]` pairs, sorted by name, of engines that timed out,
  failed or are suspended (`"Suspended: CAPTCHA"`). Some hits with some unresponsive
  engines is a partial answer. No hit with any unresponsive engine is `Unresponsive`:
  SearXNG does not list the engines that answered, and an empty page while engines were
  failing is no evidence that nothing exists, so it is never served as a complete answer.
- `answers`: objects whose `answer` is the text (current SearXNG) or plain strings (2024
  and before); answer types without an `answer` text (translations, weather) are skipped.
  `suggestions` and `corrections` are lists of strings.

Paging: SearXNG gives about ten results an engine a page and no way to ask for more, so
the next page is worth asking for while fewer than `k` distinct hits are in, the last page
was full (`PAGE_FULL` results or more: a short page is the last one) and at most
`MAX_PAGES` pages (50, the largest `k`, at ten a page).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from siftlib.hits import Hit, iso_date
from siftlib.search.sources.base import (
    Answer,
    QueryNotes,
    Source,
    Unresponsive,
    load_object,
    number,
    results_list,
    text,
    texts,
)

if TYPE_CHECKING:
    import httpx

PAGE_FULL = 10
MAX_PAGES = 5


class SearXNG(Source):
    """A SearXNG instance, usually on the same box."""

    name = "searxng"

    def build_request(self, query: str, *, k: int, key: str | None, page: int = 1) -> httpx.Request:
        import httpx

        return httpx.Request(
            "GET",
            self.url.rstrip("/") + "/search",
            params={"q": query, "format": "json", "pageno": str(page)},
            headers={"Accept": "application/json"},
        )

    def parse(self, body: bytes) -> Answer:
        data = load_object(body)
        hits = [self._hit(item) for item in results_list(data)]
        hits.sort(key=lambda hit: -hit.score)  # stable: equal scores keep SearXNG's order
        unresponsive = _engine_names(data.get("unresponsive_engines"))
        if not hits and unresponsive:
            raise Unresponsive(f"{len(unresponsive)} engines unresponsive")
        notes = QueryNotes(
            answers=_answers(data.get("answers")),
            suggestions=texts(data.get("suggestions")),
            corrections=texts(data.get("corrections")),
        )
        return Answer(hits, unresponsive=unresponsive, notes=notes)

    def next_page(self, *, page: int, got: int, have: int, k: int) -> bool:
        return have < k and got >= PAGE_FULL and page < MAX_PAGES

    def describe_status(self, status: int) -> str:
        return "403 (json format disabled?)" if status == 403 else str(status)

    def _hit(self, item: dict[str, Any]) -> Hit:
        engines = item.get("engines")
        return Hit(
            url=item["url"],
            title=text(item.get("title")),
            snippet=text(item.get("content")),
            score=number(item.get("score")),
            source=self.name,
            published=iso_date(item.get("publishedDate")) or iso_date(item.get("pubdate")),
            engines=len(texts(engines)) if isinstance(engines, list) else 0,
        )


def _engine_names(value: Any) -> tuple[str, ...]:
    """Return the engine names of `unresponsive_engines` (`[name, reason]` pairs)."""
    if not isinstance(value, list):
        return ()
    names = (
        item[0] if isinstance(item, list) and item and isinstance(item[0], str) else item
        for item in value
    )
    return tuple(dict.fromkeys(name for name in names if isinstance(name, str)))


def _answers(value: Any) -> tuple[str, ...]:
    """Return the answer texts: plain strings (≤2024) or the `answer` of answer objects."""
    if not isinstance(value, list):
        return ()
    items = [item.get("answer") if isinstance(item, dict) else item for item in value]
    return texts(items)
