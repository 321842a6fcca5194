"""The loaders of verified modules: the bytes compiled or linked are the bytes checked.

A source module is read once without following links and checked for size and sha256 against
the verified listing; those same bytes are compiled, or the code compiled from them before is
taken from the authenticated bytecode cache (:mod:`mcs_host.trust._bytecode`). A ``.pyc`` in
``__pycache__`` is never read nor written. An extension module is read the same way into a
private copy that the dynamic linker loads, after the verified libraries it links
(:mod:`mcs_host.trust._native`). The import gate (:mod:`mcs_host.trust._gate`) hands these
loaders out for the modules it claims.
"""

from __future__ import annotations

import _imp
import importlib.machinery
import importlib.util
import os
from types import CodeType, ModuleType
from typing import TYPE_CHECKING, Any

from ._bytecode import bytecode_cache
from ._errors import IntegrityError
from ._native import copy_verified, linker

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

    from .modules import ModuleFile


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
        copy_verified(self.path, self.expected, chunks.append)
        cache = bytecode_cache()
        code = None if cache is None else cache.get(self.expected.sha256, self.path)
        if code is None:
            code = compile(b"".join(chunks), self.path, "exec", dont_inherit=True)
            if cache is not None:
                cache.put(self.expected.sha256, code)
        return code

    def exec_module(self, module: ModuleType) -> None:
        module.__dict__["__builtins__"] = self.builtins
        super().exec_module(module)


class _VerifiedExtensionLoader(importlib.machinery.ExtensionFileLoader):
    """Loads one extension module from a private copy of its verified bytes, after the
    verified libraries it links (:mod:`mcs_host.trust._native`)."""

    def __init__(self, fullname: str, path: str, expected: ModuleFile, location: str) -> None:
        super().__init__(fullname, path)
        self.expected = expected
        self.location = location

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        module = linker().load_extension(spec, self.location, self.expected)
        module.__file__ = self.path
        return module

    def exec_module(self, module: ModuleType) -> None:
        _imp.exec_dynamic(module)


def verified_spec(
    fullname: str,
    location: str,
    expected: ModuleFile,
    extension: bool,
    builtins: dict[str, Any],
) -> ModuleSpec:
    """The spec the import gate returns for a module it claims, installed under
    ``location``; a source module runs with ``builtins`` (the gate's guarded ``import``)."""
    origin = os.path.join(location, *expected.path.split("/"))
    loader: importlib.machinery.SourceFileLoader | importlib.machinery.ExtensionFileLoader
    if extension:
        loader = _VerifiedExtensionLoader(fullname, origin, expected, location)
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
