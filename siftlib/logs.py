"""How `sift serve` logs: INFO and up to stderr, in batches, cheaply per line.

    configure_logging()      # once, at start; leaves an already configured logging alone

Why batches: the gateway logs one INFO line per search. A plain `StreamHandler` writes and
flushes each line under its lock; the write releases the GIL while the lock is held, so
under load the other handler threads queue on that lock, one futex hand-off after another.
Measured with 16 keep-alive clients on cache hits, that cost about 60 µs per request, a
fifth of the gateway's time (`make bench`).

So a request thread only formats its line and appends it to a queue. One writer thread
writes whatever has gathered, in one write, every `interval` seconds. A WARNING or worse
wakes the writer at once, so an operator sees trouble without the delay. `flush()` (called
by `logging.shutdown` at exit, and by `close()`) writes everything still queued, in order.
The trade-off, as with a buffered web server access log: a process killed with SIGKILL
loses at most `interval` seconds of INFO lines.

A line whose record would reach this handler alone, with no filter anywhere on its way (the
gateway as `sift serve` configures it), skips the record altogether: `LazyLogger.info` asks
`direct_sink()` and hands it the message text, formatted exactly as the handler would. That was
about 30 µs of a cache hit's ~250 µs. Anything else (a test's capture handler, a filter, another
format) sees every record as before.

Per line, the records skip what the format never shows (thread, process and caller
lookups, as the logging HOWTO's "Optimization" section describes), and the timestamp text is
formatted once a second. httpx and httpcore are held to WARNING: httpx logs each upstream
request URL, query string included, at INFO.
"""

from __future__ import annotations

import collections
import logging
import sys
import threading
import time
from typing import TextIO

FORMAT = "%(asctime)s %(levelname)s %(message)s"


def configure_logging() -> None:
    """Log INFO and up to stderr in batches, with httpx and httpcore held to warnings."""
    root = logging.getLogger()
    if not root.handlers:  # as `logging.basicConfig`: leave a configured logging alone
        handler = BatchedStderrHandler()
        handler.setFormatter(LineFormatter(FORMAT))
        root.addHandler(handler)
        root.setLevel(logging.INFO)
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None  # no caller lookup: the format names no file or line
    # httpx logs every request URL (with the query string: the caller's query) at INFO.
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)


class LineFormatter(logging.Formatter):
    """A `Formatter` that formats the time of day once a second, not once a line."""

    _cached = (-1, "")  # (second, its text), swapped whole so threads never see a half

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        if datefmt:
            return super().formatTime(record, datefmt)
        return self.time_text(record.created)

    def time_text(self, created: float) -> str:
        """Return `asctime` of a record created at `created`, as `formatTime` gives it."""
        second, text = self._cached
        if second != int(created):
            second = int(created)
            text = time.strftime(self.default_time_format, self.converter(second))
            self._cached = (second, text)
        return f"{text},{int((created - int(created)) * 1000):03d}"


def direct_sink(logger: logging.Logger, level: int) -> BatchedStderrHandler | None:
    """Return the handler a record of `logger` at `level` would reach alone and unfiltered.

    None when the record would be dropped, filtered, or shown anywhere else (or differently):
    then it must go through `logging` as usual.
    """
    if not logger.isEnabledFor(level):
        return None
    node: logging.Logger | None = logger
    while node is not None:
        if node.filters:
            return None
        if node.handlers:
            handler = node.handlers[0]
            if node.parent is not None or len(node.handlers) != 1:
                return None
            if not isinstance(handler, BatchedStderrHandler) or not handler.direct(level):
                return None
            return handler
        if not node.propagate:
            return None
        node = node.parent
    return None


class BatchedStderrHandler(logging.Handler):
    """Write formatted log lines to stderr from one thread, in one write per batch."""

    def __init__(self, stream: TextIO | None = None, *, interval: float = 0.1) -> None:
        super().__init__()
        self.stream = sys.stderr if stream is None else stream
        self.interval = interval
        self._lines: collections.deque[str] = collections.deque()
        self._write_lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        threading.Thread(target=self._run, name="sift-log", daemon=True).start()

    def handle(self, record: logging.LogRecord) -> bool:
        """Emit a record without the handler's lock: `emit` is thread-safe on its own."""
        # The stdlib takes an RLock around every emit; 16 request threads formatting lines
        # under it queue on that lock. A deque append needs none, and the formatter's one
        # piece of state is swapped whole.
        passed = bool(self.filter(record))
        if passed:
            self.emit(record)
        return passed

    def direct(self, level: int) -> bool:
        """True when a line at `level` may skip the record: no filter, the sift line format."""
        formatter = self.formatter
        return (
            level >= self.level
            and not self.filters
            and type(formatter) is LineFormatter
            and formatter._fmt == FORMAT
        )

    def write(self, level: int, message: str) -> None:
        """Queue one line as `format` would write a record's, without the record."""
        assert isinstance(self.formatter, LineFormatter)
        stamp = self.formatter.time_text(time.time())
        self._lines.append(f"{stamp} {logging.getLevelName(level)} {message}\n")
        if level >= logging.WARNING:
            self._wake.set()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._lines.append(self.format(record) + "\n")
        except Exception:
            self.handleError(record)
            return
        if record.levelno >= logging.WARNING:
            self._wake.set()

    def flush(self) -> None:
        """Write every queued line now, oldest first."""
        with self._write_lock:
            lines = []
            while self._lines:
                lines.append(self._lines.popleft())
            if lines:
                self.stream.write("".join(lines))
                self.stream.flush()

    def close(self) -> None:
        """Stop the writer thread and write what is still queued."""
        self._closed = True
        self._wake.set()
        self.flush()
        super().close()

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self.interval)
            self._wake.clear()
            try:
                self.flush()
            except (OSError, ValueError):  # stderr closed or gone: nothing left to write to
                return
