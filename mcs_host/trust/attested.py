"""Provenance kept with a registry: the publisher a release entry records, what each pin's
PEP 740 provenance proved, and the provenance itself, stored beside the registry file.

:func:`attest` records a verified provenance on a pin: its summary on the pin, its publisher
on the entry (the first one recorded is trusted from then on: trust on first use of an
identity, not of bytes). A release attested by another publisher is refused
(``publisher-changed``, naming both) unless the caller passes the new identity the user
accepted; the entry then keeps the old one as a former publisher, which still attests the
releases before the change. :func:`store_provenance` writes the provenance to
``<stem>.provenance/<filename>.provenance`` beside the registry, bound to the pin by its sha256
(so a signed registry's signature covers it too); :func:`record_provenance` does both.
:func:`refuse_unattested` refuses what a lock pinned without provenance under an entry that
records a publisher (``provenance-missing``: a downgrade), as verification does.
:func:`recheck` verifies every stored provenance again, offline.

Importing this module imports no Sigstore (``provenance`` imports it on its first
verification, which only :func:`recheck` asks for); ``list``, ``verify``, ``load`` and
``serve`` do not import this module, ``verify --provenance`` does.

One module: recording a provenance, storing it, refusing a pin without it and checking it
again apply one rule (whose publisher a release's provenance must prove) to one layout.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Literal, TypeAlias

from packaging.utils import canonicalize_name
from packaging.version import Version

from mcs_host._files import (
    MANIFEST_LIMIT,
    SHARED,
    InputError,
    WriteRefusedError,
    read_bytes,
    write_atomic,
)
from mcs_host._reasons import REASONS

from .provenance import (
    ProvenanceError,
    ProvenanceReason,
    VerifiedProvenance,
    provenance_fix,
    verify_provenance_sha256,
)
from .publishers import PublisherIdentity, identity_mismatch
from .registry import RegistryError, TrustIndex
from .registry_format import (
    DriverEntry,
    FormerPublisher,
    LibraryEntry,
    Pin,
    ProvenanceSummary,
    Publisher,
    Registry,
    ReleaseEntry,
    distribution_file,
)

# exported once mcs_host/__init__.pyi names them: Rechecked, attest, provenance_directory,
# provenance_file, recheck, record_provenance, refuse_unattested, store_provenance
__all__: list[str] = []

StoredProblem = Literal["stored-missing", "stored-changed", "stored-unreadable", "summary-mismatch"]
"""What :func:`recheck` finds wrong with a stored provenance before Sigstore is asked, or with
the summary its pin records."""

STORED_FIXES: Mapping[StoredProblem, str] = MappingProxyType(
    {
        "stored-missing": "put the registry's .provenance directory back beside it (whoever "
        "publishes a shared registry ships it with it); without it the pin cannot be checked",
        "stored-changed": "restore the file from where the registry came, or remove it and "
        "pin the release again with its provenance; until then do not trust that pin",
        "stored-unreadable": "replace what the message names with the provenance file itself",
        "summary-mismatch": "the registry's pin was changed after it was recorded: restore "
        "the registry from where it came",
    }
)
"""What to do about each :data:`StoredProblem`."""

Problem: TypeAlias = ProvenanceReason | StoredProblem | Literal["publisher-changed"]
"""What :func:`recheck` can find wrong with one stored provenance."""

_SUFFIX = ".provenance"


def provenance_directory(registry: str | os.PathLike[str]) -> Path:
    """Where the provenance of the pins of the registry file ``registry`` is stored: beside
    it, ``<stem>.provenance`` (``registry.json`` -> ``registry.provenance``)."""
    path = Path(registry)
    directory = path.with_name(f"{path.stem if path.suffix else path.name}{_SUFFIX}")
    return directory if directory != path else path.with_name(f"{path.name}{_SUFFIX}")


def provenance_file(registry: str | os.PathLike[str], filename: str) -> Path:
    """The stored provenance of the distribution file ``filename`` of ``registry``'s pins; a
    :class:`ValueError` when ``filename`` is not a wheel's or sdist's file name."""
    distribution_file(filename)
    return provenance_directory(registry) / f"{filename}{_SUFFIX}"


def attest(
    registry: Registry,
    entry_id: str,
    version: str,
    verified: VerifiedProvenance,
    provenance: bytes,
    *,
    accept: PublisherIdentity | None = None,
) -> Registry:
    """``registry`` with the pin of ``version`` under ``entry_id`` (a driver id, or a
    library's name) carrying ``verified``, the verification of the ``provenance`` bytes.

    The entry's first provenance sets its publisher (from then on, its pins without
    provenance are refused: ``provenance-missing``). A later one attested by another
    (another repository, workflow or environment, or another repository under the same
    name) is refused with ``publisher-changed``, unless ``accept`` is the new identity the
    user confirmed: the old publisher then stays as a former one for the releases before
    this one. Raises :class:`~mcs_host.trust.registry.RegistryError` for that, a
    :class:`ValueError` when the pin is missing or is not of the file attested."""
    kind, entry = _entry(registry, entry_id)
    name = entry.distribution if isinstance(entry, DriverEntry) else entry_id
    what = f"{name} {version}"
    key = next((v for v in entry.releases if Version(v) == Version(version)), None)
    if key is None:
        raise ValueError(f"{what} is not pinned in the registry: pin it first, then record it")
    pin = entry.releases[key]
    if hashlib.sha256(provenance).hexdigest() != verified.provenance_sha256:
        raise ValueError(f"{what}: the provenance given is not the one verified")
    _check_file(what, name, version, pin, verified)
    proven = Publisher.proven(verified.identity, verified.repository_id, verified.owner_id)
    publisher, formers = entry.publisher or proven, entry.former_publishers
    problem = entry.publisher_problem(version, proven)
    if problem is not None:
        assert entry.publisher is not None  # a problem needs a recorded publisher
        _accepted(what, problem, proven, accept)
        later = [
            v for v, p in entry.releases.items() if p.provenance and Version(v) >= Version(key)
        ]
        if later:
            raise ValueError(
                f"{what}: a new publisher is accepted only for a release after every attested "
                f"one, and {max(later, key=Version)} is pinned with its provenance"
            )
        formers = (*formers, FormerPublisher(**entry.publisher.model_dump(), until=key))
        publisher = proven
    summary = ProvenanceSummary(
        filename=verified.filename,
        sha256=verified.sha256,
        provenance_sha256=verified.provenance_sha256,
        publisher=proven,
        log_index=verified.log_index,
        integrated_time=verified.integrated_time,
        ref=verified.ref,
        commit=verified.commit,
        trusted_root_sha256=verified.trusted_root_sha256,
    )
    updated = entry.model_copy(
        update={
            "releases": {**entry.releases, key: pin.model_copy(update={"provenance": summary})},
            "publisher": publisher,
            "former_publishers": formers,
        }
    )
    group = {**getattr(registry, kind), entry_id: updated}
    return Registry.model_validate(registry.model_copy(update={kind: group}).model_dump())


def store_provenance(registry: str | os.PathLike[str], filename: str, provenance: bytes) -> Path:
    """Write ``provenance`` as the stored provenance of ``filename`` beside the registry file
    ``registry`` (:func:`provenance_file`), replacing it whole (never through a symbolic
    link; a directory that is one is refused); its path."""
    path = provenance_file(registry, filename)
    if path.parent.is_symlink():
        raise WriteRefusedError(
            str(path.parent), "is a symbolic link: provenance is stored in a real directory"
        )
    write_atomic(path, provenance, "the stored provenance", mode=SHARED)
    return path


def record_provenance(
    registry: Registry,
    path: str | os.PathLike[str],
    entry_id: str,
    version: str,
    verified: VerifiedProvenance,
    provenance: bytes,
    *,
    accept: PublisherIdentity | None = None,
) -> Registry:
    """:func:`attest`, then :func:`store_provenance` beside the registry file ``path``: the
    registry to save there (the caller saves it; the provenance is written first, so a saved
    registry never names a file that is not there)."""
    attested = attest(registry, entry_id, version, verified, provenance, accept=accept)
    store_provenance(path, verified.filename, provenance)
    return attested


def refuse_unattested(before: Registry, after: Registry) -> None:
    """Refuse a pin ``after`` adds or changes under an entry that records a publisher,
    without provenance (``provenance-missing``: a downgrade) or with another publisher's
    (``publisher-changed``), as verification would. Raises
    :class:`~mcs_host.trust.registry.RegistryError` naming the release."""
    for entries, earlier in ((after.drivers, before.drivers), (after.libraries, before.libraries)):
        for key, entry in entries.items():
            if entry.publisher is None:
                continue
            old = earlier.get(key)
            name = entry.distribution if isinstance(entry, DriverEntry) else key
            for version, pin in entry.releases.items():
                if old is not None and old.pin_for(version) == pin:
                    continue
                if pin.provenance is None:
                    raise RegistryError(
                        "provenance-missing",
                        f"{name} {version} was not pinned: it has no provenance, and the "
                        f"registry records {entry.publisher} as its publisher: a release "
                        "without its publisher's attestation after attested ones is a "
                        f"downgrade; {_fix('provenance-missing', name)}",
                    )
                problem = entry.publisher_problem(version, pin.provenance.publisher)
                if problem is not None:
                    raise RegistryError(
                        "publisher-changed",
                        f"{name} {version}: {problem}; {_fix('publisher-changed', name)}",
                    )


def _fix(code: str, distribution: str) -> str:
    """The fix of reason ``code`` for ``distribution``, as a refusal's message ends."""
    return REASONS[code].fix_for(None, distribution)


@dataclass(frozen=True, slots=True)
class Rechecked:
    """One stored provenance verified again (:func:`recheck`)."""

    distribution: str
    version: str
    filename: str
    """The distribution file it attests."""
    publisher: str
    """The publisher the pin's summary records."""
    path: str | None
    """The stored provenance read; ``None`` when none is there."""
    problem: Problem | None
    """What failed; ``None`` when it verified again and matches its pin and entry."""
    message: str

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def fix(self) -> str | None:
        """What to do about :attr:`problem`."""
        if self.problem is None:
            return None
        if self.problem == "publisher-changed":
            return _fix("publisher-changed", self.distribution)
        if self.problem in STORED_FIXES:
            return STORED_FIXES[self.problem]  # type: ignore[index]
        return provenance_fix(self.problem)  # type: ignore[arg-type]


def recheck(
    index: TrustIndex, progress: Callable[[int, int, str], None] | None = None
) -> tuple[Rechecked, ...]:
    """Verify again, offline, every provenance the pins of ``index`` record: the stored file
    (beside one of the registries ``index`` was read from) must have the sha256 its pin
    records, prove with Sigstore the file name and sha256 the pin records, prove what the
    summary says, and its publisher must be the entry's. ``progress`` is told
    ``(done, total, what)`` before each. Imports Sigstore (the attest extra)."""
    wanted = list(_attested(index))
    checked = []
    for done, (name, entry, version, summary) in enumerate(wanted):
        if progress is not None:
            progress(done, len(wanted), f"checking the provenance of {name} {version}")
        checked.append(_recheck(index.sources, name, entry, version, summary))
    return tuple(checked)


def _attested(index: TrustIndex) -> Iterable[tuple[str, ReleaseEntry, str, ProvenanceSummary]]:
    """Each release of ``index`` whose pin records provenance, once."""
    seen: set[tuple[str, Version, str]] = set()
    entries: list[tuple[str, ReleaseEntry]] = [
        (entry.distribution, entry) for entry in index.entries.values()
    ]
    entries += list(index.libraries.items())
    for name, entry in sorted(entries, key=lambda item: item[0]):
        for version, pin in sorted(entry.releases.items(), key=lambda item: Version(item[0])):
            summary = pin.provenance
            if summary is None or (name, Version(version), summary.provenance_sha256) in seen:
                continue
            seen.add((name, Version(version), summary.provenance_sha256))
            yield name, entry, version, summary


def _recheck(
    registries: Iterable[str],
    name: str,
    entry: ReleaseEntry,
    version: str,
    summary: ProvenanceSummary,
) -> Rechecked:
    """One stored provenance verified again (:func:`recheck`)."""
    path, data, stored, message = _stored(registries, name, version, summary)
    problem: Problem | None = stored
    if data is not None:
        problem, message = None, ""
        try:
            verified = verify_provenance_sha256(summary.sha256, summary.filename, data, None)
        except ProvenanceError as error:
            problem, message = error.reason, f"{path}: {error}"
    if data is not None and problem is None:
        proven = Publisher.proven(verified.identity, verified.repository_id, verified.owner_id)
        differs = [
            f"{part} {found} where the pin records {recorded}"
            for part, found, recorded in (
                ("publisher", _numbered(proven), _numbered(summary.publisher)),
                ("log index", verified.log_index, summary.log_index),
                ("integrated time", verified.integrated_time, summary.integrated_time),
                ("ref", verified.ref, summary.ref),
                ("commit", verified.commit, summary.commit),
            )
            if found != recorded
        ]
        changed = entry.publisher_problem(version, proven)
        if differs:
            problem, message = "summary-mismatch", f"{path}: it proves {'; '.join(differs)}"
        elif changed is not None:
            problem, message = "publisher-changed", f"{name} {version}: {changed}"
        else:
            message = f"attested by {proven} (Rekor log index {verified.log_index})"
    shown = str(path) if path is not None else None
    return Rechecked(
        name, version, summary.filename, str(summary.publisher), shown, problem, message
    )


def _stored(
    registries: Iterable[str], name: str, version: str, summary: ProvenanceSummary
) -> tuple[Path | None, bytes | None, StoredProblem | None, str]:
    """The stored provenance of ``summary``: the first file beside one of ``registries``
    whose sha256 is the one recorded, its bytes; else the problem, naming the file."""
    expected = summary.provenance_sha256
    seen: list[Path] = []
    first: tuple[Path, StoredProblem, str] | None = None
    for registry in registries:
        path = provenance_file(registry, summary.filename)
        seen.append(path)
        try:
            data = read_bytes(path, "the stored provenance", MANIFEST_LIMIT, follow=False)
        except FileNotFoundError:
            continue
        except (InputError, OSError) as error:
            first = first or (path, "stored-unreadable", str(error))
            continue
        found = hashlib.sha256(data).hexdigest()
        if found == expected:
            return path, data, None, ""
        first = first or (
            path,
            "stored-changed",
            f"{path}: its sha256 is {found}, not {expected}, the one the pin of {name} "
            f"{version} records: it changed after it was recorded",
        )
    if first is not None:
        return first[0], None, first[1], first[2]
    where = ", ".join(str(p) for p in seen) or "no registry was read"
    return (
        None,
        None,
        "stored-missing",
        f"{summary.filename}: the pin of {name} {version} records its provenance, and none "
        f"is stored beside the registries ({where})",
    )


def _entry(registry: Registry, entry_id: str) -> tuple[str, DriverEntry | LibraryEntry]:
    """Which group of ``registry`` holds ``entry_id`` (``drivers`` or ``libraries``), and
    the entry; a :class:`ValueError` when neither or both do."""
    found = [
        (kind, entries[entry_id])
        for kind, entries in (("drivers", registry.drivers), ("libraries", registry.libraries))
        if entry_id in entries
    ]
    if len(found) != 1:
        where = "has no" if not found else "has both a driver and a library"
        raise ValueError(f"the registry {where} entry {entry_id!r}")
    kind, entry = found[0]
    return kind, entry


def _check_file(what: str, name: str, version: str, pin: Pin, verified: VerifiedProvenance) -> None:
    """Refuse a provenance of another distribution or version than the pin's, or of a wheel
    the pin was not made from."""
    attested_name, attested_version = distribution_file(verified.filename)
    if attested_name != canonicalize_name(name) or attested_version != Version(version):
        raise ValueError(
            f"{what}: the provenance attests {verified.filename}, a file of another "
            "distribution or version"
        )
    if not verified.filename.endswith(".whl"):
        return
    if pin.wheel_sha256 is None:
        raise ValueError(
            f"{what} was pinned from its installed files, not from {verified.filename}: pin "
            "it from the wheel its provenance attests (`mcs-host lock --wheel FILE`)"
        )
    if pin.wheel_sha256 != verified.sha256:
        raise ValueError(
            f"{what} was pinned from a wheel with sha256 {pin.wheel_sha256}; the provenance "
            f"attests {verified.filename} with sha256 {verified.sha256}"
        )


def _accepted(what: str, problem: str, proven: Publisher, accept: PublisherIdentity | None) -> None:
    """Refuse the change of publisher ``problem`` describes unless ``accept`` states the
    ``proven`` one."""
    if accept is None:
        raise RegistryError(
            "publisher-changed",
            f"{what}: {problem}; accept {proven} only once its publisher confirms the change",
        )
    mismatch = identity_mismatch(accept, proven.identity)
    if mismatch is not None:
        raise RegistryError(
            "publisher-changed",
            f"{what}: {problem}; the publisher accepted, {accept}, is not it either: "
            f"{mismatch.sentence}",
        )


def _numbered(publisher: Publisher) -> str:
    """A publisher with the forge's numbers it names."""
    numbers = f"repository {publisher.repository_id}, owner {publisher.owner_id}"
    return f"{publisher} ({numbers})"
