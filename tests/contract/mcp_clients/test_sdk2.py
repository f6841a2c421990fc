"""mcp 2.x's `Client` in its three modes (`legacy`, `auto`, `2026-07-28`) against `sift mcp`."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters
from mcp.client import Client

from .kit import Setup, check_structured

pytestmark = pytest.mark.contract

MODES = {"legacy": "2025-11-25", "auto": "2026-07-28", "2026-07-28": "2026-07-28"}


def client(setup: Setup, mode: str, *, garbage: bool = False) -> Client:
    command, args = setup.launch(garbage=garbage)
    return Client(StdioServerParameters(command=command, args=args, env=setup.env), mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_lists_and_calls_every_tool(setup: Setup, mode: str) -> None:
    async def session() -> None:
        async with client(setup, mode) as mcp:
            assert mcp.protocol_version == MODES[mode]
            if mode != "2026-07-28":  # a pinned version adopts a made-up discover result
                assert mcp.server_info is not None and mcp.server_info.name == "sift"
            listed = await mcp.list_tools()
            tools = {tool.name: tool.model_dump(by_alias=True) for tool in listed.tools}
            assert set(tools) == set(setup.arguments)
            for name, arguments in setup.arguments.items():
                tool = tools[name]
                assert tool["inputSchema"]["additionalProperties"] is False
                assert tool["annotations"]["readOnlyHint"] is True
                result = await mcp.call_tool(name, arguments)
                assert result.is_error is False
                check_structured(tool, result.structured_content)
                assert [block.type for block in result.content] == ["text"]
                assert "{" not in result.content[0].text

            again = await mcp.call_tool("web_search", setup.arguments["web_search"])
            searched = again.structured_content
            assert searched is not None and searched["cached"] is True
            assert [hit["position"] for hit in searched["results"]] == [1, 2, 3]

    anyio.run(session)
    assert len(setup.searxng.calls) == 1  # the second search came from the cache


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_failure_is_an_error_result(setup: Setup, mode: str) -> None:
    async def session() -> Any:
        async with client(setup, mode) as mcp:
            blank = await mcp.call_tool("web_search", {"query": "   "})
            unknown = await mcp.call_tool("skill_search", {"query": "pdf", "extra": 1})
            return blank, unknown

    blank, unknown = anyio.run(session)
    assert blank.is_error is True
    assert blank.content[0].text == "Invalid query: the query is empty."
    assert unknown.is_error is True and "unknown argument 'extra'" in unknown.content[0].text


@pytest.mark.parametrize("mode", MODES)
def test_cancelling_a_slow_call_leaves_the_server_serving(setup: Setup, mode: str) -> None:
    async def session() -> Any:
        async with client(setup, mode) as mcp:
            async with anyio.create_task_group() as group:

                async def slow() -> None:
                    await mcp.call_tool("web_search", {"query": "slow query"})

                group.start_soon(slow)
                while not setup.searxng.slow_arrived.is_set():
                    await anyio.sleep(0.01)
                # Cancelling the caller's task makes the SDK send notifications/cancelled.
                group.cancel_scope.cancel()
            return await mcp.call_tool("skill_search", setup.arguments["skill_search"])

    after = anyio.run(session)
    setup.gate.set()
    assert after.is_error is False and after.structured_content is not None


@pytest.mark.parametrize("mode", MODES)
def test_garbage_lines_are_answered_and_the_session_goes_on(setup: Setup, mode: str) -> None:
    async def session() -> Any:
        async with client(setup, mode, garbage=True) as mcp:
            return await mcp.call_tool("skill_search", setup.arguments["skill_search"])

    result = anyio.run(session)
    assert result.is_error is False
