"""Benchmark driver discovery against the stdlib, pluggy and stevedore.

    python scripts/bench_discovery.py [--repeat 7] [--sizes 10,100,1000]

Builds synthetic site directories of N installed distributions (a ``.dist-info`` with METADATA
and ``entry_points.txt``, and a one-file module each): dense, where every one declares an
``mcs.drivers`` entry point, and sparse, where 10 do and the rest declare console scripts. Each
figure is the median over ``--repeat`` fresh processes of the time one call takes, with the
imports done before the clock starts and ``sys.path`` set to the site directory alone:

- mcs-host: ``mcs_host.discovery.discover([site])``, metadata only;
- stdlib: ``importlib.metadata.entry_points(group="mcs.drivers")``;
- walk: ``distributions()`` and each one's ``entry_points`` filtered by group;
- pluggy: ``PluginManager.load_setuptools_entrypoints("mcs.drivers")``, which imports each one;
- stevedore: ``ExtensionManager("mcs.drivers")``, which imports each one, with its entry point
  cache as a second run finds it (warm).

``--json`` prints the section as JSON for scripts/bench.py.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _bench import Budget, emit

GROUP = "mcs.drivers"
SPARSE_DRIVERS = 10

# Each snippet gets the site directory as argv[1], imports what it needs, then times one call.
_PREAMBLE = """
import sys, time
site = sys.argv[1]
{imports}
sys.path[:] = [site] + [p for p in sys.path if "site-packages" not in p and p]
started = time.perf_counter()
{call}
elapsed = time.perf_counter() - started
print(elapsed * 1000, count)
"""

METHODS: dict[str, tuple[str, str]] = {
    "mcs-host": (
        "from mcs_host.discovery import discover",
        "count = len(discover([site]).candidates)",
    ),
    "stdlib": (
        "from importlib.metadata import entry_points",
        f"count = len(entry_points(group={GROUP!r}))",
    ),
    "walk": (
        "from importlib.metadata import distributions",
        f"count = sum(1 for d in distributions() for e in d.entry_points if e.group == {GROUP!r})",
    ),
    "pluggy": (
        "import pluggy",
        f"pm = pluggy.PluginManager('mcs')\ncount = pm.load_setuptools_entrypoints({GROUP!r})",
    ),
    "stevedore": (
        "from stevedore import ExtensionManager",
        f"count = len(ExtensionManager({GROUP!r}, invoke_on_load=False).extensions)",
    ),
}


def make_site(root: Path, size: int, drivers: int) -> Path:
    """A site directory of ``size`` distributions, the first ``drivers`` of them drivers."""
    site = root / f"site-{size}-{drivers}"
    site.mkdir(parents=True)
    for n in range(size):
        name = f"bench_pkg_{n:04d}"
        info = site / f"{name}-1.0.{n}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: bench-pkg-{n:04d}\nVersion: 1.0.{n}\n"
            "Summary: a synthetic distribution\nRequires-Dist: mcs-host\n"
        )
        if n < drivers:
            entry = f"[{GROUP}]\nd{n:04d} = {name}:Driver\n"
        else:
            entry = f"[console_scripts]\ntool-{n:04d} = {name}:main\n"
        (info / "entry_points.txt").write_text(entry)
        (site / f"{name}.py").write_text("class Driver:\n    pass\n\n\ndef main():\n    pass\n")
    return site


def time_methods(
    methods: list[str], site: Path, expected: int, repeat: int, env: dict[str, str]
) -> dict[str, float]:
    """Median milliseconds of each method over ``repeat`` rounds of fresh processes, one per
    method in turn, after a round that warms stevedore's cache and the page cache."""
    runs: dict[str, list[float]] = {method: [] for method in methods}
    for round_ in range(repeat + 1):
        for method in methods:
            imports, call = METHODS[method]
            code = _PREAMBLE.format(imports=imports, call=call)
            done = subprocess.run(
                [sys.executable, "-c", code, str(site)],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            ms, count = done.stdout.split()
            if int(count) != expected:
                raise RuntimeError(f"{method} found {count} drivers in {site}, not {expected}")
            if round_:
                runs[method].append(float(ms))
    return {method: statistics.median(times) for method, times in runs.items()}


def run(sizes: list[int], repeat: int, methods: list[str]) -> list[dict[str, float]]:
    rows: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_CACHE_HOME": os.path.join(tmp, "cache")}
        env.pop("PYTHONPATH", None)
        for size in sizes:
            for density, drivers in (("dense", size), ("sparse", min(SPARSE_DRIVERS, size))):
                if density == "sparse" and drivers == size:
                    continue  # the same site as dense
                site = make_site(Path(tmp), size, drivers)
                row: dict[str, float] = {"n": size, "drivers": drivers}
                row.update(time_methods(methods, site, drivers, repeat, env))
                rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--methods", default=",".join(METHODS), help="mcs-host and stdlib first")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    methods = args.methods.split(",")
    rows = run([int(s) for s in args.sizes.split(",")], args.repeat, methods)
    lines = [
        "| N | drivers | mcs-host | stdlib `entry_points` | mcs-host / stdlib | "
        "`distributions()` walk | pluggy | stevedore |",
        "|---|---|---|---|---|---|---|---|",
    ]
    budgets = []
    for r in rows:
        ours, std = r["mcs-host"], r["stdlib"]
        others = " | ".join(
            f"{r[m]:.1f} ms" if m in r else "-" for m in ("walk", "pluggy", "stevedore")
        )
        lines.append(
            f"| {r['n']} | {r['drivers']} | {ours:.1f} ms | {std:.1f} ms | {ours / std:.2f}x | "
            f"{others} |"
        )
        if r["n"] == max(int(s) for s in args.sizes.split(",")):
            budgets.append(
                Budget(
                    f"discovery, N={r['n']}, {r['drivers']} drivers, mcs-host / stdlib",
                    ours / std,
                    1.0,
                )
            )
    emit("Discovery", lines, budgets, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
