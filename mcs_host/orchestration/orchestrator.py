"""The orchestrator: mounted drivers behind one ``MCSDriver`` that is also an ``MCSToolDriver``.

ToolDrivers (and other orchestrators, and hybrid drivers) contribute tools; standalone
MCSDrivers are chained after them in the spec's pass-through manner. Tool names are never
resolved first-wins: a name two drivers share becomes ``<label>__<name>`` for both (or every
name is namespaced, with ``namespace="always"``), cut to the ``[A-Za-z0-9_-]{1,64}`` that
provider APIs accept. Routing a call is one dictionary lookup.

Each call is validated against its tool's JSON Schema before it runs.
:meth:`Orchestrator.detect` finds calls without running them and
:meth:`Orchestrator.execute` runs them, so a client (or the ``consent`` callback) can
approve, edit or deny each one in between; :meth:`Orchestrator.process_llm_response` does
both. An exception in a tool becomes a failed call, never an exception for the client; so
does ``sys.exit()`` and a closed or replaced standard stream (which is put back).
:meth:`Orchestrator.aprocess_llm_response` and :meth:`Orchestrator.aexecute` are the same
steps on an event loop: async tools are awaited, sync ones run in a worker thread.

Consent and audit belong to the orchestrator that mounts the tool.
:meth:`Orchestrator.execute_tool` and :meth:`Orchestrator.aexecute_tool`, what an orchestrator
stacked in another is called with, take the same steps for one call (admit, consent, run,
audit) and raise where :meth:`Orchestrator.execute` answers: a denial as a
:class:`ToolError` the stacking orchestrator answers as its own denial, the tool's exception
as it was raised. So a call reaches a tool only through the consent and the audit of every
orchestrator on its way, however deep the stack and whichever entry point.

One module: the orchestrator is one class whose mounting, routing, call execution and stacking
share its tables of tools and drivers.
"""

from __future__ import annotations

import inspect
import re
import sys
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from mcs_host._bounded import Hung, call_bounded
from mcs_host._version import __version__
from mcs_host.interfaces import (
    MCSDriver,
    MCSToolDriver,
    SupportsDriverContext,
    ToolCallSignaling,
    ToolError,
    UnknownToolError,
    implemented_capabilities,
    is_standalone_driver,
    is_tool_driver,
)

from .calls import Detection, TextFormat, ToolCall
from .detection import detect
from .leftovers import release, restore_streams
from .messages import Provider, messages_for, native_tools, result_text
from .prompting import Prompts, render_tools
from .response_schema import ResponseSchema, response_schema
from .routing import Route, Routing, Table
from .streaming import TextStream, is_complete, is_complete_tool_call, might_be_tool_call
from .text import TextFormats
from .validation import ArgumentValidator, compile_schema

if TYPE_CHECKING:
    from mcs_host.contract import Binding, DriverContext, DriverMeta, DriverResponse, Tool

__all__ = ["Orchestrator"]

_LABEL_REFUSED = re.compile(r"[^A-Za-z0-9_-]")

Consent = Callable[[ToolCall], "bool | str | ToolCall | Awaitable[bool | str | ToolCall]"]
"""Approve a call (``True``), deny it (``False``, or a string saying why), or approve an
edited one (a :class:`ToolCall`, e.g. ``call.with_arguments(...)``); or a coroutine function
giving one of those."""
Audit = Callable[[ToolCall, Any, BaseException | None], None]


def _import_contract() -> None:
    """Bind the contract's data types here. Called by the first orchestrator made, so that
    importing this module (``mcs_host.Orchestrator``) imports no pydantic."""
    global Binding, DriverContext, DriverMeta, DriverResponse, Tool  # noqa: PLW0603
    from mcs_host.contract import (  # noqa: PLC0415
        Binding,
        DriverContext,
        DriverMeta,
        DriverResponse,
        Tool,
    )


@dataclass(frozen=True, slots=True)
class _Mount:
    driver: Any
    tools: tuple[tuple[Tool, ArgumentValidator], ...] | None
    """Each tool with its compiled schema; ``None`` for a standalone MCSDriver, which is
    chained rather than routed to."""


def _mount(label: str, driver: object, tools: Sequence[Any] | None = None) -> _Mount:
    """``driver`` with its validated tools and their compiled schemas (once per mount)."""
    if is_tool_driver(driver):
        listed = driver.list_tools() if tools is None else tools
        coerced = tuple(Tool.coerce(t) for t in listed)
        twice = [name for name, n in Counter(t.name for t in coerced).items() if n > 1]
        if twice:
            raise ValueError(f"driver {label!r} lists the tool {twice[0]!r} twice")
        compiled = []
        for tool in coerced:
            try:
                compiled.append((tool, compile_schema(tool.input_schema())))
            except ValueError as exc:
                raise ValueError(f"driver {label!r}, tool {tool.name!r}: {exc}") from None
        return _Mount(driver, tuple(compiled))
    if is_standalone_driver(driver):
        return _Mount(driver, None)
    raise TypeError(
        f"driver {label!r} ({type(driver).__qualname__}) is neither a ToolDriver "
        "(list_tools, execute_tool) nor an MCSDriver (process_llm_response)"
    )


class Orchestrator(MCSDriver, MCSToolDriver, SupportsDriverContext, ToolCallSignaling):
    """Mounted drivers as one driver. ``drivers`` is a mapping label -> driver, or a sequence
    whose labels come from each driver's ``meta.name``.

    ``on_unknown``: a call for a tool nobody offers fails with a retry prompt listing the
    tools (``"fail"``, right for the orchestrator a client talks to), or passes through with
    an empty response (``"pass"``, for one placed in a chain of drivers). ``call_timeout``
    bounds each tool call in seconds. ``consent`` approves each call and ``audit`` is told of
    each call that ran, whichever method it came in by (:meth:`execute_tool` too, what an
    orchestrator stacking this one calls). ``prompts`` is a prompts file overriding the defaults.
    ``text_formats`` adds formats to the built-in ones (a name used twice is a
    ``ValueError``).
    """

    def __init__(
        self,
        drivers: Mapping[str, object] | Sequence[object] = (),
        *,
        name: str = "mcs-host orchestrator",
        namespace: Literal["on-collision", "always"] = "on-collision",
        on_unknown: Literal["pass", "fail"] = "fail",
        consent: Consent | None = None,
        audit: Audit | None = None,
        call_timeout: float | None = None,
        prompts: Prompts | str | None = None,
        text_formats: Iterable[TextFormat] = (),
    ) -> None:
        if "Tool" not in globals():
            _import_contract()
        self.name = name
        self.namespace = namespace
        self.on_unknown = on_unknown
        self.consent = consent
        self.audit = audit
        self.call_timeout = call_timeout
        self.prompts = prompts if isinstance(prompts, Prompts) else Prompts.load(prompts)
        self.text_formats = TextFormats(text_formats)
        """The text formats tried, built-in and ``text_formats``, in order."""
        self._lock = threading.Lock()
        self._mounted: dict[str, _Mount] = {}
        items = drivers.items() if isinstance(drivers, Mapping) else _labelled(drivers)
        for label, driver in items:
            self._mounted[_check_label(label, self._mounted)] = _mount(label, driver)
        self._routing = self._route(self._mounted)
        self._table = self._routing.table()

    # -- mounting ------------------------------------------------------------------------------

    def mount(self, label: str, driver: object, tools: Sequence[Tool] | None = None) -> None:
        """Add ``driver`` under ``label``; tool names are worked out again.

        ``tools`` are the driver's tools when the caller already listed them (the host does,
        with a timeout); otherwise ``list_tools`` is called here.
        """
        with self._lock:
            mounted = dict(self._mounted)
            label = _check_label(label, mounted)
            mounted[label] = new = _mount(label, driver, tools)
            if self._routing.always != (self.namespace == "always"):
                self._routing = self._route(mounted)  # the policy changed: name every tool again
            else:
                self._routing.add(label, new.driver, new.tools)
            self._table = self._routing.table()
            self._mounted = mounted

    def unmount(self, label: str) -> None:
        """Remove the driver mounted under ``label``."""
        with self._lock:
            if label not in self._mounted:
                raise KeyError(f"no driver is mounted as {label!r}")
            mounted = {k: v for k, v in self._mounted.items() if k != label}
            self._routing = self._route(mounted)
            self._table = self._routing.table()
            self._mounted = mounted

    def refresh(self) -> None:
        """Ask every mounted driver for its tools again."""
        with self._lock:
            mounted = {label: _mount(label, m.driver) for label, m in self._mounted.items()}
            self._routing = self._route(mounted)
            self._table = self._routing.table()
            self._mounted = mounted

    @property
    def labels(self) -> tuple[str, ...]:
        return self._table.labels

    def driver(self, label: str) -> object:
        return self._mounted[label].driver

    def route(self, name: str) -> tuple[str, str]:
        """``(label, the driver's own tool name)`` for a tool name this orchestrator offers."""
        route = self._table.routes.get(name)
        if route is None:
            raise UnknownToolError(name, self._table.routes)
        return route.label, route.tool.name

    def _route(self, mounted: Mapping[str, _Mount]) -> Routing:
        """The names and routes of ``mounted``, worked out from the start."""
        routing = Routing(self.namespace == "always")
        for label, mount in mounted.items():
            routing.add(label, mount.driver, mount.tools)
        return routing

    # -- MCSToolDriver ---------------------------------------------------------------------------

    @property
    def meta(self) -> DriverMeta:  # type: ignore[override]
        bindings: dict[Binding, None] = {}
        for mount in self._mounted.values():
            meta = getattr(mount.driver, "meta", None)
            for binding in getattr(meta, "bindings", None) or ():
                bindings.setdefault(Binding.coerce(binding), None)
        return DriverMeta(
            id="mcs-host.orchestrator",
            name=self.name,
            version=__version__,
            bindings=tuple(bindings),
            target_llms=("*",),
            capabilities=tuple(sorted(implemented_capabilities(self))),
        )

    def list_tools(self) -> list[Tool]:
        return list(self._table.tools)

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        """Run one call as :meth:`execute` runs it (routed, validated, this orchestrator's
        consent asked, the audit told) and give its result; raise what stopped it: a denial
        (a :class:`ToolError` saying why), or the tool's own exception as it was raised."""
        table = self._table
        notes: list[str] = []
        admitted = self._admit(table, _tool_call(table, tool_name, arguments), notes)
        if self.consent is not None and not isinstance(admitted, _Failure):
            admitted = self._judge(table, *admitted, _ask(self.consent, admitted[1]), notes)
        if isinstance(admitted, _Failure):
            raise admitted.raised()
        return _returned(self._run(*admitted, raising=True))

    # -- MCSDriver -------------------------------------------------------------------------------

    def get_function_description(self, model_name: str | None = None) -> str:
        """The tools as JSON, XML or compact text, as the prompts file says for the model."""
        return render_tools(self._table.tools, self.prompts.rendering_for(model_name))

    def get_driver_system_message(self, model_name: str | None = None) -> str:
        parts = []
        if self._table.tools:
            rendering = self.prompts.rendering_for(model_name)
            tools = self.get_function_description(model_name)
            parts.append(self.prompts.text(self.prompts.system, rendering, tools=tools))
        for _, driver in self._table.chained:
            parts.append(driver.get_driver_system_message(model_name))
        return "\n\n".join(parts)

    def get_driver_context(self, model_name: str | None = None) -> DriverContext:
        """A system message without the tools, and the tools in the model's native format."""
        parts = [self.prompts.system["context"]] if self._table.tools else []
        parts += [d.get_driver_system_message(model_name) for _, d in self._table.chained]
        provider = self.prompts.provider_for(model_name)
        return DriverContext(system_message="\n\n".join(parts), tools=self.native_tools(provider))

    def native_tools(self, provider: Provider) -> list[dict[str, Any]]:
        """The tools in a provider's native tool-list shape (openai, openai-responses,
        anthropic, gemini, ollama)."""
        described = [(t.name, t.description or "", t.input_schema()) for t in self._table.tools]
        return native_tools(described, provider)

    def response_schema(self) -> ResponseSchema:
        """The JSON Schema of the answers the JSON protocol reads from a model whose output
        is constrained to it: a call of one of these tools, several calls, or the final
        answer (:mod:`.response_schema`). Standalone drivers' own formats are not in it."""
        return response_schema(self._table.tools)

    def might_be_tool_call(self, partial: str) -> bool:
        return might_be_tool_call(partial, self.text_formats, self._table.routes)

    def stream(self) -> TextStream:
        """A :class:`TextStream` for one response streamed as text: ``feed`` each chunk and
        show what it returns; ``finish`` returns what :meth:`process_llm_response` returns
        for the whole text."""
        return TextStream(self)

    def is_complete_tool_call(self, text: str) -> bool:
        return is_complete_tool_call(text, self._table.routes, self.text_formats)

    def process_llm_response(
        self, llm_response: str | Mapping[str, Any] | Any, streaming: bool = False
    ) -> DriverResponse:
        detection = self.detect(llm_response)
        step = self._next_step(detection, streaming)
        if step == "execute":
            return self.execute(detection)
        if step == "wait":
            return DriverResponse()
        for label, driver in self._table.chained:
            try:
                response = DriverResponse.coerce(
                    driver.process_llm_response(llm_response, streaming)
                )
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # a chained driver's exit must not reach the client
                return _chained_failed(label, exc)
            if not response.is_empty:
                return response
        return DriverResponse()

    async def aprocess_llm_response(
        self, llm_response: str | Mapping[str, Any] | Any, streaming: bool = False
    ) -> DriverResponse:
        """:meth:`process_llm_response` for an event loop: the same detection, consent and
        messages; async tools are awaited, sync ones run in a worker thread, so the loop
        goes on while a tool works. A consent callback may be async too."""
        import asyncio  # noqa: PLC0415 - asyncio costs 20 ms to import: only for async users

        detection = self.detect(llm_response)
        step = self._next_step(detection, streaming)
        if step == "execute":
            return await self.aexecute(detection)
        if step == "wait":
            return DriverResponse()
        for label, driver in self._table.chained:
            try:
                own = getattr(driver, "aprocess_llm_response", None)
                if own is not None and inspect.iscoroutinefunction(own):
                    answer = await own(llm_response, streaming)
                else:
                    answer = await asyncio.to_thread(
                        driver.process_llm_response, llm_response, streaming
                    )
                response = DriverResponse.coerce(answer)
            except (KeyboardInterrupt, asyncio.CancelledError):
                raise
            except BaseException as exc:
                return _chained_failed(label, exc)
            if not response.is_empty:
                return response
        return DriverResponse()

    def _next_step(self, detection: Detection, streaming: bool) -> str:
        """``execute`` the calls, ``wait`` for the rest of a call being streamed, or
        ``chain``: pass the response to the chained drivers."""
        if not detection.calls:
            return "chain"
        if streaming and not is_complete(detection):
            return "wait"  # a chunk of a call still being written
        if self.on_unknown == "fail":
            return "execute"
        routes = self._table.routes
        for call in detection.calls:
            if call.name in routes or call.problem:
                return "execute"
        return "chain"

    # -- the consent seam ----------------------------------------------------------------------

    def detect(self, llm_response: str | Mapping[str, Any] | Any) -> Detection:
        """The calls in ``llm_response`` (text, a native mapping or an SDK object); nothing
        is executed."""
        return detect(llm_response, self._table.routes, self.text_formats)

    def execute(self, detection: Detection, consent: Consent | None = None) -> DriverResponse:
        """Run the detected calls in order and answer every one of them.

        ``consent`` sees each runnable call first, then the orchestrator's own consent: a
        call runs only when both approve it.
        """
        if not detection.calls:
            return DriverResponse()
        table = self._table
        deciders = self._deciders(consent)
        notes: list[str] = []
        outcomes: list[_Outcome] = []
        for detected in detection.calls:
            admitted = self._admit(table, detected, notes)
            for decide in deciders:
                if isinstance(admitted, _Failure):
                    break
                admitted = self._judge(table, *admitted, _ask(decide, admitted[1]), notes)
            if isinstance(admitted, _Failure):
                outcomes.append((None, "", admitted, detected))
            else:
                outcomes.append(self._run(*admitted))
        return self._answer(detection, outcomes, notes)

    async def aexecute(
        self, detection: Detection, consent: Consent | None = None
    ) -> DriverResponse:
        """:meth:`execute` for an event loop: calls in order, each awaited (a sync tool in
        a worker thread); ``consent`` may be a coroutine function."""
        if not detection.calls:
            return DriverResponse()
        table = self._table
        deciders = self._deciders(consent)
        notes: list[str] = []
        outcomes: list[_Outcome] = []
        for detected in detection.calls:
            admitted = self._admit(table, detected, notes)
            for decide in deciders:
                if isinstance(admitted, _Failure):
                    break
                admitted = self._judge(table, *admitted, await _aask(decide, admitted[1]), notes)
            if isinstance(admitted, _Failure):
                outcomes.append((None, "", admitted, detected))
            else:
                outcomes.append(await self._arun(*admitted))
        return self._answer(detection, outcomes, notes)

    async def aexecute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        """:meth:`execute_tool` for an event loop (an async tool awaited, a sync one in a
        worker thread): what an orchestrator stacked in another one is called with."""
        table = self._table
        notes: list[str] = []
        admitted = self._admit(table, _tool_call(table, tool_name, arguments), notes)
        if self.consent is not None and not isinstance(admitted, _Failure):
            admitted = self._judge(table, *admitted, await _aask(self.consent, admitted[1]), notes)
        if isinstance(admitted, _Failure):
            raise admitted.raised()
        return _returned(await self._arun(*admitted, raising=True))

    def _deciders(self, consent: Consent | None) -> tuple[Consent, ...]:
        """Who approves each call: the caller's ``consent``, then the orchestrator's own."""
        own = () if self.consent is None else (self.consent,)
        return own if consent is None or consent is self.consent else (consent, *own)

    def _answer(
        self, detection: Detection, outcomes: Sequence[_Outcome], notes: list[str]
    ) -> DriverResponse:
        """The response to the calls of ``detection``: results, or failures and a retry."""
        answers: list[tuple[ToolCall, str, bool]] = []
        results: list[Any] = []
        failures: list[_Failure] = []
        executed = 0
        for outcome, text, failure, call in outcomes:
            if failure is None:
                executed += 1
                results.append(outcome)
                answers.append((call, text, False))
            else:
                failures.append(failure)
                results.append(None)
                answers.append((call, f"error: {failure.message}", True))
        messages = messages_for(detection, answers)
        detail = "; ".join(dict.fromkeys(notes)) if notes else None
        if not failures:
            return DriverResponse(
                tool_call_result=results[0] if len(results) == 1 else results,
                call_executed=True,
                call_detail=detail,
                messages=messages,
            )
        retry = self._retry_prompt(failures)
        if detection.family == "text" and not executed:  # the retry lists every error
            messages[-1]["content"] = retry
        elif detection.family == "text":  # each call answered in order, then the retry
            messages[-1]["content"] += "\n\n" + retry
        return DriverResponse(
            tool_call_result=(results if len(results) > 1 else None) if executed else None,
            call_executed=executed > 0,
            call_failed=True,
            call_detail="; ".join([*(f.message for f in failures), *dict.fromkeys(notes)]),
            retry_prompt=retry,
            messages=messages,
        )

    @staticmethod
    def _admit(table: Table, call: ToolCall, notes: list[str]) -> tuple[Route, ToolCall] | _Failure:
        """The route and checked call, or why the call cannot run (before consent)."""
        if call.problem is not None:
            return _Failure(call.name, f"{call.name}: {call.problem}")
        route = table.routes.get(call.name)
        if route is None:
            return _Failure(call.name, f"unknown tool {call.name!r}")
        if call.healed:
            notes.append(f"{call.name}: healed ({', '.join(call.healed)})")
        call, failure = _checked(route, call, notes)
        return (route, call) if failure is None else failure

    @staticmethod
    def _judge(
        table: Table, route: Route, call: ToolCall, verdict: Any, notes: list[str]
    ) -> tuple[Route, ToolCall] | _Failure:
        """What consent's ``verdict`` on ``call`` leaves to run: the call, an edited call
        (checked like the model's), or a denial."""
        if isinstance(verdict, ToolCall):  # an edited call is checked like the model's
            edited = table.routes.get(verdict.name)
            if edited is None:
                return _Failure(verdict.name, f"unknown tool {verdict.name!r}")
            checked, failure = _checked(edited, verdict, notes)
            return (edited, checked) if failure is None else failure
        if verdict is not True:
            return _not_approved(call.name, verdict if isinstance(verdict, str) else "")
        return route, call

    def _run(self, route: Route, call: ToolCall, raising: bool = False) -> _Outcome:
        """Run one admitted call: ``(result, its text, None, call)`` or a failure (which
        keeps the tool's error only when ``raising``: for :meth:`execute_tool` to raise)."""
        error: BaseException | None = None
        outcome: Any = None
        text = ""
        streams = sys.stdout, sys.stderr
        limit = self._limit(route.driver)
        try:
            outcome = call_bounded(
                _carried, limit, call.name, route.driver.execute_tool,
                route.tool.name, dict(call.arguments),
            )  # fmt: skip
            text = result_text(outcome)  # a result JSON cannot carry fails the call too
        except KeyboardInterrupt:
            raise  # in this thread it may be the user's Ctrl-C: it is theirs to handle
        except _Raised as raised:  # the tool's own Hung (a stacked orchestrator's deadline)
            error = raised.error
        except Hung:
            error = Hung(f"{call.name} did not finish within {limit:g} s")
        except BaseException as exc:  # sys.exit() and the like too: a tool never ends the client
            error = exc
        try:
            return self._ran(call, outcome, text, error, streams, raising)
        finally:
            del error  # this frame is in the error's traceback: holding it makes a cycle

    async def _arun(self, route: Route, call: ToolCall, raising: bool = False) -> _Outcome:
        """:meth:`_run` on an event loop."""
        import asyncio  # noqa: PLC0415 - only for async users

        error: BaseException | None = None
        outcome: Any = None
        text = ""
        streams = sys.stdout, sys.stderr
        arguments = dict(call.arguments)
        deadline: asyncio.Timeout | None = None
        limit = self._limit(route.driver)
        try:
            own = _async_execute(route.driver)
            if own is not None:
                work = own(route.tool.name, arguments)
            else:
                work = _awaited(
                    asyncio.to_thread(route.driver.execute_tool, route.tool.name, arguments)
                )
            async with asyncio.timeout(limit) as deadline:
                outcome = await work
            text = result_text(outcome)
        except (KeyboardInterrupt, asyncio.CancelledError):
            raise  # the client's task was cancelled: that is the client's, not the tool's
        except BaseException as exc:
            # the deadline passing, or what the tool raised (its own TimeoutError too)
            expired = deadline is not None and deadline.expired()
            error = Hung(f"{call.name} did not finish within {limit:g} s") if expired else exc
        try:
            return self._ran(call, outcome, text, error, streams, raising)
        finally:
            # this frame is in the error's traceback: holding the error, or the deadline
            # (which holds the task, which holds an error that leaves it), makes a cycle
            del error, deadline

    def _limit(self, driver: object) -> float | None:
        """How long a call to ``driver`` may take: ``call_timeout``, or a second more than
        the driver's own ``call_timeout`` when that is longer (a driver that bounds its own
        calls, as an MCP server's does, then says itself what went wrong)."""
        own = getattr(driver, "call_timeout", None)
        limit = self.call_timeout
        if limit is None or isinstance(own, bool) or not isinstance(own, int | float):
            return limit
        return max(limit, own + 1.0) if own > 0 else limit

    def _ran(
        self,
        call: ToolCall,
        outcome: Any,
        text: str,
        error: BaseException | None,
        streams: tuple[Any, Any],
        raising: bool,
    ) -> _Outcome:
        """A call's outcome once it ran: streams put back, the audit told, errors worded (a
        stacked orchestrator's denial as this one's). Once the audit has seen an error, what
        its traceback's frames hold is let go (:func:`.leftovers.release`), and the failure
        keeps only its text, or the error too when ``raising``."""
        broken = restore_streams(streams)
        if broken is not None and error is None:
            error = ToolError(f"the tool closed or replaced {broken}; it was put back")
        try:
            if self.audit is not None:
                self.audit(call, outcome, error)
        finally:
            if error is not None:
                release(error)
        if error is None:
            return outcome, text, None, call
        if isinstance(error, _NotApproved):
            return None, "", _not_approved(call.name, error.reason), call
        kept = error if raising else None
        return None, "", _Failure(call.name, self._failed(call, error), kept), call

    def _failed(self, call: ToolCall, error: BaseException) -> str:
        if isinstance(error, Hung):
            return str(error)
        if isinstance(error, SystemExit):
            return f"{call.name} failed: it called sys.exit({error.code!r})"
        text = str(error)
        if isinstance(error, ToolError) and text:
            return f"{call.name} failed: {text}"
        return f"{call.name} failed: {type(error).__name__}" + (f": {text}" if text else "")

    def _retry_prompt(self, failures: Sequence[_Failure]) -> str:
        if all(f.denied for f in failures):
            return "\n".join(
                self.prompts.text(
                    self.prompts.retry, "denied", tool=f.tool, reason=f.denied.strip() and f.denied
                )
                for f in failures
            )
        names = ", ".join(t.name for t in self._table.tools) or "none"
        listed = "\n".join(f"- {f.message}" for f in failures)
        return self.prompts.text(self.prompts.retry, "failed", errors=listed, names=names)


@dataclass(frozen=True, slots=True)
class _Failure:
    tool: str
    message: str
    error: BaseException | None = None
    """What the tool raised (or its deadline), for a call that ran and whose error
    :meth:`Orchestrator.execute_tool` raises; ``None`` otherwise (only the message is kept)."""
    denied: str = ""
    """For a denied call: ``": <reason>"``, or a space when no reason was given."""

    def raised(self) -> BaseException:
        """What :meth:`Orchestrator.execute_tool` raises for this failure."""
        if self.denied:
            return _NotApproved(self.message, self.denied.removeprefix(": ").strip())
        return self.error if self.error is not None else ToolError(self.message)


class _NotApproved(ToolError):  # noqa: N818 - reads as what happened
    """A call consent did not approve, raised by :meth:`Orchestrator.execute_tool`; an
    orchestrator that stacks it answers the call as denied, ``reason`` and all."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class _Raised(Exception):  # noqa: N818 - carries what the tool raised
    """A :class:`Hung` the tool raised itself, carried past the caller's own deadline."""

    def __init__(self, error: Hung) -> None:
        super().__init__(str(error))
        self.error = error


_Outcome = tuple[Any, str, "_Failure | None", ToolCall]
"""One call's ``(result, its text for the model, failure or None, the call as run)``."""


def _not_approved(tool: str, reason: str) -> _Failure:
    """The denial of a call of ``tool``, ``reason`` saying why (or empty)."""
    why = f": {reason}" if reason else ""
    return _Failure(tool, f"the call of {tool!r} was not approved{why}", denied=why or " ")


def _tool_call(table: Table, tool_name: str, arguments: Mapping[str, Any]) -> ToolCall:
    """The call :meth:`Orchestrator.execute_tool` was asked for, for a tool ``table`` routes."""
    if tool_name not in table.routes:
        raise UnknownToolError(tool_name, table.routes)
    return ToolCall(tool_name, dict(arguments))


def _returned(outcome: _Outcome) -> Any:
    """A call's result, or what stopped it raised."""
    result, _, failure, _ = outcome
    if failure is None:
        return result
    error = failure.raised()
    del outcome, failure  # this frame joins the error's traceback: it must not hold the error
    try:
        raise error
    finally:
        del error


def _ask(decide: Consent, call: ToolCall) -> bool | str | ToolCall:
    try:
        verdict: bool | str | ToolCall = _resolved(decide, call)
        return verdict
    except Exception as exc:  # a consent check that breaks denies: fail closed
        return f"the consent check failed ({type(exc).__name__}: {exc})"


async def _aask(decide: Consent, call: ToolCall) -> bool | str | ToolCall:
    try:
        verdict: Any = decide(call)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        answer: bool | str | ToolCall = verdict
        return answer
    except Exception as exc:  # a consent check that breaks denies: fail closed
        return f"the consent check failed ({type(exc).__name__}: {exc})"


def _carried(func: Callable[..., Any], *args: Any) -> Any:
    """:func:`_resolved`, a :class:`Hung` it raises carried as :class:`_Raised`."""
    try:
        return _resolved(func, *args)
    except Hung as hung:
        raise _Raised(hung) from None


def _resolved(func: Callable[..., Any], *args: Any) -> Any:
    """``func(*args)``; an awaitable it returns (an async tool or consent called from sync
    code) is run to its end on an event loop of its own."""
    result = func(*args)
    if not inspect.isawaitable(result):
        return result
    import asyncio  # noqa: PLC0415 - only for async tools

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(result))
    if inspect.iscoroutine(result):
        result.close()
    raise ToolError(
        f"{getattr(func, '__qualname__', func)!s} is async and an event loop is running in "
        "this thread: call aprocess_llm_response (or aexecute) instead"
    )


async def _awaited(work: Any) -> Any:
    """What ``work`` gives, awaited; and what that gives, if it is awaitable too (a sync
    function run in a thread that returned a coroutine)."""
    result = await work
    return await result if inspect.isawaitable(result) else result


def _async_execute(driver: Any) -> Callable[..., Any] | None:
    """The driver's coroutine function for a call: ``aexecute_tool``, or an async
    ``execute_tool``; ``None`` for a sync driver."""
    for name in ("aexecute_tool", "execute_tool"):
        method = getattr(driver, name, None)
        if method is not None and inspect.iscoroutinefunction(method):
            return method  # type: ignore[no-any-return]
    return None


def _chained_failed(label: str, exc: BaseException) -> DriverResponse:
    detail = f"driver {label!r} failed: {type(exc).__name__}: {exc}"
    release(exc)
    return DriverResponse(call_failed=True, call_detail=detail)


def _checked(route: Route, call: ToolCall, notes: list[str]) -> tuple[ToolCall, _Failure | None]:
    """``call`` with its arguments checked (and coerced) against its tool's schema."""
    if call.texts:
        call = _as_written(route, call)
    if route.validator.accepts(call.arguments):
        return call, None
    checked = route.validator.validate(call.arguments)
    if not checked.ok:
        listed = "; ".join(str(p) for p in checked.problems)
        return call, _Failure(call.name, f"{call.name}: {listed}")
    if not checked.coerced:
        return call, None  # the arguments as the model gave them (equal to the checked ones)
    notes.extend(f"{call.name}: {c}" for c in checked.coerced)
    return call.with_arguments(checked.arguments), None


def _as_written(route: Route, call: ToolCall) -> ToolCall:
    """``call`` with each argument the model wrote as bare text, and that was read as JSON
    into a type its schema does not take, given back as that text when the schema takes a
    string: ``<parameter=zip>02134</parameter>`` stays ``"02134"`` for a string, is ``2134``
    for an integer."""
    texts = call.texts or {}
    arguments = dict(call.arguments)
    written = {
        key: raw
        for key, raw in texts.items()
        if key in arguments and route.validator.wants_text(key, arguments[key])
    }
    if not written:
        return call
    return replace(call, arguments={**arguments, **written})


def _labelled(drivers: Iterable[object]) -> Iterator[tuple[str, object]]:
    used: set[str] = set()
    for driver in drivers:
        meta = getattr(driver, "meta", None)
        base = re.sub(r"[^a-z0-9]+", "-", str(getattr(meta, "name", "driver")).lower()).strip("-")
        label, number = base or "driver", 2
        while label in used:
            label, number = f"{base}-{number}", number + 1
        used.add(label)
        yield label, driver


def _check_label(label: str, mounted: Mapping[str, object]) -> str:
    if not label or "__" in label or _LABEL_REFUSED.search(label):
        raise ValueError(
            f"label {label!r}: use letters, digits, '-' and single '_' (labels prefix tool names)"
        )
    if label in mounted:
        raise ValueError(f"label {label!r} is already mounted")
    return label
