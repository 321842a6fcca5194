"""Streaming: early signals, and stream chunks rebuilt into the final native object."""

from __future__ import annotations

import json
from typing import Any

import anthropic.types as anthropic_types
import openai.types.chat as openai_chat
import openai.types.responses as openai_responses
import pytest
from pydantic import TypeAdapter
from sample_drivers import Calculator, Speaker

from mcs_host import (
    AnthropicStream,
    OpenAIChatStream,
    Orchestrator,
    ResponsesStream,
    ToolCallSignaling,
    is_complete_tool_call,
    might_be_tool_call,
)


@pytest.mark.parametrize(
    ("partial", "expected"),
    [
        ("The weather in Oslo is", False),
        ("Let me check: {", True),
        ('{"to', True),
        ("```", True),
        ("<tool_", True),
        ("<tool_call>", True),
        ("[TOOL_CA", True),
        ("[get_weather(", True),
        ("<|python_tag|>", True),
        (
            " to=functions.get_weather",
            True,
        ),  # gpt-oss's role header, the prompt's <|start|>assistant before it
        ("<|start|>assistant", True),
        ("Sure, here is a list [1, 2] of", False),
    ],
)
def test_might_be_tool_call_is_a_cheap_check_on_the_tail(partial: str, expected: bool) -> None:
    assert might_be_tool_call(partial) is expected


def test_the_orchestrator_signals_and_confirms_complete_calls() -> None:
    stack = Orchestrator({"calc": Calculator()})
    assert isinstance(stack, ToolCallSignaling)
    assert "tcs" in stack.meta.capabilities  # what it implements, it declares
    text = 'Adding now: {"tool": "add", "arguments": {"a": 1, "b": 2}}'
    for cut in (14, 30, len(text) - 1):
        assert stack.might_be_tool_call(text[:cut])
        assert not stack.is_complete_tool_call(text[:cut])
    assert stack.is_complete_tool_call(text)
    assert not stack.is_complete_tool_call("No call here.")


def test_openai_chat_chunks_add_up_to_a_completion() -> None:
    chunks = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "add", "arguments": ""},
                            }
                        ],
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 2,'}}]},
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ' "b": 5}'}}]},
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    stream = OpenAIChatStream()
    for number, chunk in enumerate(chunks):
        sdk_chunk = openai_chat.ChatCompletionChunk.model_validate(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "gpt-4.1",
                **chunk,
            }
        )
        stream.add(sdk_chunk if number % 2 else sdk_chunk.model_dump(mode="json"))
    completion = stream.result()
    openai_chat.ChatCompletion.model_validate(completion)
    assert (
        completion["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
        == '{"a": 2, "b": 5}'
    )
    assert (
        Orchestrator({"calc": Calculator()}).process_llm_response(completion).tool_call_result == 7
    )


def test_responses_events_add_up_to_the_output_items() -> None:
    events = [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "sequence_number": 1,
            "item": {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "echo",
                "arguments": "",
                "status": "in_progress",
            },
        },
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 0,
            "item_id": "fc_1",
            "sequence_number": 2,
            "delta": '{"text":',
        },
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 0,
            "item_id": "fc_1",
            "sequence_number": 3,
            "delta": ' "streamed"}',
        },
    ]
    adapter: TypeAdapter[Any] = TypeAdapter(openai_responses.ResponseStreamEvent)
    stream = ResponsesStream()
    for event in events:
        stream.add(adapter.validate_python(event))
    output = stream.result()
    assert output["output"][0]["arguments"] == '{"text": "streamed"}'
    response = Orchestrator({"speaker": Speaker()}).process_llm_response(output)
    assert response.tool_call_result == "streamed"


def test_anthropic_events_add_up_to_a_message() -> None:
    events = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 5, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Adding."},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"a": 1'},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": ', "b": 9}'},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 20},
        },
        {"type": "message_stop"},
    ]
    from pydantic import TypeAdapter

    adapter = TypeAdapter(anthropic_types.RawMessageStreamEvent)
    stream = AnthropicStream()
    for event in events:
        stream.add(adapter.validate_python(event))
    message = stream.result()
    anthropic_types.Message.model_validate(message)
    assert message["content"][1]["input"] == {"a": 1, "b": 9}
    assert Orchestrator({"calc": Calculator()}).process_llm_response(message).tool_call_result == 10


def test_a_stream_cut_mid_arguments_is_reported_not_run() -> None:
    stream = AnthropicStream()
    stream.add(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}},
        }
    )
    stream.add(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"a": 1, "b": '},
        }
    )
    calc = Calculator()
    response = Orchestrator({"calc": calc}).process_llm_response(stream.result())
    assert response.call_failed
    assert "cut off" in (response.call_detail or "")
    assert calc.calls == []
    # still a history that can be sent back: the cut-off answer, then the reason it was not run
    history = json.loads(json.dumps(response.messages))
    assert [m["role"] for m in history] == ["assistant", "user"]
    (result,) = history[-1]["content"]  # answered as the Anthropic tool_result it asked for
    assert result["type"] == "tool_result"
    assert result["tool_use_id"] == "toolu_1"
    assert result["is_error"] is True
    assert "cut off" in result["content"]


def test_a_streamed_invoke_whose_closing_tag_has_not_come_yet_is_not_complete() -> None:
    # at the end of a whole response such an invoke runs (servers strip the closing tag);
    # mid-stream its next parameter may still come
    part = "<tool_call>\n<function=lookup_flight>\n<parameter=flight_no>\nLH404\n</parameter>\n"
    assert not is_complete_tool_call(part)
    whole = part + "<parameter=date>\n2026-12-01\n</parameter>\n</function>\n</tool_call>"
    assert is_complete_tool_call(whole)
