"""Rolling upstream health: each source's last outcomes and latencies, as `/healthz` shows them.

    health = Health()
    health.record("searxng", ok=True, ms=212.0)
    health.record("tavily", ok=False, ms=None)       # a failure that never went out
    health.report("searxng")  # {"recent": 1, "success_rate": 1.0, "p50_ms": 212, "p90_ms": 212}

Decisions (the issue asks for "last N outcomes" and "failing after M consecutive failures"):

- N = `WINDOW` = 20 outcomes per source: at a handful of searches a minute that is the last
  few minutes, enough for a p90 that means something, short enough to show a recovery soon.
- M = `FAILING_AFTER` = 3 consecutive failures make a source `failing`: one timeout is
  weather, three in a row is an outage. One success ends it (`ok` again), so the state
  follows the upstream within one search either way.
- An outcome is one source's part in one search (all its pages): ok when it yielded a usable
  answer, partial ones included; a failure otherwise, also when it never went out because its
  host does not resolve or is refused. A source skipped for a missing key, the daily cap or a
  too-long query records nothing: that says nothing about the upstream.
- Latency is wall-clock from the fan-out to the source's answer (the deadline for a
  timeout), over the outcomes that went out; p50 and p90 by nearest rank, in whole ms.
  `success_rate` and the percentiles are `null` before the first outcome.
- The record lives in memory, per process: a restart starts afresh, and each gateway behind
  a load balancer reports its own view of its upstreams.
- Health is reported, never acted on: a failing source is still called, so it is seen to
  recover.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from typing import NamedTuple

WINDOW = 20
FAILING_AFTER = 3


class _Outcome(NamedTuple):
    """One source's part in one search: whether it answered, and how long it took if sent."""

    ok: bool
    ms: float | None


class Health:
    """The rolling outcome record of every source, safe to share between search threads."""

    def __init__(self, *, window: int = WINDOW, failing_after: int = FAILING_AFTER) -> None:
        self._window = window
        self._failing_after = failing_after
        self._lock = threading.Lock()
        self._outcomes: dict[str, deque[_Outcome]] = {}
        self._consecutive: dict[str, int] = {}

    def record(self, source: str, *, ok: bool, ms: float | None) -> None:
        """Add one outcome of `source`; `ms` is None when nothing went out."""
        with self._lock:
            outcomes = self._outcomes.setdefault(source, deque(maxlen=self._window))
            outcomes.append(_Outcome(ok, ms))
            self._consecutive[source] = 0 if ok else self._consecutive.get(source, 0) + 1

    def failing(self, source: str) -> bool:
        """Tell whether `source`'s latest outcomes are `FAILING_AFTER` failures in a row."""
        with self._lock:
            return self._consecutive.get(source, 0) >= self._failing_after

    def report(self, source: str) -> dict[str, object]:
        """Return `source`'s recent outcome count, success rate and p50/p90 latency."""
        with self._lock:
            outcomes = list(self._outcomes.get(source, ()))
        latencies = sorted(o.ms for o in outcomes if o.ms is not None)
        rate = round(sum(o.ok for o in outcomes) / len(outcomes), 3) if outcomes else None
        return {
            "recent": len(outcomes),
            "success_rate": rate,
            "p50_ms": _nearest_rank(latencies, 0.5),
            "p90_ms": _nearest_rank(latencies, 0.9),
        }


def _nearest_rank(ordered: list[float], fraction: float) -> int | None:
    """Return the nearest-rank percentile of sorted values in whole ms, or None when empty."""
    if not ordered:
        return None
    return round(ordered[max(0, math.ceil(fraction * len(ordered)) - 1)])
