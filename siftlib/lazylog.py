"""Loggers that import `logging` only for a record that can be shown.

    log = LazyLogger("sift")             # at module level, instead of logging.getLogger
    log.info("search ... cache=%s", "hit")
    configure_cli_later("sift.source")   # `sift search`: WARNING and up, as `sift: <message>`

Why: `sift search` answering from the cache logs one INFO line that nobody is shown, and
importing `logging` (which brings `traceback`, `linecache`, `tokenize`, `string` and
`weakref`) was about a tenth of its start-up (`tests/bench/bench_startup.py`).

The rule that makes this exact: until something imports `logging`, nothing can have given
it a handler or a level, so its defaults hold, and they drop every record below WARNING. So
while `logging` is not imported, a `LazyLogger` drops INFO without importing it; a WARNING
imports `logging` and goes to `logging.getLogger(name)` as before. Once `logging` is imported
(by the server, a test, or httpx on a cache miss), a `LazyLogger` is that logger.

`configure_cli` sets the CLI's one format, `sift: <message>` on stderr for WARNING and up.
`configure_cli_later` defers it to the first record a `LazyLogger` passes on (at once when
`logging` is already imported): only for a command whose loggers are all lazy, since a
record sent to `logging` directly before then would miss the format. Both show WARNING and
up, which is what keeps dropping INFO exact.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

INFO = 20  # logging.INFO, without importing logging
_pending: tuple[str, ...] | None = None  # the quiet loggers of a deferred `configure_cli`


def configure_cli(*quiet: str) -> None:
    """Show WARNING and up on stderr as `sift: <message>`; the `quiet` loggers only ERROR."""
    import logging

    logging.basicConfig(level=logging.WARNING, format="sift: %(message)s")
    for name in quiet:
        logging.getLogger(name).setLevel(logging.ERROR)


def configure_cli_later(*quiet: str) -> None:
    """Run `configure_cli(*quiet)` before the first record a `LazyLogger` passes on."""
    global _pending
    if "logging" in sys.modules:
        configure_cli(*quiet)
    else:
        _pending = quiet


class LazyLogger:
    """`logging.getLogger(name)`, imported on the first record that can be shown."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._logger: logging.Logger | None = None

    def info(self, msg: str, *args: object) -> None:
        """Log at INFO: dropped unseen while `logging` is not imported, as its defaults would."""
        if self._logger is not None or "logging" in sys.modules:
            logger = self._resolve()
            if "siftlib.logs" in sys.modules:  # configured for `sift serve`: maybe no record
                from siftlib.logs import direct_sink

                sink = direct_sink(logger, INFO)
                if sink is not None:
                    sink.write(INFO, msg % args)
                    return
            logger.info(msg, *args, stacklevel=2)

    def warning(self, msg: str, *args: object) -> None:
        """Log at WARNING, importing `logging` if need be."""
        self._resolve().warning(msg, *args, stacklevel=2)

    def _resolve(self) -> logging.Logger:
        global _pending
        if self._logger is None:
            import logging

            if _pending is not None:
                quiet, _pending = _pending, None
                configure_cli(*quiet)
            self._logger = logging.getLogger(self.name)
        return self._logger
