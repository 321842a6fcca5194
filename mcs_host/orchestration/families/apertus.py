"""Apertus: ``<|tools_prefix|>[{"NAME": {arguments}}, ...]<|tools_suffix|>``, a JSON array
of objects with one key each, the tool's name. Reasoning is ``<|inner_prefix|>`` ...
``<|inner_suffix|>``. A block at the end of the text without ``<|tools_suffix|>`` runs when
its JSON parses as written; otherwise it was cut off."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.healing import Unhealable, heal
from mcs_host.orchestration.scanning import (
    NAME_KEYS,
    arguments_of,
    ended,
    first_value,
    problem_text,
    protocol_call,
    whole_json,
)

__all__: list[str] = []  # the formats reach users through TextFormats

_PREFIX, _SUFFIX = "<|tools_prefix|>", "<|tools_suffix|>"
_FIRST_KEY = re.compile(r'\[?\s*+\{\s*+"([\w.\-]+)"\s*+:')
"""The name of a block's first call, read where its JSON cannot be."""


def tool_calls(text: str, known: Collection[str]) -> TextDetection | None:
    """The calls of every block; ``None`` when no block begins. Substring searches from
    token to token: the text is read once."""
    at = text.find(_PREFIX)
    if at == -1:
        return None
    calls: list[TextCall] = []
    while at != -1:
        start = at + len(_PREFIX)
        end = text.find(_SUFFIX, start)
        body = text[start : len(text) if end == -1 else end].strip()
        found = _block(body, known)
        if end == -1:  # at the end of the text
            calls.extend(ended(found, whole_json(body), _SUFFIX))
            break
        calls.extend(found)
        at = text.find(_PREFIX, end + len(_SUFFIX))
    return TextDetection(tuple(calls), "apertus") if calls else None


def _block(body: str, known: Collection[str]) -> list[TextCall]:
    """The calls of one block's JSON array; none when it holds no JSON (the token only
    mentioned in prose)."""
    if body[:1] not in ("[", "{"):
        return []
    try:
        value, notes = heal(first_value(body))
    except Unhealable as exc:
        named = _FIRST_KEY.match(body)
        return [TextCall(named.group(1) if named else "?", None, problem_text(exc))]
    calls = []
    for item in value if isinstance(value, list) else [value]:
        call = _call(item, known, notes)
        if call is not None:
            calls.append(call)
    return calls


def _call(item: Any, known: Collection[str], notes: tuple[str, ...]) -> TextCall | None:
    """``{"NAME": {arguments}}`` (or the JSON protocol's form) as a call; ``None`` for an
    object that only names a tool."""
    if not isinstance(item, Mapping) or not item:
        return TextCall("?", None, f"{_PREFIX} holds something that is not a call")
    call = protocol_call(item, known, notes)
    if call is not None:
        return call
    if len(item) != 1:
        if any(isinstance(item.get(key), str) for key in NAME_KEYS):
            return None  # {"name": "x", ...} without arguments: no call
        return TextCall("?", None, f"{_PREFIX} holds something that is not a call")
    ((name, raw),) = item.items()
    if name in NAME_KEYS and isinstance(raw, str):
        return None
    arguments, problem, more = arguments_of(raw)
    return TextCall(name, arguments, problem, notes + more)


FORMATS = (
    TextFormat(
        "apertus",
        tool_calls,
        (_PREFIX,),
        185,
        reasoning=(("<|inner_prefix|>", "<|inner_suffix|>"),),
    ),
)
