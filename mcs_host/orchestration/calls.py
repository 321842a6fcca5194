"""The records detection hands on: a :class:`ToolCall` per call the model asked for, and
the :class:`Detection` of one response; for text, the :class:`TextCall` and
:class:`TextDetection` a :class:`TextFormat` finds."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Detection", "TextCall", "TextDetection", "TextFormat", "ToolCall"]


@dataclass(frozen=True, slots=True)
class TextCall:
    """A call found in text: its arguments, or why it cannot run."""

    name: str
    arguments: dict[str, Any] | None
    problem: str | None = None
    healed: tuple[str, ...] = ()
    id: str | None = None
    texts: Mapping[str, str] | None = None
    """For arguments written as bare text (``<parameter=k>42</parameter>``) and read as JSON
    into something other than a string: the text as written."""


@dataclass(frozen=True, slots=True)
class TextDetection:
    """What one text format found in a response."""

    calls: tuple[TextCall, ...] = ()
    format: str = "none"
    """The :attr:`TextFormat.name` that found the calls, ``json`` or ``none``."""
    final: Any = None
    """The content of a seed-protocol ``{"final": ...}`` answer."""
    has_final: bool = False
    unfinished_thought: bool = False
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class TextFormat:
    """One way models write tool calls in text: a detector the orchestrator tries in order.

    ``detect(text, known)`` returns the calls (``known`` are the tool names on offer), or
    ``None`` when the format is not in ``text``; a format that is present but holds no
    runnable call returns a detection with no calls, or calls with their ``problem``.
    """

    name: str
    """Reported as the detection's ``format``; unique among the formats in use."""
    detect: Callable[[str, Collection[str]], TextDetection | None]
    markers: tuple[str, ...] = ()
    """``detect`` is tried only when the text holds one of these (none: always tried)."""
    order: int = 500
    """Lower goes first, then by name. The built-in formats use 100 to 900; the JSON
    protocol (whole text, fences, objects in prose) comes after every format."""
    reasoning: tuple[tuple[str, str], ...] = ()
    """``(opening, closing)`` of the reasoning blocks the family writes: what is inside is
    never a call, in any format."""


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
    texts: Mapping[str, str] | None = None
    """Arguments written as bare text and read as JSON (``42``, ``true``, ``[1]``): the text
    as written, which a tool whose schema wants a string for them gets instead."""
    caller: str | None = None
    """Who asked for it, when the host knows: the subject of the access token a call served
    over HTTP came with (``serve --http`` behind an identity provider)."""

    def with_arguments(self, arguments: Mapping[str, Any]) -> ToolCall:
        """The same call with other arguments (a consent step that edits the call)."""
        return ToolCall(
            self.name,
            dict(arguments),
            self.id,
            self.family,
            self.healed,
            self.problem,
            caller=self.caller,
        )


@dataclass(frozen=True, slots=True)
class Detection:
    """What :func:`~mcs_host.orchestration.detection.detect` found in one response."""

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
