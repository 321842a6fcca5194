"""Detection's last step: the model's turn and the answers to its calls, as its provider
wants them in the history; and the tool list in each provider's shape.

Native families get their own message shapes (an assistant turn with its calls, then a tool
result per call id); a call read from text gets the assistant text and one user message with
every result. A reply without calls, and a plain text turn, get their provider's shape too
(what the Runner appends in native mode).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .calls import Detection, ToolCall
from .native import FAMILIES, as_mapping

__all__ = ["Provider", "messages_for", "native_messages", "native_tools"]

Provider = Literal["openai", "openai-responses", "anthropic", "gemini", "ollama"]
"""A provider whose tool list and message shapes the orchestrator can produce."""


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


def result_text(result: Any) -> str:
    """A tool's result as the model reads it: a string as it is, anything else as JSON
    (what JSON cannot hold as its ``str``)."""
    if isinstance(result, str):
        return result
    return _ENCODER.encode(result)


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


# -- answers ---------------------------------------------------------------------------------


def native_messages(
    family: str,
    native: Any,
    answers: Sequence[tuple[str, str | None, str, bool]],
) -> list[dict[str, Any]]:
    """The history entries for the model's turn and the answer to each of its calls.

    ``answers`` are ``(tool name, call id, answer text, is error)``.
    """
    if family in ("openai-chat", "openai-function"):
        out: list[dict[str, Any]] = [dict(native)]
        for name, call_id, text, _ in answers:
            if family == "openai-function":
                out.append({"role": "function", "name": name, "content": text})
            else:
                out.append({"role": "tool", "tool_call_id": call_id or "", "content": text})
        return out
    if family == "openai-responses":
        items = [dict(item) for item in native]
        items += [
            {"type": "function_call_output", "call_id": call_id or "", "output": text}
            for _, call_id, text, _ in answers
        ]
        return items
    if family == "anthropic":
        results = []
        for _, call_id, text, error in answers:
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": call_id or "",
                "content": text,
            }
            if error:
                result["is_error"] = True
            results.append(result)
        return [dict(native), {"role": "user", "content": results}]
    if family == "gemini":
        parts = []
        for name, call_id, text, error in answers:
            response: dict[str, Any] = {
                "name": name,
                "response": {"error" if error else "result": text},
            }
            if call_id:
                response["id"] = call_id
            parts.append({"functionResponse": response})
        return [dict(native), {"role": "user", "parts": parts}]
    if family == "ollama":
        out = [dict(native)]
        out += [
            {"role": "tool", "content": text, "tool_name": name} for name, _, text, _ in answers
        ]
        return out
    raise ValueError(f"unknown family {family!r}")


# -- plain turns -----------------------------------------------------------------------------


def plain_message(
    provider: Provider | None, role: Literal["user", "assistant"], text: str
) -> dict[str, Any]:
    """A turn of plain text in ``provider``'s history (``None``: the text protocol): Gemini's
    ``parts`` (its assistant is ``model``), everyone else's ``role`` and ``content``."""
    if provider == "gemini":
        return {"role": "model" if role == "assistant" else "user", "parts": [{"text": text}]}
    return {"role": role, "content": text}


def reply_messages(provider: Provider, reply: Any) -> list[dict[str, Any]]:
    """A model's reply that holds no call (a response, its message or an SDK object), as
    entries of ``provider``'s history: what a client appends itself when the driver's
    ``DriverResponse.messages`` is ``None``. An empty Anthropic or Gemini reply gives none
    (their APIs refuse an empty turn)."""
    data = as_mapping(reply)
    if isinstance(data, str) or not isinstance(data, dict | Mapping):
        return [plain_message(provider, "assistant", str(data))]
    if provider == "openai-responses":
        output = data.get("output")
        if isinstance(output, list):
            return [dict(item) for item in output if isinstance(item, dict | Mapping)]
        return [dict(data)]  # one output item, or a message given as it is
    if provider == "anthropic":
        content = data.get("content")
        return [{"role": "assistant", "content": content}] if content else []
    if provider == "gemini":
        candidates = data.get("candidates")
        if isinstance(candidates, list) and candidates and isinstance(candidates[0], Mapping):
            data = candidates[0].get("content") or {}
        parts = data.get("parts")
        return [{"role": "model", "parts": list(parts)}] if parts else []
    choices = data.get("choices")  # OpenAI Chat and Ollama: a response, a choice or a message
    if isinstance(choices, list) and choices and isinstance(choices[0], dict | Mapping):
        data = choices[0]
    if isinstance(data.get("message"), dict | Mapping):
        data = data["message"]
    entry: dict[str, Any] = {"role": "assistant", "content": data.get("content") or ""}
    if provider == "openai" and data.get("refusal"):
        entry["refusal"] = data["refusal"]
    return [entry]


# -- tool lists ------------------------------------------------------------------------------


def native_tools(
    tools: Sequence[tuple[str, str, dict[str, Any]]], provider: Provider
) -> list[dict[str, Any]]:
    """``(name, description, JSON Schema of the arguments)`` as a provider's tool list."""
    if provider in ("openai", "ollama"):
        return [
            {"type": "function", "function": {"name": n, "description": d, "parameters": p}}
            for n, d, p in tools
        ]
    if provider == "openai-responses":
        return [
            {"type": "function", "name": n, "description": d, "parameters": p, "strict": False}
            for n, d, p in tools
        ]
    if provider == "anthropic":
        return [{"name": n, "description": d, "input_schema": p} for n, d, p in tools]
    if provider == "gemini":
        declarations = [
            {"name": n, "description": d, "parametersJsonSchema": p} for n, d, p in tools
        ]
        return [{"functionDeclarations": declarations}] if declarations else []
    raise ValueError(f"unknown provider {provider!r}")
