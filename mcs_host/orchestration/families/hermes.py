"""Hermes, Qwen, GLM and Granite 4: ``<tool_call>`` tags, each holding a JSON call (Hermes,
Qwen 2.5/3, Granite 4), Qwen3-Coder's XML (``<function=name><parameter=key>value``) or GLM
4.5-4.7's ``name<arg_key>key</arg_key><arg_value>value</arg_value>``; and Qwen3-Coder's
``<function=...>`` without the tag. A tag that never closes is a call cut off."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import (
    call_with_arguments,
    calls_from_fragment,
    cut_off,
    xml_arguments,
)

__all__: list[str] = []  # the formats reach users through TextFormats

_TOOL_CALL_TAG = re.compile(r"<tool_call>(.*?)(</tool_call>|\Z)", re.DOTALL)
_FUNCTION_TAG = re.compile(r"<function=([^>\s]+)>(.*?)(</function>|\Z)", re.DOTALL)
# a value ends at its closing tag, or where the next parameter or the function begins
_PARAMETER_TAG = re.compile(
    r"<parameter=([^>\s]+)>(.*?)(?:</parameter>|(?=<parameter=)|(?=</function>)|\Z)", re.DOTALL
)
_GLM_NAME = re.compile(r"\s*([A-Za-z_][\w.\-]*)\s*(?=<arg_key>|\Z)")
_GLM_PAIR = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)(</arg_value>|\Z)", re.DOTALL)


def tool_call_tags(text: str, known: Collection[str]) -> TextDetection | None:
    """Each ``<tool_call>``: a JSON call, XML functions or a GLM call; ``None`` when the tag
    is only mentioned."""
    calls: list[TextCall] = []
    for body, closing in _TOOL_CALL_TAG.findall(text):
        if "<function=" in body:
            found = list(xml_functions(body))
        elif body.lstrip()[:1] in ("{", "["):
            found = calls_from_fragment(body.strip(), "<tool_call>")
        else:
            found = _glm(body, known)
        if not closing:
            found = [
                c if c.problem else TextCall(c.name, None, cut_off("</tool_call>")) for c in found
            ]
        calls.extend(found)
    return TextDetection(tuple(calls), "tool_call-tag") if calls else None


def function_tags(text: str, known: Collection[str]) -> TextDetection | None:
    """``<function=name>`` tags without the ``<tool_call>`` around them."""
    calls = tuple(xml_functions(text))
    return TextDetection(calls, "function-tag") if calls else None


def xml_functions(text: str) -> Iterator[TextCall]:
    """``<function=name>`` with a JSON body (Llama) or ``<parameter=..>`` children (Qwen)."""
    for name, body, closing in _FUNCTION_TAG.findall(text):
        if body.strip()[:1] not in ("", "<", "{"):
            continue  # "<function=name> syntax ...": the tag only mentioned
        if not closing:
            yield TextCall(name, None, cut_off("</function>"))
            continue
        if "<parameter=" in body:
            arguments, texts = xml_arguments(
                (key, _one_newline_off(value)) for key, value in _PARAMETER_TAG.findall(body)
            )
            yield TextCall(name, arguments, texts=texts)
            continue
        stripped = body.strip()
        yield call_with_arguments(name, stripped) if stripped else TextCall(name, {})


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
    for key, value, closing in _GLM_PAIR.findall(body, named.end()):
        if not closing:
            return [TextCall(named.group(1), None, cut_off("</arg_value>"))]
        pairs.append((key.strip(), value.strip()))
    arguments, texts = xml_arguments(pairs)
    return [TextCall(named.group(1), arguments, texts=texts)]


FORMATS = (
    TextFormat("tool_call-tag", tool_call_tags, ("<tool_call>",), 100),
    TextFormat("function-tag", function_tags, ("<function=",), 110),
)
