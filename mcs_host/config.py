"""Configuration: a TOML file, environment variables, then explicit options, in that order.

The file is ``mcs-host.toml``, or the ``[tool.mcs-host]`` table of a ``pyproject.toml``; it is
found from ``--config``, else ``MCS_HOST_CONFIG``, else the current directory. Every setting is
validated; an error names the file and the key, or the environment variable.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .registry import (
    RegistryError,
    RegistrySource,
    TrustIndex,
    default_registry_paths,
    load_index,
)
from .signing import PublicKey

__all__ = [
    "ConfigError",
    "DriverSettings",
    "HostConfig",
    "TrustSettings",
    "load_config",
    "override_config",
]


class ConfigError(ValueError):
    """A setting is invalid; the message names where it came from and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TrustSettings(_Strict):
    """What may be loaded besides pinned and signed drivers."""

    allow_unverified: bool = Field(
        default=False, description="Load drivers no registry pins or signs (development only)."
    )
    allow_extensions: bool = Field(
        default=False, description="Load drivers that ship extension modules."
    )
    dependencies: Literal["report", "refuse"] = Field(
        default="report",
        description="Unverified dependencies and imports: reported as warnings, or refused "
        "(strict mode refuses them too).",
    )


class DriverSettings(_Strict):
    """How one mount is made: ``[drivers.<label>]``."""

    driver: str | None = Field(
        default=None,
        description="The installed driver's label to instantiate (default: this table's name). "
        "Several tables naming one driver mount it several times.",
    )
    settings: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments for the driver's constructor."
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
    autoload: bool = Field(
        default=True,
        description="Mount every installed driver; false: only those in [drivers] and those "
        "added in-process.",
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
    namespace: Literal["on-collision", "always"] = Field(
        default="on-collision",
        description="Prefix tool names with their label only when names collide, or always.",
    )
    source: str | None = Field(default=None, exclude=True, description="Where this was read.")

    @field_validator("registry_keys")
    @classmethod
    def _keys(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for key in value:
            PublicKey.parse(key)
        return value

    @field_validator("require")
    @classmethod
    def _specifiers(cls, value: dict[str, str]) -> dict[str, str]:
        for label, specifier in value.items():
            try:
                SpecifierSet(specifier)
            except InvalidSpecifier:
                raise ValueError(f"{label}: {specifier!r} is not a version specifier") from None
        return value

    def trust_index(self) -> tuple[TrustIndex, tuple[RegistryError, ...], list[str]]:
        """Load the registries this configuration names (or the default ones) and merge them:
        the index, the errors of the registries left out, and the paths used."""
        paths = list(self.registries) if self.registries is not None else default_registry_paths()
        keys = tuple(PublicKey.parse(key) for key in self.registry_keys)
        sources = [RegistrySource(path, keys, self.registry_threshold) for path in paths]
        index, errors = load_index(sources)
        return index, errors, paths


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def load_config(
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    **overrides: Any,
) -> HostConfig:
    """The host configuration: the file, then ``MCS_HOST_*`` variables, then ``overrides``
    (keys of :class:`HostConfig`; ``trust`` as a mapping). Raises :class:`ConfigError`."""
    env = os.environ if environ is None else environ
    data, source = _read_file(path, env)
    if source is not None:
        base = os.path.dirname(os.path.abspath(source))
        if isinstance(data.get("registries"), list):
            data["registries"] = [os.path.join(base, str(p)) for p in data["registries"]]
        if isinstance(data.get("prompts"), str):
            data["prompts"] = os.path.join(base, data["prompts"])
    return _validated(_overridden(_overridden(data, _from_environment(env)), overrides), source)


def override_config(config: HostConfig, **overrides: Any) -> HostConfig:
    """``config`` with ``overrides`` applied and checked as :func:`load_config` applies them
    (``None`` leaves a setting as it is; ``trust`` merges). Raises :class:`ConfigError`."""
    return _validated(_overridden(config.model_dump(), overrides), config.source)


def _overridden(data: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with the settings of ``overrides`` that are not ``None``; ``trust`` merges
    (a ``trust`` that is not a table is kept, for validation to name it)."""
    merged = {**data, **{k: v for k, v in overrides.items() if v is not None and k != "trust"}}
    trust, more = data.get("trust"), overrides.get("trust")
    if more and (trust is None or isinstance(trust, Mapping)):
        merged["trust"] = {**(trust or {}), **more}
    return merged


def _validated(data: Mapping[str, Any], source: str | None) -> HostConfig:
    try:
        return HostConfig.model_validate({**data, "source": source})
    except ValidationError as exc:
        where = source or "the host configuration"
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"{where}: {problems}") from None


def _read_file(
    path: str | os.PathLike[str] | None, env: Mapping[str, str]
) -> tuple[dict[str, Any], str | None]:
    explicit = os.fspath(path) if path is not None else env.get("MCS_HOST_CONFIG") or None
    if explicit is not None:
        return _parse(explicit, required=True), explicit
    for candidate in ("mcs-host.toml", "pyproject.toml"):
        if os.path.isfile(candidate):
            data = _parse(candidate, required=False)
            if data or candidate == "mcs-host.toml":
                return data, os.path.abspath(candidate)
    return {}, None


def _parse(path: str, *, required: bool) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            document = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if os.path.basename(path) == "pyproject.toml":
        table = document.get("tool", {}).get("mcs-host")
        if table is None and required:
            raise ConfigError(f"{path}: has no [tool.mcs-host] table")
        return dict(table or {})
    return document


def _from_environment(env: Mapping[str, str]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    trust: dict[str, bool] = {}
    for variable, key in (
        ("MCS_HOST_ALLOW_UNVERIFIED", "allow_unverified"),
        ("MCS_HOST_ALLOW_EXTENSIONS", "allow_extensions"),
    ):
        if variable in env:
            trust[key] = _flag(env, variable)
    if trust:
        data["trust"] = trust
    for variable, key in (("MCS_HOST_STRICT", "strict"), ("MCS_HOST_HEALTHCHECK", "healthcheck")):
        if variable in env:
            data[key] = _flag(env, variable)
    if env.get("MCS_HOST_REGISTRY"):
        data["registries"] = [p for p in env["MCS_HOST_REGISTRY"].split(os.pathsep) if p]
    for variable, key in (("MCS_HOST_ALLOW", "allow"), ("MCS_HOST_DENY", "deny")):
        if variable in env:
            data[key] = [item.strip() for item in env[variable].split(",") if item.strip()]
    return data


def _flag(env: Mapping[str, str], variable: str) -> bool:
    value = env[variable].strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{variable}={env[variable]!r}: use 1/0, true/false, yes/no or on/off")
