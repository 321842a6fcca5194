"""Where the configuration comes from, in order: the files, ``MCS_HOST_*`` variables, options.

The file named by ``--config`` or ``MCS_HOST_CONFIG`` is the whole configuration. Without one,
the user's file (:func:`user_config_path`, ``~/.config/mcs-host/config.toml``) is read, and a
project file in the current directory (:func:`.config_project.read_project`) is layered with
it: over the user's when its directory is approved, else under it, setting only what
:mod:`.config_project` allows and the user's file leaves unset. Paths in a file (registries,
prompts, a token file, a driver's settings whose constructor parameter is typed as a path,
and an MCP server's ``command`` with a path separator) are relative to that file's directory.
Every setting is validated by :mod:`.config_schema`; an error names the file and the key, or
the environment variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from mcs_host._files import validation_lines

from .config_project import parse_config, read_config, read_project
from .config_schema import ConfigError, HostConfig

__all__ = ["load_config", "override_config", "user_config_path"]


def load_config(
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    **overrides: Any,
) -> HostConfig:
    """The host configuration: the file, then ``MCS_HOST_*`` variables, then ``overrides``
    (keys of :class:`HostConfig`; ``trust`` as a mapping). Raises :class:`ConfigError`."""
    env = os.environ if environ is None else environ
    data, source, notes, digests = _read_files(path, env)
    merged = _overridden(_overridden(data, _from_environment(env)), overrides)
    if merged.get("registries") is None and os.path.isfile("registry.json"):
        notes.append(
            f"{os.path.abspath('registry.json')} is not used: a registry in the working "
            "directory is never picked up by itself; name it with --registry registry.json"
        )
    return _validated(merged, source, tuple(notes), digests)


def user_config_path(environ: Mapping[str, str] | None = None) -> str:
    """The user's configuration file, read when no file is named: ``$XDG_CONFIG_HOME/mcs-host/
    config.toml`` (``~/.config`` without ``XDG_CONFIG_HOME``), which need not exist."""
    env = os.environ if environ is None else environ
    home = env.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return os.path.join(home, "mcs-host", "config.toml")


def _read_files(
    path: str | os.PathLike[str] | None, env: Mapping[str, str]
) -> tuple[dict[str, Any], str | None, list[str], dict[str, str]]:
    """The settings of the files read, layered; the file of the highest layer; notes on what
    was ignored; the digests of the files an approval covers that the host reads later. A
    named file stands alone; else the user's file, with a project file in the working
    directory over it when approved, under it (the user's settings win) when not."""
    explicit = os.fspath(path) if path is not None else env.get("MCS_HOST_CONFIG") or None
    if explicit is not None:
        data = parse_config(read_config(explicit), explicit, required=True)
        return _anchored(data, explicit), explicit, [], {}
    layers: list[tuple[dict[str, Any], str]] = []
    user = user_config_path(env)
    if os.path.isfile(user):
        layers.append((_anchored(parse_config(read_config(user), user, required=True), user), user))
    data, source, notes, digests = read_project()
    if source is not None:
        layer = (_anchored(data, source), source)
        layers.insert(len(layers) if digests is not None else 0, layer)
    merged: dict[str, Any] = {}
    for layer_data, _ in layers:
        merged = _layered(merged, layer_data)
    return merged, layers[-1][1] if layers else None, notes, digests or {}


def _anchored(data: dict[str, Any], source: str) -> dict[str, Any]:
    """``data``, read from ``source``, with its relative paths made the file's own: registry,
    prompts and token files joined to its directory, each driver setting's directory recorded
    in ``relative_to`` (resolved when the driver's constructor types it as a path); and
    ``autoload = false`` when it names drivers and does not say."""
    data = dict(data)
    base = os.path.dirname(os.path.abspath(source))
    if "autoload" not in data and _names_drivers(data):
        data["autoload"] = False  # the drivers it names are what it chose
    if isinstance(data.get("registries"), list):
        data["registries"] = [os.path.join(base, str(p)) for p in data["registries"]]
    if isinstance(data.get("prompts"), str):
        data["prompts"] = os.path.join(base, data["prompts"])
    serve = data.get("serve")
    if isinstance(serve, dict) and isinstance(serve.get("token_file"), str):
        data["serve"] = {**serve, "token_file": os.path.join(base, serve["token_file"])}
    servers = data.get("mcp_servers")
    if isinstance(servers, Mapping):
        data["mcp_servers"] = {
            label: _anchored_command(table, base) if isinstance(table, Mapping) else table
            for label, table in servers.items()
        }
    drivers = data.get("drivers")
    if isinstance(drivers, Mapping):
        anchored: dict[str, Any] = {}
        for label, table in drivers.items():
            settings = table.get("settings") if isinstance(table, Mapping) else None
            if isinstance(settings, Mapping) and "relative_to" not in table:
                anchored[label] = {**table, "relative_to": dict.fromkeys(settings, base)}
            else:
                anchored[label] = table
        data["drivers"] = anchored
    return data


def _anchored_command(table: Mapping[str, Any], base: str) -> Mapping[str, Any]:
    """A server's ``table`` with its program (``command``, or its first word) joined to
    ``base`` when it is a relative path with a separator (``./server``, ``bin/server``;
    ``~`` expanded): never looked up in the working directory. A bare name is left to
    ``PATH``."""
    command = table.get("command")
    words = [command] if isinstance(command, str) else command
    if not isinstance(words, list) or not words or not isinstance(words[0], str):
        return table
    program = os.path.expanduser(words[0]) if words[0].startswith("~") else words[0]
    separators = [os.sep, *([os.altsep] if os.altsep else [])]
    if not os.path.isabs(program) and any(s in program for s in separators):
        program = os.path.join(base, program)
    if program == words[0]:
        return table
    return {**table, "command": program if isinstance(command, str) else [program, *words[1:]]}


def _layered(low: Mapping[str, Any], high: Mapping[str, Any]) -> dict[str, Any]:
    """``high`` over ``low``: tables merge key by key, any other value of ``high`` wins."""
    merged = dict(low)
    for key, value in high.items():
        below = merged.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            merged[key] = _layered(below, value)
        else:
            merged[key] = value
    return merged


def _names_drivers(data: Mapping[str, Any]) -> bool:
    """Whether a file's settings name a driver to mount: a ``[drivers.<label>]`` table that
    does not say ``enabled = false`` (a file that only leaves drivers out names none)."""
    drivers = data.get("drivers")
    if not isinstance(drivers, Mapping):
        return False
    return any(
        not (isinstance(table, Mapping) and table.get("enabled") is False)
        for table in drivers.values()
    )


def override_config(config: HostConfig, **overrides: Any) -> HostConfig:
    """``config`` with ``overrides`` applied and checked as :func:`load_config` applies them
    (``None`` leaves a setting as it is; ``trust`` merges). Raises :class:`ConfigError`."""
    return _validated(
        _overridden(config.model_dump(), overrides),
        config.source,
        config.notes,
        config.approved_digests,
    )


def _overridden(data: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with the settings of ``overrides`` that are not ``None``; ``trust`` merges
    (a ``trust`` that is not a table is kept, for validation to name it)."""
    merged = {**data, **{k: v for k, v in overrides.items() if v is not None and k != "trust"}}
    trust, more = data.get("trust"), overrides.get("trust")
    if more and (trust is None or isinstance(trust, Mapping)):
        merged["trust"] = {**(trust or {}), **more}
    return merged


def _validated(
    data: Mapping[str, Any],
    source: str | None,
    notes: tuple[str, ...] = (),
    digests: Mapping[str, str] | None = None,
) -> HostConfig:
    """``data`` checked, with what the host records itself (never what a file says there)."""
    recorded = {"source": source, "notes": notes, "approved_digests": dict(digests or {})}
    try:
        return HostConfig.model_validate({**data, **recorded})
    except ValidationError as exc:
        raise ConfigError(
            validation_lines(source or "the host configuration", exc.errors())
        ) from None


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _from_environment(env: Mapping[str, str]) -> dict[str, Any]:
    """The settings the ``MCS_HOST_*`` variables in ``env`` give."""
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
    if env.get("MCS_HOST_REGISTRY_KEYS"):
        data["registry_keys"] = env["MCS_HOST_REGISTRY_KEYS"].replace(",", " ").split()
    if env.get("MCS_HOST_REGISTRY_THRESHOLD"):
        value = env["MCS_HOST_REGISTRY_THRESHOLD"].strip()
        if not value.isdigit():
            raise ConfigError(f"MCS_HOST_REGISTRY_THRESHOLD={value!r}: give a whole number")
        data["registry_threshold"] = int(value)
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
