"""A pythonic call list ``[f(a=1), g(b='x')]`` (Llama 4 and others): the whole response, a
fenced block, or a list after prose, and only of tools on offer, as prose and code samples
look alike."""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextDetection, TextFormat
from mcs_host.orchestration.scanning import closing, fences, python_calls

__all__: list[str] = []  # the formats reach users through TextFormats

_PYTHONIC = re.compile(r"^\[\s*[A-Za-z_][\w.]*\s*\(.*\)\s*\]$", re.DOTALL)
_OPENING = re.compile(r"\[\s*([A-Za-z_][\w.]*)\s*\(")


def call_list(text: str, known: Collection[str]) -> TextDetection | None:
    """The calls when all of ``text`` (or a python fence) is a list of calls to known tools."""
    if _OPENING.search(text) is None:
        return None  # every candidate below opens with "[name("
    candidates = [text.strip()]
    candidates += [body.strip() for lang, body in fences(text) if lang in ("", "python", "py")]
    done = 0
    for opening in _OPENING.finditer(text):  # a list after prose: only of tools on offer
        if opening.start() < done or opening.group(1) not in known:
            continue  # inside a list already read, or not a call of a tool on offer
        end = closing(text, opening.start())
        if end == len(text):
            break  # open to the end: so is every list inside it
        if end >= 0:
            candidates.append(text[opening.start() : end + 1])
            done = end
    for candidate in candidates:
        if candidate[:1] == "[" and _PYTHONIC.match(candidate):
            calls = list(python_calls(candidate))
            if calls and all(c.name in known for c in calls):
                return TextDetection(tuple(calls), "pythonic")
    return None


FORMATS = (TextFormat("pythonic", call_list, ("[",), 800),)
