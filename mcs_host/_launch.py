"""The ``mcs-host`` console script.

``mcs-host list`` with only ``--json`` and ``--path`` is answered here from metadata, without
importing typer or pydantic (together ~70 ms, more than the listing itself); every other
command line, including anything ``list`` would reject, goes to :mod:`mcs_host.cli`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    plain = _plain_list(args)
    if plain is None:
        from .cli import main as cli_main  # noqa: PLC0415 - only when the fast path cannot answer

        cli_main(args)
        return
    from ._listing import render_listing  # noqa: PLC0415 - after the arguments are known
    from .discovery import discover  # noqa: PLC0415

    as_json, paths = plain
    sys.stdout.write(render_listing(discover(paths or None), as_json) + "\n")
    sys.stdout.flush()


def _plain_list(args: list[str]) -> tuple[bool, list[Path]] | None:
    """``(as_json, paths)`` for a ``list`` command line typer would accept as it is, else None."""
    if not args or args[0] != "list":
        return None
    as_json, paths = False, []
    rest = iter(args[1:])
    for arg in rest:
        if arg == "--json":
            as_json = True
        elif arg == "--path":
            value = next(rest, None)
            if value is None or value.startswith("-"):
                return None
            paths.append(Path(value))
        elif arg.startswith("--path="):
            paths.append(Path(arg.removeprefix("--path=")))
        else:
            return None
    if any(os.path.isfile(p) for p in paths):
        return None  # typer's error message names the file
    return as_json, paths
