"""PEP 740 provenance verified offline: a distribution file is accepted only as the file that
the named publisher's workflow released, proven by the Sigstore certificate and log entry of
its attestation, never by the provenance's unsigned ``publisher`` claim; verification reaches
no network, writes nothing and does not read the clock.

The files in tests/data/provenance are real (see its README): a wheel from the index with the
provenance PyPI serves for it, an sdist signed before its repository was transferred, and a
GitLab attestation. Each attack changes one part of them and asserts the refusal names the
file and what did not match. Nothing here installs or runs a distribution: the marker-file
attack tests belong to the commands that install from a verified provenance (``add``).
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import hashlib
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import pytest

from mcs_host._install_hint import extra_command
from mcs_host.trust.provenance import (
    PROVENANCE_FIXES,
    TRUSTED_ROOT,
    ProvenanceError,
    ProvenanceReason,
    VerifiedProvenance,
    verify_provenance,
)
from mcs_host.trust.publishers import PublisherIdentity

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data" / "provenance"
WHEEL = DATA / "pypi_attestations-0.0.30-py3-none-any.whl"
WHEEL_PROVENANCE = DATA / "pypi_attestations-0.0.30-py3-none-any.whl.provenance"
TRANSFERRED = DATA / "pypi_attestations-0.0.19.tar.gz"
TRANSFERRED_PROVENANCE = DATA / "pypi_attestations-0.0.19.tar.gz.provenance"
GITLAB = DATA / "gitlab_oidc_project-0.0.3.tar.gz"
GITLAB_ATTESTATION = DATA / "gitlab_oidc_project-0.0.3.tar.gz.publish.attestation"
PUBLISHER = "github:pypi/pypi-attestations:release.yml@pypi"
ROOT_SHA256 = "6494e21ea73fa7ee769f85f57d5a3e6a08725eae1e38c755fc3517c9e6bc0b66"
EXTRA = ("sigstore", "pypi_attestations", "sigstore_models", "rekor_types", "tuf")

Attestation = dict[str, Any]


def _verify(identity: str | None, provenance: bytes | None = None) -> VerifiedProvenance:
    stated = PublisherIdentity.parse(identity) if identity is not None else None
    given = WHEEL_PROVENANCE.read_bytes() if provenance is None else provenance
    return verify_provenance(WHEEL, WHEEL.name, given, stated)


def _refused(call: Callable[..., object], *args: object) -> ProvenanceError:
    """The error ``call(*args)`` raises."""
    with pytest.raises(ProvenanceError) as refused:
        call(*args)
    return refused.value


def _changed(change: Callable[[Attestation], None]) -> bytes:
    """The wheel's provenance with ``change`` made to its one attestation."""
    document = json.loads(WHEEL_PROVENANCE.read_bytes())
    change(document["attestation_bundles"][0]["attestations"][0])
    return json.dumps(document).encode()


def _flip(text: str, at: int) -> str:
    """``text`` (base64) with one bit of its byte ``at`` flipped."""
    raw = bytearray(base64.b64decode(text))
    raw[at] ^= 1
    return base64.b64encode(bytes(raw)).decode()


def _entry(attestation: Attestation) -> dict[str, Any]:
    entry: dict[str, Any] = attestation["verification_material"]["transparency_entries"][0]
    return entry


def _python(
    code: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


# -- the right publisher, and what is proven -----------------------------------------------


def test_the_right_publisher_verifies_and_the_record_is_the_certificates_and_the_logs() -> None:
    proven = _verify(PUBLISHER)
    assert str(proven.identity) == PUBLISHER
    assert proven.filename == WHEEL.name
    assert proven.sha256 == hashlib.sha256(WHEEL.read_bytes()).hexdigest()
    assert proven.sha256.startswith("b3a9c53f")
    assert proven.ref == "refs/tags/v0.0.30"
    assert proven.commit == "845bfac2f2912912fb2d1ab96775ac75708279c4"
    assert (proven.repository_id, proven.owner_id) == ("772247423", "2964877")
    assert (proven.log_index, proven.integrated_time) == (2272775063, 1785247712)
    assert proven.provenance_sha256 == hashlib.sha256(WHEEL_PROVENANCE.read_bytes()).hexdigest()
    assert proven.trusted_root_sha256 == hashlib.sha256(TRUSTED_ROOT.read_bytes()).hexdigest()


def test_without_a_stated_publisher_the_certificates_is_returned_for_the_user_to_confirm() -> None:
    assert _verify(None) == _verify(PUBLISHER)


@pytest.mark.parametrize(
    "stated",
    [
        "github:pypi/pypi-attestations",
        "github:pypi/pypi-attestations:release.yml",
        "github:pypi/pypi-attestations@pypi",
        "github:PyPI/PyPI-Attestations:release.yml@PyPI",  # GitHub's names have no case
    ],
)
def test_a_publisher_stated_in_part_verifies_and_the_record_names_it_whole(stated: str) -> None:
    assert str(_verify(stated).identity) == PUBLISHER


def test_the_file_may_be_given_by_its_bytes_or_its_path() -> None:
    given = verify_provenance(
        WHEEL.read_bytes(),
        WHEEL.name,
        WHEEL_PROVENANCE.read_bytes(),
        PublisherIdentity.parse(PUBLISHER),
    )
    assert given == _verify(PUBLISHER)


# -- another publisher ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stated", "reason", "named"),
    [
        ("github:attacker/pypi-attestations", "repository-mismatch", "attacker/pypi-attestations"),
        ("github:pypi/pypi-attestations-fork", "repository-mismatch", "pypi-attestations-fork"),
        ("gitlab:pypi/pypi-attestations", "repository-mismatch", "gitlab:pypi/pypi-attestations"),
        ("github:pypi/pypi-attestations:publish.yml", "workflow-mismatch", "publish.yml"),
        ("github:pypi/pypi-attestations:Release.yml", "workflow-mismatch", "Release.yml"),
        ("github:pypi/pypi-attestations:release.yml@testpypi", "environment-mismatch", "testpypi"),
    ],
)
def test_another_publisher_is_refused_naming_the_file_what_differs_and_who_published(
    stated: str, reason: ProvenanceReason, named: str
) -> None:
    refused = _refused(lambda: _verify(stated))
    assert refused.reason == reason
    assert refused.filename == WHEEL.name
    message = str(refused)
    assert message.startswith(f"{WHEEL.name}: ")
    assert named in message
    assert PUBLISHER in message  # the identity the certificate proves, for the user to judge
    assert refused.fix == PROVENANCE_FIXES[reason]


def test_the_unsigned_publisher_claim_is_not_believed() -> None:
    def claim(document: dict[str, Any]) -> bytes:
        document["attestation_bundles"][0]["publisher"] = {
            "kind": "GitHub",
            "repository": "attacker/evil",
            "workflow": "evil.yml",
            "environment": "evil",
        }
        return json.dumps(document).encode()

    forged = claim(json.loads(WHEEL_PROVENANCE.read_bytes()))
    proven = _verify(None, forged)
    assert str(proven.identity) == PUBLISHER
    refused = _refused(lambda: _verify("github:attacker/evil:evil.yml@evil", forged))
    assert refused.reason == "repository-mismatch"
    assert str(_verify(PUBLISHER, forged).identity) == PUBLISHER
    # a publisher of a kind this version does not know is not read either
    document = json.loads(WHEEL_PROVENANCE.read_bytes())
    document["attestation_bundles"][0]["publisher"] = {"kind": "Elsewhere", "x": 1}
    assert str(_verify(PUBLISHER, json.dumps(document).encode()).identity) == PUBLISHER


def test_the_transferred_repository_verifies_as_its_old_name_only() -> None:
    provenance = TRANSFERRED_PROVENANCE.read_bytes()

    def verify(stated: str | None) -> VerifiedProvenance:
        identity = PublisherIdentity.parse(stated) if stated else None
        return verify_provenance(TRANSFERRED, TRANSFERRED.name, provenance, identity)

    proven = verify("github:trailofbits/pypi-attestations:release.yml")
    assert str(proven.identity) == "github:trailofbits/pypi-attestations:release.yml"
    assert proven.identity.environment is None
    assert proven.ref == "refs/tags/v0.0.19"
    # the same repository, by its number, under its owner before the transfer
    assert (proven.repository_id, proven.owner_id) == ("772247423", "2314423")
    assert verify(None) == proven
    refused = _refused(lambda: verify("github:pypi/pypi-attestations:release.yml"))
    assert refused.reason == "repository-mismatch"
    assert "trailofbits/pypi-attestations" in str(refused)
    assert "pypi/pypi-attestations" in str(refused)
    # its certificate predates the deployment environment extension: it proves none
    refused = _refused(lambda: verify("github:trailofbits/pypi-attestations@pypi"))
    assert refused.reason == "environment-mismatch"
    assert "names no environment" in str(refused)


@pytest.mark.parametrize("shape", ["attestation", "provenance object"])
def test_a_gitlab_attestation_verifies_with_a_gitlab_identity(shape: str) -> None:
    attestation = GITLAB_ATTESTATION.read_bytes()
    if shape == "provenance object":
        bundle = {"publisher": {"kind": "GitLab"}, "attestations": [json.loads(attestation)]}
        attestation = json.dumps({"version": 1, "attestation_bundles": [bundle]}).encode()

    def verify(stated: str | None) -> VerifiedProvenance:
        identity = PublisherIdentity.parse(stated) if stated else None
        return verify_provenance(GITLAB, GITLAB.name, attestation, identity)

    proven = verify("gitlab:facutuesca/gitlab-oidc-project:.gitlab-ci.yml")
    assert str(proven.identity) == "gitlab:facutuesca/gitlab-oidc-project:.gitlab-ci.yml"
    assert (proven.ref, proven.log_index) == ("refs/heads/main", 149945774)
    assert verify(None) == proven
    for stated, reason in [
        ("github:facutuesca/gitlab-oidc-project", "repository-mismatch"),
        ("gitlab:facutuesca/other-project", "repository-mismatch"),
        ("gitlab:Facutuesca/gitlab-oidc-project", "repository-mismatch"),  # GitLab: exact
        ("gitlab:facutuesca/gitlab-oidc-project:ci/release.yml", "workflow-mismatch"),
        ("gitlab:facutuesca/gitlab-oidc-project@production", "environment-mismatch"),
    ]:
        assert _refused(verify, stated).reason == reason, stated


# -- another file --------------------------------------------------------------------------


@pytest.mark.parametrize("at", [0, 1000, -1])
def test_a_changed_byte_of_the_wheel_is_refused(tmp_path: Path, at: int) -> None:
    changed = bytearray(WHEEL.read_bytes())
    changed[at] ^= 0x20
    path = tmp_path / WHEEL.name
    path.write_bytes(bytes(changed))
    stated = PublisherIdentity.parse(PUBLISHER)
    for given in (bytes(changed), path):
        refused = _refused(
            verify_provenance, given, WHEEL.name, WHEEL_PROVENANCE.read_bytes(), stated
        )
        assert refused.reason == "sha256-mismatch"
        assert str(refused).startswith(f"{WHEEL.name}: its sha256 is ")
        assert hashlib.sha256(bytes(changed)).hexdigest() in str(refused)


@pytest.mark.parametrize(
    "name",
    [
        "pypi_attestations-0.0.31-py3-none-any.whl",  # another version
        "pypi_attestations-0.0.30-cp311-cp311-manylinux_2_17_x86_64.whl",  # other tags
        "pypi_attestations-0.0.30.tar.gz",  # as the sdist
        "requests-2.32.0-py3-none-any.whl",  # another project
    ],
)
def test_the_same_bytes_under_another_file_name_are_refused(name: str) -> None:
    refused = _refused(lambda: verify_provenance(WHEEL, name, WHEEL_PROVENANCE.read_bytes(), None))
    assert refused.reason == "filename-mismatch"
    assert str(refused).startswith(f"{name}: its provenance attests {WHEEL.name!r}")


def test_a_name_that_is_no_distribution_file_is_refused() -> None:
    refused = _refused(lambda: verify_provenance(WHEEL, "wheel.zip.exe", b"{}", None))
    assert refused.reason == "filename-mismatch"


def test_an_attestation_of_another_file_cannot_ride_along() -> None:
    document = json.loads(WHEEL_PROVENANCE.read_bytes())
    other = json.loads(TRANSFERRED_PROVENANCE.read_bytes())["attestation_bundles"][0]
    document["attestation_bundles"].append(other)
    refused = _refused(lambda: _verify(PUBLISHER, json.dumps(document).encode()))
    assert refused.reason == "filename-mismatch"
    assert TRANSFERRED.name in str(refused)


# -- a forged signature, certificate or log entry ------------------------------------------


def _signature(attestation: Attestation) -> None:
    attestation["envelope"]["signature"] = _flip(attestation["envelope"]["signature"], 20)


def _certificate(attestation: Attestation) -> None:
    material = attestation["verification_material"]
    material["certificate"] = _flip(material["certificate"], 400)


def _inclusion_proof(attestation: Attestation) -> None:
    hashes = _entry(attestation)["inclusionProof"]["hashes"]
    hashes[0] = _flip(hashes[0], 3)


def _signed_entry_timestamp(attestation: Attestation) -> None:
    promise = _entry(attestation)["inclusionPromise"]
    promise["signedEntryTimestamp"] = _flip(promise["signedEntryTimestamp"], 10)


def _integrated_time(seconds: int) -> Callable[[Attestation], None]:
    def change(attestation: Attestation) -> None:
        entry = _entry(attestation)
        entry["integratedTime"] = str(int(entry["integratedTime"]) + seconds)

    return change


def _log_index(attestation: Attestation) -> None:
    _entry(attestation)["logIndex"] = str(int(_entry(attestation)["logIndex"]) - 1)


def _logged_body(attestation: Attestation) -> None:
    _entry(attestation)["canonicalizedBody"] = _flip(_entry(attestation)["canonicalizedBody"], 50)


def _statement(attestation: Attestation) -> None:
    """The signed statement made to name another file's digest."""
    statement = json.loads(base64.b64decode(attestation["envelope"]["statement"]))
    statement["subject"][0]["digest"]["sha256"] = "0" * 64
    attestation["envelope"]["statement"] = base64.b64encode(json.dumps(statement).encode()).decode()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (_signature, "signature-invalid"),
        (_statement, "signature-invalid"),
        (_certificate, "certificate-invalid"),
        (_inclusion_proof, "log-entry-invalid"),
        (_logged_body, "log-entry-invalid"),
        (_signed_entry_timestamp, "log-entry-invalid"),
        (_log_index, "log-entry-invalid"),
        (_integrated_time(60), "log-entry-invalid"),
        # moved out of the certificate's ten minutes: refused before the SET is even read
        (_integrated_time(365 * 86400), "certificate-invalid"),
        (_integrated_time(-3600), "certificate-invalid"),
    ],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_a_forged_part_of_the_attestation_is_refused(
    change: Callable[[Attestation], None], reason: ProvenanceReason
) -> None:
    for stated in (PUBLISHER, None):
        refused = _refused(_verify, stated, _changed(change))
        assert refused.reason == reason
        assert str(refused).startswith(f"{WHEEL.name}: Sigstore: ")
        assert refused.fix.startswith("download the file and its provenance again")


# -- what is not a provenance --------------------------------------------------------------


@pytest.mark.parametrize(
    ("provenance", "reason", "said"),
    [
        (b"{", "malformed", "is not JSON"),
        (b"[]", "malformed", "neither a PEP 740 provenance object nor an attestation"),
        (b'{"version": 2, "attestation_bundles": []}', "malformed", "version 1"),
        (b'{"version": 1, "attestation_bundles": [{}]}', "malformed", "list of attestations"),
        (b'{"version": 1, "envelope": {}}', "malformed", "invalid attestation"),
        (b'{"version": 1, "attestation_bundles": []}', "no-publish-attestation", "no PyPI"),
        (b" " * (4 << 20) + b"{}", "malformed", "more than"),
    ],
)
def test_what_is_not_a_provenance_is_refused_as_such(
    provenance: bytes, reason: ProvenanceReason, said: str
) -> None:
    refused = _refused(lambda: _verify(PUBLISHER, provenance))
    assert refused.reason == reason
    assert said in str(refused)


def test_an_unreadable_certificate_is_malformed() -> None:
    def garbage(attestation: Attestation) -> None:
        attestation["verification_material"]["certificate"] = base64.b64encode(b"x").decode()

    assert _refused(lambda: _verify(PUBLISHER, _changed(garbage))).reason == "malformed"


def test_too_many_attestations_are_refused_before_any_is_verified() -> None:
    document = json.loads(WHEEL_PROVENANCE.read_bytes())
    document["attestation_bundles"] *= 17
    refused = _refused(lambda: _verify(PUBLISHER, json.dumps(document).encode()))
    assert refused.reason == "malformed"
    assert "more than 16 attestations" in str(refused)


def test_every_reason_has_a_fix() -> None:
    assert set(PROVENANCE_FIXES) == set(get_args(ProvenanceReason))
    assert all(PROVENANCE_FIXES.values())


# -- no network, no writes, no clock -------------------------------------------------------

_SANDBOXED = r"""
import json, os, sys

# urllib3 binds a socket to ::1 once, to learn whether IPv6 works: that reaches nothing
seen = []
WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
CHANGES = (
    "os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.symlink", "os.link", "os.truncate",
    "os.chmod", "os.utime", "shutil.copyfile", "tempfile.mkstemp", "tempfile.mkdtemp",
    "socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.sendto",
    "socket.sendmsg",
    "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.fork",
)

def audit(event, args):
    if event == "open" and isinstance(args[2], int) and args[2] & WRITES:
        seen.append(f"open {args[0]} for writing")
    elif event in CHANGES:
        seen.append(f"{event} {args!r}"[:200])

sys.addaudithook(audit)
from pathlib import Path
from mcs_host.trust.provenance import verify_provenance
from mcs_host.trust.publishers import PublisherIdentity

results = []
for dist, provenance, stated in json.loads(sys.argv[1]):
    proven = verify_provenance(
        Path(dist), Path(dist).name, Path(provenance).read_bytes(), PublisherIdentity.parse(stated)
    )
    results.append(str(proven.identity))
import time
print(json.dumps({"results": results, "seen": seen, "now": time.time()}))
"""
_CASES = [
    (str(WHEEL), str(WHEEL_PROVENANCE), PUBLISHER),
    (
        str(TRANSFERRED),
        str(TRANSFERRED_PROVENANCE),
        "github:trailofbits/pypi-attestations:release.yml",
    ),
    (str(GITLAB), str(GITLAB_ATTESTATION), "gitlab:facutuesca/gitlab-oidc-project:.gitlab-ci.yml"),
]


def _sandbox_env(tmp_path: Path, home: Path) -> dict[str, str]:
    """The environment with a HOME of its own, no XDG directories, and every proxy a port no
    one listens on."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("XDG_") and key.lower() not in ("http_proxy", "https_proxy")
    }
    closed = "http://127.0.0.1:9"
    env.update(HOME=str(home), TMPDIR=str(tmp_path / "tmp"), PYTHONDONTWRITEBYTECODE="1")
    env.update(HTTP_PROXY=closed, HTTPS_PROXY=closed, http_proxy=closed, https_proxy=closed)
    (tmp_path / "tmp").mkdir()
    return env


@pytest.mark.parametrize("home", ["an empty directory", "a file"])
def test_verification_reaches_no_network_and_writes_nothing(tmp_path: Path, home: str) -> None:
    where = tmp_path / "home"
    if home == "a file":
        where.write_text("not a directory: nothing can be written under this HOME\n")
    else:
        where.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = _sandbox_env(tmp_path, where)
    done = _python(_SANDBOXED, json.dumps(_CASES), env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["results"] == [stated for _, _, stated in _CASES]
    assert report["seen"] == []
    assert not list(cwd.iterdir())
    assert not list((tmp_path / "tmp").iterdir())
    if where.is_dir():
        assert not list(where.iterdir())


def _libfaketime() -> Path:
    spec = importlib.util.find_spec("libfaketime")
    assert spec is not None, "the test extra installs libfaketime"
    assert spec.submodule_search_locations
    return Path(spec.submodule_search_locations[0], "vendor/libfaketime/src/libfaketime.so.1")


@pytest.mark.skipif(sys.platform != "linux", reason="libfaketime's wheel ships a Linux library")
@pytest.mark.parametrize(
    ("clock", "after", "before"),
    [
        ("+7300d", 1785247712 + 19 * 365 * 86400, None),  # 20 years ahead
        ("@2023-01-01 00:00:00", 1672531200, 1672617600),  # before either certificate was made
    ],
)
def test_the_clock_does_not_change_the_result(
    tmp_path: Path, clock: str, after: int, before: int | None
) -> None:
    """The whole process's clock is set (libfaketime, preloaded), not a Python function."""
    env = _sandbox_env(tmp_path, tmp_path / "home")
    (tmp_path / "home").mkdir()
    env.update(LD_PRELOAD=str(_libfaketime()), FAKETIME=clock)
    done = _python(_SANDBOXED, json.dumps(_CASES), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["now"] > after
    assert before is None or report["now"] < before
    assert report["results"] == [stated for _, _, stated in _CASES]
    assert report["seen"] == []


# -- what imports sigstore, and without it -------------------------------------------------


def test_importing_the_verifier_imports_neither_sigstore_nor_pypi_attestations() -> None:
    code = (
        "import sys, mcs_host.trust.provenance; "
        f"print(sorted(m for m in sys.modules if m.partition('.')[0] in {EXTRA!r}))"
    )
    done = _python(code)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr


def test_without_the_extra_verification_says_how_to_install_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['sigstore'] = sys.modules['pypi_attestations'] = None\n"
        "from mcs_host.trust.provenance import ProvenanceError, verify_provenance\n"
        "try:\n"
        f"    verify_provenance(b'', {WHEEL.name!r}, b'{{}}', None)\n"
        "except ProvenanceError as error:\n"
        "    print(error.reason, error, error.fix, sep='\\n')\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    reason, message, fix = done.stdout.strip().split("\n")
    assert reason == "extra-missing"
    assert message.startswith(WHEEL.name)
    install = extra_command("attest")  # this interpreter's pip, from where mcs-host came
    assert install.startswith(f"{shlex.quote(sys.executable)} -m pip install ")
    assert message.endswith(f": {install}")
    assert fix == install


@pytest.mark.parametrize("command", ["list", "verify", "load", "serve"])
def test_list_verify_load_and_serve_never_import_sigstore(tmp_path: Path, command: str) -> None:
    env = _sandbox_env(tmp_path, tmp_path / "home")
    (tmp_path / "home").mkdir()
    env.update(
        PYTHONPROFILEIMPORTTIME="1",  # every import, in every process, is listed on stderr
        MCS_HOST_STATE_DIR=str(tmp_path / "state"),
        MCS_HOST_CACHE_DIR=str(tmp_path / "cache"),
    )
    script = Path(sys.executable).with_name("mcs-host")
    done = subprocess.run(
        [script, command],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    imported = [
        line.rpartition("|")[2].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    ]
    assert "mcs_host.cli._launch" in imported, done.stderr[-2000:]  # the listing was read
    assert [m for m in imported if m.partition(".")[0] in EXTRA] == []
    assert [m for m in imported if m.startswith(("mcs_host.trust.provenance",))] == []


def test_only_the_verifier_imports_sigstore_or_pypi_attestations() -> None:
    importers = set()
    for path in (ROOT / "mcs_host").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(name.partition(".")[0] in EXTRA for name in names):
                importers.add(path.relative_to(ROOT).as_posix())
    assert importers == {"mcs_host/trust/provenance.py"}


# -- the packaged trusted root -------------------------------------------------------------


def test_the_wheel_ships_the_trusted_root_the_verifier_uses(tmp_path: Path) -> None:
    assert hashlib.sha256(TRUSTED_ROOT.read_bytes()).hexdigest() == ROOT_SHA256
    code = "import sys; from flit_core import buildapi; print(buildapi.build_wheel(sys.argv[1]))"
    done = _python(code, str(tmp_path), cwd=ROOT)
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(tmp_path / done.stdout.strip().splitlines()[-1]) as wheel:
        shipped = wheel.read("mcs_host/trust/sigstore_trusted_root.json")
    assert shipped == TRUSTED_ROOT.read_bytes()


# -- the identity syntax -------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "github:pypi/pypi-attestations",
        "github:pypi/pypi-attestations:release.yml",
        "github:pypi/pypi-attestations:release.yaml@pypi",
        "github:acme/weather@release env",
        "github:a-b/c.d_e:publish-to-pypi.yml@PyPI",
        "gitlab:group/sub/project",
        "gitlab:group/project:.gitlab-ci.yml",
        "gitlab:group/sub/project:ci/release.yml@production",
    ],
)
def test_an_identity_reads_as_it_is_written(text: str) -> None:
    identity = PublisherIdentity.parse(text)
    assert str(identity) == text
    assert PublisherIdentity.parse(str(identity)) == identity
    assert dataclasses.is_dataclass(identity)
    with pytest.raises(dataclasses.FrozenInstanceError):
        identity.repository = "other/repo"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("pypi/pypi-attestations", "does not start with github: or gitlab:"),
        ("bitbucket:a/b", "does not start with github: or gitlab:"),
        ("github:pypi", "repository 'pypi' is not OWNER/REPO"),
        ("github:a/b/c", "repository 'a/b/c' is not OWNER/REPO"),
        ("github:a/..", "repository 'a/..' is not OWNER/REPO"),
        ("github:/b", "repository '/b' is not OWNER/REPO"),
        ("gitlab:project", "repository 'project' is not NAMESPACE/PROJECT"),
        ("gitlab:group/../project", "is not NAMESPACE/PROJECT"),
        ("github:a/b:", "workflow '' is not a file name"),
        ("github:a/b:.github/workflows/release.yml", "workflow '.github/workflows/release.yml'"),
        ("github:a/b:release", "workflow 'release' is not a file name ending in .yml"),
        ("gitlab:a/b:/abs/ci.yml", "workflow '/abs/ci.yml' is not a relative path"),
        ("gitlab:a/b:../ci.yml", "workflow '../ci.yml' is not a relative path"),
        ("github:a/b@", "environment '' after '@' is empty"),
        ("github:a/b@ pypi", "environment ' pypi'"),
        ("github:a/b@py\x00pi", "control characters"),
    ],
)
def test_a_malformed_identity_is_refused_naming_the_part_at_fault(text: str, named: str) -> None:
    with pytest.raises(ValueError, match="publisher ") as refused:
        PublisherIdentity.parse(text)
    assert named in str(refused.value)
    assert "(write " in str(refused.value)
