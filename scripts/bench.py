"""Run every benchmark side by side with the alternatives, and print one report.

    python3.11 scripts/bench.py            # set up .venvs/bench, run all, print the report
    python3.11 scripts/bench.py --readme   # ...and write it into README.md
    python3.11 scripts/bench.py --quick    # fewer repeats, smaller sizes: a smoke run

Sets up ``.venvs/bench`` with this checkout's mcs-host and the bundled drivers (installed as a
user installs them, not editable) plus the peers measured against it: stevedore, and the
reference ``mcs-orchestrator-base`` with ``mcs-driver-core`` (pluggy is a dependency of
mcs-host). Then runs, each in that venv, scripts/bench_discovery.py, bench_cli.py,
bench_digest.py, bench_orchestrator.py, bench_mcp.py, bench_detection.py, bench_load.py,
bench_scale.py, bench_wheels.py, bench_import.py and bench_csv.py, and prints their tables
and every budget with its verdict. ``--readme`` replaces the text between the
``bench:begin`` and ``bench:end`` markers of README.md with the report.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venvs" / "bench"
PLUGINS = sorted(p for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file())
PEERS = ["stevedore==5.10.0", "mcs-orchestrator-base==0.2.0", "mcs-driver-core==0.4.1"]
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"

SCRIPTS = {
    "bench_discovery.py": (["--repeat", "7"], ["--repeat", "3", "--sizes", "10,100"]),
    "bench_cli.py": (["--repeat", "21"], ["--repeat", "5"]),
    "bench_digest.py": (["--repeat", "7"], ["--repeat", "3", "--large-mib", "64"]),
    "bench_orchestrator.py": (["--repeat", "7"], ["--repeat", "3"]),
    "bench_mcp.py": (["--calls", "300", "--repeat", "5"], ["--calls", "50", "--repeat", "2"]),
    "bench_detection.py": (
        ["--sizes", "1,10", "--repeat", "3"],
        ["--sizes", "0.1,1", "--repeat", "1"],
    ),
    "bench_load.py": (["--repeat", "11"], ["--repeat", "3"]),
    "bench_scale.py": (["--repeat", "5"], ["--repeat", "1", "--sizes", "10,100"]),
    "bench_wheels.py": (["--repeat", "7"], ["--repeat", "1"]),
    "bench_import.py": (["--repeat", "15"], ["--repeat", "3"]),
    "bench_csv.py": (["--mib", "60", "--repeat", "3"], ["--mib", "8", "--repeat", "1"]),
}


def setup() -> Path:
    """The bench venv's python, with this checkout's mcs-host and the peers installed."""
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"creating {VENV.relative_to(ROOT)}", flush=True)
        venv.create(VENV, with_pip=True)
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, *PEERS], check=True, env=env)
    # this checkout's code, reinstalled every run: the version number does not change
    local = [".[mcp]", *(str(p.relative_to(ROOT)) for p in PLUGINS)]
    subprocess.run([*pip, "--force-reinstall", "--no-deps", *local], cwd=ROOT, check=True, env=env)
    subprocess.run([*pip, *local], cwd=ROOT, check=True, env=env)
    return python


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readme", action="store_true", help="write the report into README.md")
    parser.add_argument("--quick", action="store_true", help="fewer repeats and smaller sizes")
    args = parser.parse_args()
    python = setup()
    sections = []
    started = time.monotonic()
    for script, (full, quick) in SCRIPTS.items():
        print(f"running {script}", file=sys.stderr, flush=True)
        done = subprocess.run(
            [
                str(python),
                str(ROOT / "scripts" / script),
                "--json",
                *(quick if args.quick else full),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            print(done.stdout + done.stderr, file=sys.stderr)
            return 1
        sections.append(json.loads(done.stdout))
    report = [
        f"`python3.11 scripts/bench.py` on {sections[0]['machine']}; "
        f"{time.monotonic() - started:.0f} s" + (" (--quick)" if args.quick else "") + ".",
        "",
    ]
    for section in sections:
        report += [f"#### {section['title']}", "", *section["markdown"], ""]
    budgets = [b for section in sections for b in section["budgets"]]
    report += ["#### Budgets", ""]
    report += [f"- {b['line']}" for b in budgets]
    text = "\n".join(report) + "\n"
    print(text)
    if args.readme:
        readme = ROOT / "README.md"
        current = readme.read_text(encoding="utf-8")
        if BEGIN not in current or END not in current:
            print(f"README.md has no {BEGIN} ... {END} block", file=sys.stderr)
            return 1
        head, _, rest = current.partition(BEGIN)
        tail = rest.partition(END)[2]
        readme.write_text(f"{head}{BEGIN}\n{text}{END}{tail}", encoding="utf-8")
        print("wrote the report into README.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
