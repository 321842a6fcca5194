"""Muse Glimmer: a turn is messages ``<|start|>assistant to=RECIPIENT<|message|>BODY``, each
ended by ``<|eom|>`` (more follow) or ``<|eot|>`` (the turn ends). A message ``to=self`` is
reasoning, ``to=user`` (or no recipient) the answer, and any other recipient a tool call whose
body is ``<atem:function_calls>`` holding ``<atem:invoke name="NAME">`` with
``<atem:parameter name="k">v</atem:parameter>`` (a string or scalar as written, a list or
object as JSON); parallel calls are one message each. The prompt ends with
``<|start|>assistant``, so the response begins with the rest of the first header
(`` to=NAME<|message|>``), and each later message with its own ``<|start|>assistant``. The
messages are read from the start of the text, one after another: markup inside an answer
or a reasoning message is not a call.

``<|eom|>``, ``<|eot|>`` and ``<|end_of_text|>`` are special tokens ending a message (the
last two the model's stop tokens, which servers take off): a call at the end of the text
runs without them. ``</atem:parameter>``, ``</atem:invoke>`` and ``</atem:function_calls>``
are text the model writes before them: a call without its ``</atem:invoke>`` or
``</atem:function_calls>`` was cut off (llama.cpp ``common_chat_params_init_muse_glimmer``
requires both)."""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import cut_off, parameters_closed, xml_arguments

__all__: list[str] = []  # the formats reach users through TextFormats

_HEADER = re.compile(r"(?:\s*+<\|start\|>\s*+assistant)*+\s*+(?:to=([^\s<|]++)\s*+)?+<\|message\|>")
"""A message's header at the start of the text or of a message: a reasoning message the text
step set aside leaves its ``<|start|>assistant``, so several may stand in a row."""
_END = re.compile(r"<\|eom\|>|<\|eot\|>|<\|end_of_text\|>|<\|start\|>")
_BLOCK = "<atem:function_calls>"
_BLOCK_END = "</atem:function_calls>"
_INVOKE = re.compile(r'<atem:invoke name="([^"]++)">(.*?)(</atem:invoke>|\Z)', re.DOTALL)
_PARAMETER = re.compile(r'<atem:parameter name="([^"]++)">(.*?)</atem:parameter>', re.DOTALL)
_PARAMETER_TAGS = ('<atem:parameter name="', "</atem:parameter>")
_ANSWER = frozenset({"", "user", "self"})
"""The recipients whose messages hold no call: the answer and the reasoning."""


def messages(text: str, known: Collection[str]) -> TextDetection | None:
    """The calls of each message addressed to a tool; ``None`` when the text does not begin
    with a message header."""
    calls: list[TextCall] = []
    at = 0
    while (header := _HEADER.match(text, at)) is not None:
        end = _END.search(text, header.end())
        body = text[header.end() : len(text) if end is None else end.start()]
        at = len(text) if end is None else end.start() if end.group() == "<|start|>" else end.end()
        if (header.group(1) or "") not in _ANSWER:
            calls.extend(_calls(body))
        if end is None:
            break
    return TextDetection(tuple(calls), "glimmer") if at else None


def _calls(body: str) -> list[TextCall]:
    """The calls of a message to a tool: each invoke of its ``<atem:function_calls>``."""
    opening = body.find(_BLOCK)
    if opening == -1:
        return [TextCall("?", None, f"the message to a tool holds no {_BLOCK} block")]
    closing = body.find(_BLOCK_END, opening)
    block = body[opening + len(_BLOCK) : len(body) if closing == -1 else closing]
    calls = []
    for name, inner, closed in _INVOKE.findall(block):
        if not closed:  # another parameter may have followed the last one
            calls.append(TextCall(name, None, cut_off("</atem:invoke>")))
        elif closing == -1:
            calls.append(TextCall(name, None, cut_off(_BLOCK_END)))
        elif inner.strip() and not parameters_closed(inner, _PARAMETER_TAGS):
            calls.append(TextCall(name, None, "its parameters are not each closed"))
        else:
            values, texts = xml_arguments(_PARAMETER.findall(inner))  # values as written
            calls.append(TextCall(name, values, texts=texts))
    if not calls:
        return [TextCall("?", None, f"the {_BLOCK} block holds no <atem:invoke>")]
    return calls


FORMATS = (
    TextFormat(
        "glimmer",
        messages,
        ("<|message|>", "<|start|>assistant to="),
        100,
        reasoning=(("<|start|>assistant to=self<|message|>", "<|eom|>"),),
    ),
)
