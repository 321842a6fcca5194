"""What :func:`~mcs_host.loading.host.load_drivers` takes from code besides a configuration.

:class:`LoadOptions` names every setting it accepts as a keyword: each key of
:class:`~mcs_host.loading.config_schema.HostConfig` a user sets, and the trust settings by their own
names (``allow_extensions=True`` as well as ``trust={"allow_extensions": True}``).
:func:`checked_options` checks them by name and by value before any file is read, so a wrong
keyword is a :class:`TypeError` listing the names that exist, and a wrong value a
:class:`~mcs_host.loading.config_schema.ConfigError` naming the argument, never a file the user did
not write.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypedDict

from pydantic import ValidationError

from mcs_host.discovery import labels_argument

from .config_schema import (
    ConfigError,
    DriverSettings,
    HostConfig,
    MCPServerSettings,
    ServeSettings,
    TrustSettings,
)

__all__ = ["LoadOptions"]


class LoadOptions(TypedDict, total=False):
    """The settings :func:`~mcs_host.loading.host.load_drivers` takes as keywords, over its
    configuration's: each means what the key of the same name means in the configuration
    file (see the configuration reference); ``None`` leaves a setting as it is. The trust
    settings are given by their own names or as ``trust``, whose keys merge with the
    configuration's; a ``str`` given for a list of names is one name."""

    registries: str | Iterable[str] | None
    registry_keys: str | Iterable[str]
    registry_threshold: int
    trust: TrustSettings | Mapping[str, Any]
    allow_unverified: bool
    allow_extensions: bool
    dependencies: Literal["report", "refuse"]
    allow: str | Iterable[str]
    deny: str | Iterable[str]
    require: Mapping[str, str]
    require_capabilities: str | Iterable[str]
    drivers: Mapping[str, DriverSettings | Mapping[str, Any]]
    mcp_servers: Mapping[str, MCPServerSettings | Mapping[str, Any]]
    autoload: bool
    plugins: bool
    strict: bool
    healthcheck: bool
    timeout: float
    call_timeout: float | None
    prompts: str | None
    isolation: Literal["none", "process"]
    namespace: Literal["on-collision", "always"]
    serve: ServeSettings | Mapping[str, Any]


_TRUST = tuple(TrustSettings.model_fields)
"""The trust settings, which a keyword of their own name sets."""
_NAMES = ("registries", "registry_keys", "allow", "deny", "require_capabilities")
"""The options that are lists of names: a ``str`` is one."""


def checked_options(function: str, options: Mapping[str, object]) -> dict[str, Any]:
    """``options`` given to ``function`` as the overrides
    :func:`~mcs_host.loading.config.load_config` takes: the trust settings gathered in
    ``trust``, a ``str`` for a list of names made one name, ``None`` left out.

    Raises :class:`TypeError` for a keyword that is not a key of :class:`LoadOptions` (naming
    the closest and every one), or a trust setting given twice; :class:`ConfigError` for a
    value the configuration refuses, naming the argument."""
    known = tuple(LoadOptions.__annotations__)
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}? It" if close else "; it"
            raise TypeError(
                f"{function}() got an unexpected keyword argument {name!r}{hint} "
                f"takes: {', '.join(known)}"
            )
    given = {k: v for k, v in options.items() if v is not None}
    flat = {k: given.pop(k) for k in _TRUST if k in given}
    trust = given.get("trust")
    if isinstance(trust, TrustSettings):
        trust = trust.model_dump()
    if flat:
        if trust is not None and not isinstance(trust, Mapping):
            raise TypeError(f"{function}() argument 'trust' must be a mapping or TrustSettings")
        twice = sorted(set(flat) & set(trust or {}))
        if twice:
            raise TypeError(
                f"{function}() got {twice[0]!r} both as a keyword and in 'trust': give it once"
            )
        trust = {**(trust or {}), **flat}
    if trust is not None:
        given["trust"] = dict(trust) if isinstance(trust, Mapping) else trust
    for name in _NAMES:
        if name in given:
            given[name] = labels_argument(given[name], f"{function}() argument {name!r}")
    try:
        HostConfig.model_validate(given)
    except ValidationError as exc:
        raise ConfigError(_blamed(function, exc, set(flat))) from None
    return given


def _blamed(function: str, exc: ValidationError, flat: set[str]) -> str:
    """The validation errors of options, one line each, naming the argument at fault."""
    lines = []
    for error in exc.errors():
        loc = [str(part) for part in error["loc"]]
        if loc[:1] == ["trust"] and len(loc) > 1 and loc[1] in flat:
            loc = loc[1:]
        argument, where = loc[0] if loc else "?", ".".join(loc[1:])
        problem = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        lines.append(f"{function}() argument {argument}: {where + ': ' if where else ''}{problem}")
    return "\n".join(lines)
