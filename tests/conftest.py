"""Shared fixtures: a scrubbed environment, so no developer setting leaks into a test.

Tests of real recorded data take the `realdata` fixture: `../shared/realdata` beside the
clone (or `$SIFT_REALDATA`, read at start), skipped with the reason when it is absent. Such
tests carry the `realdata` marker, so `pytest -m realdata` runs exactly them.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from bodykit import fixture_bytes
from gatewaykit import FakeUpstream
from pytest_httpserver import HTTPServer

if TYPE_CHECKING:
    from rediskit import RedisServer

from siftlib.net import dial

REALDATA = Path(
    os.environ.get("SIFT_REALDATA") or Path(__file__).resolve().parents[2] / "shared" / "realdata"
)

_PREFIXES = (
    "SIFT_",
    "BRAVE_",
    "TAVILY_",
    "TYPESAFE_",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
)


_HOMES = itertools.count()


@pytest.fixture(autouse=True, scope="session")
def conversion_workers(request: pytest.FixtureRequest) -> None:
    """Start this test process's conversion workers once, before any test's fetch deadline.

    A worker's first imports take a second, many on a loaded machine: a cold start must not
    turn a test's short fetch deadline into a 408. A run of only `realdata` tests (the child
    pytest of test_realdata.py) converts no page and starts none.
    """
    if all(item.get_closest_marker("realdata") for item in request.session.items):
        return
    from gatewaykit import warm_conversion_pool

    warm_conversion_pool()


@pytest.fixture(autouse=True)
def clean_environ(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Drop sift, provider and proxy variables; point `~` and the platformdirs homes at a
    fresh path, so the developer's own config and skills never join a test.

    The path is new for each test but not created: sift makes the folders it writes to, and the
    few tests that write there leave files; a folder made for each of 2,600 tests cost seconds
    on a slow disk, to make and again to delete.
    """
    saved = dict(os.environ)
    for key in list(os.environ):
        if key.upper().startswith(_PREFIXES):
            del os.environ[key]
    home = tmp_path_factory.getbasetemp() / "homes" / str(next(_HOMES))
    os.environ["HOME"] = str(home / "home")
    os.environ["XDG_CONFIG_HOME"] = str(home / "config")
    os.environ["XDG_STATE_HOME"] = str(home / "state")
    os.environ["XDG_CACHE_HOME"] = str(home / "cache")
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture
def user_home() -> Path:
    """This test's fresh `~`, which `clean_environ` set; not created."""
    return Path(os.environ["HOME"])


@pytest.fixture(autouse=True)
def fresh_process_banner(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let each test see the once-per-process `--allow-private-upstreams` banner afresh."""
    monkeypatch.setattr(dial, "_banner_shown", False)


# What `configure_logging` changes process-wide; a test running `sift serve` or `sift mcp`
# in-process must not leave a later test in the same worker without caller lookup.
_LOGGING_FLAGS = ("logThreads", "logProcesses", "logMultiprocessing", "_srcfile")
_LOGGER_NAMES = ("", "httpx", "httpcore")


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """Put back logging's module-wide switches and the levels sift sets, after each test."""
    flags = {flag: getattr(logging, flag) for flag in _LOGGING_FLAGS}
    levels = {name: logging.getLogger(name).level for name in _LOGGER_NAMES}
    yield
    for flag, value in flags.items():
        setattr(logging, flag, value)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


class _QuickHTTPServer(HTTPServer):
    """pytest-httpserver's server, looking for `stop()` every 0.05 s rather than every 0.5 s."""

    def thread_target(self) -> None:
        assert self.server is not None
        self.server.serve_forever(poll_interval=0.05)


@pytest.fixture(scope="session")
def shared_httpserver() -> Iterator[HTTPServer]:
    """One threaded fake-upstream server for the whole run: stopping one cost ~0.5 s."""
    server = _QuickHTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    yield server
    server.clear()
    if server.is_running():
        server.stop()


@pytest.fixture
def httpserver(shared_httpserver: HTTPServer) -> Iterator[HTTPServer]:
    """A fake upstream on 127.0.0.1 that answers concurrent requests, as real providers do.

    The session's server, cleared before and after each test (handlers, log, assertions), as
    pytest-httpserver recommends over a server per test.
    """
    shared_httpserver.clear()
    yield shared_httpserver
    shared_httpserver.clear()


@pytest.fixture
def searxng() -> Iterator[FakeUpstream]:
    """A SearXNG fake answering every request with a recorded-shape fixture."""
    fake = FakeUpstream(fixture_bytes("searxng/wal-typed-and-legacy.json"))
    yield fake
    fake.close()


@pytest.fixture
def tavily() -> Iterator[FakeUpstream]:
    """A Tavily fake answering every request with a recorded-shape fixture."""
    fake = FakeUpstream(fixture_bytes("tavily/wal-usage-unsorted.json"))
    yield fake
    fake.close()


@pytest.fixture
def realdata() -> Path:
    """The real recorded provider data; the test is skipped when it is absent."""
    if not REALDATA.is_dir():
        pytest.skip(f"no real data at {REALDATA} (../shared/realdata beside the clone)")
    return REALDATA


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> Iterator[None]:
    """Mark every test that reads the real data `realdata` (before `-m` selects); then, of
    what was selected, keep the `one_worker` modules whole."""
    for item in items:
        if "realdata" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.realdata)
    result = yield
    items[:] = one_worker_first(items, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")))
    return result


def one_worker_first(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """Order the run so each `one_worker` module heads one worker's first share, whole.

    xdist's worksteal gives the i-th worker the i-th contiguous share of the run (the items
    left over the workers left), and an idle worker later steals the second half of the
    longest queue: a module at the head of a share runs there before anyone steals. Split
    over several workers, a browser module launched a browser on each.
    """
    if workers < 2:
        return items
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    whole: list[list[pytest.Item]] = []
    rest: list[pytest.Item] = []
    for tests in modules.values():
        if tests[0].get_closest_marker("one_worker"):
            whole.append(tests)
        else:
            rest += tests
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for index, tests in enumerate(whole):
        shares[index % workers] += tests
    ordered: list[pytest.Item] = []
    for index, share in enumerate(shares):
        size = (len(items) - len(ordered)) // (workers - index)
        fill = max(size - len(share), 0)
        ordered += share + rest[:fill]
        del rest[:fill]
    return ordered + rest


@pytest.fixture
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real redis-server of the test's own on a free loopback port, stopped by pid after."""
    from rediskit import RedisServer  # the redis client is not in the MCP SDK venvs

    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()
