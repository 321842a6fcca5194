"""The trust index: registry files read, their signatures and versions checked, then merged.

One module: reading registries is one check from a file's bytes to the merged index (the
envelope's signatures, the expiry, the state file that refuses a downgrade, then the merge,
which only narrows), each step taking what the one before it gave.

A registry file is either a plain JSON document (a lock the user controls) or a DSSE envelope
around one (a shared index): signed by at least ``threshold`` distinct trusted keys, with an
``expires`` time, and a ``version`` that may never go below the last one this host accepted.
Several registries merge into one :class:`TrustIndex`; later ones can add releases, keys and
revocations, and can only narrow versions, never widen them. The document and its entries are
defined in :mod:`.registry_format`, and can be imported from here as well.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from packaging.version import Version
from pydantic import ValidationError

from mcs_host._files import (
    REGISTRY_LIMIT,
    STATE_LIMIT,
    InputError,
    loads_json,
    locked,
    read_bytes,
    validation_lines,
    write_atomic,
)
from mcs_host._places import state_directory
from mcs_host._reasons import known_reason

# The document's names, defined in registry_format, are imported from here too (as before)
from .registry_format import REGISTRY_FORMAT as REGISTRY_FORMAT  # noqa: PLC0414
from .registry_format import REGISTRY_PAYLOAD_TYPE as REGISTRY_PAYLOAD_TYPE  # noqa: PLC0414
from .registry_format import DriverEntry as DriverEntry  # noqa: PLC0414
from .registry_format import FormerPublisher as FormerPublisher  # noqa: PLC0414
from .registry_format import LibraryEntry as LibraryEntry  # noqa: PLC0414
from .registry_format import MCPServerEntry as MCPServerEntry  # noqa: PLC0414
from .registry_format import Pin as Pin  # noqa: PLC0414
from .registry_format import ProvenanceSummary as ProvenanceSummary  # noqa: PLC0414
from .registry_format import Publisher as Publisher  # noqa: PLC0414
from .registry_format import PublisherKey as PublisherKey  # noqa: PLC0414
from .registry_format import Registry as Registry  # noqa: PLC0414
from .registry_format import ReleaseEntry as ReleaseEntry  # noqa: PLC0414
from .registry_format import TrustLabel as TrustLabel  # noqa: PLC0414
from .registry_format import command_line as command_line  # noqa: PLC0414
from .registry_format import distribution_file as distribution_file  # noqa: PLC0414
from .registry_format import publisher_change as publisher_change  # noqa: PLC0414
from .registry_format import server_problem as server_problem  # noqa: PLC0414
from .signatures import Envelope, PublicKey, SignatureError

__all__ = [
    "RegistryError",
    "RegistrySource",
    "RegistryState",
    "TrustIndex",
    "default_registry_paths",
    "is_envelope",
    "load_index",
    "load_registry",
    "state_directory",
    "user_registry_path",
]


def is_envelope(data: bytes | str) -> bool:
    """Whether a registry file's text is a signed envelope rather than a plain registry."""
    try:
        return _envelope_shaped(loads_json(data, "registry"))
    except ValueError:
        return False


def _envelope_shaped(document: object) -> bool:
    return isinstance(document, dict) and "payloadType" in document


class RegistryError(Exception):
    """A registry cannot be used; the message names the file and ``reason`` is a code of
    :data:`~mcs_host._reasons.REASONS` (or :class:`ValueError`)."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = known_reason(reason)
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class RegistrySource:
    """Where a registry is read from, and for a signed one, who may sign it."""

    path: str
    keys: tuple[PublicKey, ...] = ()
    threshold: int = 1
    sha256: str | None = None
    """The digest its bytes must have (an approval's, of a project's registry); unset: any."""

    def lineage(self, name: str) -> str:
        """Identifies a signed registry's lineage by its trusted keys and the index's name,
        not by its path: a copy of an old version elsewhere is the same lineage."""
        ids = ",".join(sorted(key.keyid for key in self.keys))
        return hashlib.sha256(f"{ids};{self.threshold};{name}".encode()).hexdigest()


class RegistryState:
    """The last version of each signed registry this host accepted, kept in one JSON file:
    ``{"<lineage>": {"version": int, "sha256": hex}, ..., "signed-paths": {"<real path>":
    "<lineage>"}}``. A file that is not that is an error naming it, never a silent reset.
    Hosts that accept registries at once change it one at a time (:func:`locked`)."""

    __slots__ = ("path",)

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = os.fspath(path) if path is not None else _default_state_path()

    def last(self, lineage: str) -> tuple[int, str] | None:
        entry = self._read()[0].get(lineage)
        return (entry["version"], entry["sha256"]) if entry else None

    def signed_before(self, path: str) -> bool:
        """Whether a signed registry was accepted from ``path`` (its real path)."""
        return os.path.realpath(path) in self._read()[1]

    def accept(self, lineage: str, version: int, sha256: str, path: str) -> None:
        """Remember the version accepted for ``lineage``, and that ``path`` is signed.

        The file is read, changed and written under its lock, read again there: what another
        host recorded meanwhile is kept, and a version older than one it accepted meanwhile
        is refused (``rollback``), never written over it."""
        real = os.path.realpath(path)
        entry = {"version": version, "sha256": sha256}
        lineages, paths = self._read()
        if lineages.get(lineage) == entry and paths.get(real) == lineage:
            return  # nothing new: a read-only state directory does not stop verification
        try:
            with locked(self.path):
                lineages, paths = self._read()
                last = lineages.get(lineage)
                if last is not None:
                    problem = _rollback_problem(path, version, sha256, last)
                    if problem is not None:
                        raise RegistryError("rollback", problem)
                lineages[lineage] = entry
                paths[real] = lineage
                document: dict[str, Any] = {**lineages, "signed-paths": paths}
                write_atomic(self.path, json.dumps(document, indent=2, sort_keys=True))
        except OSError as exc:
            raise RegistryError(
                "state-unwritable", f"{self.path}: cannot record the registry state: {exc}"
            ) from None

    def _read(self) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
        """The lineages and the signed paths; raises ``state-unreadable`` naming the field."""
        try:
            document = loads_json(
                read_bytes(self.path, "the registry state", STATE_LIMIT), self.path
            )
        except FileNotFoundError:
            return {}, {}
        except InputError as exc:
            raise RegistryError("state-unreadable", str(exc)) from None
        except (OSError, UnicodeDecodeError) as exc:
            message = f"{self.path}: cannot read the registry state: {exc}"
            raise RegistryError("state-unreadable", message) from None
        if not isinstance(document, dict):
            raise _damaged(self.path, "(top)", f"is {_json_type(document)}, not a JSON object")
        lineages: dict[str, dict[str, Any]] = {}
        paths: dict[str, str] = {}
        for key, value in document.items():
            if key == "signed-paths":
                if not isinstance(value, dict) or not all(
                    isinstance(v, str) for v in value.values()
                ):
                    raise _damaged(self.path, key, "is not an object of path -> lineage")
                paths = dict(value)
            elif (
                isinstance(value, dict)
                and set(value) == {"version", "sha256"}
                and type(value["version"]) is int
                and isinstance(value["sha256"], str)
            ):
                lineages[key] = value
            else:
                raise _damaged(self.path, key, 'is not {"version": <int>, "sha256": <hex>}')
        return lineages, paths


def _damaged(path: str, field: str, problem: str) -> RegistryError:
    return RegistryError(
        "state-unreadable",
        f"{path}: {field}: {problem}; the host will not guess what it accepted before: move "
        "the file away to start over (every signed registry is then accepted afresh)",
    )


def _json_type(value: object) -> str:
    return {type(None): "null", bool: "a boolean", list: "an array", str: "a string"}.get(
        type(value), "a number"
    )


def _default_state_path() -> str:
    return os.path.join(state_directory(), "registry-state.json")


def default_registry_paths(environ: Mapping[str, str] | None = None) -> list[str]:
    """The registries used when none is given: ``MCS_HOST_REGISTRY`` (``os.pathsep``-separated),
    else ``$XDG_CONFIG_HOME/mcs-host/registry.json`` if it exists. A ``registry.json`` in the
    working directory is never used unless named: whoever can write there is not the user."""
    env = os.environ if environ is None else environ
    if env.get("MCS_HOST_REGISTRY"):
        return [p for p in env["MCS_HOST_REGISTRY"].split(os.pathsep) if p]
    config = user_registry_path(env)
    return [config] if os.path.isfile(config) else []


def user_registry_path(environ: Mapping[str, str] | None = None) -> str:
    """The registry ``mcs-host lock`` writes when none is named, the first a load then reads:
    the first of ``MCS_HOST_REGISTRY``, else ``$XDG_CONFIG_HOME/mcs-host/registry.json``
    (``~/.config`` without ``XDG_CONFIG_HOME``), which need not exist yet."""
    env = os.environ if environ is None else environ
    named = [p for p in env.get("MCS_HOST_REGISTRY", "").split(os.pathsep) if p]
    if named:
        return named[0]
    home = env.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return os.path.join(home, "mcs-host", "registry.json")


def load_registry(
    source: RegistrySource, state: RegistryState | None = None, now: datetime | None = None
) -> Registry:
    """Read and check one registry. Raises :class:`RegistryError` naming the file.

    The file is read once, through one descriptor (no second open by path). With trusted
    keys in ``source`` it must be a signed envelope meeting the threshold: a plain file is
    refused (``unsigned``), as it is in place of one accepted signed before. With a
    ``sha256`` in ``source``, other bytes are refused (``unreadable``, a file that changed).
    """
    moment = now or datetime.now(UTC)
    try:
        data = read_bytes(source.path, "registry", REGISTRY_LIMIT)
        if source.sha256 is not None and hashlib.sha256(data).hexdigest() != source.sha256:
            raise RegistryError("unreadable", _changed(source.path))
        document = loads_json(data, source.path)
    except OSError as exc:
        raise RegistryError("unreadable", f"{source.path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise RegistryError("invalid", f"{source.path}: not UTF-8: {exc}") from None
    except InputError as exc:
        reason = "invalid" if "JSON" in str(exc) else "unreadable"
        raise RegistryError(reason, str(exc)) from None
    signed = _envelope_shaped(document)
    if signed:
        payload = _open_envelope(source, data)
        registry = _parse(source.path, payload)
        for field_name in ("expires", "name"):
            if getattr(registry, field_name) is None:
                raise RegistryError(
                    "invalid", f"{source.path}: a signed registry must set {field_name}"
                )
    else:
        if source.keys:
            raise RegistryError(
                "unsigned",
                f"{source.path} is a plain registry, but registry keys were given: every "
                "registry must then be an envelope they sign (mcs-host sign-registry); name "
                "it without keys to use it as a local lock",
            )
        if (state if state is not None else RegistryState()).signed_before(source.path):
            raise RegistryError(
                "unsigned",
                f"{source.path} was a signed registry when this host last accepted it; "
                "a plain file in its place is refused",
            )
        registry = _parse(source.path, data)
    if registry.expires is not None and registry.expires <= moment:
        raise RegistryError("expired", f"{source.path}: expired at {registry.expires.isoformat()}")
    if signed:
        _check_rollback(source, registry, hashlib.sha256(data).hexdigest(), state)
    return registry


def _changed(path: str) -> str:
    return (
        f"{path}: changed since its directory's approval was checked: these are not the bytes "
        "approved; run the command again"
    )


def _open_envelope(source: RegistrySource, data: bytes) -> bytes:
    if not source.keys:
        raise RegistryError(
            "no-keys", f"{source.path} is a signed registry: give the keys that may sign it"
        )
    try:
        envelope = Envelope.from_json(data, source.path)
        envelope.verify(source.keys, source.threshold, source.path)
    except SignatureError as exc:
        raise RegistryError(exc.reason, str(exc)) from None
    if envelope.payload_type != REGISTRY_PAYLOAD_TYPE:
        raise RegistryError(
            "invalid", f"{source.path}: payload type {envelope.payload_type!r} is not a registry"
        )
    return envelope.payload


def _parse(path: str, data: bytes) -> Registry:
    try:
        loads_json(data, path)  # its nesting is bounded before the model parses it
        return Registry.model_validate_json(data)
    except InputError as exc:
        raise RegistryError("invalid", str(exc)) from None
    except ValidationError as exc:
        raise RegistryError("invalid", validation_lines(path, exc.errors())) from None


def _check_rollback(
    source: RegistrySource, registry: Registry, sha256: str, state: RegistryState | None
) -> None:
    state = state if state is not None else RegistryState()
    lineage = source.lineage(registry.name or "")
    last = state.last(lineage)
    if last is not None:
        problem = _rollback_problem(
            source.path, registry.version, sha256, {"version": last[0], "sha256": last[1]}
        )
        if problem is not None:
            raise RegistryError("rollback", problem)
    state.accept(lineage, registry.version, sha256, source.path)


def _rollback_problem(path: str, version: int, sha256: str, last: Mapping[str, Any]) -> str | None:
    """Why ``version`` (of bytes hashing to ``sha256``) of the registry at ``path`` is a
    replay of what this host accepted (``last``), or ``None``."""
    if version < last["version"]:
        return (
            f"{path}: version {version} is older than version {last['version']}, which this "
            "host already accepted"
        )
    if version == last["version"] and sha256 != last["sha256"]:
        return (
            f"{path}: version {version} differs from the version {version} this host "
            "accepted; a changed registry must raise its version"
        )
    return None


@dataclass(frozen=True, slots=True)
class TrustIndex:
    """The merge of several registries."""

    entries: Mapping[str, DriverEntry] = field(default_factory=dict)
    conflicts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Driver id or library name -> how the registries disagree about it; it is refused."""
    sources: tuple[str, ...] = ()
    libraries: Mapping[str, LibraryEntry] = field(default_factory=dict)
    servers: Mapping[str, MCPServerEntry] = field(default_factory=dict)
    """Label -> the MCP server the registries vouch for; two that differ: it is left out,
    and the disagreement is in ``conflicts`` under ``mcp:<label>``."""

    def find(
        self, driver_id: str | None, project: str, label: str, group: str = "mcs.drivers"
    ) -> tuple[str, DriverEntry] | None:
        """The entry for ``driver_id`` (whatever its group: the caller compares it); without
        one, the distribution ``project``'s only entry in ``group``, or its entry for
        ``label`` there."""
        if driver_id is not None and driver_id in self.entries:
            return driver_id, self.entries[driver_id]
        matches = [
            (i, e)
            for i, e in self.entries.items()
            if e.distribution == project and e.group == group
        ]
        if len(matches) > 1:
            matches = [(i, e) for i, e in matches if e.label == label]
        return matches[0] if len(matches) == 1 else None

    @classmethod
    def merge(cls, registries: Iterable[tuple[str, Registry]]) -> TrustIndex:
        merged: dict[str, DriverEntry] = {}
        libraries: dict[str, LibraryEntry] = {}
        servers: dict[str, MCPServerEntry] = {}
        conflicts: dict[str, list[str]] = {}
        sources: list[str] = []
        for source, registry in registries:
            sources.append(source)
            for key, entry in registry.drivers.items():
                if key in merged:
                    merged[key], problems = _combine(merged[key], entry, source)
                    conflicts.setdefault(key, []).extend(problems)
                else:
                    merged[key] = entry
            for name, library in registry.libraries.items():
                if name in libraries:
                    libraries[name], problems = _combine(libraries[name], library, source)
                    conflicts.setdefault(name, []).extend(problems)
                else:
                    libraries[name] = library
            for label, server in registry.mcp_servers.items():
                known = servers.setdefault(label, server)
                if known != server:
                    conflicts.setdefault(f"mcp:{label}", []).append(
                        f"{source} describes the MCP server {label!r} otherwise than an "
                        "earlier registry"
                    )
        for key in conflicts:
            if key.startswith("mcp:"):
                servers.pop(key.removeprefix("mcp:"), None)
        return cls(
            merged,
            {k: tuple(v) for k, v in conflicts.items() if v},
            tuple(sources),
            libraries,
            servers,
        )


_E = TypeVar("_E", bound=ReleaseEntry)


def _combine(first: _E, later: _E, source: str) -> tuple[_E, list[str]]:
    problems = [
        f"{source} says {name} {getattr(later, name)!r}, "
        f"an earlier registry {getattr(first, name)!r}"
        for name in ("distribution", "object")
        if getattr(first, name, None) != getattr(later, name, None)
    ]
    releases = dict(first.releases)
    for version, pin in later.releases.items():
        known = first.pin_for(version)
        if known is None:
            releases[version] = pin
        elif known.digest != pin.digest and pin.digest not in _digests(first.builds_of(version)):
            problems.append(
                f"{source} pins {version} as {pin.digest}, an earlier one as {known.digest}"
            )
        elif known.provenance is None and pin.provenance is not None:  # the same files
            releases[next(v for v in releases if Version(v) == Version(version))] = pin
    builds = dict(first.builds)  # another registry's builds of a version add to these
    for version, pins in later.builds.items():
        pinned = next((p for v, p in releases.items() if Version(v) == Version(version)), None)
        known_builds = first.builds_of(version)
        have = {pinned.digest if pinned else "", *_digests(known_builds)}
        added = tuple(b for b in pins if b.digest not in have)
        if pinned is not None and added:
            key = next((v for v in builds if Version(v) == Version(version)), version)
            builds[key] = (*known_builds, *added)
    if None not in (first.publisher, later.publisher) and first.publisher != later.publisher:
        problems.append(
            f"{source} records the publisher {_numbered(later.publisher)}, an earlier "
            f"registry {_numbered(first.publisher)}"
        )
    # the publisher and its history come from one registry, never a mix of two
    recorder = first if first.publisher is not None else later
    specifiers = [s for s in (first.versions, later.versions) if s]
    minimums = [m for m in (first.minimum_version, later.minimum_version) if m]
    keys = {k.key: k for k in (*first.publisher_keys, *later.publisher_keys)}
    update: dict[str, Any] = {
        "releases": releases,
        "builds": builds,
        "revoked": {**later.revoked, **first.revoked},
        "versions": ",".join(specifiers) or None,
        "minimum_version": max(minimums, key=Version) if minimums else None,
        "publisher_keys": tuple(keys.values()),
        "security_notes": tuple(dict.fromkeys((*first.security_notes, *later.security_notes))),
        "publisher": recorder.publisher,
        "former_publishers": recorder.former_publishers,
    }
    if isinstance(first, DriverEntry) and isinstance(later, DriverEntry):
        update["requires"] = tuple(dict.fromkeys((*first.requires, *later.requires)))
    return first.model_copy(update=update), problems


def _digests(pins: Iterable[Pin]) -> set[str]:
    return {pin.digest for pin in pins}


def _numbered(publisher: Publisher | None) -> str:
    """A publisher as a merge conflict names it: with its repository's number."""
    number = publisher.repository_id if publisher is not None else None
    return f"{publisher} (repository number {number or 'not named'})"


def load_index(
    sources: Sequence[RegistrySource],
    state: RegistryState | None = None,
    now: datetime | None = None,
) -> tuple[TrustIndex, tuple[RegistryError, ...]]:
    """Load and merge ``sources``; a registry that fails is left out and its error returned."""
    loaded: list[tuple[str, Registry]] = []
    errors: list[RegistryError] = []
    for source in sources:
        try:
            loaded.append((source.path, load_registry(source, state, now)))
        except RegistryError as exc:
            errors.append(exc)
    return TrustIndex.merge(loaded), tuple(errors)
