"""``mcs-host add`` from the configured package index, end to end: what it adds runs verified,
served to an MCP client.

Each driver is added in one command by the user's own pip, as this machine configures it (its
pip configuration files and ``PIP_*`` variables; a fresh HOME), with what it needs; then
``mcs-host serve`` loads it with the default policy (no unverified code runs, native code from
verified distributions allowed) and serves it over stdio to the ``mcp`` SDK's client, which
starts it from a directory of its own and lists and calls its tools. The drivers: the
published reference drivers (``mcs-driver-csv``, ``-filesystem`` and ``-rest``, with
``requests`` and its requirements), which ship no entry point, so the user's configuration
names a registry declaring them (this repository's registry.json with its pins taken out:
every pin the load checks is one ``add`` wrote); and a driver built here that needs numpy and
pandas, served from a loopback index beside numpy and pandas from the configured index. The
module's tests share one pip cache (where the index lets pip cache what it downloads), the
wheel built here and each scene's venv. Needs the package index (deselect with ``-m "not
network"``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import runpy
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar, cast

import anyio
import pytest
from distbuild import ROOT, Venv, build_wheel
from hostrun import driver_project
from pypi_index import LocalIndex, pip_env
from scenes import SealedScene

from mcs_host.trust.downloading import pip_config

pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs

from mcp import Client, StdioServerParameters

pytestmark = [pytest.mark.venv, pytest.mark.network]

REGISTRY = ROOT / "registry.json"
DRIVERS: dict[str, tuple[str, str, str]] = runpy.run_path(
    str(ROOT / "scripts" / "lock_reference.py")
)["DRIVERS"]
"""Label -> (distribution==version, object, id): the releases registry.json declares."""
STATS_ID = "a11d0000-0000-4000-8000-0000000057a7"
STATS = """\
open({marker!r}, "a").write("acme-stats ran\\n")

import numpy as np
import pandas as pd

from mcs_host import MCSToolDriver, Tool, ToolParameter
from mcs_host.kit import manifest_meta

NUMBERS = {{"type": "array", "items": {{"type": "number"}}}}


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [
            Tool(
                name="describe",
                description="Solve A x = b with numpy, and describe x with pandas.",
                parameters=[
                    ToolParameter(name="matrix", description="A, square.", required=True,
                                  schema={{"type": "array", "items": NUMBERS}}),
                    ToolParameter(name="vector", description="b.", required=True,
                                  schema=NUMBERS),
                ],
            )
        ]

    def execute_tool(self, tool_name, arguments):
        x = np.linalg.solve(np.array(arguments["matrix"]), np.array(arguments["vector"]))
        column = pd.Series(x)
        return {{
            "x": [float(v) for v in x],
            "mean": float(column.mean()),
            "std": float(np.std(x)),
            "numpy": np.__version__,
        }}
"""
ADDED = re.compile(
    r"(no provenance: pinned from the downloaded wheel|attested by \S+ \(log index \d+\))"
    r", installed"
)
"""How ``add`` says it verified and installed a distribution it downloaded."""


# -- the scenes ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PublishedScene(SealedScene):
    """A venv with mcs-host[attest,mcp] and pip, a fresh HOME, and what ``add`` said; its
    commands run in ``env``, the whole of it, in ``root``."""

    home: Path
    env: dict[str, str]
    """The environment ``add`` ran in."""
    added: dict[str, dict[str, Any]]
    """Distribution added -> ``add --json``'s document."""

    timeout: ClassVar[float] = 600

    @property
    def config(self) -> Path:
        return self.home / ".config" / "mcs-host" / "config.toml"

    @property
    def registry(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(
            (self.home / ".config" / "mcs-host" / "registry.json").read_text()
        )
        return document

    def environment(self, *, home: Path | None = None, state: Path | None = None) -> dict[str, str]:
        """``env``, with HOME and the state directory set when given."""
        environment = dict(self.env)
        if home is not None:
            environment["HOME"] = str(home)
        if state is not None:
            environment["MCS_HOST_STATE_DIR"] = str(state)
        return environment

    def add(self, *args: str) -> dict[str, Any]:
        """``mcs-host add ARGS --json``, which must succeed: its document."""
        done = self.host("add", *args, "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        document: dict[str, Any] = json.loads(done.stdout)
        return document

    def serve(self, work: Any) -> Any:
        """``mcs-host serve`` started by the SDK's client over stdio from a directory of its
        own, with only this HOME and a plain PATH; what ``work(client)`` returns."""
        elsewhere = self.root / "elsewhere"
        elsewhere.mkdir(exist_ok=True)
        server = StdioServerParameters(
            command=str(self.venv.bin / "mcs-host"),
            args=["serve"],
            env={"HOME": str(self.home), "PATH": "/usr/bin:/bin"},
            cwd=str(elsewhere),
        )

        async def main() -> Any:
            async with Client(server, read_timeout_seconds=120) as client:
                return await work(client)

        return anyio.run(main)


def _venv(root: Path, wheelhouse: Path, uv_cache: Path) -> Venv:
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host[attest,mcp]", "pip", wheelhouse=wheelhouse, cache=uv_cache)
    return venv


def _environment(venv: Venv, home: Path, pip_cache: Path, pip: dict[str, str]) -> dict[str, str]:
    """What ``add`` runs with: ``pip`` (the pip settings: this machine's, or given), a fresh
    HOME, no host settings of the developer's, the module's pip cache."""
    env = {k: v for k, v in pip.items() if not k.startswith(("MCS_HOST_", "XDG_"))}
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_NO_CACHE_DIR"):
        env.pop(name, None)
    env.update(
        HOME=str(home),
        PIP_CACHE_DIR=str(pip_cache),
        PATH=f"{venv.bin}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


@pytest.fixture(scope="module")
def pip_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One pip cache for the module: what one test downloads, the next reuses."""
    return tmp_path_factory.mktemp("pip-cache")


class _Pets(BaseHTTPRequestHandler):
    """A REST API of one operation, with its OpenAPI document."""

    pets: ClassVar[dict[str, dict[str, Any]]] = {"2": {"id": 2, "name": "Tom", "kind": "cat"}}

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        port = cast("ThreadingHTTPServer", self.server).server_port
        if self.path == "/openapi.json":
            self._json(200, _spec(port))
        elif self.path.startswith("/pets/") and self.path.rsplit("/", 1)[1] in self.pets:
            self._json(200, self.pets[self.path.rsplit("/", 1)[1]])
        else:
            self._json(404, {"detail": "not found"})

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.end_headers()

    def _json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _spec(port: int) -> dict[str, Any]:
    pet = {"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}}
    operation = {
        "operationId": "getPet",
        "summary": "Get one pet by id",
        "parameters": [pet],
        "responses": {"200": {"description": "The pet"}},
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "Pets", "version": "1.0.0"},
        "servers": [{"url": f"http://127.0.0.1:{port}"}],
        "paths": {"/pets/{petId}": {"get": operation}},
    }


@pytest.fixture(scope="module")
def pets_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pets)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/openapi.json"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def reference(
    tmp_path_factory: pytest.TempPathFactory,
    wheelhouse: Path,
    uv_cache: Path,
    pip_cache: Path,
    pets_api: str,
) -> PublishedScene:
    """The three reference drivers, each added with ``mcs-host add NAME==VERSION --settings``
    from the configured index into a venv holding mcs-host, and a configuration naming the
    user's registry and one that declares them without pinning anything."""
    root = tmp_path_factory.mktemp("reference")
    venv = _venv(root, wheelhouse, uv_cache)
    home = root / "home"
    data = root / "data"
    data.mkdir()
    (data / "pets.csv").write_text("name,kind,age\nRex,dog,3\nTom,cat,5\nBo,dog,7\n")
    (data / "notes.txt").write_text("feed the cat at six\n")
    document = json.loads(REGISTRY.read_text())
    declared = {
        entry_id: {k: v for k, v in entry.items() if k != "releases"}
        for entry_id, entry in document["drivers"].items()
        if entry["label"] in DRIVERS
    }
    declarations = root / "declared.json"
    declarations.write_text(json.dumps({"format": document["format"], "drivers": declared}))
    config = home / ".config" / "mcs-host" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'registries = ["registry.json", "{declarations}"]\n')
    env = _environment(venv, home, pip_cache, dict(os.environ))
    scene = PublishedScene(root, venv, home, env, {})
    settings = {
        "mcs-csv": f"base_dir={data}",
        "mcs-filesystem": f"base_dir={data}",
        "mcs-rest": f"url={pets_api}",
    }
    # the filesystem driver first: what it needs without declaring it (mcs-adapter-localfs,
    # which the registry records) is not installed yet
    for label in ("mcs-filesystem", "mcs-csv", "mcs-rest"):
        requirement = DRIVERS[label][0]
        # --yes: a release the index has provenance for is added with the identity it proves
        added = scene.add(requirement, "--settings", settings[label], "--yes")
        scene.added[requirement.partition("==")[0]] = added
    return scene


def _rows(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["distribution"]: row for row in document["distributions"]}


def test_the_reference_drivers_are_added_with_what_they_need_pinned_as_registry_json_pins_them(
    reference: PublishedScene,
) -> None:
    for requirement, _, _ in DRIVERS.values():
        name, _, version = requirement.partition("==")
        rows = _rows(reference.added[name])
        assert (rows[name]["version"], rows[name]["needed_by"]) == (version, None)
        assert rows[name]["verified"] in ("attested", "no-provenance"), rows[name]
        assert rows[name]["installed"] is True
        # what it needs beyond the host's installation: downloaded and verified, or pinned as
        # installed (what an earlier add installed, or the host's attest extra brought)
        assert all(r["needed_by"] for r in list(rows.values())[1:]), rows
        assert {r["verified"] for r in rows.values()} <= {"attested", "no-provenance", "installed"}
    adapter = _rows(reference.added["mcs-driver-filesystem"])["mcs-adapter-localfs"]
    assert (adapter["needed_by"], adapter["installed"]) == ("mcs-driver-filesystem", True)
    rest = _rows(reference.added["mcs-driver-rest"])
    assert {"requests", "urllib3", "idna", "charset-normalizer", "certifi"} <= set(rest)
    assert rest["requests"]["needed_by"] == "mcs-adapter-http"
    assert rest["mcs-adapter-http"]["installed"] is True
    # each driver and library pinned from the very bytes this repository's registry pins for
    # the same release (scripts/lock_reference.py locked the wheels pip picks)
    written = reference.registry
    published = json.loads(REGISTRY.read_text())
    for entry_id, entry in published["drivers"].items():
        if entry["label"] in DRIVERS:
            (version,) = entry["releases"]
            mine = written["drivers"][entry_id]["releases"][version]
            assert mine["digest"] == entry["releases"][version]["digest"], entry["label"]
            assert len(mine["wheel_sha256"]) == 64
    same = 0
    for name, library in published["libraries"].items():
        for version, pin in library["releases"].items():
            mine = written["libraries"][name]["releases"].get(version)
            if mine is not None:
                same += 1
                assert mine["digest"] == pin["digest"], (name, version)
    assert same >= 4  # the MCS libraries: mcs-driver-core, the adapters, mcs-types-http
    # every table holds its settings; the user's own lines are kept
    config = reference.config.read_text()
    assert config.startswith('registries = ["registry.json", ')
    for label in DRIVERS:
        assert f"\n[drivers.{label}]\nsettings = {{ " in config
    # without --settings, the table offers the constructor's keyword arguments, read from the
    # class each package re-exports (mcs.driver.csv's CsvToolDriver is in .tooldriver)
    other = reference.root / "other.toml"
    other.write_text(reference.config.read_text().split("\n\n")[0] + "\n")
    for requirement, _, _ in DRIVERS.values():
        reference.add(requirement, "--config", str(other))
    offered = other.read_text()
    assert "[drivers.mcs-csv]\n# settings = { base_dir = … }\n" in offered
    assert (
        "[drivers.mcs-rest]\n# settings = { url = ?, include_tags = …, include_paths = … }\n"
        in (offered)
    )
    # a load with the default policy would run only verified code: verify says so, exits 0
    verified = reference.host("verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "3 of 3 drivers may be loaded; 3 would run only verified code." in verified.stdout


def test_the_reference_drivers_are_served_to_the_sdk_client_started_elsewhere(
    reference: PublishedScene,
) -> None:
    async def work(client: Client) -> Any:
        listed = await client.list_tools()
        rows = await client.call_tool("read_csv_head", {"path": "pets.csv", "limit": 2})
        note = await client.call_tool("read_file", {"path": "notes.txt"})
        pet = await client.call_tool("getPet", {"petId": "2"})
        return listed.tools, rows, note, pet

    tools, rows, note, pet = reference.serve(work)
    facts = {t.name: t.meta["io.mcs-host/driver"] for t in tools}
    labels = {name: facts[name]["label"] for name in ("read_csv_head", "read_file", "getPet")}
    assert labels == {
        "read_csv_head": "mcs-csv",
        "read_file": "mcs-filesystem",
        "getPet": "mcs-rest",
    }
    assert {f["verification"] for f in facts.values()} == {"pinned"}
    assert [r.is_error for r in (rows, note, pet)] == [False] * 3, (rows, note, pet)
    assert json.loads(_text(rows)) == [
        {"name": "Rex", "kind": "dog", "age": "3"},
        {"name": "Tom", "kind": "cat", "age": "5"},
    ]
    assert "feed the cat at six" in _text(note)
    found = json.loads(_text(pet))
    assert (found if isinstance(found, dict) else json.loads(found)) == {
        "id": 2,
        "name": "Tom",
        "kind": "cat",
    }


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


# -- the README's first path: init, then add by name, verified by the catalog mcs-host ships ----


@pytest.fixture(scope="module")
def readme(
    tmp_path_factory: pytest.TempPathFactory,
    wheelhouse: Path,
    uv_cache: Path,
    pip_cache: Path,
) -> tuple[PublishedScene, Path, dict[str, subprocess.CompletedProcess[str]]]:
    """The README's commands in a venv holding mcs-host, with a fresh HOME and no registry
    named anywhere: ``mcs-host init``, then ``mcs-host add mcs-driver-csv --settings
    base_dir=DIR`` (no version: the index's newest); the scene, DIR, and what each said."""
    root = tmp_path_factory.mktemp("readme")
    venv = _venv(root, wheelhouse, uv_cache)
    home = root / "home"
    home.mkdir()
    data = root / "data"
    data.mkdir()
    (data / "pets.csv").write_text("name,kind,age\nRex,dog,3\nTom,cat,5\nBo,dog,7\n")
    scene = PublishedScene(
        root, venv, home, _environment(venv, home, pip_cache, dict(os.environ)), {}
    )
    said = {"init": scene.host("init")}
    said["add"] = scene.host("add", "mcs-driver-csv", "--settings", f"base_dir={data}")
    return scene, data, said


def test_after_init_a_reference_driver_is_added_by_name_held_to_the_pins_mcs_host_ships(
    readme: tuple[PublishedScene, Path, dict[str, subprocess.CompletedProcess[str]]],
) -> None:
    scene, data, said = readme
    assert said["init"].returncode == 0, said["init"].stderr
    added = said["add"]
    assert added.returncode == 0, added.stdout + added.stderr
    # mcs-driver-csv ships no entry point and the user's registry is empty: the catalog
    # declares it, and the wheel the index served is the one it pins, as are its libraries'
    spec, _, driver_id = DRIVERS["mcs-csv"]
    lines = added.stdout.splitlines()
    assert lines[0] == (
        f"{spec.replace('==', ' ')}: matches the pin mcs-host ships (reference), installed"
    )
    for library in ("mcs-driver-core", "mcs-adapter-localfs"):
        (line,) = [x for x in lines if x.startswith(f"{library} ")]
        assert line.endswith(
            "(needed by mcs-driver-csv): matches the pin mcs-host ships (reference), installed"
        ), line
    assert f"wrote [drivers.mcs-csv] in {scene.config}" in lines
    # the registry it wrote is the one a load reads; the table it wrote is the first one
    assert "note: a load with" not in added.stderr
    assert f"note: {scene.config} names drivers now, so only those it names mount" in (added.stderr)
    # the pins, declaration, notes and trust label are in the user's own registry
    published = json.loads(REGISTRY.read_text())["drivers"][driver_id]
    entry = scene.registry["drivers"][driver_id]
    assert (entry["label"], entry["object"], entry["trust"]) == (
        "mcs-csv",
        published["object"],
        "reference",
    )
    assert entry["security_notes"] == published["security_notes"]
    (version,) = published["releases"]
    assert entry["releases"][version]["digest"] == published["releases"][version]["digest"]
    assert f'\n[drivers.mcs-csv]\nsettings = {{ base_dir = "{data}" }}\n' in (
        scene.config.read_text()
    )
    # a call from another directory mounts it with the default policy, from the user's files
    elsewhere = scene.root / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    called = scene.host("call", "read_csv_head", "path=pets.csv", "limit=2", cwd=elsewhere)
    assert called.returncode == 0, called.stdout + called.stderr
    assert json.loads(called.stdout) == [
        {"name": "Rex", "kind": "dog", "age": "3"},
        {"name": "Tom", "kind": "cat", "age": "5"},
    ]
    (scene.home / ".config" / "Claude").mkdir(parents=True)  # Claude Desktop has run here
    installed = scene.host("install", "claude-desktop", cwd=elsewhere)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    client = scene.home / ".config" / "Claude" / "claude_desktop_config.json"
    assert "mcs-host" in json.loads(client.read_text())["mcpServers"]


# -- a driver that needs numpy and pandas ------------------------------------------------------


@pytest.fixture(scope="module")
def stats(
    tmp_path_factory: pytest.TempPathFactory,
    wheelhouse: Path,
    uv_cache: Path,
    pip_cache: Path,
) -> Iterator[tuple[PublishedScene, Path]]:
    """acme-stats (needs mcs-host, numpy and pandas) on a loopback index, added with ``mcs-host
    add acme-stats --label stats``, pip asking that index first and the configured ones as
    extra indexes; the scene, and the file the driver's code writes when it runs."""
    root = tmp_path_factory.mktemp("stats")
    marker = root / "ran.txt"
    project = driver_project(
        "acme-stats",
        marker,
        STATS_ID,
        files={"acme_stats/__init__.py": STATS.format(marker=str(marker))},
    )
    project = dataclasses.replace(project, dependencies=["mcs-host", "numpy", "pandas"])
    served = root / "served"
    build_wheel(project.write(root / "src"), served)
    venv = _venv(root, wheelhouse, uv_cache)
    configured = pip_config()
    with LocalIndex(served) as index:
        pip = pip_env(
            index.url, *configured.indexes, cert=Path(configured.cert) if configured.cert else None
        )
        env = _environment(venv, root / "home", pip_cache, pip)
        scene = PublishedScene(root, venv, root / "home", env, {})
        scene.added["acme-stats"] = scene.add("acme-stats", "--label", "stats")
        yield scene, marker


def test_a_driver_needing_numpy_and_pandas_is_added_from_both_indexes_with_what_they_need(
    stats: tuple[PublishedScene, Path],
) -> None:
    scene, marker = stats
    assert not marker.exists()  # nothing of it ran while it was added
    rows = _rows(scene.added["acme-stats"])
    assert rows["acme-stats"]["verified"] == "no-provenance"  # the loopback index has none
    for name in ("numpy", "pandas"):
        assert (rows[name]["needed_by"], rows[name]["installed"]) == ("acme-stats", True)
        assert rows[name]["verified"] in ("attested", "no-provenance")
    # each distribution it installed is pinned from its wheel; the host is left to itself
    libraries = scene.registry["libraries"]
    assert "mcs-host" not in rows
    assert "mcs-host" not in libraries
    for name, row in rows.items():
        if row["installed"] and name != "acme-stats":
            pin = libraries[name]["releases"][row["version"]]
            assert (pin["digest"], len(pin["wheel_sha256"])) == (row["digest"], 64)
    assert '[drivers.stats]\ndriver = "acme_stats"\n' in scene.config.read_text()


def test_it_is_served_to_the_sdk_client_started_elsewhere_and_computes_with_numpy(
    stats: tuple[PublishedScene, Path],
) -> None:
    scene, marker = stats

    async def work(client: Client) -> Any:
        listed = await client.list_tools()
        arguments = {"matrix": [[2, 1], [1, 3]], "vector": [3, 5]}
        return listed.tools, await client.call_tool("describe", arguments)

    tools, result = scene.serve(work)
    (tool,) = tools
    facts = tool.meta["io.mcs-host/driver"]
    assert (facts["label"], facts["distribution"], facts["verification"]) == (
        "stats",
        "acme-stats",
        "pinned",
    )
    assert not result.is_error, result
    answer = json.loads(_text(result))
    assert answer["x"] == pytest.approx([0.8, 1.4])
    assert answer["mean"] == pytest.approx(1.1)
    assert answer["std"] == pytest.approx(0.3)
    assert answer["numpy"] == _rows(scene.added["acme-stats"])["numpy"]["version"]
    assert marker.read_text() == "acme-stats ran\n"
