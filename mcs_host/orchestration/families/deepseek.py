"""DeepSeek and Step-3: ``<|tool▁calls▁begin|>`` sections (in the tokens every ``|`` is
U+FF5C and the separators are U+2581; ``_`` and spaces are accepted too), each call
``<|tool▁call▁begin|>`` ... ``<|tool▁call▁end|>``:

- V3 and R1: ``function<|tool▁sep|>name`` then the arguments in a fenced JSON block;
- V3.1: ``name<|tool▁sep|>{json}``;
- Step-3: ``function<|tool_sep|><steptml:invoke name="..."><steptml:parameter name="k">v``,
  also written without the ``<|tool_calls_begin|>`` section around its calls;

and V3.2's DSML: ``<|DSML|function_calls>`` (V4: ``<|DSML|tool_calls>``), each
``<|DSML|invoke name="...">`` with ``<|DSML|parameter name="k" string="true|false">v
</|DSML|parameter>`` (a string as it is, anything else JSON). R1's reasoning is ``<think>``,
which the text step sets aside.

Step-3's and DSML's values are written right after their opening tag and kept as written. A
call at the end of the text whose end token or closing tag never came runs when it is whole
as written (JSON that parses as it is, parameters all closed); otherwise it was cut off.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.healing import OPEN_INVOKE
from mcs_host.orchestration.scanning import (
    call_with_arguments,
    cut_off,
    ended,
    parameters_closed,
    whole_json,
    xml_arguments,
    xml_value,
)

__all__: list[str] = []  # the formats reach users through TextFormats

_BAR = "\uff5c"
_S = "[\u2581_ ]"  # the separator inside a token's name
_CALLS_BEGIN = re.compile(rf"<{_BAR}tool{_S}calls(?:{_S}begin)?{_BAR}>")
_CALLS_END = re.compile(rf"<{_BAR}tool{_S}calls{_S}end{_BAR}>")
_CALL = re.compile(
    rf"(?:<{_BAR}tool{_S}call{_S}begin{_BAR}>)(.*?)(<{_BAR}tool{_S}call{_S}end{_BAR}>|\Z)",
    re.DOTALL,
)
_CALL_BEGIN = re.compile(rf"<{_BAR}tool{_S}call{_S}begin{_BAR}>")
_SEP = re.compile(rf"<{_BAR}tool{_S}sep{_BAR}>")
_STEP_INVOKE = re.compile(r'<steptml:invoke name="([^"]+)">(.*?)(</steptml:invoke>|\Z)', re.DOTALL)
_STEP_TAGS = ("<steptml:parameter name=", "</steptml:parameter>")
_STEP_PARAMETER = re.compile(
    r'<steptml:parameter name="([^"]+)">(.*?)(?:</steptml:parameter>|\Z)', re.DOTALL
)
_DSML = f"{_BAR}DSML{_BAR}"
_DSML_BLOCK = re.compile(rf"<{_DSML}(?:function|tool)_calls>")
_DSML_INVOKE = re.compile(rf'<{_DSML}invoke name="([^"]+)">(.*?)(</{_DSML}invoke>|\Z)', re.DOTALL)
_DSML_TAGS = (f"<{_DSML}parameter name=", f"</{_DSML}parameter>")
_DSML_PARAMETER = re.compile(
    rf'<{_DSML}parameter name="([^"]+)"(?:\s+string="(true|false)")?>(.*?)'
    rf"(</{_DSML}parameter>|\Z)",
    re.DOTALL,
)


def tool_calls(text: str, known: Collection[str]) -> TextDetection | None:
    """The calls of every section; ``None`` when no section begins (the token only mentioned
    in a word, or a Step-3/DeepSeek token of another kind). Step-3 also writes its calls
    without the section around them: each ``<|tool_call_begin|>`` whose body is a
    ``<steptml:invoke>`` is then a call, and nothing else is."""
    section = _CALLS_BEGIN.search(text)
    step_only = section is None
    if section is not None:
        start = section.end()
    else:  # Step-3 without the section: from its first call token
        first = _CALL_BEGIN.search(text) if "<steptml:invoke" in text else None
        if first is None:
            return None
        start = first.start()
    calls: list[TextCall] = []
    for body, closing in _CALL.findall(text, start):
        if step_only and "<steptml:invoke" not in body:
            continue
        call = _one(body)
        if call is not None and not closing:  # at the end of the text
            (call,) = ended([call], call.problem is None, "the tool call's end token")
        if call is not None:
            calls.append(call)
    if step_only and not calls:
        return None
    fmt = "step3" if "<steptml:invoke" in text else "deepseek"
    return TextDetection(tuple(calls), fmt)


def _one(body: str) -> TextCall | None:
    kind, sep, rest = _split_sep(body)
    if not sep:
        return None  # no separator: not a call
    if "<steptml:invoke" in rest:
        invoke = _STEP_INVOKE.search(rest)
        if invoke is None:
            return None
        name, inner, closing = invoke.groups()
        if not closing and not parameters_closed(inner, _STEP_TAGS):
            return TextCall(name, None, cut_off("</steptml:invoke>"))
        values, texts = xml_arguments(_STEP_PARAMETER.findall(inner))  # values as written
        return TextCall(name, values, healed=() if closing else (OPEN_INVOKE,), texts=texts)
    if kind.strip() == "function":  # V3 and R1: the name, then a fenced block
        fenced = _fenced(rest)
        if fenced is None:
            name = rest.strip().split("\n", 1)[0].strip()
            return TextCall(name or "?", None, "the arguments are not in a ```json block")
        return call_with_arguments(*fenced)
    return call_with_arguments(kind.strip(), rest.strip())  # V3.1: name, then the JSON


def _fenced(rest: str) -> tuple[str, str] | None:
    """V3's arguments: the name on its line, then a fenced JSON block that ends the text;
    the name and the JSON, or ``None``. Read with string methods, so a run of whitespace
    between the parts is read once."""
    head, fence, after = rest.partition("```")
    name = head.strip()
    if not fence or "\n" in name or "`" in name:
        return None
    after = after.removeprefix("json").rstrip()
    if not after.endswith("```"):
        return None
    return name, after[:-3].strip()


def _split_sep(body: str) -> tuple[str, str, str]:
    found = _SEP.search(body)
    if found is None:
        return body, "", ""
    return body[: found.start()], found.group(0), body[found.end() :]


def dsml(text: str, known: Collection[str]) -> TextDetection | None:
    """DeepSeek V3.2: each ``invoke`` in the ``function_calls`` block (V4: ``tool_calls``)."""
    found = _DSML_BLOCK.search(text)
    if found is None:
        return None
    start = found.start()
    calls = []
    for name, body, closing in _DSML_INVOKE.findall(text, start):
        if not closing and not (parameters_closed(body, _DSML_TAGS) or whole_json(body.strip())):
            calls.append(TextCall(name, None, cut_off(f"</{_DSML}invoke>")))
            continue
        arguments: dict[str, Any] = {}
        texts: dict[str, str] = {}  # no string="..." attribute: JSON when it reads as JSON
        problem = None
        for key, is_string, value, ends in _DSML_PARAMETER.findall(body):
            if not ends:
                problem = cut_off(f"</{_DSML}parameter>")
            read = arguments[key] = value if is_string == "true" else xml_value(value)
            if not is_string and not isinstance(read, str):
                texts[key] = value
            else:
                texts.pop(key, None)
        if not arguments and body.strip():  # no parameter tags: a JSON object, or nothing
            json_body = body.strip()
            if json_body.startswith("{"):
                calls.append(call_with_arguments(name, json_body))
            else:
                calls.append(TextCall(name, None, "the invoke holds no parameters"))
            continue
        healed = () if closing else (OPEN_INVOKE,)
        calls.append(TextCall(name, None if problem else arguments, problem, healed, texts=texts))
    return TextDetection(tuple(calls), "deepseek-dsml")


FORMATS = (
    TextFormat("deepseek", tool_calls, (f"<{_BAR}tool",), 130),
    TextFormat("deepseek-dsml", dsml, (f"<{_DSML}function_calls>", f"<{_DSML}tool_calls>"), 131),
)
