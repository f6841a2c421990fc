"""The batched stderr log handler: no I/O on the logging thread, every line once, in order."""

from __future__ import annotations

import io
import logging
import threading
import time
from collections.abc import Iterator

import pytest

from siftlib.logbatch import BatchedStderrHandler


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
    made = logging.getLogger("sift.test-logbatch")
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
