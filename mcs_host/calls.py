"""Tool calls: detect them in a model's output, and format their results for its history.

:func:`detect` turns an LLM response (text, or a provider's native object) into
:class:`ToolCall` records without executing anything; :func:`messages_for` builds the
conversation entries that answer them, in the wire format of the family they came from.

Native objects: OpenAI Chat Completions (a whole response, a choice, or a message, with
``tool_calls`` or the legacy ``function_call``) and Anthropic Messages (``tool_use`` blocks).
Text: the JSON protocol ``{"tool": name, "arguments": {...}}`` (name keys ``tool``, ``name``,
``tool_name``, ``function``; argument keys ``arguments``, ``parameters``, ``args``,
``tool_input``, ``input``), alone, in a fenced block, or in prose; several calls as an array.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Detection", "ToolCall", "detect", "messages_for"]

_NAME_KEYS = ("tool", "name", "tool_name", "function")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "tool_input", "input")
_FENCE = re.compile(r"```(?:json|JSON|tool_call)?[ \t]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model asked for."""

    name: str
    arguments: Mapping[str, Any]
    id: str | None = None
    """The provider's call id, which its answer must carry."""
    family: str = "text"
    """``openai-chat``, ``openai-function``, ``anthropic`` or ``text``."""


@dataclass(frozen=True, slots=True)
class Detection:
    """What :func:`detect` found in one response."""

    calls: tuple[ToolCall, ...] = ()
    failures: tuple[str, ...] = ()
    """Calls that were recognisable but unusable, each with its reason."""
    family: str = "text"
    text: str = ""
    """The response's text, or the assistant text around native calls."""
    native: Mapping[str, Any] | None = field(default=None)
    """The assistant message as the provider sent it, for the history."""

    @property
    def found(self) -> bool:
        return bool(self.calls or self.failures)


def detect(llm_response: str | Mapping[str, Any], known: Collection[str] = ()) -> Detection:
    """Find the tool calls in ``llm_response``; executes nothing.

    In text, an object is a call when it names a tool and gives arguments (an object with
    only a name is a call only if the name is in ``known``), so a JSON answer such as
    ``{"name": "Ann", "age": 3}`` stays an answer.
    """
    if isinstance(llm_response, Mapping):
        return _detect_native(llm_response, known)
    return _detect_text(llm_response, known)


# -- native objects --------------------------------------------------------------------------


def _detect_native(data: Mapping[str, Any], known: Collection[str]) -> Detection:
    message = _openai_message(data)
    if message is not None:
        return _openai(message)
    if data.get("type") == "message" or (
        isinstance(data.get("content"), list) and data.get("role") == "assistant"
    ):
        return _anthropic(data)
    if any(key in data for key in _NAME_KEYS):
        calls, failures = _protocol_calls(data, known)
        return Detection(tuple(calls), tuple(failures), "text", json.dumps(data))
    return Detection(family="text", text=json.dumps(data))


def _openai_message(data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    choices = data.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        data = choices[0]
    message = data.get("message")
    if isinstance(message, Mapping):
        data = message
    if "tool_calls" in data or "function_call" in data:
        return data
    return None


def _openai(message: Mapping[str, Any]) -> Detection:
    calls: list[ToolCall] = []
    failures: list[str] = []
    text = message.get("content") if isinstance(message.get("content"), str) else ""
    for entry in message.get("tool_calls") or ():
        function = entry.get("function") if isinstance(entry, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            failures.append(f"tool call {entry!r} has no function name")
            continue
        arguments, problem = _arguments(function.get("arguments"))
        if problem:
            failures.append(f"tool call {function['name']!r}: {problem}")
            continue
        calls.append(ToolCall(function["name"], arguments, entry.get("id"), "openai-chat"))
    legacy = message.get("function_call")
    if isinstance(legacy, Mapping) and isinstance(legacy.get("name"), str):
        arguments, problem = _arguments(legacy.get("arguments"))
        if problem:
            failures.append(f"function call {legacy['name']!r}: {problem}")
        else:
            calls.append(ToolCall(legacy["name"], arguments, None, "openai-function"))
    family = "openai-function" if legacy and not message.get("tool_calls") else "openai-chat"
    return Detection(tuple(calls), tuple(failures), family, text or "", dict(message))


def _anthropic(message: Mapping[str, Any]) -> Detection:
    calls: list[ToolCall] = []
    failures: list[str] = []
    texts: list[str] = []
    for block in message.get("content") or ():
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_use":
            name, arguments = block.get("name"), block.get("input", {})
            if not isinstance(name, str) or not isinstance(arguments, Mapping):
                failures.append(
                    f"tool_use block {block.get('id')!r} has no name or no input object"
                )
                continue
            calls.append(ToolCall(name, dict(arguments), block.get("id"), "anthropic"))
    native = {"role": "assistant", "content": list(message.get("content") or ())}
    return Detection(tuple(calls), tuple(failures), "anthropic", "\n".join(texts), native)


def _arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Arguments given as an object or as a JSON string of one."""
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            return {}, f"arguments are not valid JSON ({exc})"
    if not isinstance(raw, Mapping):
        return {}, f"arguments must be an object, not {type(raw).__name__}"
    return dict(raw), None


# -- text ------------------------------------------------------------------------------------


def _detect_text(text: str, known: Collection[str]) -> Detection:
    for candidate in _json_candidates(text):
        calls, failures = _protocol_calls(candidate, known)
        if calls or failures:
            return Detection(tuple(calls), tuple(failures), "text", text)
    return Detection(family="text", text=text)


def _json_candidates(text: str) -> Iterator[Any]:
    """JSON values in ``text``: the whole of it, fenced blocks, then objects in prose."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        with contextlib.suppress(ValueError):
            yield json.loads(stripped)
    for block in _FENCE.findall(text):
        try:
            yield json.loads(block)
        except ValueError:
            continue
    found = list(_objects_in(text))
    if found:
        yield found if len(found) > 1 else found[0]


def _objects_in(text: str) -> Iterator[Any]:
    """Every top-level JSON object embedded in ``text``."""
    decoder = json.JSONDecoder()
    index = text.find("{")
    while index != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except ValueError:
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            yield value
        index = text.find("{", end)


def _protocol_calls(value: Any, known: Collection[str]) -> tuple[list[ToolCall], list[str]]:
    """Calls in the JSON protocol: one object or a list of them."""
    items: Sequence[Any] = value if isinstance(value, list) else [value]
    calls: list[ToolCall] = []
    failures: list[str] = []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        name = next((item[k] for k in _NAME_KEYS if isinstance(item.get(k), str)), None)
        if name is None:
            continue
        if not any(k in item for k in _ARGUMENT_KEYS) and name not in known:
            continue  # a JSON answer with a "name" field, not a call
        raw: Any = next((item[k] for k in _ARGUMENT_KEYS if k in item), {})
        arguments, problem = _arguments(raw)
        if problem:
            failures.append(f"call of {name!r}: {problem}")
        else:
            calls.append(ToolCall(name, arguments))
    return calls, failures


# -- answers ---------------------------------------------------------------------------------


def messages_for(
    detection: Detection, answers: Sequence[tuple[ToolCall, str]]
) -> list[dict[str, Any]]:
    """The history entries for a response and the answer (text) to each of its calls."""
    if detection.family in ("openai-chat", "openai-function"):
        assistant = dict(detection.native or {"role": "assistant", "content": detection.text})
        assistant.setdefault("role", "assistant")
        out: list[dict[str, Any]] = [assistant]
        for call, answer in answers:
            if call.family == "openai-function":
                out.append({"role": "function", "name": call.name, "content": answer})
            else:
                out.append({"role": "tool", "tool_call_id": call.id, "content": answer})
        return out
    if detection.family == "anthropic":
        assistant = dict(detection.native or {"role": "assistant", "content": detection.text})
        results = [
            {"type": "tool_result", "tool_use_id": call.id, "content": answer}
            for call, answer in answers
        ]
        return [assistant, {"role": "user", "content": results}]
    joined = "\n\n".join(f"Result of {call.name}:\n{answer}" for call, answer in answers)
    return [
        {"role": "assistant", "content": detection.text},
        {"role": "user", "content": joined},
    ]
