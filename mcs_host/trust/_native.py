"""Native code from verified bytes: extension modules and the shared libraries they link.

The dynamic linker loads files by path and searches for the libraries an object names
(``DT_NEEDED``) itself, so both must be steered. Where the system has anonymous memory files
(Linux), each verified object is copied, as it is read and hashed, into a memory file of its
own that stays open for the life of the process (its ``/proc/self/fd/N`` name is never reused,
so the linker cannot mistake one object for another). Before an extension module is linked,
the verified libraries of its site directory that the linker would find for it through an
``$ORIGIN`` directory (an auditwheel ``NAME.libs/`` directory, or libraries beside it; an
object's ``RUNPATH``, else its ``RPATH`` and its loaders', as glibc searches) are loaded the
same way, those they need first; the linker then finds each one loaded under its soname and
searches for no file.
What no verified distribution provides (the C library, ``libstdc++``) is the system's, found as
usual. Without memory files, the verified copies are written into a private directory (mode
0700, removed when the interpreter exits) in their distribution's layout, so ``$ORIGIN``
resolves to verified copies there.

Only the standard library is imported; ``ctypes`` (to load a library) only when one is needed.
"""

from __future__ import annotations

import _imp
import _thread
import hashlib
import importlib.machinery
import os
import posixpath
import struct
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, NamedTuple, Protocol

from ._errors import IntegrityError

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

__all__ = ["Expected", "NativeLinker", "elf_links", "is_shared_library", "linker"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1024 * 1024
_LIBRARY_SUFFIXES = (".so", ".dylib", ".dll", ".pyd")


class Expected(Protocol):
    """What a verified file must be: its path in the site directory, size and sha256."""

    @property
    def path(self) -> str: ...
    @property
    def sha256(self) -> str: ...
    @property
    def size(self) -> int: ...


def is_shared_library(path: str) -> bool:
    """Whether a listed file is named like a shared object (``x.so``, ``x.so.5``, ...)."""
    name = path.rpartition("/")[2]
    return name.endswith(_LIBRARY_SUFFIXES) or ".so." in name


def copy_verified(path: str, expected: Expected, write: Callable[[bytes], object]) -> None:
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
            f"verified {expected.sha256} ({expected.size} bytes); not loaded"
        )


class ElfLinks(NamedTuple):
    """What an ELF object tells the dynamic linker about linking it."""

    soname: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    """Its ``DT_RPATH`` directories: searched for what it needs, and for what the objects it
    loads need, unless those have a ``DT_RUNPATH``."""
    runpath: tuple[str, ...]
    """Its ``DT_RUNPATH`` directories: searched for what it needs itself, instead of any
    ``DT_RPATH``."""


_DT_NEEDED, _DT_STRTAB, _DT_STRSZ, _DT_SONAME, _DT_RPATH, _DT_RUNPATH = 1, 5, 10, 14, 15, 29
_STRTAB_LIMIT = 64 * 1024 * 1024
_HEADERS_LIMIT = 4 * 1024 * 1024


def elf_links(read: Callable[[int, int], bytes]) -> ElfLinks | None:
    """The soname, needed libraries and search path of an ELF object, read through
    ``read(size, offset)``; ``None`` for anything that is not a well-formed dynamic ELF file."""
    try:
        return _elf_links(read)
    except (struct.error, ValueError, OSError):
        return None


def _elf_links(read: Callable[[int, int], bytes]) -> ElfLinks | None:
    ident = read(64, 0)
    if len(ident) < 52 or ident[:4] != b"\x7fELF" or ident[4] not in (1, 2):
        return None
    wide, order = ident[4] == 2, "<" if ident[5] == 1 else ">"
    if wide:
        (phoff,) = struct.unpack_from(order + "Q", ident, 0x20)
        entsize, count = struct.unpack_from(order + "HH", ident, 0x36)
        header, dyn = order + "II QQQ QQQ", order + "qQ"
    else:
        (phoff,) = struct.unpack_from(order + "I", ident, 0x1C)
        entsize, count = struct.unpack_from(order + "HH", ident, 0x2A)
        header, dyn = order + "I III III I", order + "iI"
    if entsize < struct.calcsize(header) or entsize * count > _HEADERS_LIMIT:
        return None
    table = read(entsize * count, phoff)
    loads: list[tuple[int, int, int]] = []  # (vaddr, offset, filesz)
    dynamic: tuple[int, int] | None = None
    for index in range(count):
        fields = struct.unpack_from(header, table, index * entsize)
        if wide:
            kind, _, offset, vaddr, _, filesz, _, _ = fields
        else:
            kind, offset, vaddr, _, filesz, _, _, _ = fields
        if kind == 1:
            loads.append((vaddr, offset, filesz))
        elif kind == 2:
            dynamic = (offset, filesz)
    if dynamic is None or dynamic[1] > _HEADERS_LIMIT:
        return None
    raw = read(dynamic[1], dynamic[0])
    step = struct.calcsize(dyn)
    tags: list[tuple[int, int]] = []
    for at in range(0, len(raw) - step + 1, step):
        tag, value = struct.unpack_from(dyn, raw, at)
        if tag == 0:
            break
        tags.append((tag, value))
    found = dict(tags)
    if _DT_STRTAB not in found:
        return None
    strtab = next(
        (
            off + found[_DT_STRTAB] - va
            for va, off, size in loads
            if va <= found[_DT_STRTAB] < va + size
        ),
        None,
    )
    if strtab is None:
        return None
    strings = read(min(found.get(_DT_STRSZ, 0), _STRTAB_LIMIT), strtab)

    def text(at: int) -> str:
        end = strings.index(b"\0", at)
        return strings[at:end].decode("utf-8", "surrogateescape")

    needed = tuple(text(v) for t, v in tags if t == _DT_NEEDED)
    rpath = tuple(part for t, v in tags if t == _DT_RPATH for part in text(v).split(":"))
    runpath = tuple(part for t, v in tags if t == _DT_RUNPATH for part in text(v).split(":"))
    soname = text(found[_DT_SONAME]) if _DT_SONAME in found else None
    return ElfLinks(soname, needed, rpath, runpath)


class _Loaded(NamedTuple):
    path: str
    """The path the dynamic linker knows the object by."""
    links: ElfLinks | None


class NativeLinker:
    """Loads verified extension modules and the verified shared libraries they link, for
    the process; what it loaded stays loaded (and its memory file open)."""

    __slots__ = ("_directory", "_libraries", "_loaded", "_lock", "_sonames")

    def __init__(self) -> None:
        self._libraries: dict[tuple[str, str], Expected] = {}
        self._loaded: dict[tuple[str, str], _Loaded] = {}
        self._sonames: set[str] = set()  # of the libraries loaded
        self._lock = _thread.RLock()
        self._directory: str | None = None

    def add_libraries(self, location: str, files: Mapping[str, Expected]) -> None:
        """Make the verified shared objects of a distribution installed under ``location``
        (``files`` by path in the site directory) available to link against."""
        with self._lock:
            for path, expected in files.items():
                self._libraries[(location, path)] = expected

    def load_extension(self, spec: ModuleSpec, location: str, expected: Expected) -> ModuleType:
        """The extension module ``spec`` names, created from a private copy of its verified
        bytes after the verified libraries it links."""
        with self._lock:
            if _has_memory_files():
                loaded = self._copy_to_memory(location, expected)
                self._link_needed(location, expected.path, loaded.links, ())
            else:
                loaded = self._copy_to_directory(location, expected)
        stand_in = importlib.machinery.ModuleSpec(
            spec.name,
            importlib.machinery.ExtensionFileLoader(spec.name, loaded.path),
            origin=loaded.path,
        )
        module: ModuleType = _imp.create_dynamic(stand_in)
        return module

    # -- memory files ---------------------------------------------------------------------

    def _copy_to_memory(self, location: str, expected: Expected) -> _Loaded:
        key = (location, expected.path)
        known = self._loaded.get(key)
        if known is not None:
            return known
        fd = os.memfd_create(  # type: ignore[attr-defined,unused-ignore]
            "mcs-host:" + expected.path.rpartition("/")[2][:200],
            os.MFD_CLOEXEC,  # type: ignore[attr-defined,unused-ignore]
        )
        try:
            copy_verified(_join(location, expected.path), expected, lambda b: _write_all(fd, b))
        except BaseException:
            os.close(fd)
            raise
        # kept open for the life of the process: the linker knows the object by this name
        loaded = _Loaded(f"/proc/self/fd/{fd}", elf_links(lambda n, at: os.pread(fd, n, at)))
        self._loaded[key] = loaded
        return loaded

    def _link_needed(
        self,
        location: str,
        path: str,
        links: ElfLinks | None,
        chain: tuple[str, ...],
        inherited: tuple[str, ...] = (),
    ) -> None:
        """Load, leaves first, every verified library that ``path`` names and that the
        linker would find through an ``$ORIGIN`` directory: of its ``DT_RUNPATH``, else of
        its ``DT_RPATH`` and then ``inherited``, those of the objects that load it (as glibc
        searches)."""
        if links is None:
            return
        rpath = _origin_dirs(path, links.rpath)
        folders = _origin_dirs(path, links.runpath) if links.runpath else rpath + inherited
        for name in links.needed:
            if name in self._sonames:
                continue  # loaded already: the linker takes that one
            found = self._vendored(location, folders, name)
            if found is None:
                continue  # the system's, found as the linker finds it
            if found.path in chain:
                continue  # a cycle: the linker resolves it once both are loaded
            loaded = self._copy_to_memory(location, found)
            if loaded.links is None or loaded.links.soname != name:
                raise ImportError(
                    f"{_join(location, found.path)} is linked as {name!r} by "
                    f"{_join(location, path)} but does not name itself so (soname "
                    f"{loaded.links.soname if loaded.links else None!r}): its verified copy "
                    "cannot stand in for it"
                )
            self._link_needed(location, found.path, loaded.links, (*chain, path), rpath + inherited)
            _dlopen(loaded.path)
            self._sonames.add(name)

    def _vendored(self, location: str, folders: tuple[str, ...], name: str) -> Expected | None:
        """The verified library of ``location`` named ``name`` in the first of ``folders``
        (paths in the site directory) that has one."""
        if "/" in name:
            return None
        for folder in folders:
            found = self._libraries.get((location, posixpath.join(folder, name)))
            if found is not None:
                return found
        return None

    # -- a private directory --------------------------------------------------------------

    def _copy_to_directory(self, location: str, expected: Expected) -> _Loaded:
        """The extension's verified copy in a private directory that mirrors the site
        directory, beside verified copies of every shared library of ``location``."""
        if self._directory is None:
            import atexit
            import shutil
            import tempfile

            self._directory = tempfile.mkdtemp(prefix="mcs-host-native-")
            atexit.register(shutil.rmtree, self._directory, True)
        mirror = os.path.join(
            self._directory,
            hashlib.sha256(location.encode("utf-8", "surrogateescape")).hexdigest()[:16],
        )
        wanted = [expected] + [e for (where, _), e in self._libraries.items() if where == location]
        for each in wanted:
            key = (location, each.path)
            if key in self._loaded:
                continue
            target = _join(mirror, each.path)
            os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
            with open(target, "xb", buffering=0) as out:
                copy_verified(_join(location, each.path), each, out.write)
            self._loaded[key] = _Loaded(target, None)
        return self._loaded[(location, expected.path)]


def _origin_dirs(path: str, entries: tuple[str, ...]) -> tuple[str, ...]:
    """The search directories among ``entries`` that start at ``$ORIGIN``, as paths in the
    site directory of the object at ``path``; others (absolute, outside) name no verified
    file."""
    folders = []
    for entry in entries:
        for token in ("$ORIGIN", "${ORIGIN}"):
            if entry == token or entry.startswith(token + "/"):
                folder = posixpath.normpath(
                    posixpath.join(posixpath.dirname(path), entry[len(token) :].lstrip("/"))
                )
                if folder != ".." and not folder.startswith("../"):
                    folders.append("" if folder == "." else folder)
    return tuple(folders)


def _has_memory_files() -> bool:
    return hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")


def _dlopen(path: str) -> None:
    import ctypes

    try:
        ctypes.CDLL(path, mode=sys.getdlopenflags())
    except OSError as exc:
        raise ImportError(str(exc), path=path) from None


def _join(location: str, path: str) -> str:
    return os.path.join(location, *path.split("/"))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


_LINKER = NativeLinker()


def linker() -> NativeLinker:
    """The process-wide linker of verified native code."""
    return _LINKER
