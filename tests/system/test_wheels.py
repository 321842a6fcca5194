"""Drivers the world writes: a driver that imports numpy, pandas and scipy, with their wheels
from the package index (auditwheel-repaired: ``numpy.libs/`` holds OpenBLAS, gfortran,
quadmath; ``scipy.libs/`` its own), pinned with one ``lock LABEL`` (the driver and every
distribution it needs), verified, loaded in process and isolated with their native code
allowed by default, and its tool answering with numbers ``numpy.linalg``, pandas and scipy
computed; a user who refuses native code gets it refused. Needs the package registry
(deselect with ``-m "not network"``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from distbuild import Project, Venv, build_wheel, pip, uv_pip
from scenes import Scene

pytestmark = [pytest.mark.venv, pytest.mark.network]

SCIENCE = ["numpy==2.4.6", "pandas==3.1.1", "scipy==1.17.1"]
DRIVER_ID = "7c1f0000-0000-4000-8000-0000000000f3"

DRIVER = """\
import numpy as np
import pandas as pd
import scipy.linalg

from mcs_host import MCSToolDriver, Tool, ToolParameter
from mcs_host.kit import manifest_meta


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [
            Tool(
                name="solve",
                description="Solve A x = b; describe x.",
                parameters=[
                    ToolParameter(name="matrix", description="A, square.", required=True,
                                  schema={"type": "array"}),
                    ToolParameter(name="vector", description="b.", required=True,
                                  schema={"type": "array"}),
                ],
            )
        ]

    def execute_tool(self, tool_name, arguments):
        x = np.linalg.solve(np.array(arguments["matrix"]), np.array(arguments["vector"]))
        frame = pd.DataFrame({"x": x})
        return {
            "x": [round(float(v), 9) for v in x],
            "mean": round(float(frame["x"].mean()), 9),
            "det": round(float(scipy.linalg.det(np.array(arguments["matrix"]))), 9),
        }
"""
MANIFEST = {
    "format": "mcs-driver-manifest/1",
    "drivers": {
        "Driver": {
            "id": DRIVER_ID,
            "name": "np-stats",
            "version": "1.0.0",
            "trust": {"publisher": "Fixture Co"},
        }
    },
}
ARGS = json.dumps({"matrix": [[2, 1], [1, 3]], "vector": [3, 5]})


@dataclass(frozen=True)
class ScienceScene(Scene):
    """The driver and the libraries pip installed for it (``libraries``), pinned in
    ``registry`` by one ``lock``, which printed ``locked``."""

    registry: Path
    libraries: list[str]
    locked: str

    def run(self, *args: str | Path) -> tuple[int, str, str]:
        """``mcs-host ARGS --registry REGISTRY``, the host's state under the scene."""
        done = self.host(*args, "--registry", self.registry, state=self.root / "state")
        return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def science(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> ScienceScene:
    """numpy and pandas from the index, the driver, and a registry one lock wrote."""
    root = tmp_path_factory.mktemp("science")
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host[mcp]", wheelhouse=wheelhouse, cache=uv_cache)  # mcp: --isolate
    report = root / "installed.json"
    pip("install", "--only-binary", ":all:", "--report", str(report), *SCIENCE,
        python=venv.python)  # fmt: skip
    libraries = [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]]
    project = Project(
        "np-stats",
        files={"np_stats/__init__.py": DRIVER, "np_stats/mcs-driver.json": json.dumps(MANIFEST)},
        entry_points={"mcs.drivers": {"np-stats": "np_stats:Driver"}},
        dependencies=["mcs-host", "numpy", "pandas", "scipy"],
    )
    wheel = build_wheel(project.write(root / "src"), root / "wheels")
    uv_pip("install", "--no-index", "--no-deps", str(wheel), python=venv.python)
    registry = root / "registry.json"
    done = Scene(root, venv).host("lock", "np-stats", "--registry", registry)
    assert done.returncode == 0, done.stderr
    return ScienceScene(
        root=root, venv=venv, registry=registry, libraries=libraries, locked=done.stdout
    )


def test_one_lock_pins_the_driver_and_every_library_it_imports(science: ScienceScene) -> None:
    written = json.loads(science.registry.read_text())
    assert [e["label"] for e in written["drivers"].values()] == ["np-stats"]
    # scipy requires numpy below a License field continued by lines of blanks: still read
    assert {"numpy", "pandas", "scipy"} <= set(written["libraries"])
    # `lock np-stats` alone pinned what pip installed for it, each listed
    assert set(written["libraries"]) == set(science.libraries)
    listed = {line.split()[1] for line in science.locked.splitlines() if " sha256:" in line}
    assert listed == {"np-stats", *science.libraries}
    # native code of verified distributions is verified code: no flag is needed
    code, out, _ = science.run("verify")
    assert code == 0, out
    assert "1 of 1 drivers may be loaded; 1 would run only verified code." in out


def test_a_user_who_refuses_native_code_gets_the_numpy_driver_refused(
    science: ScienceScene, tmp_path: Path
) -> None:
    config = tmp_path / "mcs-host.toml"
    config.write_text("[trust]\nallow_extensions = false\n")
    for refusing in (["--config", str(config)], ["--no-allow-extensions"]):
        code, out, _ = science.run("load", "--json", *refusing)
        (record,) = json.loads(out)["drivers"]
        assert code == 1
        assert (record["status"], record["reason"]) == ("rejected", "extension-module")
        assert "and the policy refuses native code" in record["message"]
        assert "`--allow-extensions`" in record["fix"]


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "isolated"])
def test_a_numpy_pandas_and_scipy_driver_loads_verified_and_computes(
    science: ScienceScene, isolate: bool
) -> None:
    flags = ["--isolate"] if isolate else []
    code, out, _ = science.run("call", "solve", "--args", ARGS, "--json", *flags)
    document = json.loads(out)
    records = document["load"]["drivers"]
    assert code == 0, [(r["status"], r["reason"], r["message"]) for r in records]
    (record,) = records
    assert (record["status"], record["verification"]) == ("mounted", "pinned")
    assert document["response"]["tool_call_result"] == {"x": [0.8, 1.4], "mean": 1.1, "det": 5.0}


def test_a_tampered_openblas_in_numpy_libs_is_refused_naming_it(science: ScienceScene) -> None:
    site = science.venv.site_packages
    (openblas,) = (site / "numpy.libs").glob("libscipy_openblas*.so")
    genuine = openblas.read_bytes()
    # the same size, one byte changed: only its hash can tell
    openblas.write_bytes(genuine[:4096] + bytes([genuine[4096] ^ 0xFF]) + genuine[4097:])
    try:
        code, out, _ = science.run("verify", "--allow-extensions")
        assert code == 1
        assert f"numpy.libs/{openblas.name}" in out
        code, out, _ = science.run("load", "--allow-extensions", "--json")
        (record,) = json.loads(out)["drivers"]
        assert (record["status"], record["reason"]) == ("rejected", "dependency-rejected")
        assert f"numpy.libs/{openblas.name} does not match its RECORD hash" in record["message"]
    finally:
        openblas.write_bytes(genuine)
