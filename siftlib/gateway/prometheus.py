"""`/metrics` in the Prometheus text exposition format, version 0.0.4.

The gateway answers this instead of its JSON when the client asks for it: an `Accept` naming
`text/plain` or `application/openmetrics-text` (Prometheus's own scraper sends both), or
`?format=prometheus`. The answer is always 0.0.4 text, which every Prometheus version reads,
served as `text/plain; version=0.0.4; charset=utf-8`.

Each JSON metric `name` becomes `sift_<name>`: counters gain `_total`, gauges (`GAUGES`) keep
their name. A label key `caller=local,source=tavily` becomes `{caller="local",source="tavily"}`.
The input is the snapshot a viewer may see (`metrics.visible_to`), so a restricted caller's
series reach only that caller here too. Latency histograms follow the counters, as
`sift_<name>_bucket{…,le="…"}` (cumulative), `_sum` and `_count`.

    text = render(visible_snapshot, metrics.histograms())
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from siftlib.metrics import Histogram

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

GAUGES = frozenset({"search_daily_credits", "search_capped", "store_up"})

HELP = {
    "search_queries": "Upstream calls made, by caller and source (cache hits call nothing).",
    "search_credits": "Credits spent upstream, by caller and source.",
    "search_errors": "Failed or skipped source calls, by source and failure kind.",
    "search_cache_hit": "Searches answered from the cache.",
    "search_cache_miss": "Searches the cache could not answer.",
    "search_daily_credits": "Credits spent today (UTC) per paid source, across the store.",
    "search_capped": "1 while a paid source is at its daily credit cap, else 0.",
    "store_up": "1 while the store answers, else 0, by store kind.",
    "http_responses": "HTTP answers sent, by route and status.",
    "http_shed": "Connections or requests shed before an answer, by reason.",
    "fetch_requests": "Page fetches, by caller and outcome.",
    "fetch_bytes": "Decoded page bytes read by fetches.",
    "fetch_blocked": "Fetches the guard refused, by rule.",
    "fetch_cache_hit": "Fetches answered from the fetch cache.",
    "fetch_cache_miss": "Fetches the fetch cache could not answer (maxAge 0 included).",
    "browser_renders": "Pages rendered by the headless browser.",
    "browser_render_failures": "Renders that failed, by kind (deadline, crash, memory, …).",
    "browser_restarts": "Times the headless browser was killed and started again, by reason.",
    "browser_proxy_refusals": "Requests of rendered pages the guarded proxy refused, by rule.",
    "search_source_seconds": "Latency of one upstream source call, by source.",
    "search_cache_hit_seconds": "Time to answer a search from the cache.",
}


def wants_prometheus(accept: str | None, query: str) -> bool:
    """Say whether a `/metrics` request asks for the text format rather than JSON."""
    if "format=prometheus" in query.split("&"):
        return True
    if not accept:
        return False
    types = {part.split(";", 1)[0].strip().lower() for part in accept.split(",")}
    return bool(types & {"text/plain", "application/openmetrics-text"})


def render(
    snapshot: Mapping[str, object], histograms: Mapping[str, Mapping[str, Histogram]]
) -> str:
    """Return the exposition text of a `/metrics` snapshot and the latency histograms."""
    lines: list[str] = []
    for name, value in snapshot.items():
        kind = "gauge" if name in GAUGES else "counter"
        full = f"sift_{name}" if kind == "gauge" else f"sift_{name}_total"
        _head(lines, full, name, kind)
        series = value if isinstance(value, Mapping) else {"": value}
        for key, amount in series.items():
            lines.append(f"{full}{_labels(_pairs(key))} {_number(amount)}")
    for name, series in histograms.items():
        full = f"sift_{name}"
        _head(lines, full, name, "histogram")
        for key, histogram in series.items():
            pairs = _pairs(key)
            for bound, count in histogram.cumulative():
                labels = _labels([*pairs, ("le", "+Inf" if math.isinf(bound) else repr(bound))])
                lines.append(f"{full}_bucket{labels} {count}")
            lines.append(f"{full}_sum{_labels(pairs)} {_number(histogram.sum)}")
            lines.append(f"{full}_count{_labels(pairs)} {histogram.count}")
    return "".join(line + "\n" for line in lines)


def _head(lines: list[str], full: str, name: str, kind: str) -> None:
    help_text = HELP.get(name, f"sift metric {name}.")
    lines.append(f"# HELP {full} {help_text}")
    lines.append(f"# TYPE {full} {kind}")


def _pairs(key: str) -> list[tuple[str, str]]:
    if not key:
        return []
    return [(label, value) for label, _, value in (p.partition("=") for p in key.split(","))]


def _labels(pairs: list[tuple[str, str]]) -> str:
    if not pairs:
        return ""
    return "{" + ",".join(f'{label}="{_escape(value)}"' for label, value in pairs) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: object) -> str:
    number = float(value) if isinstance(value, int | float) else math.nan
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    return str(int(number)) if number.is_integer() else repr(number)
