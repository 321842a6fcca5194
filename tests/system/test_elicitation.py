"""A consent-gated call served by ``mcs-host serve`` is put to the MCP client's user: a client
that declared elicitation is asked once per call (``elicitation/create``, naming the tool, the
server's label and the arguments); only accept runs the call, decline and cancel refuse it
with a tool error saying so. A client that cannot ask is refused with the configuration that
waives consent named. Both eras of the protocol: the initialize handshake (the request sent
to the client) and 2026-07-28 (the request returned as an input request, the client's retry
answering it); and a gated stack that sync code calls from a worker thread asks the same
user. The server and the client are real: this checkout's console script
with a fresh HOME, the ``mcp`` SDK's client, and an MCP server whose tool writes a marker
file that must be absent after a refusal."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from sample_drivers import GATED_SERVER as SERVER

from mcs_host import DriverMeta, HostConfig, MCSToolDriver, Orchestrator, Tool, load_drivers
from mcs_host.bridge.server import mcp_server


def served(tmp_path: Path) -> tuple[StdioServerParameters, Path]:
    """``mcs-host serve`` of one MCP server that no registry vouches for (so each call
    needs approval), with a HOME of its own; and the marker its tool writes."""
    home = tmp_path / "home"
    home.mkdir()
    server = tmp_path / "server.py"
    server.write_text(SERVER)
    marker = tmp_path / "wiped.txt"
    config = tmp_path / "mcs-host.toml"
    config.write_text(
        "autoload = false\nplugins = false\nregistries = []\n\n"
        "[trust]\nallow_unverified = true\n\n"
        f"[mcp_servers.gated]\ncommand = [{str(sys.executable)!r}, {str(server)!r}, "
        f"{str(marker)!r}]\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MCS_HOST_"))}
    env.update(HOME=str(home), MCS_HOST_STATE_DIR=str(tmp_path / "state"))
    command = Path(sys.executable).with_name("mcs-host")
    parameters = StdioServerParameters(
        command=str(command),
        args=["serve", "--config", str(config)],
        env=env,
        cwd=str(tmp_path),
    )
    return parameters, marker


def text(result: types.CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


MODES = ["legacy", "auto"]  # the initialize handshake; 2026-07-28, as the SDK's client picks


@pytest.mark.parametrize("mode", MODES)
def test_the_clients_user_is_asked_once_per_call_and_only_accept_runs_it(
    mode: Any, tmp_path: Path
) -> None:
    server, marker = served(tmp_path)
    asked: list[types.ElicitRequestParams] = []
    answers = ["decline", "cancel", "accept"]

    async def elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params)
        action = answers[len(asked) - 1]
        return types.ElicitResult(action=action, content={} if action == "accept" else None)

    async def main() -> list[tuple[types.CallToolResult, bool]]:
        results = []
        async with Client(
            server, mode=mode, read_timeout_seconds=60, elicitation_callback=elicit
        ) as client:
            for _ in answers:
                result = await client.call_tool("wipe", {"path": "/home"})
                results.append((result, marker.exists()))
        return results

    (declined, after_decline), (cancelled, after_cancel), (accepted, _) = anyio.run(main)
    assert declined.is_error
    assert text(declined) == (
        "the call of 'wipe' was not approved: the user declined it in the MCP client"
    )
    assert not after_decline
    assert cancelled.is_error
    assert text(cancelled) == (
        "the call of 'wipe' was not approved: the user cancelled the request for approval in "
        "the MCP client"
    )
    assert not after_cancel
    assert not accepted.is_error
    assert text(accepted) == "wiped"
    assert marker.read_text() == "wiped /home\n"  # the accepted call ran, once
    assert len(asked) == 3  # once per call
    for params in asked:
        assert isinstance(params, types.ElicitRequestFormParams)
        assert params.message == (
            'Run the tool "wipe" of gated with the arguments {"path": "/home"}? '
            "(each call to the MCP server 'gated' needs approval)"
        )
        assert params.requested_schema == {"type": "object", "properties": {}}


@pytest.mark.parametrize("mode", MODES)
def test_a_client_that_cannot_ask_is_refused_naming_the_waiver(mode: Any, tmp_path: Path) -> None:
    server, marker = served(tmp_path)

    async def main() -> types.CallToolResult:
        async with Client(server, mode=mode, read_timeout_seconds=60) as client:  # no elicitation
            return await client.call_tool("wipe", {"path": "/home"})

    refused = anyio.run(main)
    assert refused.is_error
    assert text(refused) == (
        "the call of 'wipe' was not approved: each call to the MCP server 'gated' needs "
        "approval, and this MCP client cannot ask its user for it (it does not support MCP "
        "elicitation): a host plugin's mcs_host_consent hook must approve it (or set "
        "consent = false in [mcp_servers.gated])"
    )
    assert not marker.exists()


class Blocking(MCSToolDriver):
    """A plain driver that calls a stack from its worker thread, as sync code does."""

    meta = DriverMeta(id="blocking-0001", name="blocking", version="1.0.0")

    def __init__(self, stack: Orchestrator) -> None:
        self.stack = stack

    def list_tools(self) -> list[Tool]:
        return self.stack.list_tools()

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return self.stack.execute_tool(tool_name, arguments)


@pytest.mark.parametrize("mode", MODES)
def test_a_gated_stack_called_from_a_worker_thread_asks_the_same_user(
    mode: Any, tmp_path: Path
) -> None:
    server = tmp_path / "server.py"
    server.write_text(SERVER)
    marker = tmp_path / "wiped.txt"
    loaded = load_drivers(
        HostConfig(autoload=False, plugins=False, registries=()),
        trust={"allow_unverified": True},
        mcp_servers={"gated": {"command": [sys.executable, str(server), str(marker)]}},
    )
    asked: list[str] = []

    async def elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="decline" if len(asked) == 1 else "accept", content={})

    async def main() -> list[types.CallToolResult]:
        outer = Orchestrator({"blocking": Blocking(loaded.driver)})
        async with Client(mcp_server(outer), mode=mode, elicitation_callback=elicit) as client:
            return [await client.call_tool("wipe", {"path": "/tmp"}) for _ in range(2)]

    try:
        declined, accepted = anyio.run(main)
    finally:
        for driver in loaded.owned:
            driver.close()
    assert declined.is_error
    assert text(declined).endswith("the user declined it in the MCP client")
    assert (accepted.is_error, text(accepted)) == (False, "wiped")
    assert marker.read_text() == "wiped /tmp\n"
    assert len(asked) == 2
