"""The ``llm`` tool of one offered tool (imports ``llm``: imported only when
:func:`~mcs_host.llm_tools` is called or ``llm`` asks the plugin for its tools).

``llm`` calls a tool's ``implementation`` with the model's arguments as keyword arguments and
turns an exception it raises into the tool's output, ``Error: <message>``, sent back to the
model; the chain goes on. Its synchronous chain calls the implementation and uses what it
returns; its asynchronous chain calls it on the event loop and awaits what it returns when
that is awaitable (and would run a coroutine function's calls as concurrent tasks, but a
synchronous chain would ``asyncio.run`` it). So the implementation is a plain function that
returns the coroutine of the stack's async call when the code calling it is a coroutine (the
asynchronous chain), and calls the stack in the thread otherwise.
"""

from __future__ import annotations

import asyncio
import inspect
import keyword
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import click
import llm

from mcs_host.frameworks._offer import Approval, Caller, Offered

__all__: list[str] = []

_LLM_ARGUMENT = "llm_tool_call"
"""The parameter ``llm`` passes its ``ToolCall`` to, when an implementation names it."""


def stack_tool(tool: Offered, caller: Caller, approve: Approval | None, plugin: str) -> llm.Tool:
    """``tool`` as an ``llm.Tool`` of ``plugin``: its name, description and JSON schema as
    offered, each call through ``caller``; what stops a call raises the
    :class:`~mcs_host.frameworks._offer.Failure`, whose message ``llm`` gives the model.
    ``approve`` is passed to the stack as it is; ``None`` is llm's way (:func:`llm_approval`)."""
    name = tool.name
    gated = tool.gated

    def run(**arguments: Any) -> Any:
        # llm's way of approving is read only for a call that may need it
        decide = llm_approval() if approve is None and gated else approve
        if _awaited_by_caller():
            return _acall(caller, name, arguments, decide)
        if _loop_running():  # a synchronous chain in a thread that runs an event loop
            with ThreadPoolExecutor(1, thread_name_prefix=f"llm tool {name}") as pool:
                return pool.submit(_call, caller, name, arguments, decide).result()
        return _call(caller, name, arguments, decide)

    run.__name__ = run.__qualname__ = name if name.isidentifier() else "tool"
    run.__doc__ = tool.description or tool.title or None
    signature = _signature(tool.schema)
    if signature is not None:
        run.__signature__ = signature  # type: ignore[attr-defined]  # what `llm tools` shows
    return llm.Tool(
        name=name,
        description=tool.description or tool.title or None,
        input_schema=dict(tool.schema),
        implementation=run,
        plugin=plugin,
    )


def _call(caller: Caller, name: str, arguments: dict[str, Any], approve: Approval) -> str:
    _, text = caller.call(name, arguments, approve, with_text=True)  # a Failure goes to llm
    return str(text)


async def _acall(caller: Caller, name: str, arguments: dict[str, Any], approve: Approval) -> str:
    _, text = await caller.acall(name, arguments, approve, with_text=True)
    return str(text)


def _awaited_by_caller() -> bool:
    """Whether the code that called the implementation is a coroutine on this thread's running
    event loop: ``llm``'s asynchronous chain, which awaits what the implementation returns."""
    if not _loop_running():
        return False
    frame = sys._getframe(2)
    return bool(frame.f_code.co_flags & inspect.CO_COROUTINE)


def _loop_running() -> bool:
    return asyncio._get_running_loop() is not None  # asks without raising


def _signature(schema: Any) -> inspect.Signature | None:
    """The keyword-only signature of the schema's properties (required ones first), as
    ``llm tools list`` shows it; ``None`` when one is no Python name, or is the name under
    which ``llm`` would pass its own ``ToolCall``."""
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    required = schema.get("required", []) if isinstance(schema, dict) else []
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    names = [str(n) for n in properties]
    if any(not n.isidentifier() or keyword.iskeyword(n) or n == _LLM_ARGUMENT for n in names):
        return None
    ordered = [n for n in names if n in required] + [n for n in names if n not in required]
    return inspect.Signature(
        [
            inspect.Parameter(
                n,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if n in required else None,
            )
            for n in ordered
        ]
    )


def llm_approval() -> Approval:
    """How a call that needs approval is approved the way ``llm`` approves tool calls: when
    ``llm`` runs with ``--ta`` (``--tools-approve``), it asked "Approve tool call?" before
    this call and the user said yes (``True``); else, when stdin is a terminal, the user is
    asked there in ``llm``'s style (:func:`confirm`); else no one can be (``False``)."""
    if tools_approved():
        return True
    stdin = sys.stdin
    if stdin is not None and stdin.isatty():
        return confirm
    return False


def tools_approved() -> bool:
    """Whether the running command is ``llm``'s ``prompt`` or ``chat`` given ``--ta``."""
    params = llm_command_params()
    return params is not None and params.get("tools_approve") is True


def llm_command_params() -> dict[str, Any] | None:
    """The parameters of the ``llm`` command (``prompt``, ``chat``...) this code runs in;
    ``None`` outside ``llm``'s command line."""
    context = click.get_current_context(silent=True)
    if context is None:
        return None
    callback: Callable[..., Any] | None = context.command.callback
    if callback is None or getattr(callback, "__module__", None) != "llm.cli":
        return None
    return dict(context.params)


def confirm(question: str) -> bool:
    """``question`` on stderr in the style of ``llm --ta``, then its "Approve tool call?"."""
    click.echo(
        click.style(f"Tool call needs approval: {question}", fg="yellow", bold=True), err=True
    )
    return click.confirm("Approve tool call?")
