"""`/metrics` in the Prometheus text format, read back with prometheus_client's own parser."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from gatewaykit import FakeUpstream, Gateway, call, gateway
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from siftlib.gateway.prometheus import CONTENT_TYPE, render, wants_prometheus
from siftlib.metrics import Metrics

TOKEN = "tok-ops-5e6f"
SCRAPER_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


def samples(text: str) -> dict[str, list[Sample]]:
    """Parse exposition text into {family name: samples}, as a scraper would."""
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def families(text: str) -> dict[str, str]:
    return {family.name: family.type for family in text_string_to_metric_families(text)}


@pytest.mark.parametrize(
    ("accept", "query", "expected"),
    [
        (None, "", False),
        ("application/json", "", False),
        ("*/*", "", False),
        ("text/plain", "", True),
        ("text/plain; version=0.0.4", "", True),
        (SCRAPER_ACCEPT, "", True),
        ("application/openmetrics-text; version=1.0.0", "", True),
        (None, "format=prometheus", True),
        ("application/json", "x=1&format=prometheus", True),
        (None, "format=prometheusx", False),
    ],
)
def test_the_text_format_is_chosen_by_accept_or_query(
    accept: str | None, query: str, expected: bool
) -> None:
    assert wants_prometheus(accept, query) is expected


def test_counters_gauges_and_labels_render_with_help_and_type() -> None:
    snapshot = {
        "search_cache_hit": 3,
        "search_queries": {"caller=ops,source=tavily": 2, "caller=restricted": 5},
        "search_capped": {"source=tavily": 1},
        "odd_metric": {'kind=say "hi"\\there': 1.5},
    }
    text = render(snapshot, {})
    assert "# HELP sift_search_cache_hit_total Searches answered from the cache.\n" in text
    assert families(text) == {
        "sift_search_cache_hit": "counter",
        "sift_search_queries": "counter",
        "sift_search_capped": "gauge",
        "sift_odd_metric": "counter",
    }
    parsed = samples(text)
    assert parsed["sift_search_cache_hit"] == [Sample("sift_search_cache_hit_total", {}, 3.0)]
    assert {(s.labels.get("caller"), s.value) for s in parsed["sift_search_queries"]} == {
        ("ops", 2.0),
        ("restricted", 5.0),
    }
    assert parsed["sift_search_capped"][0].labels == {"source": "tavily"}
    assert parsed["sift_odd_metric"][0].labels == {"kind": 'say "hi"\\there'}
    assert parsed["sift_odd_metric"][0].value == 1.5


def test_histograms_are_cumulative_with_sum_and_count() -> None:
    metrics = Metrics()
    for seconds in (0.01, 0.05, 0.05, 0.3, 42.0):  # 0.05 sits on a bound: counted at or below
        metrics.observe("search_source_seconds", seconds, source="searxng")
    metrics.observe("search_cache_hit_seconds", 0.0002)
    parsed = samples(render({}, metrics.histograms()))
    buckets = {
        s.labels["le"]: s.value
        for s in parsed["sift_search_source_seconds"]
        if s.name.endswith("_bucket")
    }
    assert buckets["0.025"] == 1
    assert buckets["0.05"] == 3
    assert buckets["0.25"] == 3
    assert buckets["0.5"] == 4
    assert buckets["10.0"] == 4
    assert buckets["+Inf"] == 5
    totals = {s.name: s.value for s in parsed["sift_search_source_seconds"] if "le" not in s.labels}
    assert totals["sift_search_source_seconds_count"] == 5
    assert totals["sift_search_source_seconds_sum"] == pytest.approx(42.41)
    hit = {s.name: s for s in parsed["sift_search_cache_hit_seconds"]}
    assert hit["sift_search_cache_hit_seconds_count"].value == 1
    assert families(render({}, metrics.histograms()))["sift_search_cache_hit_seconds"] == (
        "histogram"
    )


def test_the_json_snapshot_is_unchanged_by_histograms() -> None:
    metrics = Metrics()
    metrics.inc("search_cache_hit")
    metrics.observe("search_cache_hit_seconds", 0.001)
    assert metrics.snapshot() == {"search_cache_hit": 1}


@pytest.fixture
def gw(tmp_path: Path, searxng: FakeUpstream) -> Iterator[Gateway]:
    callers = {"ops": TOKEN, "secret": "tok-secret-77"}
    with gateway(tmp_path, searxng=searxng.url, callers=callers, restricted=("secret",)) as running:
        yield running


def test_a_scraper_reads_every_counter_and_the_latency_histograms(gw: Gateway) -> None:
    for _ in range(2):
        assert call(gw.url, "POST", "/v2/search", {"query": "wal"}, token=TOKEN).status == 200
    reply = call(gw.url, "GET", "/metrics", token=TOKEN, headers={"Accept": SCRAPER_ACCEPT})
    assert reply.status == 200
    assert reply.headers["Content-Type"] == CONTENT_TYPE
    text = reply.raw.decode()
    parsed = samples(text)
    assert parsed["sift_search_queries"] == [
        Sample("sift_search_queries_total", {"caller": "ops", "source": "searxng"}, 1.0)
    ]
    assert parsed["sift_search_cache_hit"][0].value == 1
    assert parsed["sift_search_cache_miss"][0].value == 1
    sources = {s.labels.get("source") for s in parsed["sift_search_source_seconds"]}
    assert sources == {"searxng"}
    count = {s.name: s.value for s in parsed["sift_search_cache_hit_seconds"]}
    assert count["sift_search_cache_hit_seconds_count"] == 1
    json_reply = call(gw.url, "GET", "/metrics", token=TOKEN)
    assert json_reply.headers["Content-Type"] == "application/json"
    json_counters = set(json_reply.json) - {"http_responses"}  # this very scrape counts too
    assert {f"sift_{name}" for name in json_counters} <= set(parsed)


def test_the_query_parameter_asks_for_text_and_auth_still_holds(gw: Gateway) -> None:
    assert call(gw.url, "GET", "/metrics?format=prometheus").status == 401
    reply = call(gw.url, "GET", "/metrics?format=prometheus", token=TOKEN)
    assert reply.status == 200
    assert reply.raw.startswith(b"# HELP ")


def test_a_restricted_callers_series_reach_only_itself(gw: Gateway) -> None:
    assert call(gw.url, "POST", "/v1/search", {"query": "q"}, token="tok-secret-77").status == 200
    theirs = call(gw.url, "GET", "/metrics?format=prometheus", token="tok-secret-77").raw.decode()
    ours = call(gw.url, "GET", "/metrics?format=prometheus", token=TOKEN).raw.decode()
    assert 'caller="secret"' in theirs
    assert "secret" not in ours
    assert 'sift_search_queries_total{caller="restricted"} 1' in ours
