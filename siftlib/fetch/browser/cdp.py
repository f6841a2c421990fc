"""The Chrome DevTools protocol over `--remote-debugging-pipe`: no port, no websocket.

    pipe = Pipe.launch(["chromium", "--headless", "--remote-debugging-pipe", ...])
    target = pipe.call("Target.createTarget", {"url": "about:blank"}, timeout=5)
    session = pipe.attach(target["targetId"], timeout=5)    # a `Session`: its calls, its events
    session.call("Page.enable", timeout=5)
    method, params = session.next_event(timeout=1)          # or None when nothing came

Chromium reads the protocol's JSON messages from its file descriptor 3 and writes its own to
fd 4, each message ended by a NUL byte. `Pipe.launch` starts the browser with `posix_spawn`,
the two pipe ends placed at 3 and 4, in a session of its own (so `kill` ends every process of
the browser at once), stdin/stdout/stderr on /dev/null. One reader thread parses what the
browser writes: an answer wakes the caller waiting for its `id`, an event goes to the queue
of the session it names (events of no session we attached are dropped). When the browser
exits or the pipe breaks, every waiting call and every later one raises `BrowserGone`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import queue
import signal
import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["BrowserGone", "CallFailed", "Pipe", "Session"]

_MIN_FD = 10  # pipe ends above fd 4, so placing them at 3 and 4 never clobbers one of them
_MAX_MESSAGE = 256 * 1024 * 1024  # a screenshot or a DOM is big; a runaway message is not


class BrowserGone(Exception):
    """The browser exited, or its pipe broke, or it did not answer in time."""


class CallFailed(Exception):
    """The browser answered a call with a protocol error."""


class Session:
    """One attached target (or the browser itself): its calls and its event queue."""

    def __init__(self, pipe: Pipe, session_id: str | None) -> None:
        self.pipe = pipe
        self.id = session_id
        self.events: queue.SimpleQueue[tuple[str, dict[str, Any]]] = queue.SimpleQueue()

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float
    ) -> dict[str, Any]:
        """Send one command in this session and return its result."""
        return self.pipe.call(method, params, session=self.id, timeout=timeout)

    def send(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send one command in this session without waiting for its answer."""
        self.pipe.send(method, params, session=self.id)

    def next_event(self, *, timeout: float) -> tuple[str, dict[str, Any]] | None:
        """Return the next event of this session, or None when none came within `timeout`."""
        try:
            return self.events.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return None

    def detach(self) -> None:
        """Stop routing this session's events."""
        self.pipe.forget(self.id)


class _Waiter:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.answer: dict[str, Any] = {}


class Pipe:
    """A running browser and the protocol connection to it."""

    def __init__(self, pid: int, to_browser: int, from_browser: int) -> None:
        self.pid = pid
        self._out = to_browser
        self._in = from_browser
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._next_id = 0
        self._waiters: dict[int, _Waiter] = {}
        self._sessions: dict[str | None, Session] = {}
        self._gone = threading.Event()
        self.browser = Session(self, None)
        self._sessions[None] = self.browser
        self._reader = threading.Thread(target=self._read, name="sift-cdp", daemon=True)
        self._reader.start()

    @classmethod
    def launch(cls, argv: Sequence[str]) -> Pipe:
        """Start a browser with `--remote-debugging-pipe` in `argv`; return its connection."""
        to_read, to_write = _pipe()  # sift writes, the browser reads on fd 3
        from_read, from_write = _pipe()  # the browser writes on fd 4, sift reads
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            pid = os.posix_spawnp(
                argv[0],
                list(argv),
                dict(os.environ),
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, null, 0),
                    (os.POSIX_SPAWN_DUP2, null, 1),
                    (os.POSIX_SPAWN_DUP2, null, 2),
                    (os.POSIX_SPAWN_DUP2, to_read, 3),
                    (os.POSIX_SPAWN_DUP2, from_write, 4),
                ],
                setsid=True,
            )
        except OSError:
            for fd in (to_read, to_write, from_read, from_write):
                os.close(fd)
            raise
        finally:
            os.close(null)
        os.close(to_read)
        os.close(from_write)
        return cls(pid, to_write, from_read)

    @property
    def alive(self) -> bool:
        """Tell whether the browser still answers on its pipe."""
        return not self._gone.is_set()

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: str | None = None,
        timeout: float,
    ) -> dict[str, Any]:
        """Send one command and wait for its answer; raise `CallFailed` or `BrowserGone`."""
        waiter = _Waiter()
        ident = self._write(method, params, session, waiter)
        if not waiter.done.wait(max(timeout, 0.0)):
            with self._lock:
                self._waiters.pop(ident, None)
            raise BrowserGone(f"no answer to {method} in time")
        answer = waiter.answer
        if "error" in answer:
            error = answer["error"]
            text = error.get("message", "error") if isinstance(error, dict) else str(error)
            raise CallFailed(f"{method}: {text}")
        if answer.get("gone"):
            raise BrowserGone("the browser exited")
        result = answer.get("result", {})
        return result if isinstance(result, dict) else {}

    def send(
        self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None
    ) -> None:
        """Send one command and drop its answer."""
        self._write(method, params, session, None)

    def attach(self, target_id: str, *, timeout: float) -> Session:
        """Attach to a target (flattened) and return its session."""
        result = self.call(
            "Target.attachToTarget", {"targetId": target_id, "flatten": True}, timeout=timeout
        )
        session = Session(self, str(result["sessionId"]))
        with self._lock:
            self._sessions[session.id] = session
        return session

    def forget(self, session_id: str | None) -> None:
        """Drop a session's event routing."""
        if session_id is not None:
            with self._lock:
                self._sessions.pop(session_id, None)

    def kill(self) -> None:
        """End every process of the browser and reap the first one; the pipe is gone at once."""
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self._out)
        self._lost()  # not only when the reader sees the pipe's end, a moment later

    def _write(
        self,
        method: str,
        params: dict[str, Any] | None,
        session: str | None,
        waiter: _Waiter | None,
    ) -> int:
        with self._lock:
            if self._gone.is_set():
                raise BrowserGone("the browser exited")
            self._next_id += 1
            ident = self._next_id
            if waiter is not None:
                self._waiters[ident] = waiter
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        data = json.dumps(message, separators=(",", ":")).encode() + b"\0"
        try:
            with self._write_lock:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._out, view) :]
        except OSError:
            self._lost()
            raise BrowserGone("the browser's pipe broke") from None
        return ident

    def _read(self) -> None:
        buffer = bytearray()
        try:
            while True:
                chunk = os.read(self._in, 1 << 20)
                if not chunk:
                    break
                buffer += chunk
                if len(buffer) > _MAX_MESSAGE:
                    break
                while (end := buffer.find(b"\0")) >= 0:
                    message = bytes(buffer[:end])
                    del buffer[: end + 1]
                    self._dispatch(message)
        except OSError:
            pass
        finally:
            os.close(self._in)
        self._lost()

    def _dispatch(self, data: bytes) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        if "id" in message:
            with self._lock:
                waiter = self._waiters.pop(message["id"], None)
            if waiter is not None:
                waiter.answer = message
                waiter.done.set()
            return
        method, params = message.get("method"), message.get("params")
        if isinstance(method, str) and isinstance(params, dict):
            with self._lock:
                session = self._sessions.get(message.get("sessionId"))
            if session is not None:
                session.events.put((method, params))

    def _lost(self) -> None:
        with self._lock:
            self._gone.set()
            waiters = list(self._waiters.values())
            self._waiters.clear()
            sessions = list(self._sessions.values())
        for waiter in waiters:
            waiter.answer = {"gone": True}
            waiter.done.set()
        for session in sessions:
            session.events.put(("sift.gone", {}))


def _pipe() -> tuple[int, int]:
    """Return a close-on-exec pipe whose two ends sit at fd 10 or above."""
    read, write = os.pipe()
    try:
        return (
            fcntl.fcntl(read, fcntl.F_DUPFD_CLOEXEC, _MIN_FD),
            fcntl.fcntl(write, fcntl.F_DUPFD_CLOEXEC, _MIN_FD),
        )
    finally:
        os.close(read)
        os.close(write)
