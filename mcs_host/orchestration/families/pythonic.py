"""A pythonic call list ``[f(a=1), g(b='x')]`` (Llama 4 and others): the whole response, a
fenced block, or a list after prose, and only of tools on offer, as prose and code samples
look alike. In a list that does not read as a whole, the calls before the first that does not
read run, and that one is reported."""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import closing, fences, python_calls

__all__: list[str] = []  # the formats reach users through TextFormats

_PYTHONIC = re.compile(r"^\[\s*[A-Za-z_][\w.]*\s*\(.*\)\s*\]$", re.DOTALL)
_OPENING = re.compile(r"\[\s*([A-Za-z_][\w.]*)\s*\(")


def call_list(text: str, known: Collection[str]) -> TextDetection | None:
    """The calls when all of ``text`` (or a python fence) is a list of calls to known tools;
    else those of each list after prose that is (``[f(a=1)] and [g(b=2)]``)."""
    if _OPENING.search(text) is None:
        return None  # every candidate below opens with "[name("
    whole = [text.strip()]
    whole += [body.strip() for lang, body in fences(text) if lang in ("", "python", "py")]
    for candidate in whole:
        calls = _known_calls(candidate, known)
        if calls:
            return TextDetection(calls, "pythonic")
    found: list[TextCall] = []
    done = 0
    for opening in _OPENING.finditer(text):  # a list after prose: only of tools on offer
        if opening.start() < done or opening.group(1) not in known:
            continue  # inside a list already read, or not a call of a tool on offer
        end = closing(text, opening.start())
        if end == len(text):
            break  # open to the end: so is every list inside it
        if end >= 0:
            found.extend(_known_calls(text[opening.start() : end + 1], known))
            done = end
    return TextDetection(tuple(found), "pythonic") if found else None


def _known_calls(candidate: str, known: Collection[str]) -> tuple[TextCall, ...]:
    """The calls of ``candidate`` when it is a list of calls, each of a known tool; a call
    that does not read is reported, and the ones before it run."""
    if candidate[:1] == "[" and _PYTHONIC.match(candidate):
        calls = tuple(python_calls(candidate, siblings=True))
        if calls and all(c.name in known for c in calls):
            return calls
    return ()


FORMATS = (TextFormat("pythonic", call_list, ("[",), 800),)
