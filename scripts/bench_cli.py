"""Benchmark ``mcs-host list --no-verify --json`` as a whole cold process against the bare
stdlib scan.

    python scripts/bench_cli.py [--repeat 21]

Runs in the environment of the interpreter that runs it (scripts/bench.py uses a venv with
mcs-host and the bundled drivers installed). Each command is a fresh process, run in turn
with the others after one warm-up round; figures are medians of wall time:

- ``python -c pass``: the interpreter alone;
- ``python -c "...entry_points(group='mcs.drivers')"``: the bare stdlib entry point scan;
- ``mcs-host list --no-verify --json``: discovery and its JSON, the way a user runs it;
- ``mcs-host --version``: a command that goes through typer, for comparison.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _bench import Budget, emit, process_ms

STDLIB_SCAN = "from importlib.metadata import entry_points; entry_points(group='mcs.drivers')"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    script = Path(sys.executable).parent / "mcs-host"
    commands = {
        "`python -c pass`": [sys.executable, "-c", "pass"],
        "stdlib `entry_points(group=)` scan": [sys.executable, "-c", STDLIB_SCAN],
        "`mcs-host list --no-verify --json`": [str(script), "list", "--no-verify", "--json"],
        "`mcs-host --version` (through typer)": [str(script), "--version"],
    }
    times = dict(zip(commands, process_ms(list(commands.values()), args.repeat), strict=True))
    stdlib = times["stdlib `entry_points(group=)` scan"]
    lines = ["| process | wall time | / stdlib scan |", "|---|---|---|"]
    lines += [f"| {name} | {ms:.1f} ms | {ms / stdlib:.2f}x |" for name, ms in times.items()]
    listing = times["`mcs-host list --no-verify --json`"]
    name = "`mcs-host list --no-verify --json` / stdlib scan, cold"
    budgets = [Budget(name, listing / stdlib, 2.0)]
    emit("Cold start: `mcs-host list --no-verify --json`", lines, budgets, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
