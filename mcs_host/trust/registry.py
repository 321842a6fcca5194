"""The trust index: which drivers exist, which releases are pinned, who may sign new ones.

A registry file is either a plain JSON document (a lock the user controls) or a DSSE envelope
around one (a shared index): signed by at least ``threshold`` distinct trusted keys, with an
``expires`` time, and a ``version`` that may never go below the last one this host accepted.
Several registries merge into one :class:`TrustIndex`; later ones can add releases, keys and
revocations, and can only narrow versions, never widen them.

One module: the registry format, its signed envelope, the state file that refuses a downgrade
and the trust index built from several registries are one specification.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from mcs_host._files import (
    PRIVATE,
    REGISTRY_LIMIT,
    SHARED,
    STATE_LIMIT,
    InputError,
    loads_json,
    locked,
    read_bytes,
    validation_lines,
)
from mcs_host._files import write_atomic as _write_atomic
from mcs_host._places import state_directory
from mcs_host._reasons import known_reason
from mcs_host.discovery import normalize_name

from .signatures import Envelope, PublicKey, SignatureError

__all__ = [
    "REGISTRY_FORMAT",
    "REGISTRY_PAYLOAD_TYPE",
    "DriverEntry",
    "LibraryEntry",
    "MCPServerEntry",
    "Pin",
    "PublisherKey",
    "Registry",
    "RegistryError",
    "RegistrySource",
    "RegistryState",
    "ReleaseEntry",
    "TrustIndex",
    "default_registry_paths",
    "is_envelope",
    "load_index",
    "load_registry",
    "state_directory",
    "user_registry_path",
    "write_atomic",
]

REGISTRY_FORMAT = "mcs-host-registry/2"
_OLD_FORMATS = {
    "mcs-host-registry/1": "its pins are installed-tree-v1 digests, which two different trees "
    "can share; re-lock it with `mcs-host lock` (or have its publisher re-issue it)"
}
REGISTRY_PAYLOAD_TYPE = "application/vnd.mcs-host.registry+json"
_SHA256 = r"^[0-9a-f]{64}$"

TrustLabel = Literal["verified", "reference", "community"]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Pin(_Strict):
    """A release's ``installed-tree-v2`` digest, with the file count and bytes it covers."""

    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$", description="sha256 of the listing.")
    files: int = Field(ge=0, description="Files in the listing.")
    bytes: int = Field(ge=0, description="Total size of those files.")
    wheel_sha256: str | None = Field(
        default=None, pattern=_SHA256, description="sha256 of the wheel file, if locked from one."
    )


class PublisherKey(_Strict):
    """A key allowed to sign releases of a driver."""

    key: str = Field(description='"ed25519:<base64 of the raw 32-byte public key>".')
    name: str | None = Field(default=None, description="Who holds the key.")

    @field_validator("key")
    @classmethod
    def _parse(cls, value: str) -> str:
        PublicKey.parse(value)
        return value

    @property
    def public_key(self) -> PublicKey:
        return PublicKey.parse(self.key)


class ReleaseEntry(_Strict):
    """What the registry knows about the releases of one distribution: pins, revocations,
    allowed versions and the keys that may sign new releases."""

    trust: TrustLabel = Field(default="community", description="verified, reference, community.")
    security_notes: tuple[str, ...] = Field(default=(), description="What users should know.")
    versions: str | None = Field(
        default=None, description='Allowed versions, a PEP 440 specifier set (">=1.2,<2").'
    )
    minimum_version: str | None = Field(
        default=None, description="Versions below it are refused: no downgrades."
    )
    releases: dict[str, Pin] = Field(default_factory=dict, description="Version -> its pin.")
    revoked: dict[str, str] = Field(
        default_factory=dict, description="Version -> why it must never be loaded."
    )
    publisher_keys: tuple[PublisherKey, ...] = Field(
        default=(), description="Keys whose signature on a release is trusted."
    )

    @field_validator("versions")
    @classmethod
    def _specifier(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                SpecifierSet(value)
            except InvalidSpecifier as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("minimum_version")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        if value is not None:
            _version_of(value)
        return value

    @field_validator("releases", "revoked")
    @classmethod
    def _version_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            _version_of(key)
        return value

    def pin_for(self, version: str) -> Pin | None:
        wanted = _version_of(version)
        return next((pin for v, pin in self.releases.items() if Version(v) == wanted), None)

    def revocation(self, version: str) -> str | None:
        wanted = _version_of(version)
        return next((why for v, why in self.revoked.items() if Version(v) == wanted), None)

    def refuses_version(self, version: str) -> str | None:
        """Why ``version`` is outside this entry's allowed versions, or ``None``."""
        wanted = _version_of(version)
        if self.minimum_version is not None and wanted < Version(self.minimum_version):
            return f"{version} is below the minimum version {self.minimum_version}"
        if self.versions is not None and not SpecifierSet(self.versions).contains(
            wanted, prereleases=True
        ):
            return f"{version} is not among the allowed versions {self.versions}"
        return None


class DriverEntry(ReleaseEntry):
    """A driver: its distribution, label and object, and what it needs that it does not
    declare."""

    distribution: str = Field(description="The distribution that ships it (PEP 503 name).")
    label: str = Field(
        description="Its label: the entry point name, or the name it is mounted "
        "under when the registry declares it for a distribution without one."
    )
    object: str = Field(description="The entry point value, module:object.")
    group: Literal["mcs.drivers", "mcs.host_plugins"] = Field(
        default="mcs.drivers", description="A driver, or a host plugin."
    )
    requires: tuple[str, ...] = Field(
        default=(),
        description="Distributions it imports without declaring them (PEP 503 names).",
    )
    isolation: Literal["process"] | None = Field(
        default=None,
        description='"process": hosts run it only in a child process of its own, whatever '
        "their configuration says.",
    )

    @field_validator("distribution")
    @classmethod
    def _normalized(cls, value: str) -> str:
        if normalize_name(value) != value:
            raise ValueError(f"write the PEP 503 name {normalize_name(value)!r}")
        return value


class LibraryEntry(ReleaseEntry):
    """A distribution drivers import (an adapter, a core library): verified like a driver."""


class MCPServerEntry(_Strict):
    """An MCP server a host may mount as a driver, vouched for by the registry: a remote
    ``url``, a stdio ``command``, or the console script of an installed ``distribution``
    (verified by its pins in ``libraries`` before it starts)."""

    url: str | None = Field(
        default=None, description="Its streamable HTTP URL (http or https), exactly."
    )
    command: str | tuple[str, ...] | None = Field(
        default=None,
        description="What starts it over stdio, exactly: a program (with args) or the whole "
        "command line.",
    )
    args: tuple[str, ...] = Field(default=(), description="Arguments after the command.")
    distribution: str | None = Field(
        default=None, description="The distribution (PEP 503 name) whose console script it is."
    )
    script: str | None = Field(
        default=None, description="That console script (default: the distribution's only one)."
    )
    consent: bool = Field(
        default=True, description="Each call needs a consent plugin's approval (default)."
    )
    trust: TrustLabel = Field(default="community", description="How far it is vouched for.")
    description: str | None = Field(default=None, description="What it is, for people.")

    @model_validator(mode="after")
    def _one_way(self) -> MCPServerEntry:
        given = [k for k in ("url", "command", "distribution") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of url, command and distribution")
        if self.distribution is not None and normalize_name(self.distribution) != self.distribution:
            raise ValueError(f"write the PEP 503 name {normalize_name(self.distribution)!r}")
        problem = server_problem(self.url, self.command, self.args)
        if problem is not None:
            raise ValueError(problem)
        return self

    @property
    def argv(self) -> tuple[str, ...]:
        """The command line: ``command`` then ``args``."""
        return command_line(self.command, self.args)


def command_line(command: str | Sequence[str] | None, args: Sequence[str]) -> tuple[str, ...]:
    """An MCP server's command line: ``command`` (a program, or a whole command line) then
    ``args``."""
    command = command or ()
    return (*((command,) if isinstance(command, str) else command), *args)


def server_problem(
    url: str | None, command: str | Sequence[str] | None, args: Sequence[str]
) -> str | None:
    """What is wrong with an MCP server's ``url`` or command, or ``None``."""
    if url is not None and not url.startswith(("http://", "https://")):
        return f"url {url!r} is not http(s)"
    if command is not None and not (command_line(command, args) or ("",))[0]:
        return "command is empty"
    return None


class Registry(_Strict):
    """A registry document: the plain file, or the payload of a signed envelope."""

    format: Literal["mcs-host-registry/2"] = Field(description="Format identifier.")
    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The index's name; required for a signed registry, where it and the "
        "signing keys identify the index whose versions only go up.",
    )
    version: int = Field(default=0, ge=0, description="Goes up with every published change.")
    expires: datetime | None = Field(
        default=None, description="After this time the registry is refused (ISO 8601, with zone)."
    )
    drivers: dict[str, DriverEntry] = Field(default_factory=dict, description="Driver id -> entry.")
    libraries: dict[str, LibraryEntry] = Field(
        default_factory=dict, description="Distribution (PEP 503 name) -> its pins."
    )
    mcp_servers: dict[str, MCPServerEntry] = Field(
        default_factory=dict, description="Label -> an MCP server hosts may mount as a driver."
    )

    @field_validator("format", mode="before")
    @classmethod
    def _current_format(cls, value: object) -> object:
        if isinstance(value, str) and value in _OLD_FORMATS:
            raise ValueError(f"{value} is an old format: {_OLD_FORMATS[value]}")
        return value

    @field_validator("libraries")
    @classmethod
    def _library_names(cls, value: dict[str, LibraryEntry]) -> dict[str, LibraryEntry]:
        for name in value:
            if normalize_name(name) != name:
                raise ValueError(f"write the PEP 503 name {normalize_name(name)!r}")
        return value

    @field_validator("expires")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("give a time zone, e.g. 2027-01-01T00:00:00Z")
        return value

    def dump(self) -> str:
        """The JSON text of this registry, as ``lock`` writes it."""
        data = self.model_dump(mode="json", exclude_defaults=True)
        data["format"] = self.format
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`dump` to ``path``, replacing the file whole (never half written, never
        through a symbolic link; a new file is readable as the umask allows)."""
        write_atomic(path, self.dump(), mode=SHARED)


def is_envelope(data: bytes | str) -> bool:
    """Whether a registry file's text is a signed envelope rather than a plain registry."""
    try:
        return _envelope_shaped(loads_json(data, "registry"))
    except ValueError:
        return False


def _envelope_shaped(document: object) -> bool:
    return isinstance(document, dict) and "payloadType" in document


def write_atomic(path: str | os.PathLike[str], text: str, *, mode: int = PRIVATE) -> None:
    """Replace ``path`` with ``text`` whole: never half written, never through a symbolic
    link (one at ``path`` is refused), keeping the file's mode; a new file gets ``mode``
    less the umask (private, 0600, unless told). See :func:`mcs_host._files.replacing`."""
    _write_atomic(path, text, mode=mode)


def _version_of(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise ValueError(f"{text!r} is not a valid version") from None


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
        elif known.digest != pin.digest:
            problems.append(
                f"{source} pins {version} as {pin.digest}, an earlier one as {known.digest}"
            )
    specifiers = [s for s in (first.versions, later.versions) if s]
    minimums = [m for m in (first.minimum_version, later.minimum_version) if m]
    keys = {k.key: k for k in (*first.publisher_keys, *later.publisher_keys)}
    update: dict[str, Any] = {
        "releases": releases,
        "revoked": {**later.revoked, **first.revoked},
        "versions": ",".join(specifiers) or None,
        "minimum_version": max(minimums, key=Version) if minimums else None,
        "publisher_keys": tuple(keys.values()),
        "security_notes": tuple(dict.fromkeys((*first.security_notes, *later.security_notes))),
    }
    if isinstance(first, DriverEntry) and isinstance(later, DriverEntry):
        update["requires"] = tuple(dict.fromkeys((*first.requires, *later.requires)))
    return first.model_copy(update=update), problems


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
