"""The configuration's schema: every setting, its type, default and check (:class:`HostConfig`
and its tables), and :class:`ConfigError`.

Frozen pydantic models that forbid a key they lack. A model's validator is built when it is
first used (``defer_build``), not when this module is imported: a command that reads no
configuration (``init``, ``install``) builds none (about 25 ms). Where the settings come from
and in which order is :mod:`.config`; what a project file may set before approval is
:mod:`.config_project`. This module imports neither.

One module: the tables nest in one another, and the configuration reference and the
project-file rules are checked against the whole schema at once.
"""

from __future__ import annotations

from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mcs_host.discovery import LABEL_RULE, is_valid_label
from mcs_host.trust.registry import (
    RegistryError,
    RegistrySource,
    TrustIndex,
    command_line,
    default_registry_paths,
    load_index,
    server_problem,
)
from mcs_host.trust.signatures import PublicKey

__all__ = [
    "ConfigError",
    "DriverSettings",
    "HostConfig",
    "MCPServerSettings",
    "OAuthSettings",
    "ProcessLimits",
    "ServeSettings",
    "TrustSettings",
]


class ConfigError(ValueError):
    """A setting is invalid; the message names where it came from and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class TrustSettings(_Strict):
    """What may be loaded besides pinned and signed drivers."""

    allow_unverified: bool = Field(
        default=False, description="Load drivers no registry pins or signs (development only)."
    )
    allow_extensions: bool = Field(
        default=True,
        description="Load the native code (extension modules) of verified distributions, "
        "linked from their verified bytes; false refuses every distribution that ships some.",
    )
    dependencies: Literal["report", "refuse"] = Field(
        default="refuse",
        description="Unverified dependencies and imports: refused (the driver is rejected), "
        'or, "report" (development only), run with a warning. A driver allowed unverified '
        "runs its own unverified dependencies too; strict mode refuses them even then.",
    )

    def refuses_unverified(self, strict: bool, waived: bool) -> bool:
        """Whether an unverified dependency or import refuses a mount: always in ``strict``
        mode; else under ``"refuse"`` unless the mount is ``waived`` (allowed unverified,
        for development)."""
        return strict or (self.dependencies == "refuse" and not waived)


class ProcessLimits(_Strict):
    """Resource limits of an isolated driver's process (POSIX ``setrlimit``)."""

    memory_mb: int | None = Field(
        default=None,
        gt=0,
        description="Address space in MiB (RLIMIT_AS); an allocation past it raises "
        "MemoryError in the driver.",
    )
    cpu_seconds: int | None = Field(
        default=None,
        gt=0,
        description="CPU seconds for the process's life (RLIMIT_CPU); past them it is ended "
        "and the next call starts another.",
    )
    open_files: int | None = Field(
        default=None, gt=0, description="Open file descriptors (RLIMIT_NOFILE)."
    )


class DriverSettings(_Strict):
    """How one mount is made: ``[drivers.<label>]``."""

    driver: str | None = Field(
        default=None,
        description="The installed driver's label to instantiate (default: this table's name). "
        "Several tables naming one driver mount it several times.",
    )
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Keyword arguments for the driver's constructor. A relative path given to "
        "a parameter typed as a path (pathlib.Path, os.PathLike) is relative to the "
        "configuration file's directory; '~' is the home directory.",
    )
    relative_to: dict[str, str] = Field(
        default_factory=dict,
        description="The directory each setting's relative path is resolved against: filled "
        "by the host with the directory of the file that gave the setting (a setting given "
        "with --set is taken as written, relative to the working directory).",
    )
    enabled: bool = Field(default=True, description="Set false to leave this mount out.")
    autostart: bool = Field(
        default=False, description="Call the driver's autostart() before mounting it."
    )
    autostart_settings: dict[str, Any] = Field(
        default_factory=dict, description="The argument passed to autostart()."
    )
    capabilities: tuple[str, ...] = Field(
        default=(), description="Capabilities this driver must have to be mounted."
    )
    timeout: float | None = Field(
        default=None, gt=0, description="Seconds its constructor, list_tools and healthcheck get."
    )
    isolation: Literal["none", "process"] | None = Field(
        default=None,
        description='"process": run it in a child process of its own, served over MCP; '
        "\"none\": in the host's process; unset: the host's isolation setting.",
    )
    limits: ProcessLimits = Field(
        default_factory=ProcessLimits, description="Resource limits when it runs isolated."
    )
    restarts: int = Field(
        default=3,
        ge=0,
        description="Times in a row an isolated driver's process is started again after it "
        "failed, before the driver answers every call as failed.",
    )
    max_result_mb: float = Field(
        default=16,
        gt=0,
        description="The largest result (MiB of JSON) a call of this driver may send from its "
        "own process when it runs isolated; a bigger one fails the call, naming this setting.",
    )
    allow_unverified: bool = Field(
        default=False,
        description="Load this mount though no registry pins or signs it, while the global "
        "trust.allow_unverified stays off (development only; the load still says unverified).",
    )


class MCPServerSettings(_Strict):
    """An MCP server mounted as a driver: ``[mcp_servers.<label>]``. Give one of ``url``,
    ``command`` and ``distribution``, or none to mount the server the registry describes
    under this label; what is given must be what the registry says, or the server is
    unverified (mounted only when the policy allows unverified code)."""

    url: str | None = Field(default=None, description="Its streamable HTTP URL (http or https).")
    command: str | tuple[str, ...] | None = Field(
        default=None,
        description="What starts it over stdio: a program (with args, as an mcpServers entry "
        "has it) or the whole command line. A program with a path separator is relative to "
        "the configuration file's directory ('~' is the home directory); a bare name is "
        "looked up on PATH.",
    )
    distribution: str | None = Field(
        default=None,
        description="An installed distribution whose console script serves it over stdio; "
        "verified by the registry's pins before it starts.",
    )
    script: str | None = Field(
        default=None, description="That console script (default: the distribution's only one)."
    )
    args: tuple[str, ...] = Field(
        default=(), description="Arguments after the command, or after the console script."
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Environment variables for a stdio server."
    )
    enabled: bool = Field(default=True, description="Set false to leave it out.")
    call_timeout: float | None = Field(
        default=None, gt=0, description="Seconds a call may take (default: the host's, or 60)."
    )
    consent: bool | None = Field(
        default=None,
        description="Whether each call needs a consent plugin's approval; unset: what its "
        "registry entry says, else yes. For a server a registry vouches for, only true "
        "counts (the registry alone may waive consent).",
    )
    allow_unverified: bool = Field(
        default=False,
        description="Start this server though no registry vouches for it, while the global "
        "trust.allow_unverified stays off (development only; the load still says unverified).",
    )

    @model_validator(mode="after")
    def _one_way(self) -> MCPServerSettings:
        given = [k for k in ("url", "command", "distribution") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give one of url, command and distribution, not {given}")
        problem = server_problem(self.url, self.command, self.args)
        if problem is not None:
            raise ValueError(problem)
        return self

    @property
    def argv(self) -> tuple[str, ...]:
        """The command line: ``command`` then ``args``."""
        return command_line(self.command, self.args)


class OAuthSettings(_Strict):
    """``serve --http`` as an OAuth resource server: ``[serve.oauth]``. Each request carries
    a JWT access token of the identity provider ``issuer``, for the audience ``resource``;
    ``grants`` maps the token's scopes to the labels and tools it may call."""

    issuer: str = Field(
        description='The identity provider\'s issuer URL, as its tokens name it ("iss"); its '
        "keys come from the jwks_uri of its discovery document.",
    )
    resource: str = Field(
        description="This server's URL as clients reach it (https://mcp.example/mcp): the "
        'audience ("aud") each token must name (RFC 8707).',
    )
    jwks_uri: str | None = Field(
        default=None, description="Where the issuer's public keys are; unset: from discovery."
    )
    scopes: tuple[str, ...] = Field(
        default=(), description="Scopes every token must carry, whatever it calls."
    )
    grants: dict[str, tuple[str, ...]] = Field(
        default_factory=dict,
        description='Scope -> the labels and tool names a token with it may list and call ("*": '
        "all). Unset: a valid token may call every tool.",
    )
    metrics_scope: str = Field(
        default="mcs-host:metrics", description="The scope a token needs to read /metrics."
    )
    leeway: int = Field(
        default=30, ge=0, le=300, description="Seconds of clock skew allowed on exp, nbf, iat."
    )

    @field_validator("issuer", "resource", "jwks_uri")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        from mcs_host.bridge.oauth import url_problem  # noqa: PLC0415 - only when set

        problem = None if value is None else url_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class ServeSettings(_Strict):
    """How ``mcs-host serve --http`` admits requests: ``[serve]``. On a loopback address only
    local clients reach it; on any other, Host and Origin must be allowed here and each
    request must carry the bearer token."""

    allowed_hosts: tuple[str, ...] = Field(
        default=(),
        description='Host header values served besides loopback ones ("host:port", or '
        '"host:*" for any port).',
    )
    allowed_origins: tuple[str, ...] = Field(
        default=(),
        description='Origin header values served besides loopback ones ("https://app.example", '
        'or with ":*" for any port); a request without Origin is not a browser\'s.',
    )
    token_file: str | None = Field(
        default=None,
        description="A file holding the bearer token each request must carry (relative to "
        "the config file); MCS_HOST_SERVE_TOKEN gives it directly.",
    )
    fingerprint: str | None = Field(
        default=None,
        pattern=r"^sha256:[0-9a-f]{64}$",
        description="The fingerprint (/readyz shows it) every replica must serve: one that "
        "serves other drivers, versions, files or tools stays alive but not ready.",
    )
    oauth: OAuthSettings | None = Field(
        default=None,
        description="Admit JWT access tokens of an identity provider instead of one token.",
    )


class HostConfig(_Strict):
    """Everything the host needs to know to load drivers."""

    registries: tuple[str, ...] | None = Field(
        default=None,
        description="Registry files; relative paths are relative to the config file. "
        "Unset: the default registries.",
    )
    registry_keys: tuple[str, ...] = Field(
        default=(), description="Public keys (ed25519:...) that may sign signed registries."
    )
    registry_threshold: int = Field(
        default=1, ge=1, description="Signatures by distinct keys a signed registry needs."
    )
    trust: TrustSettings = Field(default_factory=TrustSettings)
    allow: tuple[str, ...] = Field(
        default=(), description="Only these labels or distributions load (empty: all)."
    )
    deny: tuple[str, ...] = Field(
        default=(), description="These labels or distributions never load; deny beats allow."
    )
    require: dict[str, str] = Field(
        default_factory=dict,
        description='Labels that must mount, with a version specifier ("" for any): '
        "one missing or incompatible is an error.",
    )
    require_capabilities: tuple[str, ...] = Field(
        default=(), description="Capabilities every mounted driver must have."
    )
    drivers: dict[str, DriverSettings] = Field(default_factory=dict, description="Mounts by label.")
    mcp_servers: dict[str, MCPServerSettings] = Field(
        default_factory=dict,
        description="MCP servers mounted as drivers, by label. A configuration found in the "
        "working directory may not declare them unless the directory is approved.",
    )
    autoload: bool = Field(
        default=True,
        description="Mount every installed driver; false: only those in [drivers] and those "
        "added in-process. A file that names drivers ([drivers.<label>] tables, other than "
        "enabled = false) and does not set it means false.",
    )
    plugins: bool = Field(default=True, description="Load host plugins from entry points.")
    strict: bool = Field(default=False, description="Any driver that does not mount is an error.")
    healthcheck: bool = Field(
        default=False, description="Run healthcheck() of drivers that declare it before mounting."
    )
    timeout: float = Field(
        default=10.0, gt=0, description="Default seconds for constructor, list_tools, healthcheck."
    )
    call_timeout: float | None = Field(
        default=None, gt=0, description="Seconds each tool call may take (unset: no limit)."
    )
    prompts: str | None = Field(
        default=None,
        description="A prompts file overriding the default prompt texts; relative to the "
        "config file.",
    )
    isolation: Literal["none", "process"] = Field(
        default="none",
        description='"process": every installed driver runs in a child process of its own '
        "(a driver's own setting, or its registry entry, may say otherwise).",
    )
    namespace: Literal["on-collision", "always"] = Field(
        default="on-collision",
        description="Prefix tool names with their label only when names collide, or always.",
    )
    serve: ServeSettings = Field(
        default_factory=ServeSettings, description="Who `serve --http` admits."
    )
    source: str | None = Field(default=None, exclude=True, description="Where this was read.")
    notes: tuple[str, ...] = Field(
        default=(),
        exclude=True,
        description="What the configuration ignored and why (what a project file in the "
        "working directory may not set until it is approved, a registry.json nobody named).",
    )
    approved_digests: dict[str, str] = Field(
        default_factory=dict,
        description="Not a setting: the SHA-256 each registry, prompts or token file an "
        "approved project configuration names in its directory had when the approval was "
        "judged, by its path here; the host refuses other bytes read there.",
    )

    @field_validator("registry_keys")
    @classmethod
    def _keys(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for key in value:
            PublicKey.parse(key)
        return value

    @field_validator("drivers", "mcp_servers")
    @classmethod
    def _labels(cls, value: dict[str, Any]) -> dict[str, Any]:
        for label in value:
            if not is_valid_label(label):
                raise ValueError(f"the label {label!r} is not {LABEL_RULE}")
        return value

    @field_validator("prompts")
    @classmethod
    def _prompts(cls, value: str | None) -> str | None:
        if value is not None:  # a missing or broken prompts file fails here, before any load
            from mcs_host.orchestration.prompting import Prompts  # noqa: PLC0415 - only then

            Prompts.load(value)
        return value

    @field_validator("require")
    @classmethod
    def _specifiers(cls, value: dict[str, str]) -> dict[str, str]:
        for label, specifier in value.items():
            if not is_valid_label(label):
                raise ValueError(f"the label {label!r} is not {LABEL_RULE}")
            try:
                SpecifierSet(specifier)
            except InvalidSpecifier:
                raise ValueError(f"{label}: {specifier!r} is not a version specifier") from None
        return value

    def trust_index(self) -> tuple[TrustIndex, tuple[RegistryError, ...], list[str]]:
        """Load the registries this configuration names (or the default ones) and merge them:
        the index, the errors of the registries left out (refused on trust grounds: expired,
        replayed, badly signed), and the paths used.

        Raises :class:`ConfigError` when a registry or the registry state cannot be read or is
        not a valid registry: a typo, not a trust decision."""
        paths = list(self.registries) if self.registries is not None else default_registry_paths()
        keys = tuple(PublicKey.parse(key) for key in self.registry_keys)
        sources = [
            RegistrySource(path, keys, self.registry_threshold, self.approved_digests.get(path))
            for path in paths
        ]
        index, errors = load_index(sources)
        unusable = [str(e) for e in errors if e.reason in _INPUT_ERRORS]
        if unusable:
            raise ConfigError("\n".join(unusable))
        return index, errors, paths


_INPUT_ERRORS = frozenset({"unreadable", "invalid", "state-unreadable"})
"""Registry errors that are bad input (a missing, unreadable or malformed file)."""
