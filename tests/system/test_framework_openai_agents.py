"""A verified load's tools as the OpenAI Agents SDK's function tools, driven by the SDK's own
agent loop (``Runner.run``) with the SDK's own scripted model (``agents.testing.ScriptedModel``,
the ``Model`` interface): the model is given each tool under the stack's name, with its schema
rewritten for strict mode where that accepts only what the tool accepts; a call runs through
the stack and its result comes back as a ``function_call_output``; what the stack refuses comes
back as that output and the run goes on; a call that needs approval stops the run as the SDK's
interruption and reaches the gated server only once approved (the marker file proves what
ran)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest
from _frameworks import AgentStack
from agents import Agent, FunctionTool, RunConfig, Runner, RunResult, RunState
from agents.testing import ScriptedModel, assistant_message, function_call

from mcs_host import (
    DriverMeta,
    Loaded,
    LoadReport,
    MCSToolDriver,
    Orchestrator,
    Tool,
    ToolCall,
    ToolParameter,
    openai_agents_tools,
)
from mcs_host.orchestration.response_schema import strict_arguments

UNITS = {"file": "sales.csv", "column": "units"}
REJECTED = "Tool execution was not approved."
"""The SDK's output for a call its user rejected (``DEFAULT_APPROVAL_REJECTION_MESSAGE``)."""


def scripted(*calls: tuple[str, dict[str, Any] | str]) -> ScriptedModel:
    """The SDK's scripted model: one turn per call of ``calls`` (arguments as a dict, or the
    raw JSON text), then the answer ``done``."""
    turns: list[Any] = [
        [function_call(name, arguments, call_id=f"call_{index}")]
        for index, (name, arguments) in enumerate(calls)
    ]
    return ScriptedModel([*turns, [assistant_message("done")]])


def run(
    model: ScriptedModel, tools: list[FunctionTool], state: RunState[Any] | None = None
) -> RunResult:
    """One run of the SDK's agent loop (tracing off: nothing leaves this process); from
    ``state`` when it resumes an interrupted run."""
    agent = Agent(name="analyst", model=model, tools=list(tools))
    start: Any = "How many units were sold?" if state is None else state
    config = RunConfig(tracing_disabled=True)
    return asyncio.run(Runner.run(agent, start, run_config=config))


def outputs(model: ScriptedModel) -> list[str]:
    """The output of each tool call, as the model was given it, in order."""
    last = model.calls[-1].input
    assert isinstance(last, list)
    return [item["output"] for item in last if item.get("type") == "function_call_output"]


def test_the_model_is_given_the_stacks_names_and_strict_schemas_and_a_call_answers(
    agent_stack: AgentStack,
) -> None:
    stack = agent_stack.loaded.driver
    schemas = {t.name: t.input_schema() for t in stack.list_tools()}
    model = scripted(("summarize_column", UNITS))
    result = run(model, openai_agents_tools(agent_stack.loaded))
    given = model.calls[0].tools
    assert [t.name for t in given] == list(schemas)
    for tool in given:
        assert isinstance(tool, FunctionTool)
        strict = strict_arguments(schemas[tool.name])
        assert isinstance(strict, dict), strict  # every tool of these two has a strict form
        assert (tool.strict_json_schema, tool.params_json_schema) == (True, strict)
        assert tool.needs_approval is (tool.name == "wipe")
    [answer] = outputs(model)
    assert json.loads(answer)["sum"] == 773.0  # JSON text, not the repr of a dict
    assert result.final_output == "done"


EITHER = {
    "anyOf": [
        {
            "type": "object",
            "properties": {"id": {"type": "integer"}},
            "required": ["id"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": False,
        },
    ]
}
"""Arguments one of two objects: strict as our rewrite reads it, not as the SDK's (whose strict
root must be a plain object)."""


class Either(Tool):
    def input_schema(self) -> dict[str, Any]:
        return EITHER


class Notes(MCSToolDriver):
    """Tools whose schemas strict mode cannot express, or can, or the SDK's cannot."""

    meta = DriverMeta(id="notes-0001", name="Notes", version="1.0.0")

    def list_tools(self) -> list[Tool]:
        text = ToolParameter(
            name="text", description="The note.", schema={"type": "string", "minLength": 1}
        )
        tag = ToolParameter(name="tag", description="The tag.", schema={"type": "string"})
        return [
            Tool(name="note", description="Keep a note.", parameters=[text]),
            Tool(name="tag", description="Tag a note.", parameters=[tag]),
            Either(name="find", description="Find a note by id or name."),
        ]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return {"type": "text", "kept": dict(arguments)}


def test_a_schema_strict_mode_cannot_take_is_given_as_it_is_and_the_caller_is_audited() -> None:
    audited: list[tuple[str | None, dict[str, Any]]] = []

    def audit(call: ToolCall, result: Any, error: BaseException | None) -> None:
        audited.append((call.caller, dict(call.arguments)))

    stack = Orchestrator({"notes": Notes()}, audit=audit)
    note, tag, find = openai_agents_tools(Loaded(stack, LoadReport(())), caller="ada")
    schemas = [t.input_schema() for t in stack.list_tools()]
    assert "minLength" in str(strict_arguments(schemas[0]))  # why it is not strict
    assert (note.strict_json_schema, note.params_json_schema) == (False, schemas[0])
    assert tag.strict_json_schema is True
    assert tag.params_json_schema["properties"]["tag"]["type"] == ["string", "null"]
    assert strict_arguments(EITHER) == EITHER  # the SDK would refuse it as a strict root
    assert (find.strict_json_schema, find.params_json_schema) == (False, EITHER)

    model = scripted(("note", {"text": ""}), ("note", {"text": "hi"}), ("tag", {"tag": None}))
    run(model, [note, tag])
    too_short, kept, untagged = outputs(model)
    assert too_short == "note: argument 'text': needs at least 1 characters (rule: minLength)"
    # a dict result is JSON text for the model (a dict with a "type" is not the SDK's structure)
    assert json.loads(kept) == {"type": "text", "kept": {"text": "hi"}}
    assert json.loads(untagged) == {"type": "text", "kept": {}}  # null: not given
    assert audited == [("ada", {"text": "hi"}), ("ada", {})]


def test_what_the_stack_refuses_is_the_output_and_the_model_retries(
    agent_stack: AgentStack,
) -> None:
    model = scripted(
        ("summarize_column", {"file": "sales.csv", "column": "nope"}),
        ("summarize_column", {"file": "sales.csv", "column": 3}),
        ("summarize_column", '{"file": "sales.csv",'),
        ("summarize_column", "[1]"),
        ("summarize_column", UNITS),
    )
    result = run(model, openai_agents_tools(agent_stack.loaded))
    no_column, not_a_string, not_json, not_an_object, answer = outputs(model)
    assert no_column == (
        "summarize_column: tool 'summarize_column', argument 'column': no column 'nope'; "
        "the columns are date, region, product, units, unit_price"
    )
    # the SDK checked nothing: the stack's schema refused 3
    assert not_a_string == (
        "summarize_column: argument 'column': expected string, got integer 3 (rule: type)"
    )
    assert not_json.startswith("Invalid JSON input for tool summarize_column: ")
    assert not_an_object == "Invalid JSON input for tool summarize_column: expected a JSON object"
    assert json.loads(answer)["sum"] == 773.0
    assert len(model.calls) == 6  # each refusal went back to the model, which called again
    assert result.final_output == "done"


def test_a_gated_call_interrupts_the_run_and_runs_only_once_approved(
    agent_stack: AgentStack,
) -> None:
    tools = openai_agents_tools(agent_stack.loaded)
    model = scripted(("wipe", {"path": "/"}))
    stopped = run(model, tools)
    [asked] = stopped.interruptions
    assert (asked.tool_name, asked.arguments) == ("wipe", '{"path":"/"}')
    assert stopped.final_output is None
    assert not agent_stack.marker.exists()

    state = stopped.to_state()
    state.approve(asked)
    resumed = run(model, tools, state)
    assert agent_stack.marker.read_text() == "wiped /\n"
    assert outputs(model) == ["wiped"]
    assert (resumed.interruptions, resumed.final_output) == ([], "done")


def test_always_approve_runs_the_tools_later_calls_in_the_run(agent_stack: AgentStack) -> None:
    tools = openai_agents_tools(agent_stack.loaded)
    model = scripted(("wipe", {"path": "/a"}), ("wipe", {"path": "/b"}))
    stopped = run(model, tools)
    [asked] = stopped.interruptions
    state = stopped.to_state()
    state.approve(asked, always_approve=True)
    resumed = run(model, tools, state)
    assert resumed.interruptions == []
    assert agent_stack.marker.read_text() == "wiped /a\nwiped /b\n"
    assert outputs(model) == ["wiped", "wiped"]


def test_a_rejected_call_never_reaches_the_stack(agent_stack: AgentStack) -> None:
    tools = openai_agents_tools(agent_stack.loaded)
    model = scripted(("wipe", {"path": "/"}))
    stopped = run(model, tools)
    [asked] = stopped.interruptions
    state = stopped.to_state()
    state.reject(asked)
    resumed = run(model, tools, state)
    assert not agent_stack.marker.exists()
    assert outputs(model) == [REJECTED]
    assert resumed.final_output == "done"


def test_a_gated_call_the_sdk_did_not_put_to_the_user_is_denied(agent_stack: AgentStack) -> None:
    tools = openai_agents_tools(agent_stack.loaded)
    tools[-1].needs_approval = False  # the SDK runs it without asking
    model = scripted(("wipe", {"path": "/"}))
    result = run(model, tools)
    assert result.interruptions == []
    assert not agent_stack.marker.exists()
    [denied] = outputs(model)
    assert denied.startswith("the call of 'wipe' was not approved: ")
    assert denied.endswith(
        "(or set consent = false in [mcp_servers.gated]), or approve it when the run stops "
        "at it (keep the tool's needs_approval=True)"
    )
    assert result.final_output == "done"


def test_strict_null_for_an_optional_argument_runs_with_its_default(
    agent_stack: AgentStack,
) -> None:
    [head] = openai_agents_tools(agent_stack.loaded, tools="read_csv_head")
    assert head.params_json_schema["required"] == ["file", "rows"]
    assert head.params_json_schema["properties"]["rows"]["type"] == ["integer", "null"]
    model = scripted(("read_csv_head", {"file": "sales.csv", "rows": None}))
    run(model, [head])
    [answer] = outputs(model)
    assert len(json.loads(answer)["rows"]) == 5  # the tool's default


def test_tools_are_filtered_by_label_and_name_and_a_bad_one_is_named(
    agent_stack: AgentStack,
) -> None:
    csv = openai_agents_tools(agent_stack.loaded, labels="csv")
    assert [t.name for t in csv] == [
        "list_csv_files",
        "read_csv_head",
        "filter_csv_rows",
        "summarize_column",
    ]
    assert not any(t.needs_approval for t in csv)
    only = openai_agents_tools(agent_stack.loaded, tools=["summarize_column"])
    assert [t.name for t in only] == ["summarize_column"]
    with pytest.raises(ValueError, match=r"no driver is mounted as 'nope'; mounted: csv, gated"):
        openai_agents_tools(agent_stack.loaded, labels=["nope"])
    with pytest.raises(ValueError, match=r"no tool is offered as 'csv__wipe'"):
        openai_agents_tools(agent_stack.loaded, tools="csv__wipe")
    with pytest.raises(TypeError, match=r"takes what load_drivers\(\) returns"):
        openai_agents_tools(agent_stack.loaded.driver)  # type: ignore[arg-type]


def test_without_openai_agents_the_error_names_the_extra(
    agent_stack: AgentStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "agents", None)
    needs = r"^openai_agents_tools\(\) needs agents, which is not installed .*\[openai-agents\]'$"
    with pytest.raises(ImportError, match=needs):
        openai_agents_tools(agent_stack.loaded)
