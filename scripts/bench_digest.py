"""Benchmark the installed-tree digest against raw hashlib.sha256 over the same bytes.

    python scripts/bench_digest.py [--large-mib 256] [--small-files 2000] [--repeat 7]

Builds two synthetic installed distributions in a temporary site directory, each with a
correct RECORD: a large one (a few big files) and a small-file one (many 1 KiB modules). For
each it times ``scan_installed`` (open without following links, size check, one read, sha256,
RECORD comparison, unlisted-file scan) and, in the same process on the same bytes, two
baselines: ``hashlib.sha256`` over the bytes already in memory (the hash alone), and a bare
loop of open + read + sha256. The page cache is warm for all of them, so the ratios are the
cost of reading and checking, not of the disk. Prints medians of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from mcs_host.integrity import scan_installed


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


def hash_only(blobs: list[bytes]) -> None:
    for blob in blobs:
        hashlib.sha256(blob).hexdigest()


def raw_hash(files: list[Path]) -> None:
    for path in files:
        with open(path, "rb") as f:
            hashlib.sha256(f.read()).hexdigest()


def median_seconds(work: Callable[[], object], repeat: int) -> float:
    work()  # warm the page cache and the code
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large-mib", type=int, default=256, help="total size of the large tree")
    parser.add_argument("--small-files", type=int, default=2000, help="files in the small tree")
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per measurement")
    args = parser.parse_args()
    mib = 1024 * 1024
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp)
        big_count = max(1, args.large_mib // 32)
        large, large_files = make_distribution(site, "large_pkg", [32 * mib] * big_count)
        small, small_files = make_distribution(site, "small_pkg", [1024] * args.small_files)
        large_bytes = sum(p.stat().st_size for p in large_files)
        scan = median_seconds(lambda: scan_installed(large), args.repeat)
        blobs = [p.read_bytes() for p in large_files]
        hashed = median_seconds(lambda: hash_only(blobs), args.repeat)
        blobs.clear()
        raw = median_seconds(lambda: raw_hash(large_files), args.repeat)
        small_scan = median_seconds(lambda: scan_installed(small), args.repeat)
        small_blobs = [p.read_bytes() for p in small_files]
        small_hashed = median_seconds(lambda: hash_only(small_blobs), args.repeat)
        small_raw = median_seconds(lambda: raw_hash(small_files), args.repeat)
    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
    print()
    count = len(small_files)
    print("| tree | scan_installed | sha256 of bytes in memory | open + read + sha256 |")
    print("|---|---|---|---|")
    print(
        f"| large: {len(large_files)} files, {large_bytes / mib:.0f} MiB "
        f"| {large_bytes / mib / scan:.0f} MiB/s "
        f"| {large_bytes / mib / hashed:.0f} MiB/s (scan: {hashed / scan:.2f}x) "
        f"| {large_bytes / mib / raw:.0f} MiB/s (scan: {raw / scan:.2f}x) |"
    )
    print(
        f"| small: {count} files of 1 KiB "
        f"| {small_scan / count * 1e6:.1f} µs/file "
        f"| {small_hashed / count * 1e6:.1f} µs/file "
        f"| {small_raw / count * 1e6:.1f} µs/file |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
