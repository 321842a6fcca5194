"""MiniMax, Jamba and Hunyuan:

- MiniMax-M2: ``<minimax:tool_call>`` with ``<invoke name="...">`` and
  ``<parameter name="k">v</parameter>`` children;
- ``<tool_calls>`` ... ``</tool_calls>`` holding a JSON array (Jamba, Hunyuan A13B) or one
  JSON call per line (MiniMax-M1).

MiniMax-M2 writes a value right after ``<parameter name="k">``: it is kept as written. At the
end of the text, an invoke or block whose closing tag never came runs when it is whole as
written (parameters all closed, JSON that parses as it is); otherwise it was cut off.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.healing import OPEN_INVOKE
from mcs_host.orchestration.scanning import (
    calls_from_fragment,
    cut_off,
    ended,
    parameters_closed,
    whole_json,
    xml_arguments,
)

__all__: list[str] = []  # the formats reach users through TextFormats

_INVOKE = re.compile(r'<invoke name="([^"]+)">(.*?)(</invoke>|\Z)', re.DOTALL)
_PARAMETER = re.compile(r'<parameter name="([^"]+)">(.*?)(?:</parameter>|\Z)', re.DOTALL)
_BLOCK = re.compile(r"<tool_calls>(.*?)(</tool_calls>|\Z)", re.DOTALL)


def invokes(text: str, known: Collection[str]) -> TextDetection | None:
    """Each ``<invoke>`` after ``<minimax:tool_call>``."""
    start = text.find("<minimax:tool_call>")
    calls = []
    for name, body, closing in _INVOKE.findall(text, start):
        if not closing and not parameters_closed(body, ("<parameter name=", "</parameter>")):
            calls.append(TextCall(name, None, cut_off("</invoke>")))
            continue
        arguments, texts = xml_arguments(_PARAMETER.findall(body))
        healed = () if closing else (OPEN_INVOKE,)
        calls.append(TextCall(name, arguments, healed=healed, texts=texts))
    return TextDetection(tuple(calls), "minimax-m2") if calls else None


def tool_calls_block(text: str, known: Collection[str]) -> TextDetection | None:
    """Each ``<tool_calls>`` block: a JSON array, or one JSON call per line."""
    calls: list[TextCall] = []
    for body, closing in _BLOCK.findall(text):
        stripped = body.strip()
        if not stripped:
            continue
        lines = [] if stripped[0] == "[" else [line.strip() for line in stripped.splitlines()]
        if stripped[0] == "[":
            found = calls_from_fragment(stripped, "<tool_calls>", bare_names=False)
        else:
            found = [
                call
                for line in lines
                if line.startswith("{")
                for call in calls_from_fragment(line, "<tool_calls>", bare_names=False)
            ]
        if not closing:  # at the end of the text: whole when each line (or the array) is
            whole = (
                all(whole_json(line) for line in lines if line) if lines else whole_json(stripped)
            )
            found = ended(found, whole, "</tool_calls>")
        calls.extend(found)
    return TextDetection(tuple(calls), "tool_calls-tag") if calls else None


FORMATS = (
    TextFormat("minimax-m2", invokes, ("<minimax:tool_call>",), 150),
    TextFormat("tool_calls-tag", tool_calls_block, ("<tool_calls>",), 160),
)
