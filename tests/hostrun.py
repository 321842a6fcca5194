"""Fixture drivers that leave a marker when their code runs, registries, and a host run in a venv.

:func:`run_host` runs the trust pipeline inside a venv through the public Python API (discover,
load the registries, verify, import each allowed driver through the verified importer, check
its runtime meta) and returns what happened to each driver as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from distbuild import Project, Venv

from mcs_host.trust.registry import REGISTRY_FORMAT
from mcs_host.trust.release import release_from_wheel

DRIVER_SOURCE = """\
open({marker!r}, "a").write("{name} ran\\n")

from mcs_host import MCSToolDriver, Tool
from mcs_host.kit import manifest_meta


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [Tool(name="ping", description="Answer pong.")]

    def execute_tool(self, tool_name, arguments):
        return "pong"
"""


def driver_project(
    name: str,
    marker: Path,
    driver_id: str,
    version: str = "1.0.0",
    *,
    label: str | None = None,
    module: str | None = None,
    files: Mapping[str, str] | None = None,
    entry_point: str | None = None,
    meta: Mapping[str, Any] | None = None,
) -> Project:
    """A driver distribution whose package writes ``marker`` when imported."""
    package = module or name.replace("-", "_")
    manifest = {
        "format": "mcs-driver-manifest/1",
        "drivers": {
            "Driver": {
                "id": driver_id,
                "name": name,
                "version": version,
                "trust": {"publisher": "Fixture Co"},
                **(meta or {}),
            }
        },
    }
    sources = {
        f"{package}/__init__.py": DRIVER_SOURCE.format(marker=str(marker), name=name),
        f"{package}/mcs-driver.json": json.dumps(manifest, indent=2),
        **(files or {}),
    }
    return Project(
        name,
        version,
        files=sources,
        entry_points={"mcs.drivers": {label or package: entry_point or f"{package}:Driver"}},
        dependencies=["mcs-host"],
    )


def pin(wheel: Path) -> dict[str, Any]:
    """The registry pin of a wheel, computed in this process without installing it."""
    release = release_from_wheel(wheel)
    return release.pin().model_dump(mode="json", exclude_none=True)


def entry(distribution: str, label: str, obj: str, **fields: Any) -> dict[str, Any]:
    return {
        "distribution": distribution,
        "label": label,
        "object": obj,
        "trust": "community",
        **fields,
    }


def write_registry(path: Path, drivers: Mapping[str, Mapping[str, Any]], **fields: Any) -> Path:
    path.write_text(
        json.dumps({"format": REGISTRY_FORMAT, **fields, "drivers": drivers}, indent=2), "utf-8"
    )
    return path


_PIPELINE = """
import json, sys
from mcs_host import (
    PublicKey, RegistrySource, TrustPolicy, check_runtime_meta, discover, import_driver,
    load_index, verify,
)

args = json.loads(sys.argv[1])
keys = tuple(PublicKey.parse(k) for k in args["keys"])
sources = [RegistrySource(p, keys, args["threshold"]) for p in args["registries"]]
index, errors = load_index(sources)
result = {"registry_errors": [[e.reason, str(e)] for e in errors], "drivers": {}}
policy = TrustPolicy(**args["policy"])
for v in verify(discover(), index, policy, args["labels"]):
    row = {
        "status": v.status, "reason": v.reason, "message": v.message, "allowed": v.allowed,
        "digest": v.digest, "warnings": list(v.warnings),
    }
    if args["import"] and v.allowed:
        for hook in args["before_import"]:
            exec(hook)
        try:
            obj = import_driver(v)
            row["imported"] = True
            row["meta_problem"] = check_runtime_meta(obj, v)
        except ImportError as exc:
            row["imported"] = False
            row["import_error"] = str(exc)
    result["drivers"][v.label] = row
print(json.dumps(result))
"""


def run_host(
    venv: Venv,
    registries: Sequence[Path],
    *,
    state: Path,
    keys: Sequence[str] = (),
    threshold: int = 1,
    labels: Sequence[str] = (),
    policy: Mapping[str, bool] | None = None,
    do_import: bool = True,
    before_import: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run discover -> verify -> import in ``venv``; ``before_import`` is code run in between."""
    args = {
        "registries": [str(p) for p in registries],
        "keys": list(keys),
        "threshold": threshold,
        "labels": list(labels),
        "policy": dict(policy or {}),
        "import": do_import,
        "before_import": list(before_import),
    }
    done = venv.run(
        "python",
        "-c",
        _PIPELINE,
        json.dumps(args),
        env={"MCS_HOST_STATE_DIR": str(state), **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result
