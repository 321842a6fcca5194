"""What a distribution ``mcs-host add`` installs needs, found before anything is installed.

The user's pip resolves it (``pip install --dry-run --report``: their indexes, constraints and
installed distributions decide). The wheels of the distributions pip would install are
downloaded by one more run of pip (each alone, should that fail, for the error to name it),
and each is verified as :mod:`.add_sources` verifies a dependency; pip may not replace a
distribution of mcs-host's own installation. The closure a load will check is then walked as
:func:`~mcs_host.trust.dependencies.dependency_closure` walks it, the wheels' metadata
standing for what is not installed yet: what is installed already is pinned as it is
installed, what belongs to mcs-host's installation is left to it. A distribution that would
be replaced (another version installed) is put back from its index's wheel should the
change fail, so that wheel is downloaded now and must hold exactly the installed files: one
that cannot be had is refused before anything changes.
"""

from __future__ import annotations

import email.parser
import os
import sys
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from mcs_host.discovery import installed_distribution, normalize_name, requires_dist
from mcs_host.trust import _origins
from mcs_host.trust.dependencies import required_names
from mcs_host.trust.digest import editable_source
from mcs_host.trust.downloading import PipConfig, PipError
from mcs_host.trust.installing import Resolved, resolve
from mcs_host.trust.registry import Registry
from mcs_host.trust.release import Release, release_from_installed

from .add_records import AddError, AddRequest
from .add_sources import Source, dependency_source, downloaded, prefetched

# used by mcs-host add: Closure, Kept, Restorable, closure
__all__: list[str] = []


@dataclass(frozen=True, slots=True)
class Kept:
    """A distribution of the closure that is installed already, and stays as it is."""

    name: str
    version: str
    needed_by: str
    release: Release | None
    """Its installed files, to pin as a library; ``None`` for mcs-host's own."""


@dataclass(frozen=True, slots=True)
class Restorable:
    """A distribution the change replaces, and the wheel that puts it back."""

    name: str
    version: str
    """The version installed now."""
    wheel: Path
    """Its index's wheel, checked to hold exactly the installed files."""
    digest: str
    """Their pin (``installed-tree-v2``)."""


@dataclass(frozen=True, slots=True)
class Closure:
    """What the distribution added needs, and what installing it changes."""

    sources: tuple[Source, ...]
    """What pip would install besides it, downloaded and verified."""
    install_target: bool
    """Whether it is installed (else the same version is installed, of the same files)."""
    kept: tuple[Kept, ...]
    needed_by: Mapping[str, str]
    """PEP 503 name -> the distribution that needs it, for each of ``sources``."""
    restore: tuple[Restorable, ...]


def closure(
    target: Source,
    request: AddRequest,
    registry: Registry,
    pip: PipConfig,
    work: Path,
    undeclared: Sequence[str] = (),
) -> Closure:
    """What ``target`` needs (with the ``undeclared`` distributions a registry says its
    drivers need), resolved, downloaded and verified; an :class:`AddError` when any of it
    cannot be added, before anything changes."""
    name = target.release.distribution
    try:
        resolved = resolve(
            target.wheel, work / "report.json", undeclared, python=request.python, env=request.env
        )
    except PipError as error:
        raise AddError(
            name,
            "resolve",
            str(error),
            "check what it needs with `pip install --dry-run --only-binary :all: "
            f"{target.wheel.name}`",
        ) from None
    host = _origins.host_install().distributions
    planned = {r.name: r for r in resolved if r.name != target.name}
    for item in planned.values():
        if item.name in host or item.name == "mcs-host":
            installed = installed_distribution(item.name, sys.path)
            now = f" (installed: {installed[1]})" if installed else ""
            raise AddError(
                name,
                "resolve",
                f"pip would install {item.name} {item.version} for it, and {item.name} is part "
                f"of mcs-host's own installation{now}: add does not change what the host runs on",
                f"add a release of {name} that works with the installed {item.name}, or "
                f"upgrade it yourself (`pip install '{item.name}=={item.version}'`) if mcs-host "
                "supports that version",
            )
    wanted = {key: f"{item.name}=={item.version}" for key, item in planned.items()}
    wheels = prefetched(list(wanted.values()), work / "needed", request)
    sources = tuple(
        _source(item, request, registry, pip, work, name, wheels.get(wanted[key]))
        for key, item in planned.items()
    )
    install_target = any(r.name == target.name for r in resolved)
    if not install_target:
        _same_files(target)
    kept, needed_by = _walk(target, planned, host, undeclared)
    changing = [target, *sources] if install_target else list(sources)
    restore = tuple(
        found for source in changing if (found := _restorable(source, request, work, name))
    )
    return Closure(sources, install_target, kept, needed_by, restore)


def _source(
    item: Resolved,
    request: AddRequest,
    registry: Registry,
    pip: PipConfig,
    work: Path,
    needed_by: str,
    wheel: Path | None = None,
) -> Source:
    """The wheel of ``item`` downloaded (the file pip resolved; ``wheel`` when it was
    downloaded with the others) and verified."""
    requirement = f"{item.name}=={item.version}"
    wheel, release = downloaded(requirement, work / "needs" / item.name, request, wheel)
    source = dependency_source(wheel, _library(release), registry, pip, needed_by)
    if item.sha256 is not None and source.sha256 != item.sha256:
        raise AddError(
            release.distribution,
            "download",
            f"pip resolved {wheel.name} with sha256 {item.sha256}, and downloaded one with "
            f"sha256 {source.sha256}: the index changed it in between",
            "run this again; if it stays, do not install it: ask the index's operators",
        )
    return source


def _library(release: Release) -> Release:
    """``release`` as a library: its entry points are not pinned as drivers or plugins."""
    return replace(release, entry_points=(), groups=(), problems=())


def _same_files(target: Source) -> None:
    """Refuse a release installed already in this version from other files than its wheel:
    pinning the wheel would pin files that are not the installed ones."""
    release = target.release
    found = installed_distribution(release.project, sys.path)
    if found is None:  # pip found it satisfied, discovery does not: a broken install
        raise AddError(
            release.distribution,
            "resolve",
            f"pip finds {release.distribution} {release.version} installed, and its metadata "
            "cannot be read",
            f"reinstall it: `pip install --force-reinstall --no-deps {release.project}"
            f"=={release.version}`, then add it again",
        )
    installed = _installed_release(found, release.distribution)
    if installed.pin().digest != release.pin().digest:
        raise AddError(
            release.distribution,
            "resolve",
            f"{release.distribution} {release.version} is installed already, from other files "
            f"than the index's wheel {target.wheel.name} ({installed.pin().digest}, the wheel's "
            f"{release.pin().digest})",
            f"if you did not change them yourself, find out what did; then `pip uninstall "
            f"{release.project}` and add it again",
        )


def _installed_release(found: tuple[str, str, str, str], needed_by: str) -> Release:
    """The installed distribution ``found`` described from its files; an :class:`AddError`
    for an editable install or one whose files cannot be pinned."""
    name, version, metadata_path, _ = found
    editable = editable_source(metadata_path)
    if editable is not None:
        raise AddError(
            name,
            "pin",
            f"{needed_by} needs {name} {version}, an editable install of {editable}: no pin "
            "can vouch for a working tree",
            f"install {name} from a wheel (`pip install --no-deps '{name}=={version}'`), "
            "then add again",
        )
    try:
        release = _library(release_from_installed(metadata_path, name, version))
        release.pin()
    except ValueError as error:
        raise AddError(
            name,
            "pin",
            f"{needed_by} needs it, and its installed files cannot be pinned: {error}",
            f"reinstall it: `pip install --force-reinstall --no-deps '{name}=={version}'`",
        ) from None
    return release


def _walk(
    target: Source,
    planned: Mapping[str, Resolved],
    host: Mapping[str, str],
    undeclared: Sequence[str],
) -> tuple[tuple[Kept, ...], dict[str, str]]:
    """The installed distributions the closure keeps, and who needs each planned one."""
    by = target.release.distribution
    queue = [(n, by) for n in required_names(_wheel_requires(target.wheel))]
    queue += [(normalize_name(n), by) for n in undeclared]
    seen = {target.name, "mcs-host"}
    kept: list[Kept] = []
    needed_by = dict.fromkeys(planned, by)  # what pip brings that the walk does not reach
    while queue:
        project, required_by = queue.pop(0)
        if project in seen:
            continue
        seen.add(project)
        if project in planned:
            needed_by[project] = required_by
            queue += [(n, project) for n in required_names(planned[project].requires)]
            continue
        found = installed_distribution(project, sys.path)
        if found is None:
            raise AddError(
                by,
                "resolve",
                f"{required_by} needs {project}, which is not installed, and pip would not "
                "install it",
                f"install it yourself (`pip install {project}`), then add again",
            )
        if project in host and os.path.realpath(found[2]) == os.path.realpath(host[project]):
            kept.append(Kept(found[0], found[1], required_by, None))
            continue
        kept.append(Kept(found[0], found[1], required_by, _installed_release(found, required_by)))
        queue += [(n, project) for n in required_names(requires_dist(found[2]))]
    return tuple(kept), needed_by


def _wheel_requires(wheel: Path) -> list[str]:
    """The ``Requires-Dist`` lines of a wheel's metadata."""
    with zipfile.ZipFile(wheel) as archive:
        names = [
            n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
        ]
        if len(names) != 1:
            return []
        metadata = email.parser.BytesParser().parsebytes(archive.read(names[0]), headersonly=True)
    return [str(line) for line in metadata.get_all("Requires-Dist") or ()]


def _restorable(source: Source, request: AddRequest, work: Path, added: str) -> Restorable | None:
    """What puts back the version of ``source``'s distribution installed now, when
    installing ``source`` replaces one; an :class:`AddError` when the index cannot give it
    back exactly."""
    found = installed_distribution(source.name, sys.path)
    if found is None:
        return None
    name, version = found[0], found[1]
    installed = _installed_release(found, added).pin().digest
    new = source.release.version
    why = (
        f"{name} {version} is installed, add would replace it with {new}, and should that fail "
        "it must put it back exactly"
    )
    fix = (
        f"upgrade it yourself if you trust {new} (`pip install --no-deps '{name}=={new}'`), "
        f"then pin it (`mcs-host lock --distribution {source.name}`) and add {added} again"
    )
    try:
        wheel, release = downloaded(f"{name}=={version}", work / "restore" / source.name, request)
    except AddError as error:
        raise AddError(name, "resolve", f"{why}: {error}", fix) from None
    if release.pin().digest != installed:
        raise AddError(
            name,
            "resolve",
            f"{why}, and the index's wheel of {version} holds other files than the installed "
            f"ones ({release.pin().digest}, installed {installed})",
            fix,
        )
    return Restorable(name, version, wheel, installed)
