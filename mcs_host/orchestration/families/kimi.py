"""Kimi K2: ``<|tool_calls_section_begin|>`` ... ``<|tool_calls_section_end|>``, each call
``<|tool_call_begin|>functions.NAME:INDEX<|tool_call_argument_begin|>{json}<|tool_call_end|>``
(the id is kept as the call's id). Reasoning (K2-Thinking) is ``<think>``. A call at the end
of the text without ``<|tool_call_end|>`` runs when its JSON parses as written."""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import call_with_arguments, cut_off, whole_json

__all__: list[str] = []  # the formats reach users through TextFormats

_SECTION = re.compile(r"<\|tool_calls?_section_begin\|>")
_CALL = re.compile(
    r"<\|tool_call_begin\|>([^<]*+)<\|tool_call_argument_begin\|>(.*?)(<\|tool_call_end\|>|\Z)",
    re.DOTALL,
)
_ID = re.compile(r"\s*+(?:functions\.)?([\w.\-]+):(\d+)\s*+")
"""A call's id, read on its own: a run of whitespace around it is read once."""


def tool_calls(text: str, known: Collection[str]) -> TextDetection | None:
    """The calls in the sections; a call whose id is not ``[functions.]NAME:N`` is left out,
    as Kimi's own parsers leave it."""
    section = _SECTION.search(text)
    if section is None:
        return None
    calls = []
    for id_text, body, closing in _CALL.findall(text, section.end()):
        read = _ID.fullmatch(id_text)
        if read is None:
            continue
        name, index = read.groups()
        call_id = f"functions.{name}:{index}"
        if not closing and not whole_json(body.strip()):  # at the end of the text: cut off
            calls.append(TextCall(name, None, cut_off("<|tool_call_end|>"), id=call_id))
            continue
        found = call_with_arguments(name, body.strip())
        calls.append(TextCall(found.name, found.arguments, found.problem, found.healed, call_id))
    return TextDetection(tuple(calls), "kimi-k2")


FORMATS = (TextFormat("kimi-k2", tool_calls, ("_section_begin|>",), 140),)
