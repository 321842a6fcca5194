"""The line protocol ``@tool name {json}``: one call per line, the JSON may run on."""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import call_with_arguments, first_value

__all__: list[str] = []  # the formats reach users through TextFormats

_DSL = re.compile(r"^[ \t]*@tool[ \t]+([^\s{]+)[ \t]*(.*)$", re.MULTILINE)


def tool_lines(text: str, known: Collection[str]) -> TextDetection | None:
    """Every line that starts with ``@tool``; ``None`` when none does."""
    calls = []
    lines = list(_DSL.finditer(text))
    if not lines:
        return None
    ends = [following.start() for following in lines[1:]] + [len(text)]
    for match, end in zip(lines, ends, strict=True):
        if not match.group(2).strip():
            calls.append(TextCall(match.group(1), {}))
            continue
        # the JSON may run over the following lines, up to the next call
        rest = text[match.start(2) : end].strip()
        calls.append(call_with_arguments(match.group(1), first_value(rest)))
    return TextDetection(tuple(calls), "dsl") if calls else None


FORMATS = (TextFormat("dsl", tool_lines, ("@tool",), 400),)
