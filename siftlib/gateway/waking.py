"""A threaded HTTP server that waits for connections or `shutdown()`, never polling for it.

The stdlib's `serve_forever` wakes every `poll_interval` to look for a shutdown request: at
0.5 s an idle gateway took up to 0.6 s to stop on SIGTERM, and at the 50 ms `sift serve` used
it woke 20 times a second doing nothing. Here the wait is on the listening socket and one end
of a socket pair, which `shutdown()` writes to: an idle gateway sleeps, and stops at once.
"""

from __future__ import annotations

import selectors
import socket
import threading
from http.server import ThreadingHTTPServer
from typing import Any


class WakingServer(ThreadingHTTPServer):
    """`ThreadingHTTPServer` whose `shutdown()` wakes `serve_forever` instead of waiting a poll."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Before the bind: a bind that fails closes the server, and with it this pair.
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_lock = threading.Lock()  # a shutdown never writes to a closed pair
        self._stopping = False
        self._stopped = threading.Event()
        super().__init__(*args, **kwargs)

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Accept connections until `shutdown()`; `poll_interval` is unused (nothing polls)."""
        with selectors.DefaultSelector() as selector:
            selector.register(self, selectors.EVENT_READ)
            selector.register(self._wake_read, selectors.EVENT_READ)
            try:
                while not self._stopping:
                    if any(key.fileobj is self for key, _ in selector.select()):
                        self._accept()
            finally:
                self._stopped.set()

    def _accept(self) -> None:
        """Take the connection waiting and hand it to `process_request`, as the stdlib does."""
        try:
            request, client_address = self.get_request()
        except OSError:
            return
        if not self.verify_request(request, client_address):
            self.shutdown_request(request)
            return
        try:
            self.process_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
            self.shutdown_request(request)
        except BaseException:
            self.shutdown_request(request)
            raise

    def shutdown(self) -> None:
        """Stop `serve_forever` (from another thread) and wait until it has returned."""
        with self._wake_lock:
            self._stopping = True
            if self._wake_write.fileno() != -1:  # closed: the loop has already returned
                self._wake_write.send(b"x")
        self._stopped.wait()

    def server_close(self) -> None:
        super().server_close()
        with self._wake_lock:
            self._wake_read.close()
            self._wake_write.close()
