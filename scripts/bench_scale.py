"""Benchmark how verify and load grow with the number of drivers installed: 10, 100, 1,000.

    python scripts/bench_scale.py [--sizes 10,100,1000] [--repeat 5]

For each size, that many small drivers (a module, a manifest, two tools: one of its own and
one all share; requiring mcs-host and pydantic, as ``mcs-host new`` writes) are installed
into a directory of their own, as an installer leaves them
(``*.dist-info`` with METADATA, entry points and a RECORD of real hashes), and pinned with
``mcs-host lock``. Each run is a fresh process that imports mcs-host first and then times,
with the process's CPU clock, what the size changes: ``Host.verify`` (discover, verify, judge
dependencies) or ``Host.load`` (all that, import, instantiate and mount). The per-driver cost
is that time over the number of drivers, less the same run with no driver installed; the
budget is that it stays flat: the cost per driver at the largest size over the smallest's.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from _bench import Budget, emit

DRIVER = """\
from mcs_host import MCSToolDriver, Tool
from mcs_host.kit import manifest_meta


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [
            Tool(name="ping_{n}", description="Answer pong."),
            Tool(name="status", description="Say how it is."),
        ]

    def execute_tool(self, tool_name, arguments):
        return "pong"
"""

PROBE = """
import json, sys, time
from mcs_host.loading.config_schema import HostConfig
from mcs_host.loading.host import Host

mode, directory, registry = sys.argv[1:]
config = HostConfig(registries=[registry] if registry else [], strict=True)
host = Host(config, search_path=[directory])
started = time.process_time()
if mode == "verify":
    report = host.verify(())
    count = len(report.records)
else:
    count = len(host.load(()).driver.labels)
print(json.dumps({"ms": (time.process_time() - started) * 1000, "count": count}))
"""


def _record_row(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def install_drivers(directory: Path, count: int) -> None:
    """``count`` small drivers installed into ``directory`` as an installer leaves them."""
    directory.mkdir(parents=True)
    for n in range(count):
        name, package = f"scale-drv-{n:04d}", f"scale_drv_{n:04d}"
        manifest = {
            "format": "mcs-driver-manifest/1",
            "drivers": {
                "Driver": {"id": str(uuid.UUID(int=n + 1)), "name": name, "version": "1.0.0"}
            },
        }
        files = {
            f"{package}/__init__.py": DRIVER.format(n=f"{n:04d}").encode(),
            f"{package}/mcs-driver.json": json.dumps(manifest).encode(),
        }
        info = f"{package}-1.0.0.dist-info"
        files[f"{info}/METADATA"] = (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0.0\n"
            "Requires-Dist: mcs-host>=0.1,<0.2\nRequires-Dist: pydantic>=2.7,<3\n"
        ).encode()
        files[f"{info}/entry_points.txt"] = f"[mcs.drivers]\n{name} = {package}:Driver\n".encode()
        files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        for path, data in files.items():
            target = directory / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        rows = [_record_row(path, data) for path, data in files.items()] + [f"{info}/RECORD,,"]
        (directory / info / "RECORD").write_text("\n".join(rows) + "\n")
        (directory / info / "INSTALLER").write_text("bench\n")


def measure(mode: str, directory: Path, registry: Path | None, repeat: int, size: int) -> float:
    """Median CPU milliseconds of ``mode`` over ``repeat`` fresh processes (after one), each
    of which must have verified or mounted all ``size`` drivers."""
    runs: list[float] = []
    for _ in range(repeat + 1):
        done = subprocess.run(
            [sys.executable, "-c", PROBE, mode, str(directory), str(registry or "")],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(done.stdout)
        if result["count"] != size:
            raise SystemExit(f"{mode} of {size} drivers handled {result['count']}")
        runs.append(result["ms"])
    return statistics.median(runs[1:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    script = Path(sys.executable).parent / "mcs-host"
    work = Path(tempfile.mkdtemp(prefix="mcs-host-scale-"))
    try:
        empty = work / "empty"
        install_drivers(empty, 0)
        base = {mode: measure(mode, empty, None, args.repeat, 0) for mode in ("verify", "load")}
        per_driver: dict[str, dict[int, float]] = {"verify": {}, "load": {}}
        for size in sizes:
            directory, registry = work / str(size), work / f"registry-{size}.json"
            install_drivers(directory, size)
            subprocess.run(
                [str(script), "lock", "--path", str(directory), "--registry", str(registry)],
                check=True,
                capture_output=True,
            )
            for mode in ("verify", "load"):
                spent = measure(mode, directory, registry, args.repeat, size)
                per_driver[mode][size] = (spent - base[mode]) / size
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [
        "| drivers | " + " | ".join(str(s) for s in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]
    for mode in ("verify", "load"):
        cells = " | ".join(f"{per_driver[mode][s]:.3f} ms" for s in sizes)
        lines.append(f"| `{mode}`, CPU per driver | {cells} |")
    budgets = [
        Budget(
            f"per-driver {mode} cost at {sizes[-1]} drivers / at {sizes[0]}",
            per_driver[mode][sizes[-1]] / per_driver[mode][sizes[0]],
            1.3,
        )
        for mode in ("verify", "load")
    ]
    emit("Scale: verify and load per driver, 10 to 1,000 drivers", lines, budgets, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
