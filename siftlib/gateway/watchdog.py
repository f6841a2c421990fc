"""One thread that expires what runs past its deadline, so request handlers need no second one.

    watchdog = Watchdog()
    watch = watchdog.watch(time.monotonic() + 10.0, answer_503)
    ...                                 # the operation runs on the caller's thread
    if not watch.settle():              # False: `answer_503` already ran, drop the outcome
        ...

The gateway watches searches (`deadline` after their request arrived) and request heads and
bodies (one socket timeout each). Deadlines come in a few fixed lengths, so entries wait in
lanes, one FIFO per length (to the millisecond): a lane is in due order as it fills, and the
thread looks only at each lane's head. Settling costs only a flag; settled entries leave from
the front, mostly as the next entry of their lane arrives, so lanes stay the size of what is in
flight. A heap here cost ~10 µs a pop at 10 s × thousands of requests a second (its measured
history: docs). The thread is woken only by an entry due before its next wake-up.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
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
    """A deadline thread over lanes of watches, expiring each one still running at its due time."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._lanes: dict[int, deque[Watch]] = {}  # deadline length in ms -> watches, due order
        self._wake_at = math.inf  # when the thread wakes next: a later entry needs no notify
        self._closed = False
        threading.Thread(target=self._run, name="sift-deadline", daemon=True).start()

    def watch(self, due: float, on_expiry: Callable[[], None]) -> Watch:
        """Start watching one operation; `on_expiry` runs if it is not settled by `due`."""
        entry = Watch(due, on_expiry)
        length = round((due - time.monotonic()) * 1000)
        with self._cond:
            lane = self._lanes.get(length)
            if lane is None:
                lane = self._lanes[length] = deque()
            for _ in range(2):  # drop what settled at the front: two per entry keeps it short
                if not lane or lane[0].state == "running":
                    break
                lane.popleft()
            lane.append(entry)
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
                    if self._closed:
                        return
                    entry = self._due_entry(time.monotonic())
                    if entry is not None:
                        break
                    wait = self._wake_at - time.monotonic()
                    self._cond.wait(None if self._wake_at == math.inf else max(wait, 0))
            entry.expire()

    def _due_entry(self, now: float) -> Watch | None:
        """Return a running entry due by `now`, or set `_wake_at` to the next due (lock held)."""
        wake = math.inf
        for length, lane in list(self._lanes.items()):
            while lane and lane[0].state != "running":
                lane.popleft()
            if not lane:
                del self._lanes[length]
            elif lane[0].due <= now:
                return lane.popleft()
            else:
                wake = min(wake, lane[0].due)
        self._wake_at = wake
        return None
