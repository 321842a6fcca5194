"""``mcs-host run-server LABEL`` (hidden): the process of an MCP server from an installed
distribution, started by a host that mounts it. It checks the server again and runs its
console script from the verified bytes (:mod:`mcs_host.loading.server_process`); stdin and
stdout are the server's, as its script would have them.

On Linux the process is a child subreaper from before the server's code runs
(:func:`~mcs_host.cli.options.config_from_parent`): what the server starts stays below it,
even a daemon that calls ``setsid``, and all of it is ended when the server stops serving
(its stdin closed, an exception, SIGINT), on SIGTERM (its parent's death too) and at exit.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, NoReturn

import typer

from .options import SearchPathOption, config_from_parent


def run_server_command(
    label: Annotated[
        str, typer.Argument(help="The server's label in the configuration.", metavar="LABEL")
    ],
    path: SearchPathOption = None,
) -> None:
    """Run one MCP server for a parent host; the configuration comes from the parent."""
    from mcs_host._descendants import end_descendants
    from mcs_host.bridge.isolation import SERVING
    from mcs_host.loading.records import Refused
    from mcs_host.loading.server_process import verified_server
    from mcs_host.trust.importer import ImportRefusedError, IntegrityError

    settings = config_from_parent("run-server", "a server this way")
    paths = [os.fspath(p) for p in path] if path else None
    try:
        serve = verified_server(settings, label, paths)
    except Refused as refusal:
        _refused(f"{refusal.reason}: {refusal.message}")
    except (IntegrityError, ImportRefusedError) as exc:
        _refused(f"integrity: {exc}")
    sys.stderr.write(SERVING)  # what it says from now on is the server's
    sys.stderr.flush()
    try:
        status = serve()
    finally:  # it has stopped serving: what it started ends with it
        end_descendants()
    raise SystemExit(status)


def _refused(message: str) -> NoReturn:
    """Say on stderr why the server may not start (the parent repeats ``error:`` lines), and
    exit 1."""
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()
    raise SystemExit(1)
