"""What an approval of a project directory covers besides its configuration files: every
file the configuration names inside the directory, and what each holds.

A project configuration names files the host reads (``registries``, ``prompts``, ``[serve]
token_file``) and files a driver or an MCP server it starts may read: a driver's settings
and ``autostart_settings`` (at any depth) and a server's ``command``, ``args`` and ``env``
values. Which of those strings are paths only the driver's constructor or the server knows,
and neither may run before the approval is judged, so each string counts as a possible
path: the string itself, the text after its first ``=`` (``--config=rules.toml``) and each
part between ``os.pathsep``; ``~`` expanded as well as not; resolved against the directory,
and against the ``relative_to`` directory a driver's setting gives. Each possible path that
lies in the directory, or whose real path does (a link into it), is judged by what it
leads to now, symbolic links resolved: a regular file by the SHA-256 of its bytes, or
``directory``, ``special`` (not a regular file), ``unreadable``, ``absent``; one that starts
in the directory and leads out of it by where it leads (``outside:PATH``, whose bytes are
the user's and not covered). A string that names nothing is not recorded, unless the host
reads it: whatever appears there later is a change. A directory's files are not covered: a
directory a setting names is the data a driver serves, not configuration.

Cost: a ``realpath`` per possible path, and a SHA-256 of each file in the directory one
names, at the approval and at every load from the approved directory.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcs_host._files import InputError, Opened

__all__: list[str] = []  # used by mcs_host.loading.config_project; nothing public

ABSENT = "absent"
"""What a name that leads to nothing inside the directory is recorded as."""
OUTSIDE = "outside:"
"""The prefix of what a name that starts in the directory and leads out of it records."""

_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Named:
    """A path a project configuration names."""

    name: str
    """As the approval records it: relative to the directory when it starts there, else
    absolute; only ``.`` parts and doubled separators dropped (``..`` is left to the file
    system, which alone knows where it leads past a link)."""
    key: str
    """The setting that names it: ``registries``, ``drivers.files.settings.rules``."""
    path: str
    """The path as the host joins it to the directory (``_anchored``'s spelling for a file
    the host reads)."""
    read_by_host: bool
    """A registry, the prompts or the token file: recorded even when absent, and its bytes
    checked again when the host reads them."""


def named_files(data: Mapping[str, Any], directory: str) -> tuple[Named, ...]:
    """Every path ``data`` (a project file's settings, as parsed) names, against
    ``directory`` (the file's); duplicates kept, in the order of the settings."""
    found: list[Named] = []
    registries = data.get("registries")
    for text in registries if isinstance(registries, list) else ():
        found += _read_by_host("registries", text, directory)
    found += _read_by_host("prompts", data.get("prompts"), directory)
    serve = data.get("serve")
    if isinstance(serve, Mapping):
        found += _read_by_host("serve.token_file", serve.get("token_file"), directory)
    drivers = data.get("drivers")
    for label, table in drivers.items() if isinstance(drivers, Mapping) else ():
        if not isinstance(table, Mapping):
            continue
        relative_to = table.get("relative_to")
        for field in ("settings", "autostart_settings"):
            value = table.get(field)
            for setting, inner in value.items() if isinstance(value, Mapping) else ():
                bases = [directory]
                if field == "settings" and isinstance(relative_to, Mapping):
                    other = relative_to.get(setting)
                    if isinstance(other, str):
                        bases.append(os.path.join(directory, other))
                prefix = f"drivers.{label}.{field}.{setting}"
                for key, text in _strings(inner, prefix):
                    found += _possible(key, text, bases, directory)
    servers = data.get("mcp_servers")
    for label, table in servers.items() if isinstance(servers, Mapping) else ():
        if not isinstance(table, Mapping):
            continue
        for field in ("command", "args", "env"):
            key = f"mcp_servers.{label}.{field}"
            for where, text in _strings(table.get(field), key):
                found += _possible(where, text, [directory], directory)
    return tuple(found)


def survey(named: Sequence[Named], directory: str) -> tuple[tuple[Named, str], ...]:
    """Each of ``named`` with what it leads to now (see the module); a name that neither
    lies nor leads into ``directory`` is left out, as not covered."""
    real = os.path.realpath(directory)
    states: dict[str, str | None] = {}
    judged = []
    for one in named:
        if one.name not in states:
            states[one.name] = _state(one, real)
        state = states[one.name]
        if state is not None:
            judged.append((one, state))
    return tuple(judged)


def recorded(surveyed: Sequence[tuple[Named, str]], skip: Sequence[str]) -> dict[str, str]:
    """What an approval records of ``surveyed`` (names in ``skip``, the project files,
    are recorded as those): what each leads to, an absent name only when the host reads
    it."""
    return {
        one.name: state
        for one, state in surveyed
        if one.name not in skip and (one.read_by_host or state != ABSENT)
    }


def host_digests(surveyed: Sequence[tuple[Named, str]]) -> dict[str, str]:
    """The SHA-256 each file the host reads must still have when it reads it, by the path
    the configuration gives it."""
    return {one.path: state for one, state in surveyed if one.read_by_host and is_digest(state)}


def changes(
    approved: Mapping[str, str], surveyed: Sequence[tuple[Named, str]], skip: Sequence[str]
) -> list[str]:
    """How ``surveyed`` differs from what the approval recorded, one phrase per name that
    names the setting (``registry.json changed, named by registries``)."""
    said: dict[str, str] = {}
    for one, state in surveyed:
        before = approved.get(one.name, ABSENT)
        if one.name in skip or one.name in said or before == state:
            continue
        verb = "appeared" if before == ABSENT else "is gone" if state == ABSENT else "changed"
        said[one.name] = f"{one.name} {verb}, named by {one.key}"
    return list(said.values())


def present(surveyed: Sequence[tuple[Named, str]], skip: Sequence[str]) -> list[str]:
    """The names in ``surveyed`` that lead to something, each with the setting naming it:
    what an approval that covered only the project files does not cover."""
    said: dict[str, str] = {}
    for one, state in surveyed:
        if one.name not in skip and state != ABSENT:
            said.setdefault(one.name, f"{one.name}, named by {one.key}")
    return list(said.values())


def is_digest(state: str) -> bool:
    """Whether ``state`` is a file's SHA-256 (64 lowercase hex digits)."""
    return len(state) == 64 and all(c in "0123456789abcdef" for c in state)


def _read_by_host(key: str, text: object, directory: str) -> list[Named]:
    """A file the host reads, joined as ``config._anchored`` joins it (no ``~``)."""
    if not isinstance(text, str) or not text or "\0" in text:
        return []
    path = os.path.join(directory, text)
    return [Named(_name(path, directory), key, path, read_by_host=True)]


def _possible(key: str, text: str, bases: Sequence[str], directory: str) -> list[Named]:
    """Every path ``text`` may name: itself, after its first ``=``, each part between
    ``os.pathsep``; ``~`` expanded and not; against each of ``bases``."""
    pieces = {text, text.partition("=")[2]}
    pieces |= {part for piece in list(pieces) for part in piece.split(os.pathsep)}
    pieces |= {os.path.expanduser(p) for p in pieces if p.startswith("~")}
    found = []
    for piece in sorted(p for p in pieces if p and "\0" not in p):
        for base in bases:
            path = os.path.join(base, piece)
            found.append(Named(_name(path, directory), key, path, read_by_host=False))
    return found


def _strings(value: object, key: str) -> Iterator[tuple[str, str]]:
    """Every string in ``value`` (tables and arrays walked), with the dotted key of its
    table."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, Mapping):
        for name, inner in value.items():
            yield from _strings(inner, f"{key}.{name}")
    elif isinstance(value, list | tuple):
        for inner in value:
            yield from _strings(inner, key)


def _name(path: str, directory: str) -> str:
    """``path`` as an approval records it: relative to ``directory`` when it starts there."""
    absolute = path.startswith(os.sep)
    parts = [p for p in path.split(os.sep) if p not in ("", ".")]
    tidy = (os.sep if absolute else "") + os.sep.join(parts)
    base = directory.rstrip(os.sep) + os.sep
    if tidy + os.sep == base:
        return "."
    return tidy[len(base) :] if tidy.startswith(base) else tidy


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _state(named: Named, directory: str) -> str | None:
    """What ``named`` leads to now, ``directory`` being the real one; ``None`` when it is
    not covered (named outside the directory, and leading outside it)."""
    real = os.path.realpath(named.path)
    if not _within(real, directory):
        if os.path.isabs(named.name):
            return None  # the user's own file, wherever the project's files lead
        return f"{OUTSIDE}{real}" if os.path.lexists(real) else ABSENT
    try:
        status = os.stat(real)
    except OSError as exc:  # a name too long for a file (a long text) names nothing either
        nothing = (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG)
        return ABSENT if exc.errno in nothing else "unreadable"
    if stat.S_ISDIR(status.st_mode):
        return "directory"
    if not stat.S_ISREG(status.st_mode):
        return "special"
    try:
        with Opened.open(real, "a file the configuration names") as opened:
            digest = hashlib.sha256()
            while chunk := os.read(opened.fd, _CHUNK):
                digest.update(chunk)
            return digest.hexdigest()
    except FileNotFoundError:
        return ABSENT
    except (InputError, OSError):
        return "unreadable"
