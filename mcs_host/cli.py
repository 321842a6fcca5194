"""The ``mcs-host`` command line."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from . import __version__
from .discovery import Candidate, Discovery, discover

app = typer.Typer(
    name="mcs-host",
    help="Discover, verify, load and orchestrate MCS drivers.",
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


@app.command("list")
def list_drivers(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    path: Annotated[
        list[Path] | None,
        typer.Option(
            "--path",
            help="Search this directory instead of sys.path (repeatable).",
            metavar="DIR",
            file_okay=False,
        ),
    ] = None,
) -> None:
    """List the installed drivers from their metadata, without importing any of them."""
    found = discover(path)
    if as_json:
        typer.echo(json.dumps(_discovery_json(found), indent=2))
    else:
        typer.echo(_discovery_text(found))


def _discovery_json(found: Discovery) -> dict[str, Any]:
    return {
        "group": found.group,
        "path": list(found.path),
        "drivers": [_candidate_json(found, c) for c in found.candidates],
        "problems": [
            {
                "code": p.code,
                "message": p.message,
                "labels": list(p.labels),
                "distributions": list(p.distributions),
            }
            for p in found.problems
        ],
    }


def _candidate_json(found: Discovery, candidate: Candidate) -> dict[str, Any]:
    return {
        "label": candidate.label,
        "distribution": candidate.distribution,
        "version": candidate.version,
        "entry_point": candidate.value,
        "location": candidate.location,
        "metadata_path": candidate.metadata_path,
        "problems": [p.code for p in found.problems_for(candidate)],
    }


def _discovery_text(found: Discovery) -> str:
    if not found.candidates:
        lines = [
            f"No drivers in entry point group {found.group!r} "
            f"({len(found.path)} search path entries)."
        ]
    else:
        rows = [
            [
                c.label,
                c.distribution,
                c.version,
                c.value,
                ", ".join(p.code for p in found.problems_for(c)) or "ok",
            ]
            for c in found.candidates
        ]
        lines = _table(["LABEL", "DISTRIBUTION", "VERSION", "ENTRY POINT", "STATUS"], rows)
        noun = "driver" if len(found.candidates) == 1 else "drivers"
        lines.append("")
        lines.append(f"{len(found.candidates)} {noun}, {len(found.problems)} problems.")
    for problem in found.problems:
        lines.append(f"  {problem.code}: {problem.message}")
    return "\n".join(lines)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in (headers, *rows)) for i in range(len(headers))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (headers, *rows)
    ]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``)."""
    app(args=list(sys.argv[1:] if argv is None else argv), prog_name="mcs-host")
