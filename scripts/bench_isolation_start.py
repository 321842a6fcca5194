"""Benchmark how isolated drivers start: one against ten, with the host's fork server and
with each child started as a process of its own, and the memory their processes take.

    python scripts/bench_isolation_start.py [--repeat 5] [--count 10]

Mounts the bundled ``files`` driver (pinned in this checkout's registry.json, installed in
the environment that runs this) under 1 and ``--count`` labels in a fresh process each time:
in the host's process, isolated (each mount in a child host forked by the fork server), and
isolated with ``MCS_HOST_FORK_SERVER=0`` (each child a ``python -I -m mcs_host serve
--isolated`` of its own, as before the fork server). Each figure is the median of
``--repeat`` processes: the seconds ``load_drivers`` takes until every tool is listed, and
the proportional set size (PSS: a shared page counts for each process a share) of the
host, of each child and of the fork server, read from ``/proc/PID/smaps_rollup`` once all
are ready (Linux). Needs the mcs-host[mcp] extra and the bundled drivers installed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _bench import Budget, emit

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "registry.json"
RUNNER = """\
import json, os, sys, time
from mcs_host import load_drivers
from mcs_host._descendants import descendants

def pss(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as file:
            for line in file:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0

def role(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            words = file.read().split(b"\\0")
    except OSError:
        return "gone"
    return "fork-server" if b"fork-server" in words else "child"

started = time.perf_counter()
loaded = load_drivers(config=sys.argv[1], registries=[sys.argv[2]])
tools = loaded.driver.list_tools()
seconds = time.perf_counter() - started
mounted = sum(r.status == "mounted" for r in loaded.report.records)
processes = [(role(pid), pss(pid)) for pid in descendants(os.getpid())]
print(json.dumps({
    "seconds": seconds,
    "mounted": mounted,
    "tools": len(tools),
    "host": pss(os.getpid()),
    "children": [p for r, p in processes if r == "child"],
    "fork_server": [p for r, p in processes if r == "fork-server"],
}))
loaded.close()
"""


def config(directory: Path, count: int, isolated: bool) -> Path:
    """A configuration that mounts the files driver ``count`` times."""
    lines = ["autoload = false", f'isolation = "{"process" if isolated else "none"}"']
    for index in range(count):
        lines += [
            f"[drivers.files{index}]",
            'driver = "files"',
            f'settings = {{ root = "{directory}" }}',
        ]
    path = directory / f"mcs-host-{count}-{isolated}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run(path: Path, fork_server: bool, count: int) -> dict[str, object]:
    """One fresh process loading ``path``: what the runner measured."""
    env = {**os.environ, "MCS_HOST_FORK_SERVER": "1" if fork_server else "0"}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(path), str(REGISTRY)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=path.parent,
    )
    figures: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    if figures["mounted"] != count:
        raise SystemExit(f"{path}: {figures['mounted']} of {count} mounted\n{done.stderr}")
    return figures


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ways = [
        ("in the host's process", False, False),
        ("isolated, fork server", True, True),
        ("isolated, a process each", True, False),
    ]
    rows: dict[tuple[str, int], dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        paths = {
            (count, isolated): config(directory, count, isolated)
            for count in (1, args.count)
            for isolated in (False, True)
        }
        results: dict[tuple[str, int], list[dict[str, object]]] = {}
        for _ in range(args.repeat):  # in turn, so drift hits them all alike
            for name, isolated, fork_server in ways:
                for count in (1, args.count):
                    figures = run(paths[count, isolated], fork_server, count)
                    results.setdefault((name, count), []).append(figures)
        for key, runs in results.items():
            children = [p for r in runs for p in r["children"]]  # type: ignore[attr-defined]
            servers = [p for r in runs for p in r["fork_server"]]  # type: ignore[attr-defined]
            rows[key] = {
                "seconds": median([float(r["seconds"]) for r in runs]),  # type: ignore[arg-type]
                "host": median([float(r["host"]) for r in runs]),  # type: ignore[arg-type]
                "child": median(children),
                "child_max": max(children, default=0.0),
                "server": median(servers),
                "total": median(
                    [
                        float(r["host"]) + sum(r["children"]) + sum(r["fork_server"])  # type: ignore[arg-type,call-overload]
                        for r in runs
                    ]
                ),
            }
    markdown = [
        f"The bundled `files` driver mounted once and {args.count} times; seconds until "
        f"every tool is listed and PSS in MB, medians of {args.repeat} fresh processes.",
        "",
        "| mounts | how | ready | vs one | host | each child | fork server | all processes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, isolated, _ in ways:
        one = rows[name, 1]["seconds"]
        for count in (1, args.count):
            row = rows[name, count]
            child = f"{row['child']:.1f} (max {row['child_max']:.1f})" if isolated else "-"
            server = f"{row['server']:.1f}" if row["server"] else "-"
            markdown.append(
                f"| {count} | {name} | {row['seconds']:.2f} s | {row['seconds'] / one:.1f}x "
                f"| {row['host']:.1f} | {child} | {server} | {row['total']:.1f} |"
            )
    forked, each = (
        rows["isolated, fork server", args.count],
        rows["isolated, a process each", args.count],
    )
    markdown += [
        "",
        f"{args.count} isolated drivers: ready {each['seconds'] / forked['seconds']:.1f}x as fast "
        f"with the fork server, in {forked['total']:.0f} MB of PSS against {each['total']:.0f} MB.",
    ]
    budgets = [
        Budget(
            f"{args.count} isolated drivers ready, against one",
            forked["seconds"] / rows["isolated, fork server", 1]["seconds"],
            2.0,
        ),
        Budget("an isolated driver's process, PSS (the largest)", forked["child_max"], 25.0, " MB"),
    ]
    emit("Isolated drivers: starting", markdown, budgets, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
