"""Functionary v3.2: each message after ``>>>RECIPIENT`` and a newline; ``>>>all`` is text
for the user, ``>>>NAME`` a call whose arguments are the JSON object that follows, up to the
next ``>>>`` header or the end of the text, and ``>>>python`` followed by code (not JSON) a
call of the code interpreter, ``{"code": ...}`` (llama.cpp's Functionary v3.2 parser test
reads it so). The format has no closing token (the model stops on ``<|eot_id|>``, which
servers take off): a call runs when its JSON parses as written, or its code as Python, and
nothing in it is repaired.

A response that starts without its first ``>>>`` (llama.cpp's generation prompt ends with
it, so its parser tests hand over ``NAME\\n{...}``) is not read: nothing in the text marks
the call, and a stream could not hold it back before it is known to be one."""

from __future__ import annotations

import ast
import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import call_with_arguments, cut_off, whole_json

__all__: list[str] = []  # the formats reach users through TextFormats

_HEADER = re.compile(r">>>([A-Za-z_][\w.\-]*+)[ \t]*+\n")
_INTERPRETER = "python"


def tool_calls(text: str, known: Collection[str]) -> TextDetection | None:
    """The call of each ``>>>NAME`` header whose message is a JSON object (or code, for
    ``>>>python``); ``None`` when there is none (the header only mentioned, or only
    ``>>>all`` text)."""
    headers = list(_HEADER.finditer(text))
    calls = []
    for index, header in enumerate(headers):
        name = header.group(1)
        end = headers[index + 1].start() if index + 1 < len(headers) else len(text)
        body = text[header.end() : end].strip()
        last = end == len(text)
        if name == _INTERPRETER and body and not body.startswith("{"):
            calls.append(_code(body, last))
            continue
        if name == "all" or not body.startswith("{"):
            continue  # text for the user, or prose after a '>>>word' line
        if not whole_json(body):
            problem = "the arguments are not whole JSON; it was not run"
            calls.append(
                TextCall(name, None, cut_off("the end of its arguments") if last else problem)
            )
            continue
        calls.append(call_with_arguments(name, body))
    return TextDetection(tuple(calls), "functionary-v3.2") if calls else None


def _code(body: str, last: bool) -> TextCall:
    """The code interpreter's call: ``{"code": body}`` when ``body`` parses as Python."""
    try:
        ast.parse(body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        problem = cut_off("the end of its code") if last else "the code is not readable Python"
        return TextCall(_INTERPRETER, None, problem)
    return TextCall(_INTERPRETER, {"code": body})


FORMATS = (TextFormat("functionary-v3.2", tool_calls, (">>>",), 190),)
