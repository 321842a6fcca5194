"""FunctionGemma: ``<start_function_call>call:NAME{key:value,...}<end_function_call>``, and
Gemma 4: ``<|tool_call>call:NAME{key:value,...}<tool_call|>``. Keys are bare; a string value
is wrapped in ``<escape>`` tokens (Gemma 4: ``<|"|>``), other values (numbers, ``true``,
nested ``{...}`` and ``[...]``) are written as they are. Gemma 4's reasoning is
``<|channel>`` ... ``<channel|>``. At the end of the text, a call runs without its end token
when its ``{...}`` closes and nothing follows."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import cut_off

__all__: list[str] = []  # the formats reach users through TextFormats

_CALL = re.compile(
    r"<start_function_call>\s*call:([\w.\-]+)\s*(.*?)(<end_function_call>|\Z)", re.DOTALL
)
_GEMMA4_CALL = re.compile(r"<\|tool_call>\s*call:([\w.\-]+)\s*(.*?)(<tool_call\|>|\Z)", re.DOTALL)


class _UnreadableError(ValueError):
    pass


def calls(text: str, known: Collection[str]) -> TextDetection | None:
    """FunctionGemma's calls."""
    found = _read(_CALL.findall(text), "<escape>", "<end_function_call>")
    return TextDetection(found, "functiongemma") if found else None


def gemma4_calls(text: str, known: Collection[str]) -> TextDetection | None:
    """Gemma 4's calls."""
    found = _read(_GEMMA4_CALL.findall(text), '<|"|>', "<tool_call|>")
    return TextDetection(found, "gemma4") if found else None


def _read(matches: list[tuple[str, str, str]], escape: str, end_token: str) -> tuple[TextCall, ...]:
    """Each ``(name, body, closing)`` read as a call: its arguments, or why it cannot run."""
    found = []
    for name, body, closing in matches:
        stripped = body.strip()
        try:
            value, end = _value(stripped, 0, escape)
        except (_UnreadableError, IndexError, RecursionError) as exc:
            problem = f"the arguments are not readable ({exc})"
            found.append(TextCall(name, None, problem if closing else cut_off(end_token)))
            continue
        if not closing and end != len(stripped):  # at the end of the text, and not whole
            found.append(TextCall(name, None, cut_off(end_token)))
            continue
        if not isinstance(value, dict):
            found.append(TextCall(name, None, "the arguments are not a {key:value} object"))
            continue
        found.append(TextCall(name, value))
    return tuple(found)


def _value(text: str, at: int, escape: str, depth: int = 0) -> tuple[Any, int]:
    """The value starting at ``at`` and where it ends; ``escape`` wraps a string."""
    if depth > 32:
        raise _UnreadableError("nested too deep")
    if text.startswith(escape, at):
        end = text.find(escape, at + len(escape))
        if end == -1:
            raise _UnreadableError(f"an {escape} string never ends")
        return text[at + len(escape) : end], end + len(escape)
    if text[at] == "{":
        result: dict[str, Any] = {}
        at += 1
        while text[at] != "}":
            colon = text.find(":", at)
            if colon == -1:
                raise _UnreadableError("a key has no ':'")
            key = text[at:colon].strip()
            if not key:
                raise _UnreadableError("a key is empty")
            start = _skip_space(text, colon + 1)
            result[key], at = _value(text, start, escape, depth + 1)
            delimited = text.startswith(escape, start) or text[start] in "{["
            at = _after_item(text, at, "}", delimited)
        return result, at + 1
    if text[at] == "[":
        items = []
        at += 1
        while text[at] != "]":
            item, at = _value(text, at, escape, depth + 1)
            items.append(item)
            at = _after_item(text, at, "]")
        return items, at + 1
    end = at
    while end < len(text) and text[end] not in ",}]":
        end += 1
    raw = text[at:end].strip()
    try:
        return json.loads(raw), end
    except ValueError:
        return raw, end


def _after_item(text: str, at: int, closing: str, delimited: bool = False) -> int:
    """Where the next item (or ``closing``) starts after the item ending at ``at``. The
    comma between two may be missing after a ``delimited`` value (an escaped string, a
    bracket): where it ends is not in doubt (``city:<escape>NYC<escape>unit:...``)."""
    at = _skip_space(text, at)
    if text[at] == ",":
        at = _skip_space(text, at + 1)
    elif text[at] != closing and not delimited:
        raise _UnreadableError(f"expected ',' or {closing!r}")
    return at


def _skip_space(text: str, at: int) -> int:
    while text[at] in " \n\t":
        at += 1
    return at


FORMATS = (
    TextFormat("functiongemma", calls, ("<start_function_call>",), 180),
    TextFormat(
        "gemma4", gemma4_calls, ("<|tool_call>",), 181, reasoning=(("<|channel>", "<channel|>"),)
    ),
)
