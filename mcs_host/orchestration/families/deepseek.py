"""DeepSeek and Step-3: ``<|tool▁calls▁begin|>`` sections (in the tokens every ``|`` is
U+FF5C and the separators are U+2581; ``_`` and spaces are accepted too, and an ASCII ``|``
with U+2581 as Ollama's template writes them), each call
``<|tool▁call▁begin|>`` ... ``<|tool▁call▁end|>``:

- V3 and R1: ``function<|tool▁sep|>name`` then the arguments in a fenced JSON block;
- V3.1: ``name<|tool▁sep|>{json}``;
- Step-3: ``<steptml:invoke name="..."><steptml:parameter name="k">v`` right after
  ``<|tool_call_begin|>`` (vLLM's Step-3 parser test writes it so), or after
  ``function<|tool_sep|>``; a call written without the ``<|tool_calls_begin|>`` section
  around it needs the ``function<|tool_sep|>`` (the test lists one without either as
  malformed);

and the DSML of V3.2 (``<|DSML|function_calls>``) and V4 (``<|DSML|tool_calls>``), two
formats: each reads only its own block, up to its own closing tag (vLLM's V4 parser test
``test_function_calls_block_is_not_accepted``), each ``<|DSML|invoke name="...">`` with
``<|DSML|parameter name="k" string="true|false">v</|DSML|parameter>`` (a string as it is,
anything else JSON). R1's reasoning is ``<think>``, which the text step sets aside.

Step-3's and DSML's values are written right after their opening tag and kept as written.
Every end token and closing tag here is text the model writes before its stop token
``<|end▁of▁sentence|>``. At the end of the text, a call whose body closes itself (V3's
fenced block, V3.1's JSON, a DSML invoke holding a JSON object) runs when it is whole as
written; an invoke whose ``</steptml:invoke>`` or ``</|DSML|invoke>`` never came was cut
off, whatever it holds (another parameter may have followed the last one).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import (
    call_with_arguments,
    cut_off,
    ended,
    whole_json,
    xml_arguments,
    xml_value,
)

__all__: list[str] = []  # the formats reach users through TextFormats

_BAR = "\uff5c"
_B = "[\uff5c|]"  # a token's bar: Ollama's DeepSeek template writes ASCII ``|``
_S = "[\u2581_ ]"  # the separator inside a token's name
_CALLS_BEGIN = re.compile(rf"<{_B}tool{_S}calls(?:{_S}begin)?{_B}>")
_CALLS_END = re.compile(rf"<{_B}tool{_S}calls{_S}end{_B}>")
_CALL = re.compile(
    rf"(?:<{_B}tool{_S}call{_S}begin{_B}>)(.*?)(<{_B}tool{_S}call{_S}end{_B}>|\Z)",
    re.DOTALL,
)
_CALL_BEGIN = re.compile(rf"<{_B}tool{_S}call{_S}begin{_B}>")
_SEP = re.compile(rf"<{_B}tool{_S}sep{_B}>")
_STEP_INVOKE = re.compile(r'<steptml:invoke name="([^"]+)">(.*?)(</steptml:invoke>|\Z)', re.DOTALL)
_STEP_PARAMETER = re.compile(
    r'<steptml:parameter name="([^"]+)">(.*?)(?:</steptml:parameter>|\Z)', re.DOTALL
)
_DSML = f"{_BAR}DSML{_BAR}"
_DSML_INVOKE = re.compile(rf'<{_DSML}invoke name="([^"]+)">(.*?)(</{_DSML}invoke>|\Z)', re.DOTALL)
_DSML_PARAMETER = re.compile(
    rf'<{_DSML}parameter name="([^"]+)"(?:\s+string="(true|false)")?>(.*?)'
    rf"(</{_DSML}parameter>|\Z)",
    re.DOTALL,
)


def tool_calls(text: str, known: Collection[str]) -> TextDetection | None:
    """The calls of every section; ``None`` when no section begins (the token only mentioned
    in a word, or a Step-3/DeepSeek token of another kind). Step-3 also writes its calls
    without the section around them: each ``<|tool_call_begin|>`` whose body is
    ``function<|tool_sep|>`` and a ``<steptml:invoke>`` is then a call, and nothing else is."""
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
        if step_only and ("<steptml:invoke" not in body or _bare_invoke(body)):
            continue  # outside a section, a Step-3 call needs its function<|tool_sep|>
        call = _one(body)
        if call is not None and not closing:  # at the end of the text
            # a Step-3 invoke said itself whether it closed; V3's fence and V3.1's JSON
            # close themselves, and are whole when they read without a problem
            whole = call.problem is None or "<steptml:invoke" in body
            (call,) = ended([call], whole, "the tool call's end token")
        if call is not None:
            calls.append(call)
    if step_only and not calls:
        return None
    fmt = "step3" if "<steptml:invoke" in text else "deepseek"
    return TextDetection(tuple(calls), fmt)


def _bare_invoke(body: str) -> bool:
    """Whether a call's body is a Step-3 invoke without ``function<|tool_sep|>``."""
    return body.lstrip().startswith("<steptml:invoke")


def _one(body: str) -> TextCall | None:
    if _bare_invoke(body):
        return _step3(body)
    kind, sep, rest = _split_sep(body)
    if not sep:
        return None  # no separator: not a call
    if "<steptml:invoke" in rest:
        return _step3(rest)
    if kind.strip() == "function":  # V3 and R1: the name, then a fenced block
        fenced = _fenced(rest)
        if fenced is None:
            name = rest.strip().split("\n", 1)[0].strip()
            return TextCall(name or "?", None, "the arguments are not in a ```json block")
        return call_with_arguments(*fenced)
    return call_with_arguments(kind.strip(), rest.strip())  # V3.1: name, then the JSON


def _step3(rest: str) -> TextCall | None:
    """The call of Step-3's first ``<steptml:invoke>`` in ``rest``; ``None`` when none is."""
    invoke = _STEP_INVOKE.search(rest)
    if invoke is None:
        return None
    name, inner, closing = invoke.groups()
    if not closing:  # another parameter may have followed the last one
        return TextCall(name, None, cut_off("</steptml:invoke>"))
    values, texts = xml_arguments(_STEP_PARAMETER.findall(inner))  # values as written
    return TextCall(name, values, texts=texts)


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
    """DeepSeek V3.2: the invokes of each ``function_calls`` block."""
    return _dsml_blocks(text, "function_calls", "deepseek-dsml")


def dsml_v4(text: str, known: Collection[str]) -> TextDetection | None:
    """DeepSeek V4: the invokes of each ``tool_calls`` block; a ``function_calls`` block is
    V3.2's, not V4's."""
    return _dsml_blocks(text, "tool_calls", "deepseek-v4-dsml")


def _dsml_blocks(text: str, kind: str, fmt: str) -> TextDetection | None:
    """The invokes of each ``<|DSML|KIND>`` block, up to its ``</|DSML|KIND>`` (or the end of
    the text); ``None`` when no such block begins. Substring searches from block to block:
    the text is read once."""
    opening, closing = f"<{_DSML}{kind}>", f"</{_DSML}{kind}>"
    at = text.find(opening)
    if at == -1:
        return None
    calls: list[TextCall] = []
    while at != -1:
        start = at + len(opening)
        end = text.find(closing, start)
        calls.extend(_dsml_invokes(text[start : len(text) if end == -1 else end]))
        at = -1 if end == -1 else text.find(opening, end + len(closing))
    return TextDetection(tuple(calls), fmt)


def _dsml_invokes(block: str) -> list[TextCall]:
    """The calls of one block's invokes. An invoke without ``</|DSML|invoke>`` was cut off,
    unless it holds a JSON object whole as written (that closes itself)."""
    calls = []
    for name, body, closing in _DSML_INVOKE.findall(block):
        if not closing and not whole_json(body.strip()):
            calls.append(TextCall(name, None, cut_off(f"</{_DSML}invoke>")))
            continue
        arguments: dict[str, Any] = {}
        texts: dict[str, str] = {}  # no string="..." attribute: JSON when it reads as JSON
        problem = None
        for key, is_string, value, ends in _DSML_PARAMETER.findall(body):
            if not ends:
                problem = cut_off(f"</{_DSML}parameter>")
            read = arguments[key] = value if is_string == "true" else xml_value(value)
            if not is_string and (not isinstance(read, str) or read != value):  # read as JSON
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
        calls.append(TextCall(name, None if problem else arguments, problem, texts=texts))
    return calls


FORMATS = (
    TextFormat("deepseek", tool_calls, (f"<{_BAR}tool", "<|tool\u2581calls"), 130),
    TextFormat("deepseek-dsml", dsml, (f"<{_DSML}function_calls>",), 131),
    TextFormat("deepseek-v4-dsml", dsml_v4, (f"<{_DSML}tool_calls>",), 132),
)
