"""InternLM2 and Intern-S1: ``<|action_start|><|plugin|>`` (a space may separate the two
tokens) then a JSON call, up to ``<|action_end|>`` (at the end of the text, the call runs
without it when its JSON parses as written)."""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import calls_from_fragment, ended, whole_json

__all__: list[str] = []  # the formats reach users through TextFormats

_ACTION = re.compile(r"<\|action_start\|>\s*<\|plugin\|>(.*?)(<\|action_end\|>|\Z)", re.DOTALL)


def actions(text: str, known: Collection[str]) -> TextDetection | None:
    calls: list[TextCall] = []
    for body, closing in _ACTION.findall(text):
        stripped = body.strip()
        if not stripped.startswith("{"):
            continue
        found = calls_from_fragment(stripped, "<|plugin|>")
        if not closing:  # at the end of the text
            found = ended(found, whole_json(stripped), "<|action_end|>")
        calls.extend(found)
    return TextDetection(tuple(calls), "internlm") if calls else None


FORMATS = (TextFormat("internlm", actions, ("<|action_start|>",), 200),)
