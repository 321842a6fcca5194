"""Tool calls: find them in a model's output (text or native), and answer them.

:func:`detect` executes nothing. A response given as a mapping (or a provider SDK object) is
read in its provider's native format (:mod:`mcs_host.formats`); text, and a mapping in the
JSON protocol, are read by :mod:`mcs_host.parsing`. A call that cannot run (unreadable, cut
off) is still a :class:`ToolCall`, with its ``problem``: it gets an answer too, as providers
reject a history with an unanswered call id.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .formats import FAMILIES, as_mapping, detect_native, native_messages
from .parsing import detect_text

__all__ = ["Detection", "ToolCall", "detect", "messages_for"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model asked for."""

    name: str
    arguments: Mapping[str, Any]
    id: str | None = None
    """The provider's call id, which its answer must carry."""
    family: str = "text"
    """``openai-chat``, ``openai-function``, ``openai-responses``, ``anthropic``,
    ``gemini``, ``ollama``, or ``text``."""
    healed: tuple[str, ...] = ()
    """What was mended to read it (trailing comma, missing brace...)."""
    problem: str | None = None
    """Why it cannot run (unreadable, cut off); ``None`` for a runnable call."""

    def with_arguments(self, arguments: Mapping[str, Any]) -> ToolCall:
        """The same call with other arguments (a consent step that edits the call)."""
        return ToolCall(self.name, dict(arguments), self.id, self.family, self.healed, self.problem)


@dataclass(frozen=True, slots=True)
class Detection:
    """What :func:`detect` found in one response."""

    calls: tuple[ToolCall, ...] = ()
    family: str = "text"
    format: str = "none"
    """For text: ``json``, ``tool_call-tag``, ``mistral``...; for native input, the family."""
    text: str = ""
    """The response's text, or the assistant text around native calls."""
    native: Any = None
    """The model's turn as its provider wants it back in the history."""
    final: Any = None
    has_final: bool = False
    """The response was a seed-protocol ``{"final": ...}`` answer (``final`` holds it)."""
    truncated: bool = False
    """The provider says the output hit its length limit."""

    @property
    def found(self) -> bool:
        return bool(self.calls)


def detect(llm_response: str | Mapping[str, Any] | Any, known: Collection[str] = ()) -> Detection:
    """Find the tool calls in ``llm_response``; nothing is executed.

    ``known`` are the tool names on offer: an object with only a ``name``, or a pythonic
    call list, counts as a call only when it names one of them.
    """
    data = as_mapping(llm_response)
    if isinstance(data, Mapping):
        native = detect_native(data)
        if native is not None and not native.calls:
            # no native call: the model may have written calls in its text
            return _from_text(native.text, known)
        if native is not None:
            cut = "the response hit the output limit and was cut off; the call was not run"
            calls = tuple(
                ToolCall(
                    c.name,
                    c.arguments or {},
                    c.id,
                    native.family,
                    c.healed,
                    c.problem or (cut if native.truncated else None),
                )
                for c in native.calls
            )
            return Detection(
                calls,
                native.family,
                native.family,
                native.text,
                native.native,
                truncated=native.truncated,
            )
        content = _message_text(data)
        return _from_text(
            content if content is not None else json.dumps(data, ensure_ascii=False, default=str),
            known,
        )
    return _from_text(str(data), known)


def _from_text(text: str, known: Collection[str]) -> Detection:
    found = detect_text(text, known)
    calls = tuple(
        ToolCall(c.name, c.arguments or {}, c.id, "text", c.healed, c.problem) for c in found.calls
    )
    return Detection(
        calls, "text", found.format, text, final=found.final, has_final=found.has_final
    )


_MESSAGE_KEYS = {"role", "content", "refusal", "annotations", "name", "thinking", "tool_calls"}


def _message_text(data: Mapping[str, Any]) -> str | None:
    """The text of a chat message (or a response holding one) without native calls."""
    choices = data.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        data = choices[0]
    message = data.get("message")
    if isinstance(message, Mapping):
        data = message
    content = data.get("content")
    if isinstance(content, str) and set(data) <= _MESSAGE_KEYS:
        return content
    return None


def messages_for(
    detection: Detection, answers: Sequence[tuple[ToolCall, str, bool]]
) -> list[dict[str, Any]]:
    """History entries for the model's turn and the answer to each call, in its family's
    format; ``answers`` are ``(call, answer text, is error)``."""
    if detection.family in FAMILIES:
        return native_messages(
            detection.family,
            detection.native,
            [(call.name, call.id, text, error) for call, text, error in answers],
        )
    results = "\n\n".join(
        f"{'Error from' if error else 'Result of'} {call.name}:\n{text}"
        for call, text, error in answers
    )
    return [
        {"role": "assistant", "content": detection.text},
        {"role": "user", "content": results},
    ]
