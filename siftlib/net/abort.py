"""Stopping one httpx call from another thread, at any point: before it connects or mid-read.

    abort = Abort()
    with abort.on(cancel):                      # abort() once the cancel event is set
        client.post(url, json=body, extensions={"trace": abort.trace})

The trace hook notes the call's socket as it connects and raises `Aborted` at the call's next
step once aborted; `abort()` shuts the noted sockets down, so a read blocked on the peer
returns at once and the peer sees the connection close. A call should own its connection
(no keep-alive), or aborting it would close a pooled one. The skill reranker stops its
provider call this way; `sift mcp` through a gateway stops its request to the gateway, whose
hang-up watch then cancels the work there.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

from siftlib.net.deadline import CANCEL_POLL


class Aborted(Exception):
    """The call was aborted by its owner."""


class Abort:
    """A handle that stops one httpx call from another thread."""

    _SOCKET_EVENTS = ("connection.connect_tcp.complete", "connection.start_tls.complete")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._aborted = False
        self._sockets: list[socket.socket] = []

    @property
    def aborted(self) -> bool:
        """Whether `abort` was called."""
        return self._aborted

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """An httpx trace hook: note the call's socket, and stop at any step once aborted."""
        sock = None
        if event in self._SOCKET_EVENTS:
            sock = info["return_value"].get_extra_info("socket")
        with self._lock:
            if not self._aborted:
                if sock is not None:
                    self._sockets.append(sock)
                return
        if sock is not None:  # connected just after an abort: close it here and now
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        raise Aborted

    def abort(self) -> None:
        """Stop the call: shut its connection down so a blocked read returns at once."""
        with self._lock:
            self._aborted = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):  # already closed by the call itself
                sock.shutdown(socket.SHUT_RDWR)

    @contextlib.contextmanager
    def on(self, cancel: threading.Event | None) -> Iterator[None]:
        """Abort the call made inside once `cancel` is set (at once if it is set already)."""
        if cancel is None:
            yield
            return
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                if cancel.wait(CANCEL_POLL):
                    self.abort()
                    return

        if cancel.is_set():
            self.abort()
        else:
            threading.Thread(target=watch, name="sift-abort", daemon=True).start()
        try:
            yield
        finally:
            done.set()
