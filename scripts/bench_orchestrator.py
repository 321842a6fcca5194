"""Benchmark process_llm_response: mcs-host's Orchestrator against the reference orchestrator.

    python scripts/bench_orchestrator.py [--repeat 7]

Both orchestrators mount one ToolDriver with 6, then 500, lookup tools whose arguments are
described and checked by a pydantic model, and get the same model outputs: a clean JSON call,
a native OpenAI Chat Completions message with ``tool_calls``, a 490-character prose answer
with no call, and 100 KB of prose full of braces (code, LaTeX, JSON data) with no call. The
reference is ``mcs-orchestrator-base``'s ``BaseOrchestrator`` over ``mcs-driver-core``'s
classes, measured when it is installed (scripts/bench.py installs it). Figures are medians
of ``--repeat`` rounds in which each orchestrator runs for 0.2 s in turn.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from typing import Any

from _bench import Budget, emit, medians_us
from pydantic import BaseModel, ConfigDict, Field

from mcs_host import DriverMeta, MCSToolDriver, Orchestrator, Tool
from mcs_host.kit import parse_arguments, tool_from_model

try:
    from mcs.driver.core import DriverMeta as RefMeta
    from mcs.driver.core import MCSToolDriver as RefToolDriver
    from mcs.driver.core import Tool as RefTool
    from mcs.driver.core import ToolParameter as RefParameter
    from mcs.orchestrator.base import BaseOrchestrator
except ImportError:  # measured without the reference
    BaseOrchestrator = None


class LookupArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str = Field(description="What to look up.")
    limit: int = Field(10, ge=1, le=100, description="Most results.")


class Lookups(MCSToolDriver):
    """``count`` lookup tools named ``lookup_<n>``."""

    def __init__(self, count: int) -> None:
        self.meta = DriverMeta(id="bench-lookups", name="lookups", version="1.0.0")
        self.tools = [
            tool_from_model(f"lookup_{n}", LookupArgs, description=f"Look up in table {n}.")
            for n in range(count)
        ]

    def list_tools(self) -> list[Tool]:
        return self.tools

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        args = parse_arguments(tool_name, LookupArgs, arguments)
        return {"key": args.key, "hits": args.limit}


def reference_stack(count: int) -> Any:
    """The same driver in the reference SDK's classes, in its BaseOrchestrator."""
    assert BaseOrchestrator is not None
    ours = Lookups(count)

    class RefLookups(RefToolDriver):  # type: ignore[misc]
        meta = RefMeta(
            id="bench-lookups",
            name="lookups",
            version="1.0.0",
            bindings=(),
            supported_llms=None,
            capabilities=(),
        )

        def list_tools(self) -> list[Any]:
            return tools

        def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
            return ours.execute_tool(tool_name, arguments)

    tools = [
        RefTool(
            name=t.name,
            description=t.description,
            parameters=[
                RefParameter(p.name, p.description, p.required, p.schema) for p in t.parameters
            ],
        )
        for t in ours.tools
    ]
    stack = BaseOrchestrator()
    stack.add_driver(RefLookups(), label="lookups")
    return stack


CLEAN = '{"tool": "lookup_3", "arguments": {"key": "oslo", "limit": 5}}'
NATIVE = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "lookup_3", "arguments": '{"key": "oslo", "limit": 5}'},
        }
    ],
}
ANSWER = """Here is what I found about the sales figures.

The **units** column sums to 773 across 8 rows; the best month was March (143 units), the worst
January (61). If you want to compute it yourself:

```python
totals = {}
for row in rows:
    totals[row["month"]] = totals.get(row["month"], 0) + int(row["units"])
```

A row looks like `{"month": "March", "units": 143}`. Growth from January to March is about
134%. Let me know if you want a chart or a breakdown by region.
"""


def prose(size: int = 100_000) -> str:
    paragraph = (
        "The function `f() { return {a: 1}; }` returns an object, and $\\frac{x}{y} + e^{i\\pi}$ "
        'is math. A record looks like {"name": "Ann", "age": 31} and a list like [1, 2, 3]. '
        "Sets {1, 2} and templates {{user}} appear too; none of this is a tool call.\n"
    )
    return (paragraph * (size // len(paragraph) + 1))[:size]


CASES: tuple[tuple[str, str | dict[str, Any], bool], ...] = (
    ("clean JSON call", CLEAN, True),
    ("native OpenAI call", NATIVE, True),
    (f"prose answer, {len(ANSWER)} characters", ANSWER, False),
    ("100 KB prose with braces", prose(), False),
)


def _show(us: float) -> str:
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} µs"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = (6, 500)
    ours = {n: Orchestrator({"lookups": Lookups(n)}) for n in sizes}
    reference = {n: reference_stack(n) for n in sizes} if BaseOrchestrator else {}
    lines = [
        "| model output | tools | mcs-host | reference | mcs-host / reference |",
        "|---|---|---|---|---|",
    ]
    budgets = []
    for case, output, is_call in CASES:
        measured: dict[int, float] = {}
        for n in sizes:
            response = ours[n].process_llm_response(output)
            assert response.call_executed == is_call, (case, n, response)
            works = [partial(ours[n].process_llm_response, output)]
            if reference:
                answer = reference[n].process_llm_response(output)
                assert answer.call_executed == is_call, (case, n, answer)
                works.append(partial(reference[n].process_llm_response, output))
            measured[n], *others = medians_us(works, args.repeat)
            if others:
                (theirs,) = others
                lines.append(
                    f"| {case} | {n} | {_show(measured[n])} | {_show(theirs)} | "
                    f"{measured[n] / theirs:.2f}x |"
                )
                if n == sizes[0]:  # the clean call's goal is half the reference's time
                    limit = 0.5 if output is CLEAN else 1.0
                    ratio = measured[n] / theirs
                    budgets.append(Budget(f"{case}, 6 tools, mcs-host / reference", ratio, limit))
            else:
                lines.append(f"| {case} | {n} | {_show(measured[n])} | not installed | |")
        budgets.append(
            Budget(
                f"{case}, 500 tools / 6 tools (flat)", measured[sizes[1]] / measured[sizes[0]], 1.2
            )
        )
    emit("Orchestrator: `process_llm_response`", lines, budgets, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
