"""Benchmark how the time of a call grows with the size of its result: in process, and from a
driver isolated in a process of its own (its result crosses a pipe as one JSON-RPC line).

    python scripts/bench_isolation_results.py [--sizes 2,10,20] [--repeat 3]

Builds a small driver (one tool, ``text``, answering ``{"text": ...}`` of the asked number of
MiB of ASCII lines), installs its wheel into a directory, pins it in a registry of its own and
mounts it twice: in the host's process, and with ``isolation = "process"`` (``max_result_mb``
raised past the largest size). Each figure is the median of ``--repeat`` calls, after one
call that is checked. The ratios say whether the time grows linearly with the size: 20 MiB
should take about twice 10 MiB (it took 3.3 times as long, 5.8 s, when each line read was
copied again with each chunk of the pipe and a result was sent twice). Needs the
mcs-host[mcp] extra and flit_core (to build the wheel), as the test environment has them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _bench import Budget, emit, install_pinned_driver

from mcs_host import load_drivers

DRIVER_ID = "7c1f0000-0000-4000-8000-00000000b1b5"
SOURCE = """\
from mcs_host import MCSToolDriver, Tool, ToolParameter
from mcs_host.kit import manifest_meta

LINE = "the quick brown fox jumps over the lazy dog, 0123456789\\n"


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        size = ToolParameter(name="mb", description="MiB of text.", schema={"type": "number"})
        return [Tool(name="text", description="Answer MiB of text.", parameters=[size])]

    def execute_tool(self, tool_name, arguments):
        size = int(arguments["mb"] * 2**20)
        return {"text": (LINE * (size // len(LINE) + 1))[:size]}
"""
MANIFEST = {
    "format": "mcs-driver-manifest/1",
    "drivers": {
        "Driver": {
            "id": DRIVER_ID,
            "name": "bench-results",
            "version": "1.0.0",
            "trust": {"publisher": "Bench"},
        }
    },
}
PYPROJECT = """\
[build-system]
requires = ["flit_core>=3.9,<5"]
build-backend = "flit_core.buildapi"

[project]
name = "bench-results"
version = "1.0.0"
description = "mcs-host benchmark driver"
dependencies = ["mcs-host"]

[project.entry-points."mcs.drivers"]
results = "bench_results:Driver"
"""


def install_driver(directory: Path) -> tuple[Path, Path]:
    """Build, install and pin the driver: (the directory it is installed in, the registry)."""
    files = {
        "pyproject.toml": PYPROJECT,
        "bench_results/__init__.py": SOURCE,
        "bench_results/mcs-driver.json": json.dumps(MANIFEST),
    }
    return install_pinned_driver(
        directory, "bench_results", files, driver_id=DRIVER_ID, label="results"
    )


def timings(config: Path, target: Path, sizes: list[float], repeat: int) -> list[float]:
    """Median seconds of a call answering each of ``sizes`` MiB, as ``config`` mounts it."""
    figures = []
    with load_drivers(config, search_path=[str(target)]) as loaded:
        record = loaded.report.get("results")
        assert record is not None, loaded.report
        assert record.status == "mounted", record
        for size in sizes:
            first = loaded.driver.execute_tool("text", {"mb": size})
            assert len(first["text"]) == int(size * 2**20), len(first["text"])
            runs = []
            for _ in range(repeat):
                started = time.perf_counter()
                loaded.driver.execute_tool("text", {"mb": size})
                runs.append(time.perf_counter() - started)
            figures.append(statistics.median(runs))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2,10,20", help="MiB, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [float(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        os.environ["MCS_HOST_STATE_DIR"] = str(directory / "state")
        target, registry = install_driver(directory)
        figures: dict[str, list[float]] = {}
        for isolation in ("none", "process"):
            config = directory / f"{isolation}.toml"
            config.write_text(
                f"registries = [{str(registry)!r}]\nautoload = false\ncall_timeout = 600\n"
                f"[drivers.results]\nisolation = {isolation!r}\n"
                f"max_result_mb = {max(sizes) * 2:g}\n"
            )
            figures[isolation] = timings(config, target, sizes, args.repeat)
    local, isolated = figures["none"], figures["process"]
    lines = [
        "| result | in process | isolated | isolated / in process | isolated / previous size |",
        "|---|---|---|---|---|",
    ]
    for index, size in enumerate(sizes):
        growth = "" if index == 0 else f"{isolated[index] / isolated[index - 1]:.2f}x"
        lines.append(
            f"| {size:g} MiB | {local[index] * 1000:.1f} ms | {isolated[index] * 1000:.0f} ms | "
            f"{isolated[index] / local[index]:.0f}x | {growth} |"
        )
    budgets: list[Budget] = []
    if len(sizes) > 1:
        factor = sizes[-1] / sizes[-2]
        budgets.append(
            Budget(
                f"an isolated result of {sizes[-1]:g} MiB against {sizes[-2]:g} MiB "
                f"({factor:g}x the size)",
                isolated[-1] / isolated[-2],
                factor * 1.5,  # linear, with room for a busy machine (quadratic: factor**2)
            )
        )
    emit("Isolation: the time of a call against the size of its result", lines, budgets, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
