"""LFM2: ``<|tool_call_start|>[f(a=1), ...]<|tool_call_end|>`` (a pythonic list, or a JSON
array of calls); prose often follows the end tag."""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import calls_from_fragment, cut_off, python_calls

__all__: list[str] = []  # the formats reach users through TextFormats

_BLOCK = re.compile(r"<\|tool_call_start\|>(.*?)(<\|tool_call_end\|>|\Z)", re.DOTALL)


def tool_call_blocks(text: str, known: Collection[str]) -> TextDetection | None:
    calls: list[TextCall] = []
    for body, closing in _BLOCK.findall(text):
        stripped = body.strip()
        if stripped[:1] not in ("[", "{"):
            continue  # the tag only mentioned
        if stripped[:2] == "[{" or stripped[:1] == "{":
            found = calls_from_fragment(stripped, "<|tool_call_start|>")
        else:
            found = list(python_calls(stripped))
        if not closing:
            found = [
                c if c.problem else TextCall(c.name, None, cut_off("<|tool_call_end|>"))
                for c in found
            ]
        calls.extend(found)
    return TextDetection(tuple(calls), "lfm2") if calls else None


FORMATS = (TextFormat("lfm2", tool_call_blocks, ("<|tool_call_start|>",), 170),)
