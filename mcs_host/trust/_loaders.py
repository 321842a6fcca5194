"""The loaders of verified modules: the bytes compiled or linked are the bytes checked.

A source module is read once without following links, checked for size and sha256 against
the verified listing, and those same bytes are compiled; a cached ``.pyc`` is never read nor
written. An extension module is read the same way into a private in-memory copy, and the
dynamic linker loads that copy. The import gate (:mod:`mcs_host.trust._gate`) hands these
loaders out for the modules it claims.
"""

from __future__ import annotations

import _imp
import hashlib
import importlib.machinery
import importlib.util
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.machinery import EXTENSION_SUFFIXES
from types import CodeType, ModuleType
from typing import TYPE_CHECKING, Any

from ._errors import IntegrityError

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

    from .digest import ModuleFile

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1024 * 1024


class _VerifiedLoader(importlib.machinery.SourceFileLoader):
    """Loads one module from source whose sha256 must match the verified listing."""

    def __init__(
        self, fullname: str, path: str, expected: ModuleFile, builtins: dict[str, Any]
    ) -> None:
        super().__init__(fullname, path)
        self.expected = expected
        self.builtins = builtins

    def get_code(self, fullname: str) -> CodeType:
        chunks: list[bytes] = []
        _copy_verified(self.path, self.expected, chunks.append)
        return compile(b"".join(chunks), self.path, "exec", dont_inherit=True)

    def exec_module(self, module: ModuleType) -> None:
        module.__dict__["__builtins__"] = self.builtins
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


def verified_spec(
    fullname: str,
    origin: str,
    expected: ModuleFile,
    extension: bool,
    builtins: dict[str, Any],
) -> ModuleSpec:
    """The spec the import gate returns for a claimed module; a source module runs with
    ``builtins`` (the gate's guarded ``import``)."""
    loader: importlib.machinery.SourceFileLoader | importlib.machinery.ExtensionFileLoader
    if extension:
        loader = _VerifiedExtensionLoader(fullname, origin, expected)
    else:
        loader = _VerifiedLoader(fullname, origin, expected, builtins)
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


def is_verified_module(module: object) -> bool:
    """Whether ``module`` was imported from verified bytes by the verified importer."""
    spec = getattr(module, "__spec__", None)
    return isinstance(getattr(spec, "loader", None), _VerifiedLoader | _VerifiedExtensionLoader)
