"""Releases: what a wheel or an installed distribution holds, publisher signatures, and locks.

One module: a release is described once, from its files, in the terms that both the statement
a publisher signs and the pins ``lock`` writes use (its digest, its entry points, their
manifests' ids); it is long because it reads a wheel and an install alike, rewrites a wheel to
sign it, and locks each driver, host plugin or library of a release by the registry's rules.

A release is described from its files alone: the ``installed-tree-v2`` digest, its entry points
in ``mcs.drivers`` and, for each, the driver meta in the ``mcs-driver.json`` manifest beside the
entry point module. ``sign_wheel`` adds a DSSE-signed statement of that description to the
wheel's ``*.dist-info`` (a file the digest leaves out, so the digest does not change and the
wheel stays installable). ``lock`` writes the digests into a plain registry file as pins.
"""

from __future__ import annotations

import csv
import email.parser
import hashlib
import io
import json
import os
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from packaging.version import Version
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mcs_host._files import (
    MANIFEST_LIMIT,
    METADATA_LIMIT,
    SHARED,
    loads_json,
    read_bytes,
    read_text,
    replacing,
)
from mcs_host.contract import DriverManifest, DriverMeta, TrustManifest
from mcs_host.discovery import (
    ENTRY_POINT_GROUP,
    PLUGIN_GROUP,
    Candidate,
    labels_argument,
    normalize_name,
    parse_entry_points,
)
from mcs_host.interfaces import MANIFEST_FILE

from .digest import (
    SIGNATURE_FILE,
    TreeScan,
    editable_source,
    record_hash,
    scan_installed,
    scan_wheel,
)
from .modules import resolve_module
from .registry import RegistryError
from .registry_format import DriverEntry, LibraryEntry, Pin, PublisherKey, Registry
from .signatures import Envelope, PrivateKey, PublicKey, SignatureError

__all__ = [
    "RELEASE_PAYLOAD_TYPE",
    "Release",
    "ReleaseDriver",
    "ReleaseStatement",
    "UnsignedReleaseError",
    "lock",
    "publisher_signers",
    "release_from_candidates",
    "release_from_installed",
    "release_from_wheel",
    "sign_wheel",
]

RELEASE_PAYLOAD_TYPE = "application/vnd.mcs-host.release+json"


class ReleaseDriver(BaseModel):
    """One driver of a release: its entry point, id and trust manifest."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str = Field(description="Entry point name.")
    object: str = Field(description="Entry point value, module:object.")
    id: str = Field(description="The driver's id (DriverMeta.id).")
    trust: TrustManifest | None = Field(default=None, description="Its trust manifest.")


class ReleaseStatement(BaseModel):
    """What a publisher signs: this distribution and version has this digest and these drivers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["mcs-host-release/2"] = "mcs-host-release/2"
    distribution: str
    version: str
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    files: int
    bytes: int
    drivers: tuple[ReleaseDriver, ...]

    @field_validator("format", mode="before")
    @classmethod
    def _current_format(cls, value: object) -> object:
        if value == "mcs-host-release/1":
            raise ValueError(
                "mcs-host-release/1 is an old format: it signs an installed-tree-v1 digest, "
                "which two different trees can share; sign the release again with mcs-host sign"
            )
        return value


@dataclass(frozen=True, slots=True)
class Release:
    """A distribution release described from its files, installed or in a wheel."""

    distribution: str
    version: str
    scan: TreeScan
    entry_points: tuple[tuple[str, str], ...]
    """``(label, module:object)`` in the ``mcs.drivers`` and ``mcs.host_plugins`` groups."""
    metas: Mapping[str, DriverMeta]
    """Label -> the meta its manifest declares (labels without a manifest are absent)."""
    problems: tuple[str, ...]
    wheel_sha256: str | None = None
    groups: tuple[str, ...] = ()
    """The entry point group of each of ``entry_points``, in order (``mcs.drivers`` or
    ``mcs.host_plugins``): one distribution may ship a driver and a host plugin under one
    label."""
    unnamed: Mapping[str, str] = field(default_factory=dict)
    """Label -> what its module's manifest names instead of its object (a manifest that
    lacks a driver added later)."""
    signature: bytes | None = None
    """The publisher signature it carries (``*.dist-info/mcs-signature.json``, which
    ``mcs-host sign`` writes), as read; ``None``: it carries none."""

    @property
    def project(self) -> str:
        return normalize_name(self.distribution)

    def points(self, group: str) -> list[tuple[str, str]]:
        """The ``(label, module:object)`` of its entry points in ``group``."""
        return [
            point for point, of in zip(self.entry_points, self.groups, strict=True) if of == group
        ]

    def pin(self) -> Pin:
        if self.scan.digest is None or self.scan.findings:
            raise ValueError(f"{self.distribution} {self.version}: {self._why_not()}")
        return Pin(
            digest=self.scan.digest.digest,
            files=self.scan.digest.files,
            bytes=self.scan.digest.bytes,
            wheel_sha256=self.wheel_sha256,
        )

    def statement(self, ids: Mapping[str, str] | None = None) -> ReleaseStatement:
        """The statement to sign; ``ids`` gives label -> id for drivers without a manifest."""
        pin = self.pin()
        drivers = []
        for label, value in self.entry_points:
            meta = self.metas.get(label)
            driver_id = meta.id if meta is not None else (ids or {}).get(label)
            if driver_id is None:
                raise ValueError(self.no_id(label, value))
            trust = meta.trust if meta is not None else None
            drivers.append(ReleaseDriver(label=label, object=value, id=driver_id, trust=trust))
        return ReleaseStatement(
            distribution=self.distribution,
            version=self.version,
            digest=pin.digest,
            files=pin.files,
            bytes=pin.bytes,
            drivers=tuple(drivers),
        )

    def no_id(self, label: str, value: str) -> str:
        """Why the driver ``label`` (``value``, its entry point) has no id, and what gives it
        one."""
        given = f"give its id with --id {label}=ID"
        unnamed = self.unnamed.get(label)
        if unnamed is None:
            return (
                f"{self.distribution} {self.version}: driver {label!r} ships no "
                f"{MANIFEST_FILE}; {given}"
            )
        attr = value.partition(":")[2].strip()
        return (
            f"{self.distribution} {self.version}: driver {label!r} ({value}): {unnamed}: add "
            f'the meta of {attr} to its "drivers" and release again, or {given}'
        )

    def _why_not(self) -> str:
        if self.scan.findings:
            return "; ".join(f.message for f in self.scan.findings[:5])
        return "its files could not all be read"


def _own_id(drivers: Mapping[str, DriverEntry], project: str, label: str, group: str) -> str:
    """The id ``lock`` gives a driver (or host plugin) that ships no manifest and was given
    none: the id of the registry's one entry for it, else one made of its distribution,
    group and label (the id only keys the entry: a load finds it by distribution and
    label)."""
    known = [
        driver_id
        for driver_id, entry in drivers.items()
        if (entry.distribution, entry.label, entry.group) == (project, label, group)
    ]
    if len(known) == 1:
        return known[0]
    kind = "plugin" if group == PLUGIN_GROUP else "driver"
    return f"{project}:{kind}:{label}"


def _describe(
    distribution: str,
    version: str,
    scan: TreeScan,
    entry_points_text: str | None,
    read: Callable[[str], bytes],
    wheel_sha256: str | None = None,
    signature: bytes | None = None,
) -> Release:
    problems: list[str] = []
    entries: list[tuple[str, str]] = []
    groups: list[str] = []
    for group in (ENTRY_POINT_GROUP, PLUGIN_GROUP):
        found, bad = parse_entry_points(entry_points_text or "", group)
        entries += found
        groups += [group] * len(found)
        problems += [
            f"entry_points.txt line {n}: {line!r} is not 'label = value'" for n, line in bad
        ]
    listed = {e.path for e in scan.digest.entries} if scan.digest is not None else set()
    metas: dict[str, DriverMeta] = {}
    unnamed: dict[str, str] = {}
    manifests: dict[str, DriverManifest | None] = {}
    for label, value in entries:
        module, _, attr = value.partition(":")
        files, problem = resolve_module(module.strip(), listed)
        if problem:
            problems.append(f"driver {label!r}: {problem}")
            continue
        directory = files[-1].rpartition("/")[0]
        path = f"{directory}/{MANIFEST_FILE}" if directory else MANIFEST_FILE
        if path not in manifests:
            manifests[path] = _manifest(path, listed, read, problems)
        manifest = manifests[path]
        if manifest is not None and attr.strip() in manifest.drivers:
            metas[label] = manifest.drivers[attr.strip()]
        elif manifest is not None:
            named = ", ".join(sorted(manifest.drivers)) or "no driver"
            unnamed[label] = f"{path} names {named}, not {attr.strip()!r}"
    return Release(
        distribution,
        version,
        scan,
        tuple(entries),
        metas,
        tuple(problems),
        wheel_sha256,
        tuple(groups),
        unnamed,
        signature,
    )


def _manifest(
    path: str, listed: set[str], read: Callable[[str], bytes], problems: list[str]
) -> DriverManifest | None:
    if path not in listed:
        return None
    try:
        data = read(path)
        loads_json(data, path)  # its nesting is bounded before the model parses it
        return DriverManifest.model_validate_json(data)
    except (ValidationError, OSError, ValueError) as exc:
        problems.append(f"{path} is not a valid driver manifest: {exc}")
        return None


def release_from_wheel(wheel: str | os.PathLike[str]) -> Release:
    """Describe a wheel file without installing it."""
    path = os.fspath(wheel)
    scan = scan_wheel(path)
    with open(path, "rb") as f:
        wheel_sha256 = hashlib.sha256(f.read()).hexdigest()
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        dist_info = _dist_info(names, "METADATA", path)
        metadata = email.parser.BytesParser().parsebytes(archive.read(f"{dist_info}/METADATA"))
        ep_name = f"{dist_info}/entry_points.txt"
        entry_points = archive.read(ep_name).decode("utf-8") if ep_name in names else None
        signed = f"{dist_info}/{SIGNATURE_FILE}"
        signature = archive.read(signed) if signed in names else None

        def read(member: str) -> bytes:
            return archive.read(member)

        return _describe(
            str(metadata["Name"]),
            str(metadata["Version"]),
            scan,
            entry_points,
            read,
            wheel_sha256,
            signature,
        )


def _dist_info(names: Iterable[str], member: str, wheel: str) -> str:
    """The ``*.dist-info`` directory of a wheel's member names that holds ``member``."""
    for name in names:
        if name.count("/") == 1 and name.endswith(f".dist-info/{member}"):
            return name.split("/")[0]
    raise ValueError(f"{wheel} is not a wheel: it has no *.dist-info/{member}")


def release_from_installed(metadata_path: str, distribution: str, version: str) -> Release:
    """Describe an installed distribution from its ``*.dist-info`` directory."""
    editable = editable_source(metadata_path)
    if editable is not None:
        raise ValueError(
            f"{distribution} {version} is an editable install of {editable}; "
            "lock a wheel or a regular install"
        )
    scan = scan_installed(metadata_path)
    base = os.path.dirname(os.path.realpath(metadata_path))
    hashes = {e.path: e.sha256 for e in scan.digest.entries} if scan.digest else {}

    def read(path: str) -> bytes:
        data = read_bytes(os.path.join(base, *path.split("/")), path, MANIFEST_LIMIT, follow=False)
        if hashlib.sha256(data).hexdigest() != hashes.get(path):
            raise ValueError(f"{path} changed after it was hashed")
        return data

    try:
        entry_points: str | None = read_text(
            os.path.join(metadata_path, "entry_points.txt"),
            "entry_points.txt",
            METADATA_LIMIT,
            follow=False,
        )
    except FileNotFoundError:
        entry_points = None
    try:
        signature: bytes | None = read_bytes(
            os.path.join(metadata_path, SIGNATURE_FILE),
            SIGNATURE_FILE,
            MANIFEST_LIMIT,
            follow=False,
        )
    except FileNotFoundError:
        signature = None
    return _describe(distribution, version, scan, entry_points, read, signature=signature)


def sign_wheel(
    wheel: str | os.PathLike[str],
    key: PrivateKey,
    ids: Mapping[str, str] | None = None,
    output: str | os.PathLike[str] | None = None,
) -> ReleaseStatement:
    """Sign the wheel's release statement with ``key``, in place or into ``output``.

    The signature goes into ``*.dist-info/mcs-signature.json`` and RECORD gains its row. A wheel
    already signed for the same statement gains this signature beside the others. The wheel
    is written whole, never through a symbolic link (:func:`mcs_host._files.replacing`).
    """
    source = os.fspath(wheel)
    release = release_from_wheel(source)
    if release.problems:
        raise ValueError(f"{source}: {'; '.join(release.problems)}")
    statement = release.statement(ids)
    payload = statement.model_dump_json().encode("utf-8")
    with zipfile.ZipFile(source) as archive:
        dist_info = _dist_info(archive.namelist(), "RECORD", source)
        signature_name = f"{dist_info}/{SIGNATURE_FILE}"
        envelope = Envelope(RELEASE_PAYLOAD_TYPE, payload)
        if signature_name in archive.namelist():
            existing = Envelope.from_json(archive.read(signature_name), signature_name)
            if existing.payload != payload:
                raise ValueError(f"{source} is already signed for a different statement")
            envelope = existing
        envelope = envelope.add_signatures([key])
        signature = (json.dumps(envelope.to_json(), indent=2) + "\n").encode("utf-8")
        _rewrite_wheel(archive, dist_info, signature_name, signature, output or source)
    return statement


def _rewrite_wheel(
    archive: zipfile.ZipFile,
    dist_info: str,
    signature_name: str,
    signature: bytes,
    destination: str | os.PathLike[str],
) -> None:
    record_name = f"{dist_info}/RECORD"
    rows = [
        row
        for row in csv.reader(io.StringIO(archive.read(record_name).decode("utf-8")))
        if row and row[0] not in (signature_name, record_name)
    ]
    digest = record_hash(hashlib.sha256(signature).digest())
    rows += [[signature_name, f"sha256={digest}", str(len(signature))], [record_name, "", ""]]
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    with (
        replacing(destination, "the signed wheel", mode=SHARED) as file,
        zipfile.ZipFile(file, "w", zipfile.ZIP_DEFLATED) as out,
    ):
        for info in archive.infolist():
            if info.filename not in (signature_name, record_name):
                out.writestr(info, archive.read(info.filename))
        template = archive.getinfo(record_name)
        for name, data in (
            (signature_name, signature),
            (record_name, text.getvalue().encode()),
        ):
            member = zipfile.ZipInfo(name, date_time=template.date_time)
            member.external_attr = template.external_attr
            member.compress_type = zipfile.ZIP_DEFLATED
            out.writestr(member, data)


class UnsignedReleaseError(ValueError):
    """A publisher key given to :func:`lock` did not sign a release it would trust by it."""

    label: str
    """The label of the driver or host plugin whose release it is."""

    def __init__(self, label: str, message: str) -> None:
        super().__init__(message)
        self.label = label


def publisher_signers(
    release: Release, keys: Sequence[str], driver: tuple[str, str, str] | None = None
) -> tuple[str, ...]:
    """The ids of ``keys``, each of which signed ``release``: a release statement of exactly
    its files, distribution and version (and, given ``driver`` as ``(label, module:object,
    id)``, of that driver). A release that carries no signature, one that a key of ``keys``
    did not sign, or a statement for anything else is a :class:`ValueError` saying which,
    naming the keys that did sign it."""
    what = f"{release.distribution} {release.version}"
    given = {key.keyid: key for key in map(PublicKey.parse, keys)}  # a ValueError names a key
    if release.signature is None:
        raise ValueError(
            f"{what} carries no publisher signature, so the key you gave "
            f"({', '.join(given)}) did not sign it"
        )
    try:
        envelope = Envelope.from_json(release.signature, SIGNATURE_FILE)
        if envelope.payload_type != RELEASE_PAYLOAD_TYPE:
            raise SignatureError("bad-signature", f"payload type {envelope.payload_type!r}")
        unsigned = [kid for kid, key in given.items() if not _signed_by(envelope, key)]
        statement = ReleaseStatement.model_validate_json(envelope.payload)
    except (SignatureError, ValidationError) as exc:
        raise ValueError(f"{what}: its publisher signature cannot be read: {exc}") from None
    if unsigned:
        signed = ", ".join(kid for kid, _ in envelope.signatures) or "no key"
        raise ValueError(
            f"{what} is signed by {signed}, not by the key you gave ({', '.join(unsigned)})"
        )
    mismatch = _statement_for(statement, release, driver)
    if mismatch is not None:
        raise ValueError(f"{what}: its signed release statement {mismatch}")
    return tuple(given)


def _signed_by(envelope: Envelope, key: PublicKey) -> bool:
    try:
        envelope.verify([key], 1, SIGNATURE_FILE)
    except SignatureError:
        return False
    return True


def _statement_for(
    statement: ReleaseStatement, release: Release, driver: tuple[str, str, str] | None
) -> str | None:
    """What in ``statement`` is not ``release`` (and ``driver`` of it), or ``None``."""
    digest = release.pin().digest
    if statement.digest != digest:
        return f"is for the files {statement.digest}, not these ({digest})"
    if normalize_name(statement.distribution) != release.project:
        return f"is for the distribution {statement.distribution}"
    if Version(statement.version) != Version(release.version):
        return f"is for version {statement.version}"
    if driver is None:
        return None
    label, value, driver_id = driver
    signed = {(d.label, d.object, d.id) for d in statement.drivers}
    if (label, value, driver_id) not in signed:
        return f"does not sign the driver {label} = {value} with id {driver_id}"
    return None


def release_from_candidates(
    candidates: Iterable[Candidate], progress: Callable[[int, int, str], None] | None = None
) -> list[Release]:
    """One release per installed distribution among ``candidates``; ``progress`` is told
    ``(done, total, what)`` before each."""
    seen: dict[str, Candidate] = {}
    for candidate in candidates:
        seen.setdefault(candidate.metadata_path, candidate)
    releases = []
    for done, c in enumerate(seen.values()):
        if progress is not None:
            progress(done, len(seen), f"hashing {c.distribution} {c.version}")
        releases.append(release_from_installed(c.metadata_path, c.distribution, c.version))
    return releases


def lock(
    registry: Registry,
    releases: Sequence[Release],
    *,
    labels: Sequence[str] = (),
    plugins: Sequence[str] = (),
    ids: Mapping[str, str] | None = None,
    declared: Mapping[str, str] | None = None,
    trust: Literal["verified", "reference", "community"] = "community",
    replace: bool = False,
    publisher_keys: Sequence[str] = (),
    build: bool = False,
) -> Registry:
    """``registry`` with pins for ``releases``.

    Each driver (entry point, or ``declared`` label -> ``module:object`` for a distribution
    that ships none) gets a driver pin under its id (from its manifest, or ``ids``); a host
    plugin only when ``plugins`` names its label (it runs in every command once pinned).
    With ``labels`` or ``plugins``, only the drivers and host plugins they name. A release
    with neither is pinned as a library. Existing entries keep their trust label, notes,
    keys and other releases; a driver id whose entry names another distribution is refused,
    as that is how a typosquat would be locked, and one whose entry is of the other group
    too. A version already pinned with another digest is refused unless ``replace`` is true
    (these files replace the pin and its builds) or ``build`` (they are another build of that
    version, a wheel for another Python or platform, kept beside its pin).
    ``publisher_keys`` are added to each driver entry written, named after the publisher in
    its trust manifest, once each is found to have signed the release
    (:func:`publisher_signers`; :class:`UnsignedReleaseError` otherwise): no pin is written
    for it then, so it and the later releases they sign load as ``signed``.
    """
    labels = labels_argument(labels, "lock() argument 'labels'")
    plugins = labels_argument(plugins, "lock() argument 'plugins'")
    drivers = dict(registry.drivers)
    libraries = dict(registry.libraries)
    for release in releases:
        if release.problems:
            raise ValueError(
                f"{release.distribution} {release.version}: {'; '.join(release.problems)}"
            )
        pin = release.pin()
        own = release.points(ENTRY_POINT_GROUP) + _declared_in(release, declared or {})
        entries = [(label, value, ENTRY_POINT_GROUP) for label, value in own]
        entries += [
            (label, value, PLUGIN_GROUP)
            for label, value in release.points(PLUGIN_GROUP)
            if label in plugins
        ]
        if not entries:
            library = libraries.get(release.project) or LibraryEntry(trust=trust)
            libraries[release.project] = _pinned(library, release, pin, replace, build)
            continue
        for label, value, group in entries:
            if group == ENTRY_POINT_GROUP and (labels or plugins) and label not in labels:
                continue
            # a host plugin that shares a driver's label has no meta of its own
            shared = group == PLUGIN_GROUP and any(label == name for name, _ in own)
            meta = None if shared else release.metas.get(label)
            driver_id = meta.id if meta is not None else (ids or {}).get(label)
            if driver_id is None and label not in release.unnamed:
                driver_id = _own_id(drivers, release.project, label, group)
            if driver_id is None:
                raise ValueError(release.no_id(label, value))
            entry = drivers.get(driver_id) or DriverEntry(
                distribution=release.project,
                label=label,
                object=value,
                trust=trust,
                group=group,
            )
            if entry.distribution != release.project:
                raise RegistryError(
                    "typosquat",
                    f"driver id {driver_id} belongs to {entry.distribution} in the registry, "
                    f"not to {release.project}",
                )
            if entry.group != group:
                raise ValueError(
                    f"driver id {driver_id} is {_kind(entry.group)} {entry.label!r} in the "
                    f"registry, not {_kind(group)}: give {label!r} an id of its own with "
                    f"--id {label}=ID"
                )
            if publisher_keys:
                try:
                    publisher_signers(release, publisher_keys, (label, value, driver_id))
                except ValueError as exc:
                    raise UnsignedReleaseError(label, str(exc)) from None
                trusted = _signed(entry, release, pin, replace)
            else:
                trusted = _pinned(entry, release, pin, replace, build)
            drivers[driver_id] = trusted.model_copy(
                update={"object": value, "publisher_keys": _keys(entry, publisher_keys, meta)}
            )
    return registry.model_copy(
        update={
            "drivers": dict(sorted(drivers.items())),
            "libraries": dict(sorted(libraries.items())),
        }
    )


_Entry = TypeVar("_Entry", DriverEntry, LibraryEntry)


def _pinned(
    entry: _Entry, release: Release, pin: Pin, replace: bool, build: bool = False
) -> _Entry:
    """``entry`` with ``pin`` for the release's version. Files the version's pin or one of its
    builds already has change nothing (the pin keeps its provenance); other files are refused,
    unless ``replace`` (they replace the pin and its builds) or ``build`` (they are added as
    another build)."""
    number: str = release.version
    wanted = Version(number)
    known = entry.pin_for(number, pin.digest)
    if known is not None and known.digest == pin.digest:
        return entry  # these files are pinned already, with what was recorded for them
    if known is not None and build:
        spelled = {Version(v): v for v in entry.releases}[wanted]  # as the registry has it
        added = {**entry.builds, spelled: (*entry.builds_of(number), pin)}
        return entry.model_copy(update={"builds": added})
    if known is not None and not replace:
        raise RegistryError(
            "digest-mismatch",
            f"{release.distribution} {number} is already pinned as "
            f"{known.digest}, these files are {pin.digest}; a rebuild with other "
            "contents should get a new version (or pin these files instead: mcs-host lock "
            "--replace; or, for a wheel of another Python or platform, beside it: mcs-host "
            "lock --build)",
        )
    releases = {v: p for v, p in entry.releases.items() if Version(v) != wanted}
    builds = {v: b for v, b in entry.builds.items() if Version(v) != wanted}
    return entry.model_copy(update={"releases": {**releases, number: pin}, "builds": builds})


def _signed(entry: DriverEntry, release: Release, pin: Pin, replace: bool) -> DriverEntry:
    """``entry`` trusting ``release`` by its publisher's signature: no pin is written (a pin
    decides before a signature). Its pin of this version stays when it is of these files;
    one of other files is refused, as :func:`_pinned` refuses it, unless ``replace``, which
    removes it."""
    known = entry.pin_for(release.version, pin.digest)
    if known is None or known.digest == pin.digest:
        return entry
    _pinned(entry, release, pin, replace)  # refused unless replace
    wanted = Version(release.version)
    kept = {v: p for v, p in entry.releases.items() if Version(v) != wanted}
    builds = {v: b for v, b in entry.builds.items() if Version(v) != wanted}
    return entry.model_copy(update={"releases": kept, "builds": builds})


def _keys(
    entry: DriverEntry, keys: Sequence[str], meta: DriverMeta | None
) -> tuple[PublisherKey, ...]:
    known = {k.public_key.keyid: k for k in entry.publisher_keys}
    name = meta.trust.publisher if meta is not None and meta.trust is not None else None
    for key in keys:
        keyid = PublicKey.parse(key).keyid  # a ValueError that names the key
        known.setdefault(keyid, PublisherKey(key=key, name=name))
    return tuple(known.values())


def _declared_in(release: Release, declared: Mapping[str, str]) -> list[tuple[str, str]]:
    """The declared ``(label, module:object)`` whose module this release ships."""
    listed = {e.path for e in release.scan.digest.entries} if release.scan.digest else set()
    found = []
    for label, value in declared.items():
        _, problem = resolve_module(value.partition(":")[0].strip(), listed)
        if problem is None:
            found.append((label, value))
    return found


def _kind(group: str) -> str:
    """What an entry point of ``group`` is, with its article."""
    return "a host plugin" if group == PLUGIN_GROUP else "a driver"
