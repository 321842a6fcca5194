"""Consent and audit belong to the tool: a call reaches a tool only through the consent and the
audit of every orchestrator on its way, whichever entry point it came in by and however deep
the stack. Attack tests: a model output calls a consent-gated tool of a stack mounted in
another stack (the nesting the README invites); the tool writes a marker file that must not
appear. The stacks are real: orchestrators, a host load with a consent plugin, a
``load_drivers`` stack whose MCP server needs approval, and ``serve``'s MCP server called by
the SDK's own client."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sample_drivers import GATED_SERVER as SERVER

from mcs_host import (
    DriverMeta,
    Host,
    HostConfig,
    MCSToolDriver,
    Orchestrator,
    Runner,
    Tool,
    ToolCall,
    ToolError,
    ToolParameter,
    hookimpl,
    load_drivers,
)

ENTRIES = (
    "process_llm_response",
    "execute",
    "execute_tool",
    "aprocess_llm_response",
    "aexecute",
    "aexecute_tool",
    "Runner.run",
    "Runner.arun",
)
WIPE = {"path": "/home"}


class Payload(MCSToolDriver):
    """What the attacker is after: ``wipe`` appends to the marker; ``ping`` answers."""

    meta = DriverMeta(id="payload-0001", name="payload", version="1.0.0")

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def list_tools(self) -> list[Tool]:
        path = ToolParameter(
            name="path", description="What to wipe.", required=True, schema={"type": "string"}
        )
        return [
            Tool(name="wipe", description="Wipe a path.", parameters=[path]),
            Tool(name="ping", description="Answer pong."),
        ]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        if tool_name == "wipe":
            with self.marker.open("a") as marker:
                marker.write(f"wiped {arguments['path']}\n")
            return "wiped"
        return "pong"


def reach(
    entry: str, stack: Orchestrator, tool: str = "wipe", arguments: dict[str, Any] = WIPE
) -> tuple[bool, str]:
    """A model output calling ``tool`` given to ``stack`` through ``entry``: whether the call
    ran, and its result or what the caller was told instead."""
    output = json.dumps({"tool": tool, "arguments": arguments})
    if entry.endswith("execute_tool"):
        try:
            if entry == "execute_tool":
                result = stack.execute_tool(tool, arguments)
            else:
                result = asyncio.run(stack.aexecute_tool(tool, arguments))
        except ToolError as exc:
            return False, str(exc)
        return True, str(result)
    if entry.startswith("Runner"):
        answers = [output, "Done."]

        def chat(history: list[dict[str, Any]]) -> str:
            turns: int = sum(1 for m in history if m["role"] == "assistant")
            return answers[turns]

        async def achat(history: list[dict[str, Any]]) -> str:
            return chat(history)

        if entry == "Runner.run":
            run = Runner(stack, chat).run("Tidy up my disk.")
        else:
            run = asyncio.run(Runner(stack, achat).arun("Tidy up my disk."))
        assert (run.stopped, run.output) == ("final", "Done.")
        response = run.responses[0]
    elif entry == "process_llm_response":
        response = stack.process_llm_response(output)
    elif entry == "execute":
        response = stack.execute(stack.detect(output))
    elif entry == "aprocess_llm_response":
        response = asyncio.run(stack.aprocess_llm_response(output))
    else:
        response = asyncio.run(stack.aexecute(stack.detect(output)))
    if response.call_executed:
        return True, str(response.tool_call_result)
    return False, response.call_detail or ""


def stacked(stack: Orchestrator, depth: int, **options: Any) -> Orchestrator:
    """``stack`` mounted in plain orchestrators until the stack is ``depth`` deep."""
    for level in range(depth - 1):
        stack = Orchestrator({f"level{level}": stack}, **options)
    return stack


def audited(into: list[tuple[str, Any, str | None]]) -> Callable[..., None]:
    def audit(call: ToolCall, result: Any, error: BaseException | None) -> None:
        into.append((call.name, result, None if error is None else str(error)))

    return audit


# -- orchestrators -----------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [2, 3], ids=["two-deep", "three-deep"])
@pytest.mark.parametrize("entry", ENTRIES)
def test_a_consent_gated_tool_is_never_reached_through_an_outer_stack(
    entry: str, depth: int, tmp_path: Path
) -> None:
    marker = tmp_path / "wiped.txt"
    inner = Orchestrator({"payload": Payload(marker)}, consent=lambda call: "the user said no")
    outer = stacked(inner, depth)  # the outer stacks ask no consent of their own
    ran, told = reach(entry, outer)
    assert not ran
    assert told == "the call of 'wipe' was not approved: the user said no"
    assert not marker.exists()
    # the inner consent is the tool's: it lets through what it approves, by the same path
    assert reach(entry, outer, "ping", {}) == (
        False,
        "the call of 'ping' was not approved: the user said no",
    )
    inner.consent = lambda call: call.name == "ping"
    assert reach(entry, outer, "ping", {}) == (True, "pong")
    assert reach(entry, outer)[0] is False
    assert not marker.exists()


@pytest.mark.parametrize("entry", ENTRIES)
def test_each_layer_audits_every_call_that_reaches_it_once(entry: str, tmp_path: Path) -> None:
    marker = tmp_path / "wiped.txt"
    told: dict[str, list[tuple[str, Any, str | None]]] = {"inner": [], "middle": [], "outer": []}
    inner = Orchestrator(
        {"payload": Payload(marker)}, consent=lambda call: True, audit=audited(told["inner"])
    )
    middle = Orchestrator({"inner": inner}, audit=audited(told["middle"]))
    outer = Orchestrator({"middle": middle}, audit=audited(told["outer"]))
    assert reach(entry, outer) == (True, "wiped")
    assert marker.read_text() == "wiped /home\n"  # the control: the marker shows a call ran
    assert told == {layer: [("wipe", "wiped", None)] for layer in told}
    # a call the inner consent denies ran in no inner tool: the outer layers saw it fail
    inner.consent = lambda call: False
    assert reach(entry, outer) == (False, "the call of 'wipe' was not approved")
    assert told["inner"] == [("wipe", "wiped", None)]
    denied = ("wipe", None, "the call of 'wipe' was not approved")
    assert told["middle"][1:] == told["outer"][1:] == [denied]
    assert marker.read_text() == "wiped /home\n"


@pytest.mark.parametrize("entry", ENTRIES)
def test_every_layers_consent_is_asked_outside_in_and_a_denial_stops_the_call(
    entry: str, tmp_path: Path
) -> None:
    marker = tmp_path / "wiped.txt"
    asked: list[str] = []

    def consent(layer: str, verdict: bool | str) -> Callable[[ToolCall], bool | str]:
        def decide(call: ToolCall) -> bool | str:
            asked.append(f"{layer}:{call.name}")
            return verdict

        return decide

    inner = Orchestrator({"payload": Payload(marker)}, consent=consent("inner", "no wiping"))
    middle = Orchestrator({"inner": inner}, consent=consent("middle", True))
    outer = Orchestrator({"middle": middle}, consent=consent("outer", True))
    assert reach(entry, outer) == (False, "the call of 'wipe' was not approved: no wiping")
    assert asked == ["outer:wipe", "middle:wipe", "inner:wipe"]
    asked.clear()
    outer.consent = consent("outer", False)
    assert reach(entry, outer) == (False, "the call of 'wipe' was not approved")
    assert asked == ["outer:wipe"]  # denied at the top: no layer below is asked
    assert not marker.exists()


@pytest.mark.parametrize("entry", ENTRIES)
def test_an_inner_consent_check_that_raises_denies(entry: str, tmp_path: Path) -> None:
    marker = tmp_path / "wiped.txt"

    def broken(call: ToolCall) -> bool:
        raise RuntimeError("policy server down")

    outer = stacked(Orchestrator({"payload": Payload(marker)}, consent=broken), 2)
    ran, told = reach(entry, outer)
    assert not ran
    assert told == (
        "the call of 'wipe' was not approved: "
        "the consent check failed (RuntimeError: policy server down)"
    )
    assert not marker.exists()


@pytest.mark.parametrize("entry", ["process_llm_response", "execute_tool", "aexecute_tool"])
def test_an_inner_consent_that_edits_the_call_runs_the_edited_call(
    entry: str, tmp_path: Path
) -> None:
    marker = tmp_path / "wiped.txt"

    def confine(call: ToolCall) -> ToolCall:
        return call.with_arguments({"path": "/tmp/scratch"})

    outer = stacked(Orchestrator({"payload": Payload(marker)}, consent=confine), 3)
    assert reach(entry, outer) == (True, "wiped")
    assert marker.read_text() == "wiped /tmp/scratch\n"


@pytest.mark.parametrize("asynchronous", [False, True], ids=["execute", "aexecute"])
def test_a_consent_given_to_execute_adds_to_the_stacks_own_never_replaces_it(
    asynchronous: bool, tmp_path: Path
) -> None:
    marker = tmp_path / "wiped.txt"
    stack = Orchestrator({"payload": Payload(marker)}, consent=lambda call: "not today")
    detection = stack.detect(json.dumps({"tool": "wipe", "arguments": WIPE}))
    if asynchronous:
        response = asyncio.run(stack.aexecute(detection, consent=lambda call: True))
    else:
        response = stack.execute(detection, consent=lambda call: True)
    assert not response.call_executed
    assert response.call_detail == "the call of 'wipe' was not approved: not today"
    assert not marker.exists()


class Failing(MCSToolDriver):
    meta = DriverMeta(id="failing-0001", name="failing", version="1.0.0")

    def list_tools(self) -> list[Tool]:
        return [Tool(name="fail", description="Raise.")]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        raise LookupError("no such record")


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_tools_own_error_comes_out_of_the_stack_as_raised_and_worded_as_before(
    asynchronous: bool,
) -> None:
    told: list[tuple[str, Any, str | None]] = []
    inner = Orchestrator({"failing": Failing()}, audit=audited(told))
    outer = Orchestrator({"inner": inner})
    call: Callable[[], Any] = (
        (lambda: asyncio.run(outer.aexecute_tool("fail", {})))
        if asynchronous
        else (lambda: outer.execute_tool("fail", {}))
    )
    with pytest.raises(LookupError, match="no such record"):
        call()
    output = '{"tool": "fail", "arguments": {}}'
    if asynchronous:
        response = asyncio.run(outer.aprocess_llm_response(output))
    else:
        response = outer.process_llm_response(output)
    assert response.call_detail == "fail failed: LookupError: no such record"
    assert told == [("fail", None, "no such record")] * 2


class Stuck(MCSToolDriver):
    """A tool that waits until the test lets it go."""

    meta = DriverMeta(id="stuck-0001", name="stuck", version="1.0.0")

    def __init__(self) -> None:
        self.go = threading.Event()

    def list_tools(self) -> list[Tool]:
        return [Tool(name="wait", description="Wait.")]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        self.go.wait(60)
        return "went"


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_inner_stacks_call_timeout_holds_when_called_through_the_outer(
    asynchronous: bool,
) -> None:
    stuck = Stuck()
    outer = stacked(Orchestrator({"stuck": stuck}, call_timeout=0.1), 2)  # the outer: no limit
    output = '{"tool": "wait", "arguments": {}}'

    async def main() -> Any:
        try:
            return await outer.aprocess_llm_response(output)
        finally:
            stuck.go.set()  # before asyncio.run waits for the worker thread

    try:
        response = asyncio.run(main()) if asynchronous else outer.process_llm_response(output)
    finally:
        stuck.go.set()
    assert not response.call_executed
    assert response.call_detail == "wait did not finish within 0.1 s"


# -- a host load: its consent plugins -----------------------------------------------------------


class Guard:
    """A host plugin: denies ``wipe``, approves the rest, audits every call."""

    def __init__(self) -> None:
        self.audited: list[tuple[str, Any, str | None]] = []

    @hookimpl
    def mcs_host_consent(self, call: ToolCall) -> bool | str:
        return "wiping needs a human" if call.name == "wipe" else True

    @hookimpl
    def mcs_host_after_tool_call(
        self, call: ToolCall, result: Any, error: BaseException | None
    ) -> None:
        self.audited.append((call.name, result, None if error is None else str(error)))


def guarded_stack(marker: Path) -> tuple[Orchestrator, Guard]:
    """The host's stack (the pipeline of ``load_drivers``) with the payload and the guard."""
    guard = Guard()
    host = Host(HostConfig(autoload=False, plugins=False, registries=()), search_path=[])
    host.add_driver("payload", Payload(marker))
    host.add_plugin(guard)
    stack, report = host.load()
    assert [(p.label, p.status) for p in report.plugins] == [("Guard", "mounted")]
    return stack, guard


@pytest.mark.parametrize("entry", ENTRIES)
def test_a_host_stacks_consent_plugin_holds_inside_a_plain_orchestrator(
    entry: str, tmp_path: Path
) -> None:
    marker = tmp_path / "wiped.txt"
    stack, guard = guarded_stack(marker)
    outer = Orchestrator({"host": stack})
    assert reach(entry, outer) == (
        False,
        "the call of 'wipe' was not approved: wiping needs a human",
    )
    assert not marker.exists()
    assert reach(entry, outer, "ping", {}) == (True, "pong")
    assert guard.audited == [("ping", "pong", None)]  # told once, of the call that ran


# -- load_drivers: an MCP server whose every call needs a consent plugin's approval ------------


def gated_load(directory: Path, consent: bool | None = None) -> Any:
    """``load_drivers`` with one MCP server over stdio, not vouched for by any registry (so
    each call needs a consent plugin's approval unless ``consent`` is false), and no plugin."""
    server = directory / "server.py"
    server.write_text(SERVER)
    settings: dict[str, Any] = {"command": [sys.executable, str(server), str(directory / "m")]}
    if consent is not None:
        settings["consent"] = consent
    return load_drivers(
        HostConfig(autoload=False, plugins=False, registries=()),
        trust={"allow_unverified": True},
        mcp_servers={"gated": settings},
    )


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Orchestrator, Path]]:
    pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs
    directory = tmp_path_factory.mktemp("gated")
    loaded = gated_load(directory)
    (record,) = loaded.report.records
    assert (record.status, record.message.endswith("(each call needs consent)")) == (
        "mounted",
        True,
    )
    try:
        yield loaded.driver, directory / "m"
    finally:
        for driver in loaded.owned:
            driver.close()


APPROVAL = (
    "the call of 'wipe' was not approved: each call to the MCP server 'gated' needs approval: "
    "a host plugin's mcs_host_consent hook must approve it (or set consent = false in "
    "[mcp_servers.gated])"
)
UNASKED = (
    "the call of 'wipe' was not approved: each call to the MCP server 'gated' needs approval, "
    "and this MCP client cannot ask its user for it (it does not support MCP elicitation): a "
    "host plugin's mcs_host_consent hook must approve it (or set consent = false in "
    "[mcp_servers.gated])"
)


@pytest.mark.parametrize("depth", [2, 3], ids=["two-deep", "three-deep"])
@pytest.mark.parametrize("entry", ENTRIES)
def test_a_load_drivers_stacks_consent_gated_server_holds_inside_an_outer_stack(
    entry: str, depth: int, gated: tuple[Orchestrator, Path]
) -> None:
    stack, marker = gated
    assert reach(entry, stacked(stack, depth)) == (False, APPROVAL)
    assert not marker.exists()


def test_the_same_server_with_consent_waived_is_reached_through_the_outer_stack(
    tmp_path: Path,
) -> None:
    # the control: the marker shows when the server's tool runs
    loaded = gated_load(tmp_path, consent=False)
    try:
        assert reach("process_llm_response", stacked(loaded.driver, 2)) == (True, "wiped")
    finally:
        for driver in loaded.owned:
            driver.close()
    assert (tmp_path / "m").read_text() == "wiped /home\n"


# -- serve: the stack as an MCP server, called by the SDK's client ------------------------------


def served_call(stack: Orchestrator, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    """``tool`` called by the ``mcp`` SDK's client, in memory, on ``mcp_server(stack)`` (what
    ``mcs-host serve`` runs): whether the result is an error, and its text."""
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from mcs_host.bridge.server import mcp_server

    async def main() -> Any:
        async with Client(mcp_server(stack)) as client:
            return await client.call_tool(tool, arguments)

    result = anyio.run(main)
    return result.is_error, "".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.parametrize("depth", [2, 3], ids=["two-deep", "three-deep"])
def test_serve_answers_a_call_a_nested_stack_denies_as_an_error(
    depth: int, tmp_path: Path, gated: tuple[Orchestrator, Path]
) -> None:
    marker = tmp_path / "wiped.txt"
    stack, guard = guarded_stack(marker)
    outer = stacked(stack, depth)
    assert served_call(outer, "wipe", WIPE) == (
        True,
        "the call of 'wipe' was not approved: wiping needs a human",
    )
    assert served_call(outer, "ping", {}) == (False, "pong")
    assert not marker.exists()
    assert guard.audited == [("ping", "pong", None)]
    server, server_marker = gated
    # the SDK's client here declares no elicitation: its user cannot be asked
    assert served_call(stacked(server, depth), "wipe", WIPE) == (True, UNASKED)
    assert not server_marker.exists()
