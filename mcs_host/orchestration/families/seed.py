"""Seed-OSS: ``<seed:tool_call>`` around Qwen3-Coder's ``<function=...><parameter=...>``
(values as Qwen3-Coder's: the one newline on each side taken off); reasoning in
``<seed:think>`` holds no call, even one written out in full. Every closing tag is text the
model writes before its stop token ``<seed:eos>``: at the end of the text, a function without
``</function>`` was cut off (another parameter may have followed), and the functions that
closed run without the ``</seed:tool_call>`` after them."""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.families.hermes import xml_functions
from mcs_host.orchestration.scanning import ended

__all__: list[str] = []  # the formats reach users through TextFormats

_BLOCK = re.compile(r"<seed:tool_call>(.*?)(</seed:tool_call>|\Z)", re.DOTALL)


def tool_calls(text: str, known: Collection[str]) -> TextDetection | None:
    calls: list[TextCall] = []
    for body, closing in _BLOCK.findall(text):
        found = list(xml_functions(body))
        if not closing:  # at the end of the text
            whole = body.rstrip().endswith(("</function>", "</parameter>"))  # nothing after
            found = ended(found, whole, "</seed:tool_call>")
        calls.extend(found)
    return TextDetection(tuple(calls), "seed-oss") if calls else None


FORMATS = (
    TextFormat(
        "seed-oss",
        tool_calls,
        ("<seed:tool_call>",),
        105,
        reasoning=(("<seed:think>", "</seed:think>"),),
    ),
)
