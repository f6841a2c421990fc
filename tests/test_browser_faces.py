"""A script-built page reads as its content through every face: `/v2/scrape`, `/v1/fetch`,
`sift fetch` and MCP `web_fetch`, with `[fetch.browser]` on; with it off nothing changes."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from browserkit import need_chromium
from fetchkit import Listener, PageServer, page
from gatewaykit import Gateway, call, gateway

from siftlib.cli import main
from siftlib.config import BrowserConfig, FetchConfig

pytestmark = pytest.mark.one_worker  # a browser or gateways for the module

TOKEN = "browser-face-token"
BUILT = b"""<!doctype html><html><head><title>Script app</title></head><body>
<div id="app"></div><script>
document.getElementById('app').innerHTML = '<article><h1>Built in the browser</h1><p>' +
  'Only a browser sees this sentence. '.repeat(12) + '</p></article>';
</script></body></html>"""
PLAIN = (
    b"<html><head><title>Plain</title></head><body><article><p>"
    + b"Plain words for a plain page. " * 20
    + b"</p></article></body></html>"
)
SHOWN = "Only a browser sees this sentence."


@pytest.fixture(scope="module")
def site() -> Iterator[PageServer]:
    with PageServer({"/app": page(BUILT), "/plain": page(PLAIN)}) as server:
        yield server


def browser_gateway(directory: Path, site: PageServer) -> Iterator[Gateway]:
    need_chromium()
    fetch = FetchConfig(allow=(site.allow,), timeout=40.0, browser=BrowserConfig(enabled=True))
    with gateway(directory, callers={"agent": TOKEN}, fetch=fetch) as running:
        yield running


@pytest.fixture(scope="module")
def started(
    tmp_path_factory: pytest.TempPathFactory, site: PageServer
) -> Iterator[tuple[Gateway, dict[str, object]]]:
    """One gateway with the browser on, and what its /healthz said before its first render."""
    for running in browser_gateway(tmp_path_factory.mktemp("browsing"), site):
        yield running, call(running.url, "GET", "/healthz").json


@pytest.fixture(scope="module")
def browsing(started: tuple[Gateway, dict[str, object]]) -> Gateway:
    """The gateway of `started`, for the tests that only read what it answers."""
    return started[0]


@pytest.fixture
def static(tmp_path: Path, site: PageServer) -> Iterator[Gateway]:
    fetch = FetchConfig(allow=(site.allow,), timeout=20.0)
    with gateway(tmp_path, callers={"agent": TOKEN}, fetch=fetch) as running:
        yield running


def test_v2_scrape_renders_waits_and_takes_a_screenshot(
    browsing: Gateway, site: PageServer
) -> None:
    body = {"url": site.url + "/app", "waitFor": 300, "formats": ["markdown", "screenshot"]}
    reply = call(browsing.url, "POST", "/v2/scrape", body, token=TOKEN, timeout=60)
    assert reply.status == 200
    data = reply.json["data"]
    assert SHOWN in data["markdown"]
    assert data["screenshot"].startswith("data:image/png;base64,")
    assert base64.b64decode(data["screenshot"].split(",", 1)[1]).startswith(b"\x89PNG")
    assert data["metadata"]["rendered"] is True
    assert isinstance(data["metadata"]["renderMs"], int)
    assert data["metadata"]["statusCode"] == 200


def test_v1_fetch_render_false_reads_the_static_shell(browsing: Gateway, site: PageServer) -> None:
    asked = {"url": site.url + "/app", "render": False}
    reply = call(browsing.url, "POST", "/v1/fetch", asked, token=TOKEN, timeout=60)
    assert reply.status == 200
    assert SHOWN not in reply.json["content"]
    assert "rendered" not in reply.json
    rendered = call(
        browsing.url, "POST", "/v1/fetch", {"url": site.url + "/app"}, token=TOKEN, timeout=60
    )
    assert SHOWN in rendered.json["content"]
    assert rendered.json["rendered"] is True
    assert rendered.json["timings"]["render_ms"] > 0


def test_a_refused_navigation_is_a_400_blocked(browsing: Gateway, site: PageServer) -> None:
    with Listener() as idle:
        site.routes["/away"] = page(
            f"<html><body><script>location = 'http://127.0.0.1:{idle.port}/';</script>".encode()
        )
        reply = call(
            browsing.url,
            "POST",
            "/v2/scrape",
            {"url": site.url + "/away"},
            token=TOKEN,
            timeout=60,
        )
    assert reply.status == 400
    assert reply.json["code"] == "blocked"
    assert reply.json["error"].startswith("blocked: 127.0.0.1 is a loopback address")
    assert idle.connections == 0


def test_healthz_and_metrics_speak_of_the_browser(
    started: tuple[Gateway, dict[str, object]], site: PageServer
) -> None:
    running, health = started
    assert health["browser"] == {"available": True, "running": False}
    before = call(running.url, "GET", "/metrics", token=TOKEN).json.get("browser_renders", 0)
    call(running.url, "POST", "/v1/fetch", {"url": site.url + "/app"}, token=TOKEN, timeout=60)
    assert call(running.url, "GET", "/healthz").json["browser"]["running"] is True
    metrics = call(running.url, "GET", "/metrics", token=TOKEN).json
    assert metrics["browser_renders"] == before + 1


def test_healthz_is_degraded_when_the_browser_is_missing(tmp_path: Path) -> None:
    missing = BrowserConfig(enabled=True, executable="no-such-chromium-here")
    with gateway(tmp_path, fetch=FetchConfig(browser=missing)) as running:
        health = call(running.url, "GET", "/healthz").json
    assert health["browser"]["available"] is False
    assert "browser: no-such-chromium-here is not installed" in " ".join(health["degraded"])


def test_with_the_browser_off_waitfor_never_slows_a_page(static: Gateway, site: PageServer) -> None:
    started = time.monotonic()
    body = {"url": site.url + "/plain", "waitFor": 3000}
    reply = call(static.url, "POST", "/v2/scrape", body, token=TOKEN)
    assert time.monotonic() - started < 3.0
    assert reply.status == 200
    assert "rendered" not in reply.json["data"]["metadata"]
    assert "browser" not in call(static.url, "GET", "/healthz").json
    shot = {"url": site.url + "/plain", "formats": ["screenshot"]}
    refused = call(static.url, "POST", "/v2/scrape", shot, token=TOKEN)
    assert refused.status == 400
    assert refused.json["error"] == "unsupported option: screenshot"


@pytest.mark.parametrize(
    ("route", "body", "error"),
    [
        (
            "/v2/scrape",
            {"waitFor": "3s"},
            "invalid request: waitFor must be a number of milliseconds",
        ),
        (
            "/v2/scrape",
            {"waitFor": -1},
            "invalid request: waitFor must be a number of milliseconds",
        ),
        ("/v1/fetch", {"render": "yes"}, "invalid request: render must be true or false"),
    ],
)
def test_bad_render_options_are_400(
    static: Gateway, site: PageServer, route: str, body: dict[str, object], error: str
) -> None:
    reply = call(static.url, "POST", route, {"url": site.url + "/plain", **body}, token=TOKEN)
    assert reply.status == 400
    assert reply.json["error"] == error


def write_config(tmp_path: Path, site: PageServer) -> str:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[fetch]\nallow = ["{site.allow}"]\ntimeout = "40s"\n\n[fetch.browser]\nenabled = true\n'
    )
    return str(path)


def test_sift_fetch_reads_a_script_built_page(
    tmp_path: Path, site: PageServer, capsys: pytest.CaptureFixture[str]
) -> None:
    need_chromium()
    code = main(["fetch", site.url + "/app", "--json", "--config", write_config(tmp_path, site)])
    out = capsys.readouterr().out
    assert code == 0
    envelope = json.loads(out)
    assert SHOWN in envelope["content"]
    assert envelope["rendered"] is True


def test_mcp_web_fetch_reads_a_script_built_page(tmp_path: Path, site: PageServer) -> None:
    from siftlib.mcp.tools import SkillsPlace, Toolbox, Where

    need_chromium()
    where = Where(
        config=write_config(tmp_path, site), server=None, local=False, allow_private_upstreams=True
    )
    toolbox = Toolbox(where, skills=SkillsPlace(skills_dirs=(), cwd=tmp_path))
    try:
        tool = {tool.name: tool for tool in toolbox.tools()}["web_fetch"]
        result = tool.run(tool.check({"url": site.url + "/app"}), threading.Event())
    finally:
        toolbox.close()
    assert result.is_error is False
    assert SHOWN in result.text
