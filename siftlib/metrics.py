"""In-process counters behind `GET /metrics`.

A metric is a number when unlabelled, else an object keyed by its labels rendered as sorted
`k=v` pairs joined by `,` (`caller=local,source=tavily`). Label values are caller and source
names and error kinds only: never hosts, URLs, queries or keys.
"""

from __future__ import annotations

import threading
from collections import defaultdict


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

    def set(self, name: str, value: float, **labels: str) -> None:
        """Set a gauge."""
        with self._lock:
            self._values[name][_label_key(labels)] = value

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
