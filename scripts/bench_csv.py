"""Benchmark the bundled CSV driver's summarize_column on a large file, as a cold process.

    python scripts/bench_csv.py [--mib 60] [--repeat 3]

Writes a CSV of about ``--mib`` MiB (a date, a region, a product, units, a price) into a
temporary directory, then runs, each as a fresh process in turn: ``summarize_column`` of the
``units`` column through mcs-host's ``CsvToolDriver``, and a plain ``csv`` module loop that
computes the same figures the usual way (every number in a list, ``statistics`` on it).
Reports the medians of wall time as MB/s of the file and the peak resident memory of each
process (``ru_maxrss``). The driver must run in bounded memory: its budget is a peak under
half the plain loop's on the same file.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bench import Budget, emit

DRIVER = """
import sys
from mcs_host_csv import CsvToolDriver
driver = CsvToolDriver(sys.argv[1], max_file_bytes=1 << 40)
print(driver.execute_tool("summarize_column", {"file": "big.csv", "column": "units"})["median"])
"""

PLAIN = """
import csv, statistics, sys
values = []
with open(sys.argv[1] + "/big.csv", newline="", encoding="utf-8") as f:
    reader = csv.reader(f)
    column = next(reader).index("units")
    for row in reader:
        try:
            values.append(float(row[column]))
        except (ValueError, IndexError):
            pass
print(statistics.median(values), statistics.fmean(values), statistics.stdev(values))
"""


def write_csv(path: Path, mib: int) -> int:
    rng = random.Random(7)  # noqa: S311 - benchmark data, not a secret
    regions = ("EU", "US", "APAC", "LATAM")
    products = ("apple", "pear", "plum", "cherry", "banana")
    target = mib * 1024 * 1024
    with path.open("w", encoding="utf-8", newline="") as f:
        f.write("date,region,product,units,unit_price\n")
        written = 0
        while written < target:
            lines = "".join(
                f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d},{rng.choice(regions)},"
                f"{rng.choice(products)},{rng.randint(0, 500)},{rng.uniform(0.1, 99):.2f}\n"
                for _ in range(10000)
            )
            f.write(lines)
            written += len(lines)
    return path.stat().st_size


def run(code: str, directory: str) -> tuple[float, float, str]:
    """Wall seconds, peak resident MiB and output of ``python -c code directory``."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", code, directory], stdout=subprocess.PIPE, text=True
    )
    out = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    if status:
        raise SystemExit(f"the benchmark process failed: {code.strip().splitlines()[1]}")
    return elapsed, usage.ru_maxrss / 1024, out.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcs-host-bench-csv-") as directory:
        size = write_csv(Path(directory) / "big.csv", args.mib)
        runs: dict[str, list[tuple[float, float]]] = {"driver": [], "plain": []}
        medians = {}
        for _ in range(args.repeat):
            for name, code in (("driver", DRIVER), ("plain", PLAIN)):
                seconds, peak, out = run(code, directory)
                runs[name].append((seconds, peak))
                medians[name] = float(out.split()[0])
        if medians["driver"] != medians["plain"]:
            raise SystemExit(f"the medians differ: {medians}")
    mb = size / 1e6
    rows = []
    figures = {}
    for name, label in (
        ("driver", "`summarize_column`, mcs-host-csv (streamed)"),
        ("plain", "plain `csv` loop, numbers in a list + `statistics`"),
    ):
        seconds = statistics.median(s for s, _ in runs[name])
        peak = statistics.median(p for _, p in runs[name])
        figures[name] = (seconds, peak)
        rows.append(f"| {label} | {seconds:.2f} s | {mb / seconds:.1f} MB/s | {peak:.0f} MiB |")
    lines = [
        "| process | wall time | throughput | peak RSS |",
        "|---|---|---|---|",
        *rows,
        "",
        f"A {mb:.0f} MB file, {args.repeat} runs each, medians; both find the same median.",
    ]
    budgets = [
        Budget(
            "summarize_column peak RSS / plain csv loop's",
            figures["driver"][1] / figures["plain"][1],
            0.5,
        )
    ]
    emit("CSV driver: summarize_column on a large file", lines, budgets, args.json)
    return 0


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.exit(main())
