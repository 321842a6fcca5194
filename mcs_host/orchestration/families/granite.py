"""Granite 3.x: ``<|tool_call|>`` then a JSON array of calls (Granite 4 writes Hermes'
``<tool_call>`` tags, read by :mod:`.hermes`, and 3.1 may write ``<tool_call>[...]``, which
has no closing tag). No tag ends the calls: the array's own closing bracket does, so an
array that never closes was cut off, even when one brace would mend it."""

from __future__ import annotations

from collections.abc import Collection

from mcs_host.orchestration.calls import TextDetection, TextFormat
from mcs_host.orchestration.scanning import calls_from_fragment, ended, matching

__all__: list[str] = []  # the formats reach users through TextFormats

_TAG = "<|tool_call|>"


def tool_call_token(text: str, known: Collection[str]) -> TextDetection | None:
    body = text.split(_TAG, 1)[1].strip()
    if body[:1] not in ("[", "{"):
        return None  # the token only mentioned
    calls = calls_from_fragment(body, _TAG)
    if matching(body, 0) is None:  # open to the end of the text
        calls = ended(calls, False, "the closing bracket")
    return TextDetection(tuple(calls), "granite")


FORMATS = (TextFormat("granite", tool_call_token, (_TAG,), 190),)
