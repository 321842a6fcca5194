"""Benchmark what importing mcs-host and loading the bundled drivers cost, as cold processes.

    python scripts/bench_import.py [--repeat 15]

Runs in the environment of the interpreter that runs it (scripts/bench.py uses a venv with
mcs-host, the bundled drivers and the reference ``mcs-orchestrator-base`` installed), from the
repository root; ``python -P`` keeps the checkout's own ``mcs_host`` off ``sys.path``, so the
installed one is measured. Each command is a fresh process, run in turn with the other of its
pair after one warm-up round; figures are medians of wall time. The two budgets:

- ``import mcs_host; mcs_host.Orchestrator`` against the reference SDK's
  ``import mcs.orchestrator.base``;
- ``mcs-host load`` of the bundled drivers (scripts/demo/mcs-host.toml) against
  ``mcs-host list --no-verify --json``.

The other rows say where the time of a load goes: the interpreter, pydantic and typer alone,
the first ``Orchestrator()`` (which imports pydantic), and the same load through the Python
API (no typer).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _bench import Budget, emit, process_ms

ROOT = Path(__file__).resolve().parent.parent
CONFIG = "scripts/demo/mcs-host.toml"
API_LOAD = (
    "import os; os.environ['PYDANTIC_DISABLE_PLUGINS'] = '__all__'; "
    f"from mcs_host import load_drivers; load_drivers({CONFIG!r})"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    python = sys.executable
    script = str(Path(python).parent / "mcs-host")
    commands: dict[str, list[str]] = {
        "`python -c pass`": [python, "-P", "-c", "pass"],
        "reference: `import mcs.orchestrator.base`": [
            python,
            "-P",
            "-c",
            "import mcs.orchestrator.base",
        ],
        "`import mcs_host; mcs_host.Orchestrator`": [
            python,
            "-P",
            "-c",
            "import mcs_host; mcs_host.Orchestrator",
        ],
        "... and a first `Orchestrator()`": [
            python,
            "-P",
            "-c",
            "import mcs_host; mcs_host.Orchestrator()",
        ],
        "`from pydantic import BaseModel` alone": [
            python,
            "-P",
            "-c",
            "from pydantic import BaseModel",
        ],
        "`import typer` alone": [python, "-P", "-c", "import typer"],
        "`mcs-host list --no-verify --json`": [script, "list", "--no-verify", "--json"],
        "`mcs-host --version` (answered before any import)": [script, "--version"],
        "`mcs-host load --json` (the bundled drivers)": [
            script,
            "load",
            "--json",
            "--config",
            CONFIG,
        ],
        "`load_drivers()` in a process (no typer)": [python, "-P", "-c", API_LOAD],
    }
    # each budget's pair runs in turn on its own, then the rows that say where time goes
    groups = [
        ["reference: `import mcs.orchestrator.base`", "`import mcs_host; mcs_host.Orchestrator`"],
        ["`mcs-host list --no-verify --json`", "`mcs-host load --json` (the bundled drivers)"],
        [name for name in commands if "reference" not in name and "--json`" not in name],
    ]
    measured: dict[str, float] = {}
    for group in groups:
        figures = process_ms([commands[n] for n in group], args.repeat, cwd=ROOT)
        measured.update(zip(group, figures, strict=True))
    times = {name: measured[name] for name in commands}
    reference = times["reference: `import mcs.orchestrator.base`"]
    listing = times["`mcs-host list --no-verify --json`"]
    lines = [
        "| process | wall time | / reference import | / `list --no-verify --json` |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {name} | {ms:.1f} ms | {ms / reference:.2f}x | {ms / listing:.2f}x |"
        for name, ms in times.items()
    ]
    budgets = [
        Budget(
            "`import mcs_host; mcs_host.Orchestrator` / reference import",
            times["`import mcs_host; mcs_host.Orchestrator`"] / reference,
            1.5,
        ),
        Budget(
            "`mcs-host load` of the bundled drivers / `mcs-host list --no-verify --json`",
            times["`mcs-host load --json` (the bundled drivers)"] / listing,
            4.0,
        ),
    ]
    emit("Import and load as cold processes", lines, budgets, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
