"""A verified load's tools as LangChain tools, driven by the loop LangChain documents for its
core (``bind_tools``, the model's tool calls, each tool invoked with its call, the
``ToolMessage`` back to the model) with langchain-core's own fake chat model, scripted: the
model is given each tool's name and schema as the stack offers it; a call runs through the
stack and its result comes back; what the stack refuses comes back to the model as an error
``ToolMessage`` and the loop goes on; a call that needs approval reaches the gated server
only when ``approve`` says yes (the marker file proves what ran)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from _frameworks import AgentStack, Keys
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.tool import tool_call
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from mcs_host import (
    Loaded,
    LoadReport,
    Orchestrator,
    ToolCall,
    langchain_tools,
)

UNITS = {"file": "sales.csv", "column": "units"}


class ScriptedChatModel(GenericFakeChatModel):
    """langchain-core's fake chat model with the ``bind_tools`` a provider's model has (the
    tools as OpenAI tools, bound to each call); it keeps what each call was given."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[list[dict[str, Any]]] = Field(default_factory=list)

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any
    ) -> Runnable[Any, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        self.bound.append(kwargs.get("tools", []))
        return super()._generate(messages, stop, run_manager, **kwargs)


def calling(*calls: tuple[str, dict[str, Any]]) -> AIMessage:
    """The model's turn that calls each of ``calls``."""
    return AIMessage(
        "",
        tool_calls=[
            tool_call(name=name, args=args, id=f"call_{index}")
            for index, (name, args) in enumerate(calls)
        ],
    )


def scripted(*turns: AIMessage) -> ScriptedChatModel:
    return ScriptedChatModel(messages=iter([*turns, AIMessage("done")]))


def loop(model: ScriptedChatModel, tools: list[BaseTool]) -> list[BaseMessage]:
    """The conversation of LangChain's tool-calling loop, to the model's answer without calls."""
    bound = model.bind_tools(tools)
    by_name = {tool.name: tool for tool in tools}
    messages: list[BaseMessage] = [HumanMessage("How many units were sold?")]
    while True:
        answer = bound.invoke(messages)
        messages.append(answer)
        if not isinstance(answer, AIMessage) or not answer.tool_calls:
            return messages
        messages.extend(by_name[call["name"]].invoke(call) for call in answer.tool_calls)


async def aloop(model: ScriptedChatModel, tools: list[BaseTool]) -> list[BaseMessage]:
    """:func:`loop` with ``ainvoke``."""
    bound = model.bind_tools(tools)
    by_name = {tool.name: tool for tool in tools}
    messages: list[BaseMessage] = [HumanMessage("How many units were sold?")]
    while True:
        answer = await bound.ainvoke(messages)
        messages.append(answer)
        if not isinstance(answer, AIMessage) or not answer.tool_calls:
            return messages
        for call in answer.tool_calls:
            messages.append(await by_name[call["name"]].ainvoke(call))


def tool_messages(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def test_the_model_is_given_the_stacks_names_and_schemas_and_a_call_answers(
    agent_stack: AgentStack,
) -> None:
    stack = agent_stack.loaded.driver
    schemas = {t.name: t.input_schema() for t in stack.list_tools()}
    tools = langchain_tools(agent_stack.loaded)
    assert [t.name for t in tools] == list(schemas)
    assert all(isinstance(t, StructuredTool) for t in tools)
    assert {t.name: t.args_schema for t in tools} == schemas  # as offered, not re-derived
    wipe = tools[-1]
    assert wipe.metadata == {
        "mcs_host": {
            "label": "gated",
            "own_name": "wipe",
            "title": None,
            "annotations": {},
            "gated": True,
        }
    }
    assert tools[0].metadata is not None
    assert tools[0].metadata["mcs_host"]["annotations"]["readOnlyHint"] is True

    model = scripted(calling(("summarize_column", UNITS)))
    messages = loop(model, langchain_tools(agent_stack.loaded, labels="csv"))
    bound = {t["function"]["name"]: t["function"]["parameters"] for t in model.bound[0]}
    assert bound == {name: schema for name, schema in schemas.items() if name != "wipe"}
    [answer] = tool_messages(messages)
    assert (answer.status, answer.tool_call_id, answer.name) == (
        "success",
        "call_0",
        "summarize_column",
    )
    assert json.loads(answer.text)["sum"] == 773.0
    assert answer.artifact["sum"] == 773.0  # the result itself, beside the model's text
    assert model.seen[1][-1] is answer  # back to the model, which answered
    assert messages[-1].text == "done"

    amodel = scripted(calling(("summarize_column", UNITS)))
    [aanswer] = tool_messages(asyncio.run(aloop(amodel, tools)))
    assert (aanswer.status, json.loads(aanswer.text)["sum"]) == ("success", 773.0)


def test_what_the_stack_refuses_is_an_error_message_to_the_model_and_the_loop_goes_on(
    agent_stack: AgentStack,
) -> None:
    model = scripted(
        calling(("summarize_column", {"file": "sales.csv", "column": "nope"})),
        calling(("summarize_column", {"file": "sales.csv", "column": 3})),
        calling(("summarize_column", UNITS)),
    )
    messages = loop(model, langchain_tools(agent_stack.loaded))
    no_column, not_a_string, answer = tool_messages(messages)
    assert no_column.status == "error"
    assert no_column.text == (
        "summarize_column: tool 'summarize_column', argument 'column': no column 'nope'; "
        "the columns are date, region, product, units, unit_price"
    )
    # LangChain neither checked nor coerced 3: the stack's schema refused it
    assert not_a_string.status == "error"
    assert not_a_string.text == (
        "summarize_column: argument 'column': expected string, got integer 3 (rule: type)"
    )
    assert model.seen[1][-1] is no_column
    assert model.seen[2][-1] is not_a_string
    assert (answer.status, json.loads(answer.text)["sum"]) == ("success", 773.0)
    assert messages[-1].text == "done"


def wipe_once(agent_stack: AgentStack, approve: Any, *, run: Callable[..., Any] = loop) -> str:
    """What the model reads after calling ``wipe`` once with ``approve``."""
    model = scripted(calling(("wipe", {"path": "/"})))
    tools = langchain_tools(agent_stack.loaded, approve=approve)
    result = run(model, tools)
    messages = asyncio.run(result) if asyncio.iscoroutine(result) else result
    [answer] = tool_messages(messages)
    assert messages[-1].text == "done"
    return f"{answer.status}: {answer.text}"


def test_a_gated_call_runs_only_when_approve_says_yes(agent_stack: AgentStack) -> None:
    questions: list[str] = []

    def decline(question: str) -> bool:
        questions.append(question)
        return False

    assert wipe_once(agent_stack, decline) == (
        "error: the call of 'wipe' was not approved: the user declined it in LangChain"
    )
    assert questions == [
        'Run the tool "wipe" of gated with the arguments {"path": "/"}? '
        "(each call to the MCP server 'gated' needs approval)"
    ]
    assert not agent_stack.marker.exists()

    nobody = wipe_once(agent_stack, None)
    assert nobody.startswith("error: the call of 'wipe' was not approved: ")
    assert "mcs_host_consent hook must approve it" in nobody
    assert nobody.endswith(
        "(or set consent = false in [mcp_servers.gated]), or pass approve= to langchain_tools()"
    )
    assert not agent_stack.marker.exists()

    with pytest.raises(TypeError, match=r"argument 'approve' must be a function or None"):
        langchain_tools(agent_stack.loaded, approve=True)  # type: ignore[arg-type]

    assert wipe_once(agent_stack, lambda question: True) == "success: wiped"
    assert agent_stack.marker.read_text() == "wiped /\n"


def test_an_async_approve_is_awaited_on_ainvoke(agent_stack: AgentStack) -> None:
    async def decline(question: str) -> bool:
        return False

    declined = wipe_once(agent_stack, decline, run=aloop)
    assert (
        declined == "error: the call of 'wipe' was not approved: the user declined it in LangChain"
    )
    assert not agent_stack.marker.exists()

    asked: list[str] = []

    async def accept(question: str) -> bool:
        asked.append(question)
        return True

    assert wipe_once(agent_stack, accept, run=aloop) == "success: wiped"
    assert agent_stack.marker.read_text() == "wiped /\n"
    assert len(asked) == 1


def test_tools_are_filtered_by_label_and_name_and_a_bad_one_is_named(
    agent_stack: AgentStack,
) -> None:
    csv = langchain_tools(agent_stack.loaded, labels="csv")
    assert [t.name for t in csv] == [
        "list_csv_files",
        "read_csv_head",
        "filter_csv_rows",
        "summarize_column",
    ]
    only = langchain_tools(agent_stack.loaded, tools=["summarize_column"])
    assert [t.name for t in only] == ["summarize_column"]
    with pytest.raises(ValueError, match=r"no driver is mounted as 'nope'; mounted: csv, gated"):
        langchain_tools(agent_stack.loaded, labels=["nope"])
    with pytest.raises(ValueError, match=r"no tool is offered as 'csv__wipe'"):
        langchain_tools(agent_stack.loaded, tools="csv__wipe")
    with pytest.raises(TypeError, match=r"takes what load_drivers\(\) returns"):
        langchain_tools(agent_stack.loaded.driver)  # type: ignore[arg-type]


KEYS = ("config", "run_manager", "callbacks", "self")
"""LangChain's own keyword arguments."""


def test_arguments_reach_the_tool_as_the_model_gave_them_and_the_caller_reaches_the_audit() -> None:
    audited: list[tuple[str | None, dict[str, Any]]] = []

    def audit(call: ToolCall, result: Any, error: BaseException | None) -> None:
        audited.append((call.caller, dict(call.arguments)))

    stack = Orchestrator({"keys": Keys(KEYS)}, audit=audit)
    [tool] = langchain_tools(Loaded(stack, LoadReport(())), caller="ada")
    arguments = {name: name.upper() for name in KEYS}
    call = tool_call(name="keys", args=arguments, id="call_0")
    answer = tool.invoke(call)
    assert (answer.status, answer.artifact) == ("success", arguments)
    assert asyncio.run(tool.ainvoke(call)).artifact == arguments
    assert audited == [("ada", arguments), ("ada", arguments)]


def test_without_langchain_core_the_error_names_the_extra(
    agent_stack: AgentStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "langchain_core", None)
    needs = r"^langchain_tools\(\) needs langchain_core, which is not installed .*\[langchain\]'$"
    with pytest.raises(ImportError, match=needs):
        langchain_tools(agent_stack.loaded)
