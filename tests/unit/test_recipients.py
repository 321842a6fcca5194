"""Messages addressed by their header: only a message to a tool is a call.

Muse Glimmer (llama.cpp ``common_chat_params_init_muse_glimmer``): a message ``to=NAME`` runs
its ``<atem:invoke>`` calls, whole without the stop tokens a server takes off (``<|eom|>``,
``<|eot|>``) and cut off, never run, without the closing tags the model writes; a message
``to=user`` or ``to=self`` runs nothing, whatever markup it quotes, and ``to=self`` is
reasoning, not shown. gpt-oss: a message ``to=functions.NAME`` in the role header is a call
whatever its channel, and a recipient written inside reasoning is still reasoning.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcs_host import DriverMeta, MCSToolDriver, Orchestrator, Tool, ToolParameter, detect
from mcs_host.orchestration.text import DEFAULT_FORMATS

INVOKE = (
    '<atem:invoke name="get_weather">\n<atem:parameter name="city">Oslo</atem:parameter>\n'
    '<atem:parameter name="days">3</atem:parameter>\n</atem:invoke>'
)
CALL = f" to=get_weather<|message|><atem:function_calls>\n{INVOKE}\n</atem:function_calls>"
NEXT = "<|eom|><|start|>assistant"


class Weather(MCSToolDriver):
    """Offers ``get_weather`` (a city, a number of days); records each run."""

    meta = DriverMeta(id="weather-0001", name="Weather", version="1.0.0")

    def __init__(self) -> None:
        self.ran: list[dict[str, Any]] = []

    def list_tools(self) -> list[Tool]:
        return [
            Tool(
                name="get_weather",
                description="The weather.",
                parameters=[
                    ToolParameter(name="city", description="The city."),
                    ToolParameter(name="days", description="Days.", schema={"type": "integer"}),
                ],
            )
        ]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        self.ran.append(dict(arguments))
        return "sunny"


def found(text: str) -> list[tuple[str, Any]]:
    return [
        (c.name, dict(c.arguments) if c.problem is None else f"problem: {c.problem}")
        for c in detect(text, {"get_weather"}).calls
    ]


OSLO = ("get_weather", {"city": "Oslo", "days": 3})
RUNS = {
    "the first message, its stop token taken off": (CALL, [OSLO]),
    "ended by <|eot|>": (f"{CALL}<|eot|>", [OSLO]),
    "its header written whole": (f"<|start|>assistant{CALL}<|eom|>", [OSLO]),
    "after reasoning": (f" to=self<|message|>Check it.{NEXT}{CALL}", [OSLO]),
    "after an answer": (f" to=user<|message|>Let me look.{NEXT}{CALL}", [OSLO]),
    "two messages": (f"{CALL}{NEXT}{CALL}<|eot|>", [OSLO, OSLO]),
}


@pytest.mark.parametrize("case", list(RUNS))
def test_a_glimmer_message_to_a_tool_runs_its_invoke(case: str) -> None:
    text, expected = RUNS[case]
    assert found(text) == expected
    tools = Weather()
    response = Orchestrator({"weather": tools}).process_llm_response(text)
    assert (response.call_executed, response.call_failed) == (True, False), response
    assert tools.ran == [{"city": "Oslo", "days": 3}] * len(expected)


CUT = {
    "</atem:function_calls>": CALL.removesuffix("\n</atem:function_calls>"),
    "</atem:invoke>": CALL.split("\n</atem:invoke>", maxsplit=1)[0],
}


@pytest.mark.parametrize("closing", list(CUT))
def test_a_glimmer_call_without_a_closing_tag_the_model_writes_is_cut_off(closing: str) -> None:
    problem = f"problem: the call was cut off ({closing} never came); it was not run"
    assert found(CUT[closing]) == [("get_weather", problem)]
    tools = Weather()
    response = Orchestrator({"weather": tools}).process_llm_response(CUT[closing])
    assert (response.call_executed, response.call_failed) == (False, True), response
    assert tools.ran == []


QUIET = {
    "an answer quoting the markup": (
        f" to=user<|message|>Write it so:\n<atem:function_calls>\n{INVOKE}\n"
        "</atem:function_calls><|eot|>"
    ),
    "reasoning quoting the markup": (
        f" to=self<|message|>I could write <atem:function_calls>{INVOKE}</atem:function_calls>"
        f"{NEXT} to=user<|message|>Hello!<|eot|>"
    ),
    "reasoning never ended": f" to=self<|message|>Maybe{CALL}",
    "a header after prose": f"Sure:{CALL}",
}


@pytest.mark.parametrize("case", list(QUIET))
def test_glimmer_markup_outside_a_message_to_a_tool_runs_nothing(case: str) -> None:
    tools = Weather()
    response = Orchestrator({"weather": tools}).process_llm_response(QUIET[case])
    assert found(QUIET[case]) == []
    assert (response.call_executed, response.call_failed) == (False, False), response
    assert tools.ran == []


def test_a_glimmer_message_to_a_tool_without_its_block_fails_and_never_runs() -> None:
    text = ' to=get_weather<|message|>{"city": "Oslo"}'
    assert found(text) == [
        ("?", "problem: the message to a tool holds no <atem:function_calls> block")
    ]
    tools = Weather()
    assert Orchestrator({"weather": tools}).process_llm_response(text).call_failed
    assert tools.ran == []


def test_glimmer_reasoning_is_not_shown_and_the_answer_is() -> None:
    text = f" to=self<|message|>Secret plan.{NEXT} to=user<|message|>Hello!<|eot|>"
    shown = DEFAULT_FORMATS.reasoning.shown(text)
    assert "Secret plan." not in shown
    assert "Hello!" in shown


GPT_OSS = ' to=functions.get_weather<|channel|>analysis<|message|>{"city": "Oslo", "days": 3}'
GPT_OSS_QUIET = {
    "an analysis message with no recipient": '<|channel|>analysis<|message|>{"city": "Oslo"}',
    "a role header inside an analysis message": (
        f"<|channel|>analysis<|message|>Maybe<|start|>assistant{GPT_OSS}<|end|>"
    ),
    "a role header inside a think block": f"<think>{GPT_OSS}</think>",
    "a role header after prose": f"So{GPT_OSS}",
}


def test_a_gpt_oss_message_to_a_function_in_the_analysis_channel_runs() -> None:
    for text in (GPT_OSS, f"<|channel|>analysis<|message|>Hm<|end|><|start|>assistant{GPT_OSS}"):
        tools = Weather()
        response = Orchestrator({"weather": tools}).process_llm_response(text)
        assert response.call_executed, response
        assert tools.ran == [{"city": "Oslo", "days": 3}]


@pytest.mark.parametrize("case", list(GPT_OSS_QUIET))
def test_a_gpt_oss_recipient_inside_reasoning_or_prose_runs_nothing(case: str) -> None:
    tools = Weather()
    response = Orchestrator({"weather": tools}).process_llm_response(GPT_OSS_QUIET[case])
    assert not response.call_executed, response
    assert tools.ran == []
