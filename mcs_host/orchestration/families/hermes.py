"""Hermes and Qwen: ``<tool_call>`` tags holding a JSON call, or Qwen3-Coder's XML
(``<function=name><parameter=key>value</parameter></function>``), also without the tag."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import call_with_arguments, calls_from_fragment, xml_value

__all__: list[str] = []  # the formats reach users through TextFormats

_TOOL_CALL_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_FUNCTION_TAG = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|\Z)", re.DOTALL)
_PARAMETER_TAG = re.compile(r"<parameter=([^>\s]+)>\n?(.*?)\n?</parameter>", re.DOTALL)


def tool_call_tags(text: str, known: Collection[str]) -> TextDetection | None:
    """Each ``<tool_call>`` (the last may be unclosed): a JSON call, or XML functions."""
    calls: list[TextCall] = []
    for body in _TOOL_CALL_TAG.findall(text):
        if "<function=" in body:
            calls.extend(xml_functions(body))
        else:
            calls.extend(calls_from_fragment(body.strip(), "<tool_call>", strict_names=False))
    return TextDetection(tuple(calls), "tool_call-tag")


def function_tags(text: str, known: Collection[str]) -> TextDetection | None:
    """``<function=name>`` tags without the ``<tool_call>`` around them."""
    return TextDetection(tuple(xml_functions(text)), "function-tag")


def xml_functions(text: str) -> Iterator[TextCall]:
    """``<function=name>`` with a JSON body (Llama) or ``<parameter=..>`` children (Qwen)."""
    for match in _FUNCTION_TAG.finditer(text):
        name, body = match.group(1), match.group(2)
        closed = match.group(0).endswith("</function>")
        if "<parameter=" in body:
            if not closed:
                yield TextCall(name, None, "the <function> tag was cut off before it closed")
                continue
            arguments = {key: xml_value(value) for key, value in _PARAMETER_TAG.findall(body)}
            yield TextCall(name, arguments)
            continue
        stripped = body.strip()
        if not stripped:
            yield TextCall(name, {} if closed else None, None if closed else "cut off")
            continue
        yield call_with_arguments(name, stripped)


FORMATS = (
    TextFormat("tool_call-tag", tool_call_tags, ("<tool_call>",), 100),
    TextFormat("function-tag", function_tags, ("<function=",), 110),
)
