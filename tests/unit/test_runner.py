"""The Runner: the model-tool loop with a turn limit and a retry budget, in the text
protocol and natively.

In native mode the model is a scripted ``chat`` answering with its provider's real response
objects (built with the provider SDK's own types); everything ``chat`` is sent is checked
against that SDK's request types. The README's first example runs against a scripted server
through the real OpenAI client.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anthropic.types as anthropic_types
import google.genai.types as genai_types
import ollama
import openai.types.chat as openai_chat
import openai.types.responses as openai_responses
import pytest
from distbuild import ROOT
from pydantic import TypeAdapter
from sample_drivers import Calculator, Greeter

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


# -- native mode -----------------------------------------------------------------------------

QUESTION = "What is 2 + 3?"
ANSWER = "The sum is 5."


def consumed(value: Any) -> Any:
    """A validated TypedDict as plain data (pydantic hands back lazy iterators)."""
    if isinstance(value, dict):
        return {k: consumed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [consumed(v) for v in value]
    if isinstance(value, Iterator) or type(value).__name__ == "ValidatorIterator":
        return [consumed(v) for v in value]
    return value


def typed(param: Any) -> Callable[[dict[str, Any]], Any]:
    """A check that a value is a valid ``param`` (an SDK request TypedDict)."""
    adapter: TypeAdapter[Any] = TypeAdapter(param)
    return lambda value: consumed(adapter.validate_python(value, strict=False))


@dataclass(frozen=True)
class Provider:
    """One provider's side of a run: its replies (SDK objects), its request types, and the
    history entries a run must produce."""

    name: str
    call: Any
    """The model's reply calling ``add`` with ``{"a": 2, "b": 3}`` (call id ``call_1``)."""
    final: Any
    """The model's reply ``ANSWER``, without a call."""
    message: Callable[[dict[str, Any]], Any]
    tool: Callable[[dict[str, Any]], Any]
    tool_name: Callable[[dict[str, Any]], str]
    answer: dict[str, Any]
    """The tool result as the provider wants it back."""
    reply: list[dict[str, Any]]
    """The final reply as an entry of the provider's history."""
    question: dict[str, Any] = field(default_factory=lambda: {"role": "user", "content": QUESTION})
    apart: bool = False
    """Whether the provider takes the system message as its own parameter."""


def _completion(message: dict[str, Any], finish: str) -> Any:
    return openai_chat.ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1_760_000_000,
            "model": "gpt-4.1",
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        }
    )


def _response(output: list[dict[str, Any]]) -> Any:
    return openai_responses.Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1_760_000_000,
            "model": "gpt-4.1",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "status": "completed",
        }
    )


def _claude(content: list[dict[str, Any]], stop: str) -> Any:
    return anthropic_types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 20},
            "content": content,
        }
    )


def _gemini(parts: list[dict[str, Any]]) -> Any:
    return genai_types.GenerateContentResponse.model_validate(
        {"candidates": [{"finishReason": "STOP", "content": {"role": "model", "parts": parts}}]}
    )


def _ollama(message: dict[str, Any]) -> Any:
    return ollama.ChatResponse.model_validate(
        {
            "model": "llama3.1",
            "created_at": "2026-11-21T10:00:00Z",
            "done": True,
            "message": message,
        }
    )


def _function(tool: dict[str, Any]) -> str:
    return str(tool["function"]["name"])


def _genai_content(value: dict[str, Any]) -> Any:
    return genai_types.Content.model_validate(value)


def _genai_tool_names(tool: dict[str, Any]) -> str:
    declared = genai_types.Tool.model_validate(tool).function_declarations or []
    return ",".join(str(d.name) for d in declared)


ANSWER_MESSAGE = {
    "id": "msg_2",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": ANSWER, "annotations": []}],
}

PROVIDERS = {
    "openai": Provider(
        "openai",
        call=_completion(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                    }
                ],
            },
            "tool_calls",
        ),
        final=_completion({"role": "assistant", "content": ANSWER}, "stop"),
        message=typed(openai_chat.ChatCompletionMessageParam),
        tool=typed(openai_chat.ChatCompletionToolParam),
        tool_name=_function,
        answer={"role": "tool", "tool_call_id": "call_1", "content": "5.0"},
        reply=[{"role": "assistant", "content": ANSWER}],
    ),
    "openai-responses": Provider(
        "openai-responses",
        call=_response(
            [
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": "add",
                    "arguments": '{"a": 2, "b": 3}',
                    "status": "completed",
                }
            ]
        ),
        final=_response([ANSWER_MESSAGE]),
        message=typed(openai_responses.ResponseInputItemParam),
        tool=typed(openai_responses.FunctionToolParam),
        tool_name=lambda tool: str(tool["name"]),
        answer={"type": "function_call_output", "call_id": "call_1", "output": "5.0"},
        reply=[ANSWER_MESSAGE],
    ),
    "anthropic": Provider(
        "anthropic",
        call=_claude(
            [{"type": "tool_use", "id": "call_1", "name": "add", "input": {"a": 2, "b": 3}}],
            "tool_use",
        ),
        final=_claude([{"type": "text", "text": ANSWER}], "end_turn"),
        message=typed(anthropic_types.MessageParam),
        tool=typed(anthropic_types.ToolParam),
        tool_name=lambda tool: str(tool["name"]),
        answer={
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "5.0"}],
        },
        reply=[{"role": "assistant", "content": [{"type": "text", "text": ANSWER}]}],
        apart=True,
    ),
    "gemini": Provider(
        "gemini",
        call=_gemini([{"functionCall": {"name": "add", "args": {"a": 2, "b": 3}, "id": "call_1"}}]),
        final=_gemini([{"text": ANSWER}]),
        message=_genai_content,
        tool=genai_types.Tool.model_validate,
        tool_name=_genai_tool_names,
        answer={
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "add", "response": {"result": "5.0"}, "id": "call_1"}}
            ],
        },
        reply=[{"role": "model", "parts": [{"text": ANSWER}]}],
        question={"role": "user", "parts": [{"text": QUESTION}]},
        apart=True,
    ),
    "ollama": Provider(
        "ollama",
        call=_ollama(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "add", "arguments": {"a": 2, "b": 3}}}],
            }
        ),
        final=_ollama({"role": "assistant", "content": ANSWER}),
        message=ollama.Message.model_validate,
        tool=ollama.Tool.model_validate,
        tool_name=_function,
        answer={"role": "tool", "content": "5.0", "tool_name": "add"},  # Ollama has no call ids
        reply=[{"role": "assistant", "content": ANSWER}],
    ),
}


@dataclass(frozen=True)
class Request:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    system: str | None


class Model:
    """A scripted model in native mode: answers from a script, records every request."""

    def __init__(self, *replies: Any) -> None:
        self.replies = replies
        self.requests: list[Request] = []

    def __call__(
        self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]], system: str | None
    ) -> Any:
        self.requests.append(Request(messages, tools, system))
        return self.replies[len(self.requests) - 1]

    async def answer(
        self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]], system: str | None
    ) -> Any:
        await asyncio.sleep(0)  # a real client awaits its HTTP response here
        return self(messages, tools=tools, system=system)


@dataclass(frozen=True)
class NativeRun:
    result: Any
    model: Model
    calculator: Calculator
    stack: Orchestrator


def native_run(provider: Provider, on_loop: bool, *replies: Any) -> NativeRun:
    """``QUESTION`` answered by a real orchestrator and ``Calculator``, the model scripted
    with ``replies`` (by default: the call, then the final answer); ``on_loop``: by
    ``arun`` with an async ``chat``."""
    calculator = Calculator()
    stack = Orchestrator({"calc": calculator})
    model = Model(*(replies or (provider.call, provider.final)))
    name: Any = provider.name
    if on_loop:
        result = asyncio.run(Runner(stack, model.answer, provider=name).arun(QUESTION))
    else:
        result = Runner(stack, model, provider=name).run(QUESTION)
    return NativeRun(result, model, calculator, stack)


def texts(value: Any) -> Iterator[str]:
    """Every string in ``value`` (a request, a message), however deep."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Request):
        yield from texts(value.messages)
        yield from texts(value.system)
    elif isinstance(value, dict):
        for item in value.values():
            yield from texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from texts(item)


NATIVE = pytest.mark.parametrize("provider", list(PROVIDERS.values()), ids=list(PROVIDERS))
LOOP = pytest.mark.parametrize("on_loop", [False, True], ids=["run", "arun"])


@NATIVE
@LOOP
def test_native_mode_sends_the_providers_tools_and_the_short_system_message(
    provider: Provider, on_loop: bool
) -> None:
    run = native_run(provider, on_loop)
    short = run.stack.get_driver_context().system_message
    protocol = run.stack.get_driver_system_message()  # the text protocol's prompt
    for request in run.model.requests:
        for tool in request.tools:
            provider.tool(tool)
        assert [provider.tool_name(t) for t in request.tools] == ["add"]
        if provider.apart:
            assert request.system == short
            assert request.messages[0] == provider.question
        else:
            assert request.system is None
            assert request.messages[:2] == [{"role": "system", "content": short}, provider.question]
        assert not any(protocol in text or "Add two numbers" in text for text in texts(request))


@NATIVE
@LOOP
def test_native_mode_runs_the_models_call_and_answers_it_in_the_providers_shape(
    provider: Provider, on_loop: bool
) -> None:
    run = native_run(provider, on_loop)
    assert run.calculator.calls == [("add", {"a": 2, "b": 3})]
    first, second = run.model.requests
    assert second.messages[: len(first.messages)] == first.messages
    assert second.messages[-1] == provider.answer  # with the call id, where there is one
    for message in second.messages:
        provider.message(message)


@NATIVE
@LOOP
def test_a_final_native_answer_ends_the_run_with_the_models_reply_appended(
    provider: Provider, on_loop: bool
) -> None:
    run = native_run(provider, on_loop)
    result = run.result
    assert (result.stopped, result.output, result.turns) == ("final", ANSWER, 2)
    assert result.responses[-1].messages is None  # the driver leaves the reply to the client
    assert list(result.messages) == [*run.model.requests[-1].messages, *provider.reply]
    for message in result.messages:
        provider.message(message)


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_a_separate_system_never_goes_in_as_a_system_role_message(provider: str) -> None:
    script = PROVIDERS[provider]
    bad = {"a": 2}  # ``b`` is missing: the call fails, the model tries again
    if provider == "anthropic":
        use = {"type": "tool_use", "id": "call_0", "name": "add", "input": bad}
        wrong = _claude([use], "tool_use")
    else:
        wrong = _gemini([{"functionCall": {"name": "add", "args": bad, "id": "call_0"}}])
    run = native_run(script, False, wrong, script.call, script.final)
    assert (run.result.stopped, run.result.turns) == ("final", 3)
    assert len(run.model.requests) == 3
    for request in run.model.requests:
        assert request.system == run.stack.get_driver_context().system_message
        assert all(m["role"] != "system" for m in request.messages)
    failed = json.dumps(run.model.requests[1].messages[-1])
    assert "call_0" in failed
    assert "required argument is missing" in failed


def test_a_call_a_gemini_model_writes_as_text_goes_back_as_gemini_parts() -> None:
    call = _gemini([{"text": '{"tool": "add", "arguments": {"a": 2, "b": 3}}'}])
    run = native_run(PROVIDERS["gemini"], False, call, PROVIDERS["gemini"].final)
    assert run.calculator.calls == [("add", {"a": 2, "b": 3})]
    for message in run.result.messages:
        assert _genai_content(message).parts
    turn, results = run.model.requests[1].messages[-2:]
    assert turn["role"] == "model"
    assert results == {"role": "user", "parts": [{"text": "Result of add:\n5.0"}]}


def test_native_mode_names_the_providers_and_needs_a_driver_context() -> None:
    model = Model()
    with pytest.raises(ValueError, match="unknown provider 'claude': one of openai, "):
        Runner(Orchestrator({"calc": Calculator()}), model, provider="claude")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Greeter has none; use provider=None"):
        Runner(Greeter(), model, provider="anthropic")


# -- the README's first example: the native loop, through the real OpenAI client -------------


def readme_first_python_example() -> str:
    text = (ROOT / "README.md").read_text("utf-8")
    return text.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readmes_first_example_runs_natively_through_the_openai_client(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_7",
                "type": "function",
                "function": {
                    "name": "summarize_column",
                    "arguments": '{"file": "sales.csv", "column": "units"}',
                },
            }
        ],
    }
    replies = [
        _completion(call, "tool_calls").model_dump(mode="json"),
        _completion({"role": "assistant", "content": "773 units."}, "stop").model_dump(mode="json"),
    ]
    requests: list[dict[str, Any]] = []

    class Server(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            body = json.dumps(replies[len(requests) - 1]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        monkeypatch.chdir(ROOT)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_port}/v1")
        source = readme_first_python_example()
        exec(compile(source, "README.md", "exec"), {})  # noqa: S102
    finally:
        server.shutdown()
        server.server_close()
    assert capsys.readouterr().out == "773 units.\n"
    first, second = requests
    assert "summarize_column" in [t["function"]["name"] for t in first["tools"]]
    assert first["messages"][0]["role"] == "system"
    assert "summarize_column" not in first["messages"][0]["content"]  # the tools are native
    answer = second["messages"][-1]
    assert (answer["role"], answer["tool_call_id"]) == ("tool", "call_7")
    assert json.loads(answer["content"])["sum"] == 773.0
