"""Bounded input: every file the host parses is read here, and every JSON text parsed here.

A file is opened once, without blocking (a FIFO named like a metadata file must not hang the
host), checked to be a regular file, and read up to a size limit through that one descriptor.
JSON is parsed with its nesting depth bounded, so a hostile document ends in an
:class:`InputError` naming its source, never a ``RecursionError`` or a hang. A state file the
host reads, changes and writes back is changed under :func:`locked`, so two writers at once
both count.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Iterator
from typing import Any

__all__ = [
    "CONFIG_LIMIT",
    "JSON_DEPTH",
    "MANIFEST_LIMIT",
    "METADATA_LIMIT",
    "RECORD_LIMIT",
    "REGISTRY_LIMIT",
    "STATE_LIMIT",
    "InputError",
    "Opened",
    "loads_json",
    "locked",
    "read_bytes",
    "read_opened",
    "read_text",
    "validation_lines",
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


class InputError(ValueError):
    """A file or text cannot be used; the message names it and says why."""


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
