"""MiniCPM-5: ``<function name="NAME"><param name="k">v</param>...</function>``, with no tag
around the calls. A value is kept as written (JSON when it reads as JSON, its text kept for a
tool whose schema takes a string); a ``<![CDATA[...]]>`` value is the text inside, as it
is. Reasoning is ``<think>``. ``</function>`` is text the model writes before its stop
token, and another ``<param>`` may follow the last closed one: a function without it was cut
off, whatever it holds (SGLang's MiniCPM-5 detector reads a call only up to its
``</function>``).

As vLLM's MiniCPM-5 parser tests write them, and read here the same: a tag whose space the
tokenizer left as ``Ġ`` (U+0120, ``<functionĠname="...">``) or dropped
(``<paramname="...">``), and a function whose one parameter, ``properties`` or
``arguments``, holds the arguments as an object, not empty (Python's quotes included). Not
read the same: a ``Ġ`` inside a value stays (a value is the model's text), a parameter the
tool does not take is kept (the tool's schema then refuses the call; vLLM's parser drops
it), and a tool name is never mapped to another tool."""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import (
    arguments_of,
    cut_off,
    xml_arguments,
)

__all__: list[str] = []  # the formats reach users through TextFormats

_OPENING = re.compile(r'<function\s++name="([^"<>]+)"\s*+>')
_CLOSE = "</function>"
_PARAM = re.compile(
    r'\s*+<param\s++name="([^"<>]+)"\s*+>(<!\[CDATA\[.*?\]\]>(?=</param>)|.*?)</param>\s*+',
    re.DOTALL,
)
"""One parameter: a CDATA value runs to the ``]]>`` right before ``</param>``, so that the
text it holds may be anything, ``</param>`` too."""
_CDATA = ("<![CDATA[", "]]>")
_TOKENIZER_SPACE = "\u0120"  # Ġ: a byte-level tokenizer's space, left in by its decoder
_LOOSE_TAG = re.compile(r"<(function|param)(?:\u0120++|(?=name=))")
"""A tag's head with its space written as ``Ġ`` or left out."""
_WRAPPERS = ("properties", "arguments")


def tool_calls(text: str, known: Collection[str]) -> TextDetection | None:
    """Each ``<function name=...>``, its body running to ``</function>``, the next function
    or the end of the text; ``None`` when none holds parameters or ends (the tag only
    mentioned in prose). One pass over the openings, the closing tag searched for again
    only once passed: the text is read once."""
    if _TOKENIZER_SPACE in text or "<functionname=" in text or "<paramname=" in text:
        text = _LOOSE_TAG.sub(r"<\1 ", text)  # the tags' heads only: values stay as written
    calls = []
    openings = list(_OPENING.finditer(text))
    close = text.find(_CLOSE)
    for index, opening in enumerate(openings):
        start = opening.end()
        if close != -1 and close < start:
            close = text.find(_CLOSE, start)
        following = openings[index + 1].start() if index + 1 < len(openings) else len(text)
        closed = close != -1 and close < following
        body = text[start : close if closed else following]
        stripped = body.strip()
        name = opening.group(1)
        if stripped and not stripped.startswith("<param"):
            continue  # '<function name="x"> tags ...': the tag only mentioned
        if not closed:  # cut off, or the next function began before this one ended
            calls.append(TextCall(name, None, cut_off(_CLOSE)))
            continue
        pairs = _params(body)
        if stripped and pairs is None:
            calls.append(TextCall(name, None, "the function holds more than <param> tags"))
            continue
        calls.append(_call(name, pairs or []))
    return TextDetection(tuple(calls), "minicpm5") if calls else None


def _params(body: str) -> list[tuple[str, str]] | None:
    """The ``(name, value)`` of each parameter when ``body`` is parameters and nothing else,
    each closed; else ``None``."""
    pairs: list[tuple[str, str]] = []
    at = 0
    while at < len(body):
        found = _PARAM.match(body, at)
        if found is None:
            return None if body[at:].strip() or not pairs else pairs
        pairs.append((found.group(1), found.group(2)))
        at = found.end()
    return pairs or None


def _call(name: str, pairs: list[tuple[str, str]]) -> TextCall:
    """The call of one function from its parameters."""
    keys: dict[str, None] = {}  # in the order written
    for key, _ in pairs:
        if key in keys:
            return TextCall(name, None, f"the parameter {key!r} is given twice")
        keys[key] = None
    plain = [(key, value) for key, value in pairs if not _is_cdata(value)]
    arguments, texts = xml_arguments(plain)
    for key, value in pairs:
        if _is_cdata(value):
            arguments[key] = value[len(_CDATA[0]) : -len(_CDATA[1])]
    arguments = {key: arguments[key] for key in keys}
    if len(pairs) == 1 and pairs[0][0] in _WRAPPERS and not _is_cdata(pairs[0][1]):
        wrapped, problem, healed = arguments_of(pairs[0][1])
        if wrapped and problem is None:  # <param name="properties">{...}</param>
            return TextCall(name, wrapped, healed=healed)
    return TextCall(name, arguments, texts=texts)


def _is_cdata(value: str) -> bool:
    return value.startswith(_CDATA[0]) and value.endswith(_CDATA[1])


FORMATS = (TextFormat("minicpm5", tool_calls, ("<function",), 112),)
