"""Attack tests: a driver must not pull unverified code in through its dependencies.

By default no unverified code runs, dependencies included: an unpinned dependency refuses the
driver, and the refusal's fix line (one ``lock``, which pins a driver with everything it needs)
makes it load. Every fixture distribution writes a marker named after itself when its module
is imported, so each test sees which code ran. ``helper-lib`` is a library a driver declares;
``sneaky-lib`` is installed and imported by a driver that does not declare it.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from distbuild import Project, Venv, build_wheel, uv_pip
from scenes import Scene

pytestmark = pytest.mark.venv

MARK = "import pathlib\npathlib.Path({markers!r}, {name!r}).write_text('imported')\n"

DRIVER = """
from mcs_host import MCSToolDriver, Tool
from mcs_host.kit import manifest_meta
{imports}

class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [Tool(name="{name}_answer", description="Answer.")]

    def execute_tool(self, tool_name, arguments):
        return ANSWER
"""

DRIVERS = {
    # label: (dependencies, what its module imports)
    "declares": (["mcs-host", "helper-lib"], "from helper_lib import ANSWER"),
    "sneaky": (["mcs-host"], "from sneaky_lib import ANSWER"),
    "absent": (["mcs-host", "absent-lib"], "ANSWER = 0"),
    # rewrites its library between the host's checks and its own import of it (when asked to)
    "swapper": (["mcs-host", "helper-lib"], "{swap}from helper_lib import ANSWER"),
}
SWAP = """import importlib.util, os, pathlib
if os.environ.get("SWAP_HELPER_LIB"):
    target = pathlib.Path(importlib.util.find_spec("helper_lib").origin)
    target.write_text(target.read_text() + "pathlib.Path({markers!r}, 'swapped').touch()\\n")
"""


def _library(name: str, markers: Path) -> Project:
    module = name.replace("-", "_")
    code = MARK.format(markers=str(markers), name=name) + "ANSWER = 42\nfrom . import one, two\n"
    parts = {f"{module}/{part}.py": "" for part in ("one", "two")}
    return Project(name, files={f"{module}/__init__.py": code, **parts})


def _driver(label: str, markers: Path) -> Project:
    dependencies, imports = DRIVERS[label]
    package = f"{label}_driver"
    swap = SWAP.format(markers=str(markers))
    code = MARK.format(markers=str(markers), name=label) + DRIVER.format(
        imports=imports.format(swap=swap), name=label
    )
    manifest = {"id": f"{label}-id", "name": label, "version": "1.0.0"}
    return Project(
        f"{label}-driver",
        files={
            f"{package}/__init__.py": code,
            f"{package}/mcs-driver.json": json.dumps(
                {"format": "mcs-driver-manifest/1", "drivers": {"Driver": manifest}}
            ),
        },
        entry_points={"mcs.drivers": {label: f"{package}:Driver"}},
        dependencies=dependencies,
    )


@dataclass(frozen=True)
class DependencyScene(Scene):
    """The venv with the libraries and drivers, each writing a file named after itself in
    ``markers`` when its module is imported; ``root`` holds the registries
    ``drivers-only.json`` and ``with-library.json``."""

    markers: Path


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> DependencyScene:
    root = tmp_path_factory.mktemp("dependencies")
    markers = root / "markers"
    markers.mkdir()
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    projects = [_library(n, markers) for n in ("helper-lib", "sneaky-lib")]
    projects += [_driver(label, markers) for label in DRIVERS]
    wheels = [build_wheel(p.write(root / "src"), root / "wheels") for p in projects]
    uv_pip("install", "--no-index", "--no-deps", *map(str, wheels), python=venv.python)
    # drivers-only.json pins the drivers (from their wheels: what an installed driver needs
    # is pinned with it); with-library.json pins helper-lib as well
    scene = DependencyScene(root, venv, markers)
    drivers_only, with_library = root / "drivers-only.json", root / "with-library.json"
    named = [arg for wheel in wheels[2:] for arg in ("--wheel", wheel)]  # the drivers'
    done = scene.host("lock", "--registry", drivers_only, *named)
    assert done.returncode == 0, done.stderr
    with_library.write_text(drivers_only.read_text())
    done = scene.host("lock", "--registry", with_library, "--distribution", "helper-lib")
    assert done.returncode == 0, done.stderr
    assert "libraries" not in json.loads(drivers_only.read_text())
    assert list(json.loads(with_library.read_text())["libraries"]) == ["helper-lib"]
    assert not list(markers.iterdir()), "lock imported code"
    return scene


def load(
    scene: DependencyScene,
    tmp_path: Path,
    *registries: str,
    config: str = "",
    env: dict[str, str] | None = None,
    labels: tuple[str, ...] = (),
) -> dict[str, tuple[str, str, list[str]]]:
    for marker in scene.markers.iterdir():
        marker.unlink()
    config_file = tmp_path / "mcs-host.toml"
    paths = [str(scene.root / registry) for registry in registries]
    config_file.write_text(f"registries = {paths!r}\n{config}")
    done = scene.host(
        "load", "--json", "--config", config_file, *labels, state=tmp_path / "state", env=env
    )
    assert done.stdout, done.stderr
    report = json.loads(done.stdout)
    return {d["label"]: (d["status"], d["reason"], d["warnings"]) for d in report["drivers"]}


def ran(scene: DependencyScene) -> set[str]:
    """The names of the marker files: which fixture distributions' code ran."""
    return {p.name for p in scene.markers.iterdir()}


def test_a_pinned_dependency_is_imported_from_verified_bytes(
    scene: DependencyScene, tmp_path: Path
) -> None:
    found = load(scene, tmp_path, "with-library.json")
    status, reason, warnings = found["declares"]
    assert (status, reason) == ("mounted", "mounted")
    assert not [w for w in warnings if "helper" in w]


def test_one_lock_pins_a_driver_by_label_and_the_library_it_needs(
    scene: DependencyScene, tmp_path: Path
) -> None:
    registry = tmp_path / "registry.json"
    done = scene.host("lock", "declares", "--registry", registry)
    assert done.returncode == 0, done.stderr
    written = json.loads(registry.read_text())
    assert [e["label"] for e in written["drivers"].values()] == ["declares"]
    assert list(written["libraries"]) == ["helper-lib"]
    # each distribution pinned is listed, the library with what needs it
    assert done.stdout.startswith("pinned declares-driver 1.0.0: sha256:")
    assert "\npinned helper-lib 1.0.0: sha256:" in done.stdout
    assert "bytes), needed by declares-driver\n" in done.stdout
    again = scene.host("lock", "declares", "--distribution", "helper-lib", "--registry", registry)
    assert again.returncode == 0, again.stderr
    assert json.loads(registry.read_text()) == written  # naming the library changes nothing
    status, reason, warnings = load(scene, tmp_path, str(registry), labels=("declares",))[
        "declares"
    ]
    assert (status, reason, warnings) == ("mounted", "mounted", [])  # the library is pinned
    wrong = scene.host("lock", "nope", "--distribution", "helper-lib", "--registry", registry)
    assert wrong.returncode == 2
    assert wrong.stderr.startswith("error: no installed driver has the label nope (installed: ")
    assert json.loads(registry.read_text()) == written  # nothing written


def test_an_unpinned_dependency_is_refused_unless_the_policy_asks_to_report_it(
    scene: DependencyScene, tmp_path: Path
) -> None:
    for config in ("", '[trust]\ndependencies = "refuse"\n', "strict = true\n"):
        found = load(scene, tmp_path, "drivers-only.json", config=config)
        status, reason, _ = found["declares"]
        assert (status, reason) == ("rejected", "unverified-dependency"), config
        # refused before import: neither the driver nor its library ran
        assert not {"declares", "helper-lib"} & ran(scene)

    report = '[trust]\ndependencies = "report"\n'
    status, _, warnings = load(scene, tmp_path, "drivers-only.json", config=report)["declares"]
    assert status == "mounted"
    assert any(
        w.startswith("unverified-dependency: dependency helper-lib 1.0.0 is unverified")
        for w in warnings
    ), warnings


@pytest.mark.parametrize("mount", ["declares", "calc"])
def test_an_unpinned_dependency_never_runs_by_default_and_its_fix_line_makes_it_load(
    scene: DependencyScene, tmp_path: Path, mount: str
) -> None:
    # "calc" mounts the driver labelled declares under a label of the user's own
    registry = tmp_path / "registry.json"  # the driver pinned, its library not
    registry.write_text((scene.root / "drivers-only.json").read_text())
    config = tmp_path / "mcs-host.toml"
    table = f'[drivers.{mount}]\ndriver = "declares"\n' if mount != "declares" else ""
    config.write_text(f"registries = [{str(registry)!r}]\n{table}")
    for marker in scene.markers.iterdir():
        marker.unlink()

    def load_mount() -> tuple[int, str]:
        done = scene.host("load", mount, "--config", config, state=tmp_path / "state")
        return done.returncode, done.stdout

    code, out = load_mount()
    assert code == 1
    assert f"{mount}: unverified-dependency: dependency helper-lib 1.0.0 is unverified" in out
    assert not {"declares", "helper-lib"} & ran(scene)  # neither the driver nor its library
    (line,) = [line for line in out.splitlines() if line.startswith("  fix: ")]
    command = shlex.split(line.split("`")[1])  # the one command it names, as printed
    assert command == [
        "mcs-host", "lock", mount, "--registry", str(registry), "--config", str(config)
    ]  # fmt: skip
    done = scene.host(*command[1:])  # the command asserted above: mcs-host lock ...
    assert done.returncode == 0, done.stderr
    code, out = load_mount()
    assert code == 0, out
    (row,) = [line.split() for line in out.splitlines() if line.startswith(f"{mount} ")]
    assert row[:6] == [mount, "declares", "declares-driver", "1.0.0", "mounted", "pinned"]
    assert "WARNING" not in out  # nothing unverified ran
    assert {"declares", "helper-lib"} <= ran(scene)


def test_modules_imported_unverified_are_one_line_per_distribution_named_with_verbose(
    scene: DependencyScene, tmp_path: Path
) -> None:
    report = '[trust]\ndependencies = "report"\n'  # development: unverified code runs, warned
    config = tmp_path / "mcs-host.toml"
    config.write_text(f"registries = {[str(scene.root / 'drivers-only.json')]!r}\n{report}")

    def imported(*options: str) -> list[str]:
        done = scene.host(
            "load", "declares", "--config", config, *options, state=tmp_path / "state"
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return [line for line in done.stdout.splitlines() if "unverified-import" in line]

    counted = (
        "declares: WARNING: unverified-import: 3 modules of helper-lib imported from unverified "
        "files (an unverified dependency of declares-driver the policy allows)"
    )
    assert imported() == [counted]
    named = f"{counted}; modules: helper_lib, helper_lib.one, helper_lib.two"
    assert imported("-v") == imported("--verbose") == [named]
    found = load(scene, tmp_path, "drivers-only.json", config=report, labels=("declares",))
    warnings = found["declares"][2]
    assert [w for w in warnings if w.startswith("unverified-import")] == [
        named.removeprefix("declares: WARNING: ")
    ]


def test_a_tampered_dependency_refuses_the_driver_before_any_code_runs(
    scene: DependencyScene, tmp_path: Path
) -> None:
    (init,) = scene.venv.site_packages.glob("helper_lib/__init__.py")
    original = init.read_text()
    init.write_text(original.replace("ANSWER = 42", "ANSWER = 'pwned'"))
    try:
        status, reason, _ = load(scene, tmp_path, "with-library.json")["declares"]
    finally:
        init.write_text(original)
    assert (status, reason) == ("rejected", "dependency-rejected")
    assert not {"declares", "helper-lib"} & ran(scene)


def test_an_undeclared_import_from_an_unverified_distribution_is_refused_before_it_runs(
    scene: DependencyScene, tmp_path: Path
) -> None:
    status, reason, warnings = load(scene, tmp_path, "with-library.json")["sneaky"]
    assert (status, reason) == ("rejected", "integrity")
    assert any(
        w.startswith("import-refused: import of 'sneaky_lib' refused: ") and "sneaky_lib" in w
        for w in warnings
    ), warnings
    assert "sneaky-lib" not in ran(scene)  # refused before its code could run
    assert "sneaky" in ran(scene)  # the driver's own verified module ran up to that import


def test_a_library_swapped_after_its_checks_is_not_imported(
    scene: DependencyScene, tmp_path: Path
) -> None:
    (init,) = scene.venv.site_packages.glob("helper_lib/__init__.py")
    original = init.read_text()
    try:
        # alone: a driver loaded before it would have imported the library already
        found = load(
            scene, tmp_path, "with-library.json", env={"SWAP_HELPER_LIB": "1"}, labels=("swapper",)
        )
        assert "swapped" in init.read_text()
    finally:
        init.write_text(original)
    status, reason, _ = found["swapper"]
    assert (status, reason) == ("rejected", "integrity")
    assert "swapper" in ran(scene)  # the driver ran up to its import of the library
    assert not {"helper-lib", "swapped"} & ran(scene)  # neither library version ran


def test_registries_that_disagree_about_a_library_refuse_the_driver(
    scene: DependencyScene, tmp_path: Path
) -> None:
    document = json.loads((scene.root / "with-library.json").read_text())
    (pin,) = document["libraries"]["helper-lib"]["releases"].values()
    pin["digest"] = "sha256:" + "0" * 64
    (scene.root / "disagreeing.json").write_text(json.dumps(document))
    found = load(scene, tmp_path, "with-library.json", "disagreeing.json")
    status, reason, _ = found["declares"]
    assert (status, reason) == ("rejected", "dependency-rejected")
    assert not {"declares", "helper-lib"} & ran(scene)


def test_a_missing_dependency_fails_before_import(scene: DependencyScene, tmp_path: Path) -> None:
    status, reason, _ = load(scene, tmp_path, "with-library.json")["absent"]
    assert (status, reason) == ("failed", "missing-dependency")
    assert "absent" not in ran(scene)
