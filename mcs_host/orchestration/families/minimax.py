"""MiniMax, Jamba and Hunyuan:

- MiniMax-M2: ``<minimax:tool_call>`` with ``<invoke name="...">`` and
  ``<parameter name="k">v</parameter>`` children;
- MiniMax-M3: the same tags, each after the namespace token ``]<]minimax[>[``, with each
  parameter a tag of its own name (``<city>Oslo</city>``) that may hold nested tags: an
  object, an array when every child is ``<item>``, a list where one name repeats;
- ``<tool_calls>`` ... ``</tool_calls>`` holding a JSON array (Jamba, Hunyuan A13B) or one
  JSON call per line (MiniMax-M1).

MiniMax-M2 and M3 write a value right after its opening tag: it is kept as written (a
top-level value read as JSON when it reads as JSON, as in every XML family; a nested one a
string, which validation reads as the number or boolean the tool's schema asks for). Their
closing tags are text the model writes before its stop token (M2's ``[e~[``), and another
parameter may follow the last closed one: at the end of the text, an invoke whose
``</invoke>`` never came was cut off, whatever it holds; the invokes that closed run without
the block's closing tag after them. A ``<tool_calls>`` block without ``</tool_calls>`` runs
when its JSON is whole as written (each line, or the array, closes itself).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import (
    calls_from_fragment,
    cut_off,
    ended,
    whole_json,
    xml_arguments,
)

__all__: list[str] = []  # the formats reach users through TextFormats

_INVOKE = re.compile(r'<invoke name="([^"]+)">(.*?)(</invoke>|\Z)', re.DOTALL)
_PARAMETER = re.compile(r'<parameter name="([^"]+)">(.*?)(?:</parameter>|\Z)', re.DOTALL)
_BLOCK = re.compile(r"<tool_calls>(.*?)(</tool_calls>|\Z)", re.DOTALL)


def invokes(text: str, known: Collection[str]) -> TextDetection | None:
    """Each ``<invoke>`` after ``<minimax:tool_call>``."""
    start = text.find("<minimax:tool_call>")
    calls = []
    for name, body, closing in _INVOKE.findall(text, start):
        if not closing:  # another parameter may have followed the last one
            calls.append(TextCall(name, None, cut_off("</invoke>")))
            continue
        arguments, texts = xml_arguments(_PARAMETER.findall(body))
        calls.append(TextCall(name, arguments, texts=texts))
    return TextDetection(tuple(calls), "minimax-m2") if calls else None


_NS = "]<]minimax[>["
_M3_OPEN, _M3_CLOSE = f"{_NS}<tool_call>", f"{_NS}</tool_call>"
_M3_INVOKE = re.compile(r'<invoke name="([^"<>]+)">')
_M3_TAG = re.compile(r"<(/?)([^\s<>/]+)>")


def m3_invokes(text: str, known: Collection[str]) -> TextDetection | None:
    """Each invoke in each ``]<]minimax[>[<tool_call>`` block; ``None`` when no block holds
    one (the tag only mentioned)."""
    calls: list[TextCall] = []
    at = text.find(_M3_OPEN)
    while at != -1:
        start = at + len(_M3_OPEN)
        end = text.find(_M3_CLOSE, start)
        calls.extend(_m3_block(text[start : len(text) if end == -1 else end]))
        at = -1 if end == -1 else text.find(_M3_OPEN, end)
    return TextDetection(tuple(calls), "minimax-m3") if calls else None


class _UnreadableError(ValueError):
    """An M3 invoke whose tags do not nest."""


def _m3_block(body: str) -> list[TextCall]:
    """The calls of one block's body: the invokes in it, split at the namespace token."""
    calls: list[TextCall] = []
    chunks = body.split(_NS)
    if chunks[0].strip():
        return calls  # text before the first token: the block only mentioned
    name: str | None = None
    stack: list[tuple[str, list[tuple[str, Any]], list[str]]] = []
    problem: str | None = None
    for chunk in chunks[1:]:
        invoke = _M3_INVOKE.match(chunk)
        if invoke:
            if name is not None:
                calls.append(TextCall(name, None, problem or "its </invoke> never came"))
            name, stack, problem = invoke.group(1), [("", [], [])], None
            rest = chunk[invoke.end() :]
        elif name is None:
            continue  # between invokes: nothing of a call
        elif chunk.startswith("</invoke>"):
            if problem is None and len(stack) != 1:
                problem = f"its <{stack[-1][0]}> was not closed before </invoke>"
            calls.append(_m3_call(name, stack[0][1], problem))
            name = None
            continue
        else:
            tag = _M3_TAG.match(chunk)
            if tag is None:
                problem = problem or f"{chunk[:20]!r} after {_NS} is no tag"
                continue
            rest = chunk[tag.end() :]
            if problem is not None:
                continue
            if not tag.group(1):
                stack.append((tag.group(2), [], [rest]))
                continue
            if len(stack) == 1 or stack[-1][0] != tag.group(2):
                problem = f"</{tag.group(2)}> closes no open <{tag.group(2)}>"
                continue
            key, children, texts = stack.pop()
            try:
                value = _m3_value(key, children, texts)
            except _UnreadableError as error:
                problem = str(error)
                continue
            stack[-1][1].append((key, value))
        if problem is None and rest.strip():
            problem = f"text {rest.strip()[:20]!r} between tags"
    if name is not None:  # the end of the block: no </invoke>, so a parameter may be missing
        calls.append(TextCall(name, None, cut_off("</invoke>")))
    return calls


def _m3_value(key: str, children: list[tuple[str, Any]], texts: list[str]) -> Any:
    """A tag's value: its text as written, or what its child tags hold."""
    if not children:
        return "".join(texts)
    if any(text.strip() for text in texts):
        raise _UnreadableError(f"<{key}> holds both text and tags")
    if all(child == "item" for child, _ in children):
        return [value for _, value in children]
    grouped: dict[str, Any] = {}
    for child, value in children:
        if child not in grouped:
            grouped[child] = value
        elif isinstance(grouped[child], _Repeated):
            grouped[child].append(value)
        else:
            grouped[child] = _Repeated([grouped[child], value])
    return {
        child: list(value) if isinstance(value, _Repeated) else value
        for child, value in grouped.items()
    }


class _Repeated(list[Any]):
    """The values of a tag written more than once in one object: a list."""


def _m3_call(name: str, pairs: list[tuple[str, Any]], problem: str | None) -> TextCall:
    """One invoke's call from its parameters, each a top-level tag."""
    if problem is not None:
        return TextCall(name, None, problem)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return TextCall(name, None, f"the parameter {key!r} is given twice")
        seen.add(key)
    arguments, texts = xml_arguments((k, v) for k, v in pairs if isinstance(v, str))
    arguments = {key: arguments[key] if isinstance(value, str) else value for key, value in pairs}
    return TextCall(name, arguments, texts=texts)


def tool_calls_block(text: str, known: Collection[str]) -> TextDetection | None:
    """Each ``<tool_calls>`` block: a JSON array, or one JSON call per line."""
    calls: list[TextCall] = []
    for body, closing in _BLOCK.findall(text):
        stripped = body.strip()
        if not stripped:
            continue
        lines = [] if stripped[0] == "[" else [line.strip() for line in stripped.splitlines()]
        if stripped[0] == "[":
            found = calls_from_fragment(stripped, "<tool_calls>", bare_names=False)
        else:
            found = [
                call
                for line in lines
                if line.startswith("{")
                for call in calls_from_fragment(line, "<tool_calls>", bare_names=False)
            ]
        if not closing:  # at the end of the text: whole when each line (or the array) is
            whole = (
                all(whole_json(line) for line in lines if line) if lines else whole_json(stripped)
            )
            found = ended(found, whole, "</tool_calls>")
        calls.extend(found)
    return TextDetection(tuple(calls), "tool_calls-tag") if calls else None


FORMATS = (
    TextFormat("minimax-m2", invokes, ("<minimax:tool_call>",), 150),
    TextFormat(
        "minimax-m3", m3_invokes, (_M3_OPEN,), 151, reasoning=(("<mm:think>", "</mm:think>"),)
    ),
    TextFormat("tool_calls-tag", tool_calls_block, ("<tool_calls>",), 160),
)
