"""Detection: a model's response -> the tool calls it holds, executing nothing.

The response flows one way: a mapping (or a provider SDK object) is read in its provider's
native shape (:mod:`.native`); when that holds no call, or the response is text, the text
protocols are tried (:mod:`.text`), which heal a clearly meant call carefully
(:mod:`.healing`). The result is a :class:`~.calls.Detection` of :class:`~.calls.ToolCall`
records, which the orchestrator validates, runs and answers (:mod:`.messages`). A call that
cannot run (unreadable, cut off) is still a ``ToolCall``, with its ``problem``: it gets an
answer too, as providers reject a history with an unanswered call id.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

from .calls import Detection, ToolCall
from .native import as_mapping, detect_native, stopped_at_limit
from .text import DEFAULT_FORMATS, TextFormats, detect_text

__all__ = ["detect"]


def detect(
    llm_response: str | Mapping[str, Any] | Any,
    known: Collection[str] = (),
    formats: TextFormats | None = None,
) -> Detection:
    """Find the tool calls in ``llm_response``; nothing is executed.

    ``known`` are the tool names on offer: an object with only a ``name``, or a pythonic
    call list, counts as a call only when it names one of them. ``formats`` are the text
    formats to try (default: the built-in ones).
    """
    if type(llm_response) is str:
        return _clean(llm_response, known, formats) or _from_text(llm_response, known, formats)
    data = as_mapping(llm_response)
    if isinstance(data, dict | Mapping):
        native = detect_native(data)
        if native is not None and not native.calls:
            # no native call: the model may have written calls in its text
            return _cut(_from_text(native.text, known, formats), native.truncated)
        if native is not None:
            cut = _CUT
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
        found = _from_text(
            content if content is not None else json.dumps(data, ensure_ascii=False, default=str),
            known,
            formats,
        )
        return _cut(found, content is not None and stopped_at_limit(data))
    return _from_text(str(data), known, formats)


def _cut(found: Detection, truncated: bool) -> Detection:
    """``found`` as the provider cut it at its length limit: no text call in it runs."""
    if not truncated:
        return found
    calls = tuple(replace(c, problem=c.problem or _CUT) for c in found.calls)
    return replace(found, calls=calls, truncated=True)


def _clean(text: str, known: Collection[str], formats: TextFormats | None) -> Detection | None:
    """The fast path: a response that is one JSON-protocol call of an offered tool and
    nothing else, read as the text detector would read it, or ``None`` (then the detector
    decides). ``{"tool"|"name": ..., "arguments": {...}}`` and ``{"name", "parameters"}``."""
    stripped = text.strip()
    if stripped[:1] != "{" or stripped[-1:] != "}":
        return None
    if not (formats or DEFAULT_FORMATS).unmarked(stripped):
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    if type(value) is not dict or len(value) != 2:
        return None
    keys = value.keys()
    if keys == _TOOL_ARGUMENTS:
        name, arguments = value["tool"], value["arguments"]
    elif keys == _NAME_ARGUMENTS:
        name, arguments = value["name"], value["arguments"]
    elif keys == _NAME_PARAMETERS:
        name, arguments = value["name"], value["parameters"]
    else:
        return None
    if type(name) is not str or type(arguments) is not dict or name not in known:
        return None
    return Detection((ToolCall(name, arguments or {}),), "text", "json", text)


_TOOL_ARGUMENTS = {"tool", "arguments"}
_NAME_ARGUMENTS = {"name", "arguments"}
_NAME_PARAMETERS = {"name", "parameters"}


def _from_text(text: str, known: Collection[str], formats: TextFormats | None) -> Detection:
    answered = _answered(text)
    if answered is not None:
        return answered
    found = detect_text(text, known, formats)
    calls = tuple(
        ToolCall(c.name, c.arguments or {}, c.id, "text", c.healed, c.problem, c.texts or None)
        for c in found.calls
    )
    return Detection(
        calls, "text", found.format, text, final=found.final, has_final=found.has_final
    )


def _answered(text: str) -> Detection | None:
    """A response in the shape of the response schema (:mod:`.response_schema`), read by
    its structure before any text format, so no string in it counts as a marker: all of
    ``text`` is one object ``{"response": X}``, ``X`` a call ``{"tool", "arguments"}``, a
    non-empty list of calls, or a final answer ``{"final": ...}``. Else ``None``."""
    if _RESPONSE_KEY.match(text) is None or text.rstrip()[-1:] != "}":
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if type(value) is not dict or len(value) != 1:
        return None
    inner = value["response"]
    if type(inner) is dict and inner.keys() == {"final"}:
        return Detection(format="json", text=text, final=inner["final"], has_final=True)
    calls = []
    for item in inner if type(inner) is list else [inner]:
        if type(item) is not dict or item.keys() != _TOOL_ARGUMENTS:
            return None
        name, arguments = item["tool"], item["arguments"]
        if type(name) is not str or type(arguments) is not dict:
            return None
        calls.append(ToolCall(name, arguments))
    return Detection(tuple(calls), "text", "json", text) if calls else None


_RESPONSE_KEY = re.compile(r'\s*\{\s*"response"\s*:')

_CUT = "the response hit the output limit and was cut off; the call was not run"

_MESSAGE_KEYS = {"role", "content", "refusal", "annotations", "name", "thinking", "tool_calls"}


def _message_text(data: Mapping[str, Any]) -> str | None:
    """The text of a chat message (or a response holding one) without native calls."""
    choices = data.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict | Mapping):
        data = choices[0]
    message = data.get("message")
    if isinstance(message, dict | Mapping):
        data = message
    content = data.get("content")
    if isinstance(content, str) and set(data) <= _MESSAGE_KEYS:
        return content
    return None
