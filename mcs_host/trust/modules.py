"""The module-name mapping: which files of a listing are which importable modules.

A distribution's files (:class:`~mcs_host.trust.digest.TreeDigest`) become the modules they
are imported as (:func:`module_files`, :func:`extension_module_files`), and a dotted module
name the listed files importing it would execute (:func:`resolve_module`), without importing
anything. The import gate, verification and ``mcs-host add`` read them.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from importlib.machinery import EXTENSION_SUFFIXES

from .digest import TreeDigest

__all__ = ["ModuleFile", "extension_module_files", "module_files", "resolve_module"]


@dataclass(frozen=True, slots=True)
class ModuleFile:
    """A module file of a distribution, with the hash its bytes must have when imported."""

    name: str
    """The dotted module name."""
    path: str
    """Relative to the site directory, ``/``-separated."""
    sha256: str
    size: int
    package: bool


def module_files(digest: TreeDigest) -> tuple[ModuleFile, ...]:
    """Every Python source module in a listing, as the names it is imported by."""
    found = []
    for entry in digest.entries:
        if not entry.path.endswith(".py") or ".dist-info/" in entry.path:
            continue
        parts = entry.path[:-3].split("/")
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        if parts and all(part.isidentifier() for part in parts):
            found.append(ModuleFile(".".join(parts), entry.path, entry.sha256, entry.size, package))
    return tuple(found)


def resolve_module(module: str, paths: Collection[str]) -> tuple[list[str], str | None]:
    """The listed files importing ``module`` executes, outermost first, without executing any.

    Returns ``(files, problem)``: a parent may be a namespace directory (no ``__init__.py``,
    something listed inside); ``problem`` says what is not among ``paths``.
    """
    parts = module.split(".")
    files: list[str] = []
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        rel = "/".join(parts[:depth])
        if f"{rel}/__init__.py" in paths:
            files.append(f"{rel}/__init__.py")
            continue
        if depth < len(parts):
            if any(path.startswith(rel + "/") for path in paths):
                continue  # a namespace package portion
            return files, f"package {name!r} is not part of the distribution"
        if f"{rel}.py" in paths:
            files.append(f"{rel}.py")
        elif any(f"{rel}{suffix}" in paths for suffix in EXTENSION_SUFFIXES):
            files.append(next(f"{rel}{s}" for s in EXTENSION_SUFFIXES if f"{rel}{s}" in paths))
        else:
            return files, f"module {name!r} is not part of the distribution"
    return files, None


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
