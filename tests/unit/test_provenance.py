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
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import pytest

from mcs_host.trust.provenance import (
    PROVENANCE_FIXES,
    TRUSTED_ROOT,
    ProvenanceError,
    ProvenanceReason,
    VerifiedProvenance,
    verify_provenance,
)
from mcs_host.trust.publishers import PublisherIdentity

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[1] / "data" / "provenance"
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

# -- what imports sigstore, and without it -------------------------------------------------


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
