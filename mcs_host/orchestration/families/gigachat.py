"""GigaChat 3 and 3.1: one JSON call after ``function call<|role_sep|>`` (3) or
``<|function_call|>`` (3.1), perhaps followed by ``</s>``; without it, the call runs when
its JSON is whole as written, else it was cut off. GigaChat 3 ends the text before a call
with ``<|message_sep|>`` (vLLM's parser shows only what precedes it): a marker, so a stream
shows neither it nor the call's header."""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextDetection, TextFormat
from mcs_host.orchestration.scanning import calls_from_fragment, ended, whole_json

__all__: list[str] = []  # the formats reach users through TextFormats

_START = re.compile(r"function call<\|role_sep\|>\s*|<\|function_call\|>\s*")


def function_call(text: str, known: Collection[str]) -> TextDetection | None:
    start = _START.search(text)
    if start is None:
        return None
    rest = text[start.end() :].rstrip()
    body = rest.removesuffix("</s>").strip()
    if not body.startswith("{"):
        return None
    calls = calls_from_fragment(body, "function call", bare_names=False)
    if not rest.endswith("</s>"):
        calls = ended(calls, whole_json(body), "</s>")
    return TextDetection(tuple(calls), "gigachat")


FORMATS = (
    TextFormat(
        "gigachat",
        function_call,
        ("function call<|role_sep|>", "<|message_sep|>", "<|function_call|>"),
        220,
    ),
)
