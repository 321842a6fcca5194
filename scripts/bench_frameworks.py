"""Benchmark what each agent framework's adapter adds to one tool call: the function the
framework calls (PydanticAI's toolset ``call_tool``, the Agents SDK's ``on_invoke_tool``,
LangChain's tool function and coroutine, llm's ``implementation``) against calling the
orchestrator directly (``execute_tool``, ``aexecute_tool`` on an event loop).

    python scripts/bench_frameworks.py [--calls 2000] [--repeat 7]

Two tools: bench_orchestrator's lookup, in process, which does no work of its own (the worst
case for a relative overhead: what is measured is the call path alone), and the bundled csv
driver's ``read_csv_head``, loaded and verified as the demo loads it (``--tools lookup``
leaves it out where the bundled drivers are not installed as released).
Adapter and clean call alternate round by round; each ratio is the median of the rounds'
ratios. LangChain's own ``invoke``/``ainvoke`` (its callbacks and run managers around our
function) are shown for scale, not budgeted: that cost is LangChain's. Needs the four
frameworks' extras (``scripts/bench.py`` installs them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _bench import Budget, emit
from agents.tool_context import ToolContext
from bench_orchestrator import Lookups
from langchain_core.tools import StructuredTool
from pydantic_ai import RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage

from mcs_host import (
    Loaded,
    LoadReport,
    Orchestrator,
    langchain_tools,
    llm_tools,
    load_drivers,
    openai_agents_tools,
    pydantic_ai_toolset,
)

GOAL = 1.10
"""An adapter's call may take at most 10% longer than the clean call."""
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Case:
    """One tool called the same way through every path."""

    title: str
    loaded: Loaded
    tool: str
    arguments: dict[str, Any]
    check: Callable[[Any], bool]


def lookup_case() -> Case:
    """bench_orchestrator's lookup tool, in process: a call with no work of its own."""
    loaded = Loaded(Orchestrator({"lookups": Lookups(6)}), LoadReport(()))
    expected = {"key": "oslo", "hits": 5}
    return Case(
        "in-process lookup",
        loaded,
        "lookup_3",
        {"key": "oslo", "limit": 5},
        lambda result: result == expected,
    )


def csv_case() -> Case:
    """The bundled csv driver, loaded and verified as the demo loads it: ``read_csv_head``
    of the demo's sales.csv."""
    loaded = load_drivers(ROOT / "scripts" / "demo" / "mcs-host.toml", labels=["csv"])
    return Case(
        "csv `read_csv_head`",
        loaded,
        "read_csv_head",
        {"file": "sales.csv", "rows": 5},
        lambda result: len(result["rows"]) == 5,
    )


def rounds_us(call: Callable[[], Any], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - started) / calls * 1e6


async def arounds_us(call: Callable[[], Awaitable[Any]], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        await call()
    return (time.perf_counter() - started) / calls * 1e6


def compare(
    clean: Callable[[], Any], adapter: Callable[[], Any], calls: int, repeat: int
) -> tuple[float, float, float]:
    """Median µs of ``clean`` and ``adapter``, and the median of their per-round ratios."""
    clean(), adapter()
    pairs = []
    for _ in range(repeat):
        base = rounds_us(clean, calls)
        pairs.append((base, rounds_us(adapter, calls)))
    return _summary(pairs)


async def acompare(
    clean: Callable[[], Awaitable[Any]],
    adapter: Callable[[], Awaitable[Any]],
    calls: int,
    repeat: int,
) -> tuple[float, float, float]:
    """:func:`compare` on the running event loop."""
    await clean()
    await adapter()
    pairs = []
    for _ in range(repeat):
        base = await arounds_us(clean, calls)
        pairs.append((base, await arounds_us(adapter, calls)))
    return _summary(pairs)


def _summary(pairs: list[tuple[float, float]]) -> tuple[float, float, float]:
    return (
        statistics.median(b for b, _ in pairs),
        statistics.median(a for _, a in pairs),
        statistics.median(a / b for b, a in pairs),
    )


def _result(result: Any) -> Any:
    """What an adapter gave, as the tool's own result."""
    if isinstance(result, tuple):  # LangChain's (text, artifact)
        result = result[1]
    if isinstance(result, str):
        result = json.loads(result)
    return result


Row = tuple[str, str, tuple[float, float, float], bool]


def measure(case: Case, calls: int, repeat: int) -> list[Row]:
    """Each adapter's call of ``case`` against the clean call, in the same rounds."""
    loaded, name, arguments = case.loaded, case.tool, case.arguments
    stack = loaded.driver
    rows: list[Row] = []

    def checked(result: Any) -> None:
        assert case.check(_result(result)), result

    def sync_clean() -> Any:
        return stack.execute_tool(name, dict(arguments))

    (llm_tool,) = llm_tools(loaded, tools=name)
    implementation = llm_tool.implementation
    assert implementation is not None
    checked(implementation(**arguments))
    rows.append(
        (
            "llm",
            "`Tool.implementation`",
            compare(sync_clean, lambda: implementation(**arguments), calls, repeat),
            True,
        )
    )
    (chain_tool,) = langchain_tools(loaded, tools=name)
    assert isinstance(chain_tool, StructuredTool)
    func, coroutine = chain_tool.func, chain_tool.coroutine
    assert func is not None
    assert coroutine is not None
    checked(func(**arguments))
    rows.append(
        (
            "LangChain",
            "the tool's `func`",
            compare(sync_clean, lambda: func(**arguments), calls, repeat),
            True,
        )
    )
    rows.append(
        (
            "LangChain",
            "`tool.invoke`, LangChain's own path around it",
            compare(sync_clean, lambda: chain_tool.invoke(arguments), max(calls // 4, 1), repeat),
            False,
        )
    )

    async def asynchronous() -> None:
        async def async_clean() -> Any:
            return await stack.aexecute_tool(name, dict(arguments))

        toolset = pydantic_ai_toolset(loaded, tools=name)
        context = _pydantic_ai_context()
        tool = (await toolset.get_tools(context))[name]

        async def pydantic_ai_call() -> Any:
            return await toolset.call_tool(name, dict(arguments), context, tool)

        checked(await pydantic_ai_call())
        rows.append(
            (
                "PydanticAI",
                "the toolset's `call_tool`",
                await acompare(async_clean, pydantic_ai_call, calls, repeat),
                True,
            )
        )
        (agents_tool,) = openai_agents_tools(loaded, tools=name)
        text = json.dumps(arguments)
        agents_context = _agents_context(name, text)

        async def agents_call() -> Any:
            return await agents_tool.on_invoke_tool(agents_context, text)

        checked(await agents_call())
        rows.append(
            (
                "OpenAI Agents SDK",
                "`FunctionTool.on_invoke_tool`",
                await acompare(async_clean, agents_call, calls, repeat),
                True,
            )
        )

        async def chain_call() -> Any:
            return await coroutine(**arguments)

        checked(await chain_call())
        rows.append(
            (
                "LangChain",
                "the tool's `coroutine`",
                await acompare(async_clean, chain_call, calls, repeat),
                True,
            )
        )

        async def chain_ainvoke() -> Any:
            return await chain_tool.ainvoke(arguments)

        rows.append(
            (
                "LangChain",
                "`tool.ainvoke`, LangChain's own path around it",
                await acompare(async_clean, chain_ainvoke, max(calls // 4, 1), repeat),
                False,
            )
        )

    asyncio.run(asynchronous())
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--tools",
        choices=("both", "lookup"),
        default="both",
        help="lookup: the in-process tool only (where the bundled drivers are not installed "
        "as released, e.g. editable)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cases = [lookup_case()] + ([csv_case()] if args.tools == "both" else [])
    lines = [
        "| tool | framework | what the framework calls | clean call | through the adapter "
        "| adapter / clean |",
        "|---|---|---|---|---|---|",
    ]
    budgets = []
    for case in cases:
        for framework, what, (clean_us, adapter_us, ratio), budgeted in measure(
            case, args.calls, args.repeat
        ):
            lines.append(
                f"| {case.title} | {framework} | {what} | {clean_us:.1f} µs "
                f"| {adapter_us:.1f} µs | {ratio:.2f}x |"
            )
            if budgeted:
                name = f"{framework}, {what}, {case.tool}: adapter / clean call"
                budgets.append(Budget(name, ratio, GOAL))
        case.loaded.close()
    lines += [
        "",
        f"{args.calls:,} sequential calls a round ({max(args.calls // 4, 1):,} through "
        f"LangChain's own path), median of {args.repeat} rounds; the clean call is "
        "`execute_tool` (the sync rows: llm, LangChain's `func` and `invoke`) or "
        "`aexecute_tool` on an event loop (the async rows), alternating with the adapter's "
        "in the same rounds; the ratio is the median of the rounds' ratios.",
    ]
    emit("Agent frameworks: what an adapter adds to a call", lines, budgets, args.json)
    return 0


def _pydantic_ai_context() -> Any:
    return RunContext(deps=None, model=TestModel(), usage=RunUsage())


def _agents_context(name: str, text: str) -> Any:
    return ToolContext(context=None, tool_name=name, tool_call_id="call_1", tool_arguments=text)


if __name__ == "__main__":
    raise SystemExit(main())
