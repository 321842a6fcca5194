"""Benchmark the installed-tree digest against raw hashlib.sha256 over the same bytes.

    python scripts/bench_digest.py [--large-mib 256] [--small-files 2000] [--repeat 7]

Builds two synthetic installed distributions in a temporary site directory, each with a
correct RECORD: a large one (a few big files) and a small-file one (many 1 KiB modules). For
each it times ``scan_installed`` (open without following links, size check, one read, sha256,
RECORD comparison, unlisted-file scan) and, in the same process on the same bytes, two
baselines: ``hashlib.sha256`` over the bytes already in memory (the hash alone), and a bare
loop of open + read + sha256. The page cache is warm for all of them, so the ratios are the
cost of reading and checking, not of the disk. Prints medians of ``--repeat`` runs (``--json``
for scripts/bench.py).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _bench import Budget, emit

from mcs_host.trust.digest import scan_installed


def make_distribution(site: Path, name: str, sizes: list[int]) -> tuple[Path, list[Path]]:
    """A ``name`` package with files of ``sizes`` bytes, its dist-info and RECORD."""
    package = site / name
    package.mkdir(parents=True)
    dist_info = site / f"{name}-1.0.0.dist-info"
    dist_info.mkdir()
    rows, files = [], []
    seed = hashlib.sha256(name.encode()).digest()
    for index, size in enumerate(sizes):
        path = package / ("__init__.py" if index == 0 else f"m{index}.py")
        block = (seed * (size // len(seed) + 1))[:size]
        path.write_bytes(block)
        files.append(path)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0.0\n")
    files.append(dist_info / "METADATA")
    for path in files:
        data = path.read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{path.relative_to(site).as_posix()},sha256={digest},{len(data)}")
    rows.append(f"{dist_info.name}/RECORD,,")
    (dist_info / "RECORD").write_text("\n".join(rows) + "\n")
    return dist_info, files


def _check_clean(dist_info: Path, files: list[Path]) -> None:
    """Refuse to time a scan that fails: the figures must be of the path a clean tree takes."""
    scan = scan_installed(dist_info)
    if scan.findings or scan.digest is None or scan.digest.files != len(files):
        raise RuntimeError(f"{dist_info} does not scan clean: {scan.findings}")


def hash_only(blobs: list[bytes]) -> None:
    for blob in blobs:
        hashlib.sha256(blob).hexdigest()


def raw_hash(files: list[Path]) -> None:
    for path in files:
        with open(path, "rb") as f:
            hashlib.sha256(f.read()).hexdigest()


def medians(works: list[Callable[[], object]], repeat: int) -> list[float]:
    """Median seconds of each of ``works``, run in turn ``repeat`` times after a warm-up
    round, so drift in the machine's state hits them all alike."""
    times: list[list[float]] = [[] for _ in works]
    for round_ in range(repeat + 1):
        for index, work in enumerate(works):
            started = time.perf_counter()
            work()
            if round_:
                times[index].append(time.perf_counter() - started)
    return [statistics.median(t) for t in times]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large-mib", type=int, default=256, help="total size of the large tree")
    parser.add_argument("--small-files", type=int, default=2000, help="files in the small tree")
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per measurement")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts/bench.py")
    args = parser.parse_args()
    mib = 1024 * 1024
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp)
        chunk = max(1, min(32, args.large_mib))
        sizes = [chunk * mib] * max(1, args.large_mib // chunk)
        large, large_files = make_distribution(site, "large_pkg", sizes)
        small, small_files = make_distribution(site, "small_pkg", [1024] * args.small_files)
        for dist_info, files in ((large, large_files), (small, small_files)):
            _check_clean(dist_info, files)
        large_bytes = sum(p.stat().st_size for p in large_files)
        small_blobs = [p.read_bytes() for p in small_files]
        small_scan, small_hashed, small_raw = medians(
            [
                lambda: scan_installed(small),
                lambda: hash_only(small_blobs),
                lambda: raw_hash(small_files),
            ],
            args.repeat,
        )
        blobs = [p.read_bytes() for p in large_files]
        scan, hashed, raw = medians(
            [
                lambda: scan_installed(large),
                lambda: hash_only(blobs),
                lambda: raw_hash(large_files),
            ],
            args.repeat,
        )
    count = len(small_files)
    size = large_bytes / mib
    lines = [
        "| tree | `scan_installed` | sha256 of the bytes in memory | open + read + sha256 loop |",
        "|---|---|---|---|",
        f"| large: {len(large_files)} files, {size:.0f} MiB | {size / scan:.0f} MiB/s "
        f"| {size / hashed:.0f} MiB/s (scan: {hashed / scan:.2f}x) "
        f"| {size / raw:.0f} MiB/s (scan: {raw / scan:.2f}x) |",
        f"| small: {count} files of 1 KiB | {small_scan / count * 1e6:.1f} µs/file "
        f"| {small_hashed / count * 1e6:.1f} µs/file | {small_raw / count * 1e6:.1f} µs/file |",
    ]
    budgets = [
        Budget(
            "digest throughput / sha256 in memory, large tree", hashed / scan, 0.6, at_least=True
        ),
        Budget("digest per small file", small_scan / count * 1e6, 15.0, unit=" µs"),
    ]
    emit("Verification: the installed-tree digest", lines, budgets, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
