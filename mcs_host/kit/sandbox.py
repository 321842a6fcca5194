"""Root-confined file access for drivers that serve a directory tree.

:class:`Root` resolves paths the model gives (relative or absolute) against a configured
directory and refuses any that leave it, through ``..`` or through a symlink. Files and
directories are then opened component by component with ``O_NOFOLLOW`` from the root's own
descriptor, so a symlink swapped in after the check is refused rather than followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from typing import BinaryIO

from mcs_host.interfaces import ToolError

__all__ = ["PathEscapeError", "Root"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_SAFE_OPEN = os.open in os.supports_dir_fd and bool(_NOFOLLOW)


class PathEscapeError(ToolError, ValueError):
    """A path leads outside the root; the message names the path, the root and the way out."""

    def __init__(self, path: str, root: str, how: str) -> None:
        self.path = path
        self.root = root
        super().__init__(f"path {path!r} is outside the root {root}: {how}")


class Root:
    """A directory that every path handed to a driver must stay inside."""

    __slots__ = ("_path",)

    def __init__(self, path: str | os.PathLike[str]) -> None:
        real = os.path.realpath(os.fspath(path))
        if not os.path.isdir(real):
            raise NotADirectoryError(f"root {os.fspath(path)!r} is not an existing directory")
        self._path = real

    @property
    def path(self) -> str:
        """The root's real absolute path."""
        return self._path

    def __repr__(self) -> str:
        return f"Root({self._path!r})"

    def resolve(self, path: str) -> str:
        """The real absolute path ``path`` names under the root, which need not exist.

        Raises :class:`PathEscapeError` when it leaves the root.
        """
        if "\0" in path:
            raise PathEscapeError(path, self._path, "it contains a NUL character")
        joined = os.path.join(self._path, path)  # an absolute path replaces the root
        real = os.path.realpath(joined)
        if self._inside(real):
            return real
        raise PathEscapeError(path, self._path, self._way_out(joined, real))

    def relative(self, real: str) -> str:
        """``real`` (inside the root) as a POSIX path relative to it; the root is ``.``."""
        rel = os.path.relpath(real, self._path)
        return rel.replace(os.sep, "/")

    def open_file(self, path: str) -> BinaryIO:
        """Open the regular file ``path`` for reading, refusing symlinks swapped in."""
        real = self.resolve(path)
        fd = self._open(real, path, directory=False)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
                raise IsADirectoryError(errno.EISDIR, f"{path!r} is {kind}")
            if _NONBLOCK:
                os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    @contextlib.contextmanager
    def open_dir(self, path: str) -> Iterator[int]:
        """A descriptor of the directory ``path``, for ``os.scandir`` and ``os.fwalk``."""
        fd = self._open(self.resolve(path), path, directory=True)
        try:
            yield fd
        finally:
            os.close(fd)

    def _inside(self, real: str) -> bool:
        return real == self._path or real.startswith(self._path.rstrip(os.sep) + os.sep)

    def _way_out(self, joined: str, real: str) -> str:
        """Say how ``joined`` leaves the root: the symlink it crosses, or where it goes."""
        lexical = os.path.normpath(joined)
        if self._inside(lexical):
            current = self._path
            for part in os.path.relpath(lexical, self._path).split(os.sep):
                current = os.path.join(current, part)
                if os.path.islink(current) and not self._inside(os.path.realpath(current)):
                    target = os.path.realpath(current)
                    return f"symlink {self.relative(current)!r} points to {target}"
        return f"it resolves to {real}"

    def _open(self, real: str, shown: str, *, directory: bool) -> int:
        flags = os.O_RDONLY | _CLOEXEC
        if not _SAFE_OPEN:  # no openat: fall back to one open of the resolved path
            return os.open(real, flags | (_DIRECTORY if directory else _NONBLOCK) | _NOFOLLOW)
        rel = os.path.relpath(real, self._path)
        parts = [] if rel == "." else rel.split(os.sep)
        fd = os.open(self._path, flags | _DIRECTORY)
        try:
            for index, part in enumerate(parts):
                last = index == len(parts) - 1
                mode = _DIRECTORY if (directory or not last) else _NONBLOCK
                try:
                    next_fd = os.open(part, flags | mode | _NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    # O_NOFOLLOW on a symlink fails with ELOOP, or ENOTDIR with O_DIRECTORY
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) and _is_link(
                        part, fd
                    ):
                        raise PathEscapeError(
                            shown, self._path, f"{part!r} became a symlink while it was opened"
                        ) from None
                    raise
                os.close(fd)
                fd = next_fd
            return fd
        except BaseException:
            os.close(fd)
            raise


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False
