"""The MCP protocol layer on real pipes: framing, both eras, errors, concurrency, cancellation."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from typing import IO, Any

import pytest

from siftlib.mcp import protocol
from siftlib.mcp.protocol import ArgumentError, Server, ServerInfo, Tool, ToolResult

MODERN = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _check(arguments: object) -> dict[str, Any]:
    if not isinstance(arguments, dict) or set(arguments) - {"text"}:
        raise ArgumentError("Invalid arguments: only 'text' is known.")
    return dict(arguments)


class Tools:
    """Test tools: `echo` answers at once, `block` waits for its gate or its cancel event."""

    def __init__(self) -> None:
        self.gates: dict[str, threading.Event] = {}
        self.started: dict[str, threading.Event] = {}
        self.saw_cancel: dict[str, bool] = {}

    def gate(self, text: str) -> threading.Event:
        return self.gates.setdefault(text, threading.Event())

    def begun(self, text: str) -> threading.Event:
        return self.started.setdefault(text, threading.Event())

    def echo(self, arguments: dict[str, Any], cancel: threading.Event) -> ToolResult:
        return ToolResult(arguments.get("text", ""), {"text": arguments.get("text", "")})

    def block(self, arguments: dict[str, Any], cancel: threading.Event) -> ToolResult:
        text = arguments["text"]
        self.begun(text).set()
        while not self.gate(text).wait(0.01):
            if cancel.is_set():
                self.saw_cancel[text] = True
                return ToolResult("stopped")
        return ToolResult(text)

    def boom(self, arguments: dict[str, Any], cancel: threading.Event) -> ToolResult:
        raise RuntimeError("the tool broke at https://example.org/private?token=s3cret")

    def all(self) -> list[Tool]:
        return [
            Tool(
                name=name,
                title=name.title(),
                description=f"The {name} test tool.",
                input_schema={"type": "object", "additionalProperties": False},
                output_schema={"type": "object"},
                annotations={"readOnlyHint": True},
                run=getattr(self, name),
                check=_check,
            )
            for name in ("echo", "block", "boom")
        ]


class Peer:
    """The client end of a server running on a thread over two OS pipes."""

    def __init__(self, tools: Tools, *, workers: int = 4) -> None:
        in_read, in_write = os.pipe()
        out_read, out_write = os.pipe()
        self._to_server: IO[bytes] = os.fdopen(in_write, "wb")
        self._from_server: IO[bytes] = os.fdopen(out_read, "rb")
        server_in, server_out = os.fdopen(in_read, "rb"), os.fdopen(out_write, "wb")
        self.server = Server(tools.all, info=ServerInfo("sift", "9.9", "sift", "Use it."))
        self.server.workers = workers
        self.code: int | None = None

        def serve() -> None:
            self.code = self.server.serve(server_in, server_out)
            with contextlib.suppress(BrokenPipeError):  # the client may have stopped reading
                server_out.close()
            server_in.close()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()

    def send_raw(self, line: bytes) -> None:
        self._to_server.write(line + b"\n")
        self._to_server.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps({"jsonrpc": "2.0", **message}).encode())

    def read(self) -> dict[str, Any]:
        line = self._from_server.readline()
        assert line.endswith(b"\n"), line
        answer: dict[str, Any] = json.loads(line)
        return answer

    def request(self, method: str, params: dict[str, Any] | None = None, id: Any = 1) -> Any:
        message: dict[str, Any] = {"id": id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.read()

    def close(self) -> list[dict[str, Any]]:
        """Close stdin; return what the server still wrote before ending."""
        self._to_server.close()
        rest = [json.loads(line) for line in self._from_server]
        self.thread.join(10)
        self._from_server.close()
        return rest


@pytest.fixture
def tools() -> Tools:
    return Tools()


@pytest.fixture
def peer(tools: Tools) -> Iterator[Peer]:
    running = Peer(tools)
    yield running
    if not running._to_server.closed:
        for gate in tools.gates.values():
            gate.set()
        running.close()


def call(name: str, text: str, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": {"text": text}}
    if meta is not None:
        params["_meta"] = meta
    return params


# Legacy era


@pytest.mark.parametrize("version", protocol.LEGACY_VERSIONS)
def test_initialize_answers_with_the_clients_legacy_version(peer: Peer, version: str) -> None:
    answer = peer.request("initialize", {"protocolVersion": version, "capabilities": {}})
    assert answer["id"] == 1
    result = answer["result"]
    assert result["protocolVersion"] == version
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["serverInfo"] == {"name": "sift", "version": "9.9", "title": "sift"}
    assert result["instructions"] == "Use it."
    assert "resultType" not in result


@pytest.mark.parametrize("version", ["2023-01-01", "2026-07-28", None])
def test_initialize_with_an_unknown_version_gets_the_newest_legacy_one(
    peer: Peer, version: str | None
) -> None:
    answer = peer.request("initialize", {"protocolVersion": version, "capabilities": {}})
    assert answer["result"]["protocolVersion"] == "2025-11-25"


def test_legacy_session_lists_tools_pings_and_calls(peer: Peer) -> None:
    peer.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})
    peer.send({"method": "notifications/initialized"})
    assert peer.request("ping", id=2) == {"jsonrpc": "2.0", "id": 2, "result": {}}
    listing = peer.request("tools/list", id=3)["result"]
    assert [tool["name"] for tool in listing["tools"]] == ["echo", "block", "boom"]
    assert listing["tools"][0] == {
        "name": "echo",
        "title": "Echo",
        "description": "The echo test tool.",
        "inputSchema": {"type": "object", "additionalProperties": False},
        "outputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
    }
    assert "ttlMs" not in listing and "resultType" not in listing
    answer = peer.request("tools/call", call("echo", "hi"), id="c1")
    assert answer == {
        "jsonrpc": "2.0",
        "id": "c1",
        "result": {
            "content": [{"type": "text", "text": "hi"}],
            "structuredContent": {"text": "hi"},
            "isError": False,
        },
    }


# Stateless era (2026-07-28)


def test_discover_lists_versions_capabilities_identity_and_cache_hints(peer: Peer) -> None:
    result = peer.request("server/discover", {"_meta": MODERN})["result"]
    assert result["resultType"] == "complete"
    assert result["supportedVersions"][0] == "2026-07-28"
    assert set(protocol.LEGACY_VERSIONS) <= set(result["supportedVersions"])
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "sift"
    assert result["ttlMs"] > 0
    assert result["cacheScope"] == "public"


def test_discover_without_an_envelope_still_answers_in_the_stateless_shape(peer: Peer) -> None:
    result = peer.request("server/discover")["result"]
    assert result["resultType"] == "complete" and result["ttlMs"] > 0
    assert "2026-07-28" in result["supportedVersions"]


def test_stateless_requests_need_no_initialize(peer: Peer) -> None:
    listing = peer.request("tools/list", {"_meta": MODERN})["result"]
    assert listing["resultType"] == "complete"
    assert listing["ttlMs"] > 0 and listing["cacheScope"] == "public"
    assert len(listing["tools"]) == 3
    result = peer.request("tools/call", call("echo", "yo", MODERN), id=2)["result"]
    assert result["resultType"] == "complete"
    assert result["structuredContent"] == {"text": "yo"}
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["version"] == "9.9"


@pytest.mark.parametrize("method", ["tools/list", "server/discover", "tools/call"])
def test_an_unsupported_version_is_32022_naming_supported_and_requested(
    peer: Peer, method: str
) -> None:
    meta = {**MODERN, "io.modelcontextprotocol/protocolVersion": "1900-01-01"}
    error = peer.request(method, {"name": "echo", "_meta": meta}, id=7)["error"]
    assert error["code"] == -32022
    assert error["data"] == {
        "supported": list(protocol.SUPPORTED_VERSIONS),
        "requested": "1900-01-01",
    }


def test_a_handshake_version_in_the_envelope_is_served_as_legacy(peer: Peer) -> None:
    meta = {**MODERN, "io.modelcontextprotocol/protocolVersion": "2025-06-18"}
    listing = peer.request("tools/list", {"_meta": meta})["result"]
    assert "resultType" not in listing and len(listing["tools"]) == 3


@pytest.mark.parametrize(
    "meta",
    [
        {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
        {**MODERN, "io.modelcontextprotocol/clientCapabilities": None},
        {**MODERN, "io.modelcontextprotocol/protocolVersion": 20260728},
    ],
)
def test_a_broken_envelope_is_invalid_params(peer: Peer, meta: dict[str, Any]) -> None:
    assert peer.request("tools/list", {"_meta": meta})["error"]["code"] == -32602


# Faults: the server answers and goes on


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"this is not json", -32700),
        (b"[" * 30_000, -32700),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": ' + b"[" * 30_000, -32700),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', -32700),
        (b"\xff\xfe garbage", -32700),
        (b"[1, 2]", -32600),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', -32600),
        (b"42", -32600),
        (b'{"id": 1, "method": "ping"}', -32600),
        (b'{"jsonrpc": "2.0", "id": 1}', -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": 5}', -32600),
        (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}', -32602),
    ],
)
def test_garbage_gets_a_json_rpc_error_and_the_server_goes_on(
    peer: Peer, line: bytes, code: int
) -> None:
    peer.send_raw(line)
    error = peer.read()
    assert error["error"]["code"] == code
    assert error["id"] in (None, 1)
    assert peer.request("ping", id=99)["result"] == {}


def test_an_oversized_line_is_refused_unread(tools: Tools, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protocol, "MAX_LINE_BYTES", 64)
    peer = Peer(tools)
    pad = b"x" * 200
    peer.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"p": "' + pad + b'"}}')
    assert peer.read() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error: the message is too large"},
    }
    assert peer.request("ping", id=2)["result"] == {}
    assert peer.close() == []


def test_an_unknown_method_is_32601(peer: Peer) -> None:
    error = peer.request("resources/list", {}, id="r")
    assert error["id"] == "r" and error["error"]["code"] == -32601


def test_notifications_and_responses_get_no_reply(peer: Peer) -> None:
    peer.send({"method": "notifications/whatever", "params": {}})
    peer.send({"method": "notifications/cancelled", "params": {"requestId": "nobody"}})
    peer.send({"id": 5, "result": {}})
    peer.send({"method": "notifications/initialized"})
    assert peer.request("ping", id="after") == {"jsonrpc": "2.0", "id": "after", "result": {}}
    assert peer.close() == []


def test_blank_lines_are_skipped(peer: Peer) -> None:
    peer.send_raw(b"   ")
    peer.send_raw(b"")
    assert peer.request("ping", id=1)["result"] == {}


def test_an_unknown_tool_is_invalid_params(peer: Peer) -> None:
    assert peer.request("tools/call", call("nope", "x"))["error"]["code"] == -32602


def test_bad_arguments_are_a_tool_error_not_a_protocol_error(peer: Peer) -> None:
    answer = peer.request("tools/call", {"name": "echo", "arguments": {"what": 1}})
    assert answer["result"]["isError"] is True
    assert answer["result"]["content"] == [
        {"type": "text", "text": "Invalid arguments: only 'text' is known."}
    ]


def test_a_tool_that_raises_is_a_tool_error(peer: Peer, caplog: pytest.LogCaptureFixture) -> None:
    result = peer.request("tools/call", call("boom", "x"))["result"]
    assert result["isError"] is True
    assert "the tool broke" not in result["content"][0]["text"]
    assert "boom failed (RuntimeError)" in caplog.text
    assert "s3cret" not in caplog.text and "example.org" not in caplog.text


# Concurrency and cancellation


def test_calls_run_concurrently_and_answer_out_of_order(peer: Peer, tools: Tools) -> None:
    peer.send({"id": "slow", "method": "tools/call", "params": call("block", "a")})
    assert tools.begun("a").wait(10)
    peer.send({"id": "fast", "method": "tools/call", "params": call("echo", "b")})
    assert peer.read()["id"] == "fast"
    tools.gate("a").set()
    assert peer.read() == {
        "jsonrpc": "2.0",
        "id": "slow",
        "result": {"content": [{"type": "text", "text": "a"}], "isError": False},
    }


def test_a_cancelled_call_stops_and_is_never_answered(peer: Peer, tools: Tools) -> None:
    peer.send({"id": 1, "method": "tools/call", "params": call("block", "a")})
    assert tools.begun("a").wait(10)
    peer.send({"method": "notifications/cancelled", "params": {"requestId": 1, "reason": "x"}})
    assert peer.request("ping", id=2)["id"] == 2
    rest = peer.close()
    assert tools.saw_cancel == {"a": True}
    assert rest == []


def test_cancel_matches_the_id_exactly(peer: Peer, tools: Tools) -> None:
    peer.send({"id": 1, "method": "tools/call", "params": call("block", "a")})
    assert tools.begun("a").wait(10)
    peer.send({"method": "notifications/cancelled", "params": {"requestId": "1"}})
    tools.gate("a").set()
    assert peer.read()["id"] == 1
    assert tools.saw_cancel == {}


def test_a_second_call_with_an_id_in_flight_is_refused(peer: Peer, tools: Tools) -> None:
    peer.send({"id": 7, "method": "tools/call", "params": call("block", "a")})
    assert tools.begun("a").wait(10)
    peer.send({"id": 7, "method": "tools/call", "params": call("echo", "b")})
    refused = peer.read()
    assert refused["id"] == 7 and refused["error"]["code"] == -32600
    assert "in flight" in refused["error"]["message"]
    tools.gate("a").set()
    assert peer.read()["result"]["content"][0]["text"] == "a"
    # Once answered, the id may be used again.
    assert peer.request("tools/call", id=7, params=call("echo", "c"))["result"]["isError"] is False


def test_a_queued_call_cancelled_never_starts(tools: Tools) -> None:
    peer = Peer(tools, workers=1)
    peer.send({"id": 1, "method": "tools/call", "params": call("block", "first")})
    assert tools.begun("first").wait(10)
    peer.send({"id": 2, "method": "tools/call", "params": call("block", "second")})
    peer.send({"method": "notifications/cancelled", "params": {"requestId": 2}})
    assert peer.request("ping", id=3)["id"] == 3
    tools.gate("first").set()
    tools.gate("second").set()
    assert [answer["id"] for answer in peer.close()] == [1]
    assert "second" not in tools.started
    assert peer.server._calls == {}


def test_end_of_input_drains_calls_in_flight_then_returns_0(peer: Peer, tools: Tools) -> None:
    peer.send({"id": 1, "method": "tools/call", "params": call("block", "a")})
    assert tools.begun("a").wait(10)
    peer._to_server.close()
    tools.gate("a").set()
    rest = [json.loads(line) for line in peer._from_server]
    peer.thread.join(10)
    assert [answer["id"] for answer in rest] == [1]
    assert peer.code == 0


def test_a_client_that_stops_reading_only_loses_its_answers(tools: Tools) -> None:
    peer = Peer(tools)
    peer._from_server.close()
    peer.send({"id": 1, "method": "ping"})
    peer.send({"id": 2, "method": "tools/call", "params": call("echo", "x")})
    peer._to_server.close()
    peer.thread.join(10)
    assert peer.code == 0


def test_a_fault_inside_the_server_answers_32603_and_it_goes_on(
    tools: Tools, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> list[Tool]:
        raise OSError("cannot read /home/someone/.config/sift/config.toml")

    peer = Peer(tools)
    peer.server._list_tools = broken
    answer = peer.request("tools/list", {}, id=1)
    assert answer == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32603, "message": "Internal error"},
    }
    assert peer.request("ping", id=2)["result"] == {}
    assert peer.close() == []
    assert "tools/list failed (OSError)" in caplog.text and "someone" not in caplog.text


class Recorder:
    """A stdout that records each write call."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.writes.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass


def echo(i: int) -> dict[str, Any]:
    return call("echo", "é" * i)


def test_each_message_is_one_whole_line_in_one_write(tools: Tools) -> None:
    server = Server(tools.all, info=ServerInfo("sift", "1"), workers=8)
    lines = [
        json.dumps(
            {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": call("echo", "é" * i)}
        )
        for i in range(40)
    ]
    stdin_read, stdin_write = os.pipe()
    with os.fdopen(stdin_write, "wb") as feed:
        feed.write(("\n".join(lines) + "\n").encode())
    out = Recorder()
    with os.fdopen(stdin_read, "rb") as stdin:
        assert server.serve(stdin, out) == 0  # type: ignore[arg-type]
    assert len(out.writes) == 40
    answers = [json.loads(write) for write in out.writes]
    assert all(write.endswith(b"\n") and write.count(b"\n") == 1 for write in out.writes)
    assert sorted(answer["id"] for answer in answers) == list(range(40))
    assert all(a["result"]["content"][0]["text"] == "é" * a["id"] for a in answers)
