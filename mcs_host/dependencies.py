"""Dependencies: code a driver pulls in must be verified too, or at least seen.

Before import, :func:`check_dependencies` walks the driver distribution's requirements (and
those the registry says it needs without declaring them), transitively. A distribution of the
host's own environment (mcs-host and what it requires) is trusted as the host is; any other is
verified like a driver: its installed files, then the registry's ``libraries`` pins. A pinned
dependency's modules are then imported through the verified importer as well.

After import, :func:`unverified_imports` names every module that was loaded from neither the
standard library, the host's environment, nor verified bytes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement

from .discovery import (
    installed_distribution,
    installed_projects,
    normalize_name,
    requires_dist,
)
from .importer import is_verified_module
from .integrity import ModuleFile, TreeScan, editable_source, module_files, scan_installed
from .registry import ReleaseEntry, TrustIndex
from .verification import release_decision

__all__ = [
    "DependencyCheck",
    "check_dependencies",
    "host_environment",
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
    extensions: tuple[str, ...] = ()
    """Its verified extension modules (paths under ``location``)."""


@cache
def host_environment() -> frozenset[str]:
    """mcs-host and every distribution it requires, transitively, as installed on sys.path."""
    installed = installed_projects(sys.path)
    found: set[str] = set()
    queue = ["mcs-host"]
    while queue:
        project = queue.pop()
        if project in found:
            continue
        found.add(project)
        if project in installed:
            queue.extend(name for name, _ in _required(requires_dist(installed[project])))
    return frozenset(found)


def check_dependencies(
    distribution: str,
    metadata_path: str,
    index: TrustIndex,
    search_path: Sequence[str],
    undeclared: Iterable[str] = (),
    host: frozenset[str] | None = None,
    scans: dict[str, TreeScan] | None = None,
) -> tuple[DependencyCheck, ...]:
    """Every distribution the driver in ``metadata_path`` needs, outside the host's own."""
    trusted = host_environment() if host is None else host
    scans = {} if scans is None else scans
    queue: list[tuple[str, str, bool]] = [
        (name, distribution, True) for name, _ in _required(requires_dist(metadata_path))
    ]
    queue += [(normalize_name(name), distribution, False) for name in undeclared]
    seen: set[str] = {normalize_name(distribution)}
    checks: list[DependencyCheck] = []
    while queue:
        project, required_by, declared = queue.pop(0)
        if project in seen or project in trusted:
            continue
        seen.add(project)
        check = _check(project, required_by, declared, index, search_path, scans)
        checks.append(check)
        if check.metadata_path is not None:
            queue += [
                (name, check.distribution, True)
                for name, _ in _required(requires_dist(check.metadata_path))
            ]
    return tuple(checks)


def _check(
    project: str,
    required_by: str,
    declared: bool,
    index: TrustIndex,
    search_path: Sequence[str],
    scans: dict[str, TreeScan],
) -> DependencyCheck:
    found = installed_distribution(project, search_path)
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
    for conflict in index.conflicts.get(project, ()):
        return _with(base, "rejected", "registry-conflict", conflict)
    entry = _entry(index, project)
    if entry is None:
        return _with(base, "unverified", "not-in-registry", f"no registry pins {name}")
    decision = release_decision(entry, name, version, scan.digest)
    if decision is None:
        return _with(base, "unverified", "no-pin", f"{name} {version} is not pinned")
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
        scan.extensions,
    )


def _with(
    base: DependencyCheck, status: DependencyStatus, reason: str, message: str
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
    )


def _entry(index: TrustIndex, project: str) -> ReleaseEntry | None:
    if project in index.libraries:
        return index.libraries[project]
    drivers = [e for e in index.entries.values() if e.distribution == project]
    return drivers[0] if drivers else None


def _required(lines: Iterable[str]) -> list[tuple[str, Requirement]]:
    """The requirements that apply here (markers evaluated, no extras), by PEP 503 name."""
    out = []
    for line in lines:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        out.append((normalize_name(requirement.name), requirement))
    return out


def unverified_imports(
    names: Iterable[str], host: frozenset[str] | None = None
) -> dict[str, list[str]]:
    """Of the module ``names`` just imported, those loaded from neither the standard library,
    the host's environment, nor verified bytes, by the distribution that ships them."""
    trusted = host_environment() if host is None else host
    owners: Mapping[str, list[str]] | None = None  # read only when a module needs an owner
    found: dict[str, list[str]] = {}
    for name in sorted(names):
        module = sys.modules.get(name)
        spec = getattr(module, "__spec__", None)
        top = name.partition(".")[0]
        if top in sys.stdlib_module_names or name in sys.builtin_module_names:
            continue
        if spec is None or spec.origin in (None, "built-in", "frozen") or not spec.has_location:
            continue  # namespace packages and the like run no code of their own
        if is_verified_module(module):
            continue
        if owners is None:
            owners = _top_level_owners()
        candidates = owners.get(top, [])
        owner = _owner(spec.origin, candidates) if len(candidates) > 1 else (candidates or ["?"])[0]
        if owner in trusted:
            continue
        found.setdefault(owner, []).append(name)
    return found


def _top_level_owners() -> Mapping[str, list[str]]:
    return {
        top: [normalize_name(d) for d in dists]
        for top, dists in metadata.packages_distributions().items()
    }


def _owner(origin: str, candidates: Sequence[str]) -> str:
    """Which of ``candidates`` lists the file ``origin`` in its RECORD."""
    real = os.path.realpath(origin)
    for project in candidates:
        try:
            files = metadata.distribution(project).files or []
        except metadata.PackageNotFoundError:
            continue
        for file in files:
            if os.path.realpath(str(file.locate())) == real:
                return project
    return candidates[0] if candidates else "?"
