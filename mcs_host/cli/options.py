"""What the commands share: their options, reading the configuration, and failing with
exit 2 and one line.

One module: each shared option is declared once, as a field of :class:`HostOptions`, beside
what gives it to the commands that name it (:func:`host_options`) and what reads the
configuration from it (:meth:`HostOptions.host_config`): a new trust option is added here,
and no command changes."""

from __future__ import annotations

import functools
import inspect
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, NoReturn, TypeVar, get_type_hints

import typer

if TYPE_CHECKING:
    from mcs_host.loading.config_schema import HostConfig

JsonOption = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print one JSON document instead of text (its schema: "
        "mcs_host/schemas/cli-COMMAND.schema.json).",
    ),
]


SearchPathOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--path",
        help="Search this directory instead of sys.path (repeatable).",
        metavar="DIR",
        file_okay=False,
    ),
]


LabelsArgument = Annotated[
    list[str] | None,
    typer.Argument(help="Driver labels (default: all).", show_default=False, metavar="LABEL..."),
]


LabelOption = Annotated[
    list[str] | None,
    typer.Option(
        "--label",
        help="Load only this driver or MCP server (repeatable; default: all), as load's LABELs.",
        show_default=False,
        metavar="LABEL",
    ),
]


RegistryOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--registry",
        help=(
            "Registry file (repeatable). Default: $MCS_HOST_REGISTRY, else the configuration's "
            "registries, else ~/.config/mcs-host/registry.json; a ./registry.json is used "
            "only when named."
        ),
        metavar="FILE",
        dir_okay=False,
    ),
]


RegistryToWriteOption = Annotated[
    Path | None,
    typer.Option(
        "--registry",
        help="The registry file to write (default: the one a load reads when none is "
        "named: the first of $MCS_HOST_REGISTRY, else ~/.config/mcs-host/registry.json).",
        metavar="FILE",
        dir_okay=False,
    ),
]
"""The one registry file a command writes (``lock``, ``add``)."""

RegistryKeyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--registry-key",
        help="A public key (ed25519:...) that may sign the signed registries (repeatable).",
        metavar="KEY",
    ),
]


ThresholdOption = Annotated[
    int | None,
    typer.Option(
        "--threshold",
        min=1,
        help="Signatures by distinct keys a signed registry needs.",
        metavar="N",
    ),
]


AllowUnverifiedOption = Annotated[
    bool | None,
    typer.Option(
        "--allow-unverified/--no-allow-unverified",
        help="Allow drivers no registry pins or signs (development only; each load warns). "
        "Also MCS_HOST_ALLOW_UNVERIFIED=1.",
        show_default=False,
    ),
]


AllowExtensionsOption = Annotated[
    bool | None,
    typer.Option(
        "--allow-extensions/--no-allow-extensions",
        help="Load (the default) or refuse the native code (extension modules) of verified "
        "distributions, linked from their verified bytes. Also MCS_HOST_ALLOW_EXTENSIONS=0.",
        show_default=False,
    ),
]


ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="Host config file, read alone. Default: $MCS_HOST_CONFIG alone, else "
        "~/.config/mcs-host/config.toml with a project file here (./mcs-host.toml, else "
        "[tool.mcs-host] in ./pyproject.toml) layered under it until approved.",
        metavar="FILE",
        dir_okay=False,
    ),
]


StrictOption = Annotated[
    bool | None,
    typer.Option(
        "--strict/--no-strict",
        help="Any driver that does not mount is an error (exit 1).",
        show_default=False,
    ),
]


IsolateOption = Annotated[
    bool | None,
    typer.Option(
        "--isolate/--no-isolate",
        help="Run every installed driver in a child process of its own (needs the mcp extra).",
        show_default=False,
    ),
]
HealthcheckOption = Annotated[
    bool | None,
    typer.Option(
        "--healthcheck/--no-healthcheck",
        help="Run healthcheck() of drivers that declare it; unhealthy ones are not mounted.",
        show_default=False,
    ),
]


VerboseOption = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="Also name each module imported from unverified files (by default one line per "
        "distribution counts them).",
    ),
]


ApproveOption = Annotated[
    bool,
    typer.Option(
        "--approve",
        help="Before each call that needs a consent plugin's approval (an MCP server's, "
        "unless its registry entry waives it), show it and ask on the terminal: y runs it, "
        "anything else denies it. Needs stdin and stderr on a terminal.",
    ),
]


SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="A driver's constructor setting LABEL.KEY=VALUE, or an MCP server's setting "
        "(LABEL.env.NAME=VALUE for one variable); VALUE is JSON, else a string; repeatable.",
        metavar="LABEL.KEY=VALUE",
    ),
]


@dataclass(frozen=True, slots=True)
class HostOptions:
    """The command line's shared options, each as a command receives it (None: not given).
    Each field declares its option once: :func:`host_options` gives a command the ones it
    names, with the field's annotation and default; :meth:`host_config` reads them all."""

    config: ConfigOption = None
    registry: RegistryOption = None
    registry_key: RegistryKeyOption = None
    threshold: ThresholdOption = None
    allow_unverified: AllowUnverifiedOption = None
    allow_extensions: AllowExtensionsOption = None
    strict: StrictOption = None
    healthcheck: HealthcheckOption = None
    sets: SetOption = None
    path: SearchPathOption = None
    isolate: IsolateOption = None

    def host_config(self) -> HostConfig:
        """The host configuration: file and environment, then these options, each checked
        before anything is loaded (a bad one ends here with exit 2)."""
        from mcs_host.loading.config import load_config
        from mcs_host.loading.config_schema import ConfigError

        for directory in self.path or ():
            if not directory.is_dir():
                fail(f"--path {directory}: no such directory")
        for file in self.registry or ():
            if not file.is_file():
                fail(f"--registry {file}: no such file")

        trust = {
            key: value
            for key, value in (
                ("allow_unverified", self.allow_unverified),
                ("allow_extensions", self.allow_extensions),
            )
            if value is not None
        }
        try:
            loaded = load_config(
                self.config,
                registries=[os.fspath(p) for p in self.registry] if self.registry else None,
                registry_keys=list(self.registry_key) if self.registry_key else None,
                registry_threshold=self.threshold,
                trust=trust,
                strict=self.strict,
                healthcheck=self.healthcheck,
                isolation=None if self.isolate is None else ("process" if self.isolate else "none"),
            )
            for note in loaded.notes:
                typer.echo(f"note: {note}", err=True)
            if not self.sets:
                return loaded
            return _with_sets(loaded, self.sets, self.path)
        except ConfigError as exc:
            fail(str(exc))

    def lock_again(self, config: HostConfig) -> str:
        """The options each ``mcs-host lock`` of a fix line under this command's output
        keeps, so it pins into a registry ``config`` reads, from the same configuration and
        search path: ``--registry`` with the first registry ``config`` names (unless that is
        where ``lock`` writes anyway, or registry keys make each one a signed envelope, which
        ``lock`` does not write), ``--config`` and ``--path`` as given; each word quoted for
        the shell, each after a space."""
        from mcs_host.trust.registry import user_registry_path

        words: list[str] = []
        named = config.registries or ()
        default = os.path.abspath(user_registry_path())
        if named and not config.registry_keys and os.path.abspath(named[0]) != default:
            words += ["--registry", named[0]]
        words += ["--config", os.fspath(self.config)] if self.config is not None else []
        for directory in self.path or ():
            words += ["--path", os.fspath(directory)]
        return "".join(f" {shlex.quote(word)}" for word in words)


REGISTRY_OPTIONS: Final = ("config", "registry", "registry_key", "threshold")
"""Where the configuration and the registries come from (``list``)."""
TRUST_OPTIONS: Final = (*REGISTRY_OPTIONS, "allow_unverified", "allow_extensions")
"""Those, and what may load that no registry vouches for (``verify``; a new trust option
goes here)."""
LOAD_OPTIONS: Final = (*TRUST_OPTIONS, "strict", "healthcheck", "sets", "path", "isolate")
"""Those, and how the stack loads (``load``, ``serve``, ``call``, ``run``, ``tools``)."""

_R = TypeVar("_R")


def host_options(*names: str) -> Callable[[Callable[..., _R]], Callable[..., _R]]:
    """Give a command the shared options ``names`` (fields of :class:`HostOptions`), in that
    order, where its keyword-only parameter ``options: HostOptions`` is: typer sees each as
    its field declares it, and the command gets them all as that one value. A name of the
    command's own parameter moves it there (``list``'s ``--no-verify``, after ``--path``)."""

    def decorate(command: Callable[..., _R]) -> Callable[..., _R]:
        shared = _shared_parameters()
        own = inspect.signature(command, eval_str=True)
        if "options" not in own.parameters:
            raise TypeError(f"{command.__name__} has no parameter options: HostOptions")
        for name in names:
            if (name in shared) == (name in own.parameters):
                what = (
                    "both a shared option and" if name in shared else "neither a shared option nor"
                )
                raise TypeError(f"{command.__name__}: {name!r} is {what} its own parameter")
        given = [name for name in names if name in shared]
        parameters: list[inspect.Parameter] = []
        for parameter in own.parameters.values():
            if parameter.name == "options":
                parameters += (shared[n] if n in shared else own.parameters[n] for n in names)
            elif parameter.name not in names:
                parameters.append(parameter)
        keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in parameters]

        @functools.wraps(command)
        def with_options(**received: Any) -> _R:
            options = HostOptions(**{n: received.pop(n) for n in given if n in received})
            return command(**received, options=options)

        signature = own.replace(parameters=keyword)
        # resolved objects, not the strings of ``from __future__ import annotations``:
        # typer reads both, and the options' aliases are not in the command's module
        with_options.__signature__ = signature  # type: ignore[attr-defined]
        with_options.__annotations__ = {
            **{p.name: p.annotation for p in keyword},
            "return": signature.return_annotation,
        }
        return with_options

    return decorate


@functools.cache
def _shared_parameters() -> Mapping[str, inspect.Parameter]:
    """Each field of :class:`HostOptions` as a command's parameter: its name, its annotation
    (the alias, resolved) and its default."""
    hints = get_type_hints(HostOptions, include_extras=True)
    return {
        field.name: inspect.Parameter(
            field.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=field.default,
            annotation=hints[field.name],
        )
        for field in fields(HostOptions)
    }


def _with_sets(loaded: HostConfig, sets: Sequence[str], path: Sequence[Path] | None) -> HostConfig:
    """``loaded`` with each ``--set LABEL.KEY=VALUE``: a driver's constructor setting, or a
    setting of an MCP server's table (``env.NAME`` for one variable). A label counts when a
    driver is configured, installed or declared by a registry, or a server configured or
    vouched for by one; any other is exit 2 before anything is imported."""
    from mcs_host.discovery import ENTRY_POINT_GROUP, Discovery, discover
    from mcs_host.loading.config import override_config

    drivers: dict[str, Any] = {label: s.model_dump() for label, s in loaded.drivers.items()}
    servers: dict[str, Any] = {
        label: s.model_dump(exclude_defaults=True) for label, s in loaded.mcp_servers.items()
    }
    installed: list[Discovery] = []
    registered: dict[str, str] = {}

    def kind(label: str) -> str | None:
        """``"driver"`` or ``"server"``; what is installed and registered read once."""
        if label in drivers:
            return "driver"
        if label in servers:
            return "server"
        if not installed:
            installed.append(discover([os.fspath(p) for p in path] if path else None))
        if installed[0].get(label):
            return "driver"
        if not registered:
            index, _, _ = loaded.trust_index()
            registered.update(dict.fromkeys(index.servers, "server"))
            registered.update(
                (e.label, "driver") for e in index.entries.values() if e.group == ENTRY_POINT_GROUP
            )
            registered.setdefault("", "")
        return registered.get(label) or None

    for target, value in settings_from(sets, "LABEL.KEY=VALUE").items():
        label, dot, key = target.partition(".")
        if not (dot and label and key):
            message = f"{target!r} names no driver setting: use LABEL.KEY=VALUE"
            raise typer.BadParameter(message, param_hint="--set")
        found = kind(label)
        if found is None:
            fail(
                f"--set {target}: no driver or MCP server has the label {label!r} (installed, "
                "configured or in a registry)"
            )
        if found == "driver":
            table = drivers.setdefault(label, {})
            table.setdefault("settings", {})[key] = value
            table.get("relative_to", {}).pop(key, None)  # as written: from the working directory
            continue
        server = servers.setdefault(label, {})
        name, dot, variable = key.partition(".")
        if name == "env" and dot:
            server.setdefault("env", {})[variable] = str(value)
        else:
            server[key] = value
    return override_config(loaded, drivers=drivers, mcp_servers=servers)


def config_from_parent(command: str, child: str) -> HostConfig:
    """The configuration the parent host wrote for this child process (``command`` says
    which, in errors; ``child`` what it runs), taken out of the environment; and on Linux the
    child is asked to end with its parent, and made the parent of what the code it runs
    orphans (a child subreaper), so that it can end all of it (:mod:`mcs_host._descendants`)."""
    from mcs_host.bridge.isolation import CONFIG_VARIABLE
    from mcs_host.loading.config_schema import HostConfig

    from ._secrets import withheld

    # what the child runs does not see it, nor any process of the user in /proc/PID/environ
    raw = withheld(CONFIG_VARIABLE)
    if raw is None:
        fail(f"{command}: {CONFIG_VARIABLE} is not set; only a host starts {child}")
    try:
        settings = HostConfig.model_validate_json(raw)
    except ValueError as exc:
        fail(f"{command}: {CONFIG_VARIABLE} is not a host configuration: {exc}")
    _end_with_parent()
    return settings


_PR_SET_PDEATHSIG = 1
"""Linux's ``prctl`` option: the signal a process gets when its parent dies."""


def _end_with_parent() -> None:
    """On Linux, ask for SIGTERM when the parent dies, so a child that hangs is not left
    behind by a parent that was killed (elsewhere stdin's end is the only sign), and become
    a child subreaper: a daemon the driver or server starts (``setsid`` and fork again)
    stays below this process, which ends it when it ends (the command line's
    :func:`~mcs_host.cli._launch._contain` and the signal handlers of ``serve``). A child
    whose parent has died already exits at once."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal
    from contextlib import suppress

    from mcs_host._descendants import become_subreaper

    from ._launch import parent_at_start

    become_subreaper()
    with suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    started_by = parent_at_start()
    # against the parent at start when it is known: a host that runs as pid 1 (a
    # container's) is a parent too, and an orphan goes to the nearest subreaper, not to 1
    gone = os.getppid() == 1 if started_by is None else os.getppid() != started_by
    if gone:
        raise SystemExit(0)


def settings_from(items: Sequence[str] | None, form: str, option: str = "--set") -> dict[str, Any]:
    """``--set`` items (or ``option``'s) as settings: the value is JSON, else the text itself
    ("" when empty)."""
    from mcs_host._files import InputError, loads_json

    settings: dict[str, Any] = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"{item!r} is not {form}", param_hint=option)
        try:
            settings[key] = loads_json(raw, key)
        except InputError as exc:
            if "nested" in str(exc):
                raise typer.BadParameter(str(exc), param_hint=option) from None
            settings[key] = raw
    return settings


def parse_pairs(items: Sequence[str] | None, option: str) -> dict[str, str]:
    parsed = {}
    for item in items or ():
        label, sep, value = item.partition("=")
        if not sep or not label or not value:
            raise typer.BadParameter(f"{item!r} is not LABEL=VALUE", param_hint=option)
        parsed[label] = value
    return parsed


def parse_ids(ids: Sequence[str] | None) -> dict[str, str]:
    return parse_pairs(ids, "--id")


def fail(message: str, code: int = 2) -> NoReturn:
    """Say ``error: message`` on stderr (``error:`` in red on a terminal) and exit ``code``
    (2: a usage or configuration error)."""
    from .console import paint, use_colour

    colour = use_colour(sys.stderr)
    typer.echo(f"{paint('error:', 'bad', colour)} {message}", err=True, color=colour)
    raise typer.Exit(code)
