"""gpt-oss (the harmony format): messages ``<|channel|>NAME [to=RECIPIENT] [<|constrain|>json]
<|message|>BODY`` ending in ``<|call|>``, ``<|end|>`` or ``<|return|>``. A message to
``functions.NAME`` is a call with a JSON body; the ``analysis`` channel is reasoning and holds
no call; other recipients (``browser.search``, ``python``) are the model's built-in tools,
not ours. Once harmony is found, only its calls count: a final answer is an answer."""

from __future__ import annotations

import re
from collections.abc import Collection

from mcs_host.orchestration.calls import TextCall, TextDetection, TextFormat
from mcs_host.orchestration.scanning import call_with_arguments, cut_off

__all__: list[str] = []  # the formats reach users through TextFormats

_MESSAGE = re.compile(
    r"(?:<\|start\|>assistant)?(?:\s*to=([\w.\-]+))?\s*<\|channel\|>(\w+)"
    r"(?:\s*to=([\w.\-]+))?\s*(?:<\|constrain\|>\s*\w+|json)?\s*<\|message\|>"
    r"(.*?)(<\|call\|>|<\|end\|>|<\|return\|>|(?=<\|start\|>)|\Z)",
    re.DOTALL,
)


def messages(text: str, known: Collection[str]) -> TextDetection | None:
    """Each message addressed to ``functions.NAME``."""
    calls = []
    found = False
    for before, _channel, after, body, closing in _MESSAGE.findall(text):
        found = True
        recipient = before or after
        if not recipient.startswith("functions."):
            continue
        name = recipient.removeprefix("functions.")
        if not closing:
            calls.append(TextCall(name, None, cut_off("<|call|>")))
            continue
        stripped = body.strip()
        calls.append(call_with_arguments(name, stripped) if stripped else TextCall(name, {}))
    return TextDetection(tuple(calls), "harmony") if found else None


FORMATS = (
    TextFormat(
        "harmony",
        messages,
        ("<|channel|>",),
        145,
        reasoning=(("<|channel|>analysis<|message|>", "<|end|>"),),
    ),
)
