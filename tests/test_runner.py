"""The Runner: the model-tool loop with a turn limit and a retry budget."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sample_drivers import Calculator

from mcs_host import Orchestrator, Runner


def scripted(*answers: Any) -> tuple[list[list[dict[str, Any]]], Any]:
    """A chat function that answers from a script and records what it was sent."""
    sent: list[list[dict[str, Any]]] = []
    replies: Iterator[Any] = iter(answers)

    def chat(messages: list[dict[str, Any]]) -> Any:
        sent.append(messages)
        return next(replies)

    return sent, chat


def test_the_runner_calls_tools_until_the_final_answer() -> None:
    sent, chat = scripted('{"tool": "add", "arguments": {"a": 2, "b": 3}}', "The sum is 5.")
    result = Runner(Orchestrator({"calc": Calculator()}), chat).run("What is 2 + 3?")
    assert (result.stopped, result.output, result.turns) == ("final", "The sum is 5.", 2)
    assert sent[0][0]["role"] == "system"
    assert '"name": "add"' in sent[0][0]["content"]
    assert sent[0][1] == {"role": "user", "content": "What is 2 + 3?"}
    assert sent[1][-1] == {"role": "user", "content": "Result of add:\n5.0"}
    assert result.messages[-1] == {"role": "assistant", "content": "The sum is 5."}


def test_the_seed_final_protocol_ends_the_run_with_its_content() -> None:
    _, chat = scripted(
        '{"thought": "add", "action": {"tool": "add", "args": {"a": 1, "b": 1}}}',
        '{"final": {"content": {"sum": 2}}}',
    )
    result = Runner(Orchestrator({"calc": Calculator()}), chat).run("1+1?")
    assert (result.stopped, result.output) == ("final", {"content": {"sum": 2}})


def test_failed_calls_are_retried_within_the_budget() -> None:
    bad = '{"tool": "add", "arguments": {"a": 1}}'
    _, chat = scripted(bad, bad, bad, "never reached")
    result = Runner(Orchestrator({"calc": Calculator()}), chat, max_retries=2).run("add")
    assert (result.stopped, result.turns) == ("retry-limit", 3)
    assert all(r.call_failed for r in result.responses)
    assert "required argument is missing" in result.messages[-1]["content"]


def test_the_turn_limit_stops_an_endless_loop() -> None:
    call = '{"tool": "add", "arguments": {"a": 1, "b": 1}}'
    _, chat = scripted(*[call] * 10)
    result = Runner(Orchestrator({"calc": Calculator()}), chat, max_turns=3).run("loop")
    assert (result.stopped, result.turns, result.output) == ("turn-limit", 3, None)


def test_native_answers_go_through_the_runner_too() -> None:
    native = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
            }
        ],
    }
    final = {"role": "assistant", "content": "It is 3."}
    _, chat = scripted(native, final)
    result = Runner(Orchestrator({"calc": Calculator()}), chat, model_name="gpt-4.1").run("1+2?")
    assert (result.stopped, result.output) == ("final", "It is 3.")
    assert result.messages[3] == {"role": "tool", "tool_call_id": "call_1", "content": "3.0"}
