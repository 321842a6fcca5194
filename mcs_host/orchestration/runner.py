"""The Runner: the spec's convenience loop around any ``MCSDriver`` and a chat function.

``Runner(driver, chat).run(question)`` sends the driver's system message and the question to
``chat``, passes each answer to ``process_llm_response``, extends the history with the
response's messages, and stops at the first answer that holds no call (the final answer),
after ``max_turns`` model turns, or after ``max_retries`` failed calls in a row. The client
keeps control of nothing in between; use the manual loop when it must (streaming, consent UI).
``arun`` is the same loop for an event loop: ``chat`` may be a coroutine function, and the
driver's ``aprocess_llm_response`` is awaited (a driver without one runs in a worker thread).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mcs_host.contract import DriverResponse
from mcs_host.interfaces import MCSDriver

from .detection import detect
from .native import as_mapping

__all__ = ["RunResult", "Runner"]

Chat = Callable[[list[dict[str, Any]]], "str | Mapping[str, Any] | Any"]
"""Takes the history; returns the model's answer: text, or its provider's message object."""
AsyncChat = Callable[[list[dict[str, Any]]], Awaitable[Any]]
""":data:`Chat` as a coroutine function, for :meth:`Runner.arun`."""


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

    __slots__ = ("chat", "driver", "max_retries", "max_turns", "model_name")

    def __init__(
        self,
        driver: MCSDriver,
        chat: Chat,
        *,
        model_name: str | None = None,
        max_turns: int = 10,
        max_retries: int = 2,
    ) -> None:
        if max_turns < 1 or max_retries < 0:
            raise ValueError("max_turns must be at least 1 and max_retries at least 0")
        self.driver = driver
        self.chat = chat
        self.model_name = model_name
        self.max_turns = max_turns
        self.max_retries = max_retries

    def run(self, user_input: str, history: Sequence[dict[str, Any]] = ()) -> RunResult:
        """Answer ``user_input``, after any earlier ``history`` (without a system message)."""
        turns = _Turns(self, user_input, history)
        while turns.going:
            output = self.chat(turns.history())
            payload = turns.payload(output)
            turns.answered(output, self.driver.process_llm_response(payload))
        return turns.result()

    async def arun(self, user_input: str, history: Sequence[dict[str, Any]] = ()) -> RunResult:
        """:meth:`run` on an event loop: ``chat`` may return an awaitable, and the driver's
        ``aprocess_llm_response`` is awaited (``process_llm_response`` in a worker thread
        for a driver without one). The same turns, limits and result."""
        import asyncio  # noqa: PLC0415 - asyncio costs 20 ms to import: only for async users

        own = getattr(self.driver, "aprocess_llm_response", None)
        turns = _Turns(self, user_input, history)
        while turns.going:
            output = self.chat(turns.history())
            if inspect.isawaitable(output):
                output = await output
            payload = turns.payload(output)
            if own is not None and inspect.iscoroutinefunction(own):
                response = await own(payload)
            else:
                response = await asyncio.to_thread(self.driver.process_llm_response, payload)
            turns.answered(output, response)
        return turns.result()


class _Turns:
    """One run's state: the history, the responses and the count of failures in a row."""

    __slots__ = ("failures", "going", "messages", "output", "responses", "runner", "stopped")

    def __init__(self, runner: Runner, user_input: str, history: Sequence[dict[str, Any]]) -> None:
        system = runner.driver.get_driver_system_message(runner.model_name)
        self.runner = runner
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            *history,
            {"role": "user", "content": user_input},
        ]
        self.responses: list[DriverResponse] = []
        self.failures = 0
        self.going = True
        self.stopped: Literal["final", "turn-limit", "retry-limit"] = "turn-limit"
        self.output: Any = None

    def history(self) -> list[dict[str, Any]]:
        return list(self.messages)

    @staticmethod
    def payload(output: Any) -> Any:
        native = as_mapping(output)
        return native if isinstance(native, str) else dict(native)

    def answered(self, output: Any, answer: Any) -> None:
        """Take the driver's ``answer`` to the model's ``output``; stop when it is final or
        a limit is reached."""
        response = DriverResponse.coerce(answer)
        self.responses.append(response)
        if response.messages:
            self.messages.extend(response.messages)
        if not (response.call_executed or response.call_failed):
            self.output = _final_answer(output)
            if not response.messages:
                self.messages.append({"role": "assistant", "content": _as_content(self.output)})
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


def _final_answer(output: Any) -> Any:
    """The answer in a model output without calls: a ``final`` content, or the text."""
    found = detect(output)
    if found.has_final:
        return found.final
    return output if isinstance(output, str) else found.text


def _as_content(answer: Any) -> str:
    return answer if isinstance(answer, str) else str(answer)
