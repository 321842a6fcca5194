"""Any MCP server as a ToolDriver: a real server written with the SDK, started over stdio or
reached over streamable HTTP on localhost, mounted in the orchestrator and called through
``process_llm_response`` and its async twin, including a server that dies mid-call, one that
does not answer in time, and a tool that reports an error."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from distbuild import free_port, wait_for_port

pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs

from mcs_host import DriverMeta, MCSToolDriver, Orchestrator, Tool, ToolError
from mcs_host.bridge.client import MCPToolDriver
from mcs_host.bridge.server import mcp_server
from mcs_host.kit import report_progress

SERVER = '''\
import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("fixture")


@app.tool()
async def steps(ctx: Context) -> str:
    """Report progress three times, then answer."""
    for step in (1, 2, 3):
        await ctx.report_progress(step, 3, f"step {step}")
    return "walked"


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def die() -> str:
    """End the server's process in the middle of the call."""
    os._exit(3)


@app.tool()
async def slow(seconds: float) -> str:
    """Answer after a while."""
    await asyncio.sleep(seconds)
    return "done"


@app.tool()
def broken() -> str:
    """Fail."""
    raise ValueError("no backend")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
    else:
        app.run()
'''


@pytest.fixture(scope="module")
def server_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mcp-server") / "server.py"
    path.write_text(SERVER)
    return path


@pytest.fixture
def stdio_driver(server_script: Path) -> Iterator[MCPToolDriver]:
    driver = MCPToolDriver([sys.executable, str(server_script)], name="fixture", call_timeout=10)
    yield driver
    driver.close()


def call(tool: str, **arguments: object) -> str:
    import json

    return json.dumps({"tool": tool, "arguments": arguments})


def test_a_stdio_server_s_tools_are_mounted_and_called(stdio_driver: MCPToolDriver) -> None:
    stack = Orchestrator({"fixture": stdio_driver})
    tools = {tool.name: tool for tool in stack.list_tools()}
    assert set(tools) == {"add", "die", "slow", "broken", "steps"}
    assert tools["add"].input_schema()["required"] == ["a", "b"]
    response = stack.process_llm_response(call("add", a=2, b=3))
    assert response.call_executed
    assert response.tool_call_result == 5  # the SDK's wrapping of an int, undone
    invalid = stack.process_llm_response(call("add", a=2))
    assert invalid.call_failed  # checked against the server's schema before it is sent
    assert "argument 'b': required argument is missing" in (invalid.call_detail or "")


def test_the_async_path_awaits_the_server(stdio_driver: MCPToolDriver) -> None:
    stack = Orchestrator({"fixture": stdio_driver})

    async def both() -> list[object]:
        first, second = await asyncio.gather(
            stack.aprocess_llm_response(call("slow", seconds=0.5)),
            stack.aprocess_llm_response(call("add", a=1, b=1)),
        )
        return [first.tool_call_result, second.tool_call_result]

    assert asyncio.run(both()) == ["done", 2]


def test_a_tool_error_a_timeout_and_a_dead_server_fail_only_their_call(
    server_script: Path,
) -> None:
    driver = MCPToolDriver([sys.executable, str(server_script)], name="fixture", call_timeout=2)
    stack = Orchestrator({"fixture": driver})
    try:
        broken = stack.process_llm_response(call("broken"))
        assert broken.call_failed
        # the text the server marked isError
        assert broken.call_detail == "broken failed: Error executing tool broken"
        slow = stack.process_llm_response(call("slow", seconds=30))
        assert slow.call_detail == (
            f"slow failed: the MCP server {driver._where!r} did not answer 'slow' within 2 s"
        )
        died = stack.process_llm_response(call("die"))
        assert died.call_failed
        assert "the MCP server" in (died.call_detail or "")
        # the next call starts the server again
        again = stack.process_llm_response(call("add", a=4, b=5))
        assert again.tool_call_result == 9
    finally:
        driver.close()


def test_a_wrong_server_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="give an http"):
        MCPToolDriver("server.py")
    missing = MCPToolDriver([sys.executable, str(tmp_path / "nowhere.py")], connect_timeout=10)
    with pytest.raises(ToolError, match="cannot connect to the MCP server"):
        missing.list_tools()
    missing.close()


@pytest.fixture
def http_url(server_script: Path) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(server_script), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_streamable_http_server_is_mounted_and_called(http_url: str) -> None:
    driver = MCPToolDriver(http_url, name="remote", call_timeout=10)
    try:
        stack = Orchestrator({"remote": driver})
        assert stack.process_llm_response(call("add", a=20, b=22)).tool_call_result == 42
        died = stack.process_llm_response(call("die"))  # the whole server process ends
        assert died.call_failed
    finally:
        driver.close()


class Counting(MCSToolDriver):
    """An in-process driver that reports progress from its worker thread."""

    meta = DriverMeta(id="counting", name="counting", version="1.0.0")

    def list_tools(self) -> list[Tool]:
        return [Tool(name="count", description="Count to two, saying so.")]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        report_progress(1, 2, "one")
        report_progress(2, 2, "two")
        return "counted"


def progress_heard(stack: Orchestrator, tool: str) -> tuple[Any, list[tuple[float, Any, Any]]]:
    """Call ``tool`` of ``stack`` served by ``mcp_server``, through the SDK's in-memory
    client asking for progress: the result and what it heard."""
    import anyio
    from mcp import Client

    heard: list[tuple[float, Any, Any]] = []

    async def hear(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))

    async def main() -> Any:
        async with Client(mcp_server(stack)) as client:
            return await client.call_tool(tool, {}, progress_callback=hear)

    return anyio.run(main), heard


def test_progress_a_driver_reports_reaches_the_mcp_client() -> None:
    result, heard = progress_heard(Orchestrator({"counting": Counting()}), "count")
    assert not result.is_error
    assert heard == [(1, 2, "one"), (2, 2, "two")]


def test_progress_of_an_mcp_server_mounted_as_a_driver_is_passed_on(
    stdio_driver: MCPToolDriver,
) -> None:
    # a proxy: the upstream server's progress goes on to the client of the stack
    result, heard = progress_heard(Orchestrator({"fixture": stdio_driver}), "steps")
    assert not result.is_error
    assert heard == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
