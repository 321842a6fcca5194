"""Attacks on the trust pipeline, each against real wheels installed with pip into a venv.

Every fixture driver writes a marker file when its code runs; each attack asserts the refusal,
its reason, and that the marker was never written.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import shutil
import stat
from collections.abc import Callable
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

import pytest
from distbuild import PLUGINS, ROOT, Project, Venv, build_wheel, install_target, pip
from hostrun import driver_project, entry, pin, run_host, write_registry

from mcs_host.trust.digest import scan_installed, scan_wheel
from mcs_host.trust.importer import IntegrityError, VerifiedImporter
from mcs_host.trust.modules import ModuleFile
from mcs_host.trust.registry import REGISTRY_PAYLOAD_TYPE
from mcs_host.trust.signatures import Envelope, PrivateKey

pytestmark = pytest.mark.venv

VICTIM = "5f0e3c1a-0000-4000-8000-00000000a1a1"
OTHER = "5f0e3c1a-0000-4000-8000-00000000b2b2"


@pytest.fixture
def venv(tmp_path: Path, wheelhouse: Path, uv_cache: Path) -> Venv:
    """A fresh venv with mcs-host (and no driver) installed."""
    created = Venv.create(tmp_path / "venv")
    created.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    return created


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "code-ran.txt"


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


Installer = Callable[[Project], Path]


@pytest.fixture
def install(venv: Venv, tmp_path: Path, wheelhouse: Path) -> Installer:
    """Build a project's wheel and pip install it into the venv; returns the wheel."""

    def installer(project: Project) -> Path:
        wheel = build_wheel(project.write(tmp_path / "src"), tmp_path / "wheels")
        venv.install(wheel, wheelhouse=wheelhouse)
        return wheel

    return installer


def victim(marker: Path, version: str = "1.0.0") -> Project:
    return driver_project("victim-driver", marker, VICTIM, version)


def victim_registry(path: Path, **fields: Any) -> Path:
    """A registry with the victim driver's entry, ``fields`` added to it."""
    victim_entry = entry("victim-driver", "victim_driver", "victim_driver:Driver")
    return write_registry(path, {VICTIM: {**victim_entry, **fields}})


def pinned_registry(path: Path, wheel: Path, **fields: Any) -> Path:
    return victim_registry(path, releases={"1.0.0": pin(wheel)}, **fields)


def result_for(result: dict[str, Any], label: str = "victim_driver") -> dict[str, Any]:
    row: dict[str, Any] = result["drivers"][label]
    return row


def assert_refused(
    row: dict[str, Any], reason: str, marker: Path, status: str = "rejected"
) -> None:
    assert (row["status"], row["reason"]) == (status, reason), row["message"]
    assert row["allowed"] is False
    assert "imported" not in row
    assert not marker.exists(), f"driver code ran: {marker.read_text()}"


def rewrite_record_row(dist_info: Path, relative: str, site: Path) -> None:
    """Make RECORD agree with the current bytes of ``relative``, as a careful attacker would."""
    data = (site / relative).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    lines = (dist_info / "RECORD").read_text().splitlines()
    fixed = [
        f"{relative},sha256={digest},{len(data)}" if line.startswith(relative + ",") else line
        for line in lines
    ]
    (dist_info / "RECORD").write_text("\n".join(fixed) + "\n")


# -- the good paths --------------------------------------------------------------------------


def test_a_pinned_driver_verifies_imports_from_verified_bytes_and_runs(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    wheel = install(victim(marker))
    registry = pinned_registry(tmp_path / "registry.json", wheel)
    row = result_for(run_host(venv, [registry], state=state))
    assert (row["status"], row["reason"], row["allowed"]) == ("pinned", "pinned", True)
    assert row["digest"] == pin(wheel)["digest"]
    assert (row["imported"], row["meta_problem"]) == (True, None)
    assert marker.read_text() == "victim-driver ran\n"


def test_the_bundled_drivers_verify_as_pinned_in_a_fresh_venv(
    venv: Venv, wheelhouse: Path, state: Path
) -> None:
    venv.install("mcs-host-files", "mcs-host-csv", wheelhouse=wheelhouse)
    done = venv.run(
        "mcs-host",
        "verify",
        "--json",
        "--registry",
        ROOT / "registry.json",
        env={"MCS_HOST_STATE_DIR": str(state)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    drivers = {d["label"]: d for d in json.loads(done.stdout)["drivers"]}
    assert {label: d["verification"] for label, d in drivers.items()} == {
        "csv": "pinned",
        "files": "pinned",
    }
    assert {d["trust"] for d in drivers.values()} == {"verified"}
    result = run_host(venv, [ROOT / "registry.json"], state=state)
    assert {
        label: (d["imported"], d["meta_problem"]) for label, d in result["drivers"].items()
    } == {
        "csv": (True, None),
        "files": (True, None),
    }


def test_registry_json_pins_the_bundled_drivers_as_built_from_this_checkout(
    wheelhouse: Path,
) -> None:
    registry = json.loads((ROOT / "registry.json").read_text())
    pinned = {e["distribution"]: e["releases"] for e in registry["drivers"].values()}
    for plugin in sorted(p for p in PLUGINS.iterdir() if (p / "pyproject.toml").is_file()):
        (wheel,) = wheelhouse.glob(f"{plugin.name.replace('-', '_')}-*.whl")
        version = wheel.name.split("-")[1]
        assert pinned[plugin.name][version]["digest"] == pin(wheel)["digest"], (
            f"registry.json is stale for {plugin.name}: run python scripts/lock_bundled.py"
        )


def test_a_wheel_signed_with_mcs_host_sign_installs_and_verifies_as_signed(
    venv: Venv, marker: Path, state: Path, tmp_path: Path, wheelhouse: Path
) -> None:
    key_file = tmp_path / "publisher.key"
    made = venv.run("mcs-host", "keygen", key_file)
    assert made.returncode == 0, made.stderr
    public = made.stdout.split("public key:")[1].split()[0]
    assert key_file.stat().st_mode & 0o777 == 0o600
    wheel = build_wheel(victim(marker).write(tmp_path / "src"), tmp_path / "wheels")
    unsigned_digest = pin(wheel)["digest"]
    signed = venv.run("mcs-host", "sign", wheel, "--key", key_file)
    assert signed.returncode == 0, signed.stderr
    assert f"signed victim-driver 1.0.0 {unsigned_digest}" in signed.stdout
    assert pin(wheel)["digest"] == unsigned_digest  # the signature file is outside the digest
    assert scan_wheel(wheel).findings == ()  # RECORD lists the signature: a valid wheel
    venv.install(wheel, wheelhouse=wheelhouse)
    registry = victim_registry(
        tmp_path / "registry.json", publisher_keys=[{"key": public, "name": "Fixture Co"}]
    )
    row = result_for(run_host(venv, [registry], state=state))
    assert (row["status"], row["reason"], row["imported"], row["meta_problem"]) == (
        "signed",
        "signed",
        True,
        None,
    )
    assert marker.read_text() == "victim-driver ran\n"


def test_the_digest_is_the_same_for_pip_pip_no_compile_and_uv_at_any_path(
    tmp_path: Path, marker: Path, wheelhouse: Path, uv_cache: Path
) -> None:
    wheel = build_wheel(victim(marker).write(tmp_path / "src"), tmp_path / "wheels")
    expected = scan_wheel(wheel)
    assert expected.findings == ()
    digests = {}
    for name, how in (("pip", ()), ("pip-no-compile", ("--no-compile",)), ("uv", None)):
        venv = Venv.create(tmp_path / f"deep/{name}/env")
        if how is None:
            venv.uv_install("--no-deps", wheel, wheelhouse=wheelhouse, cache=uv_cache)
        else:
            pip("install", "--no-deps", "--no-index", *how, str(wheel), python=venv.python)
        (dist_info,) = venv.site_packages.glob("victim_driver-1.0.0.dist-info")
        scan = scan_installed(dist_info)
        assert scan.findings == (), name
        assert scan.digest is not None
        digests[name] = scan.digest.digest
    compiled = list((tmp_path / "deep/pip/env").rglob("victim_driver/__pycache__/*.pyc"))
    assert compiled, "pip compiled the modules, and the digest left the .pyc files out"
    assert not list((tmp_path / "deep/pip-no-compile/env").rglob("victim_driver/__pycache__"))
    (uv_installer,) = (tmp_path / "deep/uv/env").rglob("victim_driver-1.0.0.dist-info/INSTALLER")
    assert uv_installer.read_text().strip() == "uv"
    assert expected.digest is not None
    assert digests == dict.fromkeys(digests, expected.digest.digest)


# -- tampered files -----------------------------------------------------------------------------


def test_a_file_modified_after_install_is_refused_naming_it(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    registry = pinned_registry(tmp_path / "registry.json", install(victim(marker)))
    init = venv.site_packages / "victim_driver" / "__init__.py"
    init.write_text(init.read_text().replace(" ran", " RAN"))  # same size, other bytes
    row = result_for(run_host(venv, [registry], state=state))
    assert_refused(row, "file-modified", marker)
    assert row["message"] == "victim_driver/__init__.py does not match its RECORD hash"
    done = venv.run(
        "mcs-host", "verify", "--registry", registry, env={"MCS_HOST_STATE_DIR": str(state)}
    )
    assert done.returncode == 1
    assert "victim_driver: file-modified: victim_driver/__init__.py does not match" in done.stdout
    assert "0 of 1 drivers may be loaded; 0 would run only verified code." in done.stdout


def test_a_file_and_its_record_row_rewritten_together_fail_the_pin(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    registry = pinned_registry(tmp_path / "registry.json", install(victim(marker)))
    site = venv.site_packages
    init = site / "victim_driver" / "__init__.py"
    init.write_text(init.read_text() + "\nimport os  # and more\n")
    rewrite_record_row(site / "victim_driver-1.0.0.dist-info", "victim_driver/__init__.py", site)
    row = result_for(run_host(venv, [registry], state=state))
    assert_refused(row, "digest-mismatch", marker)
    assert "differs from the pinned sha256:" in row["message"]
    assert "RECORD was rewritten" in row["message"]


def test_a_stray_module_in_the_package_directory_is_refused(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    registry = pinned_registry(tmp_path / "registry.json", install(victim(marker)))
    (venv.site_packages / "victim_driver" / "helpers.py").write_text("print('planted')\n")
    row = result_for(run_host(venv, [registry], state=state))
    assert_refused(row, "file-unlisted", marker)
    assert row["message"] == "victim_driver/helpers.py is not listed in RECORD"


SINGLE_MODULE = """\
open({marker!r}, "a").write("solo ran\\n")
from mcs_host import DriverMeta, MCSToolDriver

class Driver(MCSToolDriver):
    meta = DriverMeta(id="{driver_id}", name="solo", version="1.0.0")
    def list_tools(self):
        return []
    def execute_tool(self, tool_name, arguments):
        return None
"""


def test_a_package_directory_beside_a_single_module_is_refused_as_a_shadow(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    project = Project(
        "solo-driver",
        files={"solo_driver.py": SINGLE_MODULE.format(marker=str(marker), driver_id=OTHER)},
        entry_points={"mcs.drivers": {"solo": "solo_driver:Driver"}},
        dependencies=["mcs-host"],
    )
    wheel = install(project)
    registry = write_registry(
        tmp_path / "registry.json",
        {OTHER: entry("solo-driver", "solo", "solo_driver:Driver", releases={"1.0.0": pin(wheel)})},
    )
    assert (
        result_for(run_host(venv, [registry], state=state, do_import=False), "solo")["status"]
        == "pinned"
    )
    shadow = venv.site_packages / "solo_driver"
    shadow.mkdir()
    (shadow / "__init__.py").write_text(f"open({str(marker)!r}, 'a').write('shadow ran\\n')\n")
    # the control: a plain import runs the shadow, not the listed module
    assert venv.run("python", "-c", "import solo_driver").returncode == 0
    assert marker.read_text() == "shadow ran\n"
    marker.unlink()
    row = result_for(run_host(venv, [registry], state=state), "solo")
    assert_refused(row, "file-shadowing", marker)
    assert (
        "solo_driver/ is a package directory that shadows the listed solo_driver.py"
        in row["message"]
    )


def test_a_poisoned_pyc_beside_a_verified_source_never_runs(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    registry = pinned_registry(tmp_path / "registry.json", install(victim(marker)))
    evil = f"open({str(marker)!r}, 'a').write('POISON ran\\n')"
    poison = (
        "import importlib._bootstrap_external as b, sys, pathlib\n"
        f"source = pathlib.Path({str(venv.site_packages / 'victim_driver' / '__init__.py')!r})\n"
        f"code = compile({evil!r}, str(source), 'exec')\n"
        "stat = source.stat()\n"
        "data = b._code_to_timestamp_pyc(code, int(stat.st_mtime), stat.st_size)\n"
        "pathlib.Path(b.cache_from_source(str(source))).write_bytes(data)\n"
    )
    assert venv.run("python", "-c", poison).returncode == 0
    # the control: a plain import runs the poisoned bytecode
    assert venv.run("python", "-c", "import victim_driver").returncode == 0
    assert marker.read_text() == "POISON ran\n"
    marker.unlink()
    row = result_for(run_host(venv, [registry], state=state))
    assert (row["status"], row["imported"]) == ("pinned", True)
    assert marker.read_text() == "victim-driver ran\n"  # the verified source, not the .pyc


def test_a_source_swapped_between_verification_and_import_is_not_imported(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    registry = pinned_registry(tmp_path / "registry.json", install(victim(marker)))
    init = venv.site_packages / "victim_driver" / "__init__.py"
    swap = (
        f"import pathlib; p = pathlib.Path({str(init)!r}); "
        "p.write_text(p.read_text().replace(' ran', ' RAN'))"
    )
    row = result_for(run_host(venv, [registry], state=state, before_import=[swap]))
    assert (row["status"], row["allowed"], row["imported"]) == ("pinned", True, False)
    assert f"{init} changed after verification" in row["import_error"]
    assert not marker.exists()


def test_an_editable_install_posing_as_the_pinned_release_is_refused(
    venv: Venv, marker: Path, state: Path, tmp_path: Path, wheelhouse: Path
) -> None:
    project = victim(marker)
    wheel = build_wheel(project.write(tmp_path / "release"), tmp_path / "wheels")
    registry = pinned_registry(tmp_path / "registry.json", wheel)
    source = project.write(tmp_path / "working-tree")
    pip(
        "install",
        "--no-index",
        "--find-links",
        str(wheelhouse),
        "--editable",
        str(source),
        python=venv.python,
    )
    row = result_for(run_host(venv, [registry], state=state))
    assert_refused(row, "editable-install", marker)
    assert "is an editable install of file://" in row["message"]
    locked = venv.run("mcs-host", "lock", "--registry", tmp_path / "lock.json")
    assert locked.returncode == 2
    assert "victim-driver 1.0.0 is an editable install of file://" in locked.stderr
    assert not (tmp_path / "lock.json").exists()


def test_an_extension_module_is_refused_unless_the_policy_allows_it(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    import sysconfig

    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    project = driver_project(
        "victim-driver", marker, VICTIM, files={f"victim_driver/_speedups{suffix}": "not ELF"}
    )
    registry = pinned_registry(tmp_path / "registry.json", install(project))
    refusing = {"allow_extensions": False}  # the user refuses native code
    row = result_for(run_host(venv, [registry], state=state, policy=refusing))
    assert_refused(row, "extension-module", marker)
    assert f"victim_driver/_speedups{suffix}" in row["message"]
    allowed = result_for(run_host(venv, [registry], state=state))  # verified bytes: the default
    assert (allowed["status"], allowed["imported"]) == ("pinned", True)


# -- identity and versions ----------------------------------------------------------------------


def test_a_typosquat_claiming_a_trusted_driver_id_is_refused(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    genuine = build_wheel(victim(marker).write(tmp_path / "genuine"), tmp_path / "genuine-wheels")
    registry = pinned_registry(tmp_path / "registry.json", genuine)
    install(driver_project("victim-drivers", marker, VICTIM, label="victim_driver"))
    row = result_for(run_host(venv, [registry], state=state))
    assert_refused(row, "typosquat", marker)
    assert (
        row["message"]
        == f"victim-drivers claims driver id {VICTIM}, which the registry gives to victim-driver"
    )


def test_the_same_distribution_twice_on_sys_path_is_refused(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    wheel = install(victim(marker))
    registry = pinned_registry(tmp_path / "registry.json", wheel)
    second = install_target(tmp_path / "second", [wheel])
    row = result_for(run_host(venv, [registry], state=state, env={"PYTHONPATH": str(second)}))
    assert_refused(row, "duplicate-distribution", marker)
    assert "victim-driver is installed 2 times on the search path" in row["message"]


def test_an_entry_point_into_another_distributions_module_is_refused(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    genuine = install(victim(marker))
    borrower = install(
        driver_project(
            "borrower-driver", marker, OTHER, label="borrowed", entry_point="victim_driver:Driver"
        )
    )
    registry = write_registry(
        tmp_path / "registry.json",
        {
            VICTIM: entry(
                "victim-driver",
                "victim_driver",
                "victim_driver:Driver",
                releases={"1.0.0": pin(genuine)},
            ),
            OTHER: entry(
                "borrower-driver",
                "borrowed",
                "victim_driver:Driver",
                releases={"1.0.0": pin(borrower)},
            ),
        },
    )
    row = result_for(run_host(venv, [registry], state=state, labels=["borrowed"]), "borrowed")
    assert_refused(row, "foreign-module", marker)
    assert "module 'victim_driver' is not part of the distribution" in row["message"]


def test_a_downgrade_below_the_minimum_version_is_refused(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    registry = pinned_registry(
        tmp_path / "registry.json", install(victim(marker)), minimum_version="1.1.0"
    )
    row = result_for(run_host(venv, [registry], state=state))
    assert_refused(row, "below-minimum", marker)
    assert row["message"] == "victim-driver 1.0.0 is below the minimum version 1.1.0"


def test_a_revoked_release_is_refused_even_when_pinned(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    registry = pinned_registry(
        tmp_path / "registry.json",
        install(victim(marker)),
        revoked={"1.0.0": "sends file contents to a third party"},
    )
    row = result_for(run_host(venv, [registry], state=state, policy={"allow_unverified": True}))
    assert_refused(row, "revoked", marker, status="revoked")
    assert row["message"] == "victim-driver 1.0.0 is revoked: sends file contents to a third party"


def test_a_runtime_meta_that_disagrees_with_the_manifest_is_reported(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    project = victim(marker)
    init = project.files["victim_driver/__init__.py"].replace(
        'meta = manifest_meta(__package__, "Driver")',
        'meta = manifest_meta(__package__, "Driver").model_copy(update={"version": "9.9.9"})',
    )
    lying = Project(
        project.name,
        project.version,
        {**project.files, "victim_driver/__init__.py": init},
        project.entry_points,
        project.dependencies,
    )
    registry = pinned_registry(tmp_path / "registry.json", install(lying))
    row = result_for(run_host(venv, [registry], state=state))
    assert row["meta_problem"] == (
        "driver 'victim_driver' has runtime meta version '9.9.9', its manifest says '1.0.0'"
    )


# -- signatures ---------------------------------------------------------------------------------


def test_a_wheel_signed_by_a_key_the_registry_does_not_trust_is_refused(
    venv: Venv, marker: Path, state: Path, tmp_path: Path, wheelhouse: Path
) -> None:
    trusted, attacker = PrivateKey.generate(), PrivateKey.generate()
    (tmp_path / "keys").mkdir()
    attacker.save(tmp_path / "keys" / "attacker.key")
    wheel = build_wheel(victim(marker).write(tmp_path / "src"), tmp_path / "wheels")
    done = venv.run("mcs-host", "sign", wheel, "--key", tmp_path / "keys" / "attacker.key")
    assert done.returncode == 0, done.stderr
    venv.install(wheel, wheelhouse=wheelhouse)
    registry = victim_registry(
        tmp_path / "registry.json", publisher_keys=[{"key": str(trusted.public_key)}]
    )
    row = result_for(run_host(venv, [registry], state=state))
    assert_refused(row, "untrusted-key", marker)
    assert (
        f"signed by {attacker.public_key.keyid[:16]}, not by a key the registry trusts"
        in row["message"]
    )


def test_lock_trusts_a_publisher_key_only_for_a_release_that_key_signed(
    venv: Venv, marker: Path, state: Path, tmp_path: Path, wheelhouse: Path
) -> None:
    keys: dict[str, tuple[str, str]] = {}  # name -> (public key, key id)
    for name in ("k1", "k2"):
        made = venv.run("mcs-host", "keygen", tmp_path / "keys" / f"{name}.key")
        assert made.returncode == 0, made.stderr
        keys[name] = (made.stdout.split("public key:")[1].split()[0], made.stdout.split()[-1])
    wheel = build_wheel(victim(marker).write(tmp_path / "src"), tmp_path / "wheels")
    signed = venv.run("mcs-host", "sign", wheel, "--key", tmp_path / "keys" / "k1.key")
    assert signed.returncode == 0, signed.stderr
    venv.install(wheel, wheelhouse=wheelhouse)
    registry = tmp_path / "registry.json"
    env = {"MCS_HOST_STATE_DIR": str(state)}

    def lock(key: str) -> tuple[int, str, str]:
        done = venv.run(
            "mcs-host", "lock", "victim_driver", "--registry", registry, "--publisher-key", key,
            env=env,
        )  # fmt: skip
        return done.returncode, done.stdout, done.stderr

    # the user was handed K2 as the publisher's key: the release K1 signed is not trusted
    code, _, err = lock(keys["k2"][0])
    assert code == 2
    assert (
        f"victim-driver 1.0.0 is signed by {keys['k1'][1]}, not by the key you gave "
        f"({keys['k2'][1]}); nothing was written" in err
    )
    assert not registry.exists()
    assert_refused(result_for(run_host(venv, [registry], state=state)), "not-in-registry", marker,
                   status="unverified")  # fmt: skip
    # the key that signed it: trusted by its signature, no pin, and it verifies as signed
    code, out, err = lock(keys["k1"][0])
    assert code == 0, err
    assert out.startswith("trusted victim-driver 1.0.0: sha256:")
    assert f"signed by {keys['k1'][1]} (no pin)" in out
    (written,) = json.loads(registry.read_text())["drivers"].values()
    assert ("releases" not in written, written["publisher_keys"][0]["key"]) == (True, keys["k1"][0])
    verified = venv.run("mcs-host", "verify", "victim_driver", "--registry", registry, env=env)
    assert verified.returncode == 0, verified.stdout
    assert f"victim_driver: signed: signed by {keys['k1'][1][:16]}" in verified.stdout
    row = result_for(run_host(venv, [registry], state=state))
    assert (row["status"], row["imported"]) == ("signed", True)
    # a release nobody signed is not trusted by a key either
    before = registry.read_text()
    unsigned = build_wheel(victim(marker, "1.0.1").write(tmp_path / "src"), tmp_path / "next")
    venv.install(unsigned, wheelhouse=wheelhouse)
    code, _, err = lock(keys["k1"][0])
    assert code == 2
    assert "victim-driver 1.0.1 carries no publisher signature, so the key you gave" in err
    assert registry.read_text() == before


def test_an_unverified_driver_is_refused_unless_allowed_then_warned(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    install(victim(marker))
    registry = write_registry(tmp_path / "registry.json", {})
    row = result_for(run_host(venv, [registry], state=state))
    assert_refused(row, "not-in-registry", marker, status="unverified")
    allowed = result_for(run_host(venv, [registry], state=state, policy={"allow_unverified": True}))
    assert (allowed["status"], allowed["allowed"], allowed["imported"]) == (
        "unverified",
        True,
        True,
    )
    assert "UNVERIFIED and allowed by policy" in allowed["warnings"][0]
    done = venv.run(
        "mcs-host",
        "verify",
        "--registry",
        registry,
        "--allow-unverified",
        env={"MCS_HOST_STATE_DIR": str(state)},
    )
    # it may be loaded, but load would run unverified code: verify never says all is well
    assert done.returncode == 1, done.stdout
    assert "victim_driver: WARNING: driver 'victim_driver' is UNVERIFIED" in done.stdout
    assert "victim_driver: UNVERIFIED CODE would run: the driver itself" in done.stdout
    assert "1 of 1 drivers may be loaded; 0 would run only verified code." in done.stdout


# -- signed registries ----------------------------------------------------------------------------


@pytest.fixture
def signed_setup(
    venv: Venv, install: Installer, marker: Path, tmp_path: Path
) -> tuple[Callable[..., Path], list[PrivateKey]]:
    """A pinned victim, and a function that writes the registry pinning it as an envelope."""
    wheel = install(victim(marker))
    keys = [PrivateKey.generate() for _ in range(3)]
    plain = pinned_registry(tmp_path / "plain.json", wheel)

    def envelope(
        version: int,
        expires: str = "2999-01-01T00:00:00Z",
        signers: tuple[int, ...] = (0, 1),
        name: str = "index.json",
    ) -> Path:
        document = json.loads(plain.read_text())
        document.update(name="fixture-index", version=version, expires=expires)
        payload = json.dumps(document).encode()
        signed = Envelope.sign(payload, REGISTRY_PAYLOAD_TYPE, [keys[i] for i in signers])
        path = tmp_path / name
        path.write_text(json.dumps(signed.to_json()))
        return path

    return envelope, keys


def run_signed(venv: Venv, path: Path, keys: list[PrivateKey], state: Path) -> dict[str, Any]:
    return run_host(venv, [path], state=state, keys=[str(k.public_key) for k in keys], threshold=2)


def test_a_signed_registry_meeting_its_threshold_pins_the_driver(
    venv: Venv,
    signed_setup: tuple[Callable[..., Path], list[PrivateKey]],
    state: Path,
    marker: Path,
) -> None:
    envelope, keys = signed_setup
    result = run_signed(venv, envelope(3), keys, state)
    assert result["registry_errors"] == []
    assert result_for(result)["status"] == "pinned"
    assert marker.exists()


def test_a_replayed_older_registry_is_refused(
    venv: Venv,
    signed_setup: tuple[Callable[..., Path], list[PrivateKey]],
    state: Path,
    marker: Path,
) -> None:
    envelope, keys = signed_setup
    assert run_signed(venv, envelope(5, name="v5.json"), keys, state)["registry_errors"] == []
    marker.unlink()
    result = run_signed(venv, envelope(4, name="v4.json"), keys, state)
    ((reason, message),) = result["registry_errors"]
    assert reason == "rollback"
    assert "version 4 is older than version 5, which this host already accepted" in message
    assert_refused(result_for(result), "not-in-registry", marker, status="unverified")


def test_an_expired_registry_is_refused(
    venv: Venv,
    signed_setup: tuple[Callable[..., Path], list[PrivateKey]],
    state: Path,
    marker: Path,
) -> None:
    envelope, keys = signed_setup
    result = run_signed(venv, envelope(1, expires="2020-01-01T00:00:00Z"), keys, state)
    ((reason, message),) = result["registry_errors"]
    assert (reason, "expired at 2020-01-01T00:00:00+00:00" in message) == ("expired", True)
    assert_refused(result_for(result), "not-in-registry", marker, status="unverified")


@pytest.mark.parametrize(
    ("signers", "note"),
    [((0,), "1 valid from distinct trusted keys"), ((0, 0), "1 more by a key already counted")],
    ids=["one-of-two", "one-key-twice"],
)
def test_an_under_signed_registry_is_refused(
    venv: Venv,
    signed_setup: tuple[Callable[..., Path], list[PrivateKey]],
    state: Path,
    marker: Path,
    signers: tuple[int, ...],
    note: str,
) -> None:
    envelope, keys = signed_setup
    path = envelope(1, signers=signers)
    if signers == (0, 0):  # two signatures by the same key, as two entries
        document = json.loads(path.read_text())
        document["signatures"] *= 2
        path.write_text(json.dumps(document))
    result = run_signed(venv, path, keys, state)
    ((reason, message),) = result["registry_errors"]
    assert reason == "under-signed"
    assert note in message
    assert_refused(result_for(result), "not-in-registry", marker, status="unverified")


# -- lock -----------------------------------------------------------------------------------------


def test_lock_pins_installed_drivers_and_wheels_alike(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    wheel = install(victim(marker))
    from_install = tmp_path / "from-install.json"
    done = venv.run("mcs-host", "lock", "--registry", from_install, "--trust", "reference")
    assert done.returncode == 0, done.stderr
    assert f"pinned victim-driver 1.0.0: {pin(wheel)['digest']}" in done.stdout
    from_wheel = tmp_path / "from-wheel.json"
    assert venv.run("mcs-host", "lock", "--registry", from_wheel, "--wheel", wheel).returncode == 0
    installed = json.loads(from_install.read_text())["drivers"][VICTIM]
    wheeled = json.loads(from_wheel.read_text())["drivers"][VICTIM]
    assert installed["trust"] == "reference"
    assert installed["releases"]["1.0.0"]["digest"] == wheeled["releases"]["1.0.0"]["digest"]
    assert "wheel_sha256" in wheeled["releases"]["1.0.0"]
    row = result_for(run_host(venv, [from_install], state=state, do_import=False))
    assert row["status"] == "pinned"
    assert not marker.exists()  # lock never imports either


def test_a_version_pinned_with_builds_verifies_any_of_them_and_nothing_else(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    """Wheels of one version for other Pythons or platforms hold other files: ``lock --build``
    pins each beside the version's pin, only when asked; any of them verifies, other files
    of that version are still refused before they run."""
    builds = {
        name: build_wheel(
            driver_project(
                "victim-driver", marker, VICTIM, files={"victim_driver/_build.py": f"B = {name!r}"}
            ).write(tmp_path / name),
            tmp_path / name / "wheels",
        )
        for name in ("first", "second", "forged")
    }
    registry = tmp_path / "registry.json"
    assert (
        venv.run("mcs-host", "lock", "--registry", registry, "--wheel", builds["first"]).returncode
        == 0
    )
    refused = venv.run("mcs-host", "lock", "--registry", registry, "--wheel", builds["second"])
    assert refused.returncode == 2
    assert "victim-driver 1.0.0 is already pinned as sha256:" in refused.stderr
    assert "mcs-host lock --build" in refused.stderr
    added = venv.run(
        "mcs-host", "lock", "--registry", registry, "--wheel", builds["second"], "--build"
    )
    assert added.returncode == 0, added.stderr
    entry = json.loads(registry.read_text())["drivers"][VICTIM]
    assert entry["releases"]["1.0.0"]["digest"] == pin(builds["first"])["digest"]
    assert [b["digest"] for b in entry["builds"]["1.0.0"]] == [pin(builds["second"])["digest"]]
    install(driver_project(  # the second build installed: it verifies and runs
        "victim-driver", marker, VICTIM, files={"victim_driver/_build.py": "B = 'second'"}
    ))  # fmt: skip
    row = result_for(run_host(venv, [registry], state=state))
    assert (row["status"], row["reason"], row["imported"]) == ("pinned", "pinned", True)
    marker.unlink()
    venv.install(builds["forged"], "--force-reinstall", "--no-deps")
    row = result_for(run_host(venv, [registry], state=state))
    assert_refused(row, "digest-mismatch", marker)
    assert "and its 1 other build;" in row["message"]


def test_lock_without_a_registry_writes_the_one_a_load_reads(
    venv: Venv, install: Installer, marker: Path, tmp_path: Path
) -> None:
    install(victim(marker))
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "XDG_CONFIG_HOME": ""}
    before = json.loads(venv.run("mcs-host", "load", "victim_driver", "--json", env=env).stdout)
    assert [(d["status"], d["reason"]) for d in before["drivers"]] == [
        ("rejected", "not-in-registry")
    ]
    done = venv.run("mcs-host", "lock", "victim_driver", env=env)
    assert done.returncode == 0, done.stderr
    written = home / ".config" / "mcs-host" / "registry.json"
    assert str(written) in done.stdout
    assert written.parent.stat().st_mode & 0o777 == 0o700
    assert VICTIM in json.loads(written.read_text())["drivers"]
    loaded = venv.run("mcs-host", "load", "victim_driver", "--json", env=env)
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    (record,) = json.loads(loaded.stdout)["drivers"]
    assert (record["status"], record["verification"]) == ("mounted", "pinned")


def test_lock_refuses_a_typosquat_and_a_silent_repin(
    venv: Venv, install: Installer, marker: Path, tmp_path: Path
) -> None:
    genuine = build_wheel(victim(marker).write(tmp_path / "g"), tmp_path / "gw")
    registry = pinned_registry(tmp_path / "registry.json", genuine)
    squat = build_wheel(
        driver_project("victim-drivers", marker, VICTIM).write(tmp_path / "s"), tmp_path / "sw"
    )
    before = registry.read_bytes()
    done = venv.run("mcs-host", "lock", "--registry", registry, "--wheel", squat)
    assert done.returncode == 2
    assert (
        f"driver id {VICTIM} belongs to victim-driver in the registry, not to victim-drivers"
        in done.stderr
    )
    rebuilt = driver_project(
        "victim-driver", marker, VICTIM, files={"victim_driver/extra.py": "x = 1\n"}
    )
    other = build_wheel(rebuilt.write(tmp_path / "r"), tmp_path / "rw")
    done = venv.run("mcs-host", "lock", "--registry", registry, "--wheel", other)
    assert done.returncode == 2
    assert "victim-driver 1.0.0 is already pinned as sha256:" in done.stderr
    assert registry.read_bytes() == before  # a refused lock writes nothing
    registry.chmod(0o640)
    assert (
        venv.run(
            "mcs-host", "lock", "--registry", registry, "--wheel", other, "--replace"
        ).returncode
        == 0
    )
    assert (
        json.loads(registry.read_text())["drivers"][VICTIM]["releases"]["1.0.0"]["digest"]
        == pin(other)["digest"]
    )
    assert stat.S_IMODE(registry.stat().st_mode) == 0o640  # rewritten in place of the old file


def test_the_keygen_command_refuses_to_overwrite_a_key(venv: Venv, tmp_path: Path) -> None:
    key = tmp_path / "k.pem"
    assert venv.run("mcs-host", "keygen", key).returncode == 0
    before = key.read_bytes()
    again = venv.run("mcs-host", "keygen", key)
    assert again.returncode == 2
    assert "exists; refusing to overwrite a key" in again.stderr
    assert key.read_bytes() == before


def test_sign_registry_writes_an_envelope_the_host_accepts(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    registry = pinned_registry(tmp_path / "registry.json", install(victim(marker)))
    document = json.loads(registry.read_text())
    document.update(name="fixture-index", version=1, expires="2999-01-01T00:00:00Z")
    registry.write_text(json.dumps(document))
    keys = []
    for name in ("a", "b"):
        made = venv.run("mcs-host", "keygen", tmp_path / f"{name}.key")
        keys.append(made.stdout.split("public key:")[1].split()[0])
    signed = tmp_path / "signed.json"
    first = venv.run(
        "mcs-host", "sign-registry", registry, "--key", tmp_path / "a.key", "--output", signed
    )
    assert first.returncode == 0, first.stderr
    second = venv.run(
        "mcs-host", "sign-registry", signed, "--key", tmp_path / "b.key", "--output", signed
    )
    assert second.returncode == 0, second.stderr
    done = venv.run(
        "mcs-host",
        "verify",
        "--registry",
        signed,
        "--registry-key",
        keys[0],
        "--registry-key",
        keys[1],
        "--threshold",
        "2",
        env={"MCS_HOST_STATE_DIR": str(state)},
    )
    assert done.returncode == 0, done.stdout
    assert "victim_driver: pinned" in done.stdout
    keyed: list[str | Path] = [
        "--registry",
        signed,
        "--registry-key",
        keys[0],
        "--registry-key",
        keys[1],
    ]
    called = venv.run(
        "mcs-host",
        "call",
        "ping",
        *keyed,
        "--threshold",
        "2",
        env={"MCS_HOST_STATE_DIR": str(state)},
    )
    assert called.returncode == 0, called.stderr
    assert called.stdout == "pong\n"
    unkeyed = venv.run("mcs-host", "call", "ping", "--registry", signed)
    assert unkeyed.returncode == 1
    assert "is a signed registry: give the keys" in unkeyed.stderr
    shutil.rmtree(state)


def test_a_module_planted_in_a_verified_package_after_verification_never_runs(
    venv: Venv, install: Installer, marker: Path, state: Path, tmp_path: Path
) -> None:
    lazy = "try:\n    from . import speedups\nexcept ImportError:\n    speedups = None\n"
    project = driver_project(
        "victim-driver",
        marker,
        VICTIM,
        files={"victim_driver/entry.py": lazy + "from . import Driver\n"},
        entry_point="victim_driver.entry:Driver",
    )
    registry = write_registry(
        tmp_path / "registry.json",
        {
            VICTIM: entry(
                "victim-driver",
                "victim_driver",
                "victim_driver.entry:Driver",
                releases={"1.0.0": pin(install(project))},
            )
        },
    )
    planted = venv.site_packages / "victim_driver" / "speedups.py"
    code = f'open({str(marker)!r}, "a").write("PLANTED ran\\n")\n'
    plant = f"import pathlib; pathlib.Path({str(planted)!r}).write_text({code!r})"
    row = result_for(run_host(venv, [registry], state=state, before_import=[plant]))
    assert (row["status"], row["imported"]) == ("pinned", True)
    assert planted.exists()
    assert marker.read_text() == "victim-driver ran\n"  # the verified package ran, not the plant
    # the control: a plain import does run it
    assert venv.run("python", "-c", "import victim_driver.entry").returncode == 0
    assert "PLANTED ran" in marker.read_text()


def _an_extension_module() -> Path:
    """A compiled module of the standard library, to plant under another name."""
    for name in ("_json", "_struct", "math", "select", "_csv"):
        origin = getattr(importlib.import_module(name), "__file__", None)
        if origin and origin.endswith(tuple(EXTENSION_SUFFIXES)):
            return Path(origin)
    raise RuntimeError("this Python has no standard library extension module to copy")


def test_an_extension_planted_in_a_verified_package_is_refused(tmp_path: Path) -> None:
    package = tmp_path / "site" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_bytes(b"")
    empty = hashlib.sha256(b"").hexdigest()
    compiled, suffix = _an_extension_module(), EXTENSION_SUFFIXES[0]
    shutil.copy(compiled, package / f"shipped{suffix}")
    shutil.copy(compiled, package / f"planted{suffix}")  # after verification: never dlopen'ed
    shipped = (package / f"shipped{suffix}").read_bytes()
    importer = VerifiedImporter()
    importer.register(
        str(tmp_path / "site"),
        [ModuleFile("pkg", "pkg/__init__.py", empty, 0, True)],
        [
            ModuleFile(
                "pkg.shipped",
                f"pkg/shipped{suffix}",
                hashlib.sha256(shipped).hexdigest(),
                len(shipped),
                False,
            )
        ],
    )
    # the extension verified with the package is claimed, to be loaded from verified bytes
    spec = importer.find_spec("pkg.shipped", [str(package)])
    assert spec is not None
    assert type(spec.loader).__name__ == "_VerifiedExtensionLoader"
    with pytest.raises(IntegrityError, match=r"pkg\.planted \(.*\) is not among the verified"):
        importer.find_spec("pkg.planted", [str(package)])
