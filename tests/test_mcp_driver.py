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

import pytest
from distbuild import free_port, wait_for_port

pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs

from mcs_host import Orchestrator, ToolError
from mcs_host.bridge.client import MCPToolDriver

SERVER = '''\
import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer

app = MCPServer("fixture")


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
    assert set(tools) == {"add", "die", "slow", "broken"}
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
