"""``mcs-host init``: the user's configuration and registry, made at the places every command
reads when none is named, so that ``lock`` then ``load`` (or a client's ``serve``) round-trip.

The configuration file lists the drivers installed now as commented ``[drivers.<label>]``
tables (read from metadata; no driver is imported); the registry starts empty. A file that
exists is kept as it is. The directory is made private (0700), as ``lock`` makes it.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from .options import fail

__all__ = ["init_command"]

_HEADER = """\
# mcs-host's configuration for this user: every mcs-host command started without --config
# reads it (a project's mcs-host.toml in the working directory is layered with it). Paths in
# it are relative to this file's directory; "~" is your home. Every key: the configuration
# reference of mcs-host's documentation (docs/reference/configuration.md).

# Which registries say what is trusted. Unset: {registry}
# (mcs-host lock LABEL pins an installed driver in it).
# registries = ["registry.json"]

# Name the drivers to mount, each in a [drivers.<label>] table. Once one is named, only the
# named ones mount (set autoload = true to mount every trusted installed driver as well).
# autoload = false
"""


def init_command(
    force: Annotated[
        bool,
        typer.Option("--force", help="Write the configuration file even if it exists."),
    ] = False,
) -> None:
    """Create your configuration (~/.config/mcs-host/config.toml) and registry
    (~/.config/mcs-host/registry.json), at the places every command reads by default; a file
    that exists is kept."""
    from mcs_host._files import write_atomic
    from mcs_host.loading.config import user_config_path
    from mcs_host.trust.registry import REGISTRY_FORMAT, Registry, user_registry_path

    config = os.environ.get("MCS_HOST_CONFIG") or user_config_path()
    registry = user_registry_path()
    try:
        for path in (config, registry):
            os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        if os.path.exists(registry):
            typer.echo(f"kept {registry} (it exists)")
        else:
            Registry(format=REGISTRY_FORMAT).save(registry)
            typer.echo(f"created {registry}: empty; `mcs-host lock LABEL` pins a driver in it")
        if os.path.exists(config) and not force:
            typer.echo(f"kept {config} (it exists; --force writes it anew)")
        else:
            write_atomic(config, _template(registry))
            typer.echo(f"created {config}: name the drivers to mount in it")
    except OSError as exc:
        fail(f"{exc.filename or config}: {exc.strerror or exc}", code=1)
    typer.echo(
        "next: `mcs-host add NAME` for a driver from your package index (verified, pinned, "
        "installed, its table written), or `mcs-host lock LABEL` for each installed driver you "
        "trust and its table in the configuration; then `mcs-host call TOOL` (or `mcs-host "
        "install CLIENT`)"
    )


def _template(registry: str) -> str:
    """The configuration's text: the header, then each installed driver's table, commented."""
    from mcs_host.discovery import discover

    found = discover()
    tables = []
    for candidate in sorted(found.candidates, key=lambda c: c.label):
        tables.append(
            f"# {candidate.distribution} {candidate.version}, installed now\n"
            f"# [drivers.{candidate.label}]\n"
            "# settings = {}  # its constructor's keyword arguments\n"
        )
    if not tables:
        tables.append("# No driver is installed in this environment yet.\n")
    return _HEADER.format(registry=registry) + "\n" + "\n".join(tables)
