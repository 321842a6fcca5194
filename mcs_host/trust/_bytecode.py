"""The bytecode cache: code compiled from verified source, found again by the source's sha256.

The import gate compiles a verified module from the bytes it has just checked; this cache keeps
that code so a later load unmarshals it instead of compiling. An entry is found by the source's
sha256, the interpreter's magic number and optimisation level, so a changed source never finds
one. The cache directory (``$MCS_HOST_CACHE_DIR``, else ``$XDG_CACHE_HOME/mcs-host``, else
``~/.cache/mcs-host``) is not trusted: every entry carries an HMAC-SHA256 under a key that only
the state directory holds (``bytecode.key``, mode 0600, made on first use), and an entry
without a valid one (changed, truncated, written under another key) is never unmarshalled: the
module is compiled from its verified source and the entry written again. Writing follows
Python's own switch (``-B``, ``PYTHONDONTWRITEBYTECODE``): with it, entries are only read.

Only the standard library is imported.
"""

from __future__ import annotations

import _imp
import contextlib
import hmac
import marshal
import os
import stat
import sys
from importlib.util import MAGIC_NUMBER
from types import CodeType

from mcs_host._files import private_problem
from mcs_host._places import cache_directory, state_directory

__all__ = ["BytecodeCache", "bytecode_cache"]

_FORMAT = b"mcs-host-bytecode/1\n"
_KEY_SIZE = 32
_MAC_SIZE = 32
_ENTRY_LIMIT = 256 * 1024 * 1024
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class BytecodeCache:
    """Compiled code of verified sources in ``directory``, authenticated under ``key``."""

    __slots__ = ("_directory", "_key", "_prefix", "hits", "misses", "rejected", "writes")

    def __init__(self, directory: str, key: bytes) -> None:
        tag = f"{sys.implementation.cache_tag}-{MAGIC_NUMBER.hex()}-o{sys.flags.optimize}"
        self._directory = os.path.join(directory, "bytecode", tag)
        self._key = key
        self._prefix = _FORMAT + MAGIC_NUMBER + bytes([sys.flags.optimize & 0xFF])
        self.hits = self.misses = self.rejected = self.writes = 0
        """Entries used, absent, refused (their HMAC did not hold) and written."""

    def _path(self, sha256: str) -> str:
        return os.path.join(self._directory, sha256[:2], sha256[2:])

    def get(self, sha256: str, filename: str) -> CodeType | None:
        """The code compiled from the source whose sha256 is ``sha256``, its file names set
        to ``filename``; ``None`` when there is no entry that holds."""
        data = _read(self._path(sha256))
        if data is None:
            self.misses += 1
            return None
        head = self._prefix + bytes.fromhex(sha256)
        split = len(head) + _MAC_SIZE
        mac, payload = data[len(head) : split], data[split:]
        if not (
            data.startswith(head)
            and hmac.compare_digest(mac, hmac.digest(self._key, head + payload, "sha256"))
        ):
            self.rejected += 1
            return None
        try:
            code = marshal.loads(payload)  # noqa: S302 - its HMAC held: this host wrote it
        except (EOFError, ValueError, TypeError):
            code = None
        if not isinstance(code, CodeType):
            self.rejected += 1
            return None
        _imp._fix_co_filename(code, filename)  # type: ignore[attr-defined]
        self.hits += 1
        return code

    def put(self, sha256: str, code: CodeType) -> None:
        """Keep ``code``, compiled from the verified source whose sha256 is ``sha256``
        (nothing is written under ``-B``; a failure to write is not an error)."""
        if sys.dont_write_bytecode:
            return
        head = self._prefix + bytes.fromhex(sha256)
        payload = marshal.dumps(code)
        data = head + hmac.digest(self._key, head + payload, "sha256") + payload
        path = self._path(sha256)
        temporary = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
            os.replace(temporary, path)
            self.writes += 1
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def _read(path: str) -> bytes | None:
    """A regular file's bytes, read through one descriptor without following links."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _ENTRY_LIMIT:
            return None
        chunks = []
        left = info.st_size + 1
        while left > 0 and (chunk := os.read(fd, left)):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _key(directory: str, create: bool) -> bytes | None:
    """The cache's key in the state ``directory``, made (atomically, mode 0600) if there is
    none and ``create``; ``None`` when it cannot be read or made, or is not a private regular
    file."""
    path = os.path.join(directory, "bytecode.key")
    data = _read(path)
    if data is None and create and not os.path.lexists(path):
        temporary = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
            try:
                _write_all(fd, os.urandom(_KEY_SIZE))
            finally:
                os.close(fd)
            with contextlib.suppress(FileExistsError):
                os.link(temporary, path)  # never replaces a key another process made first
        except OSError:
            return None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        data = _read(path)
    if data is None or len(data) != _KEY_SIZE:
        return None
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    if private_problem(info, path) is not None:
        return None  # others can read or write it: it authenticates nothing
    return data


_CACHE: list[BytecodeCache | None] = []


def bytecode_cache() -> BytecodeCache | None:
    """The process's bytecode cache; ``None`` when the state directory has no usable key."""
    if not _CACHE:
        key = _key(state_directory(), create=not sys.dont_write_bytecode)
        _CACHE.append(None if key is None else BytecodeCache(cache_directory(), key))
    return _CACHE[0]
