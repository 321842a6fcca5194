"""gpt-oss (the harmony format): messages ``<|channel|>NAME [to=RECIPIENT] [<|constrain|>json]
<|message|>BODY`` ending in ``<|call|>``, ``<|end|>`` or ``<|return|>``. A message to
``functions.NAME`` is a call with a JSON body, whatever its channel; a message in the
``analysis`` channel with no recipient is reasoning and holds no call; other recipients
(``browser.search``, ``python``) are the model's built-in tools, not ours. The recipient may
also stand in the role header (``<|start|>assistant to=functions.NAME<|channel|>commentary``),
and a call may follow a preamble in the commentary channel. The prompt ends with
``<|start|>assistant``, so a response may begin with the rest of that header
(`` to=functions.NAME<|channel|>...``, as llama.cpp hands it over): the marker
``<|start|>assistant to=`` has the stream hold such a start back, and ``<|start|>`` a header
the response writes whole. ``<|call|>`` is a stop token that Ollama and llama.cpp take off: a
call at the end of the text runs without it when its JSON parses as written, and is cut off
otherwise. Once harmony is found, only its calls count: a final answer is an answer."""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import call_with_arguments, cut_off, whole_json

__all__: list[str] = []  # the formats reach users through TextFormats

_HEADER = re.compile(
    r"<\|channel\|>\s*+(\w++)(?:\s*+to=([\w.\-]++))?+\s*+(?:<\|constrain\|>\s*+\w++|json)?+\s*+"
    r"<\|message\|>"
)
"""A message's header from its channel on; possessive, so a run of whitespace is read once.
Whitespace may stand after each token (LLM-jp 4.1 writes ``<|channel|> commentary``)."""
_END = re.compile(r"<\|call\|>|<\|end\|>|<\|return\|>|<\|start\|>")
_ROLE_RECIPIENT = re.compile(r"to=([\w.\-]++)\s*+")
_LOOKBACK = 256
"""How far before ``<|channel|>`` a recipient in the role header is looked for."""


def messages(text: str, known: Collection[str]) -> TextDetection | None:
    """Each message addressed to ``functions.NAME``: found from channel to channel, each
    message's end one search on, so the text is read once."""
    calls = []
    found = False
    at = 0
    while (header := _HEADER.search(text, at)) is not None:
        found = True
        end = _END.search(text, header.end())
        closing = end.group() if end is not None and end.group() != "<|start|>" else ""
        body = text[header.end() : len(text) if end is None else end.start()]
        recipient = header.group(2) or _role_recipient(text, at, header.start())
        at = len(text) if end is None else end.end() if closing else end.start()
        if not recipient or not recipient.startswith("functions."):
            continue
        name = recipient.removeprefix("functions.")
        stripped = body.strip()
        if closing:
            calls.append(call_with_arguments(name, stripped) if stripped else TextCall(name, {}))
        elif end is None and whole_json(stripped):  # at the end: the stop token taken off
            calls.append(call_with_arguments(name, stripped))
        else:  # cut off, or the next message began before this one ended
            calls.append(TextCall(name, None, cut_off("<|call|>")))
    return TextDetection(tuple(calls), "harmony") if found else None


def _role_recipient(text: str, floor: int, channel: int) -> str | None:
    """The ``to=RECIPIENT`` right before ``<|channel|>`` (in the role header), not looking
    before ``floor`` (the previous message's end) or farther back than :data:`_LOOKBACK`."""
    start = text.rfind("to=", max(floor, channel - _LOOKBACK), channel)
    found = _ROLE_RECIPIENT.fullmatch(text, start, channel) if start != -1 else None
    return found.group(1) if found else None


FORMATS = (
    TextFormat(
        "harmony",
        messages,
        ("<|channel|>", "<|start|>", "<|start|>assistant to="),
        145,
        reasoning=(("<|channel|>analysis<|message|>", "<|end|>"),),
    ),
)
