"""Benchmark a driver that imports numpy and pandas: verify and load against what they cost
without mcs-host.

    python scripts/bench_wheels.py [--repeat 7]

Installs numpy 2.4.6 and pandas 3.1.1 from the package index (with what they require) into a
directory of their own with ``pip install --target`` (bytecode compiled, as pip does), beside
a driver whose tool solves a linear system with ``numpy.linalg`` and describes it with pandas;
pins all of them with one ``mcs-host lock``. Then times, as fresh processes taking turns
(median wall time): ``python -c "import numpy, pandas"`` with that directory on the path;
``mcs-host verify``; ``mcs-host load`` with a bytecode cache a first load filled, and with an
empty one; ``openssl dgst -sha256`` over exactly the files the digest reads; and ``mcs-host
verify`` of an empty directory with the same registry, the fixed start-up of the command, so
that verify minus it is what reading and hashing the files costs mcs-host. The budgets: what
the import gate adds to importing (load minus verify) within 1.5x the plain import, and verify
within 2x openssl's hashing. The load with an empty bytecode cache runs ``--repeat`` times, at
most 3.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bench import SCIENCE_DRIVER, Budget, emit

from mcs_host.trust.digest import scan_installed

SCIENCE = ["numpy==2.4.6", "pandas==3.1.1"]
MANIFEST = {
    "format": "mcs-driver-manifest/1",
    "drivers": {
        "Driver": {"id": "5c1e0000-0000-4000-8000-000000000001", "name": "np-stats",
                   "version": "1.0.0"}
    },
}  # fmt: skip


def install_driver(site: Path) -> None:
    """The driver, installed into ``site`` as an installer leaves it."""
    info = "np_stats-1.0.0.dist-info"
    files = {
        "np_stats/__init__.py": SCIENCE_DRIVER.encode(),
        "np_stats/mcs-driver.json": json.dumps(MANIFEST).encode(),
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: np-stats\nVersion: 1.0.0\n"
        b"Requires-Dist: mcs-host\nRequires-Dist: numpy\nRequires-Dist: pandas\n",
        f"{info}/entry_points.txt": b"[mcs.drivers]\nnp-stats = np_stats:Driver\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    rows = []
    for path, data in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{path},sha256={digest},{len(data)}")
    (site / info / "RECORD").write_text("\n".join([*rows, f"{info}/RECORD,,"]) + "\n")


def digest_files(site: Path) -> list[str]:
    """The files the ``installed-tree-v2`` digests of every distribution in ``site`` read."""
    files = []
    for info in sorted(site.glob("*.dist-info")):
        scan = scan_installed(info)
        if scan.digest is None:
            raise SystemExit(f"{info} cannot be digested: {scan.findings}")
        files += [str(site / entry.path) for entry in scan.digest.entries]
    return files


def wall_ms(commands: dict[str, list[str]], repeat: int, env: dict[str, str]) -> dict[str, float]:
    """Median wall milliseconds of each command, fresh processes taking turns, after one
    warm-up round; each must exit 0."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(repeat + 1):
        for name, command in commands.items():
            started = time.perf_counter()
            done = subprocess.run(command, capture_output=True, env=env, check=False)
            elapsed = (time.perf_counter() - started) * 1000
            if done.returncode:
                raise SystemExit(f"{name} failed: {done.stderr.decode()[-2000:]}")
            if round_:
                times[name].append(elapsed)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    mcs_host = str(Path(sys.executable).parent / "mcs-host")
    work = Path(tempfile.mkdtemp(prefix="mcs-host-wheels-"))
    try:
        site, registry = work / "site", work / "registry.json"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
             "--only-binary", ":all:", "--target", str(site), *SCIENCE],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        install_driver(site)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MCS_HOST_", "PYTHON"))}
        env.update(
            MCS_HOST_STATE_DIR=str(work / "state"),
            MCS_HOST_CACHE_DIR=str(work / "cache"),
            MCS_HOST_ALLOW_EXTENSIONS="1",
        )
        libraries = sorted(
            p.name.partition("-")[0] for p in site.glob("*.dist-info") if p.name != "np_stats"
        )
        named = [
            arg for name in libraries if name != "np_stats" for arg in ("--distribution", name)
        ]
        trust = ["--path", str(site), "--registry", str(registry)]
        subprocess.run(
            [mcs_host, "lock", "np-stats", *named, *trust], check=True, env=env, capture_output=True
        )
        answer = subprocess.run(
            [mcs_host, "call", "solve", "--args",
             '{"matrix": [[2, 1], [1, 3]], "vector": [3, 5]}', *trust],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        if answer.returncode:
            raise SystemExit(f"the tool call failed:\n{answer.stdout}\n{answer.stderr}")
        result = json.loads(answer.stdout)  # call prints the tool's result
        if result != {"x": [0.8, 1.4], "mean": 1.1}:
            raise SystemExit(f"the tool answered {result}")
        files = digest_files(site)
        size = sum(os.path.getsize(f) for f in files)
        (work / "empty").mkdir()
        nothing = ["--path", str(work / "empty"), "--registry", str(registry)]
        commands = {
            "plain": [sys.executable, "-c", "import numpy, pandas"],
            "verify": [mcs_host, "verify", *trust],
            "start-up": [mcs_host, "verify", *nothing],
            "load": [mcs_host, "load", *trust],
        }
        if shutil.which("openssl"):
            commands["openssl"] = ["openssl", "dgst", "-sha256", *files]
        plain_env = {**env, "PYTHONPATH": str(site)}
        measured = wall_ms({"plain": commands.pop("plain")}, args.repeat, plain_env)
        measured |= wall_ms(commands, args.repeat, env)
        cold_env = {**env, "MCS_HOST_CACHE_DIR": str(work / "never")}
        cold_env["PYTHONDONTWRITEBYTECODE"] = "1"
        cold = min(3, args.repeat)
        measured["cold"] = wall_ms({"cold": commands["load"]}, cold, cold_env)["cold"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    gate = measured["load"] - measured["verify"]
    lines = [
        "| what | median wall |",
        "|---|---|",
        f'| `python -c "import numpy, pandas"` (bytecode from pip) | {measured["plain"]:.0f} ms |',
        f"| `mcs-host verify` ({len(files)} files, {size / 2**20:.0f} MiB) "
        f"| {measured['verify']:.0f} ms |",
        f"| `mcs-host verify` of an empty directory, the same registry: its start-up "
        f"| {measured['start-up']:.0f} ms |",
        f"| `mcs-host load`, the bytecode cache filled | {measured['load']:.0f} ms |",
        f"| `mcs-host load`, no bytecode cache | {measured['cold']:.0f} ms |",
        f"| load minus verify: what the gate adds to importing | {gate:.0f} ms |",
    ]
    budgets = [
        Budget("(load - verify) / plain import numpy, pandas", gate / measured["plain"], 1.5)
    ]
    if "openssl" in measured:
        hashing = measured["verify"] - measured["start-up"]
        lines.append(
            f"| `openssl dgst -sha256` over the same files | {measured['openssl']:.0f} ms |"
        )
        lines.append(
            f"| verify minus its start-up: reading and hashing, / openssl "
            f"| {hashing:.0f} ms ({hashing / measured['openssl']:.2f}x) |"
        )
        budgets.append(
            Budget("verify / openssl over the digest's files",
                   measured["verify"] / measured["openssl"], 2.0)
        )  # fmt: skip
    emit("A numpy and pandas driver", lines, budgets, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
