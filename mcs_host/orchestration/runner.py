"""The Runner: the spec's convenience loop around any ``MCSDriver`` and a chat function.

``Runner(driver, chat).run(question)`` sends the driver's system message and the question to
``chat``, passes each answer to ``process_llm_response``, extends the history with the
response's messages, and stops at the first answer that holds no call (the final answer),
after ``max_turns`` model turns, or after ``max_retries`` failed calls in a row. The client
keeps control of nothing in between; use the manual loop when it must (streaming, consent UI).
``arun`` is the same loop for an event loop: ``chat`` may be a coroutine function, and the
driver's ``aprocess_llm_response`` is awaited (a driver without one runs in a worker thread).

Two modes. The default (``provider=None``) is the text protocol: ``chat(messages)``, the
tools described in a system message first. With a ``provider`` the tools travel natively:
``chat(messages, tools=..., system=...)`` gets the provider's tool list and the short system
message of ``get_driver_context``, placed where the provider wants it (Anthropic and Gemini
take it apart, as ``system``; OpenAI and Ollama as the first message, ``system`` is
``None``), and the history is in the provider's shape, the final reply included.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

from mcs_host.contract import DriverContext, DriverResponse
from mcs_host.interfaces import MCSDriver

from .detection import detect
from .messages import Provider, plain_message, reply_messages
from .native import as_mapping

__all__ = ["RunResult", "Runner"]

Chat = Callable[[list[dict[str, Any]]], "str | Mapping[str, Any] | Any"]
"""Takes the history; returns the model's answer: text, or its provider's message object."""
AsyncChat = Callable[[list[dict[str, Any]]], Awaitable[Any]]
""":data:`Chat` as a coroutine function, for :meth:`Runner.arun`."""


class NativeChat(Protocol):
    """The chat of native mode: the history, the provider's tool list and the system
    message where the provider takes it apart (else ``None``); returns the provider's
    response (an SDK object or its JSON), or an awaitable of it for :meth:`Runner.arun`."""

    def __call__(
        self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]], system: str | None
    ) -> Any: ...


_APART: tuple[Provider, ...] = ("anthropic", "gemini")
"""The providers whose history has no system role: the system message is a parameter."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended, with the whole history."""

    output: Any
    """The final answer: its text, or the content of a ``{"final": ...}`` answer."""
    stopped: Literal["final", "turn-limit", "retry-limit"]
    turns: int
    messages: tuple[dict[str, Any], ...]
    responses: tuple[DriverResponse, ...]


class Runner:
    """Runs the model-tool loop until the model answers without a call."""

    __slots__ = ("chat", "driver", "max_retries", "max_turns", "model_name", "provider")

    def __init__(
        self,
        driver: MCSDriver,
        chat: Chat | NativeChat,
        *,
        provider: Provider | None = None,
        model_name: str | None = None,
        max_turns: int = 10,
        max_retries: int = 2,
    ) -> None:
        """``provider`` (``openai``, ``openai-responses``, ``anthropic``, ``gemini``,
        ``ollama``) turns native mode on; ``None`` keeps the text protocol."""
        if max_turns < 1 or max_retries < 0:
            raise ValueError("max_turns must be at least 1 and max_retries at least 0")
        if provider is not None and provider not in get_args(Provider):
            names = ", ".join(get_args(Provider))
            raise ValueError(f"unknown provider {provider!r}: one of {names}, or None for text")
        if provider is not None and not callable(getattr(driver, "get_driver_context", None)):
            raise TypeError(
                f"native mode needs a driver with get_driver_context (driver_context): "
                f"{type(driver).__name__} has none; use provider=None for the text protocol"
            )
        self.driver = driver
        self.chat: Callable[..., Any] = chat
        self.provider = provider
        self.model_name = model_name
        self.max_turns = max_turns
        self.max_retries = max_retries

    def run(self, user_input: str, history: Sequence[dict[str, Any]] = ()) -> RunResult:
        """Answer ``user_input``, after any earlier ``history`` (without a system message; in
        native mode, in the provider's shape)."""
        turns = _Turns(self, user_input, history)
        while turns.going:
            payload = turns.payload(turns.ask(self.chat))
            turns.answered(payload, self.driver.process_llm_response(payload))
        return turns.result()

    async def arun(self, user_input: str, history: Sequence[dict[str, Any]] = ()) -> RunResult:
        """:meth:`run` on an event loop: ``chat`` may return an awaitable, and the driver's
        ``aprocess_llm_response`` is awaited (``process_llm_response`` in a worker thread
        for a driver without one). The same turns, limits and result."""
        import asyncio  # noqa: PLC0415 - asyncio costs 20 ms to import: only for async users

        own = getattr(self.driver, "aprocess_llm_response", None)
        turns = _Turns(self, user_input, history)
        while turns.going:
            output = turns.ask(self.chat)
            if inspect.isawaitable(output):
                output = await output
            payload = turns.payload(output)
            if own is not None and inspect.iscoroutinefunction(own):
                response = await own(payload)
            else:
                response = await asyncio.to_thread(self.driver.process_llm_response, payload)
            turns.answered(payload, response)
        return turns.result()


class _Turns:
    """One run's state: the history, the responses and the count of failures in a row."""

    __slots__ = (
        "failures", "going", "messages", "output", "responses", "runner", "stopped", "system",
        "tools",
    )  # fmt: skip

    def __init__(self, runner: Runner, user_input: str, history: Sequence[dict[str, Any]]) -> None:
        provider = runner.provider
        self.runner = runner
        self.tools: list[dict[str, Any]] = []
        self.system: str | None = None
        if provider is None:
            system = runner.driver.get_driver_system_message(runner.model_name)
            head = [{"role": "system", "content": system}]
        else:
            system, self.tools = _native_context(runner.driver, provider, runner.model_name)
            head = [{"role": "system", "content": system}] if system else []
            if provider in _APART:
                self.system, head = system, []
        self.messages: list[dict[str, Any]] = [
            *head, *history, plain_message(provider, "user", user_input),
        ]  # fmt: skip
        self.responses: list[DriverResponse] = []
        self.failures = 0
        self.going = True
        self.stopped: Literal["final", "turn-limit", "retry-limit"] = "turn-limit"
        self.output: Any = None

    def history(self) -> list[dict[str, Any]]:
        return list(self.messages)

    def ask(self, chat: Callable[..., Any]) -> Any:
        """The model's next answer (or an awaitable of it): ``chat`` asked as the mode asks."""
        if self.runner.provider is None:
            return chat(self.history())
        return chat(self.history(), tools=list(self.tools), system=self.system)

    @staticmethod
    def payload(output: Any) -> Any:
        native = as_mapping(output)
        return native if isinstance(native, str) else dict(native)

    def answered(self, output: Any, answer: Any) -> None:
        """Take the driver's ``answer`` to the model's ``output``; stop when it is final or
        a limit is reached."""
        response = DriverResponse.coerce(answer)
        provider = self.runner.provider
        self.responses.append(response)
        if response.messages:
            self.messages.extend(_shaped(provider, response.messages))
        if not (response.call_executed or response.call_failed):
            self.output = _final_answer(output)
            if not response.messages:  # (a chained driver may answer the turn itself)
                self.messages.extend(
                    [{"role": "assistant", "content": _as_content(self.output)}]
                    if provider is None
                    else reply_messages(provider, output)
                )
            self.stopped, self.going = "final", False
            return
        executed = response.call_executed
        self.failures = self.failures + 1 if response.call_failed and not executed else 0
        if self.failures > self.runner.max_retries:
            self.stopped, self.going = "retry-limit", False
        elif len(self.responses) >= self.runner.max_turns:
            self.going = False

    def result(self) -> RunResult:
        return RunResult(
            self.output, self.stopped, len(self.responses), tuple(self.messages),
            tuple(self.responses),
        )  # fmt: skip


def _native_context(
    driver: MCSDriver, provider: Provider, model_name: str | None
) -> tuple[str, list[dict[str, Any]]]:
    """The short system message and ``provider``'s tool list: the driver's ``native_tools``
    when it has them (an orchestrator does), else the tools of its context as they are."""
    asked: Callable[..., Any] = driver.get_driver_context  # type: ignore[attr-defined]
    context = DriverContext.coerce(asked(model_name))
    own = getattr(driver, "native_tools", None)
    tools = own(provider) if callable(own) else context.tools
    return context.system_message, [dict(tool) for tool in tools]


def _shaped(provider: Provider | None, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """History entries in ``provider``'s shape: a plain text turn (a call read from text) as
    a Gemini turn of ``parts``; every other shape is already the provider's."""
    if provider != "gemini":
        return entries
    return [
        plain_message(provider, entry["role"], entry["content"])
        if "parts" not in entry
        and entry.get("role") in ("user", "assistant")
        and isinstance(entry.get("content"), str)
        else entry
        for entry in entries
    ]


def _final_answer(output: Any) -> Any:
    """The answer in a model output without calls: a ``final`` content, or the text."""
    found = detect(output)
    if found.has_final:
        return found.final
    return output if isinstance(output, str) else found.text


def _as_content(answer: Any) -> str:
    return answer if isinstance(answer, str) else str(answer)
