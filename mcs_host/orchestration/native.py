"""Detection, step one: native tool calls in each provider's response shape.

The shapes follow the providers' own SDK types (``openai``, ``anthropic``, ``google-genai``,
``ollama``), which the tests validate against: OpenAI Chat Completions (a response, a choice,
or a message; ``tool_calls`` with JSON-string arguments, and the legacy ``function_call``),
OpenAI Responses (``function_call`` output items), Anthropic Messages (``tool_use`` blocks),
Gemini (``functionCall`` parts, camelCase or snake_case), Ollama (``message.tool_calls`` with
object arguments, or stringified ones). SDK objects are accepted too (anything with
``model_dump``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .healing import Unhealable, heal

__all__ = ["FAMILIES", "NativeCall", "NativeDetection", "as_mapping", "detect_native"]

FAMILIES = (
    "openai-chat",
    "openai-function",
    "openai-responses",
    "anthropic",
    "gemini",
    "ollama",
)


class NativeCall:
    """A call from a native object: name, arguments (or why they are unreadable), id."""

    __slots__ = ("arguments", "healed", "id", "name", "problem")

    def __init__(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        id: str | None = None,
        problem: str | None = None,
        healed: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.arguments = arguments
        self.id = id
        self.problem = problem
        self.healed = healed


class NativeDetection:
    __slots__ = ("calls", "family", "native", "text", "truncated")

    def __init__(
        self,
        family: str,
        calls: list[NativeCall],
        text: str,
        native: Any,
        truncated: bool = False,
    ) -> None:
        self.family = family
        self.calls = calls
        self.text = text
        self.native = native
        """What goes back into the history as the model's turn, as the provider wants it."""
        self.truncated = truncated


def as_mapping(value: Any) -> Any:
    """A provider SDK object as plain data (its ``model_dump``), anything else unchanged."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, dict | Mapping):
        return dump(mode="json", exclude_none=True)
    return value


def detect_native(data: Mapping[str, Any]) -> NativeDetection | None:
    """The calls in a provider's native response or message, or ``None`` if it is not one."""
    for finder in (_openai_responses, _openai_chat, _anthropic, _gemini, _ollama):
        found = finder(data)
        if found is not None:
            return found
    return None


# -- detection -------------------------------------------------------------------------------


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict | Mapping) else {}


def _name(value: Any) -> str:
    return value if isinstance(value, str) else "?"


def _arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None, tuple[str, ...]]:
    if raw is None or raw == "":
        return {}, None, ()
    notes: tuple[str, ...] = ()
    if isinstance(raw, str):
        try:
            raw, notes = heal(raw)
        except Unhealable as exc:
            if exc.truncated:
                return None, f"the arguments were cut off ({exc.reason}); not run", ()
            return None, f"the arguments are not readable JSON ({exc.reason})", ()
    if not isinstance(raw, dict | Mapping):
        return None, f"the arguments must be an object, not {type(raw).__name__}", notes
    return dict(raw), None, notes


def stopped_at_limit(data: Mapping[str, Any]) -> bool:
    """Whether a provider's response says its output was cut at the length limit
    (OpenAI's ``finish_reason: length``, Anthropic's ``max_tokens``, the Responses API's
    ``max_output_tokens``, Gemini's ``MAX_TOKENS``, Ollama's ``done_reason: length``)."""
    choices = data.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    candidates = data.get("candidates")
    candidate = candidates[0] if isinstance(candidates, list) and candidates else None
    reasons = (
        _mapping(first).get("finish_reason"),
        data.get("finish_reason"),
        data.get("stop_reason"),
        data.get("done_reason"),
        _mapping(data.get("incomplete_details")).get("reason"),
        _mapping(candidate).get("finishReason", _mapping(candidate).get("finish_reason")),
    )
    return any(r in ("length", "max_tokens", "max_output_tokens", "MAX_TOKENS") for r in reasons)


def _openai_chat(data: Mapping[str, Any]) -> NativeDetection | None:
    truncated = False
    choices = data.get("choices")
    if isinstance(choices, list):
        if not choices or not isinstance(choices[0], dict | Mapping):
            return None
        truncated = choices[0].get("finish_reason") == "length"
        data = choices[0]
    message = _mapping(data.get("message")) or data
    if "tool_calls" not in message and "function_call" not in message:
        return None
    if _is_ollama(message) and choices is None:
        return None
    calls: list[NativeCall] = []
    entries = message.get("tool_calls") or []
    if not isinstance(entries, list):
        calls.append(NativeCall("?", None, None, "tool_calls is not a list of calls"))
        entries = []
    for entry in entries:
        function = entry.get("function") if isinstance(entry, dict | Mapping) else None
        call_id = entry.get("id") if isinstance(entry, dict | Mapping) else None
        if not isinstance(function, dict | Mapping) or not isinstance(function.get("name"), str):
            calls.append(NativeCall("?", None, call_id, "the tool call has no function name"))
            continue
        arguments, problem, notes = _arguments(function.get("arguments"))
        calls.append(NativeCall(function["name"], arguments, call_id, problem, notes))
    legacy = message.get("function_call")
    family = "openai-chat"
    if isinstance(legacy, dict | Mapping) and isinstance(legacy.get("name"), str):
        arguments, problem, notes = _arguments(legacy.get("arguments"))
        calls.append(NativeCall(legacy["name"], arguments, None, problem, notes))
        if not message.get("tool_calls"):
            family = "openai-function"
    keep = ("role", "content", "tool_calls", "function_call", "name", "refusal")
    native = {k: message[k] for k in keep if message.get(k) is not None}
    native.setdefault("role", "assistant")
    native.setdefault("content", None)
    text = message.get("content") if isinstance(message.get("content"), str) else ""
    return NativeDetection(family, calls, text or "", native, truncated)


def _openai_responses(data: Mapping[str, Any]) -> NativeDetection | None:
    if data.get("type") == "function_call":
        items: Sequence[Any] = [data]
    elif data.get("object") == "response" or (
        isinstance(data.get("output"), list) and "choices" not in data
    ):
        items = data.get("output") or []
    else:
        return None
    if not isinstance(items, list):
        items = []
    calls: list[NativeCall] = []
    texts: list[str] = []
    for item in items:
        if not isinstance(item, dict | Mapping):
            continue
        if item.get("type") == "function_call":
            arguments, problem, notes = _arguments(item.get("arguments"))
            name = _name(item.get("name"))
            calls.append(NativeCall(name, arguments, item.get("call_id"), problem, notes))
        elif item.get("type") == "message":
            content = item.get("content")
            for part in content if isinstance(content, list) else ():
                if isinstance(part, dict | Mapping) and part.get("type") == "output_text":
                    texts.append(str(part.get("text", "")))
    # every output item goes back as it came: a reasoning model's calls are refused without
    # the reasoning items before them (with their encrypted_content when nothing is stored)
    native = [dict(item) for item in items if isinstance(item, dict | Mapping)]
    truncated = _mapping(data.get("incomplete_details")).get("reason") == "max_output_tokens"
    return NativeDetection("openai-responses", calls, "\n".join(texts), native, truncated)


def _anthropic(data: Mapping[str, Any]) -> NativeDetection | None:
    content = data.get("content")
    if not isinstance(content, list) or not (
        data.get("type") == "message" or data.get("role") == "assistant"
    ):
        return None
    if not any(isinstance(b, dict | Mapping) and "type" in b for b in content):
        return None
    calls: list[NativeCall] = []
    texts: list[str] = []
    for block in content:
        if not isinstance(block, dict | Mapping):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            name = _name(block.get("name"))
            arguments, problem, notes = _arguments(block.get("input", {}))
            calls.append(NativeCall(name, arguments, block.get("id"), problem, notes))
    native = {"role": "assistant", "content": list(content)}
    truncated = data.get("stop_reason") == "max_tokens"
    return NativeDetection("anthropic", calls, "\n".join(texts), native, truncated)


def _gemini(data: Mapping[str, Any]) -> NativeDetection | None:
    truncated = False
    candidates = data.get("candidates")
    if isinstance(candidates, list):
        if not candidates or not isinstance(candidates[0], dict | Mapping):
            return None
        reason = candidates[0].get("finishReason", candidates[0].get("finish_reason"))
        truncated = reason == "MAX_TOKENS"
        data = _mapping(candidates[0].get("content"))
    parts = data.get("parts")
    if not isinstance(parts, list):
        return None
    calls: list[NativeCall] = []
    texts: list[str] = []
    found = False
    for part in parts:
        if not isinstance(part, dict | Mapping):
            continue
        call = part.get("functionCall", part.get("function_call"))
        if isinstance(call, dict | Mapping):
            found = True
            name = _name(call.get("name"))
            arguments, problem, notes = _arguments(call.get("args", {}))
            calls.append(NativeCall(name, arguments, call.get("id"), problem, notes))
        elif isinstance(part.get("text"), str) and not part.get("thought"):
            texts.append(part["text"])
    if not found and data.get("role") not in ("model", None):
        return None
    if not found and candidates is None:
        return None
    native = {"role": "model", "parts": list(parts)}
    return NativeDetection("gemini", calls, "\n".join(texts), native, truncated)


def _is_ollama(message: Mapping[str, Any]) -> bool:
    """Ollama's tool calls carry no id and no type; their arguments are usually objects."""
    entries = message.get("tool_calls")
    return (
        isinstance(entries, list)
        and bool(entries)
        and all(isinstance(e, Mapping) and "id" not in e and "type" not in e for e in entries)
    )


def _ollama(data: Mapping[str, Any]) -> NativeDetection | None:
    message = _mapping(data.get("message")) or data
    if not isinstance(message.get("tool_calls"), list) or not _is_ollama(message):
        return None
    calls: list[NativeCall] = []
    for entry in message["tool_calls"]:
        function = entry.get("function") if isinstance(entry, dict | Mapping) else None
        if not isinstance(function, dict | Mapping) or not isinstance(function.get("name"), str):
            calls.append(NativeCall("?", None, None, "the tool call has no function name"))
            continue
        arguments, problem, notes = _arguments(function.get("arguments"))
        calls.append(NativeCall(function["name"], arguments, None, problem, notes))
    native: dict[str, Any] = {"role": message.get("role") or "assistant"}
    native["content"] = message.get("content") or ""
    # Ollama wants objects back; some servers send the arguments as a JSON string
    native["tool_calls"] = [
        {"function": {"name": c.name, "arguments": c.arguments}}
        if c.arguments is not None
        else dict(entry)
        for c, entry in zip(calls, message["tool_calls"], strict=True)
    ]
    truncated = data.get("done_reason") == "length"
    return NativeDetection("ollama", calls, str(message.get("content") or ""), native, truncated)
