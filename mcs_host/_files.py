"""The host's files: every file the host parses is read here, every JSON text parsed here,
and every file the host writes written here.

A file is opened once, without blocking (a FIFO named like a metadata file must not hang the
host), checked to be a regular file, and read up to a size limit through that one descriptor.
JSON is parsed with its nesting depth bounded, so a hostile document ends in an
:class:`InputError` naming its source, never a ``RecursionError`` or a hang. A state file the
host reads, changes and writes back is changed under :func:`locked`, so two writers at once
both count.

A file is written by :func:`write_atomic` (or :func:`replacing`), which puts a whole new file
in its place, or by :func:`create_new`, which makes one that was not there. Neither writes
through a symbolic link: every file they open is created by that open (``O_CREAT | O_EXCL |
O_NOFOLLOW``), so a link planted in a directory the host does not own (a cloned repository)
leads nowhere, and a new file is private (0600) unless the caller says otherwise.
:func:`private_problem` says why a secret the host reads is not the user's alone.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
from collections.abc import Iterator
from typing import IO, Any

__all__ = [
    "CONFIG_LIMIT",
    "JSON_DEPTH",
    "MANIFEST_LIMIT",
    "METADATA_LIMIT",
    "PRIVATE",
    "RECORD_LIMIT",
    "REGISTRY_LIMIT",
    "SHARED",
    "STATE_LIMIT",
    "InputError",
    "Opened",
    "WriteRefusedError",
    "create_new",
    "loads_json",
    "locked",
    "private_problem",
    "read_bytes",
    "read_opened",
    "read_text",
    "replacing",
    "validation_lines",
    "write_atomic",
]

METADATA_LIMIT = 16 * 1024 * 1024
"""METADATA, entry_points.txt, direct_url.json and the like."""
RECORD_LIMIT = 64 * 1024 * 1024
REGISTRY_LIMIT = 64 * 1024 * 1024
STATE_LIMIT = 8 * 1024 * 1024
"""The registry state and the approvals the host keeps."""
MANIFEST_LIMIT = 4 * 1024 * 1024
"""``mcs-driver.json`` and ``mcs-signature.json``."""
CONFIG_LIMIT = 8 * 1024 * 1024
"""Configuration and prompt files."""
JSON_DEPTH = 64
"""How deeply a JSON document the host reads may nest arrays and objects."""

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1024 * 1024
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | getattr(os, "O_BINARY", 0)
"""How every file the host writes is opened: made by this open, never through a link."""
PRIVATE = 0o600
"""The mode of a new file the host writes, unless its caller gives another."""
SHARED = 0o666
"""The mode (less the umask) of a new file made to be handed on: a registry, a signed wheel
or envelope, a new project's files."""


class InputError(ValueError):
    """A file or text cannot be used; the message names it and says why."""


class WriteRefusedError(OSError):
    """A file the host will not write where it stands (a link, a directory); the message
    names it and says why. An ``OSError``, so a caller that reports a failed write reports
    this one."""

    def __init__(self, path: str, problem: str, number: int = errno.EINVAL) -> None:
        super().__init__(number, problem, path)

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


class Opened:
    """A regular file opened once: its descriptor, status and the path it was opened by."""

    __slots__ = ("fd", "path", "status")

    def __init__(self, path: str, fd: int, status: os.stat_result) -> None:
        self.path = path
        self.fd = fd
        self.status = status

    @classmethod
    def open(cls, path: str | os.PathLike[str], what: str, *, follow: bool = True) -> Opened:
        """Open ``path`` read-only without blocking; refuse anything but a regular file.

        With ``follow`` false a symlink is refused too. Raises ``FileNotFoundError`` when
        the file does not exist, :class:`InputError` for anything else.
        """
        name = os.fspath(path)
        flags = os.O_RDONLY | _NONBLOCK | _CLOEXEC | (0 if follow else _NOFOLLOW)
        try:
            fd = os.open(name, flags)
        except FileNotFoundError:
            raise
        except OSError as exc:
            if not follow and os.path.islink(name):
                raise InputError(f"{name}: {what} is a symbolic link") from None
            raise InputError(f"{name}: cannot open {what}: {exc.strerror or exc}") from None
        try:
            status = os.fstat(fd)
        except OSError as exc:
            os.close(fd)
            raise InputError(f"{name}: cannot read {what}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(status.st_mode):
            os.close(fd)
            raise InputError(f"{name}: {what} is not a regular file ({_kind(status.st_mode)})")
        return cls(name, fd, status)

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Opened:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_opened(opened: Opened, what: str, limit: int) -> bytes:
    """Read a whole opened file, refusing more than ``limit`` bytes."""
    if opened.status.st_size > limit:
        raise InputError(
            f"{opened.path}: {what} has {opened.status.st_size} bytes; the limit is {limit}"
        )
    chunks: list[bytes] = []
    total = 0
    try:
        while chunk := os.read(opened.fd, min(_CHUNK, limit + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise InputError(f"{opened.path}: {what} grew past {limit} bytes while read")
    except OSError as exc:
        raise InputError(f"{opened.path}: cannot read {what}: {exc.strerror or exc}") from None
    return b"".join(chunks)


def read_bytes(
    path: str | os.PathLike[str], what: str, limit: int, *, follow: bool = True
) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit``); see :meth:`Opened.open`."""
    with Opened.open(path, what, follow=follow) as opened:
        return read_opened(opened, what, limit)


def read_text(path: str | os.PathLike[str], what: str, limit: int, *, follow: bool = True) -> str:
    """The UTF-8 text of the regular file ``path``; a decoding error names the file."""
    data = read_bytes(path, what, limit, follow=follow)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{os.fspath(path)}: {what} is not UTF-8: {exc}") from None


@contextlib.contextmanager
def locked(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive lock for a read-modify-write of ``path``: ``flock`` on ``PATH.lock``
    beside it (made if missing, never removed, so every writer locks the same file), released
    when the block ends. It waits for the writer before it; the block must be short.

    Where there is no ``fcntl`` (Windows) nothing is locked. Raises ``OSError`` when the
    lock file cannot be made or opened (a read-only directory).
    """
    try:
        import fcntl  # noqa: PLC0415 - only a writer needs it, and Windows has none
    except ImportError:  # pragma: no cover - POSIX has fcntl
        yield
        return
    name = os.path.abspath(os.fspath(path)) + ".lock"
    os.makedirs(os.path.dirname(name), exist_ok=True)
    fd = os.open(name, os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def write_atomic(
    path: str | os.PathLike[str], data: bytes | str, what: str = "the file", *, mode: int = PRIVATE
) -> None:
    """Replace the file ``path`` with ``data`` (text as UTF-8) whole: never half written,
    never through a symbolic link (one at ``path`` is refused), keeping the file's mode; a
    new file gets ``mode`` less the umask (private, 0600, unless told). ``what`` names the
    file in an error. See :func:`replacing`."""
    with replacing(path, what, mode=mode) as out:
        out.write(data.encode("utf-8") if isinstance(data, str) else data)


@contextlib.contextmanager
def replacing(
    path: str | os.PathLike[str], what: str = "the file", *, mode: int = PRIVATE
) -> Iterator[IO[bytes]]:
    """A new file to write ``path``'s content into, put in its place whole when the block
    ends (and removed, ``path`` untouched, when it raises). Its directory is made if missing.

    The new file is made beside it by :func:`create_new`'s open (``O_EXCL | O_NOFOLLOW``),
    written, flushed to disk, then renamed over ``path``: a reader sees the old file or the
    new one, never half of it. It keeps the mode of the file it replaces; a new one gets
    ``mode`` less the umask. A symbolic link at ``path`` is refused
    (:class:`WriteRefusedError`), neither followed nor replaced: following it writes where
    whoever made the link chose (the approvals, from a cloned repository), and replacing it
    would put what was read through it (the user's file, changed) where the link's maker
    reads it, and would quietly cut a link the user made to keep the file elsewhere; the
    message says to name the file it leads to. A link put there after that check is
    replaced, never followed (a rename does not follow links). Anything else that is not a
    regular file is refused too.
    """
    name = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(name))
    os.makedirs(directory, exist_ok=True)
    kept = _kept_mode(name, what)
    base = os.path.basename(name)[:200]
    for _ in range(100):
        temporary = os.path.join(directory, f".{base}.{os.urandom(6).hex()}.tmp")
        with contextlib.suppress(FileExistsError):
            fd = os.open(temporary, _CREATE, mode)
            break
    else:  # pragma: no cover - a hundred random names taken
        raise FileExistsError(errno.EEXIST, f"cannot make a new file beside {what}", name)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            if kept is not None and hasattr(os, "fchmod"):
                os.fchmod(out.fileno(), kept)
            os.fsync(out.fileno())
        os.replace(temporary, name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _sync_directory(directory)


def create_new(
    path: str | os.PathLike[str], data: bytes | str, what: str = "the file", *, mode: int = PRIVATE
) -> None:
    """Write ``data`` (text as UTF-8) to a file this call makes at ``path``, with ``mode``
    less the umask, flushed to disk. Made by ``O_CREAT | O_EXCL | O_NOFOLLOW``: whatever is
    there already, a symbolic link (even one that leads nowhere) included, is left as it is
    and ``FileExistsError`` raised. A write that fails removes the file."""
    name = os.fspath(path)
    fd = os.open(name, _CREATE, mode)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data.encode("utf-8") if isinstance(data, str) else data)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise


def private_problem(status: os.stat_result, path: str) -> str | None:
    """Why the file at ``path`` whose status is ``status`` is not its user's alone (another
    user owns it, or its mode gives group or others any access), with what to do; None
    when it is. POSIX only: elsewhere file modes are not permissions, and None."""
    if os.name != "posix":
        return None
    if status.st_uid != os.getuid():
        return (
            f"it belongs to user {status.st_uid}, not to you (user {os.getuid()}): use a file "
            "of your own, with mode 600"
        )
    if status.st_mode & 0o077:
        return (
            f"its mode is {stat.S_IMODE(status.st_mode):04o}, which lets group or others "
            f"use it: run chmod 600 {path}"
        )
    return None


def _kept_mode(name: str, what: str) -> int | None:
    """The mode of the regular file ``name``; None when there is none;
    :class:`WriteRefusedError` when a link or anything else but a regular file is there."""
    try:
        status = os.lstat(name)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(status.st_mode):
        try:
            leads = f" (to {os.readlink(name)})"
        except OSError:
            leads = ""
        raise WriteRefusedError(
            name,
            f"{what} is a symbolic link{leads}; mcs-host writes no file through a link: name "
            "the file it leads to, or remove the link",
            errno.ELOOP,
        )
    if not stat.S_ISREG(status.st_mode):
        raise WriteRefusedError(name, f"{what} is {_kind(status.st_mode)}; only a file is replaced")
    return stat.S_IMODE(status.st_mode)


def _sync_directory(directory: str) -> None:
    """Flush a rename in ``directory`` to disk, where a directory can be opened (POSIX)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC
    with contextlib.suppress(OSError):
        fd = os.open(directory, flags)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def loads_json(data: bytes | str, source: str, *, depth: int = JSON_DEPTH) -> Any:
    """Parse JSON text whose arrays and objects nest at most ``depth`` levels.

    The nesting is measured before parsing, in one pass that skips strings, so no document
    can exhaust the parser's recursion. Raises :class:`InputError` naming ``source``.
    """
    text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
    deepest = _nesting(text)
    if deepest > depth:
        raise InputError(f"{source}: JSON nested {deepest} levels deep; the limit is {depth}")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{source}: not JSON: {exc}") from None


def _nesting(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` outside JSON strings, in one regex pass."""
    deepest = level = 0
    for token in _TOKENS.finditer(text):
        char = token.group()
        if char in "[{":
            level += 1
            deepest = max(deepest, level)
        elif char in "]}":
            level -= 1
    return deepest


_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
"""A JSON string (skipped whole) or a bracket."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def validation_lines(source: str, errors: list[Any]) -> str:
    """A model's validation errors as ``source: field: problem``, one per line (the shape of
    pydantic's ``ValidationError.errors()``, without importing pydantic here)."""
    lines = []
    for error in errors:
        where = ".".join(str(part) for part in error.get("loc", ())) or "(top)"
        problem = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        lines.append(f"{source}: {where}: {problem}")
    return "\n".join(lines) or f"{source}: invalid"
