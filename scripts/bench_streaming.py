"""Benchmark the text stream a chat UI feeds: a long response fed one character at a time.

    python scripts/bench_streaming.py [--mb 10] [--repeat 3]

Each response is ``--mb`` MB (10^6 characters) of prose and then a ``<tool_call>``: plain
prose, and bench_orchestrator's prose full of brackets (code, LaTeX, JSON data: a bracket every
27 characters, each of which the stream shows once it has closed and holds no call, after
one detection of it). Each is fed to ``Orchestrator.stream()`` one character at a time, and in
chunks of 4 characters (about a token), and finished (the call runs); the baseline, measured
in the same run, is the same loop writing each chunk to an ``io.StringIO``. A figure is the
best of ``--repeat`` runs. The budgets: fed one character at a time, plain prose within 8x the
baseline and prose full of brackets within 40x; and the stream's cost growing linearly (at
most 12x from a tenth of the size).
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from _bench import Budget, emit
from bench_orchestrator import prose

from mcs_host import DriverMeta, MCSToolDriver, Orchestrator, Tool

CALL = '\n<tool_call>{"name": "get_time", "arguments": {}}</tool_call>'
PLAIN = "The weather in Oslo is mild today, about 12 degrees, with a light wind. "


class Clock(MCSToolDriver):
    """One tool, ``get_time``."""

    meta = DriverMeta(id="bench-clock", name="clock", version="1.0.0")

    def list_tools(self) -> list[Tool]:
        return [Tool(name="get_time", description="The time.")]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return "12:00"


def texts(size: int) -> dict[str, str]:
    plain = (PLAIN * (size // len(PLAIN) + 1))[:size]
    return {"plain prose": plain + CALL, "prose full of brackets": prose(size) + CALL}


def streamed(orchestrator: Orchestrator, chunks: list[str]) -> None:
    stream = orchestrator.stream()
    feed = stream.feed
    shown = [feed(chunk) for chunk in chunks]
    response = stream.finish()
    assert response.call_executed, response
    assert "<tool_call>" not in "".join(shown)


def written(chunks: list[str]) -> None:
    buffer = io.StringIO()
    write = buffer.write
    for chunk in chunks:
        write(chunk)


def best_s(work: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=10, help="response size in MB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    orchestrator = Orchestrator({"clock": Clock()})
    size = int(args.mb * 1_000_000)
    lines = [
        "| response | fed in | `Orchestrator.stream()` | MB/s | `io.StringIO.write` | / StringIO |",
        "|---|---|---|---|---|---|",
    ]
    budgets = []
    for name, text in texts(size).items():
        for width in (1, 4):
            chunks = list(text) if width == 1 else [text[i : i + 4] for i in range(0, len(text), 4)]
            ours = best_s(partial(streamed, orchestrator, chunks), args.repeat)
            baseline = best_s(partial(written, chunks), args.repeat)
            what = "1 character" if width == 1 else f"{width} characters"
            lines.append(
                f"| {args.mb:g} MB {name}, then a call | {what} | {ours:.2f} s | "
                f"{args.mb / ours:.1f} | {baseline:.2f} s | {ours / baseline:.1f}x |"
            )
            if width == 1:
                limit = 8 if name == "plain prose" else 40
                budgets.append(
                    Budget(f"{name}, 1 character a feed / StringIO", ours / baseline, limit)
                )
                tenth = list(texts(size // 10)[name])
                small = best_s(partial(streamed, orchestrator, tenth), args.repeat)
                growth = f"{name}: growth from {args.mb / 10:g} MB to {args.mb:g} MB (linear: 10x)"
                budgets.append(Budget(growth, ours / small, 12))
    emit("Streaming: a response fed to a chat UI", lines, budgets, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
