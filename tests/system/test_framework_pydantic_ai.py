"""A verified load's tools as a PydanticAI toolset, driven by PydanticAI's own agent loop
(``Agent.run_sync``) with its ``FunctionModel``, scripted: the model is given each tool's name
and schema as the stack offers it; a call runs through the stack and its result comes back;
what the stack refuses comes back as a retry and the model's next call answers; a call that
needs approval ends the run with PydanticAI's deferred approval and reaches the gated server
only when the next run, or PydanticAI's handler within the run, approves it (the marker file
proves what ran); a consent plugin's denial is the call's result."""

from __future__ import annotations

import asyncio
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from _frameworks import AgentStack
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ToolApproved,
    ToolDenied,
    UnexpectedModelBehavior,
)
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset

from mcs_host import Loaded, Orchestrator, ToolCall, pydantic_ai_toolset

UNITS = {"file": "sales.csv", "column": "units"}
QUESTION = (
    'Run the tool "wipe" of gated with the arguments {"path": "/"}? '
    "(each call to the MCP server 'gated' needs approval)"
)

Turn = list[tuple[str, dict[str, Any]]] | str


class Script:
    """A model's turns for ``FunctionModel``: each the tool calls it makes or its answer,
    ``"done"`` once they are spent; it keeps what each turn was given."""

    def __init__(self, *turns: Turn) -> None:
        self.turns = list(turns)
        self.seen: list[list[ModelMessage]] = []
        self.tools: list[list[ToolDefinition]] = []
        self.calls = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        self.tools.append(list(info.function_tools))
        turn = self.turns.pop(0) if self.turns else "done"
        if isinstance(turn, str):
            return ModelResponse(parts=[TextPart(turn)])
        parts = []
        for name, arguments in turn:
            self.calls += 1
            parts.append(ToolCallPart(name, arguments, tool_call_id=f"call_{self.calls}"))
        return ModelResponse(parts=parts)

    def answers(self, turn: int = -1) -> list[ToolReturnPart]:
        """The answers to the model's calls that turn ``turn`` was given."""
        request = self.seen[turn][-1]
        assert isinstance(request, ModelRequest)
        parts = [part for part in request.parts if isinstance(part, ToolReturnPart)]
        assert len(parts) == len(request.parts), request.parts
        return parts


@pytest.fixture(autouse=True)
def _run_sync_leaves_no_loop() -> Iterator[None]:
    """``Agent.run_sync`` makes an event loop, sets it as this thread's and leaves it open:
    closed after each test, so that no later test finds it unclosed when the next
    ``asyncio.run`` replaces it (a ResourceWarning, an error under this suite's filters)."""
    yield
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: no loop set, one made
            loop = asyncio.get_event_loop()
    except RuntimeError:  # set to None already: none left
        return
    loop.close()
    asyncio.set_event_loop(None)


def total(answer: ToolReturnPart) -> Any:
    """The sum in ``summarize_column``'s answer."""
    assert isinstance(answer.content, dict), answer.content
    return answer.content["sum"]


def agent(script: Script, toolset: AbstractToolset[Any]) -> Agent[None, str | DeferredToolRequests]:
    return Agent(FunctionModel(script), toolsets=[toolset], output_type=[str, DeferredToolRequests])


def test_the_model_is_given_the_stacks_tools_and_a_call_answers(agent_stack: AgentStack) -> None:
    stack = agent_stack.loaded.driver
    offered = {t.name: t for t in stack.list_tools()}
    script = Script([("summarize_column", UNITS)])
    runner = agent(script, pydantic_ai_toolset(agent_stack.loaded))
    result = runner.run_sync("How many units were sold?")

    given = script.tools[0]
    assert [t.name for t in given] == list(offered)
    # as offered, not re-derived
    assert {t.name: t.parameters_json_schema for t in given} == {
        name: tool.input_schema() for name, tool in offered.items()
    }
    by_name = {t.name: t for t in given}
    assert by_name["summarize_column"].description == offered["summarize_column"].description
    assert by_name["wipe"].metadata == {
        "mcs_host": {
            "label": "gated",
            "own_name": "wipe",
            "title": None,
            "annotations": {},
            "gated": True,
        }
    }
    summarize = by_name["summarize_column"].metadata
    assert summarize is not None
    assert summarize["mcs_host"]["label"] == "csv"
    assert summarize["mcs_host"]["own_name"] == "summarize_column"
    assert summarize["mcs_host"]["annotations"]["readOnlyHint"] is True
    assert summarize["mcs_host"]["gated"] is False

    [answer] = script.answers(1)
    assert (answer.tool_name, answer.tool_call_id, answer.outcome) == (
        "summarize_column",
        "call_1",
        "success",
    )
    assert total(answer) == 773.0
    assert result.output == "done"

    # each run enters and leaves the toolset; the load stays mounted for the next one
    again = Script([("summarize_column", UNITS)])
    assert runner.run_sync("And again?", model=FunctionModel(again)).output == "done"
    assert total(again.answers(1)[0]) == 773.0


def test_what_the_stack_refuses_is_a_retry_and_the_models_next_call_answers(
    agent_stack: AgentStack,
) -> None:
    script = Script(
        [
            ("summarize_column", {"file": "sales.csv", "column": "nope"}),
            ("read_csv_head", {"file": "sales.csv", "rows": "many"}),
            ("list_csv_files", {"pattern": 3}),
        ],
        [("summarize_column", UNITS), ("read_csv_head", {"file": "sales.csv", "rows": 1})],
    )
    result = agent(script, pydantic_ai_toolset(agent_stack.loaded)).run_sync("Sum the units.")
    retried = script.answers(1)
    assert [(a.tool_call_id, a.outcome) for a in retried] == [
        ("call_1", "retried"),
        ("call_2", "retried"),
        ("call_3", "retried"),
    ]
    assert all(a.retry is not None and a.retry.cause == "model_retry" for a in retried)
    # the driver's own ToolArgumentError, then the stack's schema check (PydanticAI checked
    # nothing: "many" reached the stack as it was)
    assert [a.content for a in retried] == [
        "summarize_column: tool 'summarize_column', argument 'column': no column 'nope'; "
        "the columns are date, region, product, units, unit_price",
        "read_csv_head: argument 'rows': expected integer, got string 'many' (rule: type)",
        "list_csv_files: argument 'pattern': unexpected argument; known: path, recursive, limit "
        "(rule: additionalProperties)",
    ]
    summed, head = script.answers(2)
    assert (summed.outcome, total(summed)) == ("success", 773.0)
    assert head.outcome == "success"
    assert result.output == "done"

    strict = Script([("summarize_column", {"file": "sales.csv", "column": "nope"})])
    with pytest.raises(UnexpectedModelBehavior, match=r"summarize_column.*exceeded max retries"):
        agent(strict, pydantic_ai_toolset(agent_stack.loaded, max_retries=0)).run_sync("Sum.")


def wipe_deferred(agent_stack: AgentStack) -> tuple[Script, Agent[None, Any], Any, str]:
    """A run whose model calls ``wipe``: its script, agent, result and the call's id."""
    script = Script([("wipe", {"path": "/"})])
    runner = agent(script, pydantic_ai_toolset(agent_stack.loaded))
    first = runner.run_sync("Wipe it.")
    requests = first.output
    assert isinstance(requests, DeferredToolRequests)
    [call] = requests.approvals
    assert (call.tool_name, call.args) == ("wipe", {"path": "/"})
    assert requests.calls == []
    assert requests.metadata == {call.tool_call_id: {"question": QUESTION}}
    assert len(script.seen) == 1  # the run ended at the call, waiting
    assert not agent_stack.marker.exists()
    return script, runner, first, call.tool_call_id


def test_a_gated_call_waits_for_approval_and_runs_once_approved(agent_stack: AgentStack) -> None:
    script, runner, first, call_id = wipe_deferred(agent_stack)
    second = runner.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={call_id: True}),
    )
    assert agent_stack.marker.read_text() == "wiped /\n"
    [answer] = script.answers()
    assert (answer.tool_call_id, answer.outcome, answer.content) == (call_id, "success", "wiped")
    assert second.output == "done"


def test_a_declined_call_never_runs_and_the_model_reads_the_denial(
    agent_stack: AgentStack,
) -> None:
    refusals: list[tuple[bool | ToolDenied, str]] = [
        (False, "The tool call was denied."),
        (ToolDenied("Not the root, please."), "Not the root, please."),
    ]
    for declined, told in refusals:
        script, runner, first, call_id = wipe_deferred(agent_stack)
        second = runner.run_sync(
            message_history=first.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals={call_id: declined}),
        )
        assert not agent_stack.marker.exists()
        [answer] = script.answers()
        assert (answer.outcome, answer.content) == ("denied", told)
        assert second.output == "done"

    # an approval that changes the arguments: the stack checks them still
    script, runner, first, call_id = wipe_deferred(agent_stack)
    runner.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(
            approvals={call_id: ToolApproved(override_args={"path": 5})}
        ),
    )
    assert not agent_stack.marker.exists()
    [answer] = script.answers()
    assert (answer.outcome, answer.content) == (
        "retried",
        "wipe: argument 'path': expected string, got integer 5 (rule: type)",
    )


def test_tools_are_filtered_by_label_and_name_and_a_bad_one_is_named(
    agent_stack: AgentStack,
) -> None:
    script = Script([("wipe", {"path": "/"})])
    result = agent(script, pydantic_ai_toolset(agent_stack.loaded, labels="csv")).run_sync("Go.")
    assert [t.name for t in script.tools[0]] == [
        "list_csv_files",
        "read_csv_head",
        "filter_csv_rows",
        "summarize_column",
    ]
    [answer] = script.answers(1)  # PydanticAI's own answer to a tool it was not given
    assert answer.outcome == "retried"
    assert "Unknown tool name: 'wipe'" in str(answer.content)
    assert result.output == "done"
    assert not agent_stack.marker.exists()

    only = Script()
    agent(only, pydantic_ai_toolset(agent_stack.loaded, tools=["summarize_column"])).run_sync("?")
    assert [t.name for t in only.tools[0]] == ["summarize_column"]

    with pytest.raises(ValueError, match=r"no tool is offered as 'nope'; the tools are: "):
        pydantic_ai_toolset(agent_stack.loaded, tools=["nope"])
    with pytest.raises(ValueError, match=r"no driver is mounted as 'nope'; mounted: csv, gated"):
        pydantic_ai_toolset(agent_stack.loaded, labels=["nope"])
    with pytest.raises(TypeError, match=r"takes what load_drivers\(\) returns"):
        pydantic_ai_toolset(agent_stack.loaded.driver)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"argument 'max_retries' must be 0 or more, not -1"):
        pydantic_ai_toolset(agent_stack.loaded, max_retries=-1)


def test_a_consent_plugins_denial_is_the_calls_result_and_the_run_goes_on(
    agent_stack: AgentStack,
) -> None:
    asked: list[tuple[str, str | None]] = []

    def consent(call: ToolCall) -> str:
        asked.append((call.name, call.caller))
        return "not during the audit"

    loaded = agent_stack.loaded
    stack = Orchestrator(
        {"csv": loaded.driver.driver("csv"), "gated": loaded.driver.driver("gated")},
        consent=consent,
    )
    denying = Loaded(stack, loaded.report)
    script = Script([("summarize_column", UNITS), ("wipe", {"path": "/"})])
    toolset = pydantic_ai_toolset(denying, caller="ada", id="audit")
    assert toolset.id == "audit"
    result = agent(script, toolset).run_sync("Sum, then wipe.")
    summed, wiped = script.answers(1)
    assert summed.outcome == wiped.outcome == "denied"
    assert "not during the audit" in str(summed.content)
    assert "not during the audit" in str(wiped.content)
    assert sorted(asked) == [("summarize_column", "ada"), ("wipe", "ada")]
    assert not agent_stack.marker.exists()
    assert result.output == "done"


def test_without_pydantic_ai_the_error_names_the_extra(
    agent_stack: AgentStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)
    needs = (
        r"^pydantic_ai_toolset\(\) needs pydantic_ai, which is not installed .*\[pydantic-ai\]'$"
    )
    with pytest.raises(ImportError, match=needs):
        pydantic_ai_toolset(agent_stack.loaded)


def test_a_gated_call_approved_within_the_run_by_pydantic_ais_handler_runs(
    agent_stack: AgentStack,
) -> None:
    asked: list[str] = []

    def handle(ctx: Any, requests: DeferredToolRequests) -> DeferredToolResults:
        for call in requests.approvals:
            asked.append(requests.metadata[call.tool_call_id]["question"])
        return requests.build_results(approve_all=True)

    script = Script([("wipe", {"path": "/"})])
    runner = Agent(
        FunctionModel(script),
        toolsets=[pydantic_ai_toolset(agent_stack.loaded)],
        capabilities=[HandleDeferredToolCalls(handler=handle)],
    )
    assert runner.run_sync("Wipe it.").output == "done"
    assert asked == [QUESTION]
    assert agent_stack.marker.read_text() == "wiped /\n"
    [answer] = script.answers()
    assert (answer.outcome, answer.content) == ("success", "wiped")
