"""Dependencies: code a driver pulls in must be verified too, or at least seen.

Before import, :func:`check_dependencies` walks the driver distribution's requirements (and
those the registry says it needs without declaring them), transitively. A distribution of the
host's own installation (mcs-host and what it requires, as the running host resolved them; see
:mod:`mcs_host.trust._origins`) is trusted as the host is — by its installed copy, never by its
name; any other is verified like a driver: its installed files, then the registry's
``libraries`` pins. :func:`judge_dependencies` says what the trust policy makes of the checks,
for ``load`` and ``verify`` alike. A pinned dependency's modules are imported through the
verified importer as well; an unverified one the policy allows is imported from its files,
which the import gate is told to allow.

:func:`unverified_imports` names modules loaded from neither the standard library, the host's
installation nor verified bytes, judged by where their files are.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement

from mcs_host._reasons import known_reason
from mcs_host.discovery import (
    installed_copies,
    installed_distribution,
    normalize_name,
    parse_requirement,
    requires_dist,
)

from . import _origins
from ._loaders import is_verified_module
from .digest import FileEntry, TreeDigest, TreeScan, editable_source, scan_installed
from .modules import ModuleFile, extension_module_files, module_files
from .registry import TrustIndex
from .registry_format import ReleaseEntry
from .verification import TrustPolicy, release_decision

__all__ = [
    "DependencyCheck",
    "DependencyJudgment",
    "Needed",
    "check_dependencies",
    "check_distribution",
    "dependency_closure",
    "host_environment",
    "judge_dependencies",
    "unverified_imports",
]

DependencyStatus = Literal["pinned", "unverified", "rejected", "revoked", "missing"]


@dataclass(frozen=True, slots=True)
class DependencyCheck:
    """What was found about one distribution a driver needs."""

    distribution: str
    """The PEP 503 name."""
    required_by: str
    declared: bool
    """Whether ``required_by`` declares it (``False``: only the registry says it is needed)."""
    status: DependencyStatus
    reason: str
    message: str
    version: str | None = None
    location: str | None = None
    metadata_path: str | None = None
    modules: tuple[ModuleFile, ...] = ()
    extensions: tuple[ModuleFile, ...] = ()
    """Its verified extension modules."""
    libraries: tuple[FileEntry, ...] = ()
    """Its verified shared objects, which its extension modules may link."""
    files: tuple[str, ...] = ()
    """Its installed files (paths under ``location``), read for a dependency the policy may
    allow though unverified."""
    provenance: str | None = None
    """The publisher whose provenance its pin carries; ``None`` when it carries none."""

    def __post_init__(self) -> None:
        if self.reason:  # empty only in the template the checks are made from
            known_reason(self.reason)


@dataclass(frozen=True, slots=True)
class Needed:
    """One distribution of what a distribution needs, found from metadata alone."""

    distribution: str
    """The PEP 503 name."""
    required_by: str
    declared: bool
    """Whether ``required_by`` declares it (``False``: only the registry says it is needed)."""
    found: tuple[str, str, str, str] | None
    """Its installed copy on the search path, ``(name, version, *.dist-info, site
    directory)``; ``None`` when it is not installed."""


def host_environment() -> frozenset[str]:
    """mcs-host and every distribution it requires, transitively: the running host's own
    installation (a distribution that only says it is mcs-host is not among them)."""
    return frozenset(_origins.host_install().distributions)


def check_dependencies(
    distribution: str,
    metadata_path: str,
    index: TrustIndex,
    search_path: Sequence[str],
    undeclared: Iterable[str] = (),
    host: Mapping[str, str] | None = None,
    scans: dict[str, TreeScan] | None = None,
) -> tuple[DependencyCheck, ...]:
    """Every distribution the driver in ``metadata_path`` needs, outside the host's own.

    ``host`` maps the host's distributions to their ``*.dist-info`` (default: the running
    host's); a dependency is the host's only when the copy found is that very one.
    """
    scans = {} if scans is None else scans
    return tuple(
        _check(n.distribution, n.required_by, n.declared, index, scans, n.found)
        for n in dependency_closure(distribution, metadata_path, search_path, undeclared, host)
    )


def dependency_closure(
    distribution: str,
    metadata_path: str,
    search_path: Sequence[str],
    undeclared: Iterable[str] = (),
    host: Mapping[str, str] | None = None,
) -> tuple[Needed, ...]:
    """Every distribution the one in ``metadata_path`` needs, transitively, outside the
    host's own installation (``host`` as :func:`check_dependencies` takes it), in the order
    it checks them: its requirements that apply here, then the ``undeclared`` ones a registry
    names, then theirs. Reads metadata only; nothing is hashed or imported."""
    trusted = _origins.host_install().distributions if host is None else host
    queue: list[tuple[str, str, bool]] = [
        (name, distribution, True) for name, _ in _required(requires_dist(metadata_path))
    ]
    queue += [(normalize_name(name), distribution, False) for name in undeclared]
    seen: set[str] = {normalize_name(distribution)}
    needed: list[Needed] = []
    while queue:
        project, required_by, declared = queue.pop(0)
        if project in seen:
            continue
        seen.add(project)
        if project == "mcs-host":
            continue  # the running host itself; the import gate judges its files
        found = installed_distribution(project, search_path)
        if project in trusted and (
            found is None or os.path.realpath(found[2]) == os.path.realpath(trusted[project])
        ):
            continue  # the host's own copy (or the host's, found beyond the search path)
        needed.append(Needed(project, required_by, declared, found))
        if found is not None:
            queue += [(name, project, True) for name, _ in _required(requires_dist(found[2]))]
    return tuple(needed)


def check_distribution(
    project: str,
    required_by: str,
    index: TrustIndex,
    search_path: Sequence[str],
    scans: dict[str, TreeScan] | None = None,
) -> DependencyCheck:
    """One installed distribution checked as a dependency is: found, its files against the
    registry's pins. ``required_by`` says who needs it, in messages."""
    project = normalize_name(project)
    found = installed_distribution(project, search_path)
    return _check(project, required_by, True, index, scans or {}, found)


def _check(
    project: str,
    required_by: str,
    declared: bool,
    index: TrustIndex,
    scans: dict[str, TreeScan],
    found: tuple[str, str, str, str] | None,
) -> DependencyCheck:
    if found is None:
        how = "requires" if declared else "needs (it does not declare it; the registry says so)"
        return DependencyCheck(
            project,
            required_by,
            declared,
            "missing",
            "missing-dependency",
            f"{required_by} {how} {project}, which is not installed",
        )
    name, version, dist_info, location = found
    base = DependencyCheck(
        project, required_by, declared, "unverified", "", "", version, location, dist_info
    )
    editable = editable_source(dist_info)
    if editable is not None:
        return _with(
            base,
            "unverified",
            "editable-install",
            f"{name} {version} is an editable install of {editable}",
        )
    scan = scans.get(dist_info) or scans.setdefault(dist_info, scan_installed(dist_info))
    if scan.findings or scan.digest is None:
        first = scan.findings[0] if scan.findings else None
        reason = first.code if first else "unreadable"
        message = first.message if first else f"the files of {name} could not all be read"
        return _with(base, "rejected", reason, message)
    files = tuple(entry.path for entry in scan.digest.entries)
    for conflict in index.conflicts.get(project, ()):
        return _with(base, "rejected", "registry-conflict", conflict)
    entry = _entry(index, project)
    if entry is None:
        return _with(base, "unverified", "not-in-registry", f"no registry pins {name}", files)
    decision = release_decision(entry, name, version, scan.digest)
    if decision is None:
        return _with(base, "unverified", "no-pin", f"{name} {version} is not pinned", files)
    if decision[0] != "pinned":
        status: DependencyStatus = "revoked" if decision[0] == "revoked" else "rejected"
        return _with(base, status, decision[1], decision[2])
    return DependencyCheck(
        project,
        required_by,
        declared,
        "pinned",
        "pinned",
        decision[2],
        version,
        location,
        dist_info,
        module_files(scan.digest),
        extension_module_files(scan.digest),
        _shared_libraries(scan.digest),
        provenance=_attested_by(entry, version, scan.digest.digest),
    )


def _shared_libraries(digest: TreeDigest) -> tuple[FileEntry, ...]:
    """:func:`~mcs_host.trust.importer.shared_library_files` (the importer, and what it
    imports, only once a dependency is pinned)."""
    from .importer import shared_library_files  # noqa: PLC0415

    return shared_library_files(digest)


def _attested_by(entry: ReleaseEntry, version: str, digest: str) -> str | None:
    """The publisher whose provenance the pin of ``version`` (the build of ``digest``) in
    ``entry`` carries."""
    pin = entry.pin_for(version, digest)
    return str(pin.provenance.publisher) if pin and pin.provenance else None


def _with(
    base: DependencyCheck,
    status: DependencyStatus,
    reason: str,
    message: str,
    files: tuple[str, ...] = (),
) -> DependencyCheck:
    return DependencyCheck(
        base.distribution,
        base.required_by,
        base.declared,
        status,
        reason,
        message,
        base.version,
        base.location,
        base.metadata_path,
        files=files,
    )


@dataclass(frozen=True, slots=True)
class DependencyJudgment:
    """What the trust policy makes of a driver's dependency checks."""

    refusal: tuple[Literal["failed", "rejected"], str, str] | None
    """``(status, reason, message)`` when the driver may not be loaded: ``failed`` for a
    missing dependency, ``rejected`` for one refused."""
    unverified: tuple[DependencyCheck, ...]
    """Unverified dependencies the policy lets the driver import (their code would run)."""
    notes: tuple[str, ...]
    """Warnings: undeclared and unverified dependencies."""


def judge_dependencies(
    checks: Iterable[DependencyCheck], policy: TrustPolicy, *, refuse_unverified: bool
) -> DependencyJudgment:
    """Apply the policy to ``checks``: a missing dependency fails the driver; a rejected or
    revoked one, a pinned one with extension modules the policy does not allow, or (when
    ``refuse_unverified``) an unverified one rejects it; the rest are notes."""
    notes: list[str] = []
    unverified: list[DependencyCheck] = []
    for check in checks:
        if check.status == "missing":
            return DependencyJudgment(("failed", "missing-dependency", check.message), (), ())
        if check.status in ("rejected", "revoked"):
            message = (
                f"dependency {check.distribution} {check.version}: {check.reason}: {check.message}"
            )
            return DependencyJudgment(("rejected", "dependency-rejected", message), (), ())
        if check.extensions and not policy.allow_extensions:
            names = ", ".join(m.path for m in check.extensions)
            message = (
                f"dependency {check.distribution} {check.version} ships extension modules "
                f"({names}), and the policy refuses native code"
            )
            return DependencyJudgment(("rejected", "extension-module", message), (), ())
        if not check.declared:
            notes.append(
                f"undeclared-dependency: {check.required_by} needs {check.distribution} "
                "without declaring it (the registry says so)"
            )
        if check.status == "unverified":
            message = (
                f"dependency {check.distribution} {check.version} is unverified "
                f"({check.reason}: {check.message})"
            )
            if refuse_unverified:
                return DependencyJudgment(("rejected", "unverified-dependency", message), (), ())
            notes.append(f"unverified-dependency: {message}")
            unverified.append(check)
    return DependencyJudgment(None, tuple(unverified), tuple(notes))


def _entry(index: TrustIndex, project: str) -> ReleaseEntry | None:
    if project in index.libraries:
        return index.libraries[project]
    drivers = [e for e in index.entries.values() if e.distribution == project]
    return drivers[0] if drivers else None


@functools.lru_cache(maxsize=4096)
def _applies(line: str) -> tuple[str, Requirement] | None:
    try:
        requirement = parse_requirement(line)
    except InvalidRequirement:
        return None
    if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
        return None
    return normalize_name(requirement.name), requirement


def _required(lines: Iterable[str]) -> list[tuple[str, Requirement]]:
    """The requirements that apply here (markers evaluated, no extras), by PEP 503 name."""
    return [found for line in lines if (found := _applies(line)) is not None]


def required_names(lines: Iterable[str]) -> list[str]:
    """The PEP 503 names of the requirements among ``lines`` that apply here, as
    :func:`dependency_closure` follows them (used by ``mcs-host add``, which walks the
    closure of wheels not installed yet)."""
    return [name for name, _ in _required(lines)]


def unverified_imports(names: Iterable[str]) -> dict[str, list[str]]:
    """Of the module ``names`` just imported, those loaded from neither the standard library,
    the host's installation, nor verified bytes (judged by their files, never their names),
    by the distribution whose RECORD lists the file (``"?"`` when none does)."""
    host = _origins.host_install()
    owners: dict[str, str] | None = None  # read only when a module needs an owner
    found: dict[str, list[str]] = {}
    for name in sorted(names):
        module = sys.modules.get(name)
        spec = getattr(module, "__spec__", None)
        if spec is None or spec.origin in (None, "built-in", "frozen") or not spec.has_location:
            continue  # namespace packages and the like run no code of their own
        if is_verified_module(module):
            continue
        real = _origins.real_file(spec.origin)
        if _origins.is_stdlib(real) or host.owns(real):
            continue
        if owners is None:
            owners = _file_owners()
        found.setdefault(owners.get(real, "?"), []).append(name)
    return found


def _file_owners() -> dict[str, str]:
    """Real path -> the distribution whose RECORD lists it, for every distribution on
    ``sys.path`` (each RECORD read through the bounded reader)."""
    owners: dict[str, str] = {}
    for project, copies in installed_copies(sys.path).items():
        for real in _origins.record_files(copies[0]):
            owners.setdefault(real, project)
    return owners
