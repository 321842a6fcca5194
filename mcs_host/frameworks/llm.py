"""Verified drivers as tools of Simon Willison's ``llm`` (imported when used): the tools of a
load for Python (:func:`llm_tools`), and the ``llm`` plugin that gives ``llm -T NAME`` the
tools of the drivers your mcs-host configuration mounts.

Each tool keeps the name and the JSON schema the stack offers; each call goes through the
stack's check of its arguments, its consent plugins and its audit. What stops a call is an
exception whose message ``llm`` sends the model as the tool's output (``Error: ...``); the
chain goes on. A call that needs approval (:attr:`~mcs_host.Loaded.gated`), when no consent
plugin approved it, is approved the way ``llm`` approves tool calls: under ``llm --ta`` by
the user's yes to its "Approve tool call?" before the call; else, on a terminal, by a yes to
the same question, asked then; else it is denied, saying what would approve it.

The plugin is this module, the entry point ``mcs_host`` of the group ``llm``: its
:func:`register_tools` loads the drivers once per process, when ``llm`` first gathers tools
for a command that may use them.
"""

from __future__ import annotations

import atexit
import sys
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import llm

    from mcs_host.frameworks._offer import Approval, Offered
    from mcs_host.loading.records import Loaded

__all__ = ["llm_tools"]

_WHO = "llm_tools()"
_PLUGIN = "mcs_host"
"""The plugin's name in ``llm``: its entry point's, which ``llm`` sets as each tool's
``plugin``."""

_hookimpl = pluggy.HookimplMarker("llm")


def llm_tools(
    loaded: Loaded,
    *,
    labels: str | Iterable[str] = (),
    tools: str | Iterable[str] = (),
    caller: str | None = None,
    approve: Approval = None,
) -> list[llm.Tool]:
    """The tools of ``loaded`` (what :func:`~mcs_host.load_drivers` returns) as ``llm``
    tools, for ``model.chain(prompt, tools=...)`` or a conversation's: those of the mounts
    ``labels`` (default: all) among ``tools`` (their final names; default: all), named as
    the stack offers them, each with its JSON schema as ``input_schema`` and the plugin
    ``mcs-host``.

    A call's output is its result as the model reads it (JSON for what is not text); a call
    the stack refused, or that failed, raises an exception ``llm`` turns into the output
    ``Error: <reason>`` (its ``ToolResult.exception``). ``caller`` names who calls, for
    consent plugins and the audit (:attr:`~mcs_host.ToolCall.caller`). A call that needs
    approval (:attr:`~mcs_host.Loaded.gated`), when no consent plugin approved it: with
    ``approve=None``, the user is asked "Approve tool call?" when stdin is a terminal (not
    when ``llm --ta`` asked already), else it is denied, the reason saying what would approve
    it; a function ``approve(question)`` returning ``True`` runs it (a coroutine function's
    result is awaited); ``True`` runs it, ``False`` denies it.

    Raises :class:`TypeError` when ``loaded`` is not a load or ``approve`` is none of these,
    :class:`ValueError` naming a label or tool that matches nothing, :class:`ImportError`
    naming the command that installs ``llm`` when it is missing.
    """
    # imported here, not at the top: llm imports this module at every start, tools or not
    from mcs_host.frameworks._offer import Caller, offered, require  # noqa: PLC0415

    found = offered(loaded, labels, tools, who=_WHO)
    if approve is not None and not isinstance(approve, bool) and not callable(approve):
        raise TypeError(
            f"{_WHO} argument 'approve' must be True, False, a function or None, "
            f"not {type(approve).__name__}"
        )
    require("llm", "llm", _WHO)
    from mcs_host.frameworks._llm_tool import stack_tool  # noqa: PLC0415 - imports llm

    calls = Caller(loaded, found, caller, "llm", "pass approve= to llm_tools()")
    return [stack_tool(tool, calls, approve, "mcs-host") for tool in found]


# -- the plugin ------------------------------------------------------------------------------


class _Plugin:
    """What the plugin loaded in this process: the tools and their load, or what failed."""

    __slots__ = ("failed", "loaded", "tools")

    def __init__(self) -> None:
        self.loaded: Loaded | None = None
        self.tools: tuple[Offered, ...] = ()
        self.failed: str | None = None


_LOCK = threading.Lock()
_LOADED: list[_Plugin] = []  # at most one: the load of this process


@_hookimpl
def register_tools(register: Callable[..., Any]) -> None:
    """``llm``'s hook: register each tool of the drivers the user's mcs-host configuration
    mounts (:func:`~mcs_host.load_drivers` with no arguments: your configuration, your
    registries, verification as always), loaded at the first call that may need them and
    kept for the process. A load that fails registers nothing and says so in one line on
    stderr, with the fix the error names, and a driver the load rejected or that failed is
    named in one line each; ``llm`` goes on."""
    from mcs_host.frameworks._llm_tool import llm_command_params, stack_tool  # noqa: PLC0415
    from mcs_host.frameworks._offer import Caller  # noqa: PLC0415

    if _no_tools_wanted(llm_command_params()):
        return
    plugin = _plugin()
    if plugin.loaded is None:
        return
    calls = Caller(plugin.loaded, plugin.tools, "llm", "llm", "run llm with --ta (--tools-approve)")
    for tool in plugin.tools:
        register(stack_tool(tool, calls, None, _PLUGIN))


def _no_tools_wanted(params: dict[str, Any] | None) -> bool:
    """Whether the running command is ``llm``'s ``prompt`` or ``chat`` using no tool: ``llm``
    gathers every plugin's tools for each prompt, but one that names no tool (``-T``), no
    template (which may name tools) and continues no conversation (which may have used
    some) uses none, so it need not load the drivers."""
    if params is None or "tools" not in params:
        return False
    try:
        return (
            not params["tools"]
            and not params["template"]
            and not params["_continue"]
            and params["conversation_id"] is None
        )
    except KeyError:  # an llm whose command line differs: load, to be safe
        return False


def _plugin() -> _Plugin:
    """This process's load of the configured drivers: made at the first call."""
    with _LOCK:
        if _LOADED:
            return _LOADED[0]
        plugin = _Plugin()
        _LOADED.append(plugin)
        try:
            from mcs_host.loading.host import load_drivers  # noqa: PLC0415

            loaded = load_drivers()
        except Exception as exc:
            plugin.failed = " ".join(str(exc).split()) or type(exc).__name__
            sys.stderr.write(
                f"mcs-host: no tools for llm: loading the drivers your mcs-host configuration "
                f"mounts failed: {plugin.failed}\n"
            )
            return plugin
        atexit.register(loaded.close)
        for record in loaded.report.records:
            if record.status in ("rejected", "failed"):
                said = " ".join(record.message.split())
                sys.stderr.write(
                    f"mcs-host: no tools of {record.label} for llm: it was {record.status} "
                    f"({record.reason}): {said}\n"
                )
        plugin.loaded = loaded
        from mcs_host.frameworks._offer import offered  # noqa: PLC0415

        plugin.tools = offered(loaded, who="the mcs-host plugin of llm")
        return plugin
