"""Noticing a client that hangs up while its request is worked on, so the work is cancelled.

    hangups = HangUps()
    cancel = threading.Event()
    watched = hangups.watch(connection, cancel)    # cancel is set if the peer hangs up
    try:
        answer = work(cancel)                       # a search or a fetch, checking `cancel`
    finally:
        hangups.forget(watched)

One thread and one epoll set for the whole gateway: a watched socket costs two system calls
(register, unregister), not a thread or a poll per request. It waits for `EPOLLRDHUP`, the
peer's FIN or reset, never for readable data, so a pipelined next request does not count as
a hang-up; each socket fires once (`EPOLLONESHOT`). A client that only shuts down its sending
side while still reading counts as gone: HTTP/1.1 has no half-close, and browsers, curl and
the SDKs never do it.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import threading

__all__ = ["HangUps"]

_HUNG_UP = select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR | select.EPOLLONESHOT


class HangUps:
    """One thread setting each watched request's cancel event when its client hangs up."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._events: dict[int, threading.Event] = {}
        self._lock = threading.Lock()
        self._wake_read, self._wake_write = os.pipe()
        self._epoll.register(self._wake_read, select.EPOLLIN)
        self._thread = threading.Thread(target=self._run, name="sift-hangups", daemon=True)
        self._thread.start()

    def watch(self, connection: socket.socket, cancel: threading.Event) -> int:
        """Set `cancel` if `connection`'s peer hangs up before `forget`; return the handle."""
        fd = connection.fileno()
        with self._lock:
            self._events[fd] = cancel
            try:
                self._epoll.register(fd, _HUNG_UP)
            except OSError:  # already closed, or still registered after a fired one-shot
                del self._events[fd]
                return -1
        return fd

    def forget(self, fd: int) -> None:
        """Stop watching a connection (its request is answered)."""
        if fd < 0:
            return
        with self._lock:
            self._events.pop(fd, None)
            with contextlib.suppress(OSError):
                self._epoll.unregister(fd)

    def close(self) -> None:
        """Stop the thread and release the epoll set."""
        os.write(self._wake_write, b"x")
        self._thread.join()
        self._epoll.close()
        os.close(self._wake_read)
        os.close(self._wake_write)

    def _run(self) -> None:
        while True:
            try:
                ready = self._epoll.poll()
            except InterruptedError:
                continue
            for fd, _ in ready:
                if fd == self._wake_read:
                    return
                with self._lock:
                    cancel = self._events.get(fd)
                if cancel is not None:
                    cancel.set()
