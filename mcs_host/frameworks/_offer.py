"""What every agent framework's adapter shares: the tools a load offers, filtered, and one call
of one of them through the stack's validation, consent and audit.

An adapter takes what :func:`~mcs_host.load_drivers` returns, so only drivers that passed
verification reach a framework. Each tool keeps the name the stack offers it under
(``<label>__<name>`` where namespaced) and its input schema exactly. A call goes through
:meth:`~mcs_host.Orchestrator.execute_tool`: the arguments checked against the schema, the
consent plugins asked, the audit told; what stops it comes back as a :class:`Failure` of one
kind, which each adapter turns into its framework's own signal (a retry, a message to the
model, a request for approval). A call that needs approval (to an MCP server that requires
consent, :attr:`~mcs_host.Loaded.gated`) is put to the framework's user when no consent
plugin approves it: ``approve`` says how.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from mcs_host.bridge.elicitation import asking
from mcs_host.interfaces import ToolArgumentError, UnknownToolError
from mcs_host.orchestration.execution import NotApproved, failed_text

if TYPE_CHECKING:
    from mcs_host.bridge.elicitation import Answer
    from mcs_host.loading.records import Loaded
    from mcs_host.orchestration.orchestrator import Orchestrator

__all__: list[str] = []  # the adapters'; nothing public

Approve = Callable[[str], "bool | Awaitable[bool]"]
"""Asked the question of a call that needs approval; ``True`` runs it."""
Approval = bool | Approve | None
"""How a call that needs approval is approved: ``True``, the framework's user approved it
already; ``None``, it is not run and the call fails as ``asked`` (the framework defers it);
``False``, no one can be asked (it is denied, saying what would waive that); a function, ask
it."""

Kind = Literal["arguments", "unknown", "denied", "asked", "failed"]


class Failure(Exception):  # noqa: N818 - reads as what the call came to
    """What stopped a call: ``arguments`` its tool refused (the schema's check or the tool's
    :class:`~mcs_host.interfaces.ToolArgumentError`), an ``unknown`` tool, ``denied`` by
    consent, ``asked``: it waits for the framework's user to approve it, or ``failed``."""

    def __init__(self, kind: Kind, message: str, question: str | None = None) -> None:
        super().__init__(message)
        self.kind: Kind = kind
        self.message = message
        """What the model is told."""
        self.question = question
        """For ``asked``: what the user is to approve."""


@dataclass(frozen=True, slots=True)
class Offered:
    """One tool as a framework gets it."""

    name: str
    """The name the stack offers it under (``<label>__<name>`` where namespaced)."""
    label: str
    """The mount it comes from."""
    own_name: str
    """Its name as its driver gives it."""
    title: str | None
    description: str
    schema: Mapping[str, Any]
    """Its input schema, exactly as its driver gives it."""
    annotations: Mapping[str, Any]
    """The hints its driver declared (``readOnlyHint``...), none claimed for it."""
    gated: bool
    """Each call needs a consent plugin's approval, or the user's."""

    def facts(self) -> dict[str, Any]:
        """What a framework keeps as the tool's metadata (``metadata["mcs_host"]``): its
        label, its driver's own name, its title, its annotations, whether it is gated."""
        return {
            "label": self.label,
            "own_name": self.own_name,
            "title": self.title,
            "annotations": dict(self.annotations),
            "gated": self.gated,
        }


def offered(
    loaded: Loaded,
    labels: str | Iterable[str] = (),
    tools: str | Iterable[str] = (),
    *,
    who: str,
) -> tuple[Offered, ...]:
    """The tools of ``loaded`` for ``who`` (the adapter, named in errors): those of the
    mounts ``labels`` (default: all) that are among ``tools`` (final names; default: all).
    Raises :class:`TypeError` for what is no load, :class:`ValueError` naming a label or
    tool that matches nothing."""
    stack = _stack_of(loaded, who)
    wanted_labels = _names(labels, f"{who} argument 'labels'")
    wanted_tools = _names(tools, f"{who} argument 'tools'")
    mounted = stack.labels
    for label in wanted_labels:
        if label not in mounted:
            known = ", ".join(mounted) or "none"
            raise ValueError(f"{who}: no driver is mounted as {label!r}; mounted: {known}")
    gated = frozenset(getattr(loaded, "gated", ()))
    found: list[Offered] = []
    names: list[str] = []
    for tool in stack.list_tools():
        label, own_name = stack.route(tool.name)
        names.append(tool.name)
        if wanted_labels and label not in wanted_labels:
            continue
        if wanted_tools and tool.name not in wanted_tools:
            continue
        claimed = tool.annotations.claimed if tool.annotations is not None else {}
        found.append(
            Offered(
                tool.name,
                label,
                own_name,
                tool.title or None,
                tool.description or "",
                copy.deepcopy(tool.input_schema()),  # a framework may edit it: not the tool's
                dict(claimed),
                label in gated,
            )
        )
    for name in wanted_tools:
        if name not in names:
            listed = ", ".join(names) or "none"
            raise ValueError(f"{who}: no tool is offered as {name!r}; the tools are: {listed}")
    return tuple(found)


class Caller:
    """Calls of the tools one adapter offers, each through the stack of its load."""

    __slots__ = ("_gated", "_names", "caller", "stack", "unasked", "where")

    def __init__(
        self,
        loaded: Loaded,
        tools: Iterable[Offered],
        caller: str | None,
        where: str,
        unasked: str = "",
    ) -> None:
        self.stack: Orchestrator = loaded.driver
        tools = tuple(tools)
        self._names = frozenset(t.name for t in tools)
        self._gated = frozenset(t.name for t in tools if t.gated)
        self.caller = caller
        """Who asks for the calls (:attr:`~mcs_host.ToolCall.caller`), for consent and audit."""
        self.where = where
        """Where the user approves a call, as a denial names it: ``PydanticAI``..."""
        self.unasked = unasked
        """When no one can be asked (``approve`` is ``False``): what would have the user
        asked, which the denial names (``pass approve= to langchain_tools()``)."""

    def call(
        self, name: str, arguments: dict[str, Any], approve: Approval, with_text: bool = False
    ) -> Any:
        """The result of calling ``name`` with ``arguments`` (copied, never changed) in this
        thread (``with_text``: ``(result, its text as the model reads it)``); raises
        :class:`Failure`. An ``approve`` function is called in this thread too."""
        self._known(name)
        ask = _plain(approve) if name in self._gated else None
        try:
            if name not in self._gated or (ask is None and not self.unasked):
                return self._run(name, arguments, with_text)
            with asking(ask, None, self.where, self.unasked):
                return self._run(name, arguments, with_text)
        except (Failure, KeyboardInterrupt):
            raise
        except BaseException as exc:  # sys.exit() in a tool too: it never ends the agent
            raise _failure(name, exc, ask) from None

    async def acall(
        self, name: str, arguments: dict[str, Any], approve: Approval, with_text: bool = False
    ) -> Any:
        """:meth:`call` on an event loop: a sync tool runs in a worker thread, an ``approve``
        function may be a coroutine function."""
        self._known(name)
        ask = _awaiting(approve) if name in self._gated else None
        stack = self.stack
        try:
            if name not in self._gated or (ask is None and not self.unasked):
                return await stack.aexecute_tool(
                    name, arguments, caller=self.caller, with_text=with_text
                )
            loop = asyncio.get_running_loop() if ask is not None else None
            with asking(ask, loop, self.where, self.unasked):
                return await stack.aexecute_tool(
                    name, arguments, caller=self.caller, with_text=with_text
                )
        except (KeyboardInterrupt, asyncio.CancelledError):
            raise
        except BaseException as exc:
            raise _failure(name, exc, ask) from None

    def _run(self, name: str, arguments: dict[str, Any], with_text: bool) -> Any:
        return self.stack.execute_tool(name, arguments, caller=self.caller, with_text=with_text)

    def _known(self, name: str) -> None:
        if name not in self._names:
            listed = ", ".join(sorted(self._names)) or "none"
            raise Failure("unknown", f"unknown tool {name!r}; the tools are: {listed}")


class _Deferred:
    """An ask that approves nothing and keeps the question: the framework asks its user."""

    __slots__ = ("question",)

    def __init__(self) -> None:
        self.question: str | None = None

    def __call__(self, question: str) -> Answer | None:
        self.question = question
        return None


class _AsyncDeferred(_Deferred):
    __slots__ = ()

    async def __call__(self, question: str) -> Answer | None:  # type: ignore[override]
        self.question = question
        return None


def _plain(approve: Approval) -> Callable[[str], Answer | None] | None:
    """``approve`` as a plain ask (``None`` when no one can be asked)."""
    if approve is False:
        return None
    if approve is None:
        return _Deferred()
    if approve is True:
        return _accepted
    decide = approve

    def ask(question: str) -> Answer:
        verdict = decide(question)
        if inspect.isawaitable(verdict):
            verdict = asyncio.run(_awaited(verdict))
        return "accept" if verdict is True else "decline"

    return ask


def _awaiting(approve: Approval) -> Callable[[str], Awaitable[Answer | None]] | None:
    """``approve`` as an ask awaited on the event loop."""
    if approve is False:
        return None
    if approve is None:
        return _AsyncDeferred()
    if approve is True:
        return _aaccepted
    decide = approve

    async def ask(question: str) -> Answer:
        verdict = decide(question)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        return "accept" if verdict is True else "decline"

    return ask


def _accepted(question: str) -> Answer:
    return "accept"


async def _aaccepted(question: str) -> Answer:
    return "accept"


async def _awaited(work: Awaitable[bool]) -> bool:
    return await work


def _failure(name: str, error: BaseException, ask: object) -> Failure:
    """The :class:`Failure` of a call of ``name`` that ``error`` stopped."""
    if isinstance(error, NotApproved):
        question = ask.question if isinstance(ask, _Deferred) else None
        if question is not None:
            return Failure("asked", str(error), question)
        return Failure("denied", str(error))
    if isinstance(error, UnknownToolError):
        return Failure("unknown", str(error))
    if isinstance(error, ToolArgumentError):
        text = str(error)
        return Failure("arguments", text if text.startswith(name) else f"{name}: {text}")
    return Failure("failed", failed_text(name, error))


def require(module: str, extra: str, who: str) -> Any:
    """The framework's ``module``, imported; an :class:`ImportError` for ``who`` naming the
    command that installs mcs-host's ``extra`` when it is not installed."""
    import importlib  # noqa: PLC0415

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        from mcs_host._install_hint import extra_command  # noqa: PLC0415

        raise ImportError(
            f"{who} needs {module}, which is not installed ({exc}): {extra_command(extra)}"
        ) from exc


def _stack_of(loaded: object, who: str) -> Orchestrator:
    from mcs_host.orchestration.orchestrator import Orchestrator  # noqa: PLC0415

    stack = getattr(loaded, "driver", None)
    if not isinstance(stack, Orchestrator):
        raise TypeError(
            f"{who} takes what load_drivers() returns (a Loaded), not {type(loaded).__name__}"
        )
    return stack


def _names(value: str | Iterable[str], argument: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    names = tuple(value)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"{argument} must hold strings, not {type(name).__name__}")
    return names
