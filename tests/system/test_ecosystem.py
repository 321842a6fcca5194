"""The published reference MCS drivers, installed from the package registry, verified and run.

``mcs-driver-csv``, ``mcs-driver-filesystem`` and ``mcs-driver-rest`` ship no entry point;
this repository's registry.json declares them, pins their releases and every library they
import (the MCS libraries, and ``requests`` with its requirements), so nothing unverified runs.
These tests need the package registry (deselect with ``-m "not network"``).
"""

from __future__ import annotations

import json
import runpy
import shlex
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar, cast

import pytest
from distbuild import ROOT, Venv, pip
from scenes import Scene

pytestmark = [pytest.mark.venv, pytest.mark.network]

REGISTRY = ROOT / "registry.json"
REFERENCE: list[str] = runpy.run_path(str(ROOT / "scripts" / "lock_reference.py"))["REQUIREMENTS"]
"""The releases registry.json pins (scripts/lock_reference.py): the drivers, and what they
need (mcs-adapter-localfs among them, which mcs-driver-filesystem does not declare)."""


def make_scene(root: Path, wheelhouse: Path, uv_cache: Path, *requirements: str) -> Scene:
    """A venv at ``root/venv`` with mcs-host, and ``requirements`` installed with pip from
    PyPI."""
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    pip("install", "--find-links", str(wheelhouse), *requirements, python=venv.python)
    return Scene(root, venv)


def load(scene: Scene, config: Path, tmp_path: Path) -> dict[str, dict[str, Any]]:
    """``mcs-host load --json`` in the scene's venv: its records by label."""
    done = scene.host("load", "--json", "--config", config, state=tmp_path / "state")
    assert done.stdout, done.stderr
    return {d["label"]: d for d in json.loads(done.stdout)["drivers"]}


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path) -> Scene:
    """mcs-host, and the reference drivers installed with pip from the package registry."""
    return make_scene(tmp_path_factory.mktemp("reference"), wheelhouse, uv_cache, *REFERENCE)


class _Pets(BaseHTTPRequestHandler):
    """A tiny REST API with its OpenAPI document."""

    pets: ClassVar[dict[str, dict[str, Any]]] = {
        "1": {"id": 1, "name": "Rex", "kind": "dog"},
        "2": {"id": 2, "name": "Tom", "kind": "cat"},
    }

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        port = cast("ThreadingHTTPServer", self.server).server_port
        if self.path == "/openapi.json":
            self._json(200, _spec(port))
        elif self.path.startswith("/pets/"):
            pet = self.pets.get(self.path.rsplit("/", 1)[1])
            self._json(200 if pet else 404, pet or {"detail": "no such pet"})
        elif self.path.startswith("/pets"):
            self._json(200, list(self.pets.values()))
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
    return {
        "openapi": "3.0.3",
        "info": {"title": "Pets", "version": "1.0.0"},
        "servers": [{"url": f"http://127.0.0.1:{port}"}],
        "paths": {
            "/pets": {
                "get": {
                    "operationId": "listPets",
                    "summary": "List all pets",
                    "responses": {"200": {"description": "The pets"}},
                }
            },
            "/pets/{petId}": {
                "get": {
                    "operationId": "getPet",
                    "summary": "Get one pet by id",
                    "parameters": [
                        {
                            "name": "petId",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": {"200": {"description": "The pet"}},
                }
            },
        },
    }


@pytest.fixture(scope="module")
def pets_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pets)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/openapi.json"
    server.shutdown()
    server.server_close()


@pytest.fixture
def config(tmp_path: Path, pets_api: str) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (data / "pets.csv").write_text("name,kind,age\nRex,dog,3\nTom,cat,5\nBo,dog,7\n")
    (data / "notes.txt").write_text("feed the cat at six\n")
    path = tmp_path / "mcs-host.toml"
    path.write_text(
        f"registries = [{str(REGISTRY)!r}]\n"
        f'[drivers.mcs-csv]\nsettings = {{ base_dir = "{data}" }}\n'
        f'[drivers.mcs-filesystem]\nsettings = {{ base_dir = "{data}" }}\n'
        f'[drivers.mcs-rest]\nsettings = {{ url = "{pets_api}" }}\n'
    )
    return path


def run(scene: Scene, config: Path, text: str, tmp_path: Path) -> dict[str, Any]:
    """``mcs-host run --config CONFIG TEXT`` in the scene's venv: its response."""
    done = scene.host("run", "--config", config, text, state=tmp_path / "state")
    assert done.stdout, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_published_drivers_verify_as_pinned_reference_drivers(
    scene: Scene, tmp_path: Path
) -> None:
    done = scene.host("verify", "--json", "--registry", REGISTRY, state=tmp_path)
    # everything they import is pinned too (mcs-rest's requests and its requirements): verify
    # says load would run only verified code, and exits 0
    assert done.returncode == 0, done.stdout
    drivers = {d["label"]: d for d in json.loads(done.stdout)["drivers"]}
    assert {
        label: (d["verification"], d["trust"], d["verified"]) for label, d in drivers.items()
    } == {
        "mcs-csv": ("pinned", "reference", True),
        "mcs-filesystem": ("pinned", "reference", True),
        "mcs-rest": ("pinned", "reference", True),
    }
    assert drivers["mcs-csv"]["distribution"] == "mcs-driver-csv"
    needed = {d["distribution"]: d["status"] for d in drivers["mcs-rest"]["dependencies"]}
    assert needed["requests"] == needed["charset-normalizer"] == "pinned"
    assert set(needed.values()) == {"pinned"}
    assert drivers["mcs-rest"]["unverified"] == []
    only_pinned = scene.host(
        "verify", "mcs-csv", "mcs-filesystem", "--registry", REGISTRY, state=tmp_path
    )
    assert only_pinned.returncode == 0, only_pinned.stdout
    assert "2 of 2 drivers may be loaded; 2 would run only verified code." in only_pinned.stdout


def test_they_load_with_their_quirks_reported(scene: Scene, config: Path, tmp_path: Path) -> None:
    done = scene.host("load", "--json", "--config", config, state=tmp_path)
    assert done.returncode == 0, done.stdout
    report = json.loads(done.stdout)
    drivers = {d["label"]: d for d in report["drivers"]}
    assert {label: d["status"] for label, d in drivers.items() if label.startswith("mcs-")} == {
        "mcs-csv": "mounted",
        "mcs-filesystem": "mounted",
        "mcs-rest": "mounted",
    }
    warnings = {label: " | ".join(d["warnings"]) for label, d in drivers.items()}
    assert "meta.version 0.1.0 differs from the distribution's 0.1.4" in warnings["mcs-csv"]
    assert (
        "mcs-driver-filesystem needs mcs-adapter-localfs without declaring it"
        in warnings["mcs-filesystem"]
    )
    # its MCS libraries are pinned and imported from verified bytes: nothing unverified ran
    assert "unverified" not in warnings["mcs-csv"]
    assert "unverified" not in warnings["mcs-rest"]  # requests is pinned, native code too
    assert {t["name"] for t in report["tools"]} >= {"read_csv_head", "read_file", "getPet"}


def test_csv_rows_from_an_llm_answer(scene: Scene, config: Path, tmp_path: Path) -> None:
    call = {"tool": "read_csv_head", "arguments": {"path": "pets.csv", "limit": 2}}
    answer = f"Reading the file.\n```json\n{json.dumps(call)}\n```"
    response = run(scene, config, answer, tmp_path)
    assert response["call_executed"], response
    assert response["tool_call_result"] == [
        {"name": "Rex", "kind": "dog", "age": "3"},
        {"name": "Tom", "kind": "cat", "age": "5"},
    ]
    summary = run(
        scene,
        config,
        '{"tool": "summarize_numeric_column", "arguments": {"path": "pets.csv", "column": "age"}}',
        tmp_path,
    )
    assert summary["tool_call_result"] == {"count": 3, "min": 3.0, "max": 7.0, "avg": 5.0}


def test_files_listed_and_read_and_errors_reported_as_errors(
    scene: Scene, config: Path, tmp_path: Path
) -> None:
    listed = run(scene, config, '{"tool": "list_directory", "arguments": {"path": "."}}', tmp_path)
    assert sorted(e["name"] for e in listed["tool_call_result"]["entries"]) == [
        "notes.txt",
        "pets.csv",
    ]
    read = run(
        scene,
        config,
        '{"name": "read_file", "arguments": {"path": "notes.txt"}}',
        tmp_path,
    )
    assert read["tool_call_result"]["content"] == "feed the cat at six\n"
    missing = run(
        scene, config, '{"tool": "read_file", "arguments": {"path": "nope.txt"}}', tmp_path
    )
    assert (missing["call_executed"], missing["call_failed"]) == (False, True)
    assert "read_file: Not a file:" in missing["call_detail"]


def test_a_rest_operation_against_a_loopback_openapi_server(
    scene: Scene, config: Path, tmp_path: Path
) -> None:
    response = run(
        scene,
        config,
        'Looking it up: {"tool": "getPet", "arguments": {"petId": "2"}}',
        tmp_path,
    )
    assert response["call_executed"], response
    result = response["tool_call_result"]
    assert (result if isinstance(result, dict) else json.loads(result)) == {
        "id": 2,
        "name": "Tom",
        "kind": "cat",
    }


def test_a_rest_spec_that_cannot_be_fetched_is_a_clear_status(scene: Scene, tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "mcs-host.toml"
    config.write_text(
        f"registries = [{str(REGISTRY)!r}]\nautoload = false\n"
        f'[drivers.mcs-rest]\nsettings = {{ url = "http://127.0.0.1:{port}/openapi.json" }}\n'
    )
    (record,) = load(scene, config, tmp_path).values()
    assert (record["status"], record["reason"]) == ("failed", "no-tools")
    assert record["message"].startswith("RestToolDriver lists no tools; its healthcheck says")
    assert "unreachable" in record["message"]


def test_an_unpinned_dependency_refuses_the_driver_until_its_fix_line_pins_it(
    scene: Scene, config: Path, tmp_path: Path
) -> None:
    # a registry that pins the drivers and the MCS libraries, not requests
    document = json.loads(REGISTRY.read_text())
    del document["libraries"]["requests"]
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps(document))
    refusing = tmp_path / "refusing.toml"
    refusing.write_text(config.read_text().replace(str(REGISTRY), str(partial)))
    drivers = load(scene, refusing, tmp_path)
    assert (drivers["mcs-rest"]["status"], drivers["mcs-rest"]["reason"]) == (
        "rejected",
        "unverified-dependency",
    )
    assert drivers["mcs-csv"]["status"] == "mounted"  # all it imports is pinned
    fix = drivers["mcs-rest"]["fix"]
    command = shlex.split(fix.split("`")[1])  # the one command it names, as printed
    assert command == [
        "mcs-host", "lock", "mcs-rest", "--registry", str(partial), "--config", str(refusing)
    ]  # fmt: skip
    done = scene.host(*command[1:], state=tmp_path / "state")  # the command asserted above
    assert done.returncode == 0, done.stderr
    assert "pinned requests 2.34.2: sha256:" in done.stdout
    drivers = load(scene, refusing, tmp_path)
    assert drivers["mcs-rest"]["status"] == "mounted", drivers["mcs-rest"]


def test_a_tampered_dependency_refuses_the_driver(
    tmp_path: Path, wheelhouse: Path, uv_cache: Path
) -> None:
    scene = make_scene(
        tmp_path,
        wheelhouse,
        uv_cache,
        "mcs-driver-csv==0.1.4",
        "mcs-adapter-localfs==0.2.0",
    )
    (core,) = scene.venv.site_packages.glob("mcs/driver/core/base_driver.py")
    core.write_text(core.read_text() + "\nTAMPERED = True\n")
    config = tmp_path / "mcs-host.toml"
    config.write_text(
        f"registries = [{str(REGISTRY)!r}]\n"
        f'[drivers.mcs-csv]\nsettings = {{ base_dir = "{tmp_path}" }}\n'
    )
    record = load(scene, config, tmp_path)["mcs-csv"]
    assert (record["status"], record["reason"]) == ("rejected", "dependency-rejected")
    assert "mcs/driver/core/base_driver.py" in record["message"]


def test_the_filesystem_driver_without_its_undeclared_adapter(
    tmp_path: Path, wheelhouse: Path, uv_cache: Path
) -> None:
    scene = make_scene(tmp_path, wheelhouse, uv_cache, "mcs-driver-filesystem==0.2.4")
    config = tmp_path / "mcs-host.toml"
    config.write_text(
        f"registries = [{str(REGISTRY)!r}]\nautoload = false\n"
        f'[drivers.mcs-filesystem]\nsettings = {{ base_dir = "{tmp_path}" }}\n'
    )
    (record,) = load(scene, config, tmp_path).values()
    assert (record["status"], record["reason"]) == ("failed", "missing-dependency")
    assert record["message"] == (
        "mcs-driver-filesystem needs (it does not declare it; the registry says so) "
        "mcs-adapter-localfs, which is not installed"
    )


def test_a_one_off_command_with_settings_for_the_reference_drivers_mounts_them(
    scene: Scene, tmp_path: Path
) -> None:
    # its --set labels are declared only by the registry: they were unknown to --set (exit 2)
    command = ["load", "--registry", "registry.json"]
    command += ["--set", "mcs-csv.base_dir=data", "--set", "mcs-filesystem.base_dir=data"]
    command += ["--set", "mcs-rest.url=http://127.0.0.1:8000/openapi.json"]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "pets.csv").write_text("name,kind\nRex,dog\n")
    (tmp_path / "registry.json").write_bytes(REGISTRY.read_bytes())
    done = scene.host(*command, "--json", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    drivers = {d["label"]: d for d in json.loads(done.stdout)["drivers"]}
    assert drivers["mcs-csv"]["status"] == "mounted", drivers["mcs-csv"]
    assert drivers["mcs-filesystem"]["status"] == "mounted", drivers["mcs-filesystem"]
    # nothing serves its OpenAPI document here: a clear status, not an unknown label
    assert drivers["mcs-rest"]["reason"] in ("mounted", "no-tools"), drivers["mcs-rest"]
    unknown = scene.host(*command[:-2], "--set", "mcs-cvs.base_dir=data", cwd=tmp_path)
    assert unknown.returncode == 2
    assert "no driver or MCP server has the label 'mcs-cvs'" in unknown.stderr


def test_lock_pins_a_reference_driver_by_the_label_a_registry_declares(
    scene: Scene, tmp_path: Path
) -> None:
    # the fix printed for a release no registry pins says `mcs-host lock LABEL`: for a driver
    # with no entry point, the label a registry declares (it said: no installed driver)
    (tmp_path / "registry.json").write_bytes(REGISTRY.read_bytes())
    config = tmp_path / "mcs-host.toml"
    config.write_text('registries = ["registry.json"]\n')
    mine = tmp_path / "mine.json"
    done = scene.host(
        "lock", "mcs-csv", "--config", config, "--registry", mine, "--json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    written = json.loads(mine.read_text())["drivers"]
    declared = json.loads(REGISTRY.read_text())["drivers"]
    ((driver_id, entry),) = written.items()
    assert driver_id in declared
    assert (entry["label"], entry["object"]) == ("mcs-csv", "mcs.driver.csv:CsvToolDriver")
    assert (
        entry["releases"]["0.1.4"]["digest"] == declared[driver_id]["releases"]["0.1.4"]["digest"]
    )
    # with what it needs, as installed: the very bytes this repository's registry pins
    libraries = json.loads(mine.read_text())["libraries"]
    bundled = json.loads(REGISTRY.read_text())["libraries"]
    assert "mcs-driver-core" in libraries
    for name, pinned in libraries.items():
        assert pinned["releases"] == {
            v: {k: p[k] for k in ("digest", "files", "bytes")}
            for v, p in bundled[name]["releases"].items()
        }, name
    # no registry read declares it: the error says where a declaration would come from
    other = tmp_path / "other.json"
    elsewhere = scene.host("lock", "mcs-csv", "--registry", other, cwd=tmp_path)
    assert elsewhere.returncode == 2
    assert "no registry" in elsewhere.stderr
