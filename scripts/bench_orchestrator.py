"""Benchmark Orchestrator.process_llm_response: microseconds per model output.

    python scripts/bench_orchestrator.py [--repeat 7]

Cases, each with 6 and with 500 mounted tools: a clean JSON-protocol call, a native OpenAI
Chat Completions call, and a 100 KB prose answer full of braces (code, LaTeX, JSON data) that
holds no call. The tools are real ToolDrivers with pydantic-described arguments; every call is
detected, validated against its schema and executed. Prints medians of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mcs_host import DriverMeta, MCSToolDriver, Orchestrator, Tool
from mcs_host.kit import parse_arguments, tool_from_model


class LookupArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str = Field(description="What to look up.")
    limit: int = Field(10, ge=1, le=100, description="Most results.")


class Lookups(MCSToolDriver):
    """``count`` lookup tools named ``<prefix>_<n>``."""

    def __init__(self, prefix: str, count: int) -> None:
        self.meta = DriverMeta(id=f"bench-{prefix}", name=prefix, version="1.0.0")
        self.tools = [
            tool_from_model(f"{prefix}_{n}", LookupArgs, description=f"Look up in {prefix} {n}.")
            for n in range(count)
        ]

    def list_tools(self) -> list[Tool]:
        return self.tools

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        args = parse_arguments(tool_name, LookupArgs, arguments)
        return {"key": args.key, "hits": args.limit}


def stack(tools: int) -> Orchestrator:
    per_driver = 10 if tools > 10 else tools
    drivers = {f"d{n}": Lookups(f"d{n}", per_driver) for n in range(tools // per_driver)}
    return Orchestrator(drivers)


CLEAN = '{"tool": "d0_3", "arguments": {"key": "oslo", "limit": 5}}'
NATIVE = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "d0_3", "arguments": '{"key": "oslo", "limit": 5}'},
                    }
                ],
            },
        }
    ],
}


def prose(size: int = 100_000) -> str:
    paragraph = (
        "The function `f() { return {a: 1}; }` returns an object, and $\\frac{x}{y} + e^{i\\pi}$ "
        'is math. A record looks like {"name": "Ann", "age": 31} and a list like [1, 2, 3]. '
        "Sets {1, 2} and templates {{user}} appear too; none of this is a tool call.\n"
    )
    return (paragraph * (size // len(paragraph) + 1))[:size]


def median_us(work: Callable[[], object], repeat: int) -> float:
    work()
    runs = []
    for _ in range(repeat):
        count, started = 0, time.perf_counter()
        while True:
            work()
            count += 1
            elapsed = time.perf_counter() - started
            if elapsed > 0.2:
                break
        runs.append(elapsed / count * 1e6)
    return statistics.median(runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    text = prose()
    print(f"Python {platform.python_version()} on {platform.machine()}")
    print()
    print("| output | 6 tools | 500 tools |")
    print("|---|---|---|")
    stacks = {6: stack(6), 500: stack(500)}
    cases: tuple[tuple[str, str | dict[str, Any]], ...] = (
        ("clean JSON call", CLEAN),
        ("native OpenAI call", NATIVE),
        ("100 KB prose, no call", text),
    )
    for case, output in cases:
        timings = []
        for tools, orchestrator in stacks.items():
            response = orchestrator.process_llm_response(output)
            expected = case.startswith("100 KB")
            assert response.is_empty == expected, (case, tools, response)
            timings.append(
                median_us(partial(orchestrator.process_llm_response, output), args.repeat)
            )
        print(f"| {case} | {timings[0]:.1f} µs | {timings[1]:.1f} µs |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
