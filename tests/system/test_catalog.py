"""The catalog mcs-host ships is what this repository's registry.json says of the published
reference drivers and their libraries, entry for entry, and mcs-host's wheel ships it.

scripts/lock_reference.py writes both from the same wheels: a pin or declaration changed in
one and not in the other fails here (``python scripts/lock_reference.py --catalog`` writes the
catalog again from registry.json).
"""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from distbuild import ROOT

from mcs_host.trust.catalog import CATALOG, shipped_catalog, shipped_pins

LOCK = runpy.run_path(str(ROOT / "scripts" / "lock_reference.py"))
REGISTRY = ROOT / "registry.json"


def test_the_catalog_is_registry_jsons_entries_for_the_reference_releases() -> None:
    registry: dict[str, Any] = json.loads(REGISTRY.read_text())
    assert json.loads(CATALOG.read_text()) == LOCK["catalog"](registry), (
        "the catalog drifted from registry.json: python scripts/lock_reference.py --catalog"
    )
    catalog = shipped_catalog()
    # every release the script pins is in it, as the driver or library it is
    for label, (spec, obj, driver_id) in LOCK["DRIVERS"].items():
        name, _, version = spec.partition("==")
        entry = catalog.drivers[driver_id]
        assert (entry.distribution, entry.label, entry.object) == (name, label, obj)
        assert (entry.trust, len(entry.security_notes)) == ("reference", 1)
        assert entry.pin_for(version) is not None, spec
        assert list(entry.requires) == LOCK["UNDECLARED"].get(label, [])
    for spec in LOCK["LIBRARIES"]:
        name, _, version = spec.partition("==")
        found = shipped_pins(catalog, name, version)
        assert found is not None, spec
        assert found.trust == "reference"
    # the bundled drivers (not on any index) are not: registry.json's are this checkout's own
    assert {e.distribution for e in catalog.drivers.values()} == {
        spec.partition("==")[0] for spec, _, _ in LOCK["DRIVERS"].values()
    }
    # a native library's builds are pins of the same version
    charset = shipped_pins(catalog, "Charset_Normalizer", "3.5.2")
    assert charset is not None
    assert len(charset.pins) > 1
    assert shipped_pins(catalog, "mcs-driver-csv", "0.1.3") is None


def test_the_wheel_ships_the_catalog_add_reads(tmp_path: Path) -> None:
    code = "import sys; from flit_core import buildapi; print(buildapi.build_wheel(sys.argv[1]))"
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(tmp_path / done.stdout.strip().splitlines()[-1]) as wheel:
        shipped = wheel.read("mcs_host/trust/catalog.json")
    assert shipped == CATALOG.read_bytes()
