"""Phi-4-mini: ``functools[{...}, ...]``, a JSON array of calls."""

from __future__ import annotations

from collections.abc import Collection

from mcs_host.orchestration.calls import TextDetection, TextFormat
from mcs_host.orchestration.scanning import calls_from_fragment

__all__: list[str] = []  # the formats reach users through TextFormats


def functools_list(text: str, known: Collection[str]) -> TextDetection | None:
    """The array after the first ``functools[``; ``None`` when no call object follows."""
    start = text.find("functools[")
    fragment = text[start + len("functools") :].strip()
    if fragment[1:].lstrip()[:1] not in ("{", "]"):
        return None  # "functools[" only mentioned, or a list that holds no call objects
    calls = calls_from_fragment(fragment, "functools")
    return TextDetection(tuple(calls), "functools")


FORMATS = (TextFormat("functools", functools_list, ("functools[",), 310),)
