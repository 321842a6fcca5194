"""FunctionGemma: ``<start_function_call>call:NAME{key:value,...}<end_function_call>``.
Keys are bare; a string value is wrapped in ``<escape>`` tokens, other values (numbers,
``true``, nested ``{...}`` and ``[...]``) are written as they are. At the end of the text,
a call runs without ``<end_function_call>`` when its ``{...}`` closes and nothing follows."""

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
_ESCAPE = "<escape>"
_END = "<end_function_call>"


class _UnreadableError(ValueError):
    pass


def calls(text: str, known: Collection[str]) -> TextDetection | None:
    found = []
    for name, body, closing in _CALL.findall(text):
        stripped = body.strip()
        try:
            value, end = _value(stripped, 0)
        except (_UnreadableError, IndexError, RecursionError) as exc:
            problem = f"the arguments are not readable ({exc})"
            found.append(TextCall(name, None, problem if closing else cut_off(_END)))
            continue
        if not closing and end != len(stripped):  # at the end of the text, and not whole
            found.append(TextCall(name, None, cut_off(_END)))
            continue
        if not isinstance(value, dict):
            found.append(TextCall(name, None, "the arguments are not a {key:value} object"))
            continue
        found.append(TextCall(name, value))
    return TextDetection(tuple(found), "functiongemma") if found else None


def _value(text: str, at: int, depth: int = 0) -> tuple[Any, int]:
    """The value starting at ``at`` and where it ends."""
    if depth > 32:
        raise _UnreadableError("nested too deep")
    if text.startswith(_ESCAPE, at):
        end = text.find(_ESCAPE, at + len(_ESCAPE))
        if end == -1:
            raise _UnreadableError("an <escape> string never ends")
        return text[at + len(_ESCAPE) : end], end + len(_ESCAPE)
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
            result[key], at = _value(text, colon + 1, depth + 1)
            at = _after_item(text, at, "}")
        return result, at + 1
    if text[at] == "[":
        items = []
        at += 1
        while text[at] != "]":
            item, at = _value(text, at, depth + 1)
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


def _after_item(text: str, at: int, closing: str) -> int:
    while text[at] in " \n\t":
        at += 1
    if text[at] == ",":
        at += 1
        while text[at] in " \n\t":
            at += 1
    elif text[at] != closing:
        raise _UnreadableError(f"expected ',' or {closing!r}")
    return at


FORMATS = (TextFormat("functiongemma", calls, ("<start_function_call>",), 180),)
