"""The LangChain tool of one offered tool (imports ``langchain_core``: imported only when
:func:`~mcs_host.langchain_tools` is called).

LangChain leaves a JSON-schema ``args_schema`` unchecked and hands the arguments on as keyword
arguments; ``StructuredTool._run`` would take an argument named ``config`` or ``run_manager``
as its own and refuse one named ``self``. :class:`StackTool` runs its call with the arguments
exactly as the model gave them, so the stack's check is the only one.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import StructuredTool, ToolException

from mcs_host.frameworks._offer import Approval, Caller, Failure, Offered

__all__: list[str] = []


class StackTool(StructuredTool):
    """A tool of the stack as LangChain runs it: its ``func`` (``coroutine`` on an event
    loop) is given the model's arguments and nothing else, and returns ``(text, result)``:
    what the model reads, and the result itself, kept as the ``ToolMessage``'s artifact."""

    def _run(self, /, *args: Any, **arguments: Any) -> Any:
        # self positional-only: an argument named "self" is the model's too
        if self.func is None:  # pragma: no cover - every StackTool has one
            raise ToolException(f"{self.name} has no function")
        return self.func(*args, **arguments)

    async def _arun(self, /, *args: Any, **arguments: Any) -> Any:
        if self.coroutine is None:  # pragma: no cover - every StackTool has one
            raise ToolException(f"{self.name} has no coroutine")
        return await self.coroutine(*args, **arguments)


def stack_tool(tool: Offered, caller: Caller, approve: Approval) -> StackTool:
    """``tool`` as LangChain's: its name, description and JSON schema as offered, each call
    through ``caller``; what stops a call is a :class:`~langchain_core.tools.ToolException`,
    the message the model reads in a ``ToolMessage`` whose status is ``error``."""
    name = tool.name

    def call(**arguments: Any) -> tuple[str, Any]:
        try:
            result, text = caller.call(name, arguments, approve, with_text=True)
        except Failure as failure:
            raise ToolException(failure.message) from None
        return text, result

    async def acall(**arguments: Any) -> tuple[str, Any]:
        try:
            result, text = await caller.acall(name, arguments, approve, with_text=True)
        except Failure as failure:
            raise ToolException(failure.message) from None
        return text, result

    return StackTool(
        name=name,
        description=tool.description or tool.title or "",
        args_schema=dict(tool.schema),
        func=call,
        coroutine=acall,
        response_format="content_and_artifact",
        handle_tool_error=True,
        metadata={"mcs_host": tool.facts()},
    )
