"""Test kit for the browser: one real headless Chromium behind a fetcher with one pinhole.

    with rendering(site) as fetch:        # a Fetcher whose [fetch.browser] is on
        result = fetch.fetch(FetchRequest(url=site.url + "/app", render=True))

The browser is the one `executable = "auto"` starts: the Debian package
`chromium-headless-shell` where it is installed, else `chromium` (which `make test` installs);
without either the tests fail (they are the browser's only proof), naming the package.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Callable

import pytest

from siftlib.config import BrowserConfig, FetchConfig
from siftlib.fetch.browser.renderer import BROWSERS, browser_command
from siftlib.fetch.fetcher import Fetcher
from siftlib.metrics import Metrics
from siftlib.net.addresses import Resolver
from siftlib.net.dial import Connector


def need_chromium() -> None:
    """Fail the test when no browser is installed: `make test` installs one."""
    if shutil.which(browser_command("auto")) is None:
        pytest.fail(
            f"no browser: `make test` installs one (Debian package {' or '.join(BROWSERS)})"
        )


def rendering(
    *allow: str,
    timeout: float = 40.0,
    render: str = "auto",
    metrics: Metrics | None = None,
    resolver: Resolver | None = None,
    connect: Connector | None = None,
    **browser: object,
) -> Fetcher:
    """Return a fetcher with the browser on, its pinholes exactly `allow`."""
    need_chromium()
    settings = FetchConfig(
        allow=allow,
        timeout=timeout,
        browser=BrowserConfig(enabled=True, render=render, **browser),  # type: ignore[arg-type]
    )
    return Fetcher(settings, metrics=metrics, resolver=resolver, connect=connect)


def mapped(public: str, to: str) -> Callable[[tuple[str, int], float | None], socket.socket]:
    """Return a connector that dials `to` where the guard pinned `public` (a fake public host)."""

    def connect(address: tuple[str, int], timeout: float | None) -> socket.socket:
        host, port = address
        return socket.create_connection((to if host == public else host, port), timeout=timeout)

    return connect
