"""Mistral: ``[TOOL_CALLS]`` then a JSON array (before tokenizer v11; anything before the
array is skipped) or ``name[ARGS]{...}`` (v11; ``[ARGS]`` may be missing from the decoded
text, and ``[CALL_ID]id`` may come before it), the arguments ending where their JSON ends;
the last call's arguments, at the end of the text, run when whole as written. Before v11 one
``[TOOL_CALLS]`` starts the one list of every call: a second list is refused, none of them
run (vLLM's parser raises). Magistral's reasoning is ``[THINK]`` ... ``[/THINK]``."""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import (
    call_with_arguments,
    calls_from_fragment,
    ended,
    first_value,
    whole_json,
)

__all__: list[str] = []  # the formats reach users through TextFormats

_MARK = "[TOOL_CALLS]"
_NAMED = re.compile(
    r"\[TOOL_CALLS\]\s*([A-Za-z_][\w.\-]*)\s*(?:\[CALL_ID\]\s*(\w+)\s*)?(?:\[ARGS\]|(?=\{))"
)


def tool_calls(text: str, known: Collection[str]) -> TextDetection | None:
    """Every ``[TOOL_CALLS]`` in ``text``; ``None`` when none is followed by a call."""
    calls: list[TextCall] = []
    named = list(_NAMED.finditer(text))
    if named:
        for index, match in enumerate(named):
            end = named[index + 1].start() if index + 1 < len(named) else len(text)
            body = text[match.end() : end].strip()
            if body[:1] in ("{", "["):
                body = first_value(body)  # what follows the arguments is prose
            call = call_with_arguments(match.group(1), body)
            call = TextCall(call.name, call.arguments, call.problem, call.healed, match.group(2))
            if end == len(text) and body == text[match.end() :].strip():  # nothing after it
                (call,) = ended([call], whole_json(body), "the end of its arguments")
            calls.append(call)
        return TextDetection(tuple(calls), "mistral")
    lists = 0
    for chunk in text.split(_MARK)[1:]:
        start = min((i for i in (chunk.find("["), chunk.find("{")) if i != -1), default=-1)
        if start == -1:
            continue  # the marker only mentioned
        found = calls_from_fragment(chunk[start:].strip(), _MARK)
        lists += bool(found)
        calls.extend(found)
    if lists > 1:
        return TextDetection((TextCall("?", None, _TWO_LISTS),), "mistral")
    return TextDetection(tuple(calls), "mistral") if calls else None


_TWO_LISTS = (
    f"{_MARK} starts two lists of calls, where one list holds every call: which to run is "
    "a guess, so none was run"
)


FORMATS = (TextFormat("mistral", tool_calls, (_MARK,), 300, reasoning=(("[THINK]", "[/THINK]"),)),)
