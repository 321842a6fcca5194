"""Running calls: from the calls an orchestrator detected to its response.

Each call is admitted (routed, its arguments checked against its tool's schema and coerced),
approved by consent (the caller's, then the orchestrator's own; an edited call is checked
again), run within its time, and answered: the results, or the failures and a retry prompt. An
exception in a tool becomes a failed call, never an exception for the client; so does
``sys.exit()`` and a closed or replaced standard stream (:mod:`.leftovers` puts it back).

As httpx's ``BaseClient`` / ``Client`` / ``AsyncClient``: :class:`BaseExecution` holds every
step that waits for nothing, and the twins :class:`Execution` and :class:`AsyncExecution`
differ only where they wait (for consent, a tool, a chained driver). One is made per call of
the orchestrator, on the table it routes by then.

One module: the twins are one set of steps; the records the steps hand each other stay here.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from mcs_host._bounded import Hung, call_bounded
from mcs_host.interfaces import ToolArgumentError, ToolError, UnknownToolError

from .calls import Detection, ToolCall
from .leftovers import release, restore_streams
from .messages import messages_for, result_text
from .prompting import Prompts
from .streaming import is_complete

if TYPE_CHECKING:
    from mcs_host.contract import DriverResponse

    from .routing import Route, Table
    from .validation import ArgumentProblem

__all__: list[str] = []  # the orchestrator's; nothing public

Consent = Callable[[ToolCall], "bool | str | ToolCall | Awaitable[bool | str | ToolCall]"]
"""Approve a call (``True``), deny it (``False``, or a string saying why), or approve an
edited one (a :class:`ToolCall`, e.g. ``call.with_arguments(...)``); or a coroutine function
giving one of those."""
Audit = Callable[[ToolCall, Any, BaseException | None], None]


def import_contract() -> None:
    """Bind the contract's response type here. Called by the first orchestrator made, so that
    importing this module imports no pydantic."""
    global DriverResponse  # noqa: PLW0603
    from mcs_host.contract import DriverResponse  # noqa: PLC0415


class _Orchestrator(Protocol):
    """What running calls reads of its orchestrator, at each call."""

    consent: Consent | None
    audit: Audit | None
    call_timeout: float | None
    prompts: Prompts
    on_unknown: Literal["pass", "fail"]

    def detect(self, llm_response: Any) -> Detection: ...

    def execute(self, detection: Detection, consent: Consent | None = None) -> DriverResponse: ...

    async def aexecute(
        self, detection: Detection, consent: Consent | None = None
    ) -> DriverResponse: ...


class BaseExecution:
    """The steps of running calls that wait for nothing, written once for both twins."""

    __slots__ = ("notes", "owner", "table")

    def __init__(self, owner: _Orchestrator, table: Table) -> None:
        self.owner = owner
        self.table = table
        self.notes: list[str] = []
        """What was healed or coerced, for ``call_detail``."""

    def next_step(self, detection: Detection, streaming: bool) -> str:
        """``execute`` the calls, ``wait`` for the rest of a call being streamed, or
        ``chain``: pass the response to the chained drivers."""
        if not detection.calls:
            return "chain"
        if streaming and not is_complete(detection):
            return "wait"  # a chunk of a call still being written
        if self.owner.on_unknown == "fail":
            return "execute"
        known = self.table.known
        for call in detection.calls:
            if call.name in known or call.problem:
                return "execute"
        return "chain"

    def deciders(self, consent: Consent | None) -> tuple[Consent, ...]:
        """Who approves each call: the caller's ``consent``, then the orchestrator's own."""
        own = () if self.owner.consent is None else (self.owner.consent,)
        return own if consent is None or consent is self.owner.consent else (consent, *own)

    def tool_call(
        self, tool_name: str, arguments: Mapping[str, Any], caller: str | None = None
    ) -> ToolCall:
        """The call ``execute_tool`` was asked for, of a tool the table routes."""
        if tool_name not in self.table.routes:
            raise UnknownToolError(tool_name, self.table.routes)
        return ToolCall(tool_name, dict(arguments), caller=caller)

    def admit(self, call: ToolCall) -> tuple[Route, ToolCall] | _Failure:
        """The route and checked call, or why the call cannot run (before consent)."""
        if call.problem is not None:
            return _Failure(call.name, f"{call.name}: {call.problem}")
        call = self._offered(call)
        route = self.table.routes.get(call.name)
        if route is None:
            return _Failure(call.name, f"unknown tool {call.name!r}")
        if call.healed:
            self.notes.append(f"{call.name}: healed ({', '.join(call.healed)})")
        call, failure = _checked(route, call, self.notes)
        return (route, call) if failure is None else failure

    def _offered(self, call: ToolCall) -> ToolCall:
        """``call`` under the name its tool is offered as, when it gives the tool's own
        name instead (:attr:`Table.aliases`)."""
        final = self.table.aliases.get(call.name)
        if final is None:
            return call
        self.notes.append(f"{call.name}: the tool's own name; it is offered as {final!r}")
        return replace(call, name=final)

    def judge(
        self, route: Route, call: ToolCall, verdict: Any
    ) -> tuple[Route, ToolCall] | _Failure:
        """What consent's ``verdict`` on ``call`` leaves to run: the call, an edited call
        (checked like the model's), or a denial."""
        if isinstance(verdict, ToolCall):  # an edited call is checked like the model's
            verdict = self._offered(replace(verdict, caller=call.caller))  # a fact, not edited
            edited = self.table.routes.get(verdict.name)
            if edited is None:
                return _Failure(verdict.name, f"unknown tool {verdict.name!r}")
            checked, failure = _checked(edited, verdict, self.notes)
            return (edited, checked) if failure is None else failure
        if verdict is not True:
            return _not_approved(call.name, verdict if isinstance(verdict, str) else "")
        return route, call

    def limit(self, driver: object) -> float | None:
        """How long a call to ``driver`` may take: ``call_timeout``, or a second more than
        the driver's own ``call_timeout`` when that is longer (a driver that bounds its own
        calls, as an MCP server's does, then says itself what went wrong)."""
        own = getattr(driver, "call_timeout", None)
        limit = self.owner.call_timeout
        if limit is None or isinstance(own, bool) or not isinstance(own, int | float):
            return limit
        return max(limit, own + 1.0) if own > 0 else limit

    def ran(
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
            if self.owner.audit is not None:
                self.owner.audit(call, outcome, error)
        finally:
            if error is not None:
                release(error)
        if error is None:
            return outcome, text, None, call
        if isinstance(error, NotApproved):
            return None, "", _not_approved(call.name, error.reason), call
        kept = error if raising else None
        return None, "", _Failure(call.name, failed_text(call.name, error), kept), call

    def answer(self, detection: Detection, outcomes: Sequence[_Outcome]) -> DriverResponse:
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
        detail = "; ".join(dict.fromkeys(self.notes)) if self.notes else None
        if not failures:
            return DriverResponse(
                tool_call_result=results[0] if len(results) == 1 else results,
                call_executed=True,
                call_detail=detail,
                messages=messages,
            )
        retry = self.retry_prompt(failures)
        if detection.family == "text" and not executed:  # the retry lists every error
            messages[-1]["content"] = retry
        elif detection.family == "text":  # each call answered in order, then the retry
            messages[-1]["content"] += "\n\n" + retry
        return DriverResponse(
            tool_call_result=(results if len(results) > 1 else None) if executed else None,
            call_executed=executed > 0,
            call_failed=True,
            call_detail="; ".join([*(f.message for f in failures), *dict.fromkeys(self.notes)]),
            retry_prompt=retry,
            messages=messages,
        )

    def retry_prompt(self, failures: Sequence[_Failure]) -> str:
        """What the model is told after ``failures``: why each call was denied, or the errors
        and the tools there are."""
        prompts = self.owner.prompts
        if all(f.denied for f in failures):
            return "\n".join(
                prompts.text(
                    prompts.retry, "denied", tool=f.tool, reason=f.denied.strip() and f.denied
                )
                for f in failures
            )
        names = ", ".join(t.name for t in self.table.tools) or "none"
        listed = "\n".join(f"- {f.message}" for f in failures)
        return prompts.text(prompts.retry, "failed", errors=listed, names=names)


class Execution(BaseExecution):
    """Running calls in the caller's thread: a tool within its time in a worker thread when
    there is a ``call_timeout``, an async tool or consent on an event loop of its own."""

    __slots__ = ()

    def process(self, llm_response: Any, streaming: bool) -> DriverResponse:
        """What ``process_llm_response`` answers: the calls run, or the chained drivers'
        response."""
        detection = self.owner.detect(llm_response)
        step = self.next_step(detection, streaming)
        if step == "execute":
            return self.owner.execute(detection)
        if step == "wait":
            return DriverResponse()
        for label, driver in self.table.chained:
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

    def execute(self, detection: Detection, consent: Consent | None) -> DriverResponse:
        """Run the calls of ``detection`` in order and answer every one of them."""
        if not detection.calls:
            return DriverResponse()
        deciders = self.deciders(consent)
        outcomes: list[_Outcome] = []
        for detected in detection.calls:
            admitted = self.approved(detected, deciders)
            if isinstance(admitted, _Failure):
                outcomes.append((None, "", admitted, detected))
            else:
                outcomes.append(self.run(*admitted))
        return self.answer(detection, outcomes)

    def execute_tool(
        self,
        tool_name: str,
        arguments: dict[str, Any],
        consent: Consent | None = None,
        caller: str | None = None,
        with_text: bool = False,
    ) -> Any:
        """One call's result; raise what stopped it."""
        call = self.tool_call(tool_name, arguments, caller)
        admitted = self.approved(call, self.deciders(consent))
        if isinstance(admitted, _Failure):
            raise admitted.raised()
        return _returned(self.run(*admitted, raising=True), with_text)

    def approved(
        self, call: ToolCall, deciders: Sequence[Consent]
    ) -> tuple[Route, ToolCall] | _Failure:
        """``call`` admitted and approved by each of ``deciders`` in turn, or why not."""
        admitted = self.admit(call)
        for decide in deciders:
            if isinstance(admitted, _Failure):
                break
            admitted = self.judge(*admitted, _ask(decide, admitted[1]))
        return admitted

    def run(self, route: Route, call: ToolCall, raising: bool = False) -> _Outcome:
        """Run one admitted call: ``(result, its text, None, call)`` or a failure (which
        keeps the tool's error only when ``raising``: for ``execute_tool`` to raise)."""
        error: BaseException | None = None
        outcome: Any = None
        text = ""
        streams = sys.stdout, sys.stderr
        limit = self.limit(route.driver)
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
            return self.ran(call, outcome, text, error, streams, raising)
        finally:
            del error  # this frame is in the error's traceback: holding it makes a cycle


class AsyncExecution(BaseExecution):
    """:class:`Execution` on an event loop: an async tool or chained driver is awaited and a
    sync one runs in a worker thread, so the loop goes on while it works; consent may be a
    coroutine function."""

    __slots__ = ()

    async def process(self, llm_response: Any, streaming: bool) -> DriverResponse:
        """:meth:`Execution.process` on an event loop."""
        import asyncio  # noqa: PLC0415 - asyncio costs 20 ms to import: only for async users

        detection = self.owner.detect(llm_response)
        step = self.next_step(detection, streaming)
        if step == "execute":
            return await self.owner.aexecute(detection)
        if step == "wait":
            return DriverResponse()
        for label, driver in self.table.chained:
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

    async def execute(self, detection: Detection, consent: Consent | None) -> DriverResponse:
        """:meth:`Execution.execute` on an event loop."""
        if not detection.calls:
            return DriverResponse()
        deciders = self.deciders(consent)
        outcomes: list[_Outcome] = []
        for detected in detection.calls:
            admitted = await self.approved(detected, deciders)
            if isinstance(admitted, _Failure):
                outcomes.append((None, "", admitted, detected))
            else:
                outcomes.append(await self.run(*admitted))
        return self.answer(detection, outcomes)

    async def execute_tool(
        self,
        tool_name: str,
        arguments: dict[str, Any],
        consent: Consent | None = None,
        caller: str | None = None,
        with_text: bool = False,
    ) -> Any:
        """:meth:`Execution.execute_tool` on an event loop."""
        call = self.tool_call(tool_name, arguments, caller)
        admitted = await self.approved(call, self.deciders(consent))
        if isinstance(admitted, _Failure):
            raise admitted.raised()
        return _returned(await self.run(*admitted, raising=True), with_text)

    async def approved(
        self, call: ToolCall, deciders: Sequence[Consent]
    ) -> tuple[Route, ToolCall] | _Failure:
        """:meth:`Execution.approved` on an event loop."""
        admitted = self.admit(call)
        for decide in deciders:
            if isinstance(admitted, _Failure):
                break
            admitted = self.judge(*admitted, await _aask(decide, admitted[1]))
        return admitted

    async def run(self, route: Route, call: ToolCall, raising: bool = False) -> _Outcome:
        """:meth:`Execution.run` on an event loop."""
        import asyncio  # noqa: PLC0415 - only for async users

        error: BaseException | None = None
        outcome: Any = None
        text = ""
        streams = sys.stdout, sys.stderr
        arguments = dict(call.arguments)
        deadline: asyncio.Timeout | None = None
        limit = self.limit(route.driver)
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
            return self.ran(call, outcome, text, error, streams, raising)
        finally:
            # this frame is in the error's traceback: holding the error, or the deadline
            # (which holds the task, which holds an error that leaves it), makes a cycle
            del error, deadline


# -- what the steps hand each other -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Failure:
    tool: str
    message: str
    error: BaseException | None = None
    """What the tool raised (or its deadline), for a call that ran and whose error
    :meth:`Execution.execute_tool` raises; ``None`` otherwise (only the message is kept)."""
    denied: str = ""
    """For a denied call: ``": <reason>"``, or a space when no reason was given."""
    invalid: tuple[ArgumentProblem, ...] = ()
    """For arguments its tool's schema refused: why."""

    def raised(self) -> BaseException:
        """What :meth:`Execution.execute_tool` raises for this failure."""
        if self.denied:
            return NotApproved(self.message, self.denied.removeprefix(": ").strip())
        if self.invalid:
            return InvalidArguments(self.tool, self.message, self.invalid)
        return self.error if self.error is not None else ToolError(self.message)


class NotApproved(ToolError):  # noqa: N818 - reads as what happened
    """A call consent did not approve, raised by :meth:`Execution.execute_tool`; an
    orchestrator that stacks it answers the call as denied, ``reason`` and all."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class InvalidArguments(ToolArgumentError):  # noqa: N818 - reads as what they are
    """Arguments a tool's schema refused, raised by :meth:`Execution.execute_tool` before the
    call reaches consent; its message lists every problem, ``argument`` names the first."""

    def __init__(self, tool: str, message: str, problems: tuple[ArgumentProblem, ...]) -> None:
        ToolError.__init__(self, message)
        self.tool_name = tool
        self.argument = problems[0].argument
        self.problem = problems[0].message
        self.problems = problems


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


def failed_text(name: str, error: BaseException) -> str:
    """What the model is told of ``error``, which ended a call of ``name`` (the agent
    frameworks' adapters tell it the same)."""
    if isinstance(error, Hung):
        return str(error)
    if isinstance(error, SystemExit):
        return f"{name} failed: it called sys.exit({error.code!r})"
    text = str(error)
    if isinstance(error, ToolError) and text:
        return f"{name} failed: {text}"
    return f"{name} failed: {type(error).__name__}" + (f": {text}" if text else "")


def _returned(outcome: _Outcome, with_text: bool = False) -> Any:
    """A call's result (``with_text``: and its text), or what stopped it raised."""
    result, text, failure, _ = outcome
    if failure is None:
        return (result, text) if with_text else result
    error = failure.raised()
    del outcome, failure  # this frame joins the error's traceback: it must not hold the error
    try:
        raise error
    finally:
        del error


def _chained_failed(label: str, exc: BaseException) -> DriverResponse:
    detail = f"driver {label!r} failed: {type(exc).__name__}: {exc}"
    release(exc)
    return DriverResponse(call_failed=True, call_detail=detail)


# -- checking arguments -----------------------------------------------------------------------


def _checked(route: Route, call: ToolCall, notes: list[str]) -> tuple[ToolCall, _Failure | None]:
    """``call`` with its arguments checked (and coerced) against its tool's schema."""
    if call.texts:
        call = _as_written(route, call)
    if route.validator.accepts(call.arguments):
        return call, None
    checked = route.validator.validate(call.arguments)
    if not checked.ok:
        listed = "; ".join(str(p) for p in checked.problems)
        return call, _Failure(call.name, f"{call.name}: {listed}", invalid=checked.problems)
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


# -- waiting: consent and tools, sync or async ------------------------------------------------


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
