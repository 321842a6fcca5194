"""The ``mcs-host`` command line: the typer application and its commands, one module per
command group (:mod:`.drivers`, :mod:`.trust`, :mod:`.author`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated

import typer

from mcs_host._version import __version__

from . import author, drivers, keys, serve, trust

EXIT_CODES = (
    ("0", "done: everything asked for loaded, verified or ran"),
    (
        "1",
        "a driver or plugin failed or was refused (strict, required, or verify found code "
        "that is not verified), a label does not exist, or a tool call failed",
    ),
    ("2", "a usage or configuration error: nothing was loaded or written"),
)
"""Every command's exit codes; --help and the README's table say the same."""

app = typer.Typer(
    name="mcs-host",
    help="Discover, verify, load and orchestrate MCS drivers.",
    epilog="Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES) + ".",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"mcs-host {__version__}")
        raise typer.Exit


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """Discover, verify, load and orchestrate MCS drivers."""


for _name, _command in (
    ("list", drivers.list_drivers),
    ("verify", drivers.verify_drivers),
    ("load", drivers.load_command),
    ("call", drivers.call_command),
    ("run", drivers.run_command),
    ("serve", serve.serve_command),
    ("lock", trust.lock_drivers),
    ("keygen", keys.keygen),
    ("public-key", keys.public_key),
    ("sign", keys.sign),
    ("sign-registry", keys.sign_registry),
    ("allow", trust.allow_command),
    ("new", author.new_command),
    ("bump", author.bump_command),
    ("check", author.check_command),
):
    app.command(_name)(_command)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``)."""
    app(args=list(sys.argv[1:] if argv is None else argv), prog_name="mcs-host")
