"""Granite 3.x: ``<|tool_call|>`` then a JSON array of calls (Granite 4 writes Hermes'
``<tool_call>`` tags, read by :mod:`.hermes`)."""

from __future__ import annotations

from collections.abc import Collection

from mcs_host.orchestration.calls import TextDetection, TextFormat
from mcs_host.orchestration.scanning import calls_from_fragment

__all__: list[str] = []  # the formats reach users through TextFormats

_TAG = "<|tool_call|>"


def tool_call_token(text: str, known: Collection[str]) -> TextDetection | None:
    body = text.split(_TAG, 1)[1].strip()
    if body[:1] not in ("[", "{"):
        return None  # the token only mentioned
    calls = calls_from_fragment(body, _TAG)
    return TextDetection(tuple(calls), "granite")


FORMATS = (TextFormat("granite", tool_call_token, (_TAG,), 190),)
