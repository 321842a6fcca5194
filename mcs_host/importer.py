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

import _imp
import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib.machinery import EXTENSION_SUFFIXES
from types import CodeType, ModuleType
from typing import TYPE_CHECKING

from pydantic import ValidationError

from ._gate import ImportRefusedError, IntegrityError, VerifiedImporter, gate
from ._origins import editable_tree
from .contract import DriverMeta
from .integrity import ModuleFile, TreeDigest
from .verification import Verification

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

__all__ = [
    "ImportRefusedError",
    "IntegrityError",
    "VerifiedImporter",
    "check_runtime_meta",
    "extension_module_files",
    "import_driver",
    "is_verified_module",
    "verified_importer",
]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1024 * 1024


class _VerifiedLoader(importlib.machinery.SourceFileLoader):
    """Loads one module from source whose sha256 must match the verified listing."""

    def __init__(self, fullname: str, path: str, expected: ModuleFile) -> None:
        super().__init__(fullname, path)
        self.expected = expected

    def get_code(self, fullname: str) -> CodeType:
        chunks: list[bytes] = []
        _copy_verified(self.path, self.expected, chunks.append)
        return compile(b"".join(chunks), self.path, "exec", dont_inherit=True)

    def exec_module(self, module: ModuleType) -> None:
        module.__dict__["__builtins__"] = gate().builtins_for_verified()
        super().exec_module(module)


class _VerifiedExtensionLoader(importlib.machinery.ExtensionFileLoader):
    """Loads one extension module from a private copy of its verified bytes."""

    def __init__(self, fullname: str, path: str, expected: ModuleFile) -> None:
        super().__init__(fullname, path)
        self.expected = expected

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        with _private_file() as (write, copy):
            _copy_verified(self.path, self.expected, write)
            stand_in = importlib.machinery.ModuleSpec(
                spec.name, importlib.machinery.ExtensionFileLoader(spec.name, copy), origin=copy
            )
            module: ModuleType = _imp.create_dynamic(stand_in)
        module.__file__ = self.path
        return module

    def exec_module(self, module: ModuleType) -> None:
        _imp.exec_dynamic(module)


def _copy_verified(path: str, expected: ModuleFile, write: Callable[[bytes], object]) -> None:
    """Pass the bytes of ``path`` to ``write`` as they are read, then raise
    :class:`IntegrityError` unless they were the verified size and sha256 (the caller uses
    them only after this returns)."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        raise IntegrityError(f"{path} cannot be opened for import: {exc.strerror}") from None
    digest = hashlib.sha256()
    total = 0
    with os.fdopen(fd, "rb") as f:
        while total <= expected.size and (chunk := f.read(min(_CHUNK, expected.size + 1 - total))):
            digest.update(chunk)
            write(chunk)
            total += len(chunk)
    actual = digest.hexdigest()
    if total != expected.size or actual != expected.sha256:
        raise IntegrityError(
            f"{path} changed after verification: sha256 {actual} ({total} bytes), "
            f"verified {expected.sha256} ({expected.size} bytes); not imported"
        )


@contextmanager
def _private_file() -> Iterator[tuple[Callable[[bytes], object], str]]:
    """A writer and the path of a file only this process can reach: an anonymous memory file
    where the system has one, else a file in a private temporary directory."""
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None:
        fd = memfd("mcs-host-verified-extension", getattr(os, "MFD_CLOEXEC", 0))
        try:
            yield (lambda chunk: _write_all(fd, chunk)), f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="mcs-host-") as directory:
        path = os.path.join(directory, "extension" + EXTENSION_SUFFIXES[0])
        with open(path, "xb", buffering=0) as f:
            yield f.write, path


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def verified_spec(fullname: str, origin: str, expected: ModuleFile, extension: bool) -> ModuleSpec:
    """The spec the import gate returns for a claimed module."""
    loader: importlib.machinery.SourceFileLoader | importlib.machinery.ExtensionFileLoader
    if extension:
        loader = _VerifiedExtensionLoader(fullname, origin, expected)
    else:
        loader = _VerifiedLoader(fullname, origin, expected)
    spec = importlib.util.spec_from_file_location(
        fullname,
        origin,
        loader=loader,
        submodule_search_locations=[os.path.dirname(origin)] if expected.package else None,
    )
    if spec is None:  # pragma: no cover - only for a path importlib cannot name
        raise IntegrityError(f"{origin} cannot be imported as {fullname}")
    return spec


def loaded_from(module: object, expected: ModuleFile) -> bool:
    """Whether ``module`` was loaded by the verified loader from the ``expected`` file."""
    loader = getattr(getattr(module, "__spec__", None), "loader", None)
    return (
        isinstance(loader, _VerifiedLoader | _VerifiedExtensionLoader)
        and loader.expected == expected
    )


def extension_module_files(digest: TreeDigest) -> tuple[ModuleFile, ...]:
    """Every extension module in a listing, as the name it is imported by."""
    found = []
    for entry in digest.entries:
        suffix = next((s for s in EXTENSION_SUFFIXES if entry.path.endswith(s)), None)
        if suffix is None or ".dist-info/" in entry.path:
            continue
        parts = entry.path[: -len(suffix)].split("/")
        if parts and all(part.isidentifier() for part in parts):
            found.append(ModuleFile(".".join(parts), entry.path, entry.sha256, entry.size, False))
    return tuple(found)


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
        extensions = (
            extension_module_files(verification.scan.digest)
            if verification.scan is not None and verification.scan.digest is not None
            else ()
        )
        importer.register(candidate.location, verification.modules, extensions, owner)
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
    candidate = verification.candidate
    tree = editable_tree(candidate.metadata_path)
    files = []
    if verification.scan is not None and verification.scan.digest is not None:
        files = [
            os.path.join(candidate.location, *entry.path.split("/"))
            for entry in verification.scan.digest.entries
        ]
    why = "an unverified driver the policy allows"
    importer.allow(files, candidate.distribution, why, [tree] if tree else [])


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


def is_verified_module(module: object) -> bool:
    """Whether ``module`` was imported from verified bytes by the verified importer."""
    spec = getattr(module, "__spec__", None)
    return isinstance(getattr(spec, "loader", None), _VerifiedLoader | _VerifiedExtensionLoader)


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
