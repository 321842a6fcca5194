"""Benchmark the command line's fixed start-up: each command as a whole cold process, against
``python -c pass`` measured in the same run.

    python scripts/bench_cli.py [--repeat 21] [--environment PYTHON]

Runs in the environment of the interpreter that runs it (scripts/bench.py uses a venv with
mcs-host and the bundled drivers installed). Each command is a fresh process, run in turn
with the others after one warm-up round; figures are medians of wall time, and each is given
as a ratio to ``python -c pass``, the interpreter alone, measured in the same rounds:

- ``python -c "...entry_points(group='mcs.drivers')"``, the bare stdlib entry point scan, and
  ``mcs-host list --no-verify --json`` over this environment, the way a user runs it;
- ``mcs-host --version`` and ``mcs-host version``;
- ``mcs-host list``, ``verify`` and ``load`` where there is nothing to verify: what each
  costs before it has anything to do. That is the environment of ``--environment``'s
  interpreter (mcs-host installed with what it requires, nothing else: scripts/bench.py makes
  one), each command as a user types it; without it, this environment with ``--path`` an
  empty directory. Either way no configuration file nor registry (``XDG_CONFIG_HOME`` and the
  state and cache directories are empty ones of their own, run from an empty directory).
  ``load`` of nothing exits 1 (nothing mounted); any other exit stops the benchmark.

Beside each, the modules its process imports (``python -X importtime``, once; the
interpreter's own included, as for ``python -c pass``, which runs in the same environment as
the commands).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _bench import Budget, emit, process_ms

STDLIB_SCAN = "from importlib.metadata import entry_points; entry_points(group='mcs.drivers')"
FLOOR = "`python -c pass`"
EMPTY = "EMPTY"
"""Replaced by ``--path`` and an empty directory, or by nothing in an ``--environment``."""

STARTUP = {  # name: (arguments of mcs-host, its exit code)
    "`mcs-host --version`": (["--version"], 0),
    "`mcs-host version`": (["version"], 0),
    "`mcs-host list`": (["list", EMPTY], 0),
    "`mcs-host verify`": (["verify", EMPTY], 0),
    "`mcs-host load`": (["load", EMPTY], 1),
}
"""The commands whose fixed start-up is measured, on an environment with nothing to verify."""
BUDGETS = {
    "`mcs-host --version`": ("`mcs-host --version` / `python -c pass`", 3.0),
    "`mcs-host verify`": ("`mcs-host verify` of nothing / `python -c pass`", 15.0),
}
"""Limits on the ratio to ``python -c pass``: ``--version`` imports nothing but the console
script; ``verify`` of nothing is the start-up ``list`` and ``load`` share (the command line,
the configuration and the registries read)."""


def modules(python: str, command: list[str], env: dict[str, str], cwd: str) -> int:
    """How many modules ``command`` (a Python script or ``-c`` and its arguments) imports."""
    done = subprocess.run(
        [python, "-X", "importtime", *command],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
    )
    return sum(1 for line in done.stderr.splitlines() if line.startswith("import time:")) - 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--environment",
        metavar="PYTHON",
        help="the interpreter of an environment with mcs-host and nothing to verify",
    )
    args = parser.parse_args()
    python = os.path.abspath(args.environment) if args.environment else sys.executable
    ours = str(Path(sys.executable).parent / "mcs-host")
    script = str(Path(python).parent / "mcs-host")
    with tempfile.TemporaryDirectory(prefix="mcs-host-cli-") as tmp:
        empty = os.path.join(tmp, "empty")
        os.mkdir(empty)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MCS_HOST_", "PYTHON"))}
        env.update(
            XDG_CONFIG_HOME=os.path.join(tmp, "config"),
            MCS_HOST_STATE_DIR=os.path.join(tmp, "state"),
            MCS_HOST_CACHE_DIR=os.path.join(tmp, "cache"),
        )
        given = {EMPTY: [] if args.environment else ["--path", empty]}
        scripts = {  # name: (the interpreter, what it runs, its exit code)
            FLOOR: (python, ["-c", "pass"], 0),
            "stdlib `entry_points(group=)` scan": (sys.executable, ["-c", STDLIB_SCAN], 0),
            "`mcs-host list --no-verify --json` (this environment)": (
                sys.executable,
                [ours, "list", "--no-verify", "--json"],
                0,
            ),
            **{
                name: (python, [script, *(w for a in words for w in given.get(a, [a]))], code)
                for name, (words, code) in STARTUP.items()
            },
        }
        commands = [[interpreter, *words] for interpreter, words, _ in scripts.values()]
        codes = [code for _, _, code in scripts.values()]
        medians = process_ms(commands, args.repeat, codes, env=env, cwd=empty)
        times = dict(zip(scripts, medians, strict=True))
        counts = {
            name: modules(interpreter, words, env, empty)
            for name, (interpreter, words, _) in scripts.items()
        }
    floor, stdlib = times[FLOOR], times["stdlib `entry_points(group=)` scan"]
    lines = [
        "| process | wall time | / `python -c pass` | modules imported |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {name} | {ms:.1f} ms | {ms / floor:.2f}x | {counts[name]} |"
        for name, ms in times.items()
    ]
    listing = times["`mcs-host list --no-verify --json` (this environment)"]
    name = "`mcs-host list --no-verify --json` / stdlib scan, cold"
    budgets = [Budget(name, listing / stdlib, 2.0)]
    for command, (label, limit) in BUDGETS.items():
        budgets.append(Budget(label, times[command] / floor, limit))
    emit("Cold start: each command's fixed start-up", lines, budgets, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
