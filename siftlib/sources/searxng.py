"""SearXNG's JSON API: `GET {url}/search?q=…&format=json&pageno=1`.

Results come unsorted and in two shapes (typed and legacy) in one answer; only `url`,
`title`, `content` and `score` matter here. `number_of_results` may be absent (removed
upstream in 2026) and is not used. A 403 means the instance has JSON output disabled.
"""

from __future__ import annotations

import httpx

from siftlib.sources.base import Answer, Source, load_object, map_results


class SearXNG(Source):
    """A SearXNG instance, usually on the same box."""

    name = "searxng"

    def build_request(self, query: str, *, k: int, key: str | None) -> httpx.Request:
        return httpx.Request(
            "GET",
            self.url.rstrip("/") + "/search",
            params={"q": query, "format": "json", "pageno": "1"},
            headers={"Accept": "application/json"},
        )

    def parse(self, body: bytes) -> Answer:
        hits = map_results(load_object(body), self.name)
        hits.sort(key=lambda hit: -hit.score)  # stable: equal scores keep SearXNG's order
        return Answer(hits)

    def describe_status(self, status: int) -> str:
        return "403 (json format disabled?)" if status == 403 else str(status)
