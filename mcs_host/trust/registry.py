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
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Self, TypeVar

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
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
    REGISTRY_LIMIT,
    SHARED,
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
from mcs_host.discovery import normalize_name

from .publishers import PublisherIdentity, identity_mismatch
from .signatures import Envelope, PublicKey, SignatureError

__all__ = [
    "REGISTRY_FORMAT",
    "REGISTRY_PAYLOAD_TYPE",
    "DriverEntry",
    "FormerPublisher",
    "LibraryEntry",
    "MCPServerEntry",
    "Pin",
    "ProvenanceSummary",
    "Publisher",
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
]

REGISTRY_FORMAT = "mcs-host-registry/2"
_OLD_FORMATS = {
    "mcs-host-registry/1": "its pins are installed-tree-v1 digests, which two different trees "
    "can share; re-lock it with `mcs-host lock` (or have its publisher re-issue it)"
}
REGISTRY_PAYLOAD_TYPE = "application/vnd.mcs-host.registry+json"
_SHA256 = r"^[0-9a-f]{64}$"
_FORGE_ID = r"^[0-9]{1,20}$"

TrustLabel = Literal["verified", "reference", "community"]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Publisher(_Strict):
    """A Trusted Publisher as a Fulcio certificate proved it (PEP 740): the repository and
    workflow that published a release, with the forge's numbers for the repository and its
    owner."""

    forge: Literal["github", "gitlab"] = Field(description="github or gitlab.")
    repository: str = Field(description="OWNER/REPO on GitHub, NAMESPACE/PROJECT on GitLab.")
    workflow: str | None = Field(
        default=None,
        description="The workflow file (in .github/workflows on GitHub, the CI/CD file's path "
        "on GitLab); unset: any.",
    )
    environment: str | None = Field(
        default=None, description="The deployment environment; unset: any, or none."
    )
    repository_id: str | None = Field(
        default=None,
        pattern=_FORGE_ID,
        description="The forge's number for the repository: kept when it is renamed or "
        "transferred, new for another repository given its name.",
    )
    owner_id: str | None = Field(
        default=None, pattern=_FORGE_ID, description="The forge's number for its owner."
    )

    @model_validator(mode="after")
    def _stated(self) -> Publisher:
        identity = self.identity
        if PublisherIdentity.parse(str(identity)) != identity:  # a ValueError naming the part
            raise ValueError(f"{identity} does not read back as itself")
        return self

    @classmethod
    def proven(
        cls, identity: PublisherIdentity, repository_id: str | None, owner_id: str | None
    ) -> Publisher:
        """The publisher a certificate proved: ``identity`` and the forge's numbers."""
        return cls(
            forge=identity.forge,
            repository=identity.repository,
            workflow=identity.workflow,
            environment=identity.environment,
            repository_id=repository_id,
            owner_id=owner_id,
        )

    @property
    def identity(self) -> PublisherIdentity:
        return PublisherIdentity(self.forge, self.repository, self.workflow, self.environment)

    def __str__(self) -> str:
        return str(self.identity)


class FormerPublisher(Publisher):
    """A publisher an entry had before the one it records now, and where it stopped."""

    until: str = Field(
        description="The first version its successor published: only releases below it may "
        "carry this publisher's provenance."
    )

    @field_validator("until")
    @classmethod
    def _version(cls, value: str) -> str:
        _version_of(value)
        return value


def publisher_change(recorded: Publisher, proven: Publisher) -> str | None:
    """How ``proven`` (what a release's certificate proves) differs from the ``recorded``
    publisher, naming both; ``None`` when it is the same publisher. A part ``recorded`` leaves
    out matches any (:func:`~mcs_host.trust.publishers.identity_mismatch`); the forge's number
    for the repository, when both name one, must be the same: a repository deleted and made
    again under its name is another publisher."""
    numbers = (recorded.repository_id, proven.repository_id)
    mismatch = identity_mismatch(recorded.identity, proven.identity)
    if mismatch is not None:
        said = f"attested by {proven}, not by {recorded}, the publisher the registry records"
        if mismatch.part != "repository":
            return f"{said} (another {mismatch.part})"
        if None not in numbers and numbers[0] == numbers[1]:
            return (
                f"{said}: the repository's number is the same ({numbers[0]}), so it was "
                "probably renamed or transferred"
            )
        return f"{said} (another repository)"
    if None not in numbers and numbers[0] != numbers[1]:
        return (
            f"attested by {proven} from repository number {numbers[1]}, but the registry "
            f"records {recorded} from repository number {numbers[0]}: a repository deleted "
            "and made again under its name, or another one given it"
        )
    return None


class ProvenanceSummary(_Strict):
    """What a release's PEP 740 provenance proved when it was recorded. The provenance
    itself is stored beside the registry file (``<stem>.provenance/<filename>.provenance``),
    bound to this summary by its sha256, so a registry's signature covers it too."""

    filename: str = Field(
        max_length=255, description="The distribution file it attests (a wheel or sdist)."
    )
    sha256: str = Field(pattern=_SHA256, description="That file's sha256, as attested.")
    provenance_sha256: str = Field(pattern=_SHA256, description="sha256 of the stored provenance.")
    publisher: Publisher = Field(description="The publisher its certificate proved.")
    log_index: int = Field(ge=0, description="The publish attestation's Rekor log index.")
    integrated_time: int = Field(
        ge=0, description="When the log integrated it, in Unix seconds (signed by the log)."
    )
    ref: str | None = Field(default=None, description="The git ref the workflow ran on.")
    commit: str | None = Field(default=None, description="The commit the workflow ran on.")
    trusted_root_sha256: str = Field(
        pattern=_SHA256, description="sha256 of the Sigstore trusted root it was verified with."
    )

    @field_validator("filename")
    @classmethod
    def _file_name(cls, value: str) -> str:
        distribution_file(value)
        return value


def distribution_file(filename: str) -> tuple[str, Version]:
    """The distribution (PEP 503 name) and version a wheel's or sdist's file name says; a
    :class:`ValueError` for any other name, and for a path (it names a stored file)."""
    if re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.+!-]*\.(?:whl|tar\.gz|zip)", filename):
        try:
            if filename.endswith(".whl"):
                name, version, _, _ = parse_wheel_filename(filename)
                return name, version
            return parse_sdist_filename(filename)
        except (InvalidWheelFilename, InvalidSdistFilename):
            pass
    raise ValueError(f"{filename!r} is not a wheel's or source distribution's file name")


class Pin(_Strict):
    """A release's ``installed-tree-v2`` digest, with the file count and bytes it covers."""

    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$", description="sha256 of the listing.")
    files: int = Field(ge=0, description="Files in the listing.")
    bytes: int = Field(ge=0, description="Total size of those files.")
    wheel_sha256: str | None = Field(
        default=None, pattern=_SHA256, description="sha256 of the wheel file, if locked from one."
    )
    provenance: ProvenanceSummary | None = Field(
        default=None, description="What its publisher's provenance proved, if it carries one."
    )

    @model_validator(mode="after")
    def _attests_this_wheel(self) -> Pin:
        attested = self.provenance
        if attested is not None and attested.filename.endswith(".whl"):
            if self.wheel_sha256 is None:
                raise ValueError(
                    f"provenance of the wheel {attested.filename} needs the wheel_sha256 of "
                    "the wheel this pin was made from"
                )
            if attested.sha256 != self.wheel_sha256:
                raise ValueError(
                    f"provenance attests {attested.filename} with sha256 {attested.sha256}, "
                    f"but this pin was made from a wheel with sha256 {self.wheel_sha256}"
                )
        return self


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
    builds: dict[str, tuple[Pin, ...]] = Field(
        default_factory=dict,
        description="Version -> other builds of it (wheels for other Pythons or platforms), "
        "each pinned by its own files: an installed release matches its pin or one of these.",
    )
    revoked: dict[str, str] = Field(
        default_factory=dict, description="Version -> why it must never be loaded."
    )
    publisher_keys: tuple[PublisherKey, ...] = Field(
        default=(), description="Keys whose signature on a release is trusted."
    )
    publisher: Publisher | None = Field(
        default=None,
        description="The Trusted Publisher whose provenance its releases carry: once set, "
        "every pin needs provenance proving it (or a former publisher, below its until).",
    )
    former_publishers: tuple[FormerPublisher, ...] = Field(
        default=(), description="The publishers it had before, each with where it stopped."
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

    @field_validator("releases", "revoked", "builds")
    @classmethod
    def _version_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            _version_of(key)
        return value

    @model_validator(mode="after")
    def _built_versions(self) -> Self:
        for version, builds in self.builds.items():
            pin = self.pin_for(version)
            if pin is None:
                raise ValueError(f"builds of {version}, which has no pin in releases")
            digests = [pin.digest, *(b.digest for b in builds)]
            if len(set(digests)) != len(digests):
                raise ValueError(f"a build of {version} has the digest of another build")
        return self

    @model_validator(mode="after")
    def _attested_versions(self) -> Self:
        for version, pin in self.releases.items():
            attested = pin.provenance
            if attested is not None and distribution_file(attested.filename)[1] != Version(version):
                raise ValueError(
                    f"the pin of {version} records the provenance of {attested.filename}, a "
                    "file of another version"
                )
        return self

    def misattested(self, distribution: str) -> str | None:
        """Why a pin's provenance is not of a file of ``distribution``, or ``None``."""
        for version, pin in self.releases.items():
            attested = pin.provenance
            if attested is not None and distribution_file(attested.filename)[0] != (
                canonicalize_name(distribution)
            ):
                return (
                    f"the pin of {version} records the provenance of {attested.filename}, a "
                    f"file of another distribution than {distribution}"
                )
        return None

    def pin_for(self, version: str, digest: str | None = None) -> Pin | None:
        """The pin of ``version``: with a ``digest``, the build that has it when one does,
        else the version's pin (which then differs from it)."""
        wanted = _version_of(version)
        pin = next((p for v, p in self.releases.items() if Version(v) == wanted), None)
        if pin is None or digest is None or pin.digest == digest:
            return pin
        builds = next((b for v, b in self.builds.items() if Version(v) == wanted), ())
        return next((b for b in builds if b.digest == digest), pin)

    def builds_of(self, version: str) -> tuple[Pin, ...]:
        """The other builds of ``version``, beside its pin."""
        wanted = _version_of(version)
        return next((b for v, b in self.builds.items() if Version(v) == wanted), ())

    def revocation(self, version: str) -> str | None:
        wanted = _version_of(version)
        return next((why for v, why in self.revoked.items() if Version(v) == wanted), None)

    def publisher_problem(self, version: str, proven: Publisher) -> str | None:
        """Why release ``version``, attested by ``proven``, is not this entry's publisher's
        (``publisher-changed``); ``None`` when it is, or when the entry records none. A former
        publisher attests the releases below its ``until``."""
        if self.publisher is None:
            return None
        problem = publisher_change(self.publisher, proven)
        if problem is None:
            return None
        wanted = _version_of(version)
        for former in self.former_publishers:
            if wanted < Version(former.until) and publisher_change(former, proven) is None:
                return None
        return problem

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

    @model_validator(mode="after")
    def _attested_files(self) -> DriverEntry:
        problem = self.misattested(self.distribution)
        if problem is not None:
            raise ValueError(problem)
        return self


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
        for name, entry in value.items():
            if normalize_name(name) != name:
                raise ValueError(f"write the PEP 503 name {normalize_name(name)!r}")
            problem = entry.misattested(name)
            if problem is not None:
                raise ValueError(f"{name}: {problem}")
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
