"""Import: a verified driver's modules are compiled from the bytes that were verified.

:class:`VerifiedImporter` sits first on ``sys.meta_path`` and claims the module names of
verified distributions. Its loader opens each source file without following links, checks
size and sha256 against the verified listing as it reads, and compiles those same bytes; a
cached ``.pyc`` is never read nor written. A file swapped after verification therefore fails
the import instead of running.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import CodeType, ModuleType

from pydantic import ValidationError

from .contract import DriverMeta
from .integrity import ModuleFile
from .verification import Verification

__all__ = [
    "IntegrityError",
    "VerifiedImporter",
    "check_runtime_meta",
    "import_driver",
    "is_verified_module",
    "verified_importer",
]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class IntegrityError(ImportError):
    """A driver may not be imported, or its bytes changed after verification."""


class _VerifiedLoader(importlib.machinery.SourceFileLoader):
    """Loads one module from source whose sha256 must match the verified listing."""

    def __init__(self, fullname: str, path: str, expected: ModuleFile) -> None:
        super().__init__(fullname, path)
        self.expected = expected

    def get_code(self, fullname: str) -> CodeType:
        data = _read_verified(self.path, self.expected)
        return compile(data, self.path, "exec", dont_inherit=True)


def _read_verified(path: str, expected: ModuleFile) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        raise IntegrityError(f"{path} cannot be opened for import: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        data = f.read(expected.size + 1)
    actual = hashlib.sha256(data).hexdigest()
    if len(data) != expected.size or actual != expected.sha256:
        raise IntegrityError(
            f"{path} changed after verification: sha256 {actual} ({len(data)} bytes), "
            f"verified {expected.sha256} ({expected.size} bytes); not imported"
        )
    return data


class VerifiedImporter(importlib.abc.MetaPathFinder):
    """A meta path finder for the modules of verified distributions."""

    def __init__(self) -> None:
        self._modules: dict[str, tuple[str, ModuleFile]] = {}
        self._extensions: set[str] = set()

    def register(
        self, location: str, modules: Sequence[ModuleFile], extensions: Sequence[str] = ()
    ) -> None:
        """Claim ``modules``, installed under ``location``, for verified import; the
        ``extensions`` (paths under ``location``) are the extension modules verified with
        them, the only ones a verified package may load."""
        for module in modules:
            known = self._modules.get(module.name)
            if known is not None and (known[0], known[1].path, known[1].sha256) != (
                location,
                module.path,
                module.sha256,
            ):
                raise IntegrityError(
                    f"module {module.name!r} is claimed by two verified distributions: "
                    f"{known[0]}/{known[1].path} and {location}/{module.path}"
                )
        for module in modules:
            self._modules[module.name] = (location, module)
        self._extensions.update(
            os.path.realpath(os.path.join(location, *path.split("/"))) for path in extensions
        )

    def claims(self, name: str) -> bool:
        return name in self._modules

    def install(self) -> None:
        """Put this finder first on ``sys.meta_path``."""
        if sys.meta_path and sys.meta_path[0] is self:
            return
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        sys.meta_path.insert(0, self)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        found = self._modules.get(fullname)
        if found is None:
            parent = fullname.rpartition(".")[0]
            if parent in self._modules and self._modules[parent][1].package:
                self._refuse_unverified_child(fullname, parent, path)
            return None
        location, module = found
        origin = os.path.join(location, *module.path.split("/"))
        return importlib.util.spec_from_file_location(
            fullname,
            origin,
            loader=_VerifiedLoader(fullname, origin, module),
            submodule_search_locations=[os.path.dirname(origin)] if module.package else None,
        )

    def _refuse_unverified_child(
        self, fullname: str, parent: str, path: Sequence[str] | None
    ) -> None:
        """A module inside a verified package that was not verified with it (planted after
        verification) is refused; a missing one stays missing, and an extension module of the
        verified listing (admitted by the trust policy) loads as usual."""
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None:
            return
        if (
            isinstance(spec.loader, importlib.machinery.ExtensionFileLoader)
            and spec.origin is not None
            and os.path.realpath(spec.origin) in self._extensions
        ):
            return
        raise IntegrityError(
            f"{fullname} ({spec.origin}) is not among the verified files of {parent}; not imported"
        )


_IMPORTER = VerifiedImporter()


def verified_importer() -> VerifiedImporter:
    """The process-wide importer that :func:`import_driver` registers drivers with."""
    return _IMPORTER


def import_driver(verification: Verification, importer: VerifiedImporter | None = None) -> object:
    """Import the object a verified candidate's entry point names.

    Pinned and signed drivers are imported through ``importer``; an unverified one the policy
    allows is imported the ordinary way. Raises :class:`IntegrityError` for a driver that may
    not be imported, whose modules were already imported from elsewhere, or whose bytes
    changed since verification.
    """
    candidate = verification.candidate
    if not verification.allowed:
        raise IntegrityError(
            f"driver {candidate.label!r} ({candidate.distribution} {candidate.version}) is "
            f"{verification.status}: {verification.message}"
        )
    verified = verification.status in ("pinned", "signed")
    if verified:
        importer = importer or _IMPORTER
        extensions = verification.scan.extensions if verification.scan is not None else ()
        importer.register(candidate.location, verification.modules, extensions)
        importer.install()
        _refuse_imported_elsewhere(verification)
    module = importlib.import_module(candidate.module)
    if verified and not isinstance(getattr(module.__spec__, "loader", None), _VerifiedLoader):
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


def _refuse_imported_elsewhere(verification: Verification) -> None:
    by_path = {m.path: m for m in verification.modules}
    for path in verification.entry_files:
        expected = by_path.get(path)
        if expected is None:
            continue
        existing = sys.modules.get(expected.name)
        if existing is None:
            continue
        loader = getattr(getattr(existing, "__spec__", None), "loader", None)
        if not (isinstance(loader, _VerifiedLoader) and loader.expected == expected):
            where = getattr(existing, "__file__", None) or "an unknown place"
            raise IntegrityError(
                f"module {expected.name!r} was already imported from {where} before "
                "verification; its code cannot be vouched for"
            )


def is_verified_module(module: object) -> bool:
    """Whether ``module`` was imported from verified bytes by the verified importer."""
    spec = getattr(module, "__spec__", None)
    return isinstance(getattr(spec, "loader", None), _VerifiedLoader)


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
