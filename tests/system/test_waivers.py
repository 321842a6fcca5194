"""A waiver admits its own driver's files, nothing else.

``allow_unverified = true`` in one ``[drivers.<label>]`` table lets that driver load though no
registry vouches for it, typically an editable install of the project being developed. The
project directory often holds the virtual environment (``.venv``), and an editable install
puts the project directory itself on ``sys.path``. Attacks, through the installed ``mcs-host``
console script: a pinned driver's call imports a module that a malicious distribution
installed into that ``.venv``, a module dropped at the project's root, a module of the waived
driver's own package, and one of the unverified library the waiver admits for the waived
driver; each writes a marker file the test asserts is absent. The waived driver still loads
and imports its own modules and its library at call time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import pytest
from distbuild import Project, Venv, build_wheel, pip
from hostrun import entry, pin, write_registry

pytestmark = pytest.mark.venv

UNITS_ID = "9a7e0000-0000-4000-8000-0000000000a1"
VICTIM_ID = "9a7e0000-0000-4000-8000-0000000000b2"

_DRIVER = """\
from mcs_host import MCSToolDriver, Tool
from mcs_host.kit import manifest_meta


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [Tool(name={tool!r}, description="Say which imports worked.")]

    def execute_tool(self, tool_name, arguments):
        worked = []
        for name in {imports!r}:
            try:
                __import__(name)
            except ImportError:
                continue
            worked.append(name)
        return ",".join(worked) or "none"
"""

_PAYLOAD = 'open({marker!r}, "a").write("{name} ran\\n")\n'


class Scene(NamedTuple):
    venv: Venv
    project: Path
    """The waived driver's project directory, which holds the venv."""
    config: Path
    markers: dict[str, Path]
    """What each payload module writes when it runs."""


def _driver(
    name: str,
    ident: str,
    tool: str,
    imports: list[str],
    files: dict[str, str],
    dependencies: tuple[str, ...] | list[str] = ("mcs-host",),
) -> Project:
    package = name.replace("-", "_")
    manifest = {
        "format": "mcs-driver-manifest/1",
        "drivers": {
            "Driver": {
                "id": ident,
                "name": name,
                "version": "1.0.0",
                "trust": {"publisher": "Fixture Co"},
            }
        },
    }
    return Project(
        name,
        files={
            f"{package}/__init__.py": _DRIVER.format(tool=tool, imports=imports),
            f"{package}/mcs-driver.json": json.dumps(manifest),
            **files,
        },
        entry_points={"mcs.drivers": {package: f"{package}:Driver"}},
        dependencies=list(dependencies),
    )


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path) -> Scene:
    """units-driver installed editable from a project directory that holds the venv; a pinned
    victim-driver whose tool tries three imports; a distribution that ships one of them."""
    root = tmp_path_factory.mktemp("waivers")
    names = ("planted", "loose", "internal", "secret")
    markers = {name: root / f"{name}-ran.txt" for name in names}
    payload = {name: _PAYLOAD.format(marker=str(path), name=name) for name, path in markers.items()}
    wheels = root / "wheels"
    library = Project(
        "unit-lib",
        files={"unitlib/__init__.py": "", "unitlib/secret.py": payload["secret"]},
        module_name="unitlib",
    )
    build_wheel(library.write(root / "src"), wheels)
    units = _driver(
        "units-driver",
        UNITS_ID,
        "convert",
        ["units_driver.helpers", "unitlib"],  # its own module and library: admitted
        {"units_driver/helpers.py": "", "units_driver/internal.py": payload["internal"]},
        dependencies=["mcs-host", "unit-lib"],
    )
    project = units.write(root)
    (project / "loose.py").write_text(payload["loose"])  # on sys.path: the editable .pth
    venv = Venv.create(project / ".venv")
    venv.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    pip(
        "install",
        "--no-index",
        "--find-links",
        str(wheelhouse),
        "--find-links",
        str(wheels),
        "--editable",
        str(project),
        python=venv.python,
    )
    victim = _driver(
        "victim-driver",
        VICTIM_ID,
        "probe",
        ["planted", "loose", "units_driver.internal", "unitlib.secret"],
        {},
    )
    planted = Project(
        "planted-lib", files={"planted.py": payload["planted"]}, module_name="planted"
    )
    victim_wheel = build_wheel(victim.write(root / "src"), wheels)
    planted_wheel = build_wheel(planted.write(root / "src"), wheels)
    pip(
        "install",
        "--no-index",
        "--no-deps",
        str(victim_wheel),
        str(planted_wheel),
        python=venv.python,
    )
    victim_entry = entry("victim-driver", "victim_driver", "victim_driver:Driver")
    registry = write_registry(
        root / "registry.json",
        {VICTIM_ID: {**victim_entry, "releases": {"1.0.0": pin(victim_wheel)}}},
    )
    config = root / "config.toml"
    config.write_text(
        f'registries = ["{registry}"]\n'
        "[drivers.units_driver]\nallow_unverified = true\n"
        "[drivers.victim_driver]\n"
    )
    return Scene(venv, project, config, markers)


def call(scene: Scene, tool: str) -> dict[str, object]:
    done = scene.venv.run(
        "mcs-host", "call", tool, "--config", scene.config, "--json", cwd=scene.project
    )
    assert done.stdout, done.stderr
    document: dict[str, object] = json.loads(done.stdout)
    return document


def test_a_waiver_admits_no_file_of_the_venv_or_the_project_root_to_a_pinned_driver(
    scene: Scene,
) -> None:
    document = call(scene, "probe")
    mounts = {m["label"]: m for m in document["load"]["drivers"]}  # type: ignore[index]
    assert (mounts["units_driver"]["status"], mounts["units_driver"]["verification"]) == (
        "mounted",
        "unverified",
    )
    assert mounts["victim_driver"]["verification"] == "pinned"
    response = document["response"]
    assert response["tool_call_result"] == "none", response  # type: ignore[index]
    for name in scene.markers:
        assert not scene.markers[name].exists(), scene.markers[name].read_text()


def test_the_waived_driver_still_imports_its_own_modules_and_library_at_call_time(
    scene: Scene,
) -> None:
    document = call(scene, "convert")
    result = document["response"]["tool_call_result"]  # type: ignore[index]
    assert result == "units_driver.helpers,unitlib"


def test_an_allowed_tree_never_covers_a_virtual_environment_inside_it(tmp_path: Path) -> None:
    import importlib.util

    from mcs_host.trust._gate import ImportRefusedError, VerifiedImporter

    tree = tmp_path / "project"
    own = tree / "units_driver" / "helpers.py"
    venv = tree / "units_driver" / "env"
    planted = venv / "lib" / "python3.11" / "site-packages" / "planted.py"
    elsewhere = tree / "units_driver" / "vendor" / "site-packages" / "planted.py"
    for path in (own, planted, elsewhere):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    judge = VerifiedImporter()
    judge.allow([], "units-driver", "a waiver", [str(tree / "units_driver")])

    def judged(name: str, path: Path) -> None:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None
        judge.judge_module(name, importlib.util.module_from_spec(spec))

    judged("units_driver.helpers", own)
    for path in (planted, elsewhere):
        with pytest.raises(ImportRefusedError, match="is not verified"):
            judged("planted", path)
