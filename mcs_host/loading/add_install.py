"""The change ``mcs-host add`` makes once every check has passed, and its undoing.

:func:`writable` checks, before anything changes, that each file can be written where it goes.
:func:`apply` then installs exactly the checked wheels (one pip call, ``--no-deps``), confirms
that each installed tree is the one pinned from its wheel, and writes the provenance files,
the registry, and the configuration last. When any of it fails, what it did is undone: each
file written gets its old bytes back (or is removed), what was installed is uninstalled, and
what it replaced is installed again from its checked wheel and confirmed; the error says what
was put back, and what could not be.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from mcs_host._files import WriteRefusedError, write_atomic
from mcs_host.discovery import installed_distribution
from mcs_host.trust.attested import provenance_file, store_provenance
from mcs_host.trust.downloading import PipError
from mcs_host.trust.installing import install, uninstall
from mcs_host.trust.registry import Registry
from mcs_host.trust.release import release_from_installed

from .add_closure import Restorable
from .add_records import AddError
from .add_sources import Source

# used by mcs-host add: Change, apply, writable
__all__: list[str] = []


@dataclass(frozen=True, slots=True)
class Change:
    """Everything ``add`` changes, decided and checked."""

    added: str
    """The distribution added, named by errors."""
    install: tuple[Source, ...]
    """The wheels to install."""
    restore: tuple[Restorable, ...]
    """What they replace, and how to put it back."""
    registry: Registry
    registry_path: str
    provenance: tuple[tuple[str, bytes], ...]
    """``(distribution file name, its provenance)`` to store beside the registry."""
    config_path: str
    config_text: str
    python: str
    env: Mapping[str, str] | None


def writable(change: Change) -> None:
    """Refuse, before anything changes, a registry or configuration path that is a symbolic
    link or not a regular file, and a file whose directory cannot be written."""
    files = [
        (change.registry_path, "--registry FILE"),
        (change.config_path, "--config FILE"),
        *(
            (str(provenance_file(change.registry_path, name)), None)
            for name, _ in change.provenance
        ),
    ]
    for path, option in files:
        target = Path(path)
        if option is not None and (
            target.is_symlink() or (target.exists() and not target.is_file())
        ):
            kind = "a symbolic link" if target.is_symlink() else "not a regular file"
            raise AddError(
                change.added,
                "write",
                f"{path} is {kind}, which add does not write through",
                f"name the file it leads to with {option}",
            )
        directory = target.parent
        while not directory.exists() and directory != directory.parent:
            directory = directory.parent
        if not directory.is_dir():
            raise AddError(
                change.added,
                "write",
                f"{path} cannot be written: {directory} is not a directory",
                f"move {directory} aside, or name another file with "
                f"{option or '--registry FILE (its provenance is stored beside it)'}",
            )
        if not os.access(directory, os.W_OK | os.X_OK):
            raise AddError(
                change.added,
                "write",
                f"{path} cannot be written: {directory} is not writable",
                f"make {directory} writable, or name another file with "
                f"{option or '--registry FILE (its provenance is stored beside it)'}",
            )


def apply(change: Change) -> tuple[str, ...]:
    """Install, confirm and write ``change``; the provenance files written. An
    :class:`AddError` naming the step when anything fails, after undoing what was done."""
    before = {s.name: _version(s.name) for s in change.install}
    placed = [_placed(source) for source in change.install]
    written: list[tuple[str, bytes | None]] = []
    stored: list[str] = []
    try:
        if change.install:
            _install(change)
        for source in change.install:
            _confirm(source)
        for filename, data in change.provenance:  # each write is whole or not at all
            old = _old(str(provenance_file(change.registry_path, filename)))
            stored.append(str(store_provenance(change.registry_path, filename, data)))
            written.append((stored[-1], old))
        old = _old(change.registry_path)
        _directory(change.registry_path)
        change.registry.save(change.registry_path)
        written.append((change.registry_path, old))
        old = _old(change.config_path)
        _directory(change.config_path)
        write_atomic(change.config_path, change.config_text, "the configuration")
        written.append((change.config_path, old))
    except AddError as error:
        raise error.with_undone(_undo(change, before, placed, written)) from None
    except (OSError, ValueError) as error:
        undone = _undo(change, before, placed, written)
        raise AddError(
            change.added,
            "write",
            _said(error),
            "make the files named writable (or name others with --registry and --config), "
            "then add again",
        ).with_undone(undone) from None
    return tuple(stored)


def _install(change: Change) -> None:
    """Install the checked wheels in one pip call."""
    try:
        install([s.wheel for s in change.install], python=change.python, env=change.env)
    except PipError as error:
        raise AddError(
            change.added,
            "install",
            str(error),
            "fix what pip says (space, permissions, a constraint), then add again",
        ) from None


def _confirm(source: Source) -> None:
    """Refuse an installed tree that is not the one pinned from its wheel."""
    release = source.release
    found = installed_distribution(release.project, sys.path)
    what = f"{release.distribution} {release.version}"
    if found is None or Version(found[1]) != Version(release.version):
        raise AddError(
            release.distribution,
            "digest",
            f"{what} is not installed after pip installed it (found: "
            f"{f'{found[0]} {found[1]}' if found else 'none'})",
            "check which environment your pip installs into (`python -m pip --version`)",
        )
    try:
        installed = release_from_installed(found[2], found[0], found[1]).pin().digest
    except ValueError as error:
        installed = str(error)
    expected = release.pin().digest
    if installed != expected:
        raise AddError(
            release.distribution,
            "digest",
            f"the installed files of {what} ({installed}) are not those of the wheel that was "
            f"checked ({expected})",
            "something changed them as they were installed: find out what before you add it again",
        )


def _version(project: str) -> str | None:
    """The version of ``project`` installed now, or ``None``."""
    found = installed_distribution(project, sys.path)
    return found[1] if found else None


def _old(path: str) -> bytes | None:
    """The bytes of ``path`` before it is written; ``None`` when it is not a file (the
    writer refuses a symbolic link, and an undo then removes what was written)."""
    if os.path.islink(path) or not os.path.isfile(path):
        return None
    return Path(path).read_bytes()


def _directory(path: str) -> None:
    """Make the directory of ``path`` if it is missing, private (as ``init`` makes it)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)


def _said(error: Exception) -> str:
    """An error as one sentence, naming the file."""
    if isinstance(error, WriteRefusedError | OSError) and getattr(error, "filename", None):
        return f"{error.filename}: {error.strerror or error}"
    return str(error)


@dataclass(frozen=True, slots=True)
class _Placed:
    """Where a wheel's files go: the paths its install creates, and its RECORD, which pip
    writes last."""

    record: Path
    new: tuple[Path, ...]
    """The topmost of its paths that did not exist before (a new directory stands for all
    that is made in it)."""


def _placed(source: Source) -> _Placed:
    """Where ``source``'s wheel installs, as it is before the install."""
    site = Path(sysconfig.get_paths()["purelib" if _purelib(source.wheel) else "platlib"])
    digest = source.release.scan.digest
    paths = [entry.path for entry in digest.entries] if digest is not None else []
    new: set[Path] = set()
    for path in paths:
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            here = site.joinpath(*parts[:depth])
            if not os.path.lexists(here):
                new.add(here)
                break
    info = next((p.split("/")[0] for p in paths if p.split("/")[0].endswith(".dist-info")), "")
    return _Placed(site / info / "RECORD", tuple(sorted(new)))


def _purelib(wheel: Path) -> bool:
    """Whether a wheel's root goes to purelib (its WHEEL file's ``Root-Is-Purelib``)."""
    with zipfile.ZipFile(wheel) as archive:
        names = [
            n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/WHEEL")
        ]
        text = archive.read(names[0]).decode("utf-8", "replace") if names else ""
    return "root-is-purelib: false" not in text.lower()


def _remove(paths: Sequence[Path]) -> None:
    """Remove what of ``paths`` exists (a directory with all it holds; a link, not followed)."""
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            path.unlink(missing_ok=True)


def _undo(
    change: Change,
    before: Mapping[str, str | None],
    placed: Sequence[_Placed],
    written: list[tuple[str, bytes | None]],
) -> tuple[str, ...]:
    """Undo what :func:`apply` did: files first (the last written first), then the
    environment (what pip left half installed removed, what it installed uninstalled, what
    that replaced installed again); each thing put back, or not, as a sentence."""
    said: list[str] = []
    for path, old in reversed(written):
        try:
            if old is None:
                os.unlink(path)
                said.append(f"removed {path}")
            else:
                write_atomic(path, old, "the file as it was")
                said.append(f"restored {path}")
        except FileNotFoundError:
            continue  # it was never written
        except OSError as error:
            said.append(f"could not restore {path} ({_said(error)}): put it back yourself")
    half = [p for p in placed if not p.record.exists()]
    for part in half:  # pip does not take back the files of a wheel whose install failed
        _remove(part.new)
    remove = [
        s
        for s in change.install
        if (now := _version(s.name)) is not None
        and Version(now) == Version(s.release.version)
        and before.get(s.name) != now
    ]
    if remove:
        try:
            uninstall([s.name for s in remove], python=change.python, env=change.env)
            shown = ", ".join(f"{s.release.distribution} {s.release.version}" for s in remove)
            said.append(f"uninstalled {shown}")
        except PipError as error:
            said.append(f"could not uninstall them ({error}): `pip uninstall` them yourself")
    for part in placed:  # what an uninstall leaves in the directories the install made
        _remove(part.new)
    back = [r for r in change.restore if _version(r.name) != r.version]
    if back:
        try:
            install([r.wheel for r in back], python=change.python, env=change.env)
            said += [_put_back(r) for r in back]
        except PipError as error:
            shown = ", ".join(f"{r.name} {r.version}" for r in back)
            said.append(
                f"could not put back {shown} ({error}): `pip install --no-deps` them yourself"
            )
    return tuple(said)


def _put_back(restored: Restorable) -> str:
    """What putting ``restored`` back did, its installed files checked against their pin."""
    what = f"{restored.name} {restored.version}"
    found = installed_distribution(restored.name, sys.path)
    try:
        digest = (
            release_from_installed(found[2], found[0], found[1]).pin().digest if found else None
        )
    except ValueError:
        digest = None
    if digest == restored.digest:
        return f"put back {what} (its files as before)"
    return f"put back {what}, but its files are not as before: reinstall it yourself"
