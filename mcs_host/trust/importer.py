"""Import: a verified driver's modules are loaded from the bytes that were verified.

The process-wide :class:`VerifiedImporter` (the import gate, first on ``sys.meta_path``)
claims the module names of verified distributions and hands out the loaders defined here. A
source module is read once without following links, checked for size and sha256 against the
verified listing, and those same bytes are compiled; a cached ``.pyc`` is never read nor
written. An extension module is read the same way into a private in-memory copy, and the
dynamic linker loads that copy, so the bytes it runs are the bytes checked, whenever the
module is first imported. Verified modules run with an ``import`` statement that also judges
modules already imported by someone else.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from mcs_host.contract import DriverMeta

from ._editable import editable_modules
from ._errors import IntegrityError
from ._gate import ImportRefusedError, VerifiedImporter, gate
from ._loaders import is_verified_module, loaded_from
from ._native import is_shared_library
from .digest import FileEntry, TreeDigest
from .modules import ModuleFile, extension_module_files
from .verification import Verification

__all__ = [
    "ImportRefusedError",
    "IntegrityError",
    "VerifiedImporter",
    "check_runtime_meta",
    "import_driver",
    "is_verified_module",
    "shared_library_files",
    "verified_importer",
]


def shared_library_files(digest: TreeDigest) -> tuple[FileEntry, ...]:
    """Every shared object in a listing (extension modules and the libraries they link, such
    as an auditwheel ``NAME.libs/`` directory's)."""
    return tuple(e for e in digest.entries if is_shared_library(e.path))


def verified_importer() -> VerifiedImporter:
    """The process-wide importer (the import gate) that :func:`import_driver` uses."""
    return gate()


def import_driver(verification: Verification, importer: VerifiedImporter | None = None) -> object:
    """Import the object a verified candidate's entry point names.

    Pinned and signed drivers are registered with ``importer`` (default: the process-wide
    gate) and imported from their verified bytes; an unverified one the policy allows is
    imported from its installed files, which the gate is told to allow. Raises
    :class:`IntegrityError` for a driver that may not be imported, whose modules (or namespace
    parents) were already imported from elsewhere, or whose bytes changed since verification.
    """
    candidate = verification.candidate
    if not verification.allowed:
        raise IntegrityError(
            f"driver {candidate.label!r} ({candidate.distribution} {candidate.version}) is "
            f"{verification.status}: {verification.message}"
        )
    importer = importer or gate()
    verified = verification.status in ("pinned", "signed")
    owner = f"{candidate.distribution} {candidate.version}"
    if verified:
        digest = verification.scan.digest if verification.scan is not None else None
        extensions = extension_module_files(digest) if digest is not None else ()
        libraries = shared_library_files(digest) if digest is not None else ()
        importer.register(candidate.location, verification.modules, extensions, owner, libraries)
        importer.install()
        refuse_imported_elsewhere(importer, verification.modules, extensions)
    else:
        _allow_unverified(importer, verification)
    module = importlib.import_module(candidate.module)
    if verified and not is_verified_module(module):
        raise IntegrityError(f"{candidate.module} was not imported from verified bytes")
    obj: object = module
    for part in filter(None, candidate.attr.split(".")):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportError(
                f"entry point {candidate.label} = {candidate.value}: "
                f"{candidate.module} has no attribute {candidate.attr!r}"
            ) from None
    return obj


def _allow_unverified(importer: VerifiedImporter, verification: Verification) -> None:
    """Tell the gate the policy allows this unverified driver's own files (its installed
    ones, and an editable install's package directories), for its own imports only."""
    candidate = verification.candidate
    files: list[str] = []
    if verification.scan is not None and verification.scan.digest is not None:
        files = [
            os.path.join(candidate.location, *entry.path.split("/"))
            for entry in verification.scan.digest.entries
        ]
    trees, modules = editable_modules(candidate.metadata_path, [candidate.module])
    files += modules
    why = "an unverified driver the policy allows"
    importer.allow(files, candidate.distribution, why, trees)


def refuse_imported_elsewhere(
    importer: VerifiedImporter, modules: Sequence[ModuleFile], extensions: Sequence[ModuleFile]
) -> None:
    """Raise :class:`IntegrityError` when a module of a verified distribution, or a namespace
    package on its path, is already imported from anything but its verified bytes."""
    for expected in (*modules, *extensions):
        existing = sys.modules.get(expected.name)
        if existing is not None and not loaded_from(existing, expected):
            where = getattr(existing, "__file__", None) or "an unknown place"
            raise IntegrityError(
                f"module {expected.name!r} was already imported from {where} before "
                "verification; its code cannot be vouched for"
            )
    parents = {
        ".".join(m.name.split(".")[:depth])
        for m in (*modules, *extensions)
        for depth in range(1, m.name.count(".") + 1)
    }
    for parent in sorted(parents):
        existing = sys.modules.get(parent)
        if existing is None or not importer.namespace(parent):
            continue
        where = getattr(existing, "__file__", None)
        if where is not None:
            raise IntegrityError(
                f"module {parent!r} was already imported from {where}; the verified "
                f"distribution needs it to be a namespace package"
            )


def check_runtime_meta(driver: object, verification: Verification) -> str | None:
    """Why the imported driver's ``meta`` disagrees with its manifest or registry id, if it does.

    Returns ``None`` when it agrees, or when ``driver`` has no ``meta`` yet (a factory, or a
    class whose ``meta`` is a property).
    """
    meta = getattr(driver, "meta", None)
    if meta is None or isinstance(meta, property):
        return None  # known once the driver is instantiated
    try:
        runtime = DriverMeta.coerce(meta)
    except (ValueError, ValidationError) as exc:
        return f"its meta is not a valid DriverMeta: {exc}"
    expected = verification.manifest
    differences = []
    if expected is not None:
        for name in ("id", "version", "trust"):
            if getattr(runtime, name) != getattr(expected, name):
                differences.append(
                    f"{name} {getattr(runtime, name)!r}, its manifest says "
                    f"{getattr(expected, name)!r}"
                )
    elif verification.driver_id is not None and runtime.id != verification.driver_id:
        differences.append(f"id {runtime.id!r}, the registry says {verification.driver_id!r}")
    if not differences:
        return None
    return f"driver {verification.label!r} has runtime meta " + "; ".join(differences)
