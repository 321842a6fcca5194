"""Pin the published reference MCS drivers and every library they import in registry.json.

    python scripts/lock_reference.py

Downloads the wheels of the releases below from the package registry and locks them with
``mcs-host lock --wheel``: the three drivers, which ship no entry point, are declared with
their object and the id their meta carries; the core, adapter and types libraries they import
are pinned as libraries, and so is what ``mcs-driver-rest`` needs beyond them (``requests``
and its requirements), since a load refuses an unpinned dependency. The drivers get the trust
label "reference". ``mcs-driver-filesystem`` imports ``mcs-adapter-localfs`` without declaring
it: the registry records that.

The wheels are the ones pip picks for the interpreter that runs this script. A library with
native code (``charset-normalizer``) has a wheel per Python and platform: the others of
``BUILDS`` (CPython 3.11 to 3.13 on Linux x86_64 and aarch64, and its pure-Python wheel where
there is one) are pinned beside it as builds of the same version (``lock --build``), so any of
them verifies. Install the same versions (``REQUIREMENTS``) to use them.

Then it writes the catalog mcs-host ships, ``mcs_host/trust/catalog.json``: the entries of
registry.json for these drivers and libraries, as they are there (``mcs-host add`` reads it;
tests/system/test_catalog.py holds the two equal). ``--catalog`` writes only the catalog, from
registry.json as it is, with no download.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "registry.json"
CATALOG = ROOT / "mcs_host" / "trust" / "catalog.json"

DRIVERS = {
    # label: (distribution==version, object, id of its DriverMeta)
    "mcs-csv": (
        "mcs-driver-csv==0.1.4",
        "mcs.driver.csv:CsvToolDriver",
        "8f3c7a2e-9d4b-4f1a-b5e6-1c8a9f2d3e7b",
    ),
    "mcs-filesystem": (
        "mcs-driver-filesystem==0.2.4",
        "mcs.driver.filesystem:FilesystemToolDriver",
        "a1b2c3d4-fs01-4000-9000-filesystem0001",
    ),
    "mcs-rest": (
        "mcs-driver-rest==0.3.2",
        "mcs.driver.rest:RestToolDriver",
        "cb8d5cb9-089d-4b96-8439-1a4cda5f1621",
    ),
}
LIBRARIES = [
    "mcs-driver-core==0.4.1",
    "mcs-adapter-localfs==0.2.0",
    "mcs-adapter-http==0.3.0",
    "mcs-types-http==0.1.0",
    # what mcs-driver-rest needs beyond the MCS libraries: requests and its requirements
    "requests==2.34.2",
    "urllib3==2.8.0",
    "idna==3.20",
    "charset-normalizer==3.5.2",
    "certifi==2026.7.22",
]
REQUIREMENTS = [spec for spec, _, _ in DRIVERS.values()] + LIBRARIES
"""Every release the registry pins: what to install to use them all."""
UNDECLARED = {"mcs-filesystem": ["mcs-adapter-localfs"]}
BUILDS = [
    ["--implementation", "cp", "--python-version", f"3.{minor}", "--abi", f"cp3{minor}",
     "--platform", f"manylinux_2_{glibc}_{machine}", "--platform", f"manylinux2014_{machine}"]
    for minor in (11, 12, 13)
    for machine in ("x86_64", "aarch64")
    for glibc in (17, 28)
] + [["--implementation", "py", "--python-version", "3.11", "--abi", "none",
       "--platform", "any"]]  # fmt: skip
"""pip's target options for every build of a library with native code that is pinned."""
NOTES = {
    "mcs-csv": "Reads CSV files under base_dir through mcs-adapter-localfs; read-only.",
    "mcs-filesystem": "Reads and WRITES files under base_dir (write_file); needs "
    "mcs-adapter-localfs, which it does not declare.",
    "mcs-rest": "Calls any operation of the OpenAPI spec at url, with the HTTP methods it "
    "declares; lists no tools when the spec cannot be fetched.",
}


def main() -> int:
    if sys.argv[1:] == ["--catalog"]:
        _write_catalog()
        return 0
    if sys.argv[1:]:
        print("usage: python scripts/lock_reference.py [--catalog]", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--dest",
                tmp,
                *REQUIREMENTS,
            ],
            check=True,
        )
        command = [
            sys.executable,
            "-m",
            "mcs_host",
            "lock",
            "--registry",
            str(REGISTRY),
            "--trust",
            "reference",
            "--replace",  # a release pinned before is pinned again (the digest format changed)
        ]
        for wheel in sorted(Path(tmp).glob("*.whl")):
            command += ["--wheel", str(wheel)]
        for label, (_, obj, driver_id) in DRIVERS.items():
            command += ["--declare", f"{label}={obj}", "--id", f"{label}={driver_id}"]
        subprocess.run(command, check=True)
        native = [
            spec
            for spec in REQUIREMENTS
            for wheel in Path(tmp).glob(f"{spec.split('==')[0].replace('-', '_')}-*.whl")
            if not wheel.name.endswith("-none-any.whl")
        ]
        _pin_builds(native, Path(tmp) / "builds")
    document = json.loads(REGISTRY.read_text())
    for label, (_, _, driver_id) in DRIVERS.items():
        entry = document["drivers"][driver_id]
        entry["security_notes"] = [NOTES[label]]
        if label in UNDECLARED:
            entry["requires"] = UNDECLARED[label]
    REGISTRY.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    _write_catalog()
    return 0


def catalog(document: dict[str, Any]) -> dict[str, Any]:
    """The catalog mcs-host ships, from registry.json's ``document``: its entries for the
    drivers of ``DRIVERS`` and the libraries of ``LIBRARIES``, each whole."""
    ids = [driver_id for _, _, driver_id in DRIVERS.values()]
    names = sorted({spec.split("==")[0] for spec in LIBRARIES})
    return {
        "format": document["format"],
        "drivers": {i: document["drivers"][i] for i in sorted(ids)},
        "libraries": {name: document["libraries"][name] for name in names},
    }


def _write_catalog() -> None:
    document = catalog(json.loads(REGISTRY.read_text()))
    CATALOG.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")


def _pin_builds(requirements: list[str], directory: Path) -> None:
    """Pin every build in ``BUILDS`` of ``requirements`` beside the pin of its version."""
    if not requirements:
        return
    for target in BUILDS:
        download = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
        for spec in requirements:  # a build the index does not have is left out
            subprocess.run([*download, *target, "--dest", str(directory), spec], check=False)
    wheels = sorted(directory.glob("*.whl"))
    command = [sys.executable, "-m", "mcs_host", "lock", "--registry", str(REGISTRY), "--build"]
    command += ["--trust", "reference"]
    for wheel in wheels:
        command += ["--wheel", str(wheel)]
    subprocess.run(command, check=True)


if __name__ == "__main__":
    sys.exit(main())
