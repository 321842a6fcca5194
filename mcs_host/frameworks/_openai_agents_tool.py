"""The OpenAI Agents SDK's function tool of one offered tool (imports ``agents``: imported only
when :func:`~mcs_host.openai_agents_tools` is called).

The SDK hands a :class:`~agents.tool.FunctionTool`'s ``on_invoke_tool`` its
:class:`~agents.tool_context.ToolContext` (so annotated: a function annotated as taking a
``RunContextWrapper`` gets one without the call's id) and the model's arguments as JSON text,
unchecked; it sends the model what the function returns: a string as it is, other values as
their ``str()`` (a dict as Python's repr, not JSON), so the result is returned as JSON text.
An exception raised there would end the run, so what stops a call is returned too.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from agents import FunctionTool, UserError
from agents.strict_schema import ensure_strict_json_schema
from agents.tool_context import ToolContext

from mcs_host.frameworks._offer import Caller, Failure, Offered
from mcs_host.orchestration.response_schema import strict_arguments

__all__: list[str] = []


def stack_tool(tool: Offered, caller: Caller) -> FunctionTool:
    """``tool`` as the SDK's: its name and description as offered, its schema strict where
    that accepts only what the tool accepts, each call through ``caller``; approved by the
    SDK's human in the loop when ``tool`` is gated: such a call runs as approved only when
    the run's record says the user approved it (not when ``needs_approval`` was turned off)."""
    name = tool.name
    gated = tool.gated
    schema, strict = _schema(tool)

    async def invoke(context: ToolContext[Any], text: str) -> str:
        try:
            arguments = json.loads(text) if text else {}
        except ValueError as exc:
            return f"Invalid JSON input for tool {name}: {exc}"
        if not isinstance(arguments, dict):
            return f"Invalid JSON input for tool {name}: expected a JSON object"
        approve = gated and context.is_tool_approved(context.tool_name, context.tool_call_id)
        try:
            _, said = await caller.acall(name, arguments, approve is True, with_text=True)
        except Failure as failure:
            return failure.message
        return str(said)

    return FunctionTool(
        name=name,
        description=tool.description or tool.title or "",
        params_json_schema=schema,
        on_invoke_tool=invoke,
        strict_json_schema=strict,
        needs_approval=gated,
    )


def _schema(tool: Offered) -> tuple[dict[str, Any], bool]:
    """The schema the model is given for ``tool``, and whether it is strict: the strict
    rewrite when there is one and the SDK's own strict conversion leaves it as it is (it
    would otherwise change what is accepted), else the tool's schema as offered."""
    strict = strict_arguments(tool.schema)
    if isinstance(strict, dict):
        try:
            unchanged = ensure_strict_json_schema(copy.deepcopy(strict)) == strict
        except (UserError, ValueError, TypeError, AssertionError):
            unchanged = False
        if unchanged:
            return strict, True
    return copy.deepcopy(dict(tool.schema)), False
