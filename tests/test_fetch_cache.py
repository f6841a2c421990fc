"""The fetch cache: maxAge, storeInCache, partitions, size bounds, SQLite and Redis (issue 40)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bodykit import TESTDATA_FETCH
from fetchkit import PageServer, page
from gatewaykit import Gateway, call, gateway

from siftlib.cli import main
from siftlib.config import FetchConfig
from siftlib.fetch.cache import RedisFetchCache, SQLiteFetchCache, fetch_key
from siftlib.fetch.fetcher import FetchRequest

FLEET, SECRET, OTHER = "fleet-token", "secret-token", "other-token"
CALLERS = {"agent": FLEET, "vault": SECRET, "attic": OTHER}
ARTICLE = (
    b"<html lang='en'><head><title>WAL mode</title></head><body><article><h1>WAL mode</h1>"
    b"<p>Write-ahead logging lets readers go on while one writer appends to the log, and a "
    b"checkpoint moves the pages back into the database file.</p></article></body></html>"
)


@pytest.fixture
def site() -> Iterator[PageServer]:
    routes = {
        "/wal": page(ARTICLE),
        "/other": page(ARTICLE.replace(b"WAL mode", b"Other page")),
        "/gone": page(b"<html><body><p>This page is gone for now.</p></body></html>", status=404),
        "/challenge": page(
            (TESTDATA_FETCH / "blocked" / "cloudflare-just-a-moment.html").read_bytes(),
            status=403,
            headers={"cf-mitigated": "challenge"},
        ),
        "/huge": page(ARTICLE.replace(b"</article>", b"<p>" + b"word " * 4000 + b"</p></article>")),
    }
    with PageServer(routes) as server:
        yield server


def sqlite_cache(tmp_path: Path, **options: Any) -> SQLiteFetchCache:
    settings = {"max_bytes": 1 << 20, "ttl": 3600.0, **options}
    return SQLiteFetchCache(tmp_path / "fetch-cache.db", **settings)


@pytest.fixture
def gw(tmp_path: Path, site: PageServer) -> Iterator[Gateway]:
    fetch = FetchConfig(allow=(site.allow,), timeout=30.0)
    cache = sqlite_cache(tmp_path)
    with gateway(
        tmp_path, callers=CALLERS, restricted=("vault", "attic"), fetch=fetch, fetch_cache=cache
    ) as running:
        yield running
    cache.close()


def scrape(gw: Gateway, body: dict[str, Any], token: str = FLEET) -> dict[str, Any]:
    reply = call(gw.url, "POST", "/v2/scrape", body, token=token)
    assert reply.status == 200, reply.raw
    answer: dict[str, Any] = reply.json
    return answer


def metadata(answer: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = answer["data"]["metadata"]
    return found


def test_a_repeated_scrape_is_a_hit_that_touches_no_upstream(gw: Gateway, site: PageServer) -> None:
    first = scrape(gw, {"url": site.url + "/wal"})
    second = scrape(gw, {"url": site.url + "/wal"})
    assert site.paths() == ["/wal"]
    assert metadata(first)["cacheState"] == "miss" and "cachedAt" not in metadata(first)
    assert metadata(second)["cacheState"] == "hit"
    cached_at = metadata(second)["cachedAt"]
    assert cached_at.endswith("Z") and cached_at[:4] == time.strftime("%Y", time.gmtime())
    assert second["data"]["markdown"] == first["data"]["markdown"]
    assert metadata(second)["scrapeId"] != metadata(first)["scrapeId"]
    metrics = call(gw.url, "GET", "/metrics", token=FLEET).json
    assert (metrics["fetch_cache_hit"], metrics["fetch_cache_miss"]) == (1, 1)
    text = call(gw.url, "GET", "/metrics?format=prometheus", token=FLEET).raw.decode()
    assert "sift_fetch_cache_hit_total 1" in text and "sift_fetch_cache_miss_total 1" in text


def test_what_shapes_the_answer_is_in_the_key(gw: Gateway, site: PageServer) -> None:
    scrape(gw, {"url": site.url + "/wal"})
    scrape(gw, {"url": site.url + "/wal", "formats": ["html"]})
    scrape(gw, {"url": site.url + "/wal", "onlyMainContent": False})
    scrape(gw, {"url": site.url + "/wal", "excludeTags": ["h1"]})
    scrape(gw, {"url": site.url + "/wal#part-2"})  # the same page: the fragment is not sent
    assert site.paths() == ["/wal"] * 4


def test_max_age_zero_always_fetches_and_a_small_one_expires(gw: Gateway, site: PageServer) -> None:
    scrape(gw, {"url": site.url + "/wal"})
    again = scrape(gw, {"url": site.url + "/wal", "maxAge": 0})
    assert metadata(again)["cacheState"] == "miss"
    time.sleep(0.3)
    assert metadata(scrape(gw, {"url": site.url + "/wal", "maxAge": 200}))["cacheState"] == "miss"
    assert metadata(scrape(gw, {"url": site.url + "/wal", "maxAge": 60_000}))["cacheState"] == "hit"
    assert site.paths() == ["/wal"] * 3


def test_store_in_cache_false_fetches_without_storing(gw: Gateway, site: PageServer) -> None:
    scrape(gw, {"url": site.url + "/wal", "storeInCache": False})
    assert metadata(scrape(gw, {"url": site.url + "/wal"}))["cacheState"] == "miss"
    assert metadata(scrape(gw, {"url": site.url + "/wal"}))["cacheState"] == "hit"
    assert site.paths() == ["/wal"] * 2


def test_restricted_callers_have_partitions_of_their_own(gw: Gateway, site: PageServer) -> None:
    assert metadata(scrape(gw, {"url": site.url + "/wal"}, SECRET))["cacheState"] == "miss"
    assert metadata(scrape(gw, {"url": site.url + "/wal"}, FLEET))["cacheState"] == "miss"
    assert metadata(scrape(gw, {"url": site.url + "/wal"}, OTHER))["cacheState"] == "miss"
    assert metadata(scrape(gw, {"url": site.url + "/wal"}, SECRET))["cacheState"] == "hit"
    assert metadata(scrape(gw, {"url": site.url + "/wal"}, FLEET))["cacheState"] == "hit"
    assert site.paths() == ["/wal"] * 3
    request = FetchRequest(url=site.url + "/wal")
    keys = {fetch_key(request, caller_class=c) for c in ("fleet", "restricted:vault")}
    assert len(keys) == 2


def test_only_complete_successful_answers_are_kept(gw: Gateway, site: PageServer) -> None:
    for _ in range(2):
        assert call(gw.url, "POST", "/v2/scrape", {"url": site.url + "/challenge"}, token=FLEET)
        assert metadata(scrape(gw, {"url": site.url + "/gone"}))["statusCode"] == 404
    native = {"url": site.url + "/huge", "max_chars": 100}
    for _ in range(2):
        reply = call(gw.url, "POST", "/v1/fetch", native, token=FLEET).json
        assert reply["truncated"] is True and "cached" not in reply
    assert site.paths().count("/challenge") == 2
    assert site.paths().count("/gone") == 2
    assert site.paths().count("/huge") == 2


def test_native_fetch_says_cached_and_takes_max_age_in_seconds(
    gw: Gateway, site: PageServer
) -> None:
    first = call(gw.url, "POST", "/v1/fetch", {"url": site.url + "/wal"}, token=FLEET).json
    second = call(gw.url, "POST", "/v1/fetch", {"url": site.url + "/wal"}, token=FLEET).json
    fresh = call(
        gw.url, "POST", "/v1/fetch", {"url": site.url + "/wal", "max_age": 0}, token=FLEET
    ).json
    assert "cached" not in first and second["cached"] is True and "cached" not in fresh
    assert second["content"] == first["content"]
    bad = call(gw.url, "POST", "/v1/fetch", {"url": site.url + "/wal", "max_age": -1}, token=FLEET)
    assert bad.status == 400
    assert bad.json["error"] == "invalid request: max_age must be a number at least 0"
    bad = call(
        gw.url, "POST", "/v2/scrape", {"url": site.url + "/wal", "maxAge": "1h"}, token=FLEET
    )
    assert bad.status == 400 and bad.json["code"] == "invalid request"


def test_a_gateway_restart_keeps_the_sqlite_entries(tmp_path: Path, site: PageServer) -> None:
    fetch = FetchConfig(allow=(site.allow,), timeout=30.0)
    for expected in ("miss", "hit"):
        cache = sqlite_cache(tmp_path)
        with gateway(tmp_path, callers=CALLERS, fetch=fetch, fetch_cache=cache) as running:
            assert metadata(scrape(running, {"url": site.url + "/wal"}))["cacheState"] == expected
        cache.close()
    assert site.paths() == ["/wal"]


def test_cli_max_age(tmp_path: Path, site: PageServer, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[server]\ndb = "{tmp_path / "cache.db"}"\n'
        f'[fetch]\nallow = ["{site.allow}"]\ntimeout = "30s"\ncache_max_age = "10m"\n'
    )
    for max_age in (None, None, "0"):
        extra = [] if max_age is None else ["--max-age", max_age]
        assert main(["fetch", site.url + "/wal", "--config", str(path), "--json", *extra]) == 0
    envelopes = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [envelope.get("cached", False) for envelope in envelopes] == [False, True, False]
    assert site.paths() == ["/wal", "/wal"]
    assert (tmp_path / "fetch-cache.db").exists()
    assert main(["fetch", site.url + "/wal", "--config", str(path), "--max-age", "-1"]) == 2


# --- the stores themselves ----------------------------------------------------------------------


def exercise_eviction(cache: Any) -> None:
    """Three 400-byte entries under a 1000-byte bound: the oldest goes."""
    for number, key in enumerate(("a", "b", "c")):
        cache.put(key, bytes([65 + number]) * 400, now=1000.0 + number)
    assert cache.get("a", now=1003.0, max_age=60.0) is None
    assert cache.get("b", now=1003.0, max_age=60.0) == (b"B" * 400, 1001.0)
    assert cache.get("c", now=1003.0, max_age=60.0) == (b"C" * 400, 1002.0)
    cache.put("b", b"b" * 100, now=1004.0)  # replaced: its old size is given back
    cache.put("d", b"D" * 400, now=1005.0)
    assert cache.get("b", now=1006.0, max_age=60.0) == (b"b" * 100, 1004.0)
    assert cache.get("c", now=1006.0, max_age=60.0) is not None
    cache.put("too-big", b"x" * 2000, now=1007.0)  # larger than the bound: never kept
    assert cache.get("too-big", now=1008.0, max_age=60.0) is None
    assert cache.get("c", now=1008.0, max_age=1.0) is None  # older than the asked max age


def test_sqlite_evicts_the_oldest_past_its_bound(tmp_path: Path) -> None:
    cache = sqlite_cache(tmp_path, max_bytes=1000)
    exercise_eviction(cache)
    cache.close()


def test_sqlite_drops_entries_past_their_ttl(tmp_path: Path) -> None:
    cache = sqlite_cache(tmp_path, ttl=10.0)
    cache.put("old", b"old", now=1000.0)
    assert cache.get("old", now=1005.0, max_age=3600.0) is not None
    assert cache.get("old", now=1011.0, max_age=3600.0) is None  # capped to the ttl
    cache.put("new", b"new", now=1020.0)
    assert cache.path.exists()
    cache.close()


def test_redis_evicts_the_oldest_past_its_bound(redis_server: Any) -> None:
    from siftlib.store.redis import connect

    cache = RedisFetchCache(
        connect(redis_server.url, password=None), prefix="t1:", max_bytes=1000, ttl=3600.0
    )
    exercise_eviction(cache)
    with redis_server.client() as client:
        # b, c and d, each with its "stored at" line: at most the bound
        assert 900 < int(client.get("t1:fetch:total")) <= 1000
        assert client.ttl("t1:fetch:page:c") > 3500  # a TTL on every entry
        assert not client.keys("sift:*")
    cache.close()


def test_redis_cache_behind_a_gateway(tmp_path: Path, site: PageServer, redis_server: Any) -> None:
    from siftlib.store.redis import connect

    fetch = FetchConfig(allow=(site.allow,), timeout=30.0)
    cache = RedisFetchCache(
        connect(redis_server.url, password=None), prefix="gw:", max_bytes=1 << 20, ttl=3600.0
    )
    with gateway(
        tmp_path, callers=CALLERS, restricted=("vault",), fetch=fetch, fetch_cache=cache
    ) as running:
        assert metadata(scrape(running, {"url": site.url + "/wal"}))["cacheState"] == "miss"
        assert metadata(scrape(running, {"url": site.url + "/wal"}))["cacheState"] == "hit"
        assert metadata(scrape(running, {"url": site.url + "/wal"}, SECRET))["cacheState"] == "miss"
    assert site.paths() == ["/wal", "/wal"]
    cache.close()


def test_a_broken_cache_is_served_around(tmp_path: Path, site: PageServer) -> None:
    fetch = FetchConfig(allow=(site.allow,), timeout=30.0)
    (tmp_path / "fetch-cache.db").write_bytes(b"this is not a database" * 100)
    cache = sqlite_cache(tmp_path)
    with gateway(tmp_path, callers=CALLERS, fetch=fetch, fetch_cache=cache) as running:
        for _ in range(2):
            assert metadata(scrape(running, {"url": site.url + "/wal"}))["cacheState"] == "miss"
    assert site.paths() == ["/wal", "/wal"]
    cache.close()
