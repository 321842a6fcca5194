"""The files ToolDriver: list, read, search and stat files under one root directory."""

from __future__ import annotations

import base64
import fnmatch
import os
import stat
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcs_host import (
    MCSToolDriver,
    PathEscapeError,
    Root,
    SupportsHealthcheck,
    Tool,
    ToolAnnotations,
    ToolArgumentError,
    ToolError,
    UnknownToolError,
)
from mcs_host.kit import manifest_meta, parse_arguments, tool_from_model

META = manifest_meta(__package__, "FilesToolDriver")
"""The driver's meta, from the mcs-driver.json manifest the package ships."""
__version__ = META.version

DEFAULT_MAX_READ_BYTES = 1024 * 1024
DEFAULT_MAX_SEARCH_BYTES = 4 * 1024 * 1024


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ListDirectoryArgs(_Args):
    path: str = Field(".", description="Directory to list, relative to the root.")
    pattern: str = Field("*", description="Glob the entry names must match, e.g. '*.md'.")
    recursive: bool = Field(False, description="Also list the contents of subdirectories.")
    include_hidden: bool = Field(False, description="Include names that start with '.'.")
    limit: int = Field(200, ge=1, le=10_000, description="Most entries to return.")


class ReadFileArgs(_Args):
    path: str = Field(description="File to read, relative to the root.")
    offset: int = Field(0, ge=0, description="Byte offset to start reading at.")
    max_bytes: int = Field(
        64 * 1024, ge=1, description="Most bytes to read; the driver caps it at its own limit."
    )
    encoding: Literal["utf-8", "latin-1", "base64"] = Field(
        "utf-8", description="How to return the bytes: decoded text, or base64 for binary files."
    )


class SearchFilesArgs(_Args):
    pattern: str = Field("*", description="Glob the file names must match, e.g. '*.py'.")
    contains: str = Field(
        "", description="Text the file must contain; empty matches on names alone."
    )
    path: str = Field(".", description="Directory to search under, relative to the root.")
    case_sensitive: bool = Field(False, description="Match 'contains' case-sensitively.")
    include_hidden: bool = Field(False, description="Search names that start with '.'.")
    limit: int = Field(50, ge=1, le=1_000, description="Most matching lines or files to return.")


class StatArgs(_Args):
    path: str = Field(description="File or directory to describe, relative to the root.")


_READS = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
"""What every tool declares: it only reads files under the root, a closed world."""

_TOOLS: dict[str, tuple[type[_Args], Tool]] = {
    "list_directory": (
        ListDirectoryArgs,
        tool_from_model(
            "list_directory",
            ListDirectoryArgs,
            title="List a directory",
            description="List files and directories under the root with type and size.",
            annotations=_READS,
        ),
    ),
    "read_file": (
        ReadFileArgs,
        tool_from_model(
            "read_file",
            ReadFileArgs,
            title="Read a file",
            description="Read a text file (or a byte range of it) under the root.",
            annotations=_READS,
        ),
    ),
    "search_files": (
        SearchFilesArgs,
        tool_from_model(
            "search_files",
            SearchFilesArgs,
            title="Search files",
            description="Find files by name glob and, optionally, lines containing a text.",
            annotations=_READS,
        ),
    ),
    "stat": (
        StatArgs,
        tool_from_model(
            "stat",
            StatArgs,
            title="Describe a path",
            description="Type, size, permissions and modification time of a file or directory.",
            annotations=_READS,
        ),
    ),
}


class FilesToolDriver(MCSToolDriver, SupportsHealthcheck):
    """Read-only access to the files under ``root``; no path may leave it, symlinks included.

    ``max_read_bytes`` caps one ``read_file`` call; ``max_search_bytes`` is the largest file
    ``search_files`` looks into.
    """

    meta = META

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
        max_search_bytes: int = DEFAULT_MAX_SEARCH_BYTES,
    ) -> None:
        if max_read_bytes < 1 or max_search_bytes < 1:
            raise ValueError("max_read_bytes and max_search_bytes must be positive")
        self.root = Root(root)
        self.max_read_bytes = max_read_bytes
        self.max_search_bytes = max_search_bytes
        self._handlers: dict[str, Callable[[Any], dict[str, Any]]] = {
            "list_directory": self._list_directory,
            "read_file": self._read_file,
            "search_files": self._search_files,
            "stat": self._stat,
        }

    def list_tools(self) -> list[Tool]:
        return [tool for _, tool in _TOOLS.values()]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if tool_name not in _TOOLS:
            raise UnknownToolError(tool_name, _TOOLS)
        model, _ = _TOOLS[tool_name]
        args = parse_arguments(tool_name, model, arguments)
        path = getattr(args, "path", ".")
        try:
            return self._handlers[tool_name](args)
        except ToolError:
            raise
        except FileNotFoundError:
            raise ToolArgumentError(tool_name, "path", f"{path!r} does not exist") from None
        except NotADirectoryError:
            raise ToolArgumentError(tool_name, "path", f"{path!r} is not a directory") from None
        except IsADirectoryError:
            raise ToolArgumentError(tool_name, "path", f"{path!r} is not a file") from None
        except OSError as exc:
            raise ToolError(f"tool {tool_name!r}, path {path!r}: {exc.strerror or exc}") from None

    def healthcheck(self) -> dict[str, Any]:
        readable = os.access(self.root.path, os.R_OK | os.X_OK)
        status = "OK" if os.path.isdir(self.root.path) and readable else "ERROR"
        return {"status": status, "root": self.root.path}

    # -- tools -----------------------------------------------------------------

    def _list_directory(self, args: ListDirectoryArgs) -> dict[str, Any]:
        base = self.root.relative(self.root.resolve(args.path))
        entries: list[dict[str, Any]] = []
        truncated = False
        for rel, entry in self._walk(args.path, args.recursive, args.include_hidden):
            if not fnmatch.fnmatchcase(entry.name, args.pattern):
                continue
            if len(entries) == args.limit:
                truncated = True
                break
            entries.append(self._describe_entry(rel, entry))
        return {"path": base, "entries": entries, "truncated": truncated}

    def _read_file(self, args: ReadFileArgs) -> dict[str, Any]:
        limit = min(args.max_bytes, self.max_read_bytes)
        with self.root.open_file(args.path) as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(args.offset)
            data = f.read(limit)
        end = args.offset + len(data)
        result: dict[str, Any] = {
            "path": self.root.relative(self.root.resolve(args.path)),
            "size": size,
            "offset": args.offset,
            "bytes_read": len(data),
            "truncated": end < size,
            "encoding": args.encoding,
        }
        if args.encoding == "base64":
            result["content"] = base64.b64encode(data).decode("ascii")
        elif args.encoding == "latin-1":
            result["content"] = data.decode("latin-1")
        else:
            result["content"] = _decode_utf8(data, truncated=end < size, path=args.path)
        return result

    def _search_files(self, args: SearchFilesArgs) -> dict[str, Any]:
        needle = args.contains if args.case_sensitive else args.contains.casefold()
        matches: list[dict[str, Any]] = []
        skipped: list[str] = []
        truncated = False
        for rel, entry in self._walk(args.path, True, args.include_hidden):
            if not entry.is_file(follow_symlinks=False):
                continue
            if not fnmatch.fnmatchcase(entry.name, args.pattern):
                continue
            if not needle:
                if len(matches) == args.limit:
                    truncated = True
                    break
                matches.append({"path": rel})
                continue
            if entry.stat(follow_symlinks=False).st_size > self.max_search_bytes:
                skipped.append(rel)
                continue
            for number, line in self._lines(rel):
                haystack = line if args.case_sensitive else line.casefold()
                if needle in haystack:
                    if len(matches) == args.limit:
                        truncated = True
                        break
                    matches.append({"path": rel, "line": number, "text": line[:500]})
            if truncated:
                break
        return {"matches": matches, "truncated": truncated, "skipped_too_large": skipped}

    def _stat(self, args: StatArgs) -> dict[str, Any]:
        real = self.root.resolve(args.path)  # refuses a path or a symlink leading out
        head, name = os.path.split(os.path.normpath(args.path))
        named = real if name in ("", ".", "..") else os.path.join(self.root.resolve(head), name)
        info = os.lstat(named)  # a symlink is described as itself
        described: dict[str, Any] = {
            "path": self.root.relative(named),
            "type": _kind(info.st_mode),
            "size": info.st_size,
            "mode": stat.filemode(info.st_mode),
            "modified": _timestamp(info.st_mtime),
        }
        if stat.S_ISLNK(info.st_mode):
            described["target"] = self.root.relative(real)
        return described

    # -- helpers ---------------------------------------------------------------

    def _walk(
        self, path: str, recursive: bool, include_hidden: bool
    ) -> Iterator[tuple[str, os.DirEntry[str]]]:
        """``(path relative to the root, entry)`` under ``path``, sorted, symlinks not followed."""
        base = self.root.relative(self.root.resolve(path))
        with self.root.open_dir(path) as fd:
            yield from self._entries(fd, base, recursive, include_hidden)

    def _entries(
        self, fd: int, base: str, recursive: bool, include_hidden: bool
    ) -> Iterator[tuple[str, os.DirEntry[str]]]:
        with os.scandir(fd) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            if not include_hidden and entry.name.startswith("."):
                continue
            rel = entry.name if base == "." else f"{base}/{entry.name}"
            yield rel, entry
            if recursive and entry.is_dir(follow_symlinks=False):
                with self.root.open_dir(rel) as child:
                    yield from self._entries(child, rel, recursive, include_hidden)

    def _describe_entry(self, rel: str, entry: os.DirEntry[str]) -> dict[str, Any]:
        info = entry.stat(follow_symlinks=False)
        described: dict[str, Any] = {"path": rel, "type": _kind(info.st_mode)}
        if stat.S_ISREG(info.st_mode):
            described["size"] = info.st_size
        elif stat.S_ISLNK(info.st_mode):
            try:
                described["target"] = self.root.relative(self.root.resolve(rel))
            except PathEscapeError:
                described["target"] = None  # points outside the root: not followed
        return described

    def _lines(self, rel: str) -> Iterator[tuple[int, str]]:
        with self.root.open_file(rel) as f:
            data = f.read(self.max_search_bytes + 1)
        if b"\0" in data[:8192]:
            return  # binary
        text = data.decode("utf-8", errors="replace")
        yield from enumerate(text.splitlines(), 1)


def _decode_utf8(data: bytes, *, truncated: bool, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # a read cut inside a multi-byte character is fine: drop the partial tail
        if truncated and exc.start >= len(data) - 3 and exc.reason == "unexpected end of data":
            return data[: exc.start].decode("utf-8")
        raise ToolArgumentError(
            "read_file",
            "encoding",
            f"{path!r} is not UTF-8 text (byte {exc.start}); read it with encoding 'base64' "
            "or 'latin-1'",
        ) from None


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")
