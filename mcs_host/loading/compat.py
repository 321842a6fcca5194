"""Compatibility: versions and capabilities, checked before import from metadata and after it.

Before import: the driver distribution's ``Requires-Dist: mcs-host ...`` against the running
host, and a version specifier the user requires. After import: the driver's ``meta`` is a valid
``DriverMeta`` whose SemVer version agrees with the distribution's version, every declared
capability with a mixin is implemented (a declared ``healthcheck`` without ``healthcheck()`` is
a false claim), and the capabilities the client requires are there.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from packaging.requirements import InvalidRequirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from pydantic import ValidationError

from mcs_host.contract import DriverMeta
from mcs_host.discovery import parse_requirement, requires_dist
from mcs_host.interfaces import CAPABILITY_MIXINS, implemented_capabilities

__all__ = [
    "Incompatibility",
    "capability_problems",
    "host_requirement_problem",
    "meta_of",
    "version_problem",
]

HOST_DISTRIBUTION = "mcs-host"


@dataclass(frozen=True, slots=True)
class Incompatibility:
    """A reason a driver does not fit; ``strict_only`` ones are reported, and refused only in
    strict mode."""

    code: str
    message: str
    strict_only: bool = False


def host_requirement_problem(metadata_path: str, host_version: str) -> Incompatibility | None:
    """Whether the distribution's requirement on mcs-host excludes ``host_version``."""
    for line in requires_dist(metadata_path):
        try:
            requirement = parse_requirement(line)
        except InvalidRequirement as exc:
            return Incompatibility("invalid-requirement", f"Requires-Dist {line!r}: {exc}")
        if canonicalize_name(requirement.name) != HOST_DISTRIBUTION:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        if not requirement.specifier.contains(host_version, prereleases=True):
            return Incompatibility(
                "incompatible-host",
                f"requires mcs-host{requirement.specifier}; this host is {host_version}",
            )
    return None


def version_problem(label: str, version: str, specifier: str) -> Incompatibility | None:
    """Whether ``version`` misses the ``specifier`` the user requires for ``label``."""
    try:
        allowed = SpecifierSet(specifier).contains(Version(version), prereleases=True)
    except InvalidVersion:
        allowed = False
    if allowed:
        return None
    return Incompatibility(
        "required-version",
        f"{label} {version} does not satisfy the required version {specifier}",
    )


def meta_of(
    driver: Any, distribution_version: str | None
) -> tuple[DriverMeta | None, list[Incompatibility]]:
    """The driver's meta as a ``DriverMeta``, and how it disagrees with the distribution."""
    raw = getattr(driver, "meta", None)
    if raw is None:
        return None, [Incompatibility("invalid-meta", "the driver has no meta")]
    try:
        meta = DriverMeta.coerce(raw)
    except (ValueError, ValidationError) as exc:
        return None, [Incompatibility("invalid-meta", f"its meta is not a valid DriverMeta: {exc}")]
    problems = []
    if distribution_version is not None:
        try:
            same = Version(meta.version) == Version(distribution_version)
        except InvalidVersion:
            same = meta.version == distribution_version
        if not same:
            problems.append(
                Incompatibility(
                    "version-mismatch",
                    f"meta.version {meta.version} differs from the distribution's "
                    f"{distribution_version}",
                    strict_only=True,
                )
            )
    return meta, problems


def capability_problems(
    driver: Any, meta: DriverMeta, required: Collection[str]
) -> list[Incompatibility]:
    """Declared capabilities it does not implement, and required ones it lacks."""
    implemented = implemented_capabilities(driver)
    problems = []
    for name in meta.capabilities:
        mixin = CAPABILITY_MIXINS.get(name)
        if mixin is not None and name not in implemented:
            methods = ", ".join(
                sorted(
                    m for m, v in vars(mixin).items() if getattr(v, "__isabstractmethod__", False)
                )
            )
            problems.append(
                Incompatibility(
                    "false-capability",
                    f"declares the capability {name!r} but does not implement "
                    f"{mixin.__name__} ({methods})",
                )
            )
    for name in required:
        if name not in meta.capabilities or (name in CAPABILITY_MIXINS and name not in implemented):
            problems.append(
                Incompatibility("missing-capability", f"lacks the required capability {name!r}")
            )
    return problems
