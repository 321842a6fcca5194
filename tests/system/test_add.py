"""``mcs-host add`` takes a name on the user's package index to a verified, pinned, installed and
configured driver in one command, and changes nothing when any step fails.

Each test runs the real command in a venv of its own (mcs-host with the attest extra, and pip)
against a package index on loopback (tests/pypi_index.py) that serves fixture wheels built here
and the real pypi-attestations 0.0.30 wheel with the provenance PyPI serves for it
(tests/data/provenance, published by github:pypi/pypi-attestations:release.yml@pypi). That
wheel ships no entry point: a test registry declares a driver for it, as registry.json declares
the reference drivers, so it is added as a driver through the attested path. It is also part
of the host's own installation here (the attest extra): it is installed already, from the same
files, and add pins it. Every claim that something is "as before" compares the venv's
``pip list`` and every file of its site-packages, the registry and its provenance directory,
and the configuration, byte for byte. The attacks' payloads write a marker file that no test
may find.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import pty
import select
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from distbuild import ROOT, Project, Venv, build_wheel, vendor_into_wheel
from hostrun import driver_project, pin
from jsonschema import Draft202012Validator
from pypi_index import LocalIndex, pip_env
from scenes import MarkedScene, SealedScene

from mcs_host.loading.config_schema import ConfigError
from mcs_host.loading.config_tables import (
    constructor_parameters,
    driver_table,
    imported_from,
    toml_value,
    with_tables,
)
from mcs_host.trust.attested import record_provenance
from mcs_host.trust.digest import scan_wheel
from mcs_host.trust.provenance import verify_provenance
from mcs_host.trust.registry import REGISTRY_FORMAT, Pin, Registry

DATA = Path(__file__).resolve().parents[1] / "data" / "provenance"
WHEEL = DATA / "pypi_attestations-0.0.30-py3-none-any.whl"
PROVENANCE = DATA / f"{WHEEL.name}.provenance"
SDIST = DATA / "pypi_attestations-0.0.19.tar.gz"
SDIST_PROVENANCE = DATA / f"{SDIST.name}.provenance"
PUBLISHER = "github:pypi/pypi-attestations:release.yml@pypi"
FORMER = "github:trailofbits/pypi-attestations:release.yml"
LOG_INDEX = 2272775063
ATTEST_ID = "5f0c0000-0000-4000-8000-0000000a7e57"
WEATHER_ID = "a11d0000-0000-4000-8000-00000000a0d1"
EVIL_ID = "a11d0000-0000-4000-8000-00000000e0e1"

WEATHER = """\
open({marker!r}, "a").write("acme-weather ran\\n")

import acme_lib
from mcs_host import MCSToolDriver, Tool
from mcs_host.kit import manifest_meta


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def __init__(self, city: str = "Paris", days: int = 3, *, station=None) -> None:
        self.city = city

    def list_tools(self):
        return [Tool(name="forecast", description="The sky over the city.")]

    def execute_tool(self, tool_name, arguments):
        return f"{{self.city}}: {{acme_lib.SKY}}"
"""

LIBRARY = """\
open({marker!r}, "a").write("{name} ran\\n")
SKY = "sunny"
"""

SERVER = """\
from mcp.server.mcpserver import MCPServer

app = MCPServer("clock")


@app.tool()
def now() -> str:
    \"\"\"The time, as a clock on the wall says it.\"\"\"
    return "noon"


def main():
    app.run()
"""

pytestmark = pytest.mark.venv


# -- the scene -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fixture wheels, by name, and ``marker``: the file their code writes when it runs."""
    root = tmp_path_factory.mktemp("add-wheels")
    marker = root / "ran.txt"
    wheels = root / "wheels"

    def wheel(project: Project) -> Path:
        return build_wheel(project.write(root / "src"), wheels)

    def weather(version: str, lib: str) -> Project:
        project = driver_project("acme-weather", marker, WEATHER_ID, version)
        source = WEATHER.format(marker=str(marker))
        files = {**project.files, "acme_weather/__init__.py": source}
        return dataclasses.replace(project, files=files, dependencies=["mcs-host", lib])

    def library(name: str, version: str = "1.0.0") -> Project:
        module = name.replace("-", "_")
        text = LIBRARY.format(marker=str(marker), name=name)
        return Project(name, version, files={f"{module}/__init__.py": text})

    extra = root / "acme_lib_extra.py"
    extra.write_text("EXTRA = True\n")
    evil = driver_project("acme-evil-driver", marker, EVIL_ID)
    source = evil.files["acme_evil_driver/__init__.py"] + "\nimport acme_evil\n"
    files = {**evil.files, "acme_evil_driver/__init__.py": source}
    evil = dataclasses.replace(evil, files=files, dependencies=["mcs-host", "acme-evil"])
    later = Project(
        "pypi-attestations",
        "0.0.31",
        files={"pypi_attestations/__init__.py": LIBRARY.format(marker=str(marker), name="0.0.31")},
    )
    server = Project(
        "acme-clock",
        files={"acme_clock/__init__.py": SERVER},
        entry_points={"console_scripts": {"acme-clock": "acme_clock:main"}},
        dependencies=["mcp"],
    )
    return {
        "marker": marker,
        "weather": wheel(weather("1.0.0", "acme-lib")),
        "weather-1.1": wheel(weather("1.1.0", "acme-lib>=2")),
        "lib": wheel(library("acme-lib")),
        "lib-2": vendor_into_wheel(
            wheel(library("acme-lib", "2.0.0")), {"acme_lib_extra.py": extra}
        ),
        "evil-driver": wheel(evil),
        "evil": wheel(library("acme-evil")),
        "attestations-0.0.31": wheel(later),
        "server": wheel(server),
    }


@dataclasses.dataclass(frozen=True)
class AddScene(MarkedScene, SealedScene):
    """A venv with mcs-host[attest] and pip, a HOME, and the index serving ``served``; its
    commands run in :meth:`environment`, the whole of it, in ``root``."""

    home: Path
    served: Path
    index: LocalIndex

    @property
    def config(self) -> Path:
        return self.home / ".config" / "mcs-host" / "config.toml"

    @property
    def registry(self) -> Path:
        return self.home / ".config" / "mcs-host" / "registry.json"

    @property
    def site(self) -> Path:
        return self.venv.site_packages

    def serve(self, *wheels: Path, provenance: Path | None = None) -> None:
        """Serve ``wheels`` (the first with ``provenance`` beside it, when given)."""
        for wheel in wheels:
            shutil.copy2(wheel, self.served / wheel.name)
        if provenance is not None:
            shutil.copy2(provenance, self.served / f"{wheels[0].name}.provenance")

    def on_terminal(self, *args: str | Path, answer: str) -> tuple[int, str]:
        """``mcs-host ARGS`` as :meth:`host` runs it, but on a pseudo-terminal, typing
        ``answer`` when it asks; its exit code and what it wrote there."""
        leader, follower = pty.openpty()
        child = subprocess.Popen(
            [str(self.venv.bin / "mcs-host"), *map(str, args)],
            stdin=follower,
            stdout=follower,
            stderr=follower,
            env={**self.environment(), "TERM": "dumb"},
            cwd=self.root,
        )
        os.close(follower)
        said = b""
        while True:
            ready, _, _ = select.select([leader], [], [], 300)
            if not ready:
                child.kill()
                raise AssertionError(f"mcs-host {args} wrote nothing for 300 s")
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            said += chunk
            if said.rstrip().endswith(b"[y/N]:"):
                os.write(leader, answer.encode() + b"\n")
        os.close(leader)
        return child.wait(timeout=60), said.decode().replace("\r\n", "\n")

    def environment(self, *, home: Path | None = None, state: Path | None = None) -> dict[str, str]:
        """The whole environment of :meth:`host` and :meth:`on_terminal`: this process's
        without the developer's settings, pip asking only the local index, HOME (default:
        ``home``), the state directory (default: ``root/state``), every proxy a closed port."""
        closed = "http://127.0.0.1:9"
        env = pip_env(self.index.url, HOME=str(home or self.home))
        env = {k: v for k, v in env.items() if not k.startswith(("XDG_", "MCS_HOST_"))}
        env.update(
            MCS_HOST_STATE_DIR=str(state or self.root / "state"),
            PATH=f"{self.venv.bin}{os.pathsep}{env.get('PATH', '')}",
            VIRTUAL_ENV=str(self.venv.path),
            HTTPS_PROXY=closed,
            https_proxy=closed,
            NO_PROXY="127.0.0.1",
            no_proxy="127.0.0.1",
        )
        return env

    def state(self) -> dict[str, Any]:
        """What "as before" compares: the installed distributions and their versions (as
        ``uv pip list`` reads them: pip's own list starts a second a call), every file of
        site-packages (bytecode caches aside), and every file under the user's mcs-host
        directory."""
        listed = self.venv.run(
            sys.executable,
            "-m",
            "uv",
            "pip",
            "list",
            "--python",
            self.venv.python,
            "--format=freeze",
        )
        assert listed.returncode == 0, listed.stderr
        return {
            "installed": listed.stdout.splitlines(),
            "site-packages": _files(self.site, skip="__pycache__"),
            "mcs-host": _files(self.config.parent),
        }


def _as_before(scene: AddScene, before: dict[str, Any]) -> None:
    """Assert that the venv and the user's mcs-host files are as they were in ``before``."""
    changes = _changes(before, scene.state())
    assert not changes, "\n".join(changes)


def _changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two :meth:`AddScene.state`, one line each."""
    found = [f"installed: {before['installed']} -> {after['installed']}"] * (
        before["installed"] != after["installed"]
    )
    for place in ("site-packages", "mcs-host"):
        was, now = before[place], after[place]
        found += [
            f"{place}/{path}: {was.get(path, 'absent')} -> {now.get(path, 'absent')}"
            for path in sorted(set(was) | set(now))
            if was.get(path) != now.get(path)
        ]
    return found


_INSTALLER_RECORDS = frozenset({"RECORD", "direct_url.json", "INSTALLER", "REQUESTED"})
"""What pip writes about an install in its ``*.dist-info`` (RECORD lists the bytecode it
compiles, direct_url.json the file it installed from): compared by presence, since a release
put back from its wheel has the same files, installed again."""


def _files(directory: Path, skip: str | None = None) -> dict[str, str]:
    """Each file under ``directory`` (a directory with no files too) with its sha256 (an
    installer's record: present)."""
    found: dict[str, str] = {}
    if not directory.exists():
        return found
    for path in sorted(directory.rglob("*")):
        if skip is not None and skip in path.parts:
            continue
        relative = str(path.relative_to(directory))
        if path.is_symlink():
            found[relative] = f"link to {os.readlink(path)}"
        elif (
            path.is_file()
            and path.parent.suffix == ".dist-info"
            and (path.name in _INSTALLER_RECORDS)
        ):
            found[relative] = "present"
        elif path.is_file():
            found[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
        elif not any(path.iterdir()):
            found[relative] = "empty directory"
    return found


@pytest.fixture
def scene(
    tmp_path: Path, wheelhouse: Path, uv_cache: Path, built: dict[str, Path]
) -> Iterator[AddScene]:
    venv = Venv.create(tmp_path / "venv")
    # the attest extra's pypi-attestations is the very wheel the index serves
    venv.uv_install("mcs-host[attest,mcp]", "pip", WHEEL, wheelhouse=wheelhouse, cache=uv_cache)
    home = tmp_path / "home"
    home.mkdir()
    served = tmp_path / "served"
    served.mkdir()
    built["marker"].unlink(missing_ok=True)
    with LocalIndex(served) as index:
        yield AddScene(tmp_path, venv, built["marker"], home=home, served=served, index=index)


def _declared(scene: AddScene) -> Path:
    """A registry declaring a driver for pypi-attestations (which ships no entry point), named
    by the user's configuration beside their own registry, as the reference drivers are."""
    path = scene.root / "declared.json"
    driver = {"distribution": "pypi-attestations", "label": "attest"}
    driver["object"] = "pypi_attestations:Attestation"
    path.write_text(json.dumps({"format": REGISTRY_FORMAT, "drivers": {ATTEST_ID: driver}}))
    scene.config.parent.mkdir(parents=True, exist_ok=True)
    scene.config.write_text(
        f'# my own settings, kept as they are\nregistries = ["registry.json", "{path}"]\n'
    )
    return path


def _refused(done: subprocess.CompletedProcess[str], step: str) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    assert f": {step}: " in done.stderr, done.stderr
    return done.stderr


def _schema_errors(document: dict[str, Any]) -> list[str]:
    schema = json.loads((ROOT / "mcs_host" / "schemas" / "cli-add.schema.json").read_text())
    return [error.message for error in Draft202012Validator(schema).iter_errors(document)]


# -- the attested path -----------------------------------------------------------------------


def test_the_publisher_named_adds_the_release_pinned_with_its_provenance_and_its_table(
    scene: AddScene,
) -> None:
    _declared(scene)
    scene.serve(WHEEL, provenance=PROVENANCE)
    done = scene.host("add", "pypi-attestations", "--publisher", PUBLISHER)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        f"pypi-attestations 0.0.30: attested by {PUBLISHER} (log index {LOG_INDEX}), "
        "installed already (the same files)"
    )
    # what it needs is the host's own here (the attest extra): said so, not pinned
    assert "sigstore 4.5.1 (needed by pypi-attestations): provided by mcs-host" in lines
    assert f"wrote {scene.registry} (and 1 provenance file beside it)" in lines
    assert f"wrote [drivers.attest] in {scene.config}" in lines
    entry = json.loads(scene.registry.read_text())["drivers"][ATTEST_ID]
    assert str(entry["publisher"]["repository"]) == "pypi/pypi-attestations"
    pin = entry["releases"]["0.0.30"]
    assert pin["wheel_sha256"] == hashlib.sha256(WHEEL.read_bytes()).hexdigest()
    assert pin["provenance"]["log_index"] == LOG_INDEX
    stored = scene.registry.with_name("registry.provenance") / f"{WHEEL.name}.provenance"
    assert stored.read_bytes() == PROVENANCE.read_bytes()
    config = scene.config.read_text()
    assert config.startswith("# my own settings, kept as they are\nregistries = [")
    assert f"# pypi-attestations 0.0.30, added by mcs-host add (attested by {PUBLISHER})" in config
    assert "\n[drivers.attest]\n" in config
    # the stored provenance verifies again, offline
    checked = scene.host("verify", "--provenance", "--json")
    assert json.loads(checked.stdout)["provenance"][0]["ok"] is True, checked.stdout
    # added again: nothing new to pin or install; the table is kept; the document says so
    again = scene.host("add", "pypi-attestations", "--publisher", PUBLISHER, "--json")
    assert again.returncode == 0, again.stderr
    document = json.loads(again.stdout)
    assert _schema_errors(document) == []
    assert document["tables"] == [{"table": "drivers.attest", "names": "attest", "written": False}]
    first = document["distributions"][0]
    assert (first["verified"], first["publisher"], first["log_index"]) == (
        "attested",
        PUBLISHER,
        LOG_INDEX,
    )
    assert scene.config.read_text() == config


@pytest.mark.parametrize(
    ("stated", "part"),
    [
        ("github:attacker/pypi-attestations", "repository-mismatch"),
        ("github:pypi/pypi-attestations:other.yml", "workflow-mismatch"),
        ("github:pypi/pypi-attestations:release.yml@staging", "environment-mismatch"),
    ],
)
def test_another_repository_workflow_or_environment_changes_nothing(
    scene: AddScene, stated: str, part: str
) -> None:
    _declared(scene)
    scene.serve(WHEEL, provenance=PROVENANCE)
    before = scene.state()
    said = _refused(scene.host("add", "pypi-attestations", "--publisher", stated), "identity")
    assert f"published by {PUBLISHER}" in said
    assert "nothing was installed or written" in said
    _as_before(scene, before)


def test_a_named_publisher_without_provenance_on_the_index_is_refused(scene: AddScene) -> None:
    _declared(scene)
    scene.serve(WHEEL)  # the same wheel, its provenance not served
    before = scene.state()
    said = _refused(scene.host("add", "pypi-attestations", "--publisher", PUBLISHER), "provenance")
    assert "has no PEP 740 provenance on your index" in said
    _as_before(scene, before)


def test_without_a_publisher_the_proven_identity_is_confirmed_then_holds_for_later_versions(
    scene: AddScene, built: dict[str, Path]
) -> None:
    _declared(scene)
    scene.serve(WHEEL, provenance=PROVENANCE)
    before = scene.state()
    said = _refused(scene.host("add", "pypi-attestations"), "identity")
    assert f"attested by {PUBLISHER}; no publisher is recorded for it yet" in said
    assert "no terminal to confirm it on" in said
    assert f"--publisher {PUBLISHER}" in said
    _as_before(scene, before)
    done = scene.host("add", "pypi-attestations", "--yes")
    assert done.returncode == 0, done.stderr
    recorded = json.loads(scene.registry.read_text())["drivers"][ATTEST_ID]["publisher"]
    assert recorded["repository"] == "pypi/pypi-attestations"
    # a later release without its publisher's provenance is a downgrade: refused, no change
    scene.serve(built["attestations-0.0.31"])
    before = scene.state()
    said = _refused(scene.host("add", "pypi-attestations", "--yes"), "provenance")
    assert "pypi-attestations 0.0.31 has no provenance on your index" in said
    assert PUBLISHER in said
    assert "downgrade" in said
    _as_before(scene, before)
    assert scene.ran() == []


def test_on_a_terminal_the_proven_identity_is_shown_and_asked_for(scene: AddScene) -> None:
    _declared(scene)
    scene.serve(WHEEL, provenance=PROVENANCE)
    before = scene.state()
    code, said = scene.on_terminal("add", "pypi-attestations", answer="n")
    assert code == 2, said
    assert (
        f"pypi-attestations 0.0.30 was published by {PUBLISHER}, as its PEP 740 provenance "
        "proves." in said
    )
    assert "you did not confirm it" in said
    _as_before(scene, before)
    code, said = scene.on_terminal("add", "pypi-attestations", answer="y")
    assert code == 0, said
    assert f"attested by {PUBLISHER} (log index {LOG_INDEX})" in said
    entry = json.loads(scene.registry.read_text())["drivers"][ATTEST_ID]
    assert entry["publisher"]["repository"] == "pypi/pypi-attestations"


def test_a_transferred_publisher_is_refused_until_the_new_one_is_stated_and_confirmed(
    scene: AddScene,
) -> None:
    # the user's registry: 0.0.19, attested before the repository moved to pypi/
    driver: dict[str, Any] = {"distribution": "pypi-attestations", "label": "attest"}
    driver |= {"object": "pypi_attestations:Attestation", "releases": {"0.0.19": _sdist_pin()}}
    registry = Registry.model_validate({"format": REGISTRY_FORMAT, "drivers": {ATTEST_ID: driver}})
    sdist = SDIST_PROVENANCE.read_bytes()
    verified = verify_provenance(SDIST, SDIST.name, sdist, None)
    scene.registry.parent.mkdir(parents=True)
    recorded = record_provenance(registry, scene.registry, ATTEST_ID, "0.0.19", verified, sdist)
    recorded.save(scene.registry)
    scene.serve(WHEEL, provenance=PROVENANCE)
    before = scene.state()
    said = _refused(scene.host("add", "pypi-attestations", "--yes"), "identity")
    assert PUBLISHER in said
    assert FORMER in said
    assert "number is the same (772247423)" in said
    assert f"--publisher {PUBLISHER}" in said
    _as_before(scene, before)
    # stated, but not confirmed (no terminal, no --yes): refused too
    said = _refused(scene.host("add", "pypi-attestations", "--publisher", PUBLISHER), "identity")
    assert "no terminal to confirm it on" in said
    _as_before(scene, before)
    done = scene.host("add", "pypi-attestations", "--publisher", PUBLISHER, "--yes")
    assert done.returncode == 0, done.stderr
    entry = json.loads(scene.registry.read_text())["drivers"][ATTEST_ID]
    assert entry["publisher"]["repository"] == "pypi/pypi-attestations"
    assert [f["repository"] for f in entry["former_publishers"]] == [
        "trailofbits/pypi-attestations"
    ]
    assert entry["former_publishers"][0]["until"] == "0.0.30"


def _sdist_pin() -> dict[str, Any]:
    """The 0.0.19 pin (the wheel's tree standing in for the sdist's, as test_attested has it)."""
    digest = scan_wheel(str(WHEEL)).digest
    assert digest is not None
    return Pin(digest=digest.digest, files=digest.files, bytes=digest.bytes).model_dump()


# -- without provenance, with what it needs ---------------------------------------------------


def test_a_driver_is_added_with_its_library_then_loaded_and_called_by_default(
    scene: AddScene, built: dict[str, Path]
) -> None:
    scene.serve(built["weather"])
    scene.serve(built["lib"])
    done = scene.host("add", "acme-weather", "--label", "weather", "--settings", "city=Oslo")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == [
        "acme-weather 1.0.0: no provenance: pinned from the downloaded wheel, installed",
        "acme-lib 1.0.0 (needed by acme-weather): no provenance: pinned from the downloaded "
        "wheel, installed",
    ]
    assert scene.ran() == []  # nothing of it ran while it was added
    config = scene.config.read_text()
    assert '[drivers.weather]\ndriver = "acme_weather"\nsettings = { city = "Oslo" }\n' in config
    registry = json.loads(scene.registry.read_text())
    assert list(registry["drivers"][WEATHER_ID]["releases"]) == ["1.0.0"]
    assert list(registry["libraries"]["acme-lib"]["releases"]) == ["1.0.0"]
    # the default policy runs no unverified code: the driver and its library are pinned
    called = scene.host("call", "forecast")
    assert called.returncode == 0, called.stdout + called.stderr
    assert called.stdout.strip() == "Oslo: sunny"
    assert sorted(scene.ran()) == ["acme-lib ran", "acme-weather ran"]
    # added under another label without settings: its constructor's parameters, commented
    other = scene.root / "other.toml"
    done = scene.host("add", "acme-weather", "--config", other)
    assert done.returncode == 0, done.stderr
    assert "acme-lib 1.0.0 (needed by acme-weather): installed already: pinned as installed" in (
        done.stdout
    )
    assert (
        '# settings = { city = "Paris", days = 3, station = … }\n'
        "#   its constructor's keyword arguments" in other.read_text()
    )
    assert scene.ran() == []


def test_a_failed_install_uninstalls_what_it_had_installed(
    scene: AddScene, built: dict[str, Path]
) -> None:
    scene.serve(built["weather"])
    scene.serve(built["lib"])
    # a directory where acme-lib's module goes: pip installs acme-weather, then fails
    (scene.site / "acme_lib" / "__init__.py").mkdir(parents=True)
    before = scene.state()
    said = _refused(scene.host("add", "acme-weather"), "install")
    assert "Is a directory" in said
    assert "undone: uninstalled acme-weather 1.0.0" in said
    _as_before(scene, before)


def test_a_failed_upgrade_puts_back_the_release_it_replaced(
    scene: AddScene, built: dict[str, Path]
) -> None:
    scene.serve(built["weather"])
    scene.serve(built["lib"])
    assert scene.host("add", "acme-weather").returncode == 0
    # 1.1 needs acme-lib 2, which adds the module acme_lib_extra: a directory stands where it
    # goes, so pip installs acme-weather 1.1 in place of 1.0, then fails on acme-lib 2.0
    scene.serve(built["weather-1.1"])
    scene.serve(built["lib-2"])
    obstacle = scene.site / "acme_lib_extra.py"
    obstacle.mkdir()
    before = scene.state()
    said = _refused(scene.host("add", "acme-weather"), "install")
    assert "uninstalled acme-weather 1.1.0" in said
    assert "put back acme-weather 1.0.0 (its files as before)" in said
    _as_before(scene, before)
    # without the obstacle, the upgrade is done, and says what it replaced
    obstacle.rmdir()
    done = scene.host("add", "acme-weather")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == [
        "acme-weather 1.1.0: no provenance: pinned from the downloaded wheel, installed in "
        "place of 1.0.0",
        "acme-lib 2.0.0 (needed by acme-weather): no provenance: pinned from the downloaded "
        "wheel, installed in place of 1.0.0",
    ]


@pytest.mark.parametrize("how", ["read-only", "not-a-directory"])
def test_a_home_where_nothing_can_be_written_is_refused_before_anything_changes(
    scene: AddScene, built: dict[str, Path], how: str
) -> None:
    if how == "read-only" and os.geteuid() == 0:
        pytest.skip("root writes into a read-only directory")
    scene.serve(built["weather"])
    scene.serve(built["lib"])
    if how == "read-only":
        scene.home.chmod(0o555)
    else:
        (scene.home / ".config").write_text("not a directory\n")
    before = scene.state()
    try:
        said = _refused(scene.host("add", "acme-weather"), "write")
    finally:
        scene.home.chmod(0o755)
    assert "cannot be written" in said
    _as_before(scene, before)


def test_a_link_planted_in_the_provenance_directory_is_not_written_through(
    scene: AddScene,
) -> None:
    _declared(scene)
    scene.serve(WHEEL, provenance=PROVENANCE)
    target = scene.root / "elsewhere.txt"
    stored = scene.config.parent / "registry.provenance"
    stored.mkdir(parents=True)
    (stored / f"{WHEEL.name}.provenance").symlink_to(target)
    before = scene.state()
    said = _refused(scene.host("add", "pypi-attestations", "--yes"), "write")
    assert "symbolic link" in said
    assert not target.exists()
    _as_before(scene, before)


# -- attacks ---------------------------------------------------------------------------------


def test_a_dependency_with_another_files_provenance_never_runs_and_nothing_is_installed(
    scene: AddScene, built: dict[str, Path]
) -> None:
    scene.serve(built["evil-driver"])
    scene.serve(built["evil"], provenance=PROVENANCE)  # pypi-attestations' provenance
    before = scene.state()
    done = scene.host("add", "acme-evil-driver")
    for command in (("load",), ("call", "ping"), ("verify",)):
        scene.host(*command)
    assert scene.ran() == []
    said = _refused(done, "provenance")
    assert said.startswith("error: acme-evil: provenance: ")
    assert "attests 'pypi_attestations-0.0.30-py3-none-any.whl' instead" in said
    _as_before(scene, before)


def test_a_module_planted_where_a_driver_installs_is_found_and_the_install_undone(
    scene: AddScene, built: dict[str, Path]
) -> None:
    scene.serve(built["weather"])
    scene.serve(built["lib"])
    # a module no distribution lists, left where acme-weather installs: pip keeps it, so the
    # installed tree is not the wheel's, and a load would be refused; add undoes the install
    package = scene.site / "acme_weather"
    package.mkdir()
    (package / "planted.py").write_text(f"open({str(scene.marker)!r}, 'a').write('planted ran')")
    before = scene.state()
    said = _refused(scene.host("add", "acme-weather"), "digest")
    assert "are not those of the wheel that was checked" in said
    assert "uninstalled acme-weather 1.0.0, acme-lib 1.0.0" in said
    _as_before(scene, before)
    for command in (("load",), ("call", "forecast")):
        scene.host(*command)
    assert scene.ran() == []


# -- the catalog mcs-host ships ----------------------------------------------------------------
# acme-ref stands for a published reference driver: no entry point, a library it imports
# without declaring it (as mcs-driver-filesystem imports mcs-adapter-localfs), both declared
# and pinned by a catalog as mcs-host's catalog.json declares and pins the real ones. add is run
# through its engine function in the venv, given this catalog (its test-only parameter: no
# command, option or environment variable names another catalog).

REF_ID = "a11d0000-0000-4000-8000-0000000000ef"
REF = """\
import acme_ref_lib
from mcs_host import MCSToolDriver, Tool
from mcs_host.kit import manifest_meta


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def __init__(self, *, greeting: str = "hello") -> None:
        self.greeting = greeting

    def list_tools(self):
        return [Tool(name="greet", description="Say the greeting.")]

    def execute_tool(self, tool_name, arguments):
        return f"{self.greeting} from {acme_ref_lib.WHO}"
"""
PAYLOAD = 'open({marker!r}, "a").write("tampered {name} ran\\n")\n'
ENGINE = """\
import dataclasses, json, sys
from pathlib import Path
from mcs_host.loading.add_records import AddError, AddRequest
from mcs_host.loading.adding import add
from mcs_host.loading.config import user_config_path
from mcs_host.trust.registry import Registry, user_registry_path

catalog = Registry.model_validate_json(Path(sys.argv[1]).read_bytes())
declared = Registry.model_validate_json(Path(sys.argv[3]).read_bytes()) if sys.argv[3:] else None
request = AddRequest(
    requirement=sys.argv[2],
    registry=sys.argv[4] if sys.argv[4:] else user_registry_path(),
    config=sys.argv[5] if sys.argv[5:] else user_config_path(),
    settings={"greeting": "hi"},
    declared=dict(declared.drivers) if declared else {},
)
try:
    added = add(request, catalog=catalog)
except AddError as error:
    said = {"step": error.step, "reason": error.reason, "message": str(error), "fix": error.fix}
    print(json.dumps({"refused": said}))
    sys.exit(2)
print(json.dumps({"distributions": [dataclasses.asdict(d) for d in added.distributions]}))
"""


def _tampered(wheel: Path, member: str, payload: str, out: Path) -> Path:
    """A copy of ``wheel`` in ``out``, of the same name, with ``payload`` put before the text
    of ``member`` and its RECORD line made to match: a whole wheel of other files."""
    with zipfile.ZipFile(wheel) as original:
        members = {info.filename: original.read(info) for info in original.infolist()}
    (record,) = [name for name in members if name.endswith(".dist-info/RECORD")]
    members[member] = payload.encode() + members[member]
    data = members[member]
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    rows = [
        f"{member},sha256={digest},{len(data)}" if row.startswith(f"{member},") else row
        for row in members[record].decode().splitlines()
    ]
    members[record] = ("\n".join(rows) + "\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out / wheel.name, "w", zipfile.ZIP_DEFLATED) as copy:
        for name in sorted(members, key=lambda n: (n == record, n)):
            copy.writestr(name, members[name])
    return out / wheel.name


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, built: dict[str, Path]) -> dict[str, Path]:
    """acme-ref and acme-ref-lib 1.0.0, a tampered copy of each (its code writes the marker),
    and ``catalog``: a catalog declaring the driver and pinning both real wheels."""
    root = tmp_path_factory.mktemp("reference")
    marker = built["marker"]
    project = driver_project("acme-ref", marker, REF_ID)
    files = {**project.files, "acme_ref/__init__.py": REF}
    project = dataclasses.replace(project, files=files, entry_points={})
    lib = Project("acme-ref-lib", files={"acme_ref_lib/__init__.py": 'WHO = "acme"\n'})
    wheels = {
        "ref": build_wheel(project.write(root / "src"), root / "wheels"),
        "ref-lib": build_wheel(lib.write(root / "src"), root / "wheels"),
    }
    for name, module in (("ref", "acme_ref"), ("ref-lib", "acme_ref_lib")):
        payload = PAYLOAD.format(marker=str(marker), name=name)
        tampered = _tampered(wheels[name], f"{module}/__init__.py", payload, root / name)
        wheels[f"tampered-{name}"] = tampered
    driver = {
        "distribution": "acme-ref",
        "label": "ref",
        "object": "acme_ref:Driver",
        "requires": ["acme-ref-lib"],
        "trust": "reference",
        "security_notes": ["Greets; reads nothing."],
        "releases": {"1.0.0": pin(wheels["ref"])},
    }
    library = {"trust": "reference", "releases": {"1.0.0": pin(wheels["ref-lib"])}}
    catalog = Registry.model_validate(
        {
            "format": REGISTRY_FORMAT,
            "drivers": {REF_ID: driver},
            "libraries": {"acme-ref-lib": library},
        }
    )
    wheels["catalog"] = root / "catalog.json"
    wheels["catalog"].write_text(catalog.dump())
    return wheels


def _engine(scene: AddScene, catalog: Path, *args: str | Path) -> tuple[int, dict[str, Any]]:
    """``add(AddRequest(NAME, ...), catalog=catalog)`` in the venv, as ``mcs-host add NAME
    --settings greeting=hi`` runs it: its exit code and what it said."""
    done = subprocess.run(
        [str(scene.venv.python), "-I", "-c", ENGINE, str(catalog), *map(str, args)],
        capture_output=True,
        text=True,
        env=scene.environment(),
        cwd=scene.root,
        stdin=subprocess.DEVNULL,
        timeout=300,
        check=False,
    )
    assert done.stdout, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, document


def test_a_driver_the_catalog_declares_is_added_held_to_its_pins_and_called(
    scene: AddScene, reference: dict[str, Path]
) -> None:
    scene.serve(reference["ref"], reference["ref-lib"])
    code, said = _engine(scene, reference["catalog"], "acme-ref")
    assert code == 0, said
    rows = {row["distribution"]: row for row in said["distributions"]}
    assert rows["acme-ref"]["how"] == "no-provenance"
    assert rows["acme-ref"]["shipped"] == "reference"
    assert rows["acme-ref-lib"]["needed_by"] == "acme-ref"  # the catalog says it needs it
    assert (rows["acme-ref-lib"]["installed"], rows["acme-ref-lib"]["shipped"]) == (
        True,
        "reference",
    )
    assert scene.ran() == []
    # the user's registry holds the pins, the catalog's declaration, notes and trust label: a
    # load reads only it
    catalog = Registry.model_validate_json(reference["catalog"].read_text())
    registry = Registry.model_validate_json(scene.registry.read_text())
    entry = registry.drivers[REF_ID]
    assert (entry.label, entry.object, entry.requires) == (
        "ref",
        "acme_ref:Driver",
        ("acme-ref-lib",),
    )
    assert (entry.trust, entry.security_notes) == ("reference", ("Greets; reads nothing.",))
    assert entry.releases["1.0.0"].digest == catalog.drivers[REF_ID].releases["1.0.0"].digest
    assert registry.libraries["acme-ref-lib"].trust == "reference"
    assert '[drivers.ref]\nsettings = { greeting = "hi" }\n' in scene.config.read_text()
    called = scene.host("call", "greet")
    assert called.returncode == 0, called.stdout + called.stderr
    assert called.stdout.strip() == "hi from acme"
    # a registry the configuration reads declares it too: that declaration wins
    mine = scene.root / "mine.json"
    declared = {"distribution": "acme-ref", "label": "mine", "object": "acme_ref:Driver"}
    mine.write_text(json.dumps({"format": REGISTRY_FORMAT, "drivers": {REF_ID: declared}}))
    other = scene.root / "other"
    args = (mine, other / "registry.json", other / "config.toml")
    code, said = _engine(scene, reference["catalog"], "acme-ref", *args)
    assert code == 0, said
    assert "\n[drivers.mine]\n" in (other / "config.toml").read_text()
    written = Registry.model_validate_json((other / "registry.json").read_text()).drivers[REF_ID]
    # its files are still the catalog's pin: the new entry has the pin's trust label, and
    # only what the winning declaration says it needs
    assert (written.label, written.trust, written.requires) == ("mine", "reference", ())


@pytest.mark.parametrize("tampered", ["ref", "ref-lib"])
def test_a_release_of_other_files_than_the_catalogs_pin_never_runs_and_nothing_changes(
    scene: AddScene, reference: dict[str, Path], tampered: str
) -> None:
    real = {"ref": reference["ref"], "ref-lib": reference["ref-lib"]}
    scene.serve(*{**real, tampered: reference[f"tampered-{tampered}"]}.values())
    before = scene.state()
    code, said = _engine(scene, reference["catalog"], "acme-ref")
    for command in (("load",), ("call", "greet"), ("verify",)):
        scene.host(*command)
    assert scene.ran() == []
    assert code == 2, said
    refused = said["refused"]
    assert (refused["step"], refused["reason"]) == ("pin", "digest-mismatch")
    name = {"ref": "acme-ref", "ref-lib": "acme-ref-lib"}[tampered]
    other, shipped = (pin(reference[k])["digest"] for k in (f"tampered-{tampered}", tampered))
    assert (
        f"{name} 1.0.0 is not the release mcs-host ships a pin of: the downloaded wheel's files "
        f"are {other}, the pin mcs-host ships (reference) is {shipped}" in refused["message"]
    )
    assert "do not install it" in refused["fix"]
    _as_before(scene, before)


# -- an MCP server ---------------------------------------------------------------------------


def test_an_mcp_server_distribution_is_added_as_its_table_and_mounted(
    scene: AddScene, built: dict[str, Path]
) -> None:
    scene.serve(built["server"])
    done = scene.host("add", "--server", "acme-clock")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (
        "acme-clock 1.0.0: no provenance: pinned from the downloaded wheel, installed"
    )
    # the mcp extra's distributions are the host's: not pinned again
    (mcp,) = [line for line in done.stdout.splitlines() if line.startswith("mcp ")]
    assert mcp.endswith(" (needed by acme-clock): provided by mcs-host")
    assert '\n[mcp_servers.acme-clock]\ndistribution = "acme-clock"\n' in scene.config.read_text()
    registry = json.loads(scene.registry.read_text())
    assert registry["mcp_servers"]["acme-clock"] == {"distribution": "acme-clock"}
    assert list(registry["libraries"]["acme-clock"]["releases"]) == ["1.0.0"]
    tools = scene.host("tools", "--json")
    assert tools.returncode == 0, tools.stdout + tools.stderr
    assert [t["name"] for t in json.loads(tools.stdout)["tools"]] == ["now"]


# -- the configuration's text, in this process ------------------------------------------------


def test_tables_are_added_as_text_keeping_every_other_line() -> None:
    text = '# mine\nautoload = true  # keep\n\n[drivers.csv]\nsettings = { root = "~" }'
    settings = {"quote": 'say "hi"\\', "tab": "a\tb\x7f", "n": [1, 2.5, True], "t": {"k-1": ""}}
    table = driver_table("weather", "acme_weather", settings, None, ["added"])
    added = with_tables(text, "config.toml", [table])
    assert added.startswith(text + "\n\n# added\n[drivers.weather]\n")
    import tomllib

    read = tomllib.loads(added)
    assert read["drivers"]["weather"] == {"driver": "acme_weather", "settings": settings}
    assert read["drivers"]["csv"] == {"settings": {"root": "~"}}
    # a layout where the table would mean something else is refused, not rewritten
    with pytest.raises(ConfigError, match="add them by hand"):
        with_tables("drivers = { csv = {} }\n", "config.toml", [table])
    with pytest.raises(ConfigError, match="no null"):
        toml_value({"a": None})
    with pytest.raises(ConfigError, match="64 bits"):
        toml_value(2**64)


def test_constructor_parameters_are_read_without_running_the_module() -> None:
    source = b"""
raise SystemExit("this module never runs")

class Base:
    def __init__(self, root: str, /, limit: int = 10, *args, mode="r", flag, **kw): ...

class Driver(Base):
    pass
"""
    found = constructor_parameters(source, "Driver")
    assert found is not None
    assert [(p.name, p.required, p.default) for p in found] == [
        ("limit", False, "10"),
        ("mode", False, '"r"'),
        ("flag", True, None),
    ]
    assert constructor_parameters(b"class Driver(Imported): pass", "Driver") is None
    assert constructor_parameters(b"def (", "Driver") is None
    # an optional argument named with a leading underscore is private: not offered
    private = b"class Driver:\n    def __init__(self, *, root='.', _adapter=None, _key): ..."
    found = constructor_parameters(private, "Driver")
    assert found is not None
    assert [p.name for p in found] == ["root", "_key"]


def test_a_class_a_package_re_exports_is_traced_to_the_module_that_defines_it() -> None:
    # as mcs.driver.csv's __init__ re-exports CsvToolDriver from .tooldriver
    source = b"from .tooldriver import CsvToolDriver\nfrom ..core import Base as Driver\n"
    assert imported_from(source, "CsvToolDriver") == (".tooldriver", "CsvToolDriver")
    assert imported_from(source, "Driver") == ("..core", "Base")
    assert imported_from(b"import tooldriver\nfrom x import *\n", "tooldriver") is None
    assert imported_from(b"def (", "Driver") is None
