"""Attacks on what runs, whatever an attacker writes in site-packages or the working directory.

The import gate claims verified modules and the namespace packages on their paths, judges
every other import by the file it comes from, and the command line locks its process down.
Each test builds real distributions, installs them with pip into a venv, plants the attacker's
files, and asserts the refusal or finding and, through marker files, that the attacker's code
never ran. A control shows each plant is live: plain Python does run it.
"""

from __future__ import annotations

import json
import py_compile
import shutil
import subprocess
import sysconfig
import textwrap
import zipfile
from dataclasses import dataclass
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

import pytest
from distbuild import Project, Venv, build_wheel, uv_pip
from hostrun import DRIVER_SOURCE, driver_project, entry, pin, write_registry
from scenes import MarkedScene, Scene

pytestmark = pytest.mark.venv

MARK = "open({marker!r}, 'a').write({text!r} + '\\n')\n"


def mark(marker: Path, text: str) -> str:
    """Python code that appends ``text`` to ``marker`` when it runs."""
    return MARK.format(marker=str(marker), text=text)


@dataclass(frozen=True)
class GateScene(MarkedScene):
    """A venv whose fixture code appends to ``marker`` when it runs, and the registry that
    pins its drivers."""

    registry: Path


def compile_extension(directory: Path, name: str, marker: Path, who: str) -> Path:
    """A real extension module ``name`` whose init writes ``<who> ran`` to ``marker`` and
    whose ``WHO`` is ``who``, built with the C compiler for this Python."""
    source = directory / f"{name}-{who}.c"
    source.write_text(
        textwrap.dedent(
            f"""
            #include <Python.h>
            static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, NULL}};
            PyMODINIT_FUNC PyInit_{name}(void) {{
                FILE *f = fopen("{marker}", "a");
                if (f) {{ fputs("{who} ran\\n", f); fclose(f); }}
                PyObject *m = PyModule_Create(&def);
                if (m) PyModule_AddStringConstant(m, "WHO", "{who}");
                return m;
            }}
            """
        )
    )
    out = directory / f"{name}-{who}{EXTENSION_SUFFIXES[0]}"
    include = sysconfig.get_paths()["include"]
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O0", f"-I{include}", "-o", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    return out


def new_venv(root: Path, wheelhouse: Path, uv_cache: Path) -> Venv:
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    return venv


def install(venv: Venv, root: Path, *projects: Project) -> list[Path]:
    wheels = [build_wheel(p.write(root / "src"), root / "wheels") for p in projects]
    uv_pip("install", "--no-index", "--no-deps", *map(str, wheels), python=venv.python)
    return wheels


def load_json(
    scene: Scene, registry: Path, state: Path, *args: str | Path, **env: str
) -> tuple[int, dict[str, Any]]:
    done = scene.host("load", "--json", "--registry", registry, *args, state=state, env=env)
    assert done.stdout, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


def reporting(directory: Path) -> Path:
    """A configuration that reports unverified dependencies and refused imports instead of
    refusing the driver (``[trust] dependencies = "report"``, for development)."""
    config = directory / "reporting.toml"
    config.write_text('[trust]\ndependencies = "report"\n')
    return config


REPORT = {"dependencies": "report"}
"""The Python API's trust setting that :func:`reporting` is on the command line."""


def record(report: dict[str, Any], label: str, kind: str = "drivers") -> dict[str, Any]:
    found: list[dict[str, Any]] = [r for r in report[kind] if r["label"] == label]
    assert len(found) == 1, report[kind]
    return found[0]


# A Python API run: load, then (between hooks) send tool calls, as a client app would.
APP = """
import json, sys
from mcs_host import LoadError, load_drivers

args = json.loads(sys.argv[1])
for hook in args["before"]:
    exec(hook)
try:
    driver, report = load_drivers(registries=args["registries"], trust=args["trust"])
except LoadError as error:
    print(json.dumps({"errors": list(error.report.errors)}))
    raise SystemExit(0)
out = {
    "records": {
        r.label: [r.status, r.reason, r.message, list(r.warnings)] for r in report.records
    }
}
out["calls"] = []
for tool, hooks in args["calls"]:
    for hook in hooks:
        exec(hook)
    response = driver.process_llm_response(json.dumps({"tool": tool, "arguments": {}}))
    out["calls"].append(
        [response.call_executed, response.call_failed, response.call_detail,
         response.tool_call_result]
    )
print(json.dumps(out, default=str))
"""


def app(
    scene: GateScene,
    state: Path,
    calls: list[tuple[str, list[str]]] = (),  # type: ignore[assignment]
    *,
    before: list[str] = (),  # type: ignore[assignment]
    trust: dict[str, Any] | None = None,
) -> dict[str, Any]:
    args = {
        "registries": [str(scene.registry)],
        "trust": trust or {},
        "calls": [list(c) for c in calls],
        "before": list(before),
    }
    env = {"MCS_HOST_STATE_DIR": str(state)}
    done = scene.venv.run("python", "-c", APP, json.dumps(args), env=env)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


# -- the host's identity: nothing is the host's by its name ----------------------------------

EVIL_ID = "7c1f0000-0000-4000-8000-0000000000e1"


@pytest.fixture(scope="module")
def identity_scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> GateScene:
    """A pinned driver that declares and imports evil-lib, an unpinned library."""
    root = tmp_path_factory.mktemp("identity")
    marker = root / "ran.txt"
    venv = new_venv(root, wheelhouse, uv_cache)
    evil = Project("evil-lib", files={"evil_lib/__init__.py": mark(marker, "evil-lib")})
    driver = driver_project("needs-evil", marker, EVIL_ID)
    driver = Project(
        driver.name,
        driver.version,
        files={
            **driver.files,
            "needs_evil/__init__.py": "import evil_lib\n"
            + DRIVER_SOURCE.format(marker=str(marker), name="needs-evil"),
        },
        entry_points=driver.entry_points,
        dependencies=["mcs-host", "evil-lib"],
    )
    wheels = install(venv, root, evil, driver)
    registry = write_registry(
        root / "registry.json",
        {
            EVIL_ID: entry(
                "needs-evil", "needs_evil", "needs_evil:Driver", releases={"1.0.0": pin(wheels[1])}
            )
        },
    )
    return GateScene(root=root, venv=venv, marker=marker, registry=registry)


def _fake_host(directory: Path, venv: Venv, name: str = "MCS_Host-99.0.dist-info") -> Path:
    """A dist-info that says it is mcs-host, copies the real RECORD (so it claims the running
    package's files) and requires evil-lib."""
    fake = directory / name
    fake.mkdir(parents=True)
    (real,) = venv.site_packages.glob("mcs_host-*.dist-info")
    record = (real / "RECORD").read_text()
    (fake / "RECORD").write_text(record)
    metadata = (
        (real / "METADATA")
        .read_text()
        .replace("Requires-Dist:", "Requires-Dist: evil-lib\nRequires-Dist:", 1)
    )
    (fake / "METADATA").write_text(metadata)
    return fake


@pytest.mark.parametrize("where", ["site-packages", "an earlier sys.path entry"])
def test_a_fake_mcs_host_distribution_exempts_no_dependency(
    identity_scene: GateScene, tmp_path: Path, where: str
) -> None:
    scene, registry = identity_scene, identity_scene.registry
    earlier = tmp_path / "earlier"
    directory = scene.venv.site_packages if where == "site-packages" else earlier
    fake = _fake_host(directory, scene.venv)
    env = {"PYTHONPATH": str(earlier)} if where != "site-packages" else {}
    try:
        code, report = load_json(scene, registry, tmp_path / "state", "--strict", **env)
        assert code == 1
        found = record(report, "needs_evil")
        assert (found["status"], found["reason"]) == ("rejected", "unverified-dependency")
        assert "dependency evil-lib 1.0.0 is unverified" in found["message"]
        assert any(str(fake) in finding for finding in report["environment"]), report
        assert "evil-lib ran" not in scene.ran()
        verified = scene.host("verify", "--registry", registry, state=tmp_path / "state", env=env)
        assert verified.returncode == 1
        assert (
            "needs_evil: refused at load: unverified-dependency: dependency evil-lib 1.0.0"
            in verified.stdout
        )
        assert str(fake) in verified.stdout
        # by default too the dependency is refused, never silently trusted as the host's
        code, report = load_json(scene, registry, tmp_path / "state", **env)
        found = record(report, "needs_evil")
        assert (code, found["reason"]) == (1, "unverified-dependency")
        # reported (development), it is a warning, never trusted as the host's either
        config = reporting(tmp_path)
        _, report = load_json(scene, registry, tmp_path / "state", "--config", config, **env)
        warnings = " | ".join(record(report, "needs_evil")["warnings"])
        assert "unverified-dependency: dependency evil-lib 1.0.0 is unverified" in warnings
    finally:
        shutil.rmtree(fake)
        scene.marker.unlink(missing_ok=True)


def test_a_second_copy_of_a_host_requirement_vouches_for_nothing_it_alone_lists(
    identity_scene: GateScene, wheelhouse: Path, uv_cache: Path, tmp_path: Path
) -> None:
    venv = new_venv(tmp_path, wheelhouse, uv_cache)
    marker = tmp_path / "ran.txt"
    driver_id = "7c1f0000-0000-4000-8000-0000000000e2"
    optional = "try:\n    import sneaky\nexcept ImportError:\n    sneaky = None\n"
    project = driver_project("optional-user", marker, driver_id)
    project = Project(
        project.name,
        files={
            **project.files,
            "optional_user/__init__.py": optional
            + DRIVER_SOURCE.format(marker=str(marker), name="optional-user"),
        },
        entry_points=project.entry_points,
        dependencies=["mcs-host"],
    )
    (wheel,) = install(venv, tmp_path, project)
    registry = write_registry(
        tmp_path / "registry.json",
        {
            driver_id: entry(
                "optional-user",
                "optional_user",
                "optional_user:Driver",
                releases={"1.0.0": pin(wheel)},
            )
        },
    )
    scene = GateScene(root=tmp_path, venv=venv, marker=marker, registry=registry)
    # the attacker's module, and a second pluggy (a host requirement) whose RECORD lists it
    site = venv.site_packages
    (site / "sneaky").mkdir()
    (site / "sneaky" / "__init__.py").write_text(mark(marker, "sneaky"))
    (real,) = site.glob("pluggy-*.dist-info")
    fake = site / "pluggy-0.dist-info"  # sorts before the real one
    fake.mkdir()
    (fake / "METADATA").write_text((real / "METADATA").read_text())
    (fake / "RECORD").write_text(
        (real / "RECORD").read_text() + "sneaky/__init__.py,,\n"  # what it alone lists
    )
    assert venv.run("python", "-c", "import sneaky").returncode == 0  # the control
    assert scene.ran() == ["sneaky"]
    config = reporting(tmp_path)  # the driver is mounted, the refused import reported
    code, report = load_json(scene, registry, tmp_path / "state", "--config", config)
    found = record(report, "optional_user")
    assert (code, found["status"]) == (0, "mounted")
    assert any(
        w.startswith("import-refused: import of 'sneaky' refused") for w in found["warnings"]
    ), found["warnings"]
    environment = " | ".join(report["environment"])
    assert "pluggy, which the host requires, is installed 2 times" in environment
    assert scene.ran() == ["optional-user ran"]  # the driver ran; the plant did not
    # by default the refused import is a note (nothing unverified ran); strict mode refuses
    code, report = load_json(scene, registry, tmp_path / "state")
    assert (code, record(report, "optional_user")["status"]) == (0, "mounted")
    assert "sneaky" not in scene.ran()
    code, report = load_json(scene, registry, tmp_path / "state", "--strict")
    assert code == 1
    assert record(report, "optional_user")["reason"] == "import-refused"
    assert "sneaky" not in scene.ran()


# -- namespace parents and shadows: every package on the dotted path is the verified one -----

NS_IDS = {
    "alpha": "7c1f0000-0000-4000-8000-0000000000a1",
    "beta": "7c1f0000-0000-4000-8000-0000000000b1",
}


def _namespace_driver(part: str, marker: Path) -> Project:
    """A PEP 420 driver in ``nsdemo.drivers.<part>``."""
    base = driver_project(f"nsdemo-{part}", marker, NS_IDS[part], module=f"nsdemo/drivers/{part}")
    manifest = f"nsdemo/drivers/{part}/mcs-driver.json"
    source = DRIVER_SOURCE.format(marker=str(marker), name=part)
    return Project(
        f"nsdemo-{part}",
        files={
            f"nsdemo/drivers/{part}/__init__.py": source.replace(
                'Tool(name="ping"', f'Tool(name="{part}_ping"'
            ),
            manifest: base.files[manifest],
        },
        entry_points={"mcs.drivers": {part: f"nsdemo.drivers.{part}:Driver"}},
        dependencies=["mcs-host"],
        module_name=f"nsdemo.drivers.{part}",
    )


# a module of a third distribution, directly in the shared namespace directory: the drivers'
# scans must not hold it against them (it used to be a file-unlisted finding)
NS_COMMON = Project(
    "nsdemo-common",
    files={"nsdemo/drivers/common.py": "VALUE = 1\n"},
    module_name="nsdemo.drivers.common",
)


@pytest.fixture(scope="module")
def ns_scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> GateScene:
    root = tmp_path_factory.mktemp("namespace")
    marker = root / "ran.txt"
    venv = new_venv(root, wheelhouse, uv_cache)
    projects = [_namespace_driver(part, marker) for part in ("alpha", "beta")]
    wheels = install(venv, root, *projects, NS_COMMON)
    registry = write_registry(
        root / "registry.json",
        {
            NS_IDS[part]: entry(
                f"nsdemo-{part}",
                part,
                f"nsdemo.drivers.{part}:Driver",
                releases={"1.0.0": pin(wheel)},
            )
            for part, wheel in zip(("alpha", "beta"), wheels[:2], strict=True)
        },
    )
    assert not (venv.site_packages / "nsdemo" / "__init__.py").exists()
    assert (venv.site_packages / "nsdemo" / "drivers" / "common.py").exists()
    return GateScene(root=root, venv=venv, marker=marker, registry=registry)


def test_pep_420_namespace_drivers_sharing_a_namespace_both_load(
    ns_scene: GateScene, tmp_path: Path
) -> None:
    scene, registry = ns_scene, ns_scene.registry
    scene.marker.unlink(missing_ok=True)
    verified = scene.host("verify", "--registry", registry, state=tmp_path / "state")
    assert verified.returncode == 0, verified.stdout
    code, report = load_json(scene, registry, tmp_path / "state", "--strict")
    assert code == 0, report["errors"]
    assert {r["label"]: (r["verification"], r["trust"]) for r in report["drivers"]} == {
        "alpha": ("pinned", "community"),
        "beta": ("pinned", "community"),
    }
    assert sorted(scene.ran()) == ["alpha ran", "beta ran"]


def _shadow_plants(
    scene: MarkedScene, tmp_path: Path, how: str
) -> tuple[list[Path], dict[str, str]]:
    """Plant a shadow of ``nsdemo`` (or of a package below it) the way ``how`` says; return
    the paths to remove and the environment that makes it live."""
    marker = scene.marker
    site = scene.venv.site_packages
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    code = mark(marker, f"SHADOW {how}")
    env = {"PYTHONPATH": str(earlier)}
    if how == "a top-level module beside the namespace":
        (site / "nsdemo.py").write_text(code)
        return [site / "nsdemo.py"], {}
    if how == "bytecode alone on an earlier path entry":
        source = tmp_path / "nsdemo.py"
        source.write_text(code)
        py_compile.compile(str(source), str(earlier / "nsdemo.pyc"), doraise=True)
        return [], env
    if how == "a regular package on an earlier path entry":
        (earlier / "nsdemo").mkdir()
        (earlier / "nsdemo" / "__init__.py").write_text(code)
        return [], env
    if how == "an __init__ planted in the namespace directory":
        (site / "nsdemo" / "__init__.py").write_text(code)
        return [site / "nsdemo" / "__init__.py"], {}
    if how == "an extension module named like the parent":
        built = compile_extension(tmp_path, "nsdemo", marker, f"SHADOW {how}")
        target = site / f"nsdemo{EXTENSION_SUFFIXES[0]}"
        shutil.copy(built, target)
        return [target], {}
    if how == "a directory added by a .pth file":
        (earlier / "nsdemo").mkdir()
        (earlier / "nsdemo" / "__init__.py").write_text(code)
        (site / "00-shadow.pth").write_text(f"{earlier}\n")
        return [site / "00-shadow.pth"], {}
    if how == "a zip added by a .pth file":
        archive = tmp_path / "shadow.zip"
        with zipfile.ZipFile(archive, "w") as z:
            z.writestr("nsdemo/__init__.py", code)
        (site / "00-shadow.pth").write_text(f"{archive}\n")
        return [site / "00-shadow.pth"], {}
    if how == "a module shadowing the driver package on an earlier path entry":
        (earlier / "nsdemo" / "drivers").mkdir(parents=True)
        (earlier / "nsdemo" / "drivers" / "alpha.py").write_text(code)
        return [], env
    raise AssertionError(how)


SHADOWS = [
    "a top-level module beside the namespace",
    "bytecode alone on an earlier path entry",
    "a regular package on an earlier path entry",
    "an __init__ planted in the namespace directory",
    "an extension module named like the parent",
    "a directory added by a .pth file",
    "a zip added by a .pth file",
    "a module shadowing the driver package on an earlier path entry",
]


@pytest.mark.parametrize("how", SHADOWS)
def test_no_path_entry_can_provide_a_namespace_parent_or_the_driver(
    ns_scene: GateScene, tmp_path: Path, how: str
) -> None:
    """Each shadow is live for an ordinary import; the host imports the verified bytes (or,
    for a file planted in the drivers' own namespace directory, refuses them as tampered)."""
    scene = ns_scene
    scene.marker.unlink(missing_ok=True)
    planted, env = _shadow_plants(scene, tmp_path, how)
    try:
        # the control: an ordinary import of the driver picks the shadow up
        target = "nsdemo.drivers.alpha" if "driver package" in how else "nsdemo"
        scene.venv.run("python", "-c", f"import {target}", env=env)
        assert any(line.startswith("SHADOW") for line in scene.ran()), how
        _, report = load_json(scene, scene.registry, tmp_path / "state", **env)
        outcomes = {r["label"]: (r["status"], r["reason"]) for r in report["drivers"]}
        if how == "an __init__ planted in the namespace directory":
            assert outcomes == {
                "alpha": ("rejected", "file-unlisted"),
                "beta": ("rejected", "file-unlisted"),
            }
            assert scene.ran() == []
        else:
            assert outcomes == {"alpha": ("mounted", "mounted"), "beta": ("mounted", "mounted")}
            assert sorted(scene.ran()) == ["alpha ran", "beta ran"]  # verified, no shadow
    finally:
        for path in planted:
            path.unlink()
        scene.marker.unlink(missing_ok=True)


def test_a_namespace_parent_imported_from_elsewhere_before_the_load_is_refused(
    ns_scene: GateScene, tmp_path: Path
) -> None:
    scene = ns_scene
    scene.marker.unlink(missing_ok=True)
    shadow = scene.venv.site_packages / "nsdemo.py"
    shadow.write_text(mark(scene.marker, "SHADOW imported by the app"))
    try:
        result = app(scene, tmp_path / "state", before=["import nsdemo"])
    finally:
        shadow.unlink()
    status, reason, message, _ = result["records"]["alpha"]
    assert (status, reason) == ("rejected", "integrity")
    assert f"module 'nsdemo' was already imported from {shadow}" in message
    assert "alpha ran" not in scene.ran()


# -- everything a verified driver imports is judged, at load and at call time ------------------

LAZY_ID = "7c1f0000-0000-4000-8000-0000000000c1"
LAZY_SOURCE = """
{mark}
try:
    import fastjson
except ImportError:
    fastjson = None

from mcs_host import MCSToolDriver, Tool
from mcs_host.kit import manifest_meta

TOOLS = ("ping", "lazy", "cached", "fast", "speed")


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [Tool(name=name, description=name) for name in TOOLS]

    def execute_tool(self, tool_name, arguments):
        if tool_name == "ping":
            return "pong"
        if tool_name == "lazy":
            import lazyplugin
            return lazyplugin.ANSWER
        if tool_name == "cached":
            import preloaded
            return preloaded.ANSWER
        if tool_name == "fast":
            return fastjson is not None
        from . import _speed
        return _speed.WHO
"""


@dataclass(frozen=True)
class LazyScene(GateScene):
    """The lazy driver's scene, and an attacker's build of its extension module."""

    evil: Path


@pytest.fixture(scope="module")
def lazy_scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> LazyScene:
    """A pinned driver that imports optionally at load time and lazily at call time, and
    ships a compiled extension module; modules an attacker planted under those names."""
    root = tmp_path_factory.mktemp("lazy")
    marker = root / "ran.txt"
    venv = new_venv(root, wheelhouse, uv_cache)
    base = driver_project("lazy-driver", marker, LAZY_ID)
    project = Project(
        "lazy-driver",
        files={
            **base.files,
            "lazy_driver/__init__.py": LAZY_SOURCE.format(mark=mark(marker, "lazy-driver ran")),
        },
        entry_points=base.entry_points,
        dependencies=["mcs-host"],
    )
    source = project.write(root / "src")
    genuine = compile_extension(root, "_speed", marker, "genuine")
    evil = compile_extension(root, "_speed", marker, "EVIL")
    shutil.copy(genuine, source / "lazy_driver" / f"_speed{EXTENSION_SUFFIXES[0]}")
    wheel = build_wheel(source, root / "wheels")
    uv_pip("install", "--no-index", "--no-deps", str(wheel), python=venv.python)
    for name in ("fastjson", "lazyplugin", "preloaded"):
        (venv.site_packages / f"{name}.py").write_text(mark(marker, name) + "ANSWER = 'planted'\n")
    registry = write_registry(
        root / "registry.json",
        {
            LAZY_ID: entry(
                "lazy-driver", "lazy_driver", "lazy_driver:Driver", releases={"1.0.0": pin(wheel)}
            )
        },
    )
    return LazyScene(root=root, venv=venv, marker=marker, registry=registry, evil=evil)


ALLOW_EXTENSIONS = {"allow_extensions": True, **REPORT}
"""Native code allowed (the default, said), and the driver's refused optional import at load
time reported, so that it mounts and its calls show what the gate refuses."""
NO_EXTENSIONS = {"allow_extensions": False}


def test_an_extension_module_in_a_pinned_driver_needs_the_policy(
    lazy_scene: LazyScene, tmp_path: Path
) -> None:
    scene = lazy_scene
    scene.marker.unlink(missing_ok=True)
    result = app(scene, tmp_path / "state", trust=NO_EXTENSIONS)
    status, reason, message, _ = result["records"]["lazy_driver"]
    assert (status, reason) == ("rejected", "extension-module")
    assert f"_speed{EXTENSION_SUFFIXES[0]}" in message
    assert scene.ran() == []


def test_an_optional_import_at_load_time_is_refused_and_reported(
    lazy_scene: LazyScene, tmp_path: Path
) -> None:
    scene, registry = lazy_scene, lazy_scene.registry
    scene.marker.unlink(missing_ok=True)
    assert scene.venv.run("python", "-c", "import fastjson").returncode == 0  # the control
    assert scene.ran() == ["fastjson"]
    result = app(scene, tmp_path / "state", [("fast", [])], trust=ALLOW_EXTENSIONS)
    status, _, _, warnings = result["records"]["lazy_driver"]
    assert status == "mounted"
    assert any(w.startswith("import-refused: import of 'fastjson' refused") for w in warnings)
    assert result["calls"] == [[True, False, None, False]]  # it fell back: no fastjson
    # by default the refused import is a note (nothing unverified ran); strict mode refuses
    code, report = load_json(scene, registry, tmp_path / "state")
    assert (code, record(report, "lazy_driver")["status"]) == (0, "mounted")
    assert "fastjson" not in scene.ran()
    code, report = load_json(scene, registry, tmp_path / "state", "--strict")
    assert (code, record(report, "lazy_driver")["reason"]) == (1, "import-refused")
    assert "fastjson" not in scene.ran()


def test_a_lazy_import_at_call_time_fails_the_call_and_the_host_goes_on(
    lazy_scene: LazyScene, tmp_path: Path
) -> None:
    scene = lazy_scene
    scene.marker.unlink(missing_ok=True)
    result = app(scene, tmp_path / "state", [("lazy", []), ("ping", [])], trust=ALLOW_EXTENSIONS)
    (executed, failed, detail, _), pong = result["calls"]
    assert (executed, failed) == (False, True)
    assert "import of 'lazyplugin' refused" in detail
    assert pong == [True, False, None, "pong"]
    assert "lazyplugin" not in scene.ran()


def test_a_module_imported_before_the_load_is_judged_when_the_driver_imports_it(
    lazy_scene: LazyScene, tmp_path: Path
) -> None:
    scene = lazy_scene
    scene.marker.unlink(missing_ok=True)
    result = app(
        scene,
        tmp_path / "state",
        [("cached", [])],
        before=["import preloaded"],  # the app's own doing: its marker is expected
        trust=ALLOW_EXTENSIONS,
    )
    ((executed, failed, detail, value),) = result["calls"]
    assert (executed, failed, value) == (False, True, None)
    assert "import of 'preloaded' refused" in detail
    assert scene.ran() == ["preloaded", "lazy-driver ran"]


def test_an_extension_swapped_after_the_load_is_refused_when_first_imported(
    lazy_scene: LazyScene, tmp_path: Path
) -> None:
    scene = lazy_scene
    target = scene.venv.site_packages / "lazy_driver" / f"_speed{EXTENSION_SUFFIXES[0]}"
    genuine = target.read_bytes()
    swap = f"import shutil; shutil.copy({str(scene.evil)!r}, {str(target)!r})"
    scene.marker.unlink(missing_ok=True)
    try:
        result = app(scene, tmp_path / "state", [("speed", [swap])], trust=ALLOW_EXTENSIONS)
        ((executed, failed, detail, _),) = result["calls"]
        assert (executed, failed) == (False, True)
        assert "changed after verification" in detail
        assert "EVIL ran" not in scene.ran()
        target.write_bytes(genuine)
        # the control: unswapped, the verified extension loads from its checked bytes
        result = app(scene, tmp_path / "state", [("speed", [])], trust=ALLOW_EXTENSIONS)
        assert result["calls"] == [[True, False, None, "genuine"]]
        assert "genuine ran" in scene.ran()
    finally:
        target.write_bytes(genuine)


def test_an_extension_module_in_a_pinned_library_needs_the_policy_too(
    wheelhouse: Path, uv_cache: Path, tmp_path: Path
) -> None:
    venv = new_venv(tmp_path, wheelhouse, uv_cache)
    marker = tmp_path / "ran.txt"
    library = Project("extlib", files={"extlib/__init__.py": "from ._core import WHO\n"})
    source = library.write(tmp_path / "src")
    built = compile_extension(tmp_path, "_core", marker, "genuine")
    shutil.copy(built, source / "extlib" / f"_core{EXTENSION_SUFFIXES[0]}")
    library_wheel = build_wheel(source, tmp_path / "wheels")
    driver_id = "7c1f0000-0000-4000-8000-0000000000c2"
    base = driver_project("ext-user", marker, driver_id)
    driver = Project(
        "ext-user",
        files={
            **base.files,
            "ext_user/__init__.py": "import extlib\n"
            + DRIVER_SOURCE.format(marker=str(marker), name="ext-user").replace(
                'return "pong"', "return extlib.WHO"
            ),
        },
        entry_points=base.entry_points,
        dependencies=["mcs-host", "extlib"],
    )
    (driver_wheel,) = install(venv, tmp_path, driver)
    uv_pip("install", "--no-index", "--no-deps", str(library_wheel), python=venv.python)
    registry = write_registry(
        tmp_path / "registry.json",
        {
            driver_id: entry(
                "ext-user", "ext_user", "ext_user:Driver", releases={"1.0.0": pin(driver_wheel)}
            )
        },
        libraries={"extlib": {"releases": {"1.0.0": pin(library_wheel)}}},
    )
    scene = GateScene(root=tmp_path, venv=venv, marker=marker, registry=registry)
    result = app(scene, tmp_path / "state", [("ping", [])], trust=NO_EXTENSIONS)
    status, reason, message, _ = result["records"]["ext_user"]
    assert (status, reason) == ("rejected", "extension-module")
    assert "dependency extlib 1.0.0 ships extension modules (extlib/_core" in message
    assert scene.ran() == []
    state = tmp_path / "state"
    verified = scene.host("verify", "--registry", registry, "--no-allow-extensions", state=state)
    assert verified.returncode == 1
    assert "ext_user: refused at load: extension-module: dependency extlib" in verified.stdout
    # allowed (the default), the library's extension is loaded from its verified bytes
    result = app(scene, tmp_path / "state", [("ping", [])])
    assert result["records"]["ext_user"][0] == "mounted"
    assert result["calls"] == [[True, False, None, "genuine"]]
    assert scene.ran() == ["genuine ran", "ext-user ran"]


# -- host plugins are drivers for trust purposes ------------------------------------------------

PLUGIN_ID = "7c1f0000-0000-4000-8000-0000000000d1"
PLUGIN_SOURCE = """
{mark}
from mcs_host.loading.hooks import hookimpl


@hookimpl
def mcs_host_after_tool_call(call, result, error):
    pass
"""


@dataclass(frozen=True)
class PluginScene(MarkedScene):
    """A host plugin that imports an unpinned library; a registry without the plugin and one
    that pins it alone."""

    unpinned: Path
    pinned: Path


@pytest.fixture(scope="module")
def plugin_scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> PluginScene:
    root = tmp_path_factory.mktemp("plugins")
    marker = root / "ran.txt"
    venv = new_venv(root, wheelhouse, uv_cache)
    helper = Project("helper-lib", files={"helper_lib/__init__.py": mark(marker, "helper-lib")})
    plugin = Project(
        "audit-plugin",
        files={
            "audit_plugin/__init__.py": "import helper_lib\n"
            + PLUGIN_SOURCE.format(mark=mark(marker, "audit-plugin"))
        },
        entry_points={"mcs.host_plugins": {"audit": "audit_plugin"}},
        dependencies=["mcs-host", "helper-lib"],
    )
    wheels = install(venv, root, helper, plugin)
    pinned = {
        "distribution": "audit-plugin",
        "label": "audit",
        "object": "audit_plugin",
        "group": "mcs.host_plugins",
        "releases": {"1.0.0": pin(wheels[1])},
    }
    return PluginScene(
        root=root,
        venv=venv,
        marker=marker,
        unpinned=write_registry(root / "unpinned.json", {}),
        pinned=write_registry(root / "pinned.json", {PLUGIN_ID: pinned}),
    )


def test_an_unpinned_plugin_is_listed_refused_and_fatal_under_strict(
    plugin_scene: PluginScene, tmp_path: Path
) -> None:
    scene, registry = plugin_scene, plugin_scene.unpinned
    state = tmp_path / "state"
    listed = scene.host("list", "--registry", registry, state=state)
    assert (
        "audit  plugin  audit-plugin  1.0.0    audit_plugin  -         unverified" in listed.stdout
    )
    listed_json = json.loads(scene.host("list", "--json", state=state).stdout)
    assert [(p["label"], p["kind"]) for p in listed_json["plugins"]] == [("audit", "plugin")]
    verified = scene.host("verify", "--json", "--registry", registry, state=state)
    assert verified.returncode == 1
    (plugin,) = json.loads(verified.stdout)["plugins"]
    assert (plugin["kind"], plugin["verification"], plugin["allowed"]) == (
        "plugin",
        "unverified",
        False,
    )
    code, report = load_json(scene, registry, state)
    assert code == 1  # no driver is installed here: nothing mounted, and only that is said
    assert [e.split(":")[0] for e in report["errors"]] == ["nothing mounted"]
    found = record(report, "audit", "plugins")
    assert (found["status"], found["reason"]) == ("rejected", "not-in-registry")
    code, report = load_json(scene, registry, state, "--strict")
    assert code == 1
    assert any(e.startswith("host plugin audit: not-in-registry:") for e in report["errors"])
    assert scene.ran() == []


def test_a_pinned_plugin_gets_the_dependency_checks_of_a_driver(
    plugin_scene: PluginScene, tmp_path: Path
) -> None:
    scene, registry = plugin_scene, plugin_scene.pinned
    scene.marker.unlink(missing_ok=True)
    state = tmp_path / "state"
    for refusing in ((), ("--strict",)):  # by default, and in strict mode
        code, report = load_json(scene, registry, state, *refusing)
        assert code == 1
        found = record(report, "audit", "plugins")
        assert (found["status"], found["reason"]) == ("rejected", "unverified-dependency")
        assert scene.ran() == []
    verified = scene.host("verify", "--registry", registry, state=state)
    assert verified.returncode == 1
    assert (
        "audit: refused at load: unverified-dependency: dependency helper-lib 1.0.0"
        in verified.stdout
    )
    assert "  fix: check the dependency the message names, then pin audit with everything" in (
        verified.stdout
    )
    assert f"`mcs-host lock --plugin audit --registry {registry}`" in verified.stdout
    reported = scene.host(
        "verify", "--registry", registry, "--config", reporting(tmp_path), state=state
    )
    assert "audit: UNVERIFIED CODE would run: dependency helper-lib 1.0.0" in reported.stdout
    code, report = load_json(scene, registry, state, "--config", reporting(tmp_path))
    found = record(report, "audit", "plugins")
    assert found["status"] == "mounted"
    warnings = " | ".join(found["warnings"])
    assert "unverified-dependency: dependency helper-lib 1.0.0 is unverified" in warnings
    assert scene.ran() == ["helper-lib", "audit-plugin"]


def test_a_tampered_plugin_is_refused_before_it_runs(
    plugin_scene: PluginScene, tmp_path: Path
) -> None:
    scene = plugin_scene
    scene.marker.unlink(missing_ok=True)
    init = scene.venv.site_packages / "audit_plugin" / "__init__.py"
    original = init.read_text()
    init.write_text(original.replace("pass", "1  "))
    try:
        _, report = load_json(scene, scene.pinned, tmp_path / "state")
    finally:
        init.write_text(original)
    found = record(report, "audit", "plugins")
    assert (found["status"], found["reason"]) == ("rejected", "file-modified")
    assert scene.ran() == []


# -- the command line runs nothing from the environment before verification ------------------

PROBED = ("nt", "_winapi", "msvcrt", "bcrypt", "_overlapped", "winreg", "_wmi")
"""Modules our dependencies or the standard library try to import, absent on Linux."""


@dataclass(frozen=True)
class ProbeScene(GateScene):
    """A venv with modules planted under ``names``, and an empty registry."""

    names: list[str]


@pytest.fixture(scope="module")
def probe_scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> ProbeScene:
    """A venv where every standard-library module this Python lacks, and every name known to
    be probed, is planted in site-packages as a module that writes a marker."""
    root = tmp_path_factory.mktemp("probes")
    marker = root / "ran.txt"
    venv = new_venv(root, wheelhouse, uv_cache)
    # first, as pip runs the venv's python: a distribution declaring plugins in the entry
    # point groups mcs-host's dependencies load plugins from
    groups = ("pydantic", "pygments.lexers", "pygments.styles", "pygments.formatters")
    plugin = Project(
        "pretty-plugin",
        files={"pretty_plugin/__init__.py": mark(marker, "pretty-plugin")},
        entry_points={group: {"pretty": "pretty_plugin"} for group in groups},
    )
    install(venv, root, plugin)
    missing = venv.run(
        "python",
        "-c",
        "import importlib.util, json, sys\n"
        "print(json.dumps(sorted(n for n in sys.stdlib_module_names\n"
        "    if '.' not in n and importlib.util.find_spec(n) is None)))",
    )
    names = sorted({*json.loads(missing.stdout), *PROBED})
    for name in names:
        (venv.site_packages / f"{name}.py").write_text(mark(marker, name))
    (venv.site_packages / "org").mkdir()
    (venv.site_packages / "org" / "__init__.py").write_text(mark(marker, "org"))
    (venv.site_packages / "org" / "python").mkdir()
    (venv.site_packages / "org" / "python" / "__init__.py").write_text(mark(marker, "org"))
    registry = write_registry(root / "registry.json", {})
    return ProbeScene(root=root, venv=venv, marker=marker, registry=registry, names=names)


@pytest.mark.parametrize(
    "command",
    [
        ["list"],
        ["list", "--json"],
        ["--help"],
        ["verify", "--registry", "{registry}"],
        ["load", "--registry", "{registry}"],
        ["lock", "--registry", "{lock}"],
        ["keygen", "{key}"],
    ],
    ids=" ".join,
)
def test_no_command_runs_a_module_planted_under_a_probed_name(
    probe_scene: ProbeScene, tmp_path: Path, command: list[str]
) -> None:
    scene = probe_scene
    scene.marker.unlink(missing_ok=True)
    assert scene.venv.run("python", "-c", "import nt").returncode == 0  # the controls
    model = "import pydantic\nclass M(pydantic.BaseModel):\n    x: int = 0\n"
    scene.venv.run("python", "-c", model)  # pydantic imports the plugin, whatever it then does
    assert {"nt", "pretty-plugin"} <= set(scene.ran())  # plain Python runs the plants
    values = {
        "registry": str(scene.registry),
        "lock": str(tmp_path / "lock.json"),
        "key": str(tmp_path / "key.pem"),
    }
    done = scene.host(*(part.format(**values) for part in command), state=tmp_path / "state")
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr
    planted = scene.ran()
    assert planted == [], f"planted modules ran: {planted}"


def test_python_dash_m_ignores_modules_in_the_working_directory(
    probe_scene: ProbeScene, tmp_path: Path
) -> None:
    scene = probe_scene
    cwd = tmp_path / "project"
    cwd.mkdir()
    for name in ("typing", "__future__", "copy", "dataclasses", "json", "pathlib", "enum"):
        (cwd / f"{name}.py").write_text(mark(scene.marker, f"cwd {name}"))
    scene.marker.unlink(missing_ok=True)
    scene.venv.run("python", "-c", "import json", cwd=cwd)  # the control
    assert "cwd json" in scene.ran()
    for args in (["list"], ["list", "--json"], ["--version"]):
        done = scene.venv.run("python", "-m", "mcs_host", *args, cwd=cwd)
        assert done.returncode == 0, done.stderr
    assert scene.ran() == []


def test_verify_names_the_code_the_interpreter_runs_at_start_up(
    probe_scene: ProbeScene, tmp_path: Path
) -> None:
    scene = probe_scene
    site = scene.venv.site_packages
    plants = [site / "zz-startup.pth", site / "sitecustomize.py", scene.venv.bin / "helper.py"]
    plants[0].write_text("import os\n")
    plants[1].write_text("")
    plants[2].write_text("")
    try:
        done = scene.host("verify", "--json", "--registry", scene.registry, state=tmp_path)
        startup = {item["path"] for item in json.loads(done.stdout)["startup"]}
        assert {str(p) for p in plants} <= startup
        text = scene.host("verify", "--registry", scene.registry, state=tmp_path).stdout
        assert "Start-up code (the interpreter runs it before any host can act):" in text
        assert str(plants[0]) in text
    finally:
        for plant in plants:
            plant.unlink()
