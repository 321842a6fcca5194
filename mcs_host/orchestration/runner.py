"""The Runner: the spec's convenience loop around any ``MCSDriver`` and a chat function.

``Runner(driver, chat).run(question)`` sends the driver's system message and the question to
``chat``, passes each answer to ``process_llm_response``, extends the history with the
response's messages, and stops at the first answer that holds no call (the final answer),
after ``max_turns`` model turns, or after ``max_retries`` failed calls in a row. The client
keeps control of nothing in between; use the manual loop when it must (streaming, consent UI).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mcs_host.contract import DriverResponse
from mcs_host.interfaces import MCSDriver

from .detection import detect
from .native import as_mapping

__all__ = ["RunResult", "Runner"]

Chat = Callable[[list[dict[str, Any]]], "str | Mapping[str, Any] | Any"]
"""Takes the history; returns the model's answer: text, or its provider's message object."""


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
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.driver.get_driver_system_message(self.model_name)},
            *history,
            {"role": "user", "content": user_input},
        ]
        responses: list[DriverResponse] = []
        failures = 0
        for turn in range(1, self.max_turns + 1):
            output = self.chat(list(messages))
            native = as_mapping(output)
            payload = native if isinstance(native, str) else dict(native)
            response = DriverResponse.coerce(self.driver.process_llm_response(payload))
            responses.append(response)
            if response.messages:
                messages.extend(response.messages)
            if not (response.call_executed or response.call_failed):
                answer = _final_answer(output)
                if not response.messages:
                    messages.append({"role": "assistant", "content": _as_content(answer)})
                return RunResult(answer, "final", turn, tuple(messages), tuple(responses))
            failures = failures + 1 if response.call_failed and not response.call_executed else 0
            if failures > self.max_retries:
                return RunResult(None, "retry-limit", turn, tuple(messages), tuple(responses))
        return RunResult(None, "turn-limit", self.max_turns, tuple(messages), tuple(responses))


def _final_answer(output: Any) -> Any:
    """The answer in a model output without calls: a ``final`` content, or the text."""
    found = detect(output)
    if found.has_final:
        return found.final
    return output if isinstance(output, str) else found.text


def _as_content(answer: Any) -> str:
    return answer if isinstance(answer, str) else str(answer)
