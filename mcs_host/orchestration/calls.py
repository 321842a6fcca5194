"""The records detection hands on: a :class:`ToolCall` per call the model asked for, and
the :class:`Detection` of one response."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Detection", "ToolCall"]


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
