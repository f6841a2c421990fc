"""`sift mcp` as a process: stdio wiring, stdout kept for the protocol, exit 0 at end of input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from bodykit import fixture_bytes
from gatewaykit import FakeUpstream, write_config

CATALOG = Path(__file__).resolve().parents[1] / "testdata" / "skills" / "catalog"
SIFT = Path(sys.executable).parent / "sift"

# A tool that prints: the print must land on stderr, never in the protocol stream.
STRAY_PRINT = """
import sys
import siftlib.mcp.tools as tools
search = tools.Toolbox.skill_search
def noisy(self, arguments, cancel):
    print("STRAY OUTPUT")
    return search(self, arguments, cancel)
tools.Toolbox.skill_search = noisy
from siftlib.cli import main
sys.exit(main(sys.argv[1:]))
"""


def lines(*messages: object) -> bytes:
    return b"".join(
        (m if isinstance(m, bytes) else json.dumps(m).encode()) + b"\n" for m in messages
    )


def request(id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params or {}}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    # The default config path (under the scrubbed XDG_CONFIG_HOME) is absent: all defaults.
    return {**os.environ, "HOME": str(tmp_path)}


def test_a_session_over_stdio(env: dict[str, str], tmp_path: Path) -> None:
    stdin = lines(
        request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        request(2, "tools/list"),
        b"not json at all",
        request(3, "tools/call", {"name": "skill_search", "arguments": {"query": "pdf form"}}),
    )
    command = [sys.executable, "-c", STRAY_PRINT, "mcp", "--skills-dir", str(CATALOG)]
    done = subprocess.run(
        command, input=stdin, capture_output=True, env=env, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 0
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert all(answer["jsonrpc"] == "2.0" for answer in answers)
    assert [answer["id"] for answer in answers] == [1, 2, None, 3]
    assert answers[0]["result"]["serverInfo"]["name"] == "sift"
    assert [tool["name"] for tool in answers[1]["result"]["tools"]] == [
        "web_search",
        "web_fetch",
        "skill_search",
    ]
    assert answers[2]["error"]["code"] == -32700
    assert answers[3]["result"]["structuredContent"]["results"][0]["name"] == "pdf-forms"
    assert b"STRAY OUTPUT" in done.stderr
    assert b"Traceback" not in done.stderr


def test_end_of_input_at_once_exits_0_silently(env: dict[str, str], tmp_path: Path) -> None:
    done = subprocess.run(
        [str(SIFT), "mcp"], input=b"", capture_output=True, env=env, cwd=tmp_path, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, b"")


def test_mcp_is_in_the_command_list() -> None:
    done = subprocess.run([str(SIFT), "--help"], capture_output=True, text=True, timeout=60)
    assert "  mcp " in done.stdout


def test_a_cancelled_search_is_never_answered(env: dict[str, str], tmp_path: Path) -> None:
    gate = threading.Event()
    searxng = FakeUpstream(fixture_bytes("searxng/wal-typed-and-legacy.json"), gate=gate)
    env["SIFT_CONFIG"] = str(write_config(tmp_path, searxng=searxng.url, timeout="20s"))
    server = subprocess.Popen(
        [str(SIFT), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=tmp_path,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        search = {"name": "web_search", "arguments": {"query": "sqlite wal"}}
        server.stdin.write(lines(request(7, "tools/call", search)))
        server.stdin.flush()
        while not searxng.calls:  # the search is upstream, held by the gate
            time.sleep(0.01)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
        server.stdin.write(lines({**cancel, "params": {"requestId": 7}}, request(8, "ping")))
        server.stdin.flush()
        assert json.loads(server.stdout.readline()) == {"jsonrpc": "2.0", "id": 8, "result": {}}
        server.stdin.close()
        gate.set()
        assert server.stdout.read() == b""
        assert server.wait(60) == 0
    finally:
        gate.set()
        server.kill()
        server.wait(60)
        server.stdout.close()
        searxng.close()


def test_a_client_that_stops_reading_gets_a_clean_exit(env: dict[str, str], tmp_path: Path) -> None:
    server = subprocess.Popen(
        [str(SIFT), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    assert server.stdin is not None and server.stdout is not None and server.stderr is not None
    server.stdout.close()
    server.stdin.write(lines(request(1, "ping"), request(2, "tools/list")))
    server.stdin.close()
    assert server.wait(60) == 0
    stderr = server.stderr.read()
    server.stderr.close()
    assert b"Traceback" not in stderr and b"Exception ignored" not in stderr


LISTING_PROBE = """
import sys
from siftlib.cli import main
code = main(["mcp"])
heavy = (
    "httpx", "siftlib.search.pipeline", "siftlib.fetch.fetcher", "siftlib.store.sqlite",
    "siftlib.gateway.server", "lxml",
)
sys.stderr.write("HEAVY " + (" ".join(m for m in heavy if m in sys.modules) or "-") + "\\n")
sys.exit(code)
"""


def test_listing_the_tools_imports_no_backend(env: dict[str, str], tmp_path: Path) -> None:
    stdin = lines(
        request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}),
        request(2, "tools/list"),
    )
    done = subprocess.run(
        [sys.executable, "-c", LISTING_PROBE],
        input=stdin,
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0
    assert len(done.stdout.splitlines()) == 2
    assert b"HEAVY -\n" in done.stderr, done.stderr
