"""Time for tests: the instant the store and pipeline tests start at, and a clock set by hand."""

from __future__ import annotations

NOW = 1_764_475_200.0  # 2025-11-30T04:00:00Z, the start of an hour
DAY = "2025-11-30"  # NOW's day, as the credit ledger names it
HOUR = "2025-11-30T04"  # NOW's hour bucket, as cache keys name it


class Clock:
    """A clock that stands still until a test moves `now`; called as `time.time` would be."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
