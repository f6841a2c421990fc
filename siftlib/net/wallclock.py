"""Every socket wait of a pinned stream under one wall-clock deadline, and a cancel event.

    with wall_clock(time.monotonic() + 8.0, cancel=event):
        client.get(url)     # each read and write gets what is left of the 8 s, or `Cancelled`

httpx's timeouts are per operation: a server dripping a byte a second never trips them. The
dialer (`siftlib.net.dial`) hands httpcore a `DeadlineStream` for every socket it opens, and
that stream cuts each wait to what is left of the innermost `wall_clock`'s deadline; with a
cancel event, a wait is made in slices of `CANCEL_POLL` and raises `Cancelled` soon after the
event is set, dropping the request in flight with its connection.
"""

from __future__ import annotations

import contextvars
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import httpcore
from httpcore._backends.sync import SyncStream

from siftlib.errors import Cancelled
from siftlib.net.deadline import CANCEL_POLL

__all__ = ["DeadlineStream", "current_cancel", "wall_clock"]

_R = TypeVar("_R")

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("deadline", default=None)


_CANCEL: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "cancel", default=None
)


@contextmanager
def wall_clock(deadline: float | None, *, cancel: threading.Event | None = None) -> Iterator[None]:
    """Cap every socket wait of the pinned streams used inside by `deadline` (monotonic).

    With `cancel`, a wait also ends soon after the event is set, raising `Cancelled`: the
    request in flight is dropped with its connection, whatever it was waiting for.
    """
    token = _DEADLINE.set(deadline)
    cancel_token = _CANCEL.set(cancel)
    try:
        yield
    finally:
        _CANCEL.reset(cancel_token)
        _DEADLINE.reset(token)


def current_cancel() -> threading.Event | None:
    """Return the cancel event of the innermost `wall_clock`, if it has one."""
    return _CANCEL.get()


def _remaining(timeout: float | None) -> float | None:
    """Return `timeout` cut to what is left of the current wall-clock deadline, if any."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the wall-clock deadline passed")
    return left if timeout is None else min(timeout, left)


def _cancellable(
    wait: Callable[[float | None], _R], timeout: float | None, cancel: threading.Event
) -> _R:
    """Run a socket wait in slices of `CANCEL_POLL`, raising `Cancelled` once `cancel` is set.

    A slice that times out consumed nothing, so the wait is simply made again.
    """
    due = None if timeout is None else time.monotonic() + timeout
    while True:
        if cancel.is_set():
            raise Cancelled("cancelled")
        left = _remaining(None if due is None else max(due - time.monotonic(), 0.0))
        if left is not None and left <= CANCEL_POLL:
            return wait(left)
        try:
            return wait(CANCEL_POLL)
        except httpcore.ReadTimeout:
            continue


class DeadlineStream(SyncStream):
    """A socket stream whose every wait ends by the wall-clock deadline set by `wall_clock`.

    httpx's timeouts are per operation: a server dripping a byte a second never trips them.
    """

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        cancel = _CANCEL.get()
        if cancel is None:
            return super().read(max_bytes, _remaining(timeout))
        return _cancellable(
            lambda left: super(DeadlineStream, self).read(max_bytes, left), timeout, cancel
        )

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        cancel = _CANCEL.get()
        if cancel is None:
            super().write(buffer, _remaining(timeout))
        elif cancel.is_set():
            raise Cancelled("cancelled")
        else:  # a write that blocks is a send buffer full: bounded by the deadline
            super().write(buffer, _remaining(timeout))

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        stream = super().start_tls(ssl_context, server_hostname, _remaining(timeout))
        return DeadlineStream(stream.get_extra_info("socket"))
