"""The wheels ``mcs-host add`` installs, downloaded by the user's own pip, and what their PEP 740
provenance proves: add's rules of identity.

The distribution added is verified against the identity the user states (``--publisher``);
else against the publisher the registry records for it (trust on first use of an identity, not
of bytes: a release attested by another is refused, ``publisher-changed``, until the user
states the new identity and confirms it); else the identity its certificate proves is shown
for the user to confirm. What it needs is verified as its certificate proves it. A release
without provenance is refused where the user stated a publisher or the registry records one
(``provenance-missing``), and otherwise pinned from the downloaded wheel's bytes. Sigstore is
imported by the first verification; nothing here writes outside the download directory.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from mcs_host._files import InputError, read_bytes
from mcs_host._reasons import REASONS
from mcs_host.discovery import normalize_name
from mcs_host.trust.downloading import PipConfig, PipError, download, download_all
from mcs_host.trust.package_index import PROVENANCE_LIMIT, PackageIndexError, fetch_provenance
from mcs_host.trust.provenance import ProvenanceError, VerifiedProvenance, verify_provenance
from mcs_host.trust.publishers import PublisherIdentity
from mcs_host.trust.registry import DriverEntry, Publisher, Registry, ReleaseEntry
from mcs_host.trust.release import Release, release_from_wheel

from .add_records import AddError, AddRequest, Confirmation, Step

# used by mcs-host add: Source, dependency_source, downloaded, recorded_publisher,
# target_source
__all__: list[str] = []

_MISMATCHES = frozenset({"repository-mismatch", "workflow-mismatch", "environment-mismatch"})


@dataclass(frozen=True, slots=True)
class Source:
    """A downloaded wheel, pinned from its bytes, with what its provenance proved."""

    wheel: Path
    release: Release
    sha256: str
    """The wheel file's sha256, hex."""
    provenance: bytes | None
    """The provenance verified; ``None`` when the index serves none."""
    verified: VerifiedProvenance | None
    accept: PublisherIdentity | None = None
    """The new publisher the user stated and confirmed, replacing the registry's."""

    @property
    def name(self) -> str:
        """The PEP 503 name."""
        return self.release.project


def prefetched(requirements: Sequence[str], dest: Path, request: AddRequest) -> dict[str, Path]:
    """The wheels of ``requirements`` (two or more) that one run of the user's pip downloads
    into the empty ``dest``: requirement -> wheel. Empty when that run fails: each is then
    downloaded alone by :func:`downloaded`, whose error names the one at fault."""
    if len(requirements) < 2:
        return {}
    try:
        wheels = download_all(requirements, dest, python=request.python, env=request.env)
    except PipError:
        shutil.rmtree(dest, ignore_errors=True)
        return {}
    return dict(zip(requirements, wheels, strict=True))


def downloaded(
    requirement: str, dest: Path, request: AddRequest, wheel: Path | None = None
) -> tuple[Path, Release]:
    """The wheel of ``requirement`` that the user's pip downloads into the empty ``dest``
    (or ``wheel``, which :func:`prefetched` downloaded), and its release (its files, pinned
    from the wheel); an :class:`AddError` naming it."""
    name = _named(requirement)
    try:
        if wheel is None:
            wheel = download(requirement, dest, python=request.python, env=request.env)
        release = release_from_wheel(wheel)
        release.pin()  # a wheel whose files cannot all be read cannot be pinned
    except PipError as error:
        raise AddError(
            name,
            "download",
            str(error),
            f"check the name and version on your index: `pip download --no-deps --only-binary "
            f":all: '{requirement}'` shows what pip finds",
        ) from None
    except (OSError, ValueError) as error:
        raise AddError(
            name, "download", f"the downloaded wheel cannot be read: {error}", _ASK_PUBLISHER
        ) from None
    if release.problems:
        raise AddError(
            release.distribution, "download", "; ".join(release.problems), _ASK_PUBLISHER
        )
    return wheel, release


def _named(requirement: str) -> str:
    """The project a requirement names (the requirement itself when it is not one)."""
    try:
        return Requirement(requirement).name
    except InvalidRequirement:
        return requirement


_ASK_PUBLISHER = "ask its publisher for a release whose wheel is whole; nothing was installed"


def recorded_publisher(
    registry: Registry, project: str, declared: Mapping[str, DriverEntry] | None = None
) -> Publisher | None:
    """The publisher ``registry`` (or a registry the configuration reads, whose driver
    entries are ``declared``) records for the distribution ``project``, if any."""
    return next((e.publisher for e in _entries(registry, project, declared) if e.publisher), None)


def _entries(
    registry: Registry, project: str, declared: Mapping[str, DriverEntry] | None = None
) -> list[ReleaseEntry]:
    """The entries of ``project``: its drivers' and its library's in ``registry``, then its
    drivers' among ``declared``."""
    entries: list[ReleaseEntry] = [
        e for e in registry.drivers.values() if e.distribution == project
    ]
    library = registry.libraries.get(project)
    entries += [library] if library is not None else []
    entries += [e for e in (declared or {}).values() if e.distribution == project]
    return entries


def target_source(
    wheel: Path, release: Release, request: AddRequest, registry: Registry, pip: PipConfig
) -> Source:
    """The distribution asked for, with its provenance verified by add's rules of identity
    (this module's docstring); an :class:`AddError` when they refuse it."""
    sha256 = _sha256(wheel)
    name, version = release.distribution, release.version
    stated = request.publisher
    recorded = recorded_publisher(registry, release.project, request.declared)
    provenance = _provenance(wheel, release, sha256, pip, request.provenance)
    if provenance is None:
        if stated is not None:
            raise AddError(
                name,
                "provenance",
                f"{wheel.name} has no PEP 740 provenance on your index, so nothing proves it "
                f"was published by {stated}",
                "ask its publisher to upload with Trusted Publishing (PyPI then attests each "
                "file), or give the provenance with --provenance FILE; to pin it from its "
                "bytes instead, add it without --publisher",
            )
        if recorded is not None:
            raise _missing(name, version, recorded)
        return Source(wheel, release, sha256, None, None)
    verified = _verified(wheel, release, provenance, stated)
    proven = Publisher.proven(verified.identity, verified.repository_id, verified.owner_id)
    if recorded is None:
        if stated is None:
            _confirmed(request, Confirmation(name, version, str(proven), None))
        return Source(wheel, release, sha256, provenance, verified)
    entries = _entries(registry, release.project, request.declared)
    problem = next((p for e in entries if (p := e.publisher_problem(version, proven))), None)
    if problem is None:
        return Source(wheel, release, sha256, provenance, verified)
    if stated is None:
        raise AddError(
            name,
            "identity",
            f"{name} {version}: {problem}",
            f"do not add it unless its publisher confirms the change; then accept "
            f"{verified.identity}: `mcs-host add {release.project}=={version} --publisher "
            f"{verified.identity}` (it shows both and asks; --yes for scripts)",
            "publisher-changed",
        )
    _confirmed(request, Confirmation(name, version, str(proven), str(recorded)))
    return Source(wheel, release, sha256, provenance, verified, stated)


def dependency_source(
    wheel: Path, release: Release, registry: Registry, pip: PipConfig, needed_by: str
) -> Source:
    """A distribution that the one added needs, with its provenance verified as its
    certificate proves it, when the index has one; refused without one when the registry
    records its publisher (``provenance-missing``). A change of its publisher is refused
    when it is recorded (:func:`mcs_host.trust.attested.attest`)."""
    sha256 = _sha256(wheel)
    provenance = _provenance(wheel, release, sha256, pip, None)
    if provenance is None:
        recorded = recorded_publisher(registry, release.project)
        if recorded is not None:
            error = _missing(release.distribution, release.version, recorded)
            raise AddError(
                error.distribution,
                error.step,
                f"{needed_by} needs it: {error}",
                error.fix,
                error.reason,
            )
        return Source(wheel, release, sha256, None, None)
    return Source(wheel, release, sha256, provenance, _verified(wheel, release, provenance, None))


def _sha256(wheel: Path) -> str:
    with wheel.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def _provenance(
    wheel: Path, release: Release, sha256: str, pip: PipConfig, given: Path | None
) -> bytes | None:
    """The provenance ``given`` (``--provenance``), else the one the user's indexes serve
    for the wheel; ``None`` when they serve none."""
    if given is not None:
        try:
            return read_bytes(given, "the provenance", PROVENANCE_LIMIT)
        except (OSError, InputError) as error:
            raise AddError(
                release.distribution,
                "provenance",
                f"--provenance {given}: {error}",
                "give the provenance file of this very wheel (its index's Integrity API serves it)",
            ) from None
    try:
        return fetch_provenance(
            wheel.name,
            release.distribution,
            release.version,
            pip.indexes,
            sha256=sha256,
            cert=pip.cert,
        )
    except PackageIndexError as error:
        raise AddError(
            release.distribution,
            "provenance",
            f"its provenance could not be fetched: {error}",
            "check your network and your index settings (`pip config list`), then run this "
            "again; or give the provenance with --provenance FILE",
        ) from None


def _verified(
    wheel: Path, release: Release, provenance: bytes, stated: PublisherIdentity | None
) -> VerifiedProvenance:
    """``provenance`` verified for ``wheel`` (by ``stated``, when given); an
    :class:`AddError` naming the check that refused it."""
    try:
        return verify_provenance(wheel, wheel.name, provenance, stated)
    except ProvenanceError as error:
        step: Step = "identity" if error.reason in _MISMATCHES else "provenance"
        raise AddError(release.distribution, step, str(error), error.fix, error.reason) from None


def _missing(name: str, version: str, recorded: Publisher) -> AddError:
    """The refusal of a release without provenance under a recorded publisher."""
    return AddError(
        name,
        "provenance",
        f"{name} {version} has no provenance on your index, and the registry records "
        f"{recorded} as its publisher: a release without its publisher's attestation after "
        "attested ones is a downgrade",
        REASONS["provenance-missing"].fix_for(None, normalize_name(name)),
        "provenance-missing",
    )


def _confirmed(request: AddRequest, asked: Confirmation) -> None:
    """Return when the user confirms ``asked`` (``--yes``, or on the terminal); else an
    :class:`AddError` saying how to confirm it."""
    if request.yes:
        return
    what = f"{asked.distribution} {asked.version}"
    if asked.recorded is not None:
        said = f"{what} is attested by {asked.proven}, not by {asked.recorded}, the publisher "
        said += "the registry records"
        how = f"confirm the change with --yes (with --publisher {asked.proven})"
    else:
        said = f"{what} is attested by {asked.proven}; no publisher is recorded for it yet"
        how = f"confirm it with --yes, or state it: --publisher {asked.proven}"
    if request.ask is None:
        raise AddError(
            asked.distribution,
            "identity",
            f"{said}, and there is no terminal to confirm it on",
            f"check that {asked.proven} is its publisher (its project page links the "
            f"repository), then {how}",
            "publisher-changed" if asked.recorded is not None else None,
        )
    if not request.ask(asked):
        raise AddError(
            asked.distribution,
            "identity",
            f"{said}; you did not confirm it",
            f"add it again once you have checked that {asked.proven} is its publisher",
        )
