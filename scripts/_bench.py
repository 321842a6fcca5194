"""What the benchmark scripts share: medians, fresh processes, budgets and their output.

Each ``bench_*.py`` prints its table as Markdown, or with ``--json`` an object with its
``title``, ``markdown`` lines and ``budgets``, which ``scripts/bench.py`` gathers.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Budget:
    """A figure and the limit it must keep: ``measured <= limit`` (or ``>=`` with ``at_least``)."""

    name: str
    measured: float
    limit: float
    unit: str = "x"
    at_least: bool = False

    @property
    def met(self) -> bool:
        return self.measured >= self.limit if self.at_least else self.measured <= self.limit

    def line(self) -> str:
        sign = ">=" if self.at_least else "<="
        verdict = "met" if self.met else "MISSED"
        budget = f"budget {sign} {self.limit:g}{self.unit}"
        return f"{self.name}: {self.measured:.2f}{self.unit} ({budget}): {verdict}"


SCIENCE_DRIVER = """\
import numpy as np
import pandas as pd

from mcs_host import MCSToolDriver, Tool, ToolParameter
from mcs_host.kit import manifest_meta

ARRAY = {"type": "array"}


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [
            Tool(
                name="solve",
                description="Solve A x = b; describe x.",
                parameters=[
                    ToolParameter(name="matrix", description="A", required=True, schema=ARRAY),
                    ToolParameter(name="vector", description="b", required=True, schema=ARRAY),
                ],
            )
        ]

    def execute_tool(self, tool_name, arguments):
        x = np.linalg.solve(np.array(arguments["matrix"]), np.array(arguments["vector"]))
        return {"x": [float(v) for v in x], "mean": float(pd.DataFrame({"x": x})["x"].mean())}
"""
"""The module of a driver whose tool ``solve`` solves A x = b with numpy and describes x with
pandas (scripts/bench_wheels.py and scripts/bench_add.py build it)."""


def machine() -> str:
    """The machine a figure comes from, in one line."""
    return (
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs"
    )


def medians_us(
    works: Sequence[Callable[[], object]], repeat: int, at_least: float = 0.2
) -> list[float]:
    """Median microseconds per call of each of ``works`` over ``repeat`` rounds; in a round
    each runs for ``at_least`` seconds in turn, so drift in the machine hits them all alike."""
    for work in works:
        work()
    runs: list[list[float]] = [[] for _ in works]
    for _ in range(repeat):
        for index, work in enumerate(works):
            count, started = 0, time.perf_counter()
            while True:
                work()
                count += 1
                elapsed = time.perf_counter() - started
                if elapsed >= at_least:
                    break
            runs[index].append(elapsed / count * 1e6)
    return [statistics.median(r) for r in runs]


def process_ms(
    commands: Sequence[Sequence[str]],
    repeat: int,
    codes: Sequence[int] | None = None,
    **kwargs: object,
) -> list[float]:
    """Median wall milliseconds of each command as a fresh process, run in turn ``repeat``
    times after one warm-up round (so drift hits them all alike). Each must exit 0, or with
    its entry of ``codes``; any other exit stops the benchmark, saying what it printed."""
    times: list[list[float]] = [[] for _ in commands]
    expected = list(codes) if codes is not None else [0] * len(commands)
    for round_ in range(repeat + 1):
        for index, command in enumerate(commands):
            started = time.perf_counter()
            done = subprocess.run(command, capture_output=True, check=False, **kwargs)  # type: ignore[call-overload]
            elapsed = (time.perf_counter() - started) * 1000
            if done.returncode != expected[index]:
                said = (done.stdout + done.stderr)[-2000:]
                raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {said!r}")
            if round_:
                times[index].append(elapsed)
    return [statistics.median(t) for t in times]


def emit(title: str, markdown: list[str], budgets: list[Budget], as_json: bool) -> None:
    """Print the section: Markdown (with the budgets below it), or JSON for bench.py."""
    if as_json:
        print(
            json.dumps(
                {
                    "title": title,
                    "machine": machine(),
                    "markdown": markdown,
                    "budgets": [{**asdict(b), "met": b.met, "line": b.line()} for b in budgets],
                }
            )
        )
        return
    print(f"## {title}\n")
    print(machine() + "\n")
    print("\n".join(markdown))
    if budgets:
        print()
        for budget in budgets:
            print(f"- {budget.line()}")
    sys.stdout.flush()


def install_pinned_driver(
    directory: Path,
    package: str,
    files: dict[str, str],
    *,
    driver_id: str,
    label: str,
) -> tuple[Path, Path]:
    """Build the driver project ``files`` (paths under the project, ``pyproject.toml``
    among them; its distribution is ``package`` with dashes, version 1.0.0, the class
    ``package:Driver``) with flit_core, install its wheel into ``directory/site`` and pin it
    as ``label`` in a registry of its own: (the site directory, the registry)."""
    from mcs_host.trust.registry import REGISTRY_FORMAT  # noqa: PLC0415 - the host's
    from mcs_host.trust.release import release_from_wheel  # noqa: PLC0415

    source = directory / "src"
    for name, text in files.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(text)
    hook = "import sys, flit_core.buildapi as b; print(b.build_wheel(sys.argv[1]))"
    wheels = directory / "wheels"
    wheels.mkdir()
    built = subprocess.run(
        [sys.executable, "-c", hook, str(wheels)],
        cwd=source,
        check=True,
        capture_output=True,
        text=True,
    )
    wheel = wheels / built.stdout.strip().splitlines()[-1]
    target = directory / "site"
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index"),
            *("--disable-pip-version-check", "--target", str(target), str(wheel)),
        ],
        check=True,
    )
    pin = release_from_wheel(wheel).pin().model_dump(mode="json", exclude_none=True)
    entry = {
        "distribution": package.replace("_", "-"),
        "label": label,
        "object": f"{package}:Driver",
        "trust": "community",
        "releases": {"1.0.0": pin},
    }
    registry = directory / "registry.json"
    registry.write_text(json.dumps({"format": REGISTRY_FORMAT, "drivers": {driver_id: entry}}))
    return target, registry
