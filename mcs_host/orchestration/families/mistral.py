"""Mistral: ``[TOOL_CALLS]`` then a JSON array (before tokenizer v11) or
``name[ARGS]{...}`` (v11), with an optional ``[CALL_ID]``."""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import call_with_arguments, calls_from_fragment

__all__: list[str] = []  # the formats reach users through TextFormats

_MISTRAL_NAMED = re.compile(
    r"\[TOOL_CALLS\]\s*([A-Za-z0-9_.\-]+)\s*(?:\[CALL_ID\]\s*([A-Za-z0-9]+)\s*)?\[ARGS\]"
)


def tool_calls(text: str, known: Collection[str]) -> TextDetection | None:
    """Every ``[TOOL_CALLS]`` in ``text``."""
    calls: list[TextCall] = []
    named = list(_MISTRAL_NAMED.finditer(text))
    if named:
        for index, match in enumerate(named):
            end = named[index + 1].start() if index + 1 < len(named) else len(text)
            body = text[match.end() : end].strip()
            call = call_with_arguments(match.group(1), body)
            calls.append(
                TextCall(call.name, call.arguments, call.problem, call.healed, match.group(2))
            )
        return TextDetection(tuple(calls), "mistral")
    for chunk in text.split("[TOOL_CALLS]")[1:]:
        calls.extend(calls_from_fragment(chunk.strip(), "[TOOL_CALLS]", strict_names=False))
    return TextDetection(tuple(calls), "mistral")


FORMATS = (TextFormat("mistral", tool_calls, ("[TOOL_CALLS]",), 200),)
