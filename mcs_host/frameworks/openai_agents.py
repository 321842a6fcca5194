"""Verified drivers as tools of the OpenAI Agents SDK (``openai-agents``; imported when used).

Each tool is a :class:`~agents.tool.FunctionTool` under the name the stack offers it. Its
schema is the tool's, rewritten for OpenAI's strict mode where that rewrite accepts only what
the tool accepts (an optional argument then takes ``null``, read as not given); else the
tool's own schema, not strict. The SDK checks no argument of such a tool: each call goes
through the stack's check of its arguments, its consent plugins and its audit. What stops a
call is the tool's output, so the model reads why and the run goes on. A call that needs
approval (:attr:`~mcs_host.Loaded.gated`) is the SDK's to approve: its tool has
``needs_approval=True``, the run stops with the call among ``RunResult.interruptions``, and
it runs only once your user approves it (``RunState.approve``).

:class:`~agents.tool.FunctionTool` has no public place for a tool's annotations
(``readOnlyHint``...): the SDK keeps those only of the MCP tools it converts itself, so the
tools given here carry none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from mcs_host.frameworks._offer import Caller, offered, require

if TYPE_CHECKING:
    from agents import FunctionTool

    from mcs_host.loading.records import Loaded

__all__ = ["openai_agents_tools"]

_WHO = "openai_agents_tools()"
_UNASKED = "approve it when the run stops at it (keep the tool's needs_approval=True)"


def openai_agents_tools(
    loaded: Loaded,
    *,
    labels: str | Iterable[str] = (),
    tools: str | Iterable[str] = (),
    caller: str | None = None,
) -> list[FunctionTool]:
    """The tools of ``loaded`` (what :func:`~mcs_host.load_drivers` returns) as the OpenAI
    Agents SDK's function tools, for ``Agent(tools=...)``: those of the mounts ``labels``
    (default: all) among ``tools`` (their final names; default: all), named as the stack
    offers them.

    A tool's ``params_json_schema`` is its schema rewritten for strict mode
    (``strict_json_schema=True``) when the rewrite accepts only what the tool accepts, and
    the SDK's own strict check leaves it as it is; else the tool's schema as offered
    (``strict_json_schema=False``). A call's output is its result as the model reads it
    (JSON for what is not text); a call the stack refused, or that failed, or whose
    arguments are not a JSON object, has the reason as its output. ``caller`` names who
    calls, for consent plugins and the audit (:attr:`~mcs_host.ToolCall.caller`). A tool
    whose calls need approval (:attr:`~mcs_host.Loaded.gated`) has ``needs_approval=True``:
    the SDK interrupts the run before each call, and a call your user approves runs as
    approved (consent plugins are still asked first); a rejected one never reaches the
    stack; one the run holds no approval of (its ``needs_approval`` turned off) is denied.

    Raises :class:`TypeError` when ``loaded`` is not a load, :class:`ValueError` naming a
    label or tool that matches nothing, :class:`ImportError` naming the command that
    installs ``openai-agents`` when it is missing.
    """
    found = offered(loaded, labels, tools, who=_WHO)
    require("agents", "openai-agents", _WHO)
    from mcs_host.frameworks._openai_agents_tool import stack_tool  # noqa: PLC0415 - agents

    calls = Caller(loaded, found, caller, "the OpenAI Agents SDK", _UNASKED)
    return [stack_tool(tool, calls) for tool in found]
