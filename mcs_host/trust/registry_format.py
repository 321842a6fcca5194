"""The registry format: the document a registry file holds, and the rules its entries keep.

One module: the document is one schema whose models check one another (a pin's provenance
against its version and distribution, builds against pins, publishers against their
successors); it is long because every field carries the description the published JSON
Schema gives it.

A :class:`Registry` (``mcs-host-registry/2``) lists drivers (:class:`DriverEntry`), the
libraries they import (:class:`LibraryEntry`) and MCP servers (:class:`MCPServerEntry`). A
driver's or library's entry (:class:`ReleaseEntry`) pins each release by its
``installed-tree-v2`` digest (:class:`Pin`, other builds of a version beside it), revokes
versions, bounds the versions allowed, and names the keys (:class:`PublisherKey`) and the
Trusted Publisher (:class:`Publisher`, its :class:`FormerPublisher` ones, each pin's
:class:`ProvenanceSummary`) that vouch for releases. Every model is frozen and refuses an
unknown field, so a document that parses keeps these rules; :meth:`Registry.dump` and
:meth:`Registry.save` write it as ``lock`` does. A model's validator is built when it is first
used (``defer_build``), not when this module is imported: a command that reads no registry
builds none (about 30 ms). Reading a registry file (plain or signed, never downgraded) and
merging several into a :class:`~mcs_host.trust.registry.TrustIndex` is :mod:`.registry`'s.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, Self

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
    field_validator,
    model_validator,
)

from mcs_host._files import SHARED, write_atomic
from mcs_host.discovery import normalize_name

from .publishers import PublisherIdentity, identity_mismatch
from .signatures import PublicKey

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
    "ReleaseEntry",
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
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


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


def _version_of(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise ValueError(f"{text!r} is not a valid version") from None
