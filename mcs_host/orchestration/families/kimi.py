"""Kimi K2: ``<|tool_calls_section_begin|>`` ... ``<|tool_calls_section_end|>``, each call
``<|tool_call_begin|>functions.NAME:INDEX<|tool_call_argument_begin|>{json}<|tool_call_end|>``
(the id is kept as the call's id). An id that is a bare counter ``INDEX`` names no tool: the
call is to the one tool on offer. Reasoning (K2-Thinking) is ``<think>``. A call at the end
of the text without ``<|tool_call_end|>`` (text the model writes before ``<|im_end|>``) runs
when its JSON parses as written: its last brace ends its arguments. The section's markers
may be missing too (llama.cpp's Kimi-K2-Thinking test): then each call from the first
``<|tool_call_begin|>`` counts whose id names its tool, under the same rule.

Kimi K3 (XTML): a ``<|open|>tools<|sep|>`` channel, each call ``<|open|>call tool="NAME"
index="N"<|sep|>`` ... ``<|close|>call<|sep|>`` holding ``<|open|>argument key="k"
type="T"<|sep|>v<|close|>argument<|sep|>`` (a ``string`` as written, any other type JSON);
attribute values escape ``"`` and ``&``. Its reasoning is ``<|open|>think<|sep|>`` ...
``<|close|>think<|sep|>``. Every ``<|close|>...<|sep|>`` is text the model writes before its
stop token ``<|end_of_msg|>``, and another argument may follow the last closed one: a call
at the end of the text without ``<|close|>call<|sep|>`` was cut off, whatever it holds; the
calls that closed run without the ``<|close|>tools<|sep|>`` after them."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import (
    call_with_arguments,
    cut_off,
    whole_json,
    xml_value,
)

__all__: list[str] = []  # the formats reach users through TextFormats

_SECTION = re.compile(r"<\|tool_calls?_section_begin\|>")
_CALL = re.compile(
    r"<\|tool_call_begin\|>([^<]*+)<\|tool_call_argument_begin\|>(.*?)(<\|tool_call_end\|>|\Z)",
    re.DOTALL,
)
_ID = re.compile(r"\s*+(?:(?:functions\.)?([\w.\-]+):)?(\d+)\s*+")
"""A call's id, read on its own: a run of whitespace around it is read once."""


def tool_calls(text: str, known: Collection[str]) -> TextDetection | None:
    """The calls in the sections (or, with none, from a first call token); a call whose id
    is neither ``[functions.]NAME:N`` nor a bare counter ``N`` is left out, as Kimi's own
    parsers leave it. A bare counter names no tool: the call is to the one tool on offer, and
    with more than one (or none) it fails; outside a section it is no call."""
    section = _SECTION.search(text)
    bare = section is None
    # no section: from a first call token, if any (llama.cpp's test writes it so)
    start = text.find("<|tool_call_begin|>") if section is None else section.end()
    if start == -1:
        return None
    calls = []
    for id_text, body, closing in _CALL.findall(text, start):
        read = _ID.fullmatch(id_text)
        if read is None:
            continue
        name, index = read.groups()
        if bare and name is None:
            continue  # outside a section, only a call that names its tool counts
        if name is None:  # a bare counter
            if len(known) != 1:
                calls.append(TextCall("?", None, _unnamed(index, known)))
                continue
            (name,) = known
        call_id = f"functions.{name}:{index}"
        if not closing and not whole_json(body.strip()):  # at the end of the text: cut off
            calls.append(TextCall(name, None, cut_off("<|tool_call_end|>"), id=call_id))
            continue
        found = call_with_arguments(name, body.strip())
        calls.append(TextCall(found.name, found.arguments, found.problem, found.healed, call_id))
    if bare and not calls:
        return None
    return TextDetection(tuple(calls), "kimi-k2")


def _unnamed(index: str, known: Collection[str]) -> str:
    """The problem of a call whose id is the bare counter ``index`` while the tool on offer
    is not one."""
    offered = "no tool is on offer" if not known else f"{len(known)} tools are on offer"
    return f"the call's id {index!r} names no tool and {offered}: give it as functions.NAME:{index}"


_K3_TOOLS = "<|open|>tools<|sep|>"
_K3_CALL = re.compile(
    r"<\|open\|>call\s++([^<]*+)<\|sep\|>(.*?)(<\|close\|>call<\|sep\|>|\Z)", re.DOTALL
)
_K3_ARGUMENT = re.compile(
    r"<\|open\|>argument\s++([^<]*+)<\|sep\|>(.*?)(<\|close\|>argument<\|sep\|>|\Z)",
    re.DOTALL,
)
_K3_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')


def k3_tool_calls(text: str, known: Collection[str]) -> TextDetection | None:
    """Kimi K3's calls in its ``tools`` channel; ``None`` when the channel holds none (the
    channel only mentioned)."""
    start = text.find(_K3_TOOLS)
    if start == -1:
        return None
    calls = []
    for attributes, body, closing in _K3_CALL.findall(text, start):
        name = _attributes(attributes).get("tool", "")
        if not name:
            continue
        if not closing:  # another argument may have followed the last one
            calls.append(TextCall(name, None, cut_off("<|close|>call<|sep|>")))
            continue
        arguments: dict[str, Any] = {}
        problem = None
        for argument, value, ends in _K3_ARGUMENT.findall(body):
            if not ends:
                problem = cut_off("<|close|>argument<|sep|>")
            read = _attributes(argument)
            key = read.get("key", "")
            arguments[key] = value if read.get("type", "string") == "string" else xml_value(value)
        calls.append(TextCall(name, None if problem else arguments, problem))
    return TextDetection(tuple(calls), "kimi-k3") if calls else None


def _attributes(text: str) -> dict[str, str]:
    """``key="value"`` pairs, their values unescaped (``&quot;`` then ``&amp;``)."""
    return {
        key: value.replace("&quot;", '"').replace("&amp;", "&")
        for key, value in _K3_ATTRIBUTE.findall(text)
    }


FORMATS = (
    TextFormat("kimi-k2", tool_calls, ("_section_begin|>", "<|tool_call_begin|>"), 140),
    TextFormat(
        "kimi-k3",
        k3_tool_calls,
        (_K3_TOOLS,),
        141,
        reasoning=(("<|open|>think<|sep|>", "<|close|>think<|sep|>"),),
    ),
)
