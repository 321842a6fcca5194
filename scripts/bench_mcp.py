"""Benchmark the per-call cost of MCP and of isolation: a tool called in process, through
`mcp_server` with the SDK's in-memory client, through `MCPToolDriver` from a child process
over stdio; and the bundled files driver loaded in process, isolated, and served by
`mcs-host serve`.

    python scripts/bench_mcp.py [--calls 300] [--repeat 5]

One ToolDriver with a lookup tool (bench_orchestrator's, 6 tools) answers every call. In
process is ``Orchestrator.process_llm_response`` of a clean call; "MCP in memory" is the
SDK's ``Client`` connected to ``mcp_server(stack)`` in the same process (the protocol
without a pipe); "MCP over stdio"
is an orchestrator mounting ``MCPToolDriver`` on a child Python that serves the same stack
with ``mcp_server`` over stdio: what a driver in its own process costs per call. The last
three rows are the installed, pinned files driver's ``stat`` tool (a real driver, verified
as a load verifies it): ``load_drivers`` in process, the same with ``isolation =
"process"`` (a child ``mcs-host`` that verified it again), and the SDK's client calling
``mcs-host serve`` over stdio. Figures are medians over ``--repeat`` rounds of ``--calls``
sequential calls. Needs the mcs-host[mcp] extra and the bundled drivers installed (as
``scripts/bench.py`` sets up).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from _bench import Budget, emit
from bench_orchestrator import Lookups
from mcp import Client

from mcs_host import Orchestrator
from mcs_host.bridge.client import MCPToolDriver
from mcs_host.bridge.server import mcp_server

CHILD = """\
import sys
sys.path.insert(0, {scripts!r})
import anyio
from mcp.server.stdio import stdio_server
from bench_orchestrator import Lookups
from mcs_host import Orchestrator
from mcs_host.bridge.server import mcp_server

server = mcp_server(Orchestrator({{"lookups": Lookups(6)}}))


async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
"""
ARGUMENTS = {"key": "oslo", "limit": 5}
CALL = '{"tool": "lookup_3", "arguments": {"key": "oslo", "limit": 5}}'


def per_call_us(call: Any, calls: int, repeat: int) -> float:
    call()
    rounds = []
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(calls):
            call()
        rounds.append((time.perf_counter() - started) / calls * 1e6)
    return statistics.median(rounds)


async def client_us(
    client: Client, tool: str, arguments: dict[str, Any], calls: int, repeat: int
) -> float:
    """:func:`per_call_us` of ``client.call_tool(tool, arguments)``, the first call checked."""
    first = await client.call_tool(tool, arguments)
    assert not first.is_error, first
    rounds = []
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(calls):
            await client.call_tool(tool, arguments)
        rounds.append((time.perf_counter() - started) / calls * 1e6)
    return statistics.median(rounds)


def in_memory_us(calls: int, repeat: int) -> float:
    server = mcp_server(Orchestrator({"lookups": Lookups(6)}))

    async def main() -> float:
        async with Client(server) as client:
            return await client_us(client, "lookup_3", ARGUMENTS, calls, repeat)

    result: float = anyio.run(main)
    return result


ROOT = Path(__file__).resolve().parent.parent
STAT = {"path": "sales.csv"}


def write_config(directory: Path, isolation: str) -> Path:
    """A configuration mounting only the files driver on the demo data."""
    path = directory / f"{isolation}.toml"
    path.write_text(
        f"registries = [{str(ROOT / 'registry.json')!r}]\n"
        "autoload = false\n"
        f"isolation = {isolation!r}\n"
        "[drivers.files]\n"
        f"settings = {{ root = {str(ROOT / 'scripts' / 'demo' / 'data')!r} }}\n"
    )
    return path


def files_driver_us(directory: Path, calls: int, repeat: int) -> tuple[float, float, float]:
    """Per call of the files driver's stat: in process, isolated, through mcs-host serve."""
    from mcp import StdioServerParameters  # noqa: PLC0415
    from mcp.client.stdio import stdio_client  # noqa: PLC0415

    from mcs_host import load_drivers  # noqa: PLC0415

    figures = []
    for isolation in ("none", "process"):
        with load_drivers(write_config(directory, isolation)) as loaded:
            record = loaded.report.get("files")
            assert record is not None, loaded.report
            assert record.status == "mounted", record
            assert (record.isolation == "process") == (isolation == "process")
            call = partial(loaded.driver.execute_tool, "stat", STAT)
            figures.append(per_call_us(call, calls, repeat))
    command = Path(sys.executable).parent / "mcs-host"
    server = StdioServerParameters(
        command=str(command),
        args=["serve", "--config", str(write_config(directory, "none"))],
        env={"MCS_HOST_STATE_DIR": os.environ["MCS_HOST_STATE_DIR"]},
        cwd=str(ROOT),
    )

    async def served() -> float:
        with open(os.devnull, "w") as quiet:  # its load report
            async with Client(stdio_client(server, errlog=quiet)) as client:
                return await client_us(client, "stat", STAT, calls, repeat)

    serve: float = anyio.run(served)
    return figures[0], figures[1], serve


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    local = Orchestrator({"lookups": Lookups(6)})
    in_process = per_call_us(lambda: local.process_llm_response(CALL), args.calls, args.repeat)
    memory = in_memory_us(args.calls, args.repeat)
    scripts = str(Path(__file__).resolve().parent)
    child = MCPToolDriver([sys.executable, "-c", CHILD.format(scripts=scripts)], name="child")
    try:
        remote = Orchestrator({"lookups": child})
        answer = remote.execute_tool("lookup_3", dict(ARGUMENTS))
        assert answer == {"key": "oslo", "hits": 5}, answer
        stdio = per_call_us(
            lambda: remote.execute_tool("lookup_3", dict(ARGUMENTS)), args.calls, args.repeat
        )
    finally:
        child.close()
    with tempfile.TemporaryDirectory() as directory:
        os.environ["MCS_HOST_STATE_DIR"] = os.path.join(directory, "state")
        files, isolated, served = files_driver_us(Path(directory), args.calls, args.repeat)
    lines = [
        "| path of a call | per call | / in process |",
        "|---|---|---|",
        f"| in process (`process_llm_response`) | {in_process:.1f} µs | 1.00x |",
        f"| MCP in memory (`mcp_server` + the SDK's client) | {memory:.0f} µs | "
        f"{memory / in_process:.0f}x |",
        f"| MCP over stdio (`MCPToolDriver` on a child process) | {stdio:.0f} µs | "
        f"{stdio / in_process:.0f}x |",
        "",
        "| the files driver's `stat` | per call | / in process |",
        "|---|---|---|",
        f"| in process (`load_drivers`, `execute_tool`) | {files:.0f} µs | 1.00x |",
        f'| isolated (`isolation = "process"`) | {isolated:.0f} µs | {isolated / files:.0f}x |',
        f"| `mcs-host serve` (the SDK's client, stdio) | {served:.0f} µs | {served / files:.0f}x |",
    ]
    budgets = [
        Budget("a call over stdio to a driver's own process", stdio / 1000, 5, unit=" ms"),
        Budget("a call to an isolated driver", isolated / 1000, 5, unit=" ms"),
    ]
    emit("MCP: the cost of a call", lines, budgets, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
