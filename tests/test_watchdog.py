"""The deadline thread: what is settled in time is left alone, what runs past it is expired."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from siftlib.gateway.watchdog import Watchdog


@pytest.fixture
def watchdog() -> Iterator[Watchdog]:
    dog = Watchdog()
    yield dog
    dog.close()


def test_an_operation_past_its_deadline_is_expired_once(watchdog: Watchdog) -> None:
    fired = threading.Event()
    calls: list[str] = []

    def on_expiry() -> None:
        calls.append("expired")
        fired.set()

    watch = watchdog.watch(time.monotonic(), on_expiry)
    assert fired.wait(10)
    assert not watch.settle()  # the deadline already answered
    watch.expire()
    assert calls == ["expired"]


def test_a_settled_operation_is_never_expired(watchdog: Watchdog) -> None:
    calls: list[str] = []
    watch = watchdog.watch(time.monotonic() + 3600, lambda: calls.append("late"))
    assert watch.settle()
    watch.expire()
    # A later entry due now is expired: the thread went past the settled one.
    fired = threading.Event()
    watchdog.watch(time.monotonic(), fired.set)
    assert fired.wait(10)
    assert calls == []


def test_an_earlier_entry_wakes_a_thread_sleeping_towards_a_later_one(watchdog: Watchdog) -> None:
    watchdog.watch(time.monotonic() + 3600, lambda: None)
    fired = threading.Event()
    watchdog.watch(time.monotonic() + 0.05, fired.set)
    assert fired.wait(10)


def test_deadlines_of_every_length_expire_in_due_order(watchdog: Watchdog) -> None:
    fired: list[float] = []
    done = threading.Event()
    # A second's start: a starved test thread still files every watch before the first is due.
    start = time.monotonic() + 1.0
    lengths = [0.3, 0.1, 0.2, 0.1, 0.25, 0.05]
    for length in lengths:
        watchdog.watch(start + length, lambda length=length: fired.append(length))
    watchdog.watch(start + 0.4, done.set)
    assert done.wait(10)
    assert fired == sorted(lengths)


def test_settled_entries_leave_their_lane_as_new_ones_arrive(watchdog: Watchdog) -> None:
    for _ in range(1000):
        watchdog.watch(time.monotonic() + 3600, lambda: None).settle()
    assert sum(len(lane) for lane in watchdog._lanes.values()) <= 4  # a lane or two
    # A lane emptied by an expiry takes new entries, which are expired in turn.
    for _ in range(3):
        fired = threading.Event()
        watchdog.watch(time.monotonic(), fired.set)
        assert fired.wait(10)
