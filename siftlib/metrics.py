"""In-process counters behind `GET /metrics`.

A metric is a number when unlabelled, else an object keyed by its labels rendered as sorted
`k=v` pairs joined by `,` (`caller=local,source=tavily`). Label values are caller and source
names and error kinds only: never hosts, URLs, queries or keys.

A restricted caller's work is visible only to itself (search.md §8): `visible_to` folds every
other restricted caller's series of a caller-labelled metric into one `caller=restricted`
total, which names no caller and no source.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Collection, Mapping

RESTRICTED_TOTAL = "caller=restricted"


class Metrics:
    """Thread-safe counters and gauges, rendered as the JSON of `/metrics`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, dict[str, float]] = defaultdict(dict)

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        """Add `amount` to a counter."""
        key = _label_key(labels)
        with self._lock:
            series = self._values[name]
            series[key] = series.get(key, 0) + amount

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
