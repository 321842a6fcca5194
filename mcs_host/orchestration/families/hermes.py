"""Hermes, Qwen, GLM and Granite 4: ``<tool_call>`` tags, each holding a JSON call (Hermes,
Qwen 2.5/3, Granite 4), Qwen3-Coder's XML (``<function=name><parameter=key>value``) or GLM
4.5-4.7's ``name<arg_key>key</arg_key><arg_value>value</arg_value>``; and Qwen3-Coder's
``<function=...>`` without the tag. A tag that never closes runs to the end of the text. A
JSON call there runs when it is whole as written: its last brace ends its arguments, and the
model may stop (EOS) right after it. XML parameters do not end themselves, and every closing
tag here is text the model writes before its stop token (Qwen's ``<|im_end|>``, GLM's
``<|observation|>``): a Qwen3-Coder function without ``</function>``, or a GLM call without
``</tool_call>``, was cut off, whatever it holds (another parameter may have followed the
last one). A function that closed runs without the ``</tool_call>`` after it. Qwen's
template writes a newline after ``<parameter=k>`` and before ``</parameter>``: that one is
taken off each side, the rest of the value kept as written; GLM writes its values without
one. GLM-4.6/4.7 may write an array or object as a JSON string (``"[\\"a\\"]"``), or as its
inside with the quotes still escaped (``[{\\"id\\": 1}]``): it is read as what it holds, and
its string kept for a tool whose schema takes a string. Hermes 2 Pro may also write
``<function name="NAME">{json}</function>`` (llama.cpp reads it as a call)."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from typing import Any

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import (
    call_with_arguments,
    calls_from_fragment,
    cut_off,
    ended,
    whole_json,
    xml_arguments,
    xml_value,
)

__all__: list[str] = []  # the formats reach users through TextFormats

_TOOL_CALL_TAG = re.compile(r"<tool_call>(.*?)(</tool_call>|\Z)", re.DOTALL)
_FUNCTION_TAG = re.compile(
    r'<function(?:=([^>\s]+)|\s++name="([^"<>]+)"\s*+)>(.*?)(</function>|\Z)', re.DOTALL
)
"""``<function=NAME>``, or Hermes 2 Pro's ``<function name="NAME">`` (group 2)."""
# a value ends at its closing tag, or where the next parameter or the function begins
_PARAMETER_TAG = re.compile(
    r"<parameter=([^>\s]+)>(.*?)(?:</parameter>|(?=<parameter=)|(?=</function>)|\Z)", re.DOTALL
)
_GLM_GAP = r"(?:\s|\\n)*+"
"""Between GLM's tags: whitespace, or a literal backslash-n (a raw string's ``\\n``, as
SGLang's GLM-4.7 test writes it), which no name or tag holds."""
_GLM_NAME = re.compile(rf"{_GLM_GAP}([A-Za-z_][\w.\-]*){_GLM_GAP}(?=<arg_key>|\Z)")
_GLM_BETWEEN = re.compile(_GLM_GAP)
_GLM_KEY, _GLM_VALUE = ("<arg_key>", "</arg_key>"), ("<arg_value>", "</arg_value>")


def tool_call_tags(text: str, known: Collection[str]) -> TextDetection | None:
    """Each ``<tool_call>``: a JSON call, XML functions or a GLM call; ``None`` when the tag
    is only mentioned. XML functions closed by a ``</tool_call>`` before the first
    ``<tool_call>`` count too: the model left out the first call's opening tag (llama.cpp's
    Qwen3-Coder test), and each function says itself whether it closed."""
    calls: list[TextCall] = []
    first = text.find("<tool_call>")
    stray = text.find("</tool_call>", 0, first) if first != -1 else -1
    if stray != -1 and "<function=" in text[:stray]:  # the first call's tag left out
        calls.extend(xml_functions(text[:stray]))
    for body, closing in _TOOL_CALL_TAG.findall(text):
        if "<function=" in body:
            found = list(xml_functions(body))
        elif body.lstrip()[:1] in ("{", "["):
            found = calls_from_fragment(body.strip(), "<tool_call>")
        else:
            found = _glm(body, known)
        if not closing:  # at the end of the text
            found = ended(found, _whole(body), "</tool_call>")
        calls.extend(found)
    return TextDetection(tuple(calls), "tool_call-tag") if calls else None


def _whole(body: str) -> bool:
    """Whether a ``<tool_call>`` body that runs to the end of the text is complete as
    written: JSON that parses as it is, or XML functions with nothing begun after the last
    (each of which says itself whether it closed). A GLM call never is: its end is the
    ``</tool_call>`` that never came."""
    stripped = body.strip()
    if "<function=" in body:
        return stripped.endswith(("</function>", "</parameter>", "}"))  # nothing begun after
    return stripped[:1] in ("{", "[") and whole_json(stripped)


def function_tags(text: str, known: Collection[str]) -> TextDetection | None:
    """``<function=name>`` tags (and ``<function name="name">`` ones with a JSON body)
    without the ``<tool_call>`` around them."""
    calls = tuple(xml_functions(text))
    return TextDetection(calls, "function-tag") if calls else None


def xml_functions(text: str) -> Iterator[TextCall]:
    """``<function=name>`` with a JSON body (Llama) or ``<parameter=..>`` children (Qwen), and
    ``<function name="name">`` with a JSON body (Hermes 2 Pro, as llama.cpp reads it).
    Parameters without ``</function>`` were cut off: the closing tag is text the model
    writes, and another parameter may have followed the last one."""
    for equals, attribute, body, closing in _FUNCTION_TAG.findall(text):
        stripped = body.strip()
        if attribute and not stripped.startswith("{"):
            continue  # a JSON body only: MiniCPM-5's <param> tags are its own format's
        if stripped[:1] not in ("", "<", "{"):
            continue  # "<function=name> syntax ...": the tag only mentioned
        name = equals or attribute
        if "<parameter=" in body:
            if not closing:
                yield TextCall(name, None, cut_off("</function>"))
                continue
            arguments, texts = xml_arguments(
                (key, _as_written(value)) for key, value in _PARAMETER_TAG.findall(body)
            )
            yield TextCall(name, arguments, texts=texts)
        elif not closing:  # a JSON body runs when it is whole as written
            call = call_with_arguments(name, stripped)
            yield ended([call], whole_json(stripped), "</function>")[0]
        else:
            yield call_with_arguments(name, stripped) if stripped else TextCall(name, {})


def _as_written(value: str) -> str:
    """A parameter's text without the newline the format puts on each side and, when the
    whole block is indented (``\\n    v\\n    </parameter>``, SGLang's Qwen3-Coder streaming
    test), without that indentation: the ``</parameter>`` line's, which every line of the
    value then starts with."""
    indent = value[value.rfind("\n") + 1 :] if value.startswith("\n") else ""
    if not indent or indent.strip(" \t") or value.count("\n") < 2:
        return _one_newline_off(value)
    lines = value[1 : -len(indent) - 1].split("\n")
    if not all(line.startswith(indent) or not line.strip() for line in lines):
        return _one_newline_off(value)
    return "\n".join(line.removeprefix(indent) for line in lines)


def _one_newline_off(value: str) -> str:
    """A parameter's text without the one newline the format puts on each side."""
    value = value[1:] if value.startswith("\n") else value
    return value[:-1] if value.endswith("\n") else value


def _glm(body: str, known: Collection[str]) -> list[TextCall]:
    """GLM's ``name<arg_key>k</arg_key><arg_value>v</arg_value>...``; nothing when the body
    does not start with a tool name (prose that mentions the tag), and a bare name only
    when it is a tool on offer."""
    named = _GLM_NAME.match(body)
    if named is None or ("<arg_key>" not in body and named.group(1) not in known):
        return []
    pairs = []
    for key, value, closing in _glm_pairs(body, named.end()):
        if not closing:
            return [TextCall(named.group(1), None, cut_off("</arg_value>"))]
        pairs.append((key.strip(), value))  # the value as written: GLM adds no newline
    arguments, texts = xml_arguments(pairs)
    for key, value in arguments.items():  # GLM-4.6/4.7: "[\"a\"]", an array as a string
        held = xml_value(value) if isinstance(value, str) and value[:1] == '"' else value
        inner = _json_in_string(held)
        if inner is not None:
            arguments[key], texts[key] = inner, held
    return [TextCall(named.group(1), arguments, texts=texts)]


def _json_in_string(value: object) -> list[Any] | dict[str, Any] | None:
    """The array or object a GLM value wrote as a JSON string (``"[\\"a\\"]"``), or as the
    inside of one, its quotes escaped and no quotes around it (``[{\\"id\\": 1}]``, SGLang's
    GLM-4.7 detector test ``test_array_argument_with_escaped_json``); else ``None``. The
    string stays in the call's texts: a tool whose schema takes a string gets it as before,
    one whose schema takes an array or object gets what it holds."""
    if not isinstance(value, str) or value.lstrip()[:1] not in ("[", "{"):
        return None
    inner = xml_value(value)
    if isinstance(inner, str) and '\\"' in value:  # escaped, no quotes around it
        unescaped = xml_value(f'"{value}"')
        inner = xml_value(unescaped) if isinstance(unescaped, str) else None
    return inner if isinstance(inner, list | dict) else None


def _glm_pairs(body: str, at: int) -> Iterator[tuple[str, str, bool]]:
    """Each ``<arg_key>K</arg_key><arg_value>V</arg_value>`` from ``at`` on (whitespace, or a
    literal backslash-n, may separate the tags): the key, the value, and whether
    ``</arg_value>`` came. A key that no value follows is skipped. Substring searches from
    tag to tag: the body is read once."""
    while (key := body.find(_GLM_KEY[0], at)) != -1:
        key_end = body.find(_GLM_KEY[1], key)
        if key_end == -1:
            return
        at = key_end + len(_GLM_KEY[1])
        gap = _GLM_BETWEEN.match(body, at)
        value = gap.end() if gap is not None else at
        if not body.startswith(_GLM_VALUE[0], value):
            continue
        start = value + len(_GLM_VALUE[0])
        end = body.find(_GLM_VALUE[1], start)
        if end == -1:
            yield body[key + len(_GLM_KEY[0]) : key_end], body[start:], False
            return
        yield body[key + len(_GLM_KEY[0]) : key_end], body[start:end], True
        at = end + len(_GLM_VALUE[1])


FORMATS = (
    TextFormat("tool_call-tag", tool_call_tags, ("<tool_call>",), 100),
    TextFormat("function-tag", function_tags, ("<function=", '<function name="'), 110),
)
