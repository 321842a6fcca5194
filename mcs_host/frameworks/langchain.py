"""Verified drivers as LangChain tools (``langchain-core``; imported when used).

Each tool is a :class:`~langchain_core.tools.StructuredTool` whose ``args_schema`` is the
tool's JSON schema exactly as offered, so ``bind_tools`` gives the model that schema, and
LangChain checks nothing itself: each call goes through the stack's check of its arguments,
its consent plugins and its audit. What stops a call comes back to the model as the content
of a ``ToolMessage`` whose status is ``error`` (LangChain's ``handle_tool_error``), never as
an exception that ends the agent. LangChain's core has no approval of its own: a call that
needs approval asks ``approve``, or is denied.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from mcs_host.frameworks._offer import Approve, Caller, offered, require

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from mcs_host.loading.records import Loaded

__all__ = ["langchain_tools"]

_WHO = "langchain_tools()"


def langchain_tools(
    loaded: Loaded,
    *,
    labels: str | Iterable[str] = (),
    tools: str | Iterable[str] = (),
    caller: str | None = None,
    approve: Approve | None = None,
) -> list[BaseTool]:
    """The tools of ``loaded`` (what :func:`~mcs_host.load_drivers` returns) as LangChain
    tools, for ``model.bind_tools()`` or an agent: those of the mounts ``labels`` (default:
    all) among ``tools`` (their final names; default: all), named as the stack offers them.

    A tool called with a tool call gives a ``ToolMessage``: its content is the result as the
    model reads it (JSON for what is not text), its ``artifact`` the result itself; a call
    the stack refused, or that failed, gives the reason with status ``error``. ``caller``
    names who calls, for consent plugins and the audit (:attr:`~mcs_host.ToolCall.caller`).
    A call that needs approval (:attr:`~mcs_host.Loaded.gated`), when no consent plugin
    approved it, runs only if ``approve(question)`` (a function, or a coroutine function
    awaited by ``ainvoke``) returns ``True``; with no ``approve`` it is denied, the reason
    saying what would approve it.

    Raises :class:`TypeError` when ``loaded`` is not a load, :class:`ValueError` naming a
    label or tool that matches nothing, :class:`ImportError` naming the command that
    installs ``langchain-core`` when it is missing.
    """
    found = offered(loaded, labels, tools, who=_WHO)
    if approve is not None and not callable(approve):
        raise TypeError(
            f"{_WHO} argument 'approve' must be a function or None, not {type(approve).__name__}"
        )
    require("langchain_core", "langchain", _WHO)
    from mcs_host.frameworks._langchain_tool import stack_tool  # noqa: PLC0415 - langchain

    calls = Caller(loaded, found, caller, "LangChain", "pass approve= to langchain_tools()")
    decide = False if approve is None else approve
    return [stack_tool(tool, calls, decide) for tool in found]
