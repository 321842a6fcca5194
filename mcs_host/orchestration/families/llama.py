"""Llama 3.x and 4: calls after each ``<|python_tag|>`` (JSON objects or ``f(a=1)``,
separated by ``;``, up to the end-of-message token), and Llama 4's
``<|python_start|>[f(a=1), ...]<|python_end|>``. ``<|eom_id|>`` is a stop token servers take
off: calls that run to the end of the text run when each is whole as written; otherwise they
were cut off. Llama 4's ``<|python_end|>`` is text the model writes, after a list that closes
itself: a list at the end of the text without it runs when it reads whole, and was cut off
when it does not."""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import (
    calls_from_fragment,
    ended,
    python_calls,
    split_top_level,
    whole_json,
)

__all__: list[str] = []  # the formats reach users through TextFormats

_PYTHON_TAG = "<|python_tag|>"
_LLAMA_END = re.compile(r"<\|eom_id\|>|<\|eot_id\|>|<\|end_of_text\|>")
_CALL_START = re.compile(r"[A-Za-z_][\w.]*\s*\(")
_PYTHON_BLOCK = re.compile(r"<\|python_start\|>(.*?)(<\|python_end\|>|\Z)", re.DOTALL)


def python_tag(text: str, known: Collection[str]) -> TextDetection | None:
    """The calls after every ``<|python_tag|>``."""
    calls: list[TextCall] = []
    chunks = text.split(_PYTHON_TAG)[1:]
    for index, chunk in enumerate(chunks):
        pieces = _LLAMA_END.split(chunk, 1)
        body = pieces[0].strip()
        found: list[TextCall] = []
        whole = True
        for piece in split_top_level(body, ";"):
            part = piece.strip()
            if not part:
                continue
            if part.startswith("{"):
                found.extend(calls_from_fragment(part, _PYTHON_TAG))
                whole = whole and whole_json(part)
            elif _CALL_START.match(part):
                found.extend(python_calls(part))
        if len(pieces) == 1 and index == len(chunks) - 1:  # runs to the end of the text
            found = ended(found, whole, "<|eom_id|>")
        calls.extend(found)
    return TextDetection(tuple(calls), "python-tag") if calls else None


def python_block(text: str, known: Collection[str]) -> TextDetection | None:
    """Llama 4: each ``<|python_start|>`` block's call list."""
    calls: list[TextCall] = []
    for body, closing in _PYTHON_BLOCK.findall(text):
        if body.strip():
            found = list(python_calls(body.strip()))
            if not closing:  # at the end of the text: "?" means the list does not parse
                found = ended(found, all(call.name != "?" for call in found), "<|python_end|>")
            calls.extend(found)
    return TextDetection(tuple(calls), "python-start") if calls else None


FORMATS = (
    TextFormat("python-tag", python_tag, (_PYTHON_TAG,), 120),
    TextFormat("python-start", python_block, ("<|python_start|>",), 121),
)
