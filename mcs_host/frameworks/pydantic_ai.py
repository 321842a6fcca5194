"""Verified drivers as a PydanticAI toolset (``pydantic-ai-slim``; imported when used).

The toolset gives the model each tool's JSON schema exactly as offered and checks nothing
itself (its argument validator takes any object, as PydanticAI's own MCP toolset does): each
call goes through the stack's check of its arguments, its consent plugins and its audit. What
stops a call becomes PydanticAI's own signal: arguments the stack refused, an unknown tool or a
failed call a ``ModelRetry`` (the model reads why and tries again), a consent plugin's denial
PydanticAI's own (``ToolDenied``), and a call that needs approval PydanticAI's deferred approval
(``ApprovalRequired``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from mcs_host.frameworks._offer import Caller, offered, require

if TYPE_CHECKING:
    from pydantic_ai.toolsets import AbstractToolset

    from mcs_host.loading.records import Loaded

__all__ = ["pydantic_ai_toolset"]

_WHO = "pydantic_ai_toolset()"


def pydantic_ai_toolset(
    loaded: Loaded,
    *,
    labels: str | Iterable[str] = (),
    tools: str | Iterable[str] = (),
    caller: str | None = None,
    max_retries: int = 1,
    id: str | None = None,
) -> AbstractToolset[Any]:
    """The tools of ``loaded`` (what :func:`~mcs_host.load_drivers` returns) as a PydanticAI
    toolset, for ``Agent(toolsets=[...])``: those of the mounts ``labels`` (default: all)
    among ``tools`` (their final names; default: all), named as the stack offers them.

    Each tool's definition has the tool's JSON schema as offered and, in its ``metadata``
    under ``"mcs_host"``, the tool's mount label, its driver's own name for it, its title,
    the hints its driver declared (``annotations``) and whether each call needs approval
    (``gated``). A call the stack refused as to its arguments, of a tool not offered, or that
    failed raises ``ModelRetry``: the model reads why and may try again, at most
    ``max_retries`` times for one tool. A call a consent plugin denied gives the denial as
    its result, as PydanticAI's ``ToolDenied`` does (outcome ``denied``). A call that needs
    approval (:attr:`~mcs_host.Loaded.gated`), when no consent plugin approved it, raises
    ``ApprovalRequired`` with the question in its metadata (``{"question": ...}``): the run
    ends with it among ``DeferredToolRequests.approvals``, and it runs when the next run is
    given ``DeferredToolResults(approvals={call_id: True})``. ``caller`` names who calls,
    for consent plugins and the audit (:attr:`~mcs_host.ToolCall.caller`); ``id`` is the
    toolset's id (PydanticAI's durable execution needs one).

    The toolset does not own the load: entering and leaving it (each agent run does) leaves
    the drivers mounted; close the load itself, as ``with load_drivers(...) as loaded:`` does.

    Raises :class:`TypeError` when ``loaded`` is not a load, :class:`ValueError` naming a
    label or tool that matches nothing or a negative ``max_retries``, :class:`ImportError`
    naming the command that installs ``pydantic-ai-slim`` when it is missing.
    """
    found = offered(loaded, labels, tools, who=_WHO)
    if isinstance(max_retries, bool) or not isinstance(max_retries, int):
        raise TypeError(
            f"{_WHO} argument 'max_retries' must be an int, not {type(max_retries).__name__}"
        )
    if max_retries < 0:
        raise ValueError(f"{_WHO} argument 'max_retries' must be 0 or more, not {max_retries}")
    if id is not None and not isinstance(id, str):
        raise TypeError(f"{_WHO} argument 'id' must be a string or None, not {type(id).__name__}")
    require("pydantic_ai", "pydantic-ai", _WHO)
    from mcs_host.frameworks._pydantic_ai_toolset import StackToolset  # noqa: PLC0415

    return StackToolset(found, Caller(loaded, found, caller, "PydanticAI"), max_retries, id)
