"""The clock deadlines are measured on, and the waits against them: a seam for tests.

    clock = DeadlineClock()
    deadline = clock.now() + 8.0
    clock.wait(futures, until=deadline)                # the search fan-out
    done = clock.wait_event(call.done, until=deadline)  # the skill reranker's provider call

The search pipeline and the skill reranker take one as a constructor argument. A test's clock
can let time pass only when the code waits, so a deadline test checks exactly what timed out
and when, without sleeping through the timeout or timing the wall clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from concurrent.futures import Future

# How often a wait that a cancel event may end looks at it: a dialled socket's read or write
# (`siftlib.net.wallclock`), an aborted call's watcher (`siftlib.net.abort`), the fan-out.
CANCEL_POLL = 0.05


class DeadlineClock:
    """A monotonic clock, and waiting on it until a deadline."""

    def now(self) -> float:
        """Return seconds on a monotonic clock."""
        return time.monotonic()

    def wait(self, futures: Collection[Future[Any]], *, until: float) -> None:
        """Wait until every future is done or the clock reaches `until`."""
        from concurrent.futures import wait  # a cache hit waits on nothing and never imports it

        wait(futures, timeout=max(0.0, until - self.now()))

    def wait_event(self, event: threading.Event, *, until: float) -> bool:
        """Wait until `event` is set (True) or the clock reaches `until` (False)."""
        return event.wait(max(0.0, until - self.now()))
