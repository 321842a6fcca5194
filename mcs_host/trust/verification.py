"""Verification: discovered candidates -> a trust decision each, before any driver code runs.

For each candidate: discovery problems, the installed-tree scan (modified, missing, unlisted
or shadowing files), editable installs, whether the entry point's modules are the
distribution's own (a namespace parent needs no check here: the import gate claims it, so no
other path entry can provide it), the driver manifest, then the registry: the driver id's
owner, revoked and refused versions, the pin for this version, or else a publisher signature
by a key the registry trusts for this driver. The result is a :class:`Verification` record; only a
``pinned`` or ``signed`` one (or ``unverified`` where the policy allows it) may be imported.

One module: every check of one candidate, in the order that decides it, with the policy that
weighs the outcome.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from packaging.version import InvalidVersion, Version
from pydantic import ValidationError

from mcs_host._files import MANIFEST_LIMIT, InputError, loads_json, read_bytes
from mcs_host._reasons import known_reason
from mcs_host.discovery import Candidate, Discovery, labels_argument, normalize_name
from mcs_host.interfaces import MANIFEST_FILE

from .digest import SIGNATURE_FILE, TreeDigest, TreeScan, editable_source, scan_installed
from .modules import ModuleFile, module_files, resolve_module
from .registry import TrustIndex
from .registry_format import DriverEntry, ReleaseEntry
from .signatures import Envelope, SignatureError

if TYPE_CHECKING:
    from mcs_host.contract import DriverMeta

    from .release import ReleaseStatement

__all__ = [
    "Status",
    "TrustPolicy",
    "Verification",
    "release_decision",
    "verify",
    "verify_candidate",
]

Status = Literal["pinned", "signed", "unverified", "revoked", "rejected"]


@dataclass(frozen=True, slots=True)
class TrustPolicy:
    """What may be imported besides pinned and signed drivers."""

    allow_unverified: bool = False
    """Import drivers no registry pins or signs (development only; each load warns)."""
    allow_extensions: bool = True
    """Import verified drivers and libraries that ship extension modules (linked from their
    verified bytes); ``False`` refuses native code."""


@dataclass(frozen=True, slots=True)
class Verification:
    """The trust decision for one candidate, with what it was based on."""

    candidate: Candidate
    status: Status
    reason: str
    """A code of :data:`~mcs_host._reasons.REASONS`: ``pinned``, ``signed``,
    ``not-in-registry``, ``file-modified``, ``typosquat``..."""
    message: str
    allowed: bool
    """Whether the policy lets this driver be imported."""
    scan: TreeScan | None = None
    driver_id: str | None = None
    trust_label: str | None = None
    manifest: DriverMeta | None = None
    modules: tuple[ModuleFile, ...] = ()
    """The distribution's source modules, with the hashes the importer checks."""
    entry_files: tuple[str, ...] = ()
    """The files importing the entry point executes, outermost first."""
    signers: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())
    provenance: str | None = None
    """The publisher whose provenance the matching pin carries (``github:OWNER/REPO:...``);
    ``None`` when it carries none, or no pin matched."""

    def __post_init__(self) -> None:
        known_reason(self.reason)

    @property
    def digest(self) -> str | None:
        return self.scan.digest.digest if self.scan and self.scan.digest else None

    @property
    def label(self) -> str:
        return self.candidate.label

    @property
    def trust(self) -> str | None:
        """The registry's trust label when it vouches for these bytes (``pinned`` or
        ``signed``), else ``None``: a refused driver has no trust, whatever its entry says."""
        return self.trust_label if self.status in ("pinned", "signed") else None


def verify(
    discovery: Discovery,
    index: TrustIndex,
    policy: TrustPolicy | None = None,
    labels: Sequence[str] = (),
) -> tuple[Verification, ...]:
    """Verify the candidates of ``discovery`` (those with ``labels``, if given)."""
    labels = labels_argument(labels, "verify() argument 'labels'")
    chosen = [c for c in discovery.candidates if not labels or c.label in labels]
    scans: dict[str, TreeScan] = {}
    return tuple(
        verify_candidate(c, discovery, index, policy or TrustPolicy(), scans) for c in chosen
    )


def verify_candidate(
    candidate: Candidate,
    discovery: Discovery,
    index: TrustIndex,
    policy: TrustPolicy,
    scans: dict[str, TreeScan] | None = None,
) -> Verification:
    """The trust decision for one candidate; never imports anything."""
    return _Check(candidate, discovery, index, policy, scans if scans is not None else {}).run()


class _RefusedError(Exception):
    def __init__(self, status: Status, reason: str, message: str) -> None:
        self.status = status
        self.reason = reason
        self.message = message


class _Check:
    """The steps of one verification; each either fills in a field or raises _RefusedError."""

    __slots__ = (
        "candidate",
        "discovery",
        "driver_id",
        "entry_files",
        "index",
        "manifest",
        "modules",
        "policy",
        "provenance",
        "scan",
        "scans",
        "signers",
        "trust_label",
        "warnings",
    )

    def __init__(
        self,
        candidate: Candidate,
        discovery: Discovery,
        index: TrustIndex,
        policy: TrustPolicy,
        scans: dict[str, TreeScan],
    ) -> None:
        self.candidate = candidate
        self.discovery = discovery
        self.index = index
        self.policy = policy
        self.scans = scans
        self.scan: TreeScan | None = None
        self.driver_id: str | None = None
        self.trust_label: str | None = None
        self.manifest: DriverMeta | None = None
        self.modules: tuple[ModuleFile, ...] = ()
        self.entry_files: tuple[str, ...] = ()
        self.signers: tuple[str, ...] = ()
        self.warnings: list[str] = []
        self.provenance: str | None = None

    def run(self) -> Verification:
        try:
            status, reason, message = self._decide()
        except _RefusedError as rejected:
            status, reason, message = rejected.status, rejected.reason, rejected.message
        allowed = status in ("pinned", "signed") or (
            status == "unverified" and self.policy.allow_unverified
        )
        if status == "unverified" and allowed:
            self.warnings.append(
                f"driver {self.candidate.label!r} is UNVERIFIED and allowed by policy: "
                "its code is trusted without proof; use this for development only"
            )
        return self._result(status, reason, message, allowed)

    def _result(self, status: Status, reason: str, message: str, allowed: bool) -> Verification:
        return Verification(
            self.candidate,
            status,
            reason,
            message,
            allowed,
            self.scan,
            self.driver_id,
            self.trust_label,
            self.manifest,
            self.modules,
            self.entry_files,
            self.signers,
            tuple(self.warnings),
            self.provenance,
        )

    def _decide(self) -> tuple[Status, str, str]:
        c = self.candidate
        for problem in self.discovery.problems_for(c):
            raise _RefusedError("rejected", problem.code, problem.message)
        self._check_files()
        self._check_entry_point()
        self._read_manifest()
        found = self._registry_entry()
        if self.scan is not None and self.scan.extensions and not self.policy.allow_extensions:
            raise _RefusedError(
                "rejected",
                "extension-module",
                f"{c.distribution} {c.version} ships extension modules "
                f"({', '.join(self.scan.extensions)}), and the policy refuses native code",
            )
        if found is None:
            return (
                "unverified",
                "not-in-registry",
                (f"no registry knows {c.distribution} or its driver id"),
            )
        return self._trust(*found)

    @property
    def _digest(self) -> TreeDigest:
        if self.scan is None or self.scan.digest is None:
            raise RuntimeError("the files were not scanned")  # a bug in the step order
        return self.scan.digest

    def _check_files(self) -> None:
        c = self.candidate
        editable = editable_source(c.metadata_path)
        if editable is not None:
            raise _RefusedError(
                "rejected" if not self.policy.allow_unverified else "unverified",
                "editable-install",
                f"{c.distribution} {c.version} is an editable install of {editable}: "
                "its code is a working tree, not the released files",
            )
        scan = self.scans.get(c.metadata_path)
        if scan is None:
            scan = self.scans[c.metadata_path] = scan_installed(c.metadata_path)
        self.scan = scan
        if scan.findings:
            first = scan.findings[0]
            more = len(scan.findings) - 1
            tail = f" (and {more} more finding{'s' if more > 1 else ''})" if more else ""
            raise _RefusedError("rejected", first.code, f"{first.message}{tail}")
        self.modules = module_files(self._digest)

    def _check_entry_point(self) -> None:
        c = self.candidate
        listed = {entry.path for entry in self._digest.entries}
        files, problem = resolve_module(c.module, listed)
        if problem is not None:
            raise _RefusedError(
                "rejected",
                "foreign-module",
                f"entry point {c.value!r} of {c.distribution}: {problem}; "
                "its code would come from elsewhere",
            )
        self.entry_files = tuple(files)

    def _read_manifest(self) -> None:
        directory = self.entry_files[-1].rpartition("/")[0]
        path = f"{directory}/{MANIFEST_FILE}" if directory else MANIFEST_FILE
        entry = next((e for e in self._digest.entries if e.path == path), None)
        if entry is None:
            return
        try:
            data = read_bytes(
                os.path.join(self.candidate.location, *path.split("/")),
                MANIFEST_FILE,
                MANIFEST_LIMIT,
                follow=False,
            )
            if hashlib.sha256(data).hexdigest() != entry.sha256:
                raise ValueError("it changed after it was hashed")
            loads_json(data, path)  # its nesting is bounded before the model parses it
            from mcs_host.contract import DriverManifest  # noqa: PLC0415 - a manifest only

            manifest = DriverManifest.model_validate_json(data)
        except (OSError, ValueError, ValidationError) as exc:
            raise _RefusedError("rejected", "manifest-invalid", f"{path}: {exc}") from None
        self.manifest = manifest.drivers.get(self.candidate.attr)

    def _registry_entry(self) -> tuple[str, DriverEntry] | None:
        c = self.candidate
        claimed = self.manifest.id if self.manifest is not None else None
        if claimed is not None and claimed in self.index.entries:
            owner = self.index.entries[claimed].distribution
            if owner != c.project:
                raise _RefusedError(
                    "rejected",
                    "typosquat",
                    f"{c.distribution} claims driver id {claimed}, which the registry gives to "
                    f"{owner}",
                )
        found = self.index.find(claimed, c.project, c.label, self.discovery.group)
        if found is None:
            return None
        driver_id, entry = found
        if claimed is not None and claimed != driver_id:
            raise _RefusedError(
                "rejected",
                "id-mismatch",
                f"{c.distribution} declares driver id {claimed}; the registry knows it as "
                f"{driver_id}",
            )
        self.driver_id = driver_id
        self.trust_label = entry.trust
        return found

    def _trust(self, driver_id: str, entry: DriverEntry) -> tuple[Status, str, str]:
        c = self.candidate
        digest = self._digest
        for conflict in self.index.conflicts.get(driver_id, ()):
            raise _RefusedError("rejected", "registry-conflict", conflict)
        if entry.group != self.discovery.group:
            raise _RefusedError(
                "rejected",
                "entry-point-mismatch",
                f"entry point {c.label} = {c.value} is in {self.discovery.group}, but the "
                f"registry pins driver id {driver_id} as {entry.label} in {entry.group}: an "
                "entry point of one group never passes for the other's",
            )
        if entry.object != c.value:
            raise _RefusedError(
                "rejected",
                "entry-point-mismatch",
                f"entry point {c.label} = {c.value} differs from the registry's {entry.object}",
            )
        decided = release_decision(entry, c.distribution, c.version, digest)
        if decided is not None and decided[0] != "pinned":
            raise _RefusedError(*decided)
        if decided is not None:
            attested = entry.pin_for(c.version, digest.digest)
            if attested is not None and attested.provenance is not None:
                self.provenance = str(attested.provenance.publisher)
            return decided
        signed = self._signature(driver_id, entry)
        if signed is not None:
            return signed
        return (
            "unverified",
            "no-pin-or-signature",
            (f"{c.distribution} {c.version} is not pinned and carries no publisher signature"),
        )

    def _signature(self, driver_id: str, entry: DriverEntry) -> tuple[Status, str, str] | None:
        c = self.candidate
        path = os.path.join(c.metadata_path, SIGNATURE_FILE)
        try:
            data = read_bytes(path, SIGNATURE_FILE, MANIFEST_LIMIT, follow=False)
        except FileNotFoundError:
            return None
        except (OSError, InputError) as exc:
            raise _RefusedError("rejected", "bad-signature", f"{path}: {exc}") from None
        from .release import RELEASE_PAYLOAD_TYPE, ReleaseStatement  # noqa: PLC0415 - signed only

        try:
            envelope = Envelope.from_json(data, path)
        except SignatureError as exc:
            raise _RefusedError("rejected", "bad-signature", str(exc)) from None
        if envelope.payload_type != RELEASE_PAYLOAD_TYPE:
            raise _RefusedError(
                "rejected", "bad-signature", f"{path}: payload type {envelope.payload_type!r}"
            )
        trusted = [key.public_key for key in entry.publisher_keys]
        try:
            if not trusted:
                raise SignatureError("under-signed", "the registry names no publisher keys")
            signers = envelope.verify(trusted, 1, path)
        except SignatureError as exc:
            trusted_ids = {k.keyid for k in trusted}
            reason = (
                "bad-signature"
                if any(kid in trusted_ids for kid, _ in envelope.signatures)
                else "untrusted-key"
            )
            signed_by = ", ".join(kid[:16] for kid, _ in envelope.signatures) or "nobody"
            raise _RefusedError(
                "rejected",
                reason,
                f"{c.distribution} {c.version} is signed by {signed_by}, not by a key the "
                f"registry trusts for driver {driver_id}: {exc}",
            ) from None
        try:
            statement = ReleaseStatement.model_validate_json(envelope.payload)
        except ValidationError as exc:
            raise _RefusedError("rejected", "bad-signature", f"{path}: {exc}") from None
        mismatch = _statement_mismatch(statement, c, self._digest.digest, driver_id)
        if mismatch:
            raise _RefusedError("rejected", "statement-mismatch", f"{path}: {mismatch}")
        self.signers = tuple(key.keyid for key in signers)
        names = ", ".join(k.keyid[:16] for k in signers)
        return "signed", "signed", f"signed by {names}, a publisher key of driver {driver_id}"


def release_decision(
    entry: ReleaseEntry, distribution: str, version: str, digest: TreeDigest
) -> tuple[Status, str, str] | None:
    """What a registry entry says of one release: ``(status, reason, message)`` with status
    ``pinned``, ``rejected`` (a refused version, a digest that differs, or, under an entry
    that records a publisher, a pin without provenance or with another publisher's) or
    ``revoked``; ``None`` when it neither pins nor refuses that version."""
    try:
        Version(version)
    except InvalidVersion:
        return "rejected", "invalid-version", f"{version!r} is not a version"
    revoked = entry.revocation(version)
    if revoked is not None:
        return "revoked", "revoked", f"{distribution} {version} is revoked: {revoked}"
    refused = entry.refuses_version(version)
    if refused is not None:
        code = "below-minimum" if "minimum" in refused else "version-not-allowed"
        return "rejected", code, f"{distribution} {refused}"
    pin = entry.pin_for(version, digest.digest)
    if pin is None:
        return None
    if pin.digest != digest.digest:
        builds = len(entry.builds_of(version))
        others = f" and its {builds} other build{'s' if builds > 1 else ''}" if builds else ""
        return (
            "rejected",
            "digest-mismatch",
            f"{distribution} {version}: tree digest {digest.digest} "
            f"({digest.files} files, {digest.bytes} bytes) differs from the pinned "
            f"{pin.digest} ({pin.files} files, {pin.bytes} bytes){others}; every file "
            "matches RECORD, so RECORD was rewritten with them or this is another build",
        )
    attested, publisher = pin.provenance, entry.publisher
    if publisher is not None and attested is None:
        return (
            "rejected",
            "provenance-missing",
            f"{distribution} {version} is pinned without provenance, and the registry records "
            f"{publisher} as its publisher: a release without its publisher's attestation "
            "after attested ones is a downgrade",
        )
    changed = entry.publisher_problem(version, attested.publisher) if attested else None
    if changed is not None:
        return "rejected", "publisher-changed", f"{distribution} {version}: {changed}"
    by = f", attested by {attested.publisher}" if attested is not None else ""
    return "pinned", "pinned", f"matches the pin for {version}{by}"


def _statement_mismatch(
    statement: ReleaseStatement, candidate: Candidate, digest: str, driver_id: str
) -> str | None:
    if statement.digest != digest:
        return f"signed digest {statement.digest} differs from the installed {digest}"
    if normalize_name(statement.distribution) != candidate.project:
        return f"signed for distribution {statement.distribution}"
    if Version(statement.version) != Version(candidate.version):
        return f"signed for version {statement.version}"
    for driver in statement.drivers:
        if driver.label == candidate.label:
            if driver.object != candidate.value or driver.id != driver_id:
                return f"signed driver {driver.label} is {driver.object} with id {driver.id}"
            return None
    return f"the statement does not sign driver {candidate.label!r}"
