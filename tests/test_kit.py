"""The driver author's path, as docs/tutorials/write-a-driver.md walks it: new -> test ->
check -> build -> sign -> lock with the publisher key -> install -> load; then a later
release loads on its signature."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from distbuild import Venv, build_wheel

from mcs_host import new_driver

pytestmark = pytest.mark.venv


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _own_tests(project: Path) -> subprocess.CompletedProcess[str]:
    """A scaffolded project's own tests, run by pytest in its directory."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def _load(venv: Venv, registry: Path, state: Path) -> dict[str, Any]:
    done = venv.run(
        "mcs-host", "load", "--json", "--registry", registry, env={"MCS_HOST_STATE_DIR": str(state)}
    )
    report: dict[str, Any] = json.loads(done.stdout)
    mounted = any(d["status"] == "mounted" for d in report["drivers"])
    assert done.returncode == (0 if mounted else 1), f"{done.args}\n{done.stdout}\n{done.stderr}"
    return report


def test_a_new_driver_from_scaffold_to_a_signed_release(
    tmp_path: Path, wheelhouse: Path, uv_cache: Path
) -> None:
    venv = Venv.create(tmp_path / "venv")
    venv.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    out = _ok(venv.run("mcs-host", "new", "acme-weather", "--dir", tmp_path, "--publisher", "Acme"))
    project = tmp_path / "acme-weather"
    assert f"created {project / 'acme_weather' / 'mcs-driver.json'}" in out

    # its own tests, through the mcs_conformance fixture of mcs-host's pytest plugin
    assert "3 passed" in _ok(_own_tests(project))
    assert (project / ".gitignore").read_text().splitlines()[0] == "__pycache__/"
    assert _ok(venv.run("mcs-host", "check", project)).startswith("acme-weather: passes")

    key = tmp_path / "keys" / "acme.key"
    public = _ok(venv.run("mcs-host", "keygen", key)).split("public key:")[1].split()[0]
    assert key.parent.stat().st_mode & 0o777 == 0o700  # keygen made the directory, private
    refused = venv.run("mcs-host", "keygen", key)
    assert (refused.returncode, refused.stderr.strip()) == (
        2,
        f"error: {key} exists; refusing to overwrite a key",
    )
    first = build_wheel(project, tmp_path / "dist")
    assert "signed acme-weather 0.1.0 sha256:" in _ok(
        venv.run("mcs-host", "sign", first, "--key", key)
    )

    # the registry operator pins this release and trusts the publisher's key for later ones
    registry = tmp_path / "registry.json"
    locked = venv.run(
        "mcs-host", "lock", "--wheel", first, "--registry", registry, "--publisher-key", public
    )
    assert f"wrote {registry}" in _ok(locked)
    (entry,) = json.loads(registry.read_text())["drivers"].values()
    assert entry["publisher_keys"] == [{"key": public, "name": "Acme"}]
    assert list(entry["releases"]) == ["0.1.0"]

    venv.install(first, wheelhouse=wheelhouse)
    (record,) = _load(venv, registry, tmp_path / "state")["drivers"]
    assert (record["label"], record["status"], record["verification"], record["trust"]) == (
        "acme-weather",
        "mounted",
        "pinned",
        "community",
    )
    assert record["tools"] == ["greet"]
    call = venv.run(
        "mcs-host", "call", "greet", "--args", '{"name": "Ann"}', "--registry", registry,
        env={"MCS_HOST_STATE_DIR": str(tmp_path / "state")},
    )  # fmt: skip
    assert _ok(call) == "Hello, Ann.\n"

    # the next release, bumped in one step: not in the registry, but signed by the trusted key
    assert _ok(venv.run("mcs-host", "bump", "0.2.0", "--dir", project)).splitlines() == [
        f"set 0.2.0 in {project / 'pyproject.toml'}",
        f"set 0.2.0 in {project / 'acme_weather' / 'mcs-driver.json'}",
    ]
    second = build_wheel(project, tmp_path / "dist")
    _ok(venv.run("mcs-host", "sign", second, "--key", key))
    venv.install(second, wheelhouse=wheelhouse)
    (record,) = _load(venv, registry, tmp_path / "state")["drivers"]
    assert (record["version"], record["status"], record["verification"]) == (
        "0.2.0",
        "mounted",
        "signed",
    )
    assert record["trust"] == "community"

    # the same release, signed by somebody else's key, is not trusted
    third = build_wheel(project, tmp_path / "other")
    other = tmp_path / "keys" / "other.key"
    _ok(venv.run("mcs-host", "keygen", other))
    _ok(venv.run("mcs-host", "sign", third, "--key", other))
    venv.install("--force-reinstall", "--no-deps", third)
    (record,) = _load(venv, registry, tmp_path / "state")["drivers"]
    assert (record["status"], record["reason"]) == ("rejected", "untrusted-key")


def test_a_scaffold_whose_entry_point_names_a_missing_class_fails_its_own_tests(
    tmp_path: Path,
) -> None:
    project = new_driver("acme-weather", tmp_path)
    pyproject = project / "pyproject.toml"
    declared = 'acme-weather = "acme_weather:AcmeWeatherToolDriver"'
    assert declared in pyproject.read_text()
    typo = declared.replace('Driver"', 'Drvier"')
    pyproject.write_text(pyproject.read_text().replace(declared, typo))
    tests = _own_tests(project)
    assert tests.returncode == 1
    assert "2 failed, 1 passed" in tests.stdout
    assert "has no attribute 'AcmeWeatherToolDrvier'" in tests.stdout


def test_check_flags_a_pyproject_version_its_manifest_does_not_share(tmp_path: Path) -> None:
    project = new_driver("acme-weather", tmp_path)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"', 'version = "0.2.0"'))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-m", "mcs_host", "check", str(project)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "ERROR version-skew: pyproject.toml says version 0.2.0, its meta (mcs-driver.json) "
        "says 0.1.0" in done.stdout
    )
    assert "mcs-host bump VERSION" in done.stdout


def test_new_refuses_a_bad_name_and_an_existing_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'9lives' is not a distribution name"):
        new_driver("9lives", tmp_path)
    new_driver("acme", tmp_path)
    with pytest.raises(FileExistsError, match="acme exists"):
        new_driver("acme", tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "mcs_host", "new", "acme", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "acme exists" in done.stderr
