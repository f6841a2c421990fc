"""Lazy loggers: `logging` is imported only for a record that can be shown, as it was shown."""

from __future__ import annotations

import subprocess
import sys

import pytest

from siftlib.lazylog import LazyLogger

PROBE = """
import sys
from siftlib.lazylog import LazyLogger, configure_cli_later
configure_cli_later("sift.quiet")
LazyLogger("sift").info("an info line nobody is shown")
print("logging imported after INFO:", "logging" in sys.modules)
LazyLogger("sift.quiet").warning("a quiet warning")
LazyLogger("sift").warning("a warning with %s", "arguments")
LazyLogger("sift").info("an info line, logging imported")
print("logging imported after WARNING:", "logging" in sys.modules)
"""


def test_info_imports_nothing_and_a_warning_is_shown_in_the_cli_format() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "logging imported after INFO: False",
        "logging imported after WARNING: True",
    ]
    assert done.stderr == "sift: a warning with arguments\n"


def test_a_lazy_logger_is_the_named_logger_once_logging_is_imported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("INFO", logger="sift.test-lazylog"):
        LazyLogger("sift.test-lazylog").info("n=%d", 3)
        LazyLogger("sift.test-lazylog").warning("careful")
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("sift.test-lazylog", "INFO", "n=3"),
        ("sift.test-lazylog", "WARNING", "careful"),
    ]
    assert (
        caplog.records[0].funcName
        == "test_a_lazy_logger_is_the_named_logger_once_logging_is_imported"
    )
