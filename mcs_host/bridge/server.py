"""A loaded stack as an MCP server: every mounted tool, under its final name, for any MCP
client, each call going through the orchestrator's validation, consent and audit.

Every protocol byte is the ``mcp`` SDK's (2.x, the ``mcs-host[mcp]`` extra). A tool that
fails, arguments that do not validate and a refused consent become a tool result with
``isError``, never a dead server; a cancelled request cancels the call, and what a driver
says with :func:`~mcs_host.kit.report_progress` reaches a client that asked for progress.
Keeping a driver's prints off a stdio wire is the command line's: ``mcs-host serve`` points
descriptor 1 at stderr for its whole life and hands the SDK the real stdin and stdout
(``mcs_host.cli._stdout``), so the instructions may be built and the tools run here as they are.
The trust facts of each tool's driver (label, distribution, version, verification, trust)
travel in the tool's ``_meta`` under ``io.mcs-host/driver``; the server's instructions are
the stack's system message. A result that is a JSON object is the structured content; any
other JSON value is wrapped as ``{"result": value}``, marked in the result's ``_meta``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from mcs_host._version import __version__
from mcs_host.interfaces import progress_to
from mcs_host.orchestration.messages import result_text

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from mcs_host.loading.records import LoadRecord
    from mcs_host.orchestration.orchestrator import Orchestrator

__all__ = ["META_KEY", "RESULT_KEY", "mcp_server"]

META_KEY = "io.mcs-host/driver"
"""The key of a tool's ``_meta`` entry that says which driver it comes from and how that
driver was verified."""
RESULT_KEY = "io.mcs-host/result"
"""The key of a call result's ``_meta`` entry; ``"wrapped"``: the tool's result (a number, a
list, a boolean or null) is the ``result`` of the structured content."""


def mcp_server(
    stack: Orchestrator,
    records: Iterable[LoadRecord] = (),
    *,
    name: str = "mcs-host",
    model: str | None = None,
) -> Server[Any]:
    """An MCP server (the SDK's low-level ``Server``) offering the tools of ``stack``.

    ``records`` are the load report's mounts: their trust facts go into each tool's
    ``_meta``. ``model`` picks the system message rendering the instructions carry.
    """
    import mcp_types as types  # noqa: PLC0415 - the mcp extra, imported only to serve
    from mcp.server.lowlevel import Server  # noqa: PLC0415

    facts = {record.label: _facts(record) for record in records if record.status == "mounted"}

    async def list_tools(context: Any, params: Any) -> types.ListToolsResult:
        tools = []
        for tool in stack.list_tools():
            label, own_name = stack.route(tool.name)
            meta = {"label": label, "tool": own_name, **facts.get(label, {})}
            tools.append(
                types.Tool(
                    name=tool.name,
                    title=tool.title or None,
                    description=tool.description or None,
                    input_schema=tool.input_schema(),
                    _meta={META_KEY: meta},
                )
            )
        return types.ListToolsResult(tools=tools)

    async def call_tool(context: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        loop = asyncio.get_running_loop()
        sent: set[asyncio.Task[None]] = set()

        def report(done: float, total: float | None, message: str | None) -> None:
            def send() -> None:
                task = loop.create_task(context.session.report_progress(done, total, message))
                sent.add(task)
                task.add_done_callback(sent.discard)

            loop.call_soon_threadsafe(send)  # a driver reports from its worker thread too

        with progress_to(report):
            response = await stack.aexecute(_detection(params.name, params.arguments or {}))
        if response.call_failed:
            detail = response.call_detail or "the call failed"
            return types.CallToolResult(content=[types.TextContent(text=detail)], is_error=True)
        result = response.tool_call_result
        text = result_text(result)
        if isinstance(result, Mapping):
            return types.CallToolResult(
                content=[types.TextContent(text=text)], structured_content=result
            )
        if isinstance(result, str) or not _is_json(result):
            return types.CallToolResult(content=[types.TextContent(text=text)])
        # a number, list, true or null: structured content is an object, so it is wrapped
        return types.CallToolResult(
            content=[types.TextContent(text=text)],
            structured_content={"result": result},
            _meta={RESULT_KEY: "wrapped"},
        )

    return Server(
        name,
        version=__version__,
        instructions=stack.get_driver_system_message(model) or None,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _is_json(value: Any) -> bool:
    """Whether ``value`` is a JSON value as it is."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _detection(name: str, arguments: Mapping[str, Any]) -> Any:
    """One call as the orchestrator's consent seam takes it."""
    from mcs_host.orchestration.calls import Detection, ToolCall  # noqa: PLC0415

    return Detection((ToolCall(name, dict(arguments)),), "text", "mcp")


def _facts(record: LoadRecord) -> dict[str, Any]:
    """What a client may want to know about the driver behind a tool (its healthcheck
    result when the load ran one, as JSON values)."""
    facts: dict[str, Any] = {
        "distribution": record.distribution,
        "version": record.version,
        "verification": record.verification,
        "trust": record.trust,
    }
    if record.health is not None:
        facts["health"] = json.loads(json.dumps(dict(record.health), default=str))
    return facts
