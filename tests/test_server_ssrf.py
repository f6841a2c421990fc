"""No request body can steer the gateway anywhere but its configured upstreams (search.md §7)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bodykit import fixture_bytes
from gatewaykit import FakeUpstream, call, gateway

STEERING_FIELDS = ("url", "api_url", "apiUrl", "webhook", "endpoint", "base_url", "callback")


@pytest.mark.parametrize("path", ["/v1/search", "/v2/search"])
def test_body_fields_naming_other_hosts_reach_nothing(tmp_path: Path, path: str) -> None:
    searxng = FakeUpstream(fixture_bytes("searxng/wal-typed-and-legacy.json"))
    tavily = FakeUpstream(fixture_bytes("tavily/wal-usage-unsorted.json"))
    sentinel = FakeUpstream(b'{"results": []}')
    target = f"{sentinel.url}/search"
    body: dict[str, object] = {"query": "sqlite wal", "limit": 5, "k": 5}
    body.update({name: target for name in STEERING_FIELDS})
    body.update(
        {
            "urls": [target, sentinel.url],
            "scrapeOptions": {"formats": ["markdown", "html"], "url": target},
            "sources": [{"type": "web", "url": target}],
            "searxng": {"url": target},
            "tavily": {"url": target},
            "search": {"tavily": {"url": target}},
            "headers": {"Host": f"127.0.0.1:{sentinel.port}"},
        }
    )
    try:
        with gateway(tmp_path, searxng=searxng.url, tavily=tavily.url + "/search") as gw:
            reply = call(gw.url, "POST", path, body, headers={"X-Forwarded-Host": target})
            redirected = call(gw.url, "POST", f"{path}?url={target}", {"query": "sqlite wal"})
    finally:
        for fake in (searxng, tavily, sentinel):
            fake.close()
    assert (reply.status, redirected.status) == (200, 200)
    assert sentinel.connections == 0
    assert sentinel.calls == []
    assert searxng.calls and tavily.calls
    assert all(c.path.startswith("/search?q=sqlite+wal&") for c in searxng.calls)
    assert all(c.path == "/search" for c in tavily.calls)
    assert all(target.encode() not in c.body for c in tavily.calls)
    text = reply.raw.decode()
    assert sentinel.url not in text
    for key in ("markdown", "html", "rawHtml", "links", "screenshot", "summary"):
        assert f'"{key}"' not in text
