"""Command R7B and Command A: ``<|START_ACTION|>`` then a JSON array of
``{"tool_call_id", "tool_name", "parameters"}`` up to ``<|END_ACTION|>``; the plan in
``<|START_THINKING|>`` ... ``<|END_THINKING|>`` is reasoning; at the end of the text, the
array runs without ``<|END_ACTION|>`` when it parses as written. (Command-R's older
``Action: ```json [...]``` `` is a fenced array the JSON protocol reads.)"""

from __future__ import annotations

import json
import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import calls_from_fragment, ended, first_value, whole_json

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
        found = [
            TextCall(c.name, c.arguments, c.problem, c.healed, ids[i] if i < len(ids) else None)
            for i, c in enumerate(found)
        ]
        if not closing:  # at the end of the text
            found = ended(found, whole_json(stripped), "<|END_ACTION|>")
        calls.extend(found)
    return TextDetection(tuple(calls), "command") if calls else None


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
