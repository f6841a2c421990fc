"""One thread that expires what runs past its deadline, so request handlers need no second one.

    watchdog = Watchdog()
    watch = watchdog.watch(time.monotonic() + 10.0, answer_503)
    ...                                 # the operation runs on the caller's thread
    if not watch.settle():              # False: `answer_503` already ran, drop the outcome
        ...

The gateway watches searches (`deadline` after their request arrived) and request heads and
bodies (one socket timeout each). Entries sit in a heap by due time; settled ones are dropped
when they reach the top, so settling costs only a flag, and the thread is woken only by an
entry due before its next wake-up (rare: deadlines have fixed lengths), not once per request.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
import time
from collections.abc import Callable


class Watch:
    """One operation under a deadline: settled by its owner, or expired by the watchdog."""

    __slots__ = ("due", "on_expiry", "state", "_lock")

    def __init__(self, due: float, on_expiry: Callable[[], None]) -> None:
        self.due = due
        self.on_expiry: Callable[[], None] | None = on_expiry
        self.state = "running"
        self._lock = threading.Lock()

    def settle(self) -> bool:
        """Mark the operation finished; False when the deadline already answered for it."""
        with self._lock:
            if self.state == "expired":
                return False
            self.state = "settled"
            self.on_expiry = None  # a settled entry waits in the heap: hold no handler
            return True

    def expire(self) -> None:
        """Run `on_expiry` once, unless the operation was settled first."""
        with self._lock:
            if self.state == "running" and self.on_expiry is not None:
                self.state = "expired"
                self.on_expiry()
                self.on_expiry = None


class Watchdog:
    """A deadline thread over a heap of watches, expiring each one still running at its due time."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Watch]] = []
        self._order = itertools.count()
        self._wake_at = math.inf  # when the thread wakes next: a later entry needs no notify
        self._closed = False
        threading.Thread(target=self._run, name="sift-deadline", daemon=True).start()

    def watch(self, due: float, on_expiry: Callable[[], None]) -> Watch:
        """Start watching one operation; `on_expiry` runs if it is not settled by `due`."""
        entry = Watch(due, on_expiry)
        with self._cond:
            heapq.heappush(self._heap, (due, next(self._order), entry))
            if due < self._wake_at:
                self._cond.notify()
        return entry

    def close(self) -> None:
        """Stop the thread; what still runs is no longer expired."""
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    while self._heap and self._heap[0][2].state != "running":
                        heapq.heappop(self._heap)
                    if self._closed:
                        return
                    if not self._heap:
                        self._wake_at = math.inf
                        self._cond.wait()
                        continue
                    self._wake_at = self._heap[0][0]
                    delay = self._wake_at - time.monotonic()
                    if delay <= 0:
                        entry = heapq.heappop(self._heap)[2]
                        break
                    self._cond.wait(delay)
            entry.expire()
