"""What the registry keeps of a release's PEP 740 provenance, and what it then refuses.

Recording a verified provenance puts the publisher its certificate proves on the release's
entry, a summary on the pin (the provenance's sha256, Rekor log index and time, ref, commit,
the trusted root's sha256, the attested file's name and sha256) and the provenance itself
beside the registry file. From then on the host refuses a release attested by another
publisher (``publisher-changed``, naming both, until the user accepts the new one: a transfer
keeps the repository's number, and the message says so) and a release without provenance
(``provenance-missing``: a downgrade), when pinning and when verifying, from any registry it
merges. ``verify --provenance`` verifies every stored provenance again, offline, and names a
stored file that changed or is missing.

The provenance files are real (tests/data/provenance): pypi-attestations 0.0.30's wheel with
the provenance PyPI serves for it (github:pypi/pypi-attestations:release.yml@pypi), and its
0.0.19 sdist, attested before the repository moved from trailofbits/ to pypi/. The attacks
install a distribution that writes a marker file when its code runs, and a second registry
(a shared index, a project's lock) that pins it without the provenance the user's registry
requires, or with another publisher's: no marker may be written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from distbuild import ROOT, Project, Venv, build_wheel, uv_pip
from hostrun import driver_project
from jsonschema import Draft202012Validator
from scenes import MarkedScene, Scene

from mcs_host._files import WriteRefusedError
from mcs_host.trust.attested import (
    attest,
    provenance_file,
    record_provenance,
    refuse_unattested,
    store_provenance,
)
from mcs_host.trust.digest import TreeDigest, scan_wheel
from mcs_host.trust.provenance import TRUSTED_ROOT, VerifiedProvenance, verify_provenance
from mcs_host.trust.publishers import PublisherIdentity
from mcs_host.trust.registry import (
    REGISTRY_FORMAT,
    LibraryEntry,
    Pin,
    Registry,
    RegistryError,
    RegistrySource,
    TrustIndex,
    load_registry,
)
from mcs_host.trust.release import lock, release_from_wheel
from mcs_host.trust.verification import release_decision

DATA = Path(__file__).resolve().parents[1] / "data" / "provenance"
WHEEL = DATA / "pypi_attestations-0.0.30-py3-none-any.whl"
WHEEL_PROVENANCE = (DATA / f"{WHEEL.name}.provenance").read_bytes()
SDIST = DATA / "pypi_attestations-0.0.19.tar.gz"
SDIST_PROVENANCE = (DATA / f"{SDIST.name}.provenance").read_bytes()
PUBLISHER = "github:pypi/pypi-attestations:release.yml@pypi"
FORMER = "github:trailofbits/pypi-attestations:release.yml"
NAME = "pypi-attestations"
DRIVER_ID = "5f0c0000-0000-4000-8000-0000000a7e57"
SCHEMAS = ROOT / "mcs_host" / "schemas"


def _wheel_verified() -> VerifiedProvenance:
    return verify_provenance(
        WHEEL, WHEEL.name, WHEEL_PROVENANCE, PublisherIdentity.parse(PUBLISHER)
    )


def _sdist_verified() -> VerifiedProvenance:
    return verify_provenance(SDIST, SDIST.name, SDIST_PROVENANCE, None)


def _pinned_wheel() -> Registry:
    """A registry that pins the 0.0.30 wheel as a library, from the wheel's bytes."""
    return lock(Registry(format=REGISTRY_FORMAT), [release_from_wheel(WHEEL)])


def _with_pin(registry: Registry, version: str, pin: Pin) -> Registry:
    entry = registry.libraries[NAME]
    releases = {**entry.releases, version: pin}
    return registry.model_copy(
        update={"libraries": {NAME: entry.model_copy(update={"releases": releases})}}
    )


def _sdist_pin() -> Pin:
    """The pin of the tree built from the 0.0.19 sdist: no wheel, so no wheel_sha256 (the
    sdist is not built here; its pin is registry data)."""
    tree = _sdist_tree()
    return Pin(digest=tree.digest, files=tree.files, bytes=tree.bytes)


def _entry_json(path: Path) -> dict[str, Any]:
    entry: dict[str, Any] = json.loads(path.read_text())["libraries"][NAME]
    return entry


# -- recording -------------------------------------------------------------------------------


def test_recording_a_provenance_puts_its_summary_on_the_pin_and_the_file_beside_the_registry(
    tmp_path: Path,
) -> None:
    path = tmp_path / "registry.json"
    recorded = record_provenance(
        _pinned_wheel(), path, NAME, "0.0.30", _wheel_verified(), WHEEL_PROVENANCE
    )
    recorded.save(path)
    entry = load_registry(RegistrySource(str(path))).libraries[NAME]
    assert entry == recorded.libraries[NAME]
    assert str(entry.publisher) == PUBLISHER
    assert entry.publisher is not None
    assert (entry.publisher.repository_id, entry.publisher.owner_id) == ("772247423", "2964877")
    pin = entry.releases["0.0.30"]
    summary = pin.provenance
    assert summary is not None
    wheel_sha256 = hashlib.sha256(WHEEL.read_bytes()).hexdigest()
    assert (summary.filename, summary.sha256, pin.wheel_sha256) == (
        WHEEL.name,
        wheel_sha256,
        wheel_sha256,
    )
    assert summary.provenance_sha256 == hashlib.sha256(WHEEL_PROVENANCE).hexdigest()
    assert (summary.log_index, summary.integrated_time) == (2272775063, 1785247712)
    assert (summary.ref, summary.commit) == (
        "refs/tags/v0.0.30",
        "845bfac2f2912912fb2d1ab96775ac75708279c4",
    )
    assert summary.trusted_root_sha256 == hashlib.sha256(TRUSTED_ROOT.read_bytes()).hexdigest()
    assert str(summary.publisher) == PUBLISHER
    stored = tmp_path / "registry.provenance" / f"{WHEEL.name}.provenance"
    assert stored.read_bytes() == WHEEL_PROVENANCE
    assert provenance_file(path, WHEEL.name) == stored
    digest = scan_wheel(str(WHEEL)).digest
    assert digest is not None
    decided = release_decision(entry, NAME, "0.0.30", digest)
    assert decided == ("pinned", "pinned", f"matches the pin for 0.0.30, attested by {PUBLISHER}")


def test_a_registry_without_publishers_stays_valid_and_is_written_as_before(
    tmp_path: Path,
) -> None:
    registry = _pinned_wheel()
    assert "publisher" not in registry.dump()
    assert "provenance" not in registry.dump()
    path = tmp_path / "registry.json"
    registry.save(path)
    assert load_registry(RegistrySource(str(path))) == registry


def test_the_transfer_is_refused_as_publisher_changed_naming_both_until_it_is_accepted() -> None:
    registry = _with_pin(_pinned_wheel(), "0.0.19", _sdist_pin())
    registry = attest(registry, NAME, "0.0.19", _sdist_verified(), SDIST_PROVENANCE)
    assert str(registry.libraries[NAME].publisher) == FORMER
    with pytest.raises(RegistryError) as refused:
        attest(registry, NAME, "0.0.30", _wheel_verified(), WHEEL_PROVENANCE)
    assert refused.value.reason == "publisher-changed"
    message = str(refused.value)
    assert message.startswith(f"{NAME} 0.0.30: ")
    assert PUBLISHER in message
    assert FORMER in message
    # the repository kept its number through the transfer: the message says what that means
    assert "number is the same (772247423)" in message
    assert "transferred" in message
    # accepting another identity than the one proven accepts nothing
    elsewhere = PublisherIdentity.parse("github:pypi/other-project")
    with pytest.raises(RegistryError, match="is not it either") as wrong:
        attest(registry, NAME, "0.0.30", _wheel_verified(), WHEEL_PROVENANCE, accept=elsewhere)
    assert wrong.value.reason == "publisher-changed"
    accepted = attest(
        registry,
        NAME,
        "0.0.30",
        _wheel_verified(),
        WHEEL_PROVENANCE,
        accept=PublisherIdentity.parse("github:pypi/pypi-attestations"),
    )
    entry = accepted.libraries[NAME]
    assert str(entry.publisher) == PUBLISHER
    assert [(str(f), f.until) for f in entry.former_publishers] == [(FORMER, "0.0.30")]
    # both releases still verify: each by the publisher that attested it
    for version, pin in entry.releases.items():
        assert pin.provenance is not None
        assert entry.publisher_problem(version, pin.provenance.publisher) is None, version


def test_a_former_publisher_attests_only_the_releases_before_the_change() -> None:
    registry = _with_pin(_pinned_wheel(), "0.0.19", _sdist_pin())
    registry = attest(registry, NAME, "0.0.19", _sdist_verified(), SDIST_PROVENANCE)
    accept = PublisherIdentity.parse(PUBLISHER)
    registry = attest(registry, NAME, "0.0.30", _wheel_verified(), WHEEL_PROVENANCE, accept=accept)
    old = registry.libraries[NAME].releases["0.0.19"]
    assert old.provenance is not None
    # a later release claiming the old repository's attestation (hand-written into a registry)
    claimed = old.provenance.model_copy(update={"filename": "pypi_attestations-0.0.31.tar.gz"})
    registry = _with_pin(
        registry, "0.0.31", _sdist_pin().model_copy(update={"provenance": claimed})
    )
    entry = Registry.model_validate(registry.model_dump()).libraries[NAME]
    decided = release_decision(entry, NAME, "0.0.31", _sdist_tree())
    assert decided is not None
    assert decided[:2] == ("rejected", "publisher-changed")
    assert FORMER in decided[2]
    assert PUBLISHER in decided[2]
    assert release_decision(entry, NAME, "0.0.19", _sdist_tree()) == (
        "pinned",
        "pinned",
        f"matches the pin for 0.0.19, attested by {FORMER}",
    )


def _sdist_tree() -> TreeDigest:
    """The installed tree :func:`_sdist_pin` pins (the wheel's, standing in for it)."""
    digest = scan_wheel(str(WHEEL)).digest
    assert digest is not None
    return digest


def test_a_provenance_of_another_file_than_the_pin_is_refused() -> None:
    registry = _with_pin(_pinned_wheel(), "0.0.19", _sdist_pin())
    with pytest.raises(ValueError, match="a file of another distribution or version"):
        attest(registry, NAME, "0.0.30", _sdist_verified(), SDIST_PROVENANCE)
    installed = _pinned_wheel()
    pin = installed.libraries[NAME].releases["0.0.30"].model_copy(update={"wheel_sha256": None})
    from_installed = _with_pin(installed, "0.0.30", pin)
    with pytest.raises(ValueError, match="pin it from the wheel its provenance attests"):
        attest(from_installed, NAME, "0.0.30", _wheel_verified(), WHEEL_PROVENANCE)
    empty = Registry(format=REGISTRY_FORMAT, libraries={NAME: LibraryEntry()})
    with pytest.raises(ValueError, match="not pinned in the registry"):
        attest(empty, NAME, "0.0.30", _wheel_verified(), WHEEL_PROVENANCE)
    with pytest.raises(ValueError, match="not the one verified"):
        attest(_pinned_wheel(), NAME, "0.0.30", _wheel_verified(), WHEEL_PROVENANCE + b" ")


def test_a_release_pinned_without_provenance_after_attested_ones_is_refused() -> None:
    before = attest(_pinned_wheel(), NAME, "0.0.30", _wheel_verified(), WHEEL_PROVENANCE)
    after = _with_pin(before, "0.0.31", _sdist_pin())
    with pytest.raises(RegistryError) as refused:
        refuse_unattested(before, after)
    assert refused.value.reason == "provenance-missing"
    assert f"{NAME} 0.0.31 was not pinned" in str(refused.value)
    assert PUBLISHER in str(refused.value)
    refuse_unattested(before, before)  # what was there before is not judged again


def test_a_stored_provenance_cannot_be_named_out_of_its_directory(tmp_path: Path) -> None:
    recorded = attest(_pinned_wheel(), NAME, "0.0.30", _wheel_verified(), WHEEL_PROVENANCE)
    document = json.loads(recorded.dump())
    summary = document["libraries"][NAME]["releases"]["0.0.30"]["provenance"]
    summary["filename"] = "../../pypi_attestations-0.0.30-py3-none-any.whl"
    path = tmp_path / "registry.json"
    path.write_text(json.dumps(document))
    with pytest.raises(RegistryError) as refused:
        load_registry(RegistrySource(str(path)))
    assert refused.value.reason == "invalid"
    assert "is not a wheel's or source distribution's file name" in str(refused.value)
    with pytest.raises(ValueError, match="file name"):
        provenance_file(path, "../x.whl")
    # a directory that is a symbolic link is not written through
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "registry.provenance").symlink_to(elsewhere)
    with pytest.raises(WriteRefusedError, match="symbolic link"):
        store_provenance(path, WHEEL.name, WHEEL_PROVENANCE)
    assert list(elsewhere.iterdir()) == []


def test_merged_registries_keep_one_publisher_and_its_rules() -> None:
    attested = attest(_pinned_wheel(), NAME, "0.0.30", _wheel_verified(), WHEEL_PROVENANCE)
    theirs = Registry(format=REGISTRY_FORMAT, libraries={NAME: LibraryEntry()})
    unattested = _with_pin(theirs, "0.0.31", _sdist_pin())
    index = TrustIndex.merge([("mine.json", attested), ("theirs.json", unattested)])
    entry = index.libraries[NAME]
    assert str(entry.publisher) == PUBLISHER
    decided = release_decision(entry, NAME, "0.0.31", _sdist_tree())
    assert decided is not None
    assert decided[:2] == ("rejected", "provenance-missing")
    # the other order: the publisher comes from whichever registry records one
    index = TrustIndex.merge([("theirs.json", unattested), ("mine.json", attested)])
    assert str(index.libraries[NAME].publisher) == PUBLISHER
    # two registries that record different publishers disagree about the entry
    mine = attested.libraries[NAME]
    assert mine.publisher is not None
    another = mine.publisher.model_copy(update={"repository_id": "1"})
    conflicting = attested.model_copy(
        update={"libraries": {NAME: mine.model_copy(update={"publisher": another})}}
    )
    index = TrustIndex.merge([("mine.json", attested), ("theirs.json", conflicting)])
    assert "records the publisher" in " ".join(index.conflicts[NAME])


# -- the command line: lock, verify --provenance -------------------------------------------


def _host(tmp_path: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """``mcs-host ARGS`` of this checkout (with the attest extra), with a HOME and state of
    its own and every proxy a port no one listens on: nothing is fetched."""
    (tmp_path / "home").mkdir(exist_ok=True)
    closed = "http://127.0.0.1:9"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("XDG_", "MCS_HOST_"))
        and key.lower() not in ("http_proxy", "https_proxy")
    }
    env.update(HOME=str(tmp_path / "home"), MCS_HOST_STATE_DIR=str(tmp_path / "state"))
    env.update(HTTP_PROXY=closed, HTTPS_PROXY=closed, http_proxy=closed, https_proxy=closed)
    return subprocess.run(
        [Path(sys.executable).with_name("mcs-host"), *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )


def _schema_errors(command: str, document: dict[str, Any]) -> list[str]:
    """What the published schema of ``command``'s document says is wrong with ``document``."""
    schema = json.loads((SCHEMAS / f"cli-{command}.schema.json").read_text())
    return [error.message for error in Draft202012Validator(schema).iter_errors(document)]


def _recorded(path: Path) -> Path:
    """``path``, a registry that pins the 0.0.30 wheel with its provenance."""
    registry = _pinned_wheel()
    record_provenance(registry, path, NAME, "0.0.30", _wheel_verified(), WHEEL_PROVENANCE).save(
        path
    )
    return path


def test_verify_provenance_checks_each_stored_provenance_again_and_names_what_changed(
    tmp_path: Path,
) -> None:
    registry = _recorded(tmp_path / "registry.json")
    stored = provenance_file(registry, WHEEL.name)
    empty = tmp_path / "no-drivers"
    empty.mkdir()
    verify = ("verify", "--provenance", "--registry", registry, "--path", empty)
    done = _host(tmp_path, *verify)
    assert done.returncode == 0, done.stdout + done.stderr
    row = f"{NAME} 0.0.30 {WHEEL.name} {PUBLISHER} verified"
    assert row in [" ".join(line.split()) for line in done.stdout.splitlines()]
    assert "1 of 1 stored provenances verified again." in done.stdout
    document = json.loads(_host(tmp_path, *verify, "--json").stdout)
    assert _schema_errors("verify", document) == []
    assert document["ok"] is True
    assert document["provenance"] == [
        {
            "distribution": NAME,
            "version": "0.0.30",
            "filename": WHEEL.name,
            "publisher": PUBLISHER,
            "path": str(stored),
            "ok": True,
            "problem": None,
            "message": f"attested by {PUBLISHER} (Rekor log index 2272775063)",
            "fix": None,
        }
    ]

    def refused(problem: str) -> str:
        done = _host(tmp_path, *verify)
        assert done.returncode == 1, done.stdout + done.stderr
        document = json.loads(_host(tmp_path, *verify, "--json").stdout)
        (checked,) = document["provenance"]
        assert (document["ok"], checked["ok"], checked["problem"]) == (False, False, problem)
        assert f"{NAME} 0.0.30: {problem}: {checked['message']}" in done.stdout
        assert f"  fix: {checked['fix']}" in done.stdout
        return str(checked["message"])

    changed = bytearray(WHEEL_PROVENANCE)
    changed[len(changed) // 2] ^= 1
    stored.write_bytes(bytes(changed))
    assert refused("stored-changed").startswith(f"{stored}: its sha256 is ")
    stored.unlink()
    assert str(stored) in refused("stored-missing")
    stored.write_bytes(WHEEL_PROVENANCE)
    # the registry edited to say the provenance attests other bytes, or was logged elsewhere
    document = json.loads(registry.read_text())
    pin = document["libraries"][NAME]["releases"]["0.0.30"]
    pin["wheel_sha256"] = pin["provenance"]["sha256"] = "0" * 64
    registry.write_text(json.dumps(document))
    assert WHEEL.name in refused("sha256-mismatch")
    pin["wheel_sha256"] = pin["provenance"]["sha256"] = hashlib.sha256(
        WHEEL.read_bytes()
    ).hexdigest()
    pin["provenance"]["log_index"] = 1
    registry.write_text(json.dumps(document))
    assert "log index 2272775063 where the pin records 1" in refused("summary-mismatch")


def test_lock_keeps_an_attested_pin_and_refuses_a_release_without_provenance(
    tmp_path: Path,
) -> None:
    registry = _recorded(tmp_path / "registry.json")
    done = _host(tmp_path, "lock", "--wheel", WHEEL, "--registry", registry)
    assert done.returncode == 0, done.stderr
    assert f"pinned {NAME} 0.0.30: sha256:" in done.stdout
    assert done.stdout.splitlines()[0].endswith(f"bytes), attested by {PUBLISHER}")
    pin = _entry_json(registry)["releases"]["0.0.30"]
    assert pin["provenance"]["log_index"] == 2272775063
    document = json.loads(
        _host(tmp_path, "lock", "--wheel", WHEEL, "--registry", registry, "--json").stdout
    )
    assert _schema_errors("lock", document) == []
    assert [p["provenance"] for p in document["pinned"]] == [PUBLISHER]
    later = build_wheel(Project(NAME, "0.0.31").write(tmp_path / "src"), tmp_path / "wheels")
    before = registry.read_bytes()
    done = _host(tmp_path, "lock", "--wheel", later, "--registry", registry)
    assert done.returncode == 2, done.stdout
    assert f"{NAME} 0.0.31 was not pinned: it has no provenance" in done.stderr
    assert PUBLISHER in done.stderr
    assert "downgrade" in done.stderr
    assert registry.read_bytes() == before


# -- in a venv: what verify and load make of it ---------------------------------------------

FORGED = """\
open({marker!r}, "a").write("pypi-attestations 0.0.31 ran\\n")
"""


@dataclass(frozen=True)
class AttestedScene(MarkedScene):
    """The attack venv (``venv``: its code writes ``marker`` when it runs), the scene of the
    ``real`` venv beside it, and the wheels of the ``forged`` release and the ``driver``."""

    real: Scene
    forged: Path
    driver: Path


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> AttestedScene:
    """Two venvs with mcs-host (without the attest extra). ``real``: the real
    pypi-attestations 0.0.30 wheel installed without its dependencies. ``attack`` (the
    scene's own venv): a pypi-attestations 0.0.31 no one attested, whose import writes the
    marker, and the driver acme-attested, which imports it (and writes the marker too when it
    runs)."""
    root = tmp_path_factory.mktemp("attested")
    marker = root / "ran.txt"
    real = Venv.create(root / "real")
    real.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    uv_pip("install", "--no-index", "--no-deps", str(WHEEL), python=real.python)
    attack = Venv.create(root / "attack")
    attack.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    forged = Project(
        NAME, "0.0.31", files={"pypi_attestations/__init__.py": FORGED.format(marker=str(marker))}
    )
    driver = driver_project("acme-attested", marker, DRIVER_ID)
    source = driver.files["acme_attested/__init__.py"] + "\nimport pypi_attestations\n"
    driver = dataclasses.replace(
        driver,
        files={**driver.files, "acme_attested/__init__.py": source},
        dependencies=["mcs-host", NAME],
    )
    wheels = [build_wheel(p.write(root / "src"), root / "wheels") for p in (forged, driver)]
    uv_pip("install", "--no-index", "--no-deps", *map(str, wheels), python=attack.python)
    return AttestedScene(
        root, attack, marker, real=Scene(root, real), forged=wheels[0], driver=wheels[1]
    )


def _run(scene: Scene, home: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """``mcs-host ARGS`` in the scene's venv with ``home`` (made if need be) as HOME."""
    home.mkdir(exist_ok=True)
    return scene.host(*args, home=home)


@pytest.mark.venv
def test_verify_refuses_an_installed_release_whose_pin_lost_its_provenance(
    scene: AttestedScene, tmp_path: Path
) -> None:
    # the wheel's module, declared a driver by the registry: its pin is verified as a driver's
    declared = lock(
        Registry(format=REGISTRY_FORMAT),
        [release_from_wheel(WHEEL)],
        declared={"attest": "pypi_attestations:Attestation"},
        ids={"attest": DRIVER_ID},
    )
    path = tmp_path / "registry.json"
    verified, provenance = _wheel_verified(), WHEEL_PROVENANCE
    record_provenance(declared, path, DRIVER_ID, "0.0.30", verified, provenance).save(path)
    home = tmp_path / "home"

    def verified_as() -> dict[str, Any]:
        done = _run(scene.real, home, "verify", "attest", "--registry", path, "--json")
        (driver,) = json.loads(done.stdout)["drivers"]
        return {k: driver[k] for k in ("verification", "reason", "message", "fix", "provenance")}

    assert verified_as() == {
        "verification": "pinned",
        "reason": "pinned",
        "message": f"matches the pin for 0.0.30, attested by {PUBLISHER}",
        "fix": None,
        "provenance": PUBLISHER,
    }
    text = _run(scene.real, home, "verify", "attest", "--registry", path).stdout
    assert any(
        line.split()[:1] == ["attest"] and line.endswith(PUBLISHER) for line in text.splitlines()
    )
    document = json.loads(path.read_text())
    release = document["drivers"][DRIVER_ID]["releases"]["0.0.30"]
    summary = release.pop("provenance")
    path.write_text(json.dumps(document))
    refused = verified_as()
    assert (refused["verification"], refused["reason"], refused["provenance"]) == (
        "rejected",
        "provenance-missing",
        None,
    )
    assert PUBLISHER in refused["message"]
    assert "downgrade" in refused["message"]
    assert f"`mcs-host verify --provenance --registry {path}`" in refused["fix"]  # as run
    # a summary naming another repository than the entry's publisher
    release["provenance"] = {
        **summary,
        "publisher": {**summary["publisher"], "repository": "attacker/pypi-attestations"},
    }
    path.write_text(json.dumps(document))
    refused = verified_as()
    assert (refused["verification"], refused["reason"]) == ("rejected", "publisher-changed")
    assert "github:attacker/pypi-attestations:release.yml@pypi" in refused["message"]
    assert PUBLISHER in refused["message"]


@pytest.mark.venv
def test_verify_provenance_without_the_attest_extra_says_how_to_install_it(
    scene: AttestedScene, tmp_path: Path
) -> None:
    path = _recorded(tmp_path / "registry.json")
    done = _run(scene.real, tmp_path / "home", "verify", "--provenance", "--registry", path)
    assert done.returncode == 1
    assert f"{NAME} 0.0.30: extra-missing: " in done.stdout
    hint = "from mcs_host._install_hint import extra_command; print(extra_command('attest'))"
    install = scene.real.venv.run("python", "-c", hint).stdout.strip()  # from where it came
    assert install.endswith("[attest]'")
    assert f"  fix: {install}" in done.stdout


def _user_registry(scene: AttestedScene, path: Path, *, attested: bool) -> Path:
    """The user's registry: the driver acme-attested pinned, and pypi-attestations 0.0.30
    pinned from its wheel, with its provenance when ``attested``."""
    registry = lock(_pinned_wheel(), [release_from_wheel(scene.driver)])
    if attested:
        registry = record_provenance(
            registry, path, NAME, "0.0.30", _wheel_verified(), WHEEL_PROVENANCE
        )
    registry.save(path)
    return path


@pytest.mark.venv
def test_a_second_registry_cannot_admit_an_unattested_release_of_an_attested_library(
    scene: AttestedScene, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    theirs = tmp_path / "theirs.json"
    lock(Registry(format=REGISTRY_FORMAT), [release_from_wheel(scene.forged)]).save(theirs)
    # without a publisher on record, the second registry's pin admits the release: the
    # scene can run the code (the control)
    plain = _user_registry(scene, tmp_path / "plain.json", attested=False)
    done = _run(scene, home, "load", "--registry", plain, "--registry", theirs)
    assert done.returncode == 0, done.stderr
    assert sorted(scene.ran()) == ["acme-attested ran", "pypi-attestations 0.0.31 ran"]
    mine = _user_registry(scene, tmp_path / "mine.json", attested=True)
    done = _run(scene, home, "load", "--registry", mine, "--registry", theirs)
    assert done.returncode == 1
    assert "provenance-missing" in done.stdout + done.stderr
    assert PUBLISHER in done.stdout + done.stderr
    assert scene.ran() == []
    # nor may it claim another publisher's provenance for it
    forged = json.loads(theirs.read_text())
    release = forged["libraries"][NAME]["releases"]["0.0.31"]
    release["provenance"] = {
        **_entry_json(mine)["releases"]["0.0.30"]["provenance"],
        "filename": "pypi_attestations-0.0.31.tar.gz",
        "publisher": {"forge": "github", "repository": "attacker/pypi-attestations"},
    }
    claimed = tmp_path / "claimed.json"
    claimed.write_text(json.dumps(forged))
    done = _run(scene, home, "load", "--registry", mine, "--registry", claimed)
    assert done.returncode == 1
    assert "publisher-changed" in done.stdout + done.stderr
    assert "github:attacker/pypi-attestations" in done.stdout + done.stderr
    assert scene.ran() == []


@pytest.mark.venv
def test_lock_will_not_pin_an_unattested_release_under_a_recorded_publisher(
    scene: AttestedScene, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    mine = _user_registry(scene, tmp_path / "mine.json", attested=True)
    before = mine.read_bytes()
    done = _run(scene, home, "lock", "--distribution", NAME, "--registry", mine)
    assert done.returncode == 2
    assert f"{NAME} 0.0.31 was not pinned: it has no provenance" in done.stdout + done.stderr
    assert mine.read_bytes() == before
    # pinned by hand all the same, it is refused when it would load
    document = json.loads(before)
    pin = release_from_wheel(scene.forged).pin().model_dump(mode="json", exclude_none=True)
    pin.pop("wheel_sha256")
    document["libraries"][NAME]["releases"]["0.0.31"] = pin
    mine.write_text(json.dumps(document))
    done = _run(scene, home, "load", "--registry", mine)
    assert done.returncode == 1
    assert "provenance-missing" in done.stdout + done.stderr
    assert scene.ran() == []
