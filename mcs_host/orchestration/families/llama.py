"""Llama 3.x: calls after ``<|python_tag|>``, JSON objects or ``f(a=1)`` separated by ``;``,
up to the end-of-message token."""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import calls_from_fragment, python_calls, split_top_level

__all__: list[str] = []  # the formats reach users through TextFormats

_PYTHON_TAG = "<|python_tag|>"
_LLAMA_END = re.compile(r"<\|eom_id\|>|<\|eot_id\|>|<\|end_of_text\|>")


def python_tag(text: str, known: Collection[str]) -> TextDetection | None:
    """The calls after the first ``<|python_tag|>``."""
    body = _LLAMA_END.split(text.split(_PYTHON_TAG, 1)[1])[0].strip()
    calls: list[TextCall] = []
    for piece in split_top_level(body, ";"):
        part = piece.strip()
        if not part:
            continue
        if part.startswith("{"):
            calls.extend(calls_from_fragment(part, _PYTHON_TAG, strict_names=False))
        else:
            calls.extend(python_calls(part))
    return TextDetection(tuple(calls), "python-tag")


FORMATS = (TextFormat("python-tag", python_tag, (_PYTHON_TAG,), 120),)
