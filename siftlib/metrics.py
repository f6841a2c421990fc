"""In-process counters behind `GET /metrics`.

A metric is a number when unlabelled, else an object keyed by its labels rendered as sorted
`k=v` pairs joined by `,` (`caller=local,source=tavily`). Label values are caller and source
names and error kinds only: never hosts, URLs, queries or keys.

A restricted caller's work is visible only to itself (search.md §8): `visible_to` folds every
other restricted caller's series of a caller-labelled metric into one `caller=restricted`
total, which names no caller and no source.

Latency histograms (`observe`) are kept beside the counters with fixed buckets per metric
(`BUCKETS`) and appear only in the Prometheus rendering (`siftlib.gateway.prometheus`): the JSON of
`/metrics` keeps the flat shape search.md §3.3 gives it. They carry no caller label, so
they need no folding.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Collection, Mapping

RESTRICTED_TOTAL = "caller=restricted"

# Upper bounds in seconds. An upstream call takes tens of milliseconds to seconds; a cache
# hit, from tens of microseconds (memory) to milliseconds (SQLite or Redis under load).
BUCKETS: dict[str, tuple[float, ...]] = {
    "search_source_seconds": (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    "search_cache_hit_seconds": (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05),
}


class Histogram:
    """One labelled series of a histogram: per-bucket counts (not cumulative), sum, count."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last is +Inf
        self.sum = 0.0
        self.count = 0

    def copy(self) -> Histogram:
        """Return a copy that later observations leave alone."""
        copy = Histogram(self.bounds)
        copy.counts, copy.sum, copy.count = list(self.counts), self.sum, self.count
        return copy

    def cumulative(self) -> list[tuple[float, int]]:
        """Return `(upper bound, observations at or below it)`, ending with +Inf."""
        total, rows = 0, []
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += n
            rows.append((bound, total))
        return rows


class Metrics:
    """Thread-safe counters and gauges, rendered as the JSON of `/metrics`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, dict[str, float]] = defaultdict(dict)
        self._histograms: dict[str, dict[str, Histogram]] = defaultdict(dict)

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        """Add `amount` to a counter."""
        key = _label_key(labels)
        with self._lock:
            series = self._values[name]
            series[key] = series.get(key, 0) + amount

    def observe(self, name: str, seconds: float, **labels: str) -> None:
        """Record one duration in the histogram `name` (its buckets are `BUCKETS[name]`)."""
        bounds = BUCKETS[name]
        key = _label_key(labels)
        index = bisect_left(bounds, seconds)
        with self._lock:
            series = self._histograms[name]
            histogram = series.get(key) or series.setdefault(key, Histogram(bounds))
            histogram.counts[index] += 1
            histogram.sum += seconds
            histogram.count += 1

    def histograms(self) -> dict[str, dict[str, Histogram]]:
        """Return a copy of every histogram, keyed by name and then by labels."""
        with self._lock:
            return {
                name: {key: histogram.copy() for key, histogram in sorted(series.items())}
                for name, series in sorted(self._histograms.items())
            }

    def snapshot(self) -> dict[str, float | dict[str, float]]:
        """Return every metric: a number when unlabelled, else an object keyed by labels."""
        with self._lock:
            return {
                name: series[""] if list(series) == [""] else dict(sorted(series.items()))
                for name, series in sorted(self._values.items())
            }


def _label_key(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def visible_to(
    snapshot: Mapping[str, object], *, viewer: str, restricted: Collection[str]
) -> dict[str, object]:
    """Return a snapshot as `viewer` may see it: other restricted callers folded into a total."""
    hidden = set(restricted) - {viewer}
    if not hidden:
        return dict(snapshot)
    shown: dict[str, object] = {}
    for name, value in snapshot.items():
        if not isinstance(value, dict):
            shown[name] = value
            continue
        kept: dict[str, float] = {}
        folded: float | None = None
        for key, amount in value.items():
            if _caller(key) in hidden:
                folded = (folded or 0) + amount
            else:
                kept[key] = amount
        if folded is not None:
            kept[RESTRICTED_TOTAL] = kept.get(RESTRICTED_TOTAL, 0) + folded
            kept = dict(sorted(kept.items()))
        shown[name] = kept
    return shown


def _caller(key: str) -> str | None:
    for part in key.split(","):
        label, _, value = part.partition("=")
        if label == "caller":
            return value
    return None
