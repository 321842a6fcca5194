"""LFM2: ``<|tool_call_start|>[f(a=1), ...]<|tool_call_end|>`` (a pythonic list, or a JSON
array of calls); prose often follows the end tag. In a closed block, the calls before one
that does not read run, and that one is reported. A list at the end of the text without
``<|tool_call_end|>`` runs when it reads whole as written."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import replace

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import calls_from_fragment, ended, python_calls, whole_json

__all__: list[str] = []  # the formats reach users through TextFormats

_FIRST_NAME = re.compile(r"\[\s*([A-Za-z_][\w.]*)\s*\(")
_BLOCK = re.compile(r"<\|tool_call_start\|>(.*?)(<\|tool_call_end\|>|\Z)", re.DOTALL)


def tool_call_blocks(text: str, known: Collection[str]) -> TextDetection | None:
    calls: list[TextCall] = []
    for body, closing in _BLOCK.findall(text):
        stripped = body.strip()
        if stripped[:1] not in ("[", "{"):
            continue  # the tag only mentioned
        if stripped[:2] == "[{" or stripped[:1] == "{":
            found = calls_from_fragment(stripped, "<|tool_call_start|>")
            whole = whole_json(stripped)
        else:
            found = list(python_calls(stripped, siblings=bool(closing)))
            whole = all(call.name != "?" for call in found)  # "?": the list does not parse
        if not closing:  # at the end of the text
            found = ended(found, whole, "<|tool_call_end|>")
            if not whole and found and found[0].name == "?":  # a pythonic list cut off
                named = _FIRST_NAME.match(stripped)
                found[0] = replace(found[0], name=named.group(1) if named else "?")
        calls.extend(found)
    return TextDetection(tuple(calls), "lfm2") if calls else None


FORMATS = (TextFormat("lfm2", tool_call_blocks, ("<|tool_call_start|>",), 170),)
