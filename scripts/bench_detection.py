"""Benchmark detection time against response length: prose and adversarial responses.

    python scripts/bench_detection.py [--sizes 1,10] [--repeat 3]

Each response is built to a size in MB (10^6 characters): prose full of braces (code, LaTeX,
JSON data; the shape that took tens of seconds at 72 KB before detection became linear),
and inputs built to make a scanner read the text again from every opening (unclosed braces,
tag openers, reasoning openers, deep nesting, calls that never close...). Each is run through
``detect`` with four offered tools; a figure is the best of ``--repeat`` runs. The budgets:
the largest prose response within 1 s, and no case growing more than 25x from the smallest
size to the largest when that is 10x larger (a quadratic scan grows 100x).
"""

from __future__ import annotations

import argparse
import sys
import time

from _bench import Budget, emit
from bench_orchestrator import prose

from mcs_host import detect

KNOWN = {"get_weather", "add", "search", "echo"}

ADVERSARIAL: dict[str, str] = {
    "braces": "{ ",
    "keys without objects": '"name": "get_weather" ',
    "unclosed calls of an offered tool": '{"tool": "get_weather", "arguments": {',
    "objects nested to the end": '{"name": ',
    "arrays nested": "[",
    "quotes flipping between braces": 'x"{"tool": "get_weather", "arguments": {',
    "apostrophes and braces": "it's {'a': [",
    "<think> openers": "<think>",
    "every family's reasoning openings nested": (
        "[THINK]<think><seed:think><mm:think><|channel><|START_THINKING|><|inner_prefix|>"
        "<|open|>think<|sep|><|channel|>analysis<|message|>"
    ),
    "blocks closed, foreign tags and </think> inside": (
        "[THINK]<think></think><seed:think>[/THINK]<|channel></think>[THINK]<channel|></think>"
    ),
    "<tool_call> openers": "<tool_call>",
    "unclosed <tool_call> JSON": '<tool_call>{"name": "x", ',
    "<function=...><parameter=...>": "<function=get_weather><parameter=a>",
    "[TOOL_CALLS]name{": "[TOOL_CALLS]get_weather{",
    "<|python_tag|>": "<|python_tag|>",
    "pythonic openers": "[get_weather(",
    "@tool lines never closed": "@tool x {\n",
    "fences never closed": "```json\n{\n",
    "harmony channels": "<|channel|>commentary<|message|>",
    "DeepSeek call openers": (
        "<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>"
    ),
    "quotes": '"',
    "backslashes in strings": '"\\',
}


def response(piece: str, size: int) -> str:
    return piece * (size // len(piece))


def best_ms(text: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        detect(text, KNOWN)
        times.append((time.perf_counter() - started) * 1000)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10", help="response sizes in MB, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [float(s) for s in args.sizes.split(",")]
    small, large = sizes[0], sizes[-1]
    cases = {"prose with braces (bench_orchestrator's)": None, **ADVERSARIAL}
    heads = " | ".join(f"{size:g} MB" for size in sizes)
    lines = [
        f"| response | {heads} | MB/s at {large:g} MB | growth {small:g} -> {large:g} MB |",
        "|---" * (len(sizes) + 3) + "|",
    ]
    growths: list[tuple[float, str]] = []
    prose_ms = 0.0
    for name, piece in cases.items():
        figures = []
        for size in sizes:
            characters = int(size * 1_000_000)
            text = prose(characters) if piece is None else response(piece, characters)
            figures.append(best_ms(text, args.repeat))
        growth = figures[-1] / max(figures[0], 1e-3)
        growths.append((growth, name))
        if piece is None:
            prose_ms = figures[-1]
        shown = " | ".join(f"{ms:.1f} ms" for ms in figures)
        rate = large / (figures[-1] / 1000) if figures[-1] else float("inf")
        lines.append(f"| {name} | {shown} | {rate:.0f} | {growth:.1f}x |")
    worst, worst_name = max(growths)
    budgets = [Budget(f"{large:g} MB of prose with braces", prose_ms, 1000, unit=" ms")]
    if large / small >= 10:
        budgets.append(
            Budget(f"largest growth {small:g} -> {large:g} MB ({worst_name})", worst, 25)
        )
    emit("Detection time against response length", lines, budgets, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
