"""Benchmark loading the bundled drivers in a fresh process, stage by stage.

    python scripts/bench_load.py [--repeat 11]

Runs in the environment of the interpreter that runs it, which must have mcs-host and the
bundled drivers installed (not editable: an editable install is refused), from the
repository root with scripts/demo/mcs-host.toml: registry.json, strict, both drivers. Each
run is a fresh process that imports mcs-host, then calls ``load_drivers``; the load report's
timings give the stages (each driver's summed over both). A second figure is the whole
``mcs-host load --json`` command as a user runs it. Medians of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from _bench import emit, process_ms

ROOT = Path(__file__).resolve().parent.parent
CONFIG = "scripts/demo/mcs-host.toml"
STAGES = ("verify", "compatibility", "dependencies", "import", "instantiate", "meta", "list_tools")

PROBE = f"""
import json, time
started = time.perf_counter()
import mcs_host.loading.host
imported = time.perf_counter()
from mcs_host import load_drivers
driver, report = load_drivers({CONFIG!r})
assert report.ok and len(driver.list_tools()) == 8, report
stages = {{"import mcs-host": imported - started}}
stages.update({{k: report.timings[k] for k in ("registries", "plugins", "discover")}})
for stage in {STAGES!r}:
    stages["driver: " + stage] = sum(r.timings.get(stage, 0.0) for r in report.records)
stages["load_drivers, in all"] = report.timings["total"]
print(json.dumps({{k: v * 1000 for k, v in stages.items()}}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs: dict[str, list[float]] = {}
    for _ in range(args.repeat + 1):
        done = subprocess.run(
            [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True
        )
        for stage, ms in json.loads(done.stdout).items():
            runs.setdefault(stage, []).append(ms)
    script = Path(sys.executable).parent / "mcs-host"
    (command,) = process_ms(
        [[str(script), "load", "--json", "--config", CONFIG]], args.repeat, cwd=ROOT
    )
    lines = ["| stage | median |", "|---|---|"]
    lines += [f"| {stage} | {statistics.median(ms[1:]):.2f} ms |" for stage, ms in runs.items()]
    lines.append(f"| `mcs-host load --json`, the whole process | {command:.1f} ms |")
    emit("Load: the bundled drivers in a fresh process", lines, [], args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
