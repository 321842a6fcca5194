"""The PydanticAI toolset of a load's offered tools (imports ``pydantic_ai``: imported only
when :func:`~mcs_host.pydantic_ai_toolset` is called)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_ai import ApprovalRequired, ModelRetry, RunContext, ToolDenied
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from mcs_host.frameworks._offer import Caller, Failure, Offered

__all__: list[str] = []

_ANY_ARGUMENTS = SchemaValidator(
    core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema())
)
"""Takes any JSON object as it is: the stack checks the arguments against the tool's schema."""


class StackToolset(AbstractToolset[Any]):
    """The offered tools of one load, each call through its stack."""

    __slots__ = ("_calls", "_definitions", "_id", "_max_retries")

    def __init__(
        self, tools: Sequence[Offered], calls: Caller, max_retries: int, id: str | None
    ) -> None:
        self._calls = calls
        self._max_retries = max_retries
        self._id = id
        self._definitions = tuple(_definition(tool) for tool in tools)

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        return {
            definition.name: ToolsetTool(
                toolset=self,
                tool_def=definition,
                max_retries=self._max_retries,
                args_validator=_ANY_ARGUMENTS,
            )
            for definition in self._definitions
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """The call's result; a consent plugin's denial as PydanticAI's own (``ToolDenied``: the
        model reads it as the call's result, recorded with the outcome ``denied``);
        ``ApprovalRequired`` for a call waiting for the user's approval (it runs when
        PydanticAI calls again, approved); else ``ModelRetry`` with the reason for the model."""
        approve = True if ctx.tool_call_approved else None
        try:
            return await self._calls.acall(name, tool_args, approve)
        except Failure as failure:
            if failure.kind == "denied":
                return ToolDenied(failure.message)
            if failure.kind == "asked":
                raise ApprovalRequired(metadata={"question": failure.question}) from None
            raise ModelRetry(failure.message) from None


def _definition(tool: Offered) -> ToolDefinition:
    return ToolDefinition(
        name=tool.name,
        parameters_json_schema=dict(tool.schema),
        description=tool.description or tool.title or None,
        metadata={"mcs_host": tool.facts()},
    )
