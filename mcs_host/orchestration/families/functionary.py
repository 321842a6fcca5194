"""Functionary v3.2: each message after ``>>>RECIPIENT`` and a newline; ``>>>all`` is text
for the user, ``>>>NAME`` a call whose arguments are the JSON object that follows, up to the
next ``>>>`` header or the end of the text. The format has no closing token (the model stops
on ``<|eot_id|>``, which servers take off): a call runs when its JSON parses as written, and
nothing in it is repaired."""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import call_with_arguments, cut_off, whole_json

__all__: list[str] = []  # the formats reach users through TextFormats

_HEADER = re.compile(r">>>([A-Za-z_][\w.\-]*+)[ \t]*+\n")


def tool_calls(text: str, known: Collection[str]) -> TextDetection | None:
    """The call of each ``>>>NAME`` header whose message is a JSON object; ``None`` when
    there is none (the header only mentioned, or only ``>>>all`` text)."""
    headers = list(_HEADER.finditer(text))
    calls = []
    for index, header in enumerate(headers):
        name = header.group(1)
        end = headers[index + 1].start() if index + 1 < len(headers) else len(text)
        body = text[header.end() : end].strip()
        if name == "all" or not body.startswith("{"):
            continue  # text for the user, or prose after a '>>>word' line
        if not whole_json(body):
            last = end == len(text)
            problem = "the arguments are not whole JSON; it was not run"
            calls.append(
                TextCall(name, None, cut_off("the end of its arguments") if last else problem)
            )
            continue
        calls.append(call_with_arguments(name, body))
    return TextDetection(tuple(calls), "functionary-v3.2") if calls else None


FORMATS = (TextFormat("functionary-v3.2", tool_calls, (">>>",), 190),)
