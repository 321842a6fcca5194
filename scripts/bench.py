"""Run every benchmark side by side with the alternatives, and print one report.

    python3.11 scripts/bench.py            # set up .venvs/bench, run all, print the report
    python3.11 scripts/bench.py --write    # ...and write it into docs/benchmarks.md
    python3.11 scripts/bench.py --quick    # fewer repeats, smaller sizes: a smoke run

Sets up ``.venvs/bench`` with this checkout's mcs-host and the bundled drivers (installed as a
user installs them, not editable) plus the peers measured against it: stevedore, and the
reference ``mcs-orchestrator-base`` with ``mcs-driver-core`` (pluggy is a dependency of
mcs-host), and flit_core to build the isolation scripts' drivers; and ``.venvs/bench-bare``
with this checkout's mcs-host alone, where bench_cli.py times each command with nothing to
verify. Then runs, each in the first venv, scripts/bench_discovery.py, bench_cli.py,
bench_digest.py, bench_orchestrator.py, bench_mcp.py, bench_detection.py, bench_load.py,
bench_scale.py, bench_wheels.py, bench_add.py, bench_import.py, bench_csv.py and
bench_streaming.py, and
prints their tables and every budget with its verdict; then the isolation section's:
bench_isolation_start.py,
bench_isolation_results.py and bench_isolation_faults.py (``--only main`` or ``--only
isolation`` runs one of the two). ``--write`` replaces the text between the
``bench:begin`` and ``bench:end`` markers of docs/benchmarks.md with the first report, and
between ``isolation:begin`` and ``isolation:end`` with the second.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venvs" / "bench"
BARE = ROOT / ".venvs" / "bench-bare"
"""This checkout's mcs-host and what it requires, nothing else: bench_cli.py times each
command's start-up there, where there is nothing to verify."""
PLUGINS = sorted(p for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file())
PEERS = ["stevedore==5.10.0", "mcs-orchestrator-base==0.2.0", "mcs-driver-core==0.4.1"]
TOOLS = ["flit_core>=3.9,<5"]
"""What the isolation scripts build their drivers' wheels with."""
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
EXTRAS = ("mcp", "pydantic-ai", "openai-agents", "langchain", "llm")
"""mcs-host's extras in the benchmark venv: serve, and the agent frameworks' adapters."""

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
    "bench_add.py": (["--repeat", "5"], ["--repeat", "1"]),
    "bench_import.py": (["--repeat", "15"], ["--repeat", "3"]),
    "bench_csv.py": (["--mib", "60", "--repeat", "3"], ["--mib", "8", "--repeat", "1"]),
    "bench_streaming.py": (["--mb", "10", "--repeat", "3"], ["--mb", "1", "--repeat", "1"]),
}
ISOLATION = {
    "bench_isolation_start.py": (["--repeat", "5"], ["--repeat", "1", "--count", "4"]),
    "bench_isolation_results.py": (["--repeat", "3"], ["--repeat", "1", "--sizes", "2,10"]),
    "bench_isolation_faults.py": (["--repeat", "1"], ["--repeat", "1"]),
}
"""Written into the README's section on isolation, between its own markers."""
ISOLATION_BEGIN, ISOLATION_END = "<!-- isolation:begin -->", "<!-- isolation:end -->"


def setup(where: Path = VENV, local: tuple[str, ...] = (), others: tuple[str, ...] = ()) -> Path:
    """The python of the venv ``where``, with this checkout's mcs-host and ``local`` projects
    (reinstalled every run: the version number does not change) and the ``others``."""
    python = where / "bin" / "python"
    if not python.exists():
        print(f"creating {where.relative_to(ROOT)}", flush=True)
        venv.create(where, with_pip=True)
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    pip = [str(python), "-m", "pip", "install", "-q"]
    if others:
        subprocess.run([*pip, *others], check=True, env=env)
    checkout = [f".[{','.join(EXTRAS)}]" if where == VENV else ".", *local]
    subprocess.run(
        [*pip, "--force-reinstall", "--no-deps", *checkout], cwd=ROOT, check=True, env=env
    )
    subprocess.run([*pip, *checkout], cwd=ROOT, check=True, env=env)
    return python


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write", action="store_true", help="write the report into docs/benchmarks.md"
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats and smaller sizes")
    parser.add_argument(
        "--only",
        choices=("all", "main", "isolation"),
        default="all",
        help="run the main report's scripts, or the isolation section's, or both",
    )
    args = parser.parse_args()
    python = setup(VENV, tuple(str(p.relative_to(ROOT)) for p in PLUGINS), (*PEERS, *TOOLS))
    bare = setup(BARE) if args.only in ("all", "main") else None
    extra = {"bench_cli.py": ["--environment", str(bare)]} if bare is not None else {}
    blocks = []
    if args.only in ("all", "main"):
        blocks.append((SCRIPTS, BEGIN, END))
    if args.only in ("all", "isolation"):
        blocks.append((ISOLATION, ISOLATION_BEGIN, ISOLATION_END))
    texts = []
    for scripts, begin, end in blocks:
        text = report(python, scripts, args.quick, extra)
        if text is None:
            return 1
        print(text)
        texts.append((begin, end, text))
    if args.write:
        page = ROOT / "docs" / "benchmarks.md"
        current = page.read_text(encoding="utf-8")
        for begin, end, text in texts:
            if begin not in current or end not in current:
                print(f"docs/benchmarks.md has no {begin} ... {end} block", file=sys.stderr)
                return 1
            head, _, rest = current.partition(begin)
            shown = re.sub(r"^#### ", "### ", text, flags=re.MULTILINE)  # under the page's ##
            current = f"{head}{begin}\n{shown}{end}{rest.partition(end)[2]}"
        page.write_text(current, encoding="utf-8")
        print("wrote the report into docs/benchmarks.md", file=sys.stderr)
    return 0


def report(
    python: Path,
    scripts: dict[str, tuple[list[str], list[str]]],
    quick: bool,
    extra: dict[str, list[str]],
) -> str | None:
    """Run ``scripts`` in the bench venv (each with its ``extra`` arguments): their sections
    and budgets as Markdown (None: one failed, and said why on stderr)."""
    sections = []
    started = time.monotonic()
    for script, (full, fewer) in scripts.items():
        print(f"running {script}", file=sys.stderr, flush=True)
        done = subprocess.run(
            [
                *(str(python), str(ROOT / "scripts" / script), "--json"),
                *(fewer if quick else full),
                *extra.get(script, []),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            print(done.stdout + done.stderr, file=sys.stderr)
            return None
        sections.append(json.loads(done.stdout))
    names = " ".join(f"`{s}`" for s in scripts) if scripts is ISOLATION else "`scripts/bench.py`"
    lines = [
        f"{names} on {sections[0]['machine']}; "
        f"{time.monotonic() - started:.0f} s" + (" (--quick)" if quick else "") + ".",
        "",
    ]
    for section in sections:
        lines += [f"#### {section['title']}", "", *section["markdown"], ""]
    budgets = [b for section in sections for b in section["budgets"]]
    lines += ["#### Budgets", ""]
    lines += [f"- {b['line']}" for b in budgets]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
