"""Command R7B and Command A: ``<|START_ACTION|>`` then a JSON array of
``{"tool_call_id", "tool_name", "parameters"}`` up to ``<|END_ACTION|>``; the plan in
``<|START_THINKING|>`` ... ``<|END_THINKING|>`` is reasoning; at the end of the text, the
array runs without ``<|END_ACTION|>`` when it parses as written. An array that does not read
as a whole, its objects each balanced (a comma missing between two, one with a value JSON
cannot hold), is read object by object: a broken one is reported, the others run. (Command-R's older
``Action: ```json [...]``` `` is a fenced array the JSON protocol reads.)"""

from __future__ import annotations

import json
import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import (
    calls_from_fragment,
    ended,
    first_value,
    whole_json,
)
from mcs_host.orchestration.scanning import (
    closing as bracket_closing,
)

__all__: list[str] = []  # the formats reach users through TextFormats

_ACTION = re.compile(r"<\|START_ACTION\|>(.*?)(<\|END_ACTION\|>|\Z)", re.DOTALL)


def actions(text: str, known: Collection[str]) -> TextDetection | None:
    calls: list[TextCall] = []
    for body, closing in _ACTION.findall(text):
        stripped = body.strip()
        if not stripped:
            continue
        found = calls_from_fragment(stripped, "<|START_ACTION|>")
        ids = _ids(stripped)
        items = _objects(stripped) if len(found) == 1 and found[0].arguments is None else None
        if items is not None and len(items) > 1:
            found = [c for item in items for c in calls_from_fragment(item, "<|START_ACTION|>")]
            ids = [_ids(item)[0] if _ids(item) else None for item in items]
        found = [
            TextCall(c.name, c.arguments, c.problem, c.healed, ids[i] if i < len(ids) else None)
            for i, c in enumerate(found)
        ]
        if not closing:  # at the end of the text
            found = ended(found, whole_json(stripped), "<|END_ACTION|>")
        calls.extend(found)
    return TextDetection(tuple(calls), "command") if calls else None


def _objects(body: str) -> list[str] | None:
    """The text of each object of the array ``body``, when the array is objects alone, each
    closing, with or without commas between them; else ``None``."""
    if body[:1] != "[":
        return None
    objects: list[str] = []
    at = 1
    while True:
        while at < len(body) and body[at] in " \t\r\n,":
            at += 1
        if at == len(body):
            return None  # the array never closes
        if body[at] == "]":
            return objects if not body[at + 1 :].strip() else None
        if body[at] != "{":
            return None
        end = bracket_closing(body, at)
        if not at < end < len(body):
            return None  # a wrong bracket closes it, or it never closes
        objects.append(body[at : end + 1])
        at = end + 1


def _ids(body: str) -> list[str | None]:
    """The ``tool_call_id`` of each call in the array, when it reads as JSON."""
    try:
        items = json.loads(first_value(body))
    except (ValueError, RecursionError):
        return []
    if not isinstance(items, list):
        items = [items]
    return [
        str(item["tool_call_id"]) if isinstance(item, dict) and "tool_call_id" in item else None
        for item in items
    ]


FORMATS = (
    TextFormat(
        "command",
        actions,
        ("<|START_ACTION|>",),
        210,
        reasoning=(("<|START_THINKING|>", "<|END_THINKING|>"),),
    ),
)
