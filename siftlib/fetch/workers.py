"""Running untrusted work on bytes where it can be stopped: a small pool of worker processes.

    pool = WorkerPool(size=2, preload=("siftlib.fetch.convert",))
    document = pool.run(convert_page, body, options, deadline=time.monotonic() + 8.0,
                        memory=1 << 30, cancel=event)       # or raises a `WorkError`
    pool.close()

`run(function, data, *args, deadline=, memory=, cancel=)` calls `function(data, *args)` in one
of the pool's worker processes and returns what it returns. `function` must be picklable (a
module-level function), as must its arguments and its result. It ends in one of four ways:
- the result, when the call finished before `deadline` (a `time.monotonic()` value);
- the function's own exception, raised again here (a `WorkFailed` when it cannot be pickled);
- `WorkTimeout` at `deadline`, counting the wait for a free worker: the worker is killed
  (SIGKILL) and replaced, so the CPU stops being spent the moment the caller gives up;
- `WorkCancelled` when `cancel` (a `threading.Event`) is set: the same kill and replacement;
- `WorkFailed("memory")` when the call passed `memory` bytes of address space (`RLIMIT_AS`,
  set in the worker for the call), `WorkFailed("crashed")` when the worker died; either way
  the worker is replaced.

Why processes: a thread running lxml or a regular expression cannot be interrupted, and its
memory is the gateway's. A process can be killed at the deadline, and `RLIMIT_AS` stops it
growing past a bound, while the caller's thread only waits on a pipe (a cancelled or late
caller frees its gateway slot at once). The PDF reader and the browser use the same call.

Decisions:
- workers are started with `subprocess` (`python -c`), not `fork`: forking the threaded
  gateway could copy a lock held by another thread. `preload` modules are imported by each
  worker as it starts, so the first call does not pay for them; workers start on first use
  (or `start()`), and a replacement starts at once, off the caller's critical path (its
  imports run in the new process while the caller's answer is sent);
- a worker runs at the gateway's own priority: at `nice` 10 an ordinary page took 430 ms
  longer to convert on a loaded machine (docs: hostile pages); the pool's size is the bound
  on the cores hostile work can take;
- a request is one pickle with a length prefix on the worker's stdin, the answer one on its
  stdout: a 100 KB page costs well under a millisecond each way (docs: fetch performance);
- a worker that hit its memory limit exits and is replaced: its heap may be left fragmented.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any, TypeVar, cast

__all__ = ["WorkCancelled", "WorkError", "WorkFailed", "WorkTimeout", "WorkerPool"]

_T = TypeVar("_T")
_HEADER = struct.Struct("!Q")
# How often a caller waiting with a `cancel` event looks at it (a wait with none never wakes).
_CANCEL_POLL = 0.05
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class WorkError(Exception):
    """A call in a worker process did not return a result."""


class WorkTimeout(WorkError):
    """The deadline passed before the call returned (or before a worker was free)."""


class WorkCancelled(WorkError):
    """The caller cancelled the call."""


class WorkFailed(WorkError):
    """The call failed in a way its function did not raise: `memory`, `crashed` or `error`."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind


class _Worker:
    """One worker process and the pipes to it."""

    def __init__(self, preload: Sequence[str]) -> None:
        code = (
            f"import sys; sys.path.insert(0, {_ROOT!r}); "
            f"from siftlib.fetch.workers import serve; serve({tuple(preload)!r})"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        self.stdin = cast("IO[bytes]", self.process.stdin)
        self.stdout = cast("IO[bytes]", self.process.stdout)

    def send(self, message: object) -> None:
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        self.stdin.write(_HEADER.pack(len(payload)) + payload)
        self.stdin.flush()

    def receive(self, deadline: float, cancel: threading.Event | None) -> Any:
        """Read one answer, or raise `WorkTimeout`/`WorkCancelled`/`WorkFailed("crashed")`."""
        fd = self.stdout.fileno()
        buffer = bytearray()
        need = _HEADER.size
        size: int | None = None
        while True:
            while len(buffer) < need:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WorkTimeout("the deadline passed")
                if cancel is not None:
                    if cancel.is_set():
                        raise WorkCancelled("cancelled")
                    left = min(left, _CANCEL_POLL)
                ready, _, _ = select.select([fd], [], [], left)
                if ready:
                    chunk = os.read(fd, max(need - len(buffer), 65536))
                    if not chunk:
                        raise WorkFailed("crashed", "the worker process ended")
                    buffer += chunk
            if size is None:
                size = _HEADER.unpack_from(buffer)[0]
                need = _HEADER.size + size
                continue
            try:
                return pickle.loads(memoryview(buffer)[_HEADER.size : need])
            except Exception as exc:  # an exception type that does not unpickle
                return "error", f"{type(exc).__name__} reading the answer"

    def kill(self) -> None:
        """Stop the process at once and reap it."""
        with contextlib.suppress(OSError):
            self.process.kill()
        for pipe in (self.stdin, self.stdout):
            with contextlib.suppress(OSError):
                pipe.close()
        self.process.wait()


class WorkerPool:
    """A few worker processes that run picklable functions on bytes, each call bounded."""

    def __init__(self, size: int = 2, *, preload: Sequence[str] = ()) -> None:
        if size < 1:
            raise ValueError("a worker pool needs at least one worker")
        self.size = size
        self.preload = tuple(preload)
        self._idle: list[_Worker] = []
        self._started = 0
        self._closed = False
        self._cond = threading.Condition()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, count: int | None = None) -> None:
        """Start workers now (all, or until `count` run), so the first calls find them ready."""
        want = self.size if count is None else min(count, self.size)
        with self._cond:
            while self._started < want and not self._closed:
                self._idle.append(_Worker(self.preload))
                self._started += 1
            self._cond.notify_all()

    def close(self) -> None:
        """Stop the idle workers; a busy one is stopped when its call ends."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for worker in idle:
            worker.kill()

    def run(
        self,
        function: Callable[..., _T],
        data: bytes,
        *args: Any,
        deadline: float,
        memory: int | None = None,
        cancel: threading.Event | None = None,
    ) -> _T:
        """Return `function(data, *args)` run in a worker within `deadline` and `memory` bytes.

        Raise `WorkTimeout`, `WorkCancelled`, `WorkFailed`, or the function's own exception.
        """
        worker = self._acquire(deadline, cancel)
        healthy = False
        try:
            worker.send((function, data, args, memory))
            kind, value = worker.receive(deadline, cancel)
            healthy = kind != "memory"
        except (OSError, EOFError, pickle.PickleError) as exc:
            raise WorkFailed("crashed", type(exc).__name__) from None
        finally:
            self._release(worker, healthy)
        if kind == "ok":
            return cast("_T", value)
        if kind == "raised":
            raise value
        raise WorkFailed(kind, value)

    def _acquire(self, deadline: float, cancel: threading.Event | None) -> _Worker:
        with self._cond:
            while True:
                if self._closed:
                    raise WorkFailed("closed", "the worker pool is closed")
                if self._idle:
                    return self._idle.pop()
                if self._started < self.size:
                    self._started += 1
                    break
                if cancel is not None and cancel.is_set():
                    raise WorkCancelled("cancelled")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WorkTimeout("no worker was free before the deadline")
                self._cond.wait(left if cancel is None else min(left, _CANCEL_POLL))
        try:
            return _Worker(self.preload)
        except BaseException:
            with self._cond:
                self._started -= 1
                self._cond.notify()
            raise

    def _release(self, worker: _Worker, healthy: bool) -> None:
        """Put a worker back after a call, or kill it and start its replacement."""
        if not healthy:
            worker.kill()
        with self._cond:
            if healthy and not self._closed:
                self._idle.append(worker)
                self._cond.notify()
                return
            self._started -= 1
            replace = not self._closed and not healthy
        if healthy:  # closed meanwhile
            worker.kill()
            return
        if replace:
            try:
                fresh = _Worker(self.preload)
            except OSError:
                with self._cond:
                    self._cond.notify()
                return
            with self._cond:
                if self._closed:
                    fresh.kill()
                    return
                self._started += 1
                self._idle.append(fresh)
                self._cond.notify()


def serve(preload: Sequence[str] = ()) -> None:
    """Answer calls from stdin on stdout until stdin closes: the worker process's main loop."""
    import importlib
    import resource

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is for the parent
    for name in preload:
        importlib.import_module(name)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the answers
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    while True:
        header = stdin.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return
        message = stdin.read(_HEADER.unpack(header)[0])
        function, data, args, memory = pickle.loads(message)
        del message
        if memory is not None:
            bound = memory if hard == resource.RLIM_INFINITY else min(memory, hard)
            resource.setrlimit(resource.RLIMIT_AS, (bound, hard))
        try:
            answer: tuple[str, object] = ("ok", function(data, *args))
        except MemoryError:
            answer = ("memory", "the call passed its memory limit")
        except Exception as exc:
            answer = ("raised", exc)
        finally:
            del data
            if memory is not None:
                resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        try:
            payload = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            payload = pickle.dumps(("error", f"{type(exc).__name__} in the answer"))
        stdout.write(_HEADER.pack(len(payload)) + payload)
        stdout.flush()
        if answer[0] == "memory":
            return
