"""Integrity: the ``installed-tree-v2`` digest of a distribution, installed or still a wheel.

One module: the ``installed-tree-v2`` digest is one specification; it is long because the
RECORD rules, the installed scan and the wheel scan must read files the same way and encode
them once, so all three are here.

For every RECORD row that lands inside the site directory, the real file is hashed (opened with
``O_NOFOLLOW``, its directory's real path inside the site directory, its size checked first).
The listing is a header line naming the format, then one JSON array ``[path, size, sha256]``
per file, ASCII only (so no path can hold a line break), sorted by path; its sha256 is the
digest. Two different trees can therefore never have the same listing. RECORD paths are
checked first: a control character, an absolute or backslashed path, an empty, ``.`` or
``..`` component inside the site directory, or two rows that are one file on a case-folding
filesystem are ``record-invalid`` and leave the tree without a digest. Files the installer
writes (RECORD, INSTALLER, REQUESTED, direct_url.json, uv_cache.json, the publisher signature)
and ``__pycache__`` bytecode are left out, so the digest of a wheel equals the digest of any
install of it. RECORD itself proves nothing (installers do not check it); the digest is
trusted only when a registry pins it or a trusted publisher signed it.

Besides the digest, a scan reports what would let unverified code run: files that differ from
their RECORD row or are missing, files in the package directories that RECORD does not list,
and shadows of a top-level module (``pkg/`` or ``pkg.<ext>.so`` beside a listed ``pkg.py``).
"""

from __future__ import annotations

import binascii
import collections
import csv
import hashlib
import io
import json
import os
import posixpath
import stat
import threading
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from importlib.machinery import EXTENSION_SUFFIXES, all_suffixes
from typing import TYPE_CHECKING

from mcs_host._files import (
    METADATA_LIMIT,
    RECORD_LIMIT,
    InputError,
    loads_json,
    read_bytes,
    read_text,
)
from mcs_host.discovery import parse_entry_points

if TYPE_CHECKING:
    import zipfile

__all__ = [
    "DIGEST_FORMAT",
    "SIGNATURE_FILE",
    "FileEntry",
    "Finding",
    "TreeDigest",
    "TreeScan",
    "editable_source",
    "record_hash",
    "scan_installed",
    "scan_wheel",
]

DIGEST_FORMAT = "installed-tree-v2"
SIGNATURE_FILE = "mcs-signature.json"
"""The publisher signature file in a ``*.dist-info`` directory; the digest excludes it."""

_INSTALLER_WRITTEN = frozenset(
    {
        "RECORD",
        "RECORD.jws",
        "RECORD.p7s",
        "INSTALLER",
        "REQUESTED",
        "direct_url.json",
        "uv_cache.json",
        SIGNATURE_FILE,
    }
)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_ONE_READ_LIMIT = 16 * 1024 * 1024
_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One line of the listing: a file's sha256, size and path relative to the site directory."""

    path: str
    sha256: str
    size: int

    @property
    def line(self) -> str:
        """``[path, size, sha256]`` as one line of ASCII JSON: the line cannot hold a break."""
        path = self.path
        if path.isascii() and path.isprintable() and '"' not in path and "\\" not in path:
            return f'["{path}",{self.size},"{self.sha256}"]\n'  # what json.dumps would write
        return json.dumps([path, self.size, self.sha256], separators=(",", ":")) + "\n"


_HEADER = f"{DIGEST_FORMAT}\n"


@dataclass(frozen=True, slots=True)
class TreeDigest:
    """The ``installed-tree-v2`` digest and the listing it was computed from."""

    entries: tuple[FileEntry, ...]
    digest: str = field(init=False)
    """``sha256:<hex>`` of the listing."""

    def __post_init__(self) -> None:
        listing = self.listing.encode("ascii")
        object.__setattr__(self, "digest", "sha256:" + hashlib.sha256(listing).hexdigest())

    @classmethod
    def of(cls, entries: Iterable[FileEntry]) -> TreeDigest:
        """The digest of ``entries`` in listing order (by path, as UTF-8 bytes)."""
        return cls(tuple(sorted(entries, key=lambda e: e.path.encode("utf-8"))))

    @property
    def files(self) -> int:
        return len(self.entries)

    @property
    def bytes(self) -> int:
        return sum(entry.size for entry in self.entries)

    @property
    def listing(self) -> str:
        """The format's header line, then one line per file."""
        return _HEADER + "".join(entry.line for entry in self.entries)


@dataclass(frozen=True, slots=True)
class Finding:
    """A reason the files of a distribution cannot be trusted, naming the file."""

    code: str
    """``file-modified``, ``file-missing``, ``file-unlisted``, ``file-shadowing``,
    ``not-a-regular-file``, ``path-escapes``, ``record-invalid`` or (in a wheel)
    ``member-invalid``."""
    path: str
    message: str


@dataclass(frozen=True, slots=True)
class TreeScan:
    """What a scan of one distribution found: its digest, if computable, and any findings."""

    source: str
    """The ``*.dist-info`` directory or the wheel file scanned."""
    digest: TreeDigest | None
    findings: tuple[Finding, ...]
    extensions: tuple[str, ...] = ()
    """Listed extension modules: loaded by the dynamic linker, out of reach of the importer."""

    @property
    def ok(self) -> bool:
        return self.digest is not None and not self.findings


@dataclass(frozen=True, slots=True)
class _Row:
    path: str  # relative to the site directory, "/"-separated
    algorithm: str
    recorded: str  # urlsafe base64 of the digest, as RECORD writes it
    size: int | None


def scan_installed(metadata_path: str | os.PathLike[str]) -> TreeScan:
    """Scan the distribution whose ``*.dist-info`` directory is ``metadata_path``."""
    dist_info = os.fspath(metadata_path)
    base = os.path.dirname(os.path.realpath(dist_info))
    dist_name = os.path.basename(dist_info.rstrip(os.sep))
    findings: list[Finding] = []
    try:
        record = read_text(os.path.join(dist_info, "RECORD"), "RECORD", RECORD_LIMIT, follow=False)
    except (OSError, InputError) as exc:
        finding = Finding("record-invalid", f"{dist_name}/RECORD", f"cannot read RECORD: {exc}")
        return TreeScan(dist_info, None, (finding,))
    launchers = _launchers(dist_info)
    rows = [row for row in _rows(record, dist_name, findings, base) if row.path not in launchers]
    complete = not findings  # a RECORD row that is refused leaves the tree without a digest
    entries = _hash_rows(base, [row for row in rows if row.algorithm], findings)
    complete = complete and len(entries) == len(rows)
    listed = {row.path for row in rows}
    findings.extend(_unlisted(base, listed))
    findings.extend(_shadows(base, listed))
    findings.sort(key=lambda f: (f.path, f.code))
    digest = TreeDigest.of(entries) if complete else None
    return TreeScan(dist_info, digest, tuple(findings), _extensions(listed))


def scan_wheel(wheel: str | os.PathLike[str]) -> TreeScan:
    """Scan a wheel file: the digest its install will have, and RECORD findings inside it.
    Raises ``ValueError`` naming the file when it is not a zip archive."""
    import zipfile  # noqa: PLC0415 - a wheel's scan only: verifying installs needs none

    path = os.fspath(wheel)
    findings: list[Finding] = []
    try:
        opened = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{path} is not a wheel: {exc}") from None
    with opened as archive:
        members = _members(archive, findings)
        records = [
            name for name in members if name.count("/") == 1 and name.endswith(".dist-info/RECORD")
        ]
        if len(records) != 1:
            message = f"expected one *.dist-info/RECORD, found {len(records)}"
            return TreeScan(path, None, (Finding("record-invalid", "RECORD", message),))
        dist_name = records[0].split("/")[0]
        try:
            record = archive.read(records[0]).decode("utf-8")
        except UnicodeDecodeError as exc:
            finding = Finding("record-invalid", records[0], f"RECORD is not UTF-8: {exc}")
            return TreeScan(path, None, (finding,))
        rows = {row.path: row for row in _rows(record, dist_name, findings, None)}
        entries: list[FileEntry] = []
        complete = not findings
        for name in sorted(members):
            if name not in rows:
                if not _installer_written(name, dist_name):
                    findings.append(Finding("file-unlisted", name, f"{name} is not in RECORD"))
                continue
            row = rows.pop(name)
            installed = _installed_path(name)
            if installed is None:
                continue  # scripts, headers and data land outside the site directory
            if not row.algorithm:
                complete = False
                continue
            sha256, size, other = _hash_member(archive, members[name], row.algorithm)
            entry = FileEntry(installed, sha256.hex(), size)
            recorded = other if row.algorithm != "sha256" else sha256
            if (row.size is not None and row.size != size) or record_hash(recorded) != row.recorded:
                findings.append(
                    Finding("file-modified", name, f"{name} does not match its RECORD row")
                )
            entries.append(entry)
        for name in sorted(rows):
            if _installed_path(name) is not None:
                complete = False
                findings.append(
                    Finding("file-missing", name, f"{name} is in RECORD, not in the wheel")
                )
    digest = TreeDigest.of(entries) if complete else None
    return TreeScan(path, digest, tuple(findings), _extensions(e.path for e in entries))


def _csv_rows(text: str) -> Iterator[list[str]]:
    """The rows of a CSV file, each line split on commas unless it quotes a field."""
    if '"' in text:
        yield from csv.reader(io.StringIO(text))
        return
    for raw in text.split("\n"):
        line = raw.removesuffix("\r")
        yield line.split(",") if line else []


_RECORD_HASHES = frozenset(
    {"sha224", "sha256", "sha384", "sha512", "sha3_224", "sha3_256", "sha3_384", "sha3_512"}
)
"""The fixed-length hashes of sha256's strength or more (PEP 376 refuses md5 and sha1)."""


def _rows(record: str, dist_name: str, findings: list[Finding], base: str | None) -> Iterator[_Row]:
    """The RECORD rows that are part of the digest; problems go to ``findings``.

    ``base`` is the site directory of an installed distribution, whose RECORD may lead out of
    it (scripts, data: left out); ``None`` for a wheel, where every row is inside. A row
    without a usable hash is yielded with an empty ``algorithm``: its file is named in RECORD
    (so not unlisted) but cannot be part of a complete digest.
    """
    seen: dict[str, str] = {}  # case-folded, NFC path -> the path as RECORD spells it
    for number, fields in enumerate(_csv_rows(record), 1):
        if not fields:
            continue
        if len(fields) != 3:
            findings.append(
                Finding(
                    "record-invalid",
                    f"{dist_name}/RECORD",
                    f"line {number} has {len(fields)} fields",
                )
            )
            continue
        path, hash_field, size_field = fields
        outside, problem = _classify(path, base)
        if problem is not None:
            message = f"RECORD line {number}: the path {path!r} {problem}"
            findings.append(Finding("record-invalid", path, message))
            continue
        if outside or _installer_written(path, dist_name) or _is_bytecode_cache(path):
            continue  # scripts, data and headers; files the installer writes; bytecode
        key = path.lower() if path.isascii() else unicodedata.normalize("NFC", path).casefold()
        if key in seen:
            twice = (
                "is listed twice"
                if seen[key] == path
                else f"is the same file as {seen[key]!r} where names are case-folded"
            )
            message = f"RECORD line {number}: the path {path!r} {twice}"
            findings.append(Finding("record-invalid", path, message))
            continue
        seen[key] = path
        algorithm, sep, recorded = hash_field.partition("=")
        size = int(size_field) if size_field.isascii() and size_field.isdigit() else None
        if not sep or not recorded:
            findings.append(Finding("record-invalid", path, f"{path} has no hash in RECORD"))
            algorithm = recorded = ""
        elif algorithm not in _RECORD_HASHES:
            findings.append(
                Finding(
                    "record-invalid",
                    path,
                    f"{path} has the hash {algorithm!r} in RECORD; wheels use sha256 or stronger",
                )
            )
            algorithm = recorded = ""
        yield _Row(path, algorithm, recorded, size)


def editable_source(metadata_path: str) -> str | None:
    """The directory an editable install points at, from its ``direct_url.json``."""
    try:
        text = read_bytes(
            os.path.join(metadata_path, "direct_url.json"),
            "direct_url.json",
            METADATA_LIMIT,
            follow=False,
        )
        data = loads_json(text, os.path.join(metadata_path, "direct_url.json"))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and (data.get("dir_info") or {}).get("editable"):
        return str(data.get("url", "a local directory"))
    return None


_DOT_PARTS = frozenset({"", ".", ".."})
_REFUSED_CATEGORIES = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
"""Control, format, surrogate, private and unassigned characters, and line breaks."""


def _classify(path: str, base: str | None) -> tuple[bool, str | None]:
    """``(outside, problem)`` for a RECORD path: whether it leads out of the site directory
    ``base`` (only ``..`` components first, and landing outside), and what is wrong with it."""
    if not path:
        return False, "is empty"
    if path.isascii():  # the usual case: only control characters can be refused
        refused = None if path.isprintable() else next(c for c in path if not c.isprintable())
    else:
        refused = next((c for c in path if unicodedata.category(c) in _REFUSED_CATEGORIES), None)
    if refused is not None:
        return False, f"holds the character {refused!r}"
    if "\\" in path:
        return False, "holds a backslash"
    if path.startswith("/") or (len(path) > 1 and path[1] == ":" and path[0].isalpha()):
        return False, "is absolute"
    parts = path.split("/")
    leading = 0
    while leading < len(parts) and parts[leading] == "..":
        leading += 1
    if leading == len(parts) or not _DOT_PARTS.isdisjoint(parts[leading:]):
        return False, "has an empty, '.' or '..' component"
    if not leading:
        return False, None
    if base is None:
        return False, "leads out of the wheel"
    root = base.replace(os.sep, "/")
    target = posixpath.normpath(posixpath.join(root, path))
    if target == root or target.startswith(root.rstrip("/") + "/"):
        return False, "leaves the site directory and comes back into it"
    return True, None


def _members(archive: zipfile.ZipFile, findings: list[Finding]) -> dict[str, zipfile.ZipInfo]:
    """The wheel's files by name; a name that is not a plain relative path, or that is there
    twice (also when case-folded), is a finding."""
    members: dict[str, zipfile.ZipInfo] = {}
    folded: dict[str, str] = {}
    for info in archive.infolist():
        if info.is_dir():
            continue
        name = info.filename
        _, problem = _classify(name, None)
        key = unicodedata.normalize("NFC", name).casefold()
        if problem is None and key in folded:
            problem = (
                "is in the wheel twice"
                if folded[key] == name
                else f"is the same file as {folded[key]!r} where names are case-folded"
            )
        if problem is not None:
            findings.append(Finding("member-invalid", name, f"the wheel member {name!r} {problem}"))
            continue
        folded[key] = name
        members[name] = info
    return members


def _hash_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, algorithm: str
) -> tuple[bytes, int, bytes]:
    """The sha256 digest, size and ``algorithm`` digest of a wheel member, read in chunks."""
    sha256 = hashlib.sha256()
    other = None if algorithm == "sha256" else hashlib.new(algorithm)
    total = 0
    with archive.open(info) as member:
        while chunk := member.read(_CHUNK):
            sha256.update(chunk)
            if other is not None:
                other.update(chunk)
            total += len(chunk)
    return sha256.digest(), total, other.digest() if other is not None else b""


_IMPORTABLE = (*all_suffixes(), ".pyw")
_LAUNCHER_FORMS = ("bin/{}", "Scripts/{}.exe", "Scripts/{}-script.py")
"""Where an installer that lists scripts inside the site directory (``uv pip install
--target``) writes the launcher of a console or GUI script: POSIX, then Windows."""


def _launchers(dist_info: str) -> frozenset[str]:
    """The RECORD paths of the launchers an installer writes for the distribution's
    ``console_scripts`` and ``gui_scripts`` (named by its ``entry_points.txt``, itself part of
    the digest): like the scripts pip lists outside the site directory, they are not part of
    it, so a tree installed either way has the digest of its wheel. A launcher never runs
    in the host: it is a file no import reaches, in a directory of no package."""
    try:
        text = read_text(
            os.path.join(dist_info, "entry_points.txt"),
            "entry_points.txt",
            RECORD_LIMIT,
            follow=False,
        )
    except (OSError, InputError):
        return frozenset()  # no scripts; an unreadable file is found by the hashing
    names = [
        name
        for group in ("console_scripts", "gui_scripts")
        for name, _ in parse_entry_points(text, group)[0]
        if name
        and "/" not in name
        and "\\" not in name
        and name not in _DOT_PARTS
        and not name.endswith(_IMPORTABLE)  # a file import could reach stays in the digest
    ]
    return frozenset(form.format(name) for name in names for form in _LAUNCHER_FORMS)


def _installer_written(path: str, dist_name: str) -> bool:
    head, _, tail = path.partition("/")
    return head == dist_name and tail in _INSTALLER_WRITTEN


def _is_bytecode_cache(path: str) -> bool:
    parts = path.split("/")
    return len(parts) >= 2 and parts[-2] == "__pycache__" and parts[-1].endswith(".pyc")


def _installed_path(wheel_name: str) -> str | None:
    """Where a wheel member is installed, relative to the site directory; ``None`` if outside."""
    head, sep, rest = wheel_name.partition("/")
    if sep and head.endswith(".data"):
        scheme, _, inner = rest.partition("/")
        return inner if scheme in ("purelib", "platlib") and inner else None
    return wheel_name


class _DirectoryGuard:
    """Caches, per directory, whether its real path stays inside the site directory."""

    __slots__ = ("_base", "_prefix", "_seen")

    def __init__(self, base: str) -> None:
        self._base = base
        self._prefix = base.rstrip(os.sep) + os.sep
        self._seen: dict[str, bool] = {}

    def inside(self, directory: str) -> bool:
        """Whether ``directory`` (the site directory, or a path below it) resolves inside:
        a directory that is not a link, in one that resolves inside, does (one ``lstat``);
        anything else is resolved whole."""
        known = self._seen.get(directory)
        if known is None:
            parent = directory.rpartition(os.sep)[0]
            if directory == self._base:
                known = True
            elif directory.startswith(self._prefix) and self.inside(parent):
                try:
                    known = not stat.S_ISLNK(os.lstat(directory).st_mode) or self._resolves(
                        directory
                    )
                except OSError:
                    known = self._resolves(directory)
            else:
                known = self._resolves(directory)
            self._seen[directory] = known
        return known

    def _resolves(self, directory: str) -> bool:
        real = os.path.realpath(directory)
        return real == self._base or real.startswith(self._prefix)


def _hash_installed(
    base: str, row: _Row, guard: _DirectoryGuard, findings: list[Finding]
) -> FileEntry | None:
    """Hash one installed file: one open without following links, size checked first."""
    full = (
        f"{base}{os.sep}{row.path}" if os.sep == "/" else os.path.join(base, *row.path.split("/"))
    )
    if not guard.inside(full.rpartition(os.sep)[0]):
        findings.append(
            Finding(
                "path-escapes", row.path, f"{row.path} leaves the site directory through a symlink"
            )
        )
        return None
    try:
        fd = os.open(full, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    except FileNotFoundError:
        findings.append(Finding("file-missing", row.path, f"{row.path} is in RECORD but missing"))
        return None
    except OSError as exc:
        if os.path.islink(full):
            message = f"{row.path} is a symlink"
        else:
            message = f"{row.path} cannot be opened: {exc.strerror}"
        findings.append(Finding("not-a-regular-file", row.path, message))
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            findings.append(
                Finding("not-a-regular-file", row.path, f"{row.path} is not a regular file")
            )
            return None
        if row.size is not None and info.st_size != row.size:
            findings.append(
                Finding(
                    "file-modified",
                    row.path,
                    f"{row.path} has {info.st_size} bytes, RECORD says {row.size}",
                )
            )
            return None
        sha256, size, other = _read_hash(fd, info.st_size, row.algorithm)
    finally:
        os.close(fd)
    if size != info.st_size:
        findings.append(Finding("file-modified", row.path, f"{row.path} changed while it was read"))
        return None
    recorded = other if row.algorithm != "sha256" else sha256
    if record_hash(recorded) != row.recorded:
        findings.append(
            Finding("file-modified", row.path, f"{row.path} does not match its RECORD hash")
        )
    return FileEntry(row.path, sha256.hex(), size)


_PARALLEL_BYTES = 8 * 1024 * 1024
"""A distribution whose RECORD lists more bytes than this is hashed on every core."""


def _hash_rows(base: str, rows: list[_Row], findings: list[Finding]) -> list[FileEntry]:
    """The entries of ``rows`` that hash (problems go to ``findings``). When there are enough
    bytes for it to pay, a thread per core but one takes the files from the largest down,
    while this thread takes them from the smallest up, until they meet: reading and hashing a
    large file release the GIL for long, and the small files, where the time goes to Python
    between system calls, stay on one thread instead of each thread waiting for the GIL."""
    guard = _DirectoryGuard(base)
    total = sum(row.size or 0 for row in rows)
    workers = min(os.cpu_count() or 1, 8) - 1 if total > _PARALLEL_BYTES else 0
    if workers < 1:
        found = [_hash_installed(base, row, guard, findings) for row in rows]
        return [entry for entry in found if entry is not None]
    queue = collections.deque(sorted(rows, key=lambda r: r.size or 0))
    results: list[tuple[list[FileEntry | None], list[Finding]]] = [
        ([], []) for _ in range(workers + 1)
    ]
    errors: list[BaseException] = []

    def work(take: Callable[[], _Row], out: tuple[list[FileEntry | None], list[Finding]]) -> None:
        try:
            while True:
                try:
                    row = take()
                except IndexError:  # the queue is empty: every file is taken
                    return
                out[0].append(_hash_installed(base, row, guard, out[1]))
        except BaseException as exc:  # raised again below, in the caller's thread
            errors.append(exc)

    threads = [
        threading.Thread(target=work, args=(queue.pop, out), daemon=True) for out in results[1:]
    ]
    for thread in threads:
        thread.start()
    work(queue.popleft, results[0])
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    entries: list[FileEntry] = []
    for found, problems in results:
        entries += [entry for entry in found if entry is not None]
        findings += problems
    return entries


def record_hash(digest: bytes) -> str:
    """A digest as a wheel's RECORD writes it: urlsafe base64 without padding."""
    return binascii.b2a_base64(digest, newline=False).translate(_URLSAFE).rstrip(b"=").decode()


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def _read_hash(fd: int, size: int, algorithm: str) -> tuple[bytes, int, bytes]:
    """The sha256 digest, bytes read, and the ``algorithm`` digest (if not sha256) of an open
    file."""
    sha256 = hashlib.sha256()
    other = None if algorithm == "sha256" else hashlib.new(algorithm)
    total = 0
    if size < _ONE_READ_LIMIT:
        data = os.read(fd, size + 1)  # one read; a byte more shows a file that grew
        while len(data) < size:  # a regular file reads short only at its end
            more = os.read(fd, size + 1 - len(data))
            if not more:
                break
            data += more
        sha256.update(data)
        if other is not None:
            other.update(data)
        total = len(data)
    else:
        while chunk := os.read(fd, _CHUNK):
            sha256.update(chunk)
            if other is not None:
                other.update(chunk)
            total += len(chunk)
    return sha256.digest(), total, other.digest() if other is not None else b""


def _unlisted(base: str, listed: set[str]) -> Iterator[Finding]:
    """Files in the distribution's directories that RECORD does not list."""
    directories: set[str] = set()
    for path in listed:
        parent = path.rpartition("/")[0]
        while parent and parent not in directories:
            directories.add(parent)
            parent = parent.rpartition("/")[0]
    regular = {d for d in directories if f"{d}/__init__.py" in listed}
    for directory in sorted(directories):
        try:
            with os.scandir(os.path.join(base, *directory.split("/"))) as scanned:
                entries = list(scanned)
        except OSError:
            continue
        for entry in entries:
            rel = f"{directory}/{entry.name}"
            if rel in listed or rel in directories or entry.name == "__pycache__":
                continue  # a listed directory that is a symlink is found by the hashing
            if entry.is_dir(follow_symlinks=False):
                if directory not in regular:
                    continue  # a namespace package: other distributions add portions here
                yield Finding("file-unlisted", rel, f"{rel}/ is a directory RECORD does not list")
            elif directory.endswith(".dist-info"):
                if entry.name not in _INSTALLER_WRITTEN:
                    yield Finding("file-unlisted", rel, f"{rel} is not listed in RECORD")
            elif directory in regular or entry.name.startswith("__init__."):
                yield Finding("file-unlisted", rel, f"{rel} is not listed in RECORD")
            # else: a module in a namespace package, maybe another distribution's portion


def _shadows(base: str, listed: set[str]) -> Iterator[Finding]:
    """Unlisted files that import would pick before a listed top-level module."""
    for path in sorted(listed):
        if "/" in path or not path.endswith(".py"):
            continue
        name = path[:-3]
        package = os.path.join(base, name)
        if os.path.isdir(package):
            yield Finding(
                "file-shadowing",
                f"{name}/",
                f"{name}/ is a package directory that shadows the listed {path}",
            )
        for suffix in EXTENSION_SUFFIXES:
            if f"{name}{suffix}" not in listed and os.path.lexists(
                os.path.join(base, name + suffix)
            ):
                yield Finding(
                    "file-shadowing",
                    name + suffix,
                    f"{name}{suffix} is an extension module that shadows the listed {path}",
                )


def _extensions(paths: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(p for p in paths if p.endswith(tuple(EXTENSION_SUFFIXES))))
