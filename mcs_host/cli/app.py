"""The ``mcs-host`` command line: the typer application and its commands, one module per
command group (:mod:`.drivers`, :mod:`.tools`, :mod:`.serve`, :mod:`.clients`, :mod:`.init`,
:mod:`.add`, :mod:`.trust`, :mod:`.keys`, :mod:`.author`).
Running a command imports only its group and gives typer only that command."""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
import typer.core

from mcs_host._version import about

EXIT_CODES = (
    ("0", "done: everything asked for loaded, verified or ran"),
    (
        "1",
        "something asked for did not load: a label given, or a driver or MCP server the "
        "configuration names, was refused or failed (any, in strict mode; a required one), "
        "nothing mounted, verify found code that is not verified, a label does not exist, a "
        "tool call failed, or the MCP client install writes for has not run here",
    ),
    ("2", "a usage or configuration error: nothing was loaded or written"),
)
"""Every command's exit codes; --help and the docs' tables say the same."""

GROUPS = (
    (
        "To use drivers",
        (
            *("init", "add", "list", "verify", "lock", "allow", "load"),
            *("tools", "call", "run", "serve", "install"),
        ),
    ),
    (
        "To write and publish drivers",
        ("new", "check", "bump", "keygen", "public-key", "sign", "sign-registry"),
    ),
    ("About mcs-host", ("version",)),
)
"""The commands by whom they are for, as --help lists them (every command, in one group)."""

_SETTINGS: dict[str, Any] = {
    "name": "mcs-host",
    "help": "Discover, verify, load and orchestrate MCS drivers.\n\n"
    + "\n\n".join(f"{who}: {', '.join(names)}." for who, names in GROUPS),
    "epilog": "Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES) + ".",
    "no_args_is_help": True,
    "context_settings": {"help_option_names": ["-h", "--help"]},
    "add_completion": True,
    "pretty_exceptions_enable": False,
    "rich_markup_mode": None,
}


def _print_version(value: bool) -> None:
    if value:
        typer.echo(about(full=False)[0])
        raise typer.Exit


def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """Discover, verify, load and orchestrate MCS drivers."""


COMMANDS = (
    ("list", "drivers", "list_drivers"),
    ("verify", "drivers", "verify_drivers"),
    ("load", "drivers", "load_command"),
    ("call", "drivers", "call_command"),
    ("run", "drivers", "run_command"),
    ("tools", "tools", "tools_command"),
    ("serve", "serve", "serve_command"),
    ("install", "clients", "install_command"),
    ("init", "init", "init_command"),
    ("add", "add", "add_command"),
    ("lock", "trust", "lock_drivers"),
    ("keygen", "keys", "keygen"),
    ("public-key", "keys", "public_key"),
    ("sign", "keys", "sign"),
    ("sign-registry", "keys", "sign_registry"),
    ("allow", "trust", "allow_command"),
    ("new", "author", "new_command"),
    ("bump", "author", "bump_command"),
    ("check", "author", "check_command"),
    ("version", "app", "version_command"),
    ("run-server", "_server", "run_server_command"),
)
"""Each command: its name, the module of its group, its function."""
HIDDEN = frozenset({"run-server"})
"""Commands only the host runs (in a process it starts); --help and the docs leave them out."""


def version_command() -> None:
    """Show the version of mcs-host, the Python and platform it runs on, and where it is
    installed (say them in a bug report)."""
    for line in about():
        typer.echo(line)


def build(only: str | None = None) -> typer.Typer:
    """The application with every command, or with the command ``only`` (all that running it
    needs: typer reads the parameters of every command it is given)."""
    application = typer.Typer(**_SETTINGS, cls=_Group)
    application.callback()(_root)
    for name, module, function in COMMANDS:
        if only is None or name == only:
            group = importlib.import_module(f"{__package__}.{module}")
            application.command(name, hidden=name in HIDDEN, cls=_Command)(getattr(group, function))
    return application


def __getattr__(name: str) -> Any:
    if name == "app":  # the whole application, built when asked for (the docs, the tests)
        return build()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    only = args[0] if args and args[0] in {name for name, _, _ in COMMANDS} else None
    if args == ["--version"]:
        only = ""  # the root's option alone: no command's module is imported
    build(only)(args=args, prog_name="mcs-host")


class _Deferring:
    """A command or group of ours: before typer reads its parameters' values, each that
    has no converter yet gets one that waits for a value (:func:`_defer_coercion`)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        _defer_coercion(self.get_params(ctx))  # type: ignore[attr-defined]
        return super().parse_args(ctx, args)  # type: ignore[misc, no-any-return]


class _Command(_Deferring, typer.core.TyperCommand):
    """Each command of the application."""


class _Group(_Deferring, typer.core.TyperGroup):
    """The application itself (its root options: ``--version``, ``--help``, completion)."""


@functools.cache
def _deferred() -> type | None:
    """The converter a parameter starts with: None for a value it has not been given (as
    typer's own does), typer's own built for any other; None: this typer has none."""
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
    except ImportError:  # a typer that converts with click's types
        return None

    class Deferred(RuntimeParam):
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            built = build_runtime_param(param.type_descriptor)
            param._runtime_param = built
            return built._coerce_value(value, param=param, ctx=ctx)

    return Deferred


def _defer_coercion(params: Sequence[Any]) -> None:
    """Have typer build a parameter's converter when the parameter is given a value.

    typer 0.2x converts each parameter's value with a pydantic ``TypeAdapter`` it builds when
    the parameter is first read, whether given or not: a command with a dozen options not
    given imported pydantic and built a dozen validators (about 20 ms) to return their
    defaults unchanged. A typer without these internals (older, or changed) is left as it
    is."""
    deferred = _deferred()
    if deferred is None:
        return
    for param in params:
        described = getattr(param, "type_descriptor", None)
        if described is None or getattr(param, "_runtime_param", False) is not None:
            continue
        try:
            param._runtime_param = deferred(described.parameter_info, described.annotation)
        except (TypeError, AttributeError):  # internals of another shape: typer's own way
            return
