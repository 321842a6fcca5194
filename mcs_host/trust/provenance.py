"""PEP 740 provenance, verified offline: a distribution file is the one that a named GitHub or
GitLab workflow published.

For each file uploaded by Trusted Publishing, PyPI serves a provenance object: attestations
whose in-toto statement names the file and its sha256, signed with a short-lived Fulcio
certificate for the workflow's OIDC identity and logged in Rekor. :func:`verify_provenance`
checks every attestation against Sigstore's production trusted root shipped in this package
(``sigstore_trusted_root.json``, as sigstore 4.5.1 ships it), each certificate at the time the
log integrated its entry: a clock set ahead changes nothing; one set back before the root's
keys begin (October 2022) refuses.
The publisher is read from the certificate (:class:`~mcs_host.trust.publishers.Certified`),
never from the provenance's ``publisher`` object, which is not signed. Nothing is fetched and
nothing is written: the verifier is built from the packaged root, never from the library's
cache of it.

``sigstore`` and ``pypi_attestations`` (the ``attest`` extra) are imported by the first
verification (about half a second), not by importing this module.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from mcs_host._install_hint import extra_command
from mcs_host.trust.publishers import Certified, Mismatch, PublisherIdentity, identity_mismatch

if TYPE_CHECKING:
    from cryptography.x509 import Certificate
    from pypi_attestations import Attestation
    from sigstore.verify import Verifier

# exported once mcs_host/__init__.pyi names them: PROVENANCE_FIXES, TRUSTED_ROOT,
# ProvenanceError, ProvenanceReason, VerifiedProvenance, verify_provenance,
# verify_provenance_sha256
__all__: list[str] = []

ProvenanceReason = Literal[
    "extra-missing",
    "malformed",
    "no-publish-attestation",
    "filename-mismatch",
    "sha256-mismatch",
    "certificate-invalid",
    "log-entry-invalid",
    "signature-invalid",
    "unsupported-publisher",
    "repository-mismatch",
    "workflow-mismatch",
    "environment-mismatch",
]
"""Why a provenance was refused (:attr:`ProvenanceError.reason`)."""

TRUSTED_ROOT = Path(__file__).with_name("sigstore_trusted_root.json")
"""Sigstore's production trusted root (Fulcio CAs, Rekor and CT log keys) that every
verification uses."""

_IN_TOTO = "application/vnd.in-toto+json"
_STATEMENT = "https://in-toto.io/Statement/v1"
_PUBLISH = "https://docs.pypi.org/attestations/publish/v1"
_MAX_BYTES = 4 << 20
_MAX_ATTESTATIONS = 16
# the step sigstore's message names, first match first; any other failure is the signature's
_SIGSTORE_STEPS: tuple[tuple[str, ProvenanceReason], ...] = (
    ("log entry", "log-entry-invalid"),
    ("SCT", "certificate-invalid"),
    ("signing cert", "certificate-invalid"),
)
_AGAIN = (
    "download the file and its provenance again from the index; if this stays, do not install "
    "it: it is not the file its publisher released"
)
_MOVED = (
    "if its publisher moved or renamed it, confirm that with them, then state the identity the "
    "message says the certificate proves"
)
_MISMATCHES: Mapping[Mismatch, ProvenanceReason] = MappingProxyType(
    {
        "repository": "repository-mismatch",
        "workflow": "workflow-mismatch",
        "environment": "environment-mismatch",
    }
)
_BYTES = "until then, check the release yourself and pin it from its bytes"
PROVENANCE_FIXES: Mapping[ProvenanceReason, str] = MappingProxyType(
    {
        "extra-missing": "install the attest extra into the environment mcs-host runs in, "
        "from where mcs-host was installed (the message has the command)",
        "malformed": "give the provenance the index serves for this file (its Integrity API), "
        "or the .publish.attestation file written beside it",
        "no-publish-attestation": f"ask its publisher to upload with Trusted Publishing; {_BYTES}",
        "filename-mismatch": "give the provenance of this very file (the index has one per file)",
        "sha256-mismatch": _AGAIN,
        "certificate-invalid": _AGAIN,
        "log-entry-invalid": _AGAIN,
        "signature-invalid": _AGAIN,
        "unsupported-publisher": "only GitHub and GitLab publishers can be checked: check "
        "the release yourself and pin it from its bytes",
        "repository-mismatch": _MOVED,
        "workflow-mismatch": _MOVED,
        "environment-mismatch": _MOVED,
    }
)
"""What to do about each :data:`ProvenanceReason`."""


class ProvenanceError(Exception):
    """A distribution's provenance does not prove what was asked: ``reason`` says which check
    refused it, the message names the file and what did not match."""

    def __init__(self, reason: ProvenanceReason, filename: str, message: str) -> None:
        self.reason: ProvenanceReason = reason
        self.filename = filename
        super().__init__(f"{filename}: {message}")

    @property
    def fix(self) -> str:
        """What to do about it."""
        return provenance_fix(self.reason)


def provenance_fix(reason: ProvenanceReason) -> str:
    """What to do about ``reason``: for a missing extra, the command that installs it from
    where mcs-host was installed."""
    if reason == "extra-missing":
        return extra_command("attest")
    return PROVENANCE_FIXES[reason]


@dataclass(frozen=True, slots=True)
class VerifiedProvenance:
    """What a verified provenance proves about one distribution file."""

    filename: str
    sha256: str
    """The file's sha256, hex: the one its attestations sign."""
    identity: PublisherIdentity
    """The publisher its certificate proves (its workflow always named), not the one stated."""
    ref: str | None
    """The git ref the workflow ran on (``refs/tags/v1.0``), when the certificate names it."""
    commit: str | None
    """The commit the workflow ran on, hex, when the certificate names it."""
    repository_id: str | None
    """The forge's number for the repository (kept across a rename or transfer, new for a
    new repository under a deleted one's name), when the certificate names it."""
    owner_id: str | None
    """The forge's number for the repository's owner, when the certificate names it."""
    log_index: int
    """The publish attestation's index in the Rekor log."""
    integrated_time: int
    """When the log integrated it, in Unix seconds (signed by the log)."""
    provenance_sha256: str
    """The sha256 of the provenance bytes verified, hex."""
    trusted_root_sha256: str
    """The sha256 of the trusted root used (:data:`TRUSTED_ROOT`), hex."""


@dataclass(frozen=True, slots=True)
class _Proof:
    """One verified attestation: its predicate type, certificate and log entry."""

    predicate_type: str
    certified: Certified
    log_index: int
    integrated_time: int


class _CheckedAfterwards:
    """The sigstore policy that accepts any identity: the identity is matched once the
    certificate, log entry and signature have verified, so that a forged bundle is never
    reported as another publisher's."""

    def verify(self, cert: Certificate) -> None:
        """Accept ``cert``: :func:`verify_provenance` reads and matches it afterwards."""


def verify_provenance(
    distribution: bytes | Path,
    filename: str,
    provenance: bytes,
    identity: PublisherIdentity | None,
) -> VerifiedProvenance:
    """Verify ``provenance`` (PyPI's provenance object, or one attestation) for the
    distribution file ``filename`` (its bytes, or its path) published by ``identity``; with
    ``identity`` ``None``, by any publisher, for the caller to confirm the one returned.

    Every attestation must verify and sign this file's name and sha256, at least one be
    PyPI's publish attestation, and each prove the stated publisher (without one: the same
    publisher). Raises :class:`ProvenanceError`."""
    _import_extra(filename)
    if isinstance(distribution, Path):
        with distribution.open("rb") as file:
            sha256 = hashlib.file_digest(file, "sha256").hexdigest()
    else:
        sha256 = hashlib.sha256(distribution).hexdigest()
    return verify_provenance_sha256(sha256, filename, provenance, identity)


def verify_provenance_sha256(
    sha256: str,
    filename: str,
    provenance: bytes,
    identity: PublisherIdentity | None,
) -> VerifiedProvenance:
    """:func:`verify_provenance` for the file ``filename`` known by its ``sha256`` (hex),
    not its bytes: a file pinned earlier whose sha256 the caller holds (a registry's pin).
    Every check is the same. Raises :class:`ProvenanceError`; a :class:`ValueError` for a
    ``sha256`` that is not 64 lowercase hex digits."""
    if len(sha256) != 64 or sha256.strip("0123456789abcdef"):
        raise ValueError(f"{sha256!r} is not a sha256 in lowercase hex")
    _import_extra(filename)
    if _dist_name(filename) is None:
        raise ProvenanceError(
            "filename-mismatch", filename, "not a wheel or source distribution file name"
        )
    verifier, root_sha256 = _verifier()
    proofs = [
        _verify_one(verifier, attestation, filename, sha256)
        for attestation in _attestations(filename, provenance)
    ]
    publish = [proof for proof in proofs if proof.predicate_type == _PUBLISH]
    if not publish:
        raise ProvenanceError(
            "no-publish-attestation", filename, "its provenance has no PyPI publish attestation"
        )
    first = publish[0]
    for proof in proofs:
        proven = proof.certified.identity
        if identity is None and proven != first.certified.identity:
            raise ProvenanceError(
                "malformed",
                filename,
                f"its attestations prove two publishers: {proven} and {first.certified.identity}",
            )
        mismatch = identity_mismatch(identity, proven) if identity is not None else None
        if mismatch is not None:
            reason = _MISMATCHES[mismatch.part]
            raise ProvenanceError(reason, filename, f"it was {mismatch.sentence}")
    return VerifiedProvenance(
        filename=filename,
        sha256=sha256,
        identity=first.certified.identity,
        ref=first.certified.ref,
        commit=first.certified.commit,
        repository_id=first.certified.repository_id,
        owner_id=first.certified.owner_id,
        log_index=first.log_index,
        integrated_time=first.integrated_time,
        provenance_sha256=hashlib.sha256(provenance).hexdigest(),
        trusted_root_sha256=root_sha256,
    )


def _import_extra(filename: str) -> None:
    """Import the attest extra's libraries, counted as the host's own from now on (the
    command line's import gate admits nothing else); refuse, saying how to install them,
    without."""
    from mcs_host.trust import _origins

    _origins.grant_extras(("attest",))
    try:
        import pypi_attestations  # noqa: F401
        import sigstore.verify  # noqa: F401
    except ImportError as error:
        raise ProvenanceError(
            "extra-missing",
            filename,
            f"checking provenance needs the attest extra ({error}): {extra_command('attest')}",
        ) from None


@functools.cache
def _verifier() -> tuple[Verifier, str]:
    """The verifier of the packaged trusted root, and that root's sha256."""
    from sigstore.models import TrustedRoot
    from sigstore.verify import Verifier

    digest = hashlib.sha256(TRUSTED_ROOT.read_bytes()).hexdigest()
    return Verifier(trusted_root=TrustedRoot.from_file(str(TRUSTED_ROOT))), digest


def _attestations(filename: str, provenance: bytes) -> list[Attestation]:
    """The attestations of a provenance object, or the one attestation ``provenance`` is;
    the provenance's ``publisher`` objects are not read."""
    from pydantic import ValidationError
    from pypi_attestations import Attestation

    def malformed(why: str) -> ProvenanceError:
        return ProvenanceError("malformed", filename, f"its provenance {why}")

    if len(provenance) > _MAX_BYTES:
        raise malformed(f"has more than {_MAX_BYTES} bytes")
    try:
        document = json.loads(provenance)
    except (ValueError, RecursionError) as error:
        raise malformed(f"is not JSON: {error}") from None
    if isinstance(document, dict) and "attestation_bundles" in document:
        bundles = document["attestation_bundles"]
        if document.get("version") != 1 or not isinstance(bundles, list):
            raise malformed("is not a version 1 provenance object with a list of bundles")
        if not all(
            isinstance(b, dict) and isinstance(b.get("attestations"), list) for b in bundles
        ):
            raise malformed("has a bundle without a list of attestations")
        items = [item for bundle in bundles for item in bundle["attestations"]]
    elif isinstance(document, dict) and "envelope" in document:
        items = [document]
    else:
        raise malformed("is neither a PEP 740 provenance object nor an attestation")
    if len(items) > _MAX_ATTESTATIONS:
        raise malformed(f"has more than {_MAX_ATTESTATIONS} attestations")
    try:
        return [Attestation.model_validate(item) for item in items]
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise malformed(f"has an invalid attestation ({where}: {first['msg']})") from None


def _verify_one(verifier: Verifier, attestation: Attestation, filename: str, sha256: str) -> _Proof:
    """Verify one attestation's certificate, log entry and signature, then that it signs
    ``filename`` with ``sha256``; what it proves."""
    from pypi_attestations import ConversionError
    from sigstore.errors import CertValidationError

    try:
        bundle = attestation.to_bundle()
    except ConversionError as error:
        raise ProvenanceError("malformed", filename, f"its attestation: {error}") from None
    try:
        payload_type, payload = verifier.verify_dsse(bundle, _CheckedAfterwards())
    except CertValidationError as error:
        raise ProvenanceError("certificate-invalid", filename, f"Sigstore: {error}") from None
    except Exception as error:  # any failure to verify refuses; sigstore's message says which
        reason: ProvenanceReason = "signature-invalid"
        for step, named in _SIGSTORE_STEPS:
            if step in str(error):
                reason = named
                break
        raise ProvenanceError(reason, filename, f"Sigstore: {error}") from None
    subject, subject_sha256, predicate_type = _statement(payload_type, payload, filename)
    if _dist_name(subject) != _dist_name(filename):
        raise ProvenanceError(
            "filename-mismatch", filename, f"its provenance attests {subject!r} instead"
        )
    if subject_sha256 != sha256:
        raise ProvenanceError(
            "sha256-mismatch",
            filename,
            f"its sha256 is {sha256}, not {subject_sha256}, the one its publisher attested",
        )
    try:
        certified = Certified.read(bundle.signing_certificate)
    except ValueError as error:
        raise ProvenanceError("unsupported-publisher", filename, str(error)) from None
    entry = attestation.verification_material.transparency_entries[0]
    return _Proof(predicate_type, certified, int(entry["logIndex"]), int(entry["integratedTime"]))


def _statement(payload_type: str, payload: bytes, filename: str) -> tuple[str, str, str]:
    """The one subject's name and sha256, and the predicate type, of a signed statement."""
    try:
        if payload_type != _IN_TOTO:
            raise TypeError
        statement = json.loads(payload)
        (subject,) = statement["subject"]
        name, digest = subject["name"], subject["digest"]["sha256"]
        predicate_type = statement["predicateType"]
        if statement["_type"] != _STATEMENT or not all(
            isinstance(value, str) for value in (name, digest, predicate_type)
        ):
            raise TypeError
    except (ValueError, TypeError, KeyError, RecursionError):
        raise ProvenanceError(
            "malformed",
            filename,
            "its signed statement is not an in-toto statement of one subject with a sha256",
        ) from None
    return name, digest, predicate_type


def _dist_name(filename: str) -> tuple[object, ...] | None:
    """A wheel's or sdist's name and version (and tags) as installers read them; ``None`` for
    another file name."""
    from packaging import utils

    try:
        if filename.endswith(".whl"):
            return utils.parse_wheel_filename(filename)
        if filename.endswith((".tar.gz", ".zip")):
            return utils.parse_sdist_filename(filename)
    except (utils.InvalidWheelFilename, utils.InvalidSdistFilename):
        return None
    return None
