"""A ``fix:`` line works when copied: the one command it names, run verbatim by ``sh -c`` in
the same working directory and environment, brings the command that printed it nearer to
success, and a few such commands make it succeed. Through the installed ``mcs-host`` console
script in a real venv, with a fresh HOME, run from another directory than its configuration's:
an unpinned driver, an unpinned dependency, an MCP server with a dependency of its own (``lock
--server`` pins it too), another build of a pinned version, an editable install, native code
in a dependency, and the mcp extra missing from an mcs-host installed from a wheel. Where no
command can do it (a setting only the user knows, a policy only the user may change), the fix
says what to do in words and names no command. The install hint names the project directory
or wheel file mcs-host was really installed from."""

from __future__ import annotations

import json
import shlex
import subprocess
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest
from distbuild import ROOT, Project, Venv, build_wheel, pip
from hostrun import driver_project, pin, write_registry
from scenes import Scene

from mcs_host._reasons import REASONS, is_command

pytest.importorskip("mcp")  # the server fixture speaks MCP

pytestmark = pytest.mark.venv

BOUND = 4
"""Fix lines a loop may follow before the command must succeed."""

IDS = {
    "plain": "7c1f0000-0000-4000-8000-0000000003a1",
    "needy": "7c1f0000-0000-4000-8000-0000000003a2",
    "changed": "7c1f0000-0000-4000-8000-0000000003a3",
    "setting": "7c1f0000-0000-4000-8000-0000000003a4",
    "native": "7c1f0000-0000-4000-8000-0000000003a5",
    "edited": "7c1f0000-0000-4000-8000-0000000003a6",
}

SERVER = """\
from mcp.server.mcpserver import MCPServer

import server_helper

app = MCPServer("adder")


@app.tool()
def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b + server_helper.OFFSET


def main():
    app.run()
"""

SETTING_DRIVER = """\
from mcs_host import MCSToolDriver, Tool
from mcs_host.kit import manifest_meta


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def __init__(self, root):
        self.root = root

    def list_tools(self):
        return [Tool(name="ping", description="Answer with the root.")]

    def execute_tool(self, tool_name, arguments):
        return self.root
"""

EXTENSION = """\
#include <Python.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "_core", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__core(void) {
    PyObject *m = PyModule_Create(&def);
    if (m) PyModule_AddStringConstant(m, "WHO", "native");
    return m;
}
"""


def _driver(name: str, label: str, *, deps: tuple[str, ...] = (), body: str = "") -> Project:
    """A driver labelled ``label`` that imports ``deps``; ``body`` replaces its module."""
    base = driver_project(name, Path("/dev/null"), IDS[label], label=label)
    module = name.replace("-", "_")
    files = dict(base.files)
    if body:
        files[f"{module}/__init__.py"] = body
    elif deps:
        imports = "".join(f"import {d.replace('-', '_')}\n" for d in deps)
        files[f"{module}/__init__.py"] = imports + files[f"{module}/__init__.py"]
    return Project(
        name,
        files=files,
        entry_points=base.entry_points,
        dependencies=["mcs-host", *deps],
    )


def _native_library(root: Path) -> Project:
    """``native-lib``, whose ``_core`` is an extension module compiled here."""
    project = Project("native-lib", files={"native_lib/__init__.py": "from ._core import WHO\n"})
    source = project.write(root / "src")
    c = root / "core.c"
    c.write_text(EXTENSION)
    out = source / "native_lib" / f"_core{EXTENSION_SUFFIXES[0]}"
    include = sysconfig.get_paths()["include"]
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O0", f"-I{include}", "-o", str(out), str(c)],
        check=True,
        capture_output=True,
    )
    return project


@dataclass(frozen=True)
class FixScene(Scene):
    """The venv of :func:`scene`, the fixture ``wheels`` by key, and the run's ``wheelhouse``."""

    wheels: Mapping[str, Path]
    wheelhouse: Path


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path) -> FixScene:
    """A venv with mcs-host[mcp] and pip, the fixture drivers, their libraries and the adder
    MCP server (a console script importing a library of its own), none of them pinned; the
    wheels built (``changed-b``: another build of changed-driver 1.0.0, one file changed)."""
    root = tmp_path_factory.mktemp("fix-lines")
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host[mcp]", "pip", wheelhouse=wheelhouse, cache=uv_cache)
    projects = {
        "plain": _driver("plain-driver", "plain"),
        "helper": Project("helper-lib", files={"helper_lib/__init__.py": "HELP = 1\n"}),
        "needy": _driver("needy-driver", "needy", deps=("helper-lib",)),
        "changed": _driver("changed-driver", "changed"),
        "setting": _driver("setting-driver", "setting", body=SETTING_DRIVER),
        "native-lib": _native_library(root / "native"),
        "native": _driver("native-driver", "native", deps=("native-lib",)),
        "server-helper": Project(
            "server-helper", files={"server_helper/__init__.py": "OFFSET = 0\n"}
        ),
        "server": Project(
            "adder-server",
            files={"adder_server/__init__.py": SERVER},
            entry_points={"console_scripts": {"adder-server": "adder_server:main"}},
            dependencies=["mcp", "server-helper"],
        ),
    }
    wheels = {}
    for key, project in projects.items():
        source = root / "native" / "src" / f"native_lib-{project.version}-src"
        written = source if key == "native-lib" else project.write(root / "src")
        wheels[key] = build_wheel(written, root / "wheels" / key)
    changed = _driver("changed-driver", "changed")
    files = {**changed.files, "changed_driver/extra.py": "CHANGED = True\n"}
    other = Project(changed.name, files=files, entry_points=changed.entry_points,
                    dependencies=changed.dependencies)  # fmt: skip
    wheels["changed-b"] = build_wheel(other.write(root / "src-b"), root / "wheels" / "changed-b")
    installed = [w for k, w in wheels.items() if k != "changed-b"]
    pip("install", "--no-index", "--no-deps", *map(str, installed), python=venv.python)
    return FixScene(root, venv, wheels, wheelhouse)


@dataclass(frozen=True)
class Place:
    """Where the user works: a fresh HOME, a working directory apart from the configuration."""

    home: Path
    cwd: Path
    config: Path
    env: Mapping[str, str]

    @classmethod
    def make(cls, tmp_path: Path, config: str, **env: str) -> Place:
        home, cwd, project = tmp_path / "home", tmp_path / "elsewhere", tmp_path / "project"
        for directory in (home, cwd, project):
            directory.mkdir(parents=True)
        path = project / "mcs-host.toml"
        path.write_text(config, "utf-8")
        variables = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), **env}
        return cls(home, cwd, path, variables)

    @property
    def registry(self) -> Path:
        return self.home / ".config" / "mcs-host" / "registry.json"


def run(venv: Venv, place: Place, *command: str | Path) -> subprocess.CompletedProcess[str]:
    """``command`` (mcs-host, or a fix line's through ``sh -c``) in ``venv`` as the user at
    ``place`` runs it: the place's environment and working directory."""
    return venv.run(*command, env=place.env, cwd=place.cwd)


@dataclass(frozen=True)
class Followed:
    """What following the fix lines of a command did."""

    commands: tuple[str, ...]
    """The command of each fix line, as printed and run."""
    said: tuple[str, ...]
    """The output of each command the fixes ran."""
    prose: str | None
    """The fix line that names no command, where following stopped; ``None``: the command
    succeeded."""


def fix_line(done: subprocess.CompletedProcess[str]) -> str:
    """The first ``fix:`` line the command printed (stdout or stderr), without its prefix."""
    lines = [ln.strip() for ln in (done.stdout + done.stderr).splitlines()]
    found = [ln.removeprefix("fix: ") for ln in lines if ln.startswith("fix: ")]
    assert found, f"no fix line:\n{done.stdout}\n{done.stderr}"
    return found[0]


def commands_of(fix: str) -> list[str]:
    """The commands a fix names, in backticks."""
    return [span for span in fix.split("`")[1::2] if is_command(span)]


def follow(venv: Venv, place: Place, *command: str | Path) -> Followed:
    """Run ``command``; while it fails, run the one command its first fix line names,
    verbatim through ``sh -c`` (at most :data:`BOUND` times); stop at a fix naming none."""
    commands: list[str] = []
    said: list[str] = []
    for _ in range(BOUND + 1):
        done = run(venv, place, *command)
        if done.returncode == 0:
            return Followed(tuple(commands), tuple(said), None)
        assert len(commands) < BOUND, f"still failing after {commands}:\n{done.stderr}"
        fix = fix_line(done)
        named = commands_of(fix)
        if not named:
            return Followed(tuple(commands), tuple(said), fix)
        assert len(named) == 1, fix  # one command, not a choice of several
        fixed = run(venv, place, "sh", "-c", named[0])
        assert fixed.returncode == 0, f"{named[0]}:\n{fixed.stdout}\n{fixed.stderr}"
        commands.append(named[0])
        said.append(fixed.stdout + fixed.stderr)
    raise AssertionError("unreachable")


def driver_config(label: str) -> str:
    """A configuration that mounts the driver ``label`` alone."""
    return f"[drivers.{label}]\n"


# -- the loops -----------------------------------------------------------------------------


def test_an_unpinned_driver_calls_after_its_fix_line(scene: FixScene, tmp_path: Path) -> None:
    venv = scene.venv
    place = Place.make(tmp_path, driver_config("plain"))
    followed = follow(venv, place, "mcs-host", "call", "ping", "--config", place.config)
    assert followed.prose is None
    assert followed.commands == (f"mcs-host lock plain --config {place.config}",)


def test_an_unpinned_dependency_loads_after_its_fix_line(scene: FixScene, tmp_path: Path) -> None:
    venv = scene.venv
    place = Place.make(tmp_path, driver_config("needy"))
    place.registry.parent.mkdir(parents=True)
    pinned = {"distribution": "needy-driver", "label": "needy", "object": "needy_driver:Driver"}
    releases = {"releases": {"1.0.0": pin(scene.wheels["needy"])}}
    write_registry(place.registry, {IDS["needy"]: {**pinned, **releases, "trust": "community"}})
    first = run(venv, place, "mcs-host", "call", "ping", "--config", place.config)
    assert "unverified-dependency: dependency helper-lib 1.0.0 is unverified" in first.stderr
    followed = follow(venv, place, "mcs-host", "call", "ping", "--config", place.config)
    assert followed.commands == (f"mcs-host lock needy --config {place.config}",)
    assert "pinned helper-lib 1.0.0" in followed.said[0]


def test_an_unpinned_mcp_server_and_its_own_dependency_load_after_one_fix_line(
    scene: FixScene, tmp_path: Path
) -> None:
    venv = scene.venv
    config = 'autoload = false\n[mcp_servers.adder]\ndistribution = "adder-server"\n'
    place = Place.make(tmp_path, config)
    followed = follow(venv, place, "mcs-host", "load", "--config", place.config)
    assert followed.commands == (f"mcs-host lock --server adder --config {place.config}",)
    # the server's own dependency is pinned with it, and listed
    assert "needed by adder-server" in followed.said[0]
    assert "pinned server-helper 1.0.0:" in followed.said[0]
    libraries = json.loads(place.registry.read_text())["libraries"]
    assert {"adder-server", "server-helper"} <= set(libraries)
    assert "mcp" not in libraries  # the host's own, as the mcp extra's


def test_another_build_of_a_pinned_version_loads_after_its_fix_line(
    scene: FixScene, tmp_path: Path
) -> None:
    venv = scene.venv
    place = Place.make(tmp_path, driver_config("changed"))
    command = ("mcs-host", "call", "ping", "--config", place.config)
    assert follow(venv, place, *command).commands  # pinned as installed
    # the driver changed after it was pinned: its files are another build of 1.0.0
    again = ("install", "--no-index", "--no-deps", "--force-reinstall")
    pip(*again, str(scene.wheels["changed-b"]), python=venv.python)
    try:
        refused = run(venv, place, *command)
        assert "changed: digest-mismatch: " in refused.stderr
        followed = follow(venv, place, *command)
        assert followed.commands == (f"mcs-host lock changed --replace --config {place.config}",)
    finally:
        pip(*again, str(scene.wheels["changed"]), python=venv.python)


def test_a_missing_setting_is_said_in_words_and_then_the_call_succeeds(
    scene: FixScene, tmp_path: Path
) -> None:
    venv = scene.venv
    place = Place.make(tmp_path, driver_config("setting"))
    command = ("mcs-host", "call", "ping", "--config", place.config)
    followed = follow(venv, place, *command)
    assert followed.commands == (f"mcs-host lock setting --config {place.config}",)
    # no command can choose the value: the fix says where it goes, and names no command
    assert followed.prose is not None
    assert "`[drivers.setting.settings]`" in followed.prose
    assert "`--set setting.KEY=VALUE`" in followed.prose
    with place.config.open("a") as config:
        config.write('[drivers.setting.settings]\nroot = "here"\n')
    done = run(venv, place, *command, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["response"]["tool_call_result"] == "here"


def test_native_code_in_a_dependency_loads_from_its_pin_and_a_refusing_policy_is_said_in_words(
    scene: FixScene, tmp_path: Path
) -> None:
    venv = scene.venv
    place = Place.make(tmp_path, driver_config("native"))
    command = ("mcs-host", "call", "ping", "--config", place.config)
    followed = follow(venv, place, *command)
    assert followed.prose is None
    assert followed.commands == (f"mcs-host lock native --config {place.config}",)
    assert "pinned native-lib 1.0.0" in followed.said[0]
    # the user's policy refuses native code: only the user may change that, so it is said
    refusing = Place.make(tmp_path / "no-native", driver_config("native"))
    refusing.registry.parent.mkdir(parents=True)
    refusing.registry.write_text(place.registry.read_text())
    with refusing.config.open("a") as config:
        config.write("[trust]\nallow_extensions = false\n")
    stopped = follow(venv, refusing, "mcs-host", "call", "ping", "--config", refusing.config)
    assert stopped.commands == ()
    assert stopped.prose is not None
    assert "`allow_extensions = true` under `[trust]`" in stopped.prose


def test_an_editable_install_loads_after_its_fix_lines_build_its_wheel_and_pin_it(
    scene: FixScene, tmp_path: Path
) -> None:
    venv = scene.venv
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(scene.wheelhouse)}
    place = Place.make(tmp_path, driver_config("edited"), **offline)
    project = _driver("edited-driver", "edited").write(tmp_path / "src")
    done = run(venv, place, "python", "-m", "pip", "install", "--no-deps", "-e", project)
    assert done.returncode == 0, done.stderr
    command = ("mcs-host", "call", "ping", "--config", place.config)
    refused = run(venv, place, *command)
    assert "edited: editable-install: " in refused.stderr
    followed = follow(venv, place, *command)
    build = (
        f"pip wheel --no-deps --wheel-dir dist {project} && "
        "pip install --force-reinstall --no-deps dist/edited_driver-*.whl"
    )
    assert followed.commands == (build, f"mcs-host lock edited --config {place.config}")
    (built,) = (place.cwd / "dist").iterdir()  # the wheel, where the working directory is
    assert built.name.startswith("edited_driver-1.0.0-")


def test_the_mcp_extra_missing_from_a_wheel_install_is_installed_by_its_fix_line(
    scene: FixScene, tmp_path: Path
) -> None:
    wheelhouse = scene.wheelhouse
    (wheel,) = wheelhouse.glob("mcs_host-*.whl")
    venv = Venv.create(tmp_path / "venv")
    pip("install", "--no-index", "--find-links", str(wheelhouse), str(wheel), "pip",
        python=venv.python)  # fmt: skip
    pip("install", "--no-index", "--no-deps", str(scene.wheels["plain"]), python=venv.python)
    assert venv.run("python", "-c", "import mcp").returncode == 1  # the control
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse)}
    config = '[drivers.plain]\nisolation = "process"\n'  # isolated: it needs the extra
    place = Place.make(tmp_path / "user", config, **offline)
    followed = follow(venv, place, "mcs-host", "call", "ping", "--config", place.config)
    extra = shlex.join([str(venv.python), "-m", "pip", "install", f"{wheel}[mcp]"])
    assert followed.commands == (f"mcs-host lock plain --config {place.config}", extra)
    assert venv.run("python", "-c", "import mcp").returncode == 0


# -- the install hint, against real installs ------------------------------------------------


def test_the_install_hint_names_the_wheel_or_directory_mcs_host_came_from(
    scene: FixScene, tmp_path: Path
) -> None:
    wheelhouse = scene.wheelhouse
    (wheel,) = wheelhouse.glob("mcs_host-*.whl")
    hint = "from mcs_host._install_hint import extra_command; print(extra_command('attest'))"
    for source in (wheel, ROOT):
        venv = Venv.create(tmp_path / source.name)
        pip("install", "--no-index", "--find-links", str(wheelhouse), "--no-deps", str(source),
            python=venv.python)  # fmt: skip
        done = venv.run("python", "-c", hint)
        assert done.returncode == 0, done.stderr
        expected = shlex.join([str(venv.python), "-m", "pip", "install", f"{source}[attest]"])
        assert done.stdout.strip() == expected
    # installed from the index (no direct_url.json): the extra by name
    indexed = Venv.create(tmp_path / "indexed")
    pip("install", "--no-index", "--find-links", str(wheelhouse), "--no-deps", "mcs-host",
        python=indexed.python)  # fmt: skip
    done = indexed.run("python", "-c", hint)
    assert done.stdout.strip() == f"{indexed.python} -m pip install 'mcs-host[attest]'"


# -- the table -------------------------------------------------------------------------------


def test_no_command_a_fix_names_has_a_blank_for_the_reader_to_fill() -> None:
    """A command in a fix has only the placeholders the command line fills in."""
    filled = {"LABEL", "DISTRIBUTION", "PROJECT", "WHEEL"}
    for reason in REASONS.values():
        for text in (reason.fix, reason.server_fix, reason.library_fix):
            for command in commands_of(text):
                blanks = {w for w in command.replace("/", " ").split() if w.isupper()}
                assert blanks <= filled, (reason.code, command)


def test_a_label_is_quoted_for_the_shell_inside_a_command_only() -> None:
    fixed = REASONS["unverified-dependency"].fix_for("my label", None)
    assert commands_of(fixed) == ["mcs-host lock 'my label'"]
    constructor = REASONS["constructor-error"].fix_for("my label")
    assert "`[drivers.my label.settings]`" in constructor
