"""The MCP protocol on stdio: JSON-RPC 2.0, one message per line, both protocol eras.

    server = Server(toolbox.tools, info=ServerInfo(name="sift", version="0.1.0"))
    code = server.serve(sys.stdin.buffer, protocol_out)

The reading thread parses each line and answers everything but `tools/call` itself, at once
and in order. Tool calls run on a bounded pool (`workers`); past the bound they wait in the
pool's queue. Every message leaves in one `write` of one line under one lock, so answers to
concurrent calls never interleave, and may be written out of order. End of input drains the
calls already running or queued (a client piping requests then closing stdin still gets its
answers; each tool is bounded by its own deadline), then `serve` returns 0.

Eras, decided per request rather than per process (a dual-era server may serve both):
- A request whose `params._meta` names `io.modelcontextprotocol/protocolVersion` claims the
  stateless revision. `2026-07-28` is served statelessly: `clientCapabilities` must be there
  (else -32602), results carry `resultType: "complete"` and the server's identity in
  `_meta`, `tools/list` and `server/discover` carry `ttlMs` and `cacheScope`. A handshake-era
  version in the envelope is served as legacy; any other version is -32022 with
  `data.supported` (every version served, newest first) and `data.requested`.
- Anything else is legacy. `initialize` answers with the client's version when it is one of
  2024-11-05 … 2025-11-25, else the newest of those. Requests before `initialize` are served
  rather than refused: nothing here depends on the handshake's state.

Decisions where the specs leave room:
- `notifications/cancelled` drops a queued call before it starts, sets a running call's
  cancel event (a tool stops its work where its library can) and drops its answer: a
  cancelled call is never answered. Unknown or finished IDs are ignored.
- A `tools/call` whose id is that of a call still in flight is -32600, and the first call
  runs on: ids name calls for cancellation, so two live calls must never share one.
- A line that is not JSON (or not UTF-8) is -32700; JSON that is not a request, a
  notification or a response (a batch array included: MCP has no batches) is -32600. A line
  over `MAX_LINE_BYTES` is -32700 without being parsed. The server goes on after each.
- Invalid tool arguments are a tool result with `isError` (the model can correct itself, as
  MCP 2025-11-25 asks); an unknown tool name is -32602; a tool that raises is a tool result
  with `isError`, and the log names the exception's type only (its message could carry a
  query or a URL, which logs never do).
- A fault inside the server while answering (not inside a tool) is -32603 for that request
  alone, logged by its exception type; the server goes on.
- `ping` is answered in both eras; `server/discover` without an envelope is answered too,
  in the stateless shape (it exists in no other).
- A client that closes its reading end only loses its answers: the server reads on to the
  end of input and exits 0, as it does when stdin closes.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import IO, Any

log = logging.getLogger("sift.mcp")

LEGACY_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)
SUPPORTED_VERSIONS = tuple(reversed(LEGACY_VERSIONS + MODERN_VERSIONS))
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNSUPPORTED_PROTOCOL_VERSION = -32022

MAX_LINE_BYTES = 4 * 1024 * 1024
LIST_TTL_MS = 3_600_000  # the tool list is fixed for the life of the process


class ProtocolError(Exception):
    """A request the protocol itself refuses: answered with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


@dataclass(frozen=True)
class ToolResult:
    """What a tool call returns: one text block, structured content, and whether it failed."""

    text: str
    structured: Mapping[str, Any] | None = None
    is_error: bool = False

    def to_wire(self) -> dict[str, Any]:
        """Return the `CallToolResult` object."""
        result: dict[str, Any] = {"content": [{"type": "text", "text": self.text}]}
        if self.structured is not None:
            result["structuredContent"] = self.structured
        result["isError"] = self.is_error
        return result


@dataclass(frozen=True)
class Tool:
    """A tool as listed, and the function that runs it with checked arguments."""

    name: str
    title: str
    description: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any]
    annotations: Mapping[str, Any]
    run: Callable[[dict[str, Any], threading.Event], ToolResult] = field(repr=False)
    check: Callable[[object], dict[str, Any]] = field(repr=False)

    def to_wire(self) -> dict[str, Any]:
        """Return the tool's entry in `tools/list`."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
            "annotations": self.annotations,
        }


class ArgumentError(Exception):
    """A tool's arguments do not match its input schema."""


@dataclass(frozen=True)
class ServerInfo:
    """Who the server is, as `initialize` and `server/discover` tell it."""

    name: str
    version: str
    title: str = ""
    instructions: str = ""

    def implementation(self) -> dict[str, str]:
        """Return the `Implementation` object."""
        found = {"name": self.name, "version": self.version}
        if self.title:
            found["title"] = self.title
        return found


@dataclass(eq=False)
class _Call:
    """A tool call in flight: its cancel event and its place in the pool."""

    cancel: threading.Event = field(default_factory=threading.Event)
    future: Future[None] | None = None


class Server:
    """An MCP server over a pair of byte streams."""

    def __init__(
        self, tools: Callable[[], Sequence[Tool]], *, info: ServerInfo, workers: int = 8
    ) -> None:
        self._list_tools = tools
        self._tools: dict[str, Tool] | None = None
        self.info = info
        self.workers = workers
        self._out: IO[bytes] | None = None
        self._write_lock = threading.Lock()
        self._calls_lock = threading.Lock()
        self._calls: dict[object, _Call] = {}

    @property
    def tools(self) -> dict[str, Tool]:
        """The tools by name, listed on first use: `initialize` never waits for them."""
        if self._tools is None:
            self._tools = {tool.name: tool for tool in self._list_tools()}
        return self._tools

    def serve(self, stdin: IO[bytes], stdout: IO[bytes]) -> int:
        """Answer messages from `stdin` on `stdout` until end of input; return 0."""
        self._out = stdout
        with ThreadPoolExecutor(self.workers, thread_name_prefix="sift-mcp") as pool:
            while raw := stdin.readline(MAX_LINE_BYTES + 1):
                if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    _skip_line(stdin)
                    self._error(None, PARSE_ERROR, "Parse error: the message is too large")
                    continue
                if raw.strip():
                    self.receive(raw, pool)
        return 0

    def receive(self, raw: bytes, pool: ThreadPoolExecutor) -> None:
        """Handle one line: answer it, start it on the pool, or ignore it."""
        try:
            message = json.loads(raw)
        except ValueError:  # UnicodeDecodeError included
            self._error(None, PARSE_ERROR, "Parse error: the line is not JSON in UTF-8")
            return
        except RecursionError:  # `[[[…` under the line cap: too deep for the decoder
            self._error(None, PARSE_ERROR, "Parse error: the message is nested too deeply")
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self._error(_valid_id(message), INVALID_REQUEST, "Invalid Request: not JSON-RPC 2.0")
            return
        method = message.get("method")
        if method is None:
            if "id" in message and ("result" in message or "error" in message):
                return  # a response: this server sends no requests, so nothing awaits it
            self._error(_valid_id(message), INVALID_REQUEST, "Invalid Request: no method")
            return
        if not isinstance(method, str):
            self._error(_valid_id(message), INVALID_REQUEST, "Invalid Request: bad method")
            return
        params = message.get("params", {})
        if "id" not in message:
            if isinstance(params, dict):
                self._notify(method, params)
            return
        request_id = _valid_id(message)
        if request_id is None:
            self._error(None, INVALID_REQUEST, "Invalid Request: the id must be a string or number")
            return
        try:
            if not isinstance(params, dict):
                raise ProtocolError(INVALID_PARAMS, "Invalid params: params must be an object")
            # discover exists only in the stateless revision: its answer always has that shape.
            modern = _is_modern(params, method) or method == "server/discover"
            if method == "tools/call":
                self._start_call(request_id, params, modern, pool)
                return
            result = self._answer(method, params, modern)
        except ProtocolError as exc:
            self._error(request_id, exc.code, exc.message, exc.data)
            return
        except Exception as exc:  # a bug answers one request with an error, never ends the server
            log.error("mcp: %s failed (%s)", method, type(exc).__name__)
            self._error(request_id, INTERNAL_ERROR, "Internal error")
            return
        self._result(request_id, result, modern)

    def _answer(self, method: str, params: dict[str, Any], modern: bool) -> dict[str, Any]:
        if method == "initialize":
            return self._initialize(params)
        if method == "ping":
            return {}
        if method == "server/discover":
            return {
                "supportedVersions": list(SUPPORTED_VERSIONS),
                "capabilities": self._capabilities(),
                "instructions": self.info.instructions,
                "ttlMs": LIST_TTL_MS,
                "cacheScope": "public",
            }
        if method == "tools/list":
            listing: dict[str, Any] = {"tools": [tool.to_wire() for tool in self.tools.values()]}
            if modern:
                listing.update(ttlMs=LIST_TTL_MS, cacheScope="public")
            return listing
        raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        requested = params.get("protocolVersion")
        version = requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[-1]
        answer: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": self._capabilities(),
            "serverInfo": self.info.implementation(),
        }
        if self.info.instructions:
            answer["instructions"] = self.info.instructions
        return answer

    def _capabilities(self) -> dict[str, Any]:
        return {"tools": {"listChanged": False}}

    def _notify(self, method: str, params: dict[str, Any]) -> None:
        """Handle a notification: only cancellation does anything."""
        if method != "notifications/cancelled":
            return
        with self._calls_lock:
            call = self._calls.get(_hashable(params.get("requestId")))
        if call is None:
            return
        call.cancel.set()
        if call.future is not None and call.future.cancel():  # still queued: it never starts
            with self._calls_lock:
                self._calls.pop(_hashable(params.get("requestId")), None)

    def _start_call(
        self, request_id: object, params: dict[str, Any], modern: bool, pool: ThreadPoolExecutor
    ) -> None:
        name = params.get("name")
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            raise ProtocolError(INVALID_PARAMS, f"Unknown tool: {name}")
        try:
            arguments = tool.check(params.get("arguments", {}))
        except ArgumentError as exc:
            self._result(request_id, ToolResult(str(exc), is_error=True).to_wire(), modern)
            return
        call = _Call()
        key = _hashable(request_id)
        with self._calls_lock:
            if key in self._calls:
                raise ProtocolError(
                    INVALID_REQUEST, f"Invalid Request: a call with id {request_id!r} is in flight"
                )
            self._calls[key] = call
            call.future = pool.submit(self._run, tool, arguments, request_id, call, modern)

    def _run(
        self, tool: Tool, arguments: dict[str, Any], request_id: object, call: _Call, modern: bool
    ) -> None:
        """Worker: run the tool and answer, unless the call was cancelled."""
        try:
            if call.cancel.is_set():
                return
            try:
                result = tool.run(arguments, call.cancel)
            except Exception as exc:
                # The type only: a message or traceback may carry the query or the page's URL.
                log.error("mcp: %s failed (%s)", tool.name, type(exc).__name__)
                result = ToolResult(f"{tool.name} failed inside sift; see its log.", is_error=True)
        finally:
            with self._calls_lock:
                if self._calls.get(_hashable(request_id)) is call:
                    del self._calls[_hashable(request_id)]
        if not call.cancel.is_set():
            self._result(request_id, result.to_wire(), modern)

    def _result(self, request_id: object, result: dict[str, Any], modern: bool) -> None:
        if modern:
            result = {
                **result,
                "resultType": "complete",
                "_meta": {SERVER_INFO_KEY: self.info.implementation()},
            }
        self._write({"jsonrpc": "2.0", "id": request_id, "result": result})

    def _error(self, request_id: object, code: int, message: str, data: object = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self._write({"jsonrpc": "2.0", "id": request_id, "error": error})

    def _write(self, message: dict[str, Any]) -> None:
        """Write one message as one line, in one write, under the lock."""
        try:
            line = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
        except UnicodeEncodeError:  # a lone surrogate came in: escape it rather than fail
            line = json.dumps(message, separators=(",", ":")).encode()
        assert self._out is not None
        with self._write_lock:
            try:
                self._out.write(line + b"\n")
                self._out.flush()
            except BrokenPipeError:  # the client stopped reading: nobody is left to answer
                log.warning("mcp: the client closed its end; an answer was dropped")


def _is_modern(params: dict[str, Any], method: str) -> bool:
    """Say whether a request is served statelessly (2026-07-28); raise if its envelope is bad."""
    meta = params.get("_meta")
    if method == "initialize" or not isinstance(meta, dict) or VERSION_KEY not in meta:
        return False
    version = meta[VERSION_KEY]
    if not isinstance(version, str):
        raise ProtocolError(INVALID_PARAMS, f"Invalid params: {VERSION_KEY} must be a string")
    if version in LEGACY_VERSIONS:
        return False
    if version not in MODERN_VERSIONS:
        raise ProtocolError(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": list(SUPPORTED_VERSIONS), "requested": version},
        )
    if not isinstance(meta.get(CAPABILITIES_KEY), dict):
        raise ProtocolError(INVALID_PARAMS, f"Invalid params: _meta needs {CAPABILITIES_KEY}")
    return True


def _valid_id(message: object) -> str | int | None:
    """Return the message's id when it is a string or an integer, else None."""
    request_id = message.get("id") if isinstance(message, dict) else None
    if isinstance(request_id, str) or (
        isinstance(request_id, int) and not isinstance(request_id, bool)
    ):
        return request_id
    return None


def _hashable(request_id: object) -> object:
    # 1 and "1" are different ids; True is not an id at all.
    return (type(request_id).__name__, request_id) if isinstance(request_id, str | int) else None


def _skip_line(stdin: IO[bytes]) -> None:
    """Read and drop the rest of an oversized line."""
    while chunk := stdin.readline(MAX_LINE_BYTES):
        if chunk.endswith(b"\n"):
            return
