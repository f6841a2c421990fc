"""How `sift serve` logs: batched off the logging thread, every line once, in order."""

from __future__ import annotations

import io
import logging
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from siftlib.logs import FORMAT, BatchedStderrHandler, LineFormatter

REPO = Path(__file__).resolve().parent.parent


class Recording(io.StringIO):
    """A stream that notes which thread wrote to it."""

    def __init__(self) -> None:
        super().__init__()
        self.writers: set[str] = set()

    def write(self, text: str) -> int:
        self.writers.add(threading.current_thread().name)
        return super().write(text)


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    made = logging.getLogger("sift.test-logs")
    made.propagate = False
    made.setLevel(logging.INFO)
    yield made
    for handler in list(made.handlers):
        made.removeHandler(handler)
        handler.close()


def attach(logger: logging.Logger, interval: float) -> tuple[BatchedStderrHandler, Recording]:
    stream = Recording()
    handler = BatchedStderrHandler(stream, interval=interval)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    return handler, stream


def eventually(condition: object, limit: float = 10.0) -> bool:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.005)
    return False


def test_an_info_line_is_queued_not_written_by_the_logging_thread(logger: logging.Logger) -> None:
    handler, stream = attach(logger, interval=60)
    logger.info("search caller=%s n=%d", "ops", 3)
    assert stream.getvalue() == ""
    handler.flush()
    assert stream.getvalue() == "INFO search caller=ops n=3\n"


def test_the_writer_thread_writes_queued_lines_within_the_interval(
    logger: logging.Logger,
) -> None:
    _, stream = attach(logger, interval=0.05)
    logger.info("one")
    logger.info("two")
    assert eventually(lambda: stream.getvalue() == "INFO one\nINFO two\n")
    assert stream.writers == {"sift-log"}


def test_a_warning_is_written_at_once_after_the_lines_before_it(logger: logging.Logger) -> None:
    _, stream = attach(logger, interval=60)
    logger.info("before")
    logger.warning("tavily: missing key")
    assert eventually(lambda: stream.getvalue() != "", limit=5)
    assert stream.getvalue() == "INFO before\nWARNING tavily: missing key\n"


def test_close_writes_what_is_still_queued(logger: logging.Logger) -> None:
    handler, stream = attach(logger, interval=60)
    logger.info("last words")
    logger.removeHandler(handler)
    handler.close()
    assert stream.getvalue() == "INFO last words\n"


def test_lines_from_many_threads_arrive_whole_once_and_in_each_threads_order(
    logger: logging.Logger,
) -> None:
    handler, stream = attach(logger, interval=0.001)

    def speak(name: str) -> None:
        for i in range(500):
            logger.info("%s %d", name, i)

    threads = [threading.Thread(target=speak, args=(f"t{n}",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    handler.flush()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 8 * 500
    for n in range(8):
        mine = [line for line in lines if line.startswith(f"INFO t{n} ")]
        assert mine == [f"INFO t{n} {i}" for i in range(500)]


def test_a_line_that_cannot_be_formatted_is_reported_and_the_rest_go_on(
    logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    handler, stream = attach(logger, interval=60)
    bad = {"msg": "needs %d", "args": ("not a number",), "levelname": "INFO", "levelno": 20}
    handler.handle(logging.makeLogRecord(bad))
    logger.info("fine")
    handler.flush()
    assert stream.getvalue() == "INFO fine\n"
    assert "--- Logging error ---" in capsys.readouterr().err


def test_the_line_formatter_writes_the_stdlib_timestamp_across_seconds() -> None:
    ours = LineFormatter(FORMAT)
    stdlib = logging.Formatter(FORMAT)
    start = time.time()
    for offset in (0.0, 0.25, 0.999, 1.0, 1.5, 61.0, 3600.001, 0.5):
        record = logging.makeLogRecord({"msg": "search n=%d", "args": (3,), "levelname": "INFO"})
        record.created = start + offset
        record.msecs = (record.created - int(record.created)) * 1000
        assert ours.format(record) == stdlib.format(record)


def test_sift_serve_logging_reaches_stderr_whole_at_exit_and_holds_httpx_back() -> None:
    program = (
        "import logging\n"
        "from siftlib.logs import configure_logging\n"
        "configure_logging()\n"
        "logging.getLogger('sift.pipeline').info('search caller=%s n=%d', 'ops', 3)\n"
        "logging.getLogger('httpx').info('HTTP Request: GET https://example.org/?q=zebra')\n"
        "logging.getLogger('sift').warning('tavily: missing key')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    lines = done.stderr.splitlines()
    assert len(lines) == 2, done.stderr
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"
    assert re.fullmatch(stamp + r" INFO search caller=ops n=3", lines[0])
    assert re.fullmatch(stamp + r" WARNING tavily: missing key", lines[1])


@pytest.fixture
def served() -> Iterator[tuple[BatchedStderrHandler, Recording]]:
    """The root logger exactly as `sift serve` configures it, into a recording stream."""
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    root.handlers = []
    from siftlib.logs import configure_logging

    configure_logging()
    handler = root.handlers[0]
    assert isinstance(handler, BatchedStderrHandler)
    stream = Recording()
    handler.stream = stream
    yield handler, stream
    handler.close()
    root.handlers, root.level = saved, level


def test_a_served_line_skips_the_record_and_reads_as_one(
    served: tuple[BatchedStderrHandler, Recording], monkeypatch: pytest.MonkeyPatch
) -> None:
    from siftlib.lazylog import LazyLogger
    from siftlib.logs import direct_sink

    handler, stream = served
    monkeypatch.setattr(logging.getLogger(), "handlers", [handler])  # no pytest capture
    made: list[logging.LogRecord] = []
    original = logging.Logger.makeRecord
    monkeypatch.setattr(
        logging.Logger, "makeRecord", lambda *a, **k: made.append(original(*a, **k)) or made[-1]
    )
    assert direct_sink(logging.getLogger("sift.direct"), logging.INFO) is handler
    LazyLogger("sift.direct").info("search caller=%s n=%d", "ops", 3)
    handler.flush()
    assert made == []
    line = stream.getvalue()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO search caller=ops n=3\n", line)
    assert direct_sink(logging.getLogger("sift.direct"), logging.DEBUG) is None  # dropped


@pytest.mark.parametrize("change", ["handler filter", "logger filter", "format", "second handler"])
def test_anything_else_on_the_way_gets_the_record(
    served: tuple[BatchedStderrHandler, Recording], change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from siftlib.lazylog import LazyLogger
    from siftlib.logs import direct_sink

    handler, stream = served
    monkeypatch.setattr(logging.getLogger(), "handlers", [handler])  # no pytest capture
    assert direct_sink(logging.getLogger("sift.direct"), logging.INFO) is handler
    seen: list[str] = []
    logger = logging.getLogger("sift.direct")
    other = logging.Handler()
    other.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    noted = lambda record: seen.append(record.getMessage()) or True  # noqa: E731
    if change == "handler filter":
        handler.addFilter(noted)
    elif change == "logger filter":
        logger.addFilter(noted)
    elif change == "format":
        handler.setFormatter(logging.Formatter("%(message)s"))
    else:
        logging.getLogger().addHandler(other)
    try:
        assert direct_sink(logger, logging.INFO) is None
        LazyLogger("sift.direct").info("n=%d", 1)
        handler.flush()
        assert stream.getvalue().endswith("n=1\n")
        assert seen == ([] if change == "format" else ["n=1"])
    finally:
        handler.filters.clear()
        logger.filters.clear()
        logging.getLogger().removeHandler(other)
