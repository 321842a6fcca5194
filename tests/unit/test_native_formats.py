"""Native provider formats, checked against the providers' own SDK types.

Each native response is built with its SDK's model (so the fixture is a real shape), given to
the orchestrator both as the SDK object and as plain JSON; the messages that answer it, and
the native tool lists, are validated with the SDK's request types.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic.types as anthropic_types
import google.genai.types as genai_types
import ollama
import openai.types.chat as openai_chat
import openai.types.responses as openai_responses
import pytest
from pydantic import TypeAdapter
from sample_drivers import Calculator, Speaker

from mcs_host import DriverResponse, Orchestrator


def stack() -> Orchestrator:
    return Orchestrator({"calc": Calculator(), "speaker": Speaker()})


def consumed(value: Any) -> Any:
    """Walk a validated TypedDict, consuming the lazy iterators pydantic returns."""
    if isinstance(value, dict):
        return {k: consumed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [consumed(v) for v in value]
    if isinstance(value, Iterator) or type(value).__name__ == "ValidatorIterator":
        return [consumed(v) for v in value]
    return value


def valid(adapter: TypeAdapter[Any], value: Any) -> Any:
    return consumed(adapter.validate_python(value))


CHAT_MESSAGE = TypeAdapter(openai_chat.ChatCompletionMessageParam)
RESPONSES_ITEM = TypeAdapter(openai_responses.ResponseInputItemParam)
ANTHROPIC_MESSAGE = TypeAdapter(anthropic_types.MessageParam)


def chat_completion(tool_calls: list[dict[str, Any]], finish: str = "tool_calls") -> Any:
    return openai_chat.ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1_760_000_000,
            "model": "gpt-4.1",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": finish,
                    "message": {"role": "assistant", "content": None, "tool_calls": tool_calls},
                }
            ],
        }
    )


def function_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.mark.parametrize("as_object", [True, False], ids=["sdk-object", "json"])
def test_openai_chat_completions(as_object: bool) -> None:
    completion = chat_completion(
        [
            function_call("call_a", "add", '{"a": 2, "b": 3}'),
            function_call("call_b", "echo", '{"text": "hi", "loud": true}'),
        ]
    )
    response = stack().process_llm_response(
        completion if as_object else completion.model_dump(mode="json")
    )
    assert response.tool_call_result == [5, "HI"]
    assert response.messages is not None
    for message in response.messages:
        valid(CHAT_MESSAGE, message)
    assert [m.get("tool_call_id") for m in response.messages] == [None, "call_a", "call_b"]
    assert response.messages[0]["tool_calls"][0]["id"] == "call_a"


def test_openai_arguments_that_do_not_parse_still_get_an_answer_by_id() -> None:
    completion = chat_completion(
        [
            function_call("call_ok", "add", '{"a": 1, "b": 1}'),
            function_call("call_bad", "add", '{"a": 1, "b": '),
        ]
    )
    response = stack().process_llm_response(completion.model_dump(mode="json"))
    assert (response.call_executed, response.call_failed) == (True, True)
    assert response.messages is not None
    answers = {m["tool_call_id"]: m["content"] for m in response.messages[1:]}
    assert answers["call_ok"] == "2.0"
    assert answers["call_bad"].startswith("error: add: the arguments were cut off")


def test_openai_output_cut_by_the_length_limit_is_not_run() -> None:
    calc = Calculator()
    completion = chat_completion(
        [function_call("call_a", "add", '{"a": 1, "b": 1}')], finish="length"
    )
    response = Orchestrator({"calc": calc}).process_llm_response(completion.model_dump(mode="json"))
    assert response.call_failed
    assert "cut off" in (response.call_detail or "")
    assert calc.calls == []


def test_openai_legacy_function_call() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
    }
    response = stack().process_llm_response(message)
    assert response.tool_call_result == 3
    assert response.messages is not None
    assert response.messages[1] == {"role": "function", "name": "add", "content": "3.0"}
    for entry in response.messages:
        valid(CHAT_MESSAGE, entry)


def test_openai_responses_function_call_items() -> None:
    item = openai_responses.ResponseFunctionToolCall.model_validate(
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "add",
            "arguments": '{"a": 4, "b": 4}',
            "status": "completed",
        }
    )
    text = openai_responses.ResponseOutputMessage.model_validate(
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Adding.", "annotations": []}],
        }
    )
    reasoning = openai_responses.ResponseReasoningItem.model_validate(
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA..."}
    )
    output = [reasoning, text, item]
    response_object = {
        "object": "response",
        "id": "resp_1",
        "output": [entry.model_dump(mode="json", exclude_none=True) for entry in output],
    }
    response = stack().process_llm_response(response_object)
    assert response.tool_call_result == 8
    assert response.messages is not None
    for entry in response.messages:
        valid(RESPONSES_ITEM, entry)
    # the model's turn goes back whole, in order: a reasoning model's call is refused
    # without the reasoning item before it (with its encrypted_content when store=False)
    assert response.messages[:3] == response_object["output"]
    assert response.messages[-1] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "8.0",
    }
    assert stack().process_llm_response(item).tool_call_result == 8  # one item, as an SDK object


@pytest.mark.parametrize("as_object", [True, False], ids=["sdk-object", "json"])
def test_anthropic_tool_use_blocks(as_object: bool) -> None:
    message = anthropic_types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 20},
            "content": [
                {"type": "text", "text": "Let me add."},
                {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1, "b": 2}},
                {"type": "tool_use", "id": "toolu_2", "name": "nope", "input": {}},
            ],
        }
    )
    response = stack().process_llm_response(
        message if as_object else message.model_dump(mode="json")
    )
    assert response.tool_call_result == [3, None]
    assert response.messages is not None
    for entry in response.messages:
        valid(ANTHROPIC_MESSAGE, entry)
    results = response.messages[1]["content"]
    assert [(r["tool_use_id"], r.get("is_error", False)) for r in results] == [
        ("toolu_1", False),
        ("toolu_2", True),
    ]


@pytest.mark.parametrize("case", ["camel", "snake", "sdk-object"])
def test_gemini_function_call_parts(case: str) -> None:
    reply = genai_types.GenerateContentResponse.model_validate(
        {
            "candidates": [
                {
                    "finishReason": "STOP",
                    "content": {
                        "role": "model",
                        "parts": [
                            {
                                "functionCall": {
                                    "name": "echo",
                                    "args": {"text": "hola", "to": "Ana"},
                                    "id": "fc-1",
                                }
                            },
                        ],
                    },
                }
            ]
        }
    )
    given: Any = reply
    if case == "camel":
        given = reply.model_dump(mode="json", by_alias=True, exclude_none=True)
    elif case == "snake":
        given = reply.model_dump(mode="json", exclude_none=True)
    response = stack().process_llm_response(given)
    assert response.tool_call_result == "Ana: hola"
    assert response.messages is not None
    contents = [genai_types.Content.model_validate(m) for m in response.messages]
    assert contents[0].role == "model"
    parts = contents[1].parts or []
    answer = parts[0].function_response
    assert answer is not None
    assert (answer.name, answer.id, answer.response) == ("echo", "fc-1", {"result": "Ana: hola"})


@pytest.mark.parametrize("stringified", [False, True], ids=["object-arguments", "string-arguments"])
def test_ollama_tool_calls(stringified: bool) -> None:
    arguments: Any = {"a": 2, "b": 2}
    reply = ollama.ChatResponse.model_validate(
        {
            "model": "llama3.1",
            "created_at": "2026-11-21T10:00:00Z",
            "done": True,
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "add", "arguments": arguments}}],
            },
        }
    )
    data = reply.model_dump(mode="json", exclude_none=True)
    if stringified:
        data["message"]["tool_calls"][0]["function"]["arguments"] = json.dumps(arguments)
    response = stack().process_llm_response(data)
    assert response.tool_call_result == 4
    assert response.messages is not None
    for message in response.messages:
        ollama.Message.model_validate(message)
    assert response.messages[1] == {"role": "tool", "content": "4.0", "tool_name": "add"}


TOOL_LISTS: dict[str, TypeAdapter[Any]] = {
    "openai": TypeAdapter(openai_chat.ChatCompletionToolParam),
    "openai-responses": TypeAdapter(openai_responses.FunctionToolParam),
    "anthropic": TypeAdapter(anthropic_types.ToolParam),
}


@pytest.mark.parametrize(
    "provider", ["openai", "openai-responses", "anthropic", "gemini", "ollama"]
)
def test_native_tool_lists_fit_each_sdk(provider: str) -> None:
    tools = stack().native_tools(provider)  # type: ignore[arg-type]
    if provider == "gemini":
        (tool,) = tools
        declared = genai_types.Tool.model_validate(tool).function_declarations
        assert [d.name for d in declared or ()] == ["add", "echo"]
        return
    if provider == "ollama":
        parsed = [ollama.Tool.model_validate(t) for t in tools]
        assert [t.function.name for t in parsed if t.function] == ["add", "echo"]
        return
    for tool in tools:
        valid(TOOL_LISTS[provider], tool)
    assert len(tools) == 2


def test_the_driver_context_gives_each_model_its_providers_tools() -> None:
    orchestrator = stack()
    claude = orchestrator.get_driver_context("claude-sonnet-4-5")
    assert [t["name"] for t in claude.tools] == ["add", "echo"]
    assert "input_schema" in claude.tools[0]
    gpt = orchestrator.get_driver_context("gpt-4.1")
    assert gpt.tools[0]["type"] == "function"
    gemini = orchestrator.get_driver_context("gemini-2.5-pro")
    assert "functionDeclarations" in gemini.tools[0]
    assert "add" not in claude.system_message  # the tools travel natively, not in the prompt


def test_a_plain_mapping_without_a_native_shape_is_read_as_the_json_protocol() -> None:
    response = stack().process_llm_response({"tool": "add", "arguments": {"a": 1, "b": 1}})
    assert response.tool_call_result == 2
    assert DriverResponse.coerce(response).call_executed
