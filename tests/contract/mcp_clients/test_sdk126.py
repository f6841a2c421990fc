"""mcp 1.26.0's `ClientSession`, the path of Hermes 0.19.0, against `sift mcp`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from .kit import Setup, check_structured

pytestmark = pytest.mark.contract


def run(
    setup: Setup, body: Callable[[ClientSession], Awaitable[Any]], *, garbage: bool = False
) -> Any:
    command, args = setup.launch(garbage=garbage)
    params = StdioServerParameters(command=command, args=args, env=setup.env)

    async def session() -> Any:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as mcp:
            initialized = await mcp.initialize()
            assert initialized.protocolVersion == "2025-11-25"
            assert initialized.serverInfo.name == "sift"
            assert initialized.capabilities.tools is not None
            return await body(mcp)

    return anyio.run(session)


def test_lists_and_calls_every_tool(setup: Setup) -> None:
    async def body(mcp: ClientSession) -> None:
        listed = await mcp.list_tools()
        tools = {tool.name: tool.model_dump(by_alias=True) for tool in listed.tools}
        assert set(tools) == set(setup.arguments)
        for name, arguments in setup.arguments.items():
            result = await mcp.call_tool(name, arguments)
            assert result.isError is False
            check_structured(tools[name], result.structuredContent)
            assert [block.type for block in result.content] == ["text"]
        await mcp.send_ping()

    run(setup, body)


def test_a_tool_failure_is_an_error_result(setup: Setup) -> None:
    async def body(mcp: ClientSession) -> types.CallToolResult:
        return await mcp.call_tool("skill_search", {"query": "?!"})

    result = run(setup, body)
    assert result.isError is True and "no search terms" in result.content[0].text


def test_cancelling_a_slow_call_leaves_the_server_serving(setup: Setup) -> None:
    async def body(mcp: ClientSession) -> types.CallToolResult:
        # 1.26 sends no notifications/cancelled itself: a caller (Hermes on a timeout) sends
        # it by hand, naming the id the session gave the call (its next request id).
        slow_id = mcp._request_id
        async with anyio.create_task_group() as group:

            async def slow() -> None:
                await mcp.call_tool("web_search", {"query": "slow query"})

            group.start_soon(slow)
            while not setup.searxng.slow_arrived.is_set():
                await anyio.sleep(0.01)
            cancel = types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=slow_id, reason="timeout")
            )
            await mcp.send_notification(types.ClientNotification(cancel))
            group.cancel_scope.cancel()
        return await mcp.call_tool("skill_search", setup.arguments["skill_search"])

    after = run(setup, body)
    setup.gate.set()
    assert after.isError is False


def test_garbage_lines_are_answered_and_the_session_goes_on(setup: Setup) -> None:
    async def body(mcp: ClientSession) -> types.CallToolResult:
        return await mcp.call_tool("skill_search", setup.arguments["skill_search"])

    assert run(setup, body, garbage=True).isError is False
