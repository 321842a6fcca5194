"""What a project file in the working directory may set, and the approvals of its directory.

A project file (``mcs-host.toml``, or the ``[tool.mcs-host]`` table of a ``pyproject.toml``)
is not the user's: whoever can write there must not make the host run, reach or tell the model
anything the user's own settings would not. Until the user names the file or approves the
directory with :func:`approve_directory` (``mcs-host allow``, which records the files' sha256,
and what every file the configuration names in the directory holds (:mod:`._named_files`): an
approval lapses when any of them changes), such a file may set only what :data:`_PROJECT_KEYS`
allows, a whitelist of every key of the schema; the rest is ignored and the ignoring reported
in :attr:`HostConfig.notes`. Each file is read once (:func:`read_config`, which reads the
user's file too): the bytes hashed for the approval are the bytes parsed; a registry, prompts
or token file the approval covers is read later, and its bytes must then still have the
digest the approval was judged by (:attr:`HostConfig.approved_digests`).

One module: it makes one decision, how much of a project file counts (all of it while an
approval of these very bytes holds, else what :data:`_PROJECT_KEYS` allows), and reads the
file itself so that the bytes judged are the bytes parsed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, get_args, get_origin

from pydantic import BaseModel

from mcs_host._files import (
    CONFIG_LIMIT,
    STATE_LIMIT,
    InputError,
    loads_json,
    locked,
    read_bytes,
    write_atomic,
)
from mcs_host._places import state_directory

from ._named_files import changes, host_digests, named_files, present, recorded, survey
from .config_schema import ConfigError, HostConfig

__all__ = ["PROJECT_FILES", "approve_directory", "revoke_directory"]

PROJECT_FILES = ("mcs-host.toml", "pyproject.toml")
"""The configuration files looked for in the current directory, in that order."""


def read_config(path: str) -> bytes:
    """The bytes of a configuration file, read once: an approval's hash and the parse take
    these same bytes."""
    try:
        return read_bytes(path, "configuration file", CONFIG_LIMIT)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    except OSError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def parse_config(data: bytes, path: str, *, required: bool) -> dict[str, Any]:
    """The settings in ``data``, the bytes of the file ``path``."""
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be a configuration") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if os.path.basename(path) == "pyproject.toml":
        tool = document.get("tool", {})
        table = tool.get("mcs-host") if isinstance(tool, dict) else None
        if table is None and required:
            raise ConfigError(f"{path}: has no [tool.mcs-host] table")
        if table is not None and not isinstance(table, dict):
            raise ConfigError(f"{path}: [tool.mcs-host] is not a table")
        return dict(table or {})
    return document


# -- what a project file may set before its directory is approved ----------------------------


@dataclass(frozen=True, slots=True)
class _Rule:
    """Whether a project file in the working directory may set a key before its directory
    is approved: ``values`` says which values (``None``: none, it needs approval), ``check``
    tells them (``None``: none), ``why`` is the reason."""

    values: str | None
    check: Callable[[object], bool] | None
    why: str

    def allows(self, value: object) -> bool:
        return self.check is not None and self.check(value)


def _approval(why: str) -> _Rule:
    return _Rule(None, None, why)


def _any(why: str) -> _Rule:
    return _Rule("any", lambda value: True, why)


def _only(allowed: object, why: str) -> _Rule:
    """Only ``allowed``, of its own type (no ``"no"`` read as false, no ``0`` as false)."""
    shown = json.dumps(allowed)
    return _Rule(shown, lambda value: type(value) is type(allowed) and value == allowed, why)


def _at_most(limit: float, why: str) -> _Rule:
    def check(value: object) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool) and value <= limit

    return _Rule(f"at most {limit:g}", check, why)


_DEFAULT_TIMEOUT = float(HostConfig.model_fields["timeout"].default)
_SERVER_CALL_TIMEOUT = 60.0
"""The call timeout of isolated drivers and MCP servers when none is configured."""
_SERVER_TABLE = "part of a server table, which needs approval whole"
_DRIVER_TABLE = "part of a driver table, which it may only disable"

_PROJECT_KEYS: dict[str, _Rule] = {
    # who is trusted
    "registries": _approval("it would choose what is trusted"),
    "registry_keys": _approval("it would choose who may sign registries"),
    "registry_threshold": _approval(
        "a registry it makes fail is left out whole, and its revocations with it"
    ),
    "mcp_servers.<label>": _approval(
        "a server table mounts a server: its command runs, its URL is reached"
    ),
    "mcp_servers.<label>.url": _approval(_SERVER_TABLE),
    "mcp_servers.<label>.command": _approval(_SERVER_TABLE),
    "mcp_servers.<label>.distribution": _approval(_SERVER_TABLE),
    "mcp_servers.<label>.script": _approval(_SERVER_TABLE),
    "mcp_servers.<label>.args": _approval(_SERVER_TABLE),
    "mcp_servers.<label>.env": _approval(_SERVER_TABLE),
    "mcp_servers.<label>.enabled": _approval(_SERVER_TABLE),
    "mcp_servers.<label>.call_timeout": _approval(_SERVER_TABLE),
    "mcp_servers.<label>.consent": _approval(_SERVER_TABLE),
    "mcp_servers.<label>.allow_unverified": _approval(_SERVER_TABLE),
    # the trust policy
    "trust.allow_unverified": _only(False, "true loads code no registry vouches for"),
    "trust.allow_extensions": _only(False, "true loads native code"),
    "trust.dependencies": _only("refuse", '"report" lets unverified dependencies run'),
    # what is mounted
    "allow": _approval(
        "naming one distribution of a contested label settles the conflict: that one loads"
    ),
    "deny": _approval(
        "denying one distribution of a contested label settles the conflict: the other loads"
    ),
    "require": _any("it only adds errors and version refusals; it mounts nothing"),
    "require_capabilities": _any("it only keeps drivers out"),
    "autoload": _any("false only mounts fewer drivers"),
    "strict": _any("true only makes failures errors"),
    "drivers.<label>": _Rule(
        "enabled = false",
        lambda table: isinstance(table, Mapping) and table.get("enabled") is False,
        "a driver table is a mount (with autoload off, one the user did not list): an "
        "unapproved one is kept only to leave a mount out",
    ),
    "drivers.<label>.enabled": _only(False, "true is a mount"),
    "drivers.<label>.driver": _approval("it would choose what is mounted under the label"),
    "drivers.<label>.settings": _approval(
        "constructor arguments: what the driver reaches (a file driver's root)"
    ),
    "drivers.<label>.relative_to": _approval("where its settings' paths lead"),
    "drivers.<label>.autostart": _approval("true runs the driver's autostart()"),
    "drivers.<label>.autostart_settings": _approval("what autostart() is given"),
    "drivers.<label>.capabilities": _approval(_DRIVER_TABLE),
    "drivers.<label>.timeout": _approval(_DRIVER_TABLE),
    "drivers.<label>.isolation": _approval('"none" runs in process what the user isolated'),
    "drivers.<label>.limits.memory_mb": _approval(_DRIVER_TABLE),
    "drivers.<label>.limits.cpu_seconds": _approval(_DRIVER_TABLE),
    "drivers.<label>.limits.open_files": _approval(_DRIVER_TABLE),
    "drivers.<label>.restarts": _approval("more restarts run a failing driver again"),
    "drivers.<label>.max_result_mb": _approval(_DRIVER_TABLE),
    "drivers.<label>.allow_unverified": _approval(
        "true loads the mount's code though no registry vouches for it"
    ),
    # how the host runs them
    "plugins": _only(True, "false turns the host plugins off: consent, audit, verify hooks"),
    "healthcheck": _only(False, "true runs each driver's healthcheck() before mounting"),
    "timeout": _at_most(
        _DEFAULT_TIMEOUT, "a longer one lets a driver mount that would have timed out"
    ),
    "call_timeout": _at_most(
        _SERVER_CALL_TIMEOUT,
        "a longer one lets a call finish that would have been cut off (isolated drivers and "
        "MCP servers get 60 seconds when it is unset)",
    ),
    "isolation": _any('"process" only moves drivers into processes of their own'),
    "namespace": _only(
        "on-collision", '"always" renames every tool: the names the model and consent plugins see'
    ),
    # what the model is told, who reaches the host
    "prompts": _approval("the text the model is told"),
    "serve.allowed_hosts": _approval("who reaches serve --http"),
    "serve.allowed_origins": _approval("which web pages reach serve --http"),
    "serve.token_file": _approval("a token the file's writer knows would admit them"),
    "serve.fingerprint": _approval("which stack a replica of serve --http is ready with"),
    "serve.oauth": _approval("whose tokens admit to serve --http, and to which tools"),
    # not settings
    "source": _approval("not a setting: the host records where it read the configuration"),
    "notes": _approval("not a setting: the host records what it ignored"),
    "approved_digests": _approval("not a setting: the host records what an approval covers"),
}
"""Every key of :class:`HostConfig`, dotted (``<label>`` for a table's name), with whether a
project file in the working directory may set it before its directory is approved: only
what cannot make the host run, reach or tell the model anything the user's own settings
would not (the file is the lowest layer, under the environment and the options, so a value
the rule allows can only keep the default or tighten it). A key not allowed is ignored and
named in a note; ``tests/unit/test_config.py`` fails when a key of the schema is missing here."""


def read_project() -> tuple[dict[str, Any], str | None, list[str], dict[str, str] | None]:
    """The settings of the project file in the working directory (what it may set), the
    file, notes on what was ignored, and when its directory is approved, the digests of the
    files the approval covers that the host reads later (``None``: not approved)."""
    read: dict[str, bytes] = {}  # each project file's bytes, read once: hashed and parsed
    for candidate in PROJECT_FILES:
        if os.path.isfile(candidate):
            read[candidate] = read_config(candidate)
            data = parse_config(read[candidate], candidate, required=False)
            if data or candidate == "mcs-host.toml":
                return _from_project(data, os.path.abspath(candidate), read)
    return {}, None, [], None


def _from_project(
    data: dict[str, Any], source: str, read: Mapping[str, bytes]
) -> tuple[dict[str, Any], str, list[str], dict[str, str] | None]:
    """``data`` of a project file whole when its directory is approved for the bytes in
    ``read`` and the files ``data`` names, with the digests :func:`_approval_problem` gives;
    else what :data:`_PROJECT_KEYS` lets it set, a note naming the rest, and ``None``."""
    directory = os.path.dirname(source)
    problem, digests = _approval_problem(directory, read, data)
    if problem is None:
        return data, source, [], digests
    ignored: list[tuple[str, str]] = []
    kept = _unapproved(data, HostConfig, "", "", ignored)
    if not ignored:
        return kept, source, [], None
    order = {pattern: place for place, pattern in enumerate(_PROJECT_KEYS)}
    names = [name for _, name in sorted(ignored, key=lambda item: order.get(item[0], len(order)))]
    return (
        kept,
        source,
        [
            f"{source}: ignored {', '.join(names)}: a configuration found in the working "
            "directory may not set what could make the host run, reach or tell the model more "
            f"than your own settings would ({problem}); to use it, run "
            f"`mcs-host allow {directory}` or pass --config {source}"
        ],
        None,
    )


def _unapproved(
    data: Mapping[str, Any],
    model: type[BaseModel],
    pattern: str,
    prefix: str,
    ignored: list[tuple[str, str]],
) -> dict[str, Any]:
    """What of ``data`` (a table of ``model``, at ``prefix``; its keys at ``pattern`` in
    :data:`_PROJECT_KEYS`) an unapproved project may set; each key left out is appended to
    ``ignored`` as ``(pattern, dotted name)``. A key the schema lacks and a value of the wrong
    shape are kept, for validation to name them."""
    kept: dict[str, Any] = {}
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            kept[key] = value  # a typo: validation names it
            continue
        nested, labelled = _nested(field.annotation)
        where, name = f"{pattern}{key}", f"{prefix}{key}"
        if nested is not None and isinstance(value, Mapping) and not labelled:
            kept[key] = _unapproved(value, nested, f"{where}.", f"{name}.", ignored)
        elif nested is not None and isinstance(value, Mapping):
            kept[key] = _unapproved_entries(value, nested, f"{where}.<label>", name, ignored)
        elif nested is not None:
            kept[key] = value  # a table that is not one: validation names it
        elif _rule(where).allows(value):
            kept[key] = value
        else:
            ignored.append((where, name))
    return kept


def _unapproved_entries(
    tables: Mapping[str, Any],
    model: type[BaseModel],
    pattern: str,
    prefix: str,
    ignored: list[tuple[str, str]],
) -> dict[str, Any]:
    """The ``[<prefix>.<label>]`` tables an unapproved project may keep: each one's keys
    judged, then the table itself by its rule (a mount must not be added)."""
    kept: dict[str, Any] = {}
    rule = _rule(pattern)
    for label, table in tables.items():
        name = f"{prefix}.{label}"
        if not isinstance(table, Mapping):
            kept[label] = table  # validation names it
            continue
        unknown = {k: v for k, v in table.items() if k not in model.model_fields}
        if rule.check is None:
            ignored.append((pattern, name))
            if unknown:
                kept[label] = unknown
            continue
        judged: list[tuple[str, str]] = []
        filtered = _unapproved(table, model, f"{pattern}.", f"{name}.", judged)
        ignored.extend(judged)
        if unknown or rule.allows(filtered):
            kept[label] = filtered
        elif not judged:
            ignored.append((pattern, name))
    return kept


def _rule(pattern: str) -> _Rule:
    """The rule of a key; one the table lacks (the test forbids it) needs approval."""
    return _PROJECT_KEYS.get(pattern) or _approval("no decision was made for it")


def _nested(annotation: object) -> tuple[type[BaseModel] | None, bool]:
    """The model a field's value is a table of, and whether it is a table of them by label
    (``dict[str, Model]``); ``(None, False)`` for a plain value."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    if get_origin(annotation) is dict:
        value = get_args(annotation)[1]
        if isinstance(value, type) and issubclass(value, BaseModel):
            return value, True
    return None, False


# -- approvals: the user's consent to a directory's project configuration --------------------


def _approvals_path() -> str:
    return os.path.join(state_directory(), "approved-directories.json")


def _project_files(directory: str, read: Mapping[str, bytes] | None = None) -> dict[str, bytes]:
    """The bytes of each project configuration file in ``directory``: those in ``read``
    (name -> the bytes already read, the ones parsed), the others read now."""
    found = {}
    for name in PROJECT_FILES:
        if read is not None and name in read:
            found[name] = read[name]
        elif os.path.isfile(path := os.path.join(directory, name)):
            found[name] = read_config(path)
    return found


def _hashes(files: Mapping[str, bytes]) -> dict[str, str]:
    return {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}


def _used_settings(directory: str, files: Mapping[str, bytes]) -> dict[str, Any]:
    """The settings a load in ``directory`` takes from the project ``files`` (name -> bytes):
    ``mcs-host.toml``'s, else the ``[tool.mcs-host]`` table of ``pyproject.toml``."""
    for name in PROJECT_FILES:
        if name in files:
            data = parse_config(files[name], os.path.join(directory, name), required=False)
            if data or name == "mcs-host.toml":
                return data
    return {}


_Approvals = dict[str, dict[str, str]]
"""A real directory -> what its approval recorded: file name -> its sha256, or what the
name leads to (:mod:`._named_files`)."""


def _read_approvals() -> tuple[_Approvals, _Approvals]:
    """The approvals recorded: ``approvals`` (the project files and every file their
    configuration names), and ``directories``, approvals recorded before the named files
    were covered (the project files only)."""
    path = _approvals_path()
    try:
        document = loads_json(read_bytes(path, "the approvals", STATE_LIMIT), path)
    except FileNotFoundError:
        return {}, {}
    except (OSError, InputError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the approved directories: {exc}") from None
    tables: list[_Approvals] = []
    for key in ("approvals", "directories"):
        table = document.get(key, {}) if isinstance(document, dict) else None
        if not isinstance(table, dict) or not all(
            isinstance(files, dict) and all(isinstance(h, str) for h in files.values())
            for files in table.values()
        ):
            raise ConfigError(
                f'{path}: is not {{"approvals": {{<directory>: {{<file>: <sha256>}}}}}}; '
                "move it away and approve the directories again"
            )
        tables.append({str(k): dict(v) for k, v in table.items()})
    return tables[0], tables[1]


def _approval_problem(
    directory: str, read: Mapping[str, bytes], data: Mapping[str, Any]
) -> tuple[str | None, dict[str, str]]:
    """Why ``directory``'s project configuration (``data``, parsed from the bytes in
    ``read``, which are judged) is not approved, naming each file that changed; or ``None``,
    with the digests the files it names that the host reads must keep until they are read."""
    real = os.path.realpath(directory)
    approvals, earlier = _read_approvals()
    approved = approvals.get(real, earlier.get(real))
    if approved is None:
        return "the directory is not approved", {}
    files = _hashes(_project_files(real, read))
    changed = [
        f"{name} {_change(approved.get(name), files.get(name))}"
        for name in PROJECT_FILES
        if approved.get(name) != files.get(name)
    ]
    if not changed:  # else its settings are not the approved ones, nor what they name
        surveyed = survey(named_files(data, directory), directory)
        if real not in approvals:
            uncovered = present(surveyed, PROJECT_FILES)
            if uncovered:
                return (
                    "its approval was recorded by an earlier mcs-host and covers only the "
                    f"project files, not the files they name: {'; '.join(uncovered)}"
                ), {}
        changed = changes(approved, surveyed, PROJECT_FILES)
        if not changed:
            return None, host_digests(surveyed)
    return f"its files changed since the directory was approved: {'; '.join(changed)}", {}


def _change(before: str | None, now: str | None) -> str:
    return "appeared" if before is None else "is gone" if now is None else "changed"


def approve_directory(directory: str | os.PathLike[str]) -> dict[str, str]:
    """Approve ``directory``'s project configuration as it is now, its files and every file
    its settings name in the directory (:mod:`._named_files`): its settings are then used
    whole, until any of them changes. Returns what the approval records, the project files
    first: name -> the sha256 of a file, else what the name leads to (``absent``,
    ``directory``, ``special``, ``unreadable``, ``outside:PATH``). Raises
    :class:`ConfigError` when there is no project file, or it is not TOML."""
    real = os.path.realpath(os.fspath(directory))
    files = _project_files(real)
    if not files:
        raise ConfigError(f"{real}: has no {' or '.join(PROJECT_FILES)} to approve")
    named = named_files(_used_settings(real, files), real)
    approval = {**_hashes(files), **recorded(survey(named, real), PROJECT_FILES)}
    with _approvals_locked():
        approvals, earlier = _read_approvals()
        approvals[real] = approval
        earlier.pop(real, None)
        _write_approvals(approvals, earlier)
    return approval


def revoke_directory(directory: str | os.PathLike[str]) -> bool:
    """Withdraw the approval of ``directory``; whether there was one."""
    real = os.path.realpath(os.fspath(directory))
    with _approvals_locked():
        approvals, earlier = _read_approvals()
        if approvals.pop(real, None) is None and earlier.pop(real, None) is None:
            return False
        _write_approvals(approvals, earlier)
    return True


@contextlib.contextmanager
def _approvals_locked() -> Iterator[None]:
    """The approvals' lock, held for a read-modify-write: two approvals at once both count."""
    try:
        with locked(_approvals_path()):
            yield
    except OSError as exc:
        raise ConfigError(f"{_approvals_path()}: cannot record the approval: {exc}") from None


def _write_approvals(approvals: _Approvals, earlier: _Approvals) -> None:
    """Both tables; ``directories`` always written, so an earlier mcs-host reads the file
    (and finds the directories approved since unapproved)."""
    document = {"approvals": approvals, "directories": earlier}
    write_atomic(_approvals_path(), json.dumps(document, indent=2, sort_keys=True) + "\n")
