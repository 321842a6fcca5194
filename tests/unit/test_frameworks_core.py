"""What every agent framework's adapter stands on: the tools a load offers, filtered by label
and name, and one call through the stack's validation, consent and audit, its failure told by
kind (arguments to retry, a denial, an approval to ask for, a failed tool); and
``execute_tool`` with the caller's consent, checking arguments before anyone is asked."""

from __future__ import annotations

import asyncio
import sys
from functools import partial
from typing import Any

import pytest
from sample_drivers import Calculator, Echo

from mcs_host import (
    DriverMeta,
    Loaded,
    LoadReport,
    MCSToolDriver,
    Orchestrator,
    Tool,
    ToolArgumentError,
    ToolCall,
    ToolError,
    ToolParameter,
)
from mcs_host.frameworks._offer import Caller, Failure, offered
from mcs_host.loading.hooks import plugin_manager
from mcs_host.loading.plugins import ask_consent
from mcs_host.loading.servers import needs_consent

NUMBER = ToolParameter(name="n", description="A number.", schema={"type": "integer"}, required=True)


class Strict(MCSToolDriver):
    """A tool that takes any ``n`` its schema allows, then refuses odd ones itself; another
    that fails; another that ends the interpreter."""

    meta = DriverMeta(id="strict-0001", name="Strict", version="1.0.0")

    def list_tools(self) -> list[Tool]:
        return [
            Tool(name="even", description="Take an even number.", parameters=[NUMBER]),
            Tool(name="boom", description="Fail."),
            Tool(name="leave", description="Call sys.exit."),
        ]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        if tool_name == "boom":
            raise RuntimeError("the disk is on fire")
        if tool_name == "leave":
            sys.exit(3)
        if arguments["n"] % 2:
            raise ToolArgumentError(tool_name, "n", f"{arguments['n']} is odd")
        return arguments["n"] // 2


def loaded(stack: Orchestrator, gated: tuple[str, ...] = ()) -> Loaded:
    return Loaded(stack, LoadReport(()), gated=gated)


def test_the_tools_keep_their_offered_names_schemas_and_labels_and_filter_by_both() -> None:
    stack = Orchestrator({"calc": Calculator(), "echo": Echo()})
    tools = offered(loaded(stack), who="test")
    assert [(t.name, t.label, t.own_name) for t in tools] == [
        ("calc__add", "calc", "add"),
        ("echo", "echo", "echo"),
        ("echo__add", "echo", "add"),
    ]
    assert tools[0].schema == stack.list_tools()[0].input_schema()
    assert not any(t.gated for t in tools)
    assert [t.name for t in offered(loaded(stack), "echo", who="test")] == ["echo", "echo__add"]
    assert [t.name for t in offered(loaded(stack), tools=["calc__add"], who="test")] == [
        "calc__add"
    ]
    with pytest.raises(ValueError, match=r"test: no driver is mounted as 'nope'; mounted: calc"):
        offered(loaded(stack), "nope", who="test")
    with pytest.raises(ValueError, match=r"no tool is offered as 'add'; the tools are: calc__add"):
        offered(loaded(stack), tools="add", who="test")
    with pytest.raises(TypeError, match=r"test takes what load_drivers\(\) returns"):
        offered(stack, who="test")  # type: ignore[arg-type]


def test_each_failure_comes_back_as_its_kind_with_the_message_for_the_model() -> None:
    stack = Orchestrator({"s": Strict(), "calc": Calculator()})
    caller = Caller(loaded(stack), offered(loaded(stack), "s", who="test"), None, "Test")
    assert caller.call("even", {"n": 4}, False) == 2
    arguments = {"n": 4}
    assert caller.call("even", arguments, False, with_text=True) == (2, "2")
    assert asyncio.run(caller.acall("even", arguments, False, with_text=True)) == (2, "2")
    assert arguments == {"n": 4}
    cases: list[tuple[str, dict[str, Any], str, str]] = [
        ("even", {"n": "four"}, "arguments", "even: argument 'n': expected integer"),
        ("even", {"n": 3}, "arguments", "even: tool 'even', argument 'n': 3 is odd"),
        (
            "add",
            {"a": 1, "b": 2},
            "unknown",
            "unknown tool 'add'; the tools are: boom, even, leave",
        ),
        ("boom", {}, "failed", "boom failed: RuntimeError: the disk is on fire"),
        ("leave", {}, "failed", "leave failed: it called sys.exit(3)"),
    ]
    for name, arguments, kind, message in cases:
        with pytest.raises(Failure) as failed:
            caller.call(name, arguments, False)
        assert (failed.value.kind, failed.value.message[: len(message)]) == (kind, message)


def test_a_consent_denial_is_denied_and_the_caller_reaches_consent_and_audit() -> None:
    seen: list[tuple[str, str | None]] = []
    audited: list[str | None] = []

    def consent(call: ToolCall) -> bool | str:
        seen.append((call.name, call.caller))
        return True if call.arguments["a"] < 10 else "too big"

    def audit(call: ToolCall, result: Any, error: BaseException | None) -> None:
        audited.append(call.caller)

    stack = Orchestrator({"calc": Calculator()}, consent=consent, audit=audit)
    caller = Caller(loaded(stack), offered(loaded(stack), who="test"), "ada", "Test")
    assert caller.call("add", {"a": 1, "b": 2}, False) == 3
    with pytest.raises(Failure) as denied:
        asyncio.run(caller.acall("add", {"a": 11, "b": 2}, False))
    assert denied.value.kind == "denied"
    assert denied.value.message == "the call of 'add' was not approved: too big"
    assert seen == [("add", "ada"), ("add", "ada")]
    assert audited == ["ada"]


def gated_stack() -> tuple[Orchestrator, Calculator]:
    """A stack whose every call of ``calc`` needs approval, as a load makes it for an MCP
    server that requires consent: no plugin approves, so the user is asked."""
    calculator = Calculator()

    def label_of(tool: str) -> str:
        return stack.route(tool)[0]

    needs = needs_consent(label_of, {"calc": "or set consent = false in [mcp_servers.calc]"})
    stack = Orchestrator(
        {"calc": calculator}, consent=partial(ask_consent, plugin_manager(), needs=needs)
    )
    return stack, calculator


def test_a_gated_call_runs_only_when_the_frameworks_user_approves_it() -> None:
    stack, calculator = gated_stack()
    load = loaded(stack, gated=("calc",))
    tools = offered(load, who="test")
    assert [t.gated for t in tools] == [True]
    caller = Caller(load, tools, None, "Test")
    arguments = {"a": 1, "b": 2}
    with pytest.raises(Failure) as nobody:
        caller.call("add", arguments, False)
    assert nobody.value.kind == "denied"
    assert "or set consent = false in [mcp_servers.calc]" in nobody.value.message
    lever = Caller(load, tools, None, "Test", "pass approve= to test_tools()")
    for call in (lever.call, lambda *args: asyncio.run(lever.acall(*args))):
        with pytest.raises(Failure) as unasked:
            call("add", arguments, False)
        assert unasked.value.message.endswith(
            "[mcp_servers.calc]), or pass approve= to test_tools()"
        )
    with pytest.raises(Failure) as deferred:
        caller.call("add", arguments, None)
    assert deferred.value.kind == "asked"
    assert deferred.value.question == (
        'Run the tool "add" of calc with the arguments {"a": 1, "b": 2}? '
        "(each call to the MCP server 'calc' needs approval)"
    )
    questions: list[str] = []

    def decline(question: str) -> bool:
        questions.append(question)
        return False

    with pytest.raises(Failure) as declined:
        caller.call("add", arguments, decline)
    assert (
        declined.value.message == "the call of 'add' was not approved: the user declined it in Test"
    )
    assert questions == [deferred.value.question]
    assert calculator.calls == []  # nothing ran yet
    assert caller.call("add", arguments, True) == 3

    async def accept(question: str) -> bool:
        return True

    assert asyncio.run(caller.acall("add", arguments, accept)) == 3
    assert asyncio.run(caller.acall("add", arguments, lambda question: True)) == 3
    with pytest.raises(Failure) as deferred_async:
        asyncio.run(caller.acall("add", arguments, None))
    assert deferred_async.value.kind == "asked"
    assert len(calculator.calls) == 3


def test_execute_tool_checks_arguments_before_consent_and_asks_the_callers_consent_first() -> None:
    asked: list[str] = []

    def own(call: ToolCall) -> bool:
        asked.append("own")
        return True

    def callers(call: ToolCall) -> bool | str:
        asked.append(f"caller {call.caller}")
        return call.arguments["a"] != 0 or "no zeros"

    calculator = Calculator()
    stack = Orchestrator({"calc": calculator}, consent=own)
    with pytest.raises(ToolArgumentError) as invalid:
        stack.execute_tool("add", {"a": "one", "b": 2}, consent=callers)
    assert str(invalid.value).startswith("add: argument 'a': expected number")
    assert (invalid.value.tool_name, invalid.value.argument) == ("add", "a")
    assert asked == []
    assert calculator.calls == []
    assert stack.execute_tool("add", {"a": 1, "b": 2}, consent=callers, caller="ada") == 3
    assert asked == ["caller ada", "own"]
    with pytest.raises(ToolError, match="was not approved: no zeros"):
        asyncio.run(stack.aexecute_tool("add", {"a": 0, "b": 2}, consent=callers))
    assert len(calculator.calls) == 1
