"""``mcs-host add``: a driver (or an MCP server) from the user's package index, verified from
its publisher, pinned, installed and configured in one command.

The command reads its options, asks on the terminal when an identity needs confirming, and
says what was done; :mod:`mcs_host.loading.adding` does it (all or nothing).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ._schema import schema_urn
from ._stdout import write_document
from .options import (
    HostOptions,
    JsonOption,
    RegistryToWriteOption,
    fail,
    host_options,
    settings_from,
)

if TYPE_CHECKING:
    from mcs_host.loading.add_records import Added, AddedDistribution, AddError, Confirmation
    from mcs_host.trust.registry import DriverEntry

    from .documents import AddDocument

__all__ = ["add_command"]


@host_options("config")
def add_command(
    requirement: Annotated[
        str,
        typer.Argument(
            help="The distribution on your package index: NAME, or NAME==VERSION.",
            metavar="NAME",
            show_default=False,
        ),
    ],
    publisher: Annotated[
        str | None,
        typer.Option(
            "--publisher",
            help="The Trusted Publisher its PEP 740 provenance must prove: "
            "github:OWNER/REPO[:WORKFLOW][@ENVIRONMENT] or "
            "gitlab:NAMESPACE/PROJECT[:WORKFLOW_FILEPATH][@ENVIRONMENT]. Without it: the "
            "publisher the registry records for it, else the one its provenance proves, "
            "confirmed by you.",
            metavar="IDENTITY",
        ),
    ] = None,
    label: Annotated[
        str | None,
        typer.Option(
            "--label",
            help="The configuration table's label (default: the driver's, or the server's "
            "console script); with --server and several console scripts, the one to run.",
            metavar="LABEL",
        ),
    ] = None,
    settings: Annotated[
        list[str] | None,
        typer.Option(
            "--settings",
            help="A constructor setting KEY=VALUE for the table (VALUE is JSON, else a "
            "string; repeatable). Without it, the table lists the constructor's keyword "
            "arguments, commented.",
            metavar="KEY=VALUE",
        ),
    ] = None,
    server: Annotated[
        bool,
        typer.Option(
            "--server",
            help="Add an MCP server distribution (its console script) as an "
            "[mcp_servers.LABEL] table, rather than a driver.",
        ),
    ] = False,
    provenance: Annotated[
        Path | None,
        typer.Option(
            "--provenance",
            help="Verify with this PEP 740 provenance file instead of the one the index serves.",
            metavar="FILE",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Confirm the publisher identity the provenance proves without asking (for "
            "scripts): the first one for the distribution, or, with --publisher, a new one.",
        ),
    ] = False,
    registry: RegistryToWriteOption = None,
    *,
    options: HostOptions,
    as_json: JsonOption = False,
) -> None:
    """Download a driver from your package index with your pip, verify it is what its
    publisher released (its PEP 740 provenance), install it and what it needs, pin them all,
    and add its [drivers.LABEL] table to your configuration.

    Each distribution it needs that mcs-host's own installation does not provide is verified
    too: by its provenance where the index has one, else pinned from the downloaded wheel's
    bytes. Nothing of it runs while it is added. When any step fails, the environment, the
    registry and the configuration are left as they were.
    """
    from mcs_host.loading.add_records import AddError, AddRequest
    from mcs_host.loading.adding import add
    from mcs_host.loading.config import user_config_path
    from mcs_host.trust.publishers import PublisherIdentity
    from mcs_host.trust.registry import user_registry_path

    identity = None
    if publisher is not None:
        try:
            identity = PublisherIdentity.parse(publisher)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--publisher") from None
    given = settings_from(settings, "KEY=VALUE", "--settings") if settings else None
    if server and given:
        raise typer.BadParameter(
            "an MCP server takes no constructor settings: set its args or env in its "
            "[mcp_servers] table",
            param_hint="--settings",
        )
    config = options.config or os.environ.get("MCS_HOST_CONFIG") or user_config_path()
    interactive = sys.stdin.isatty() and sys.stderr.isatty()
    declared, read = _declared(options, os.fspath(config))
    request = AddRequest(
        requirement=requirement,
        registry=os.fspath(registry) if registry else user_registry_path(),
        config=os.fspath(config),
        publisher=identity,
        label=label,
        settings=given,
        server=server,
        provenance=provenance,
        yes=yes,
        ask=_ask if interactive else None,
        declared=declared,
    )
    try:
        added = add(request)
    except AddError as exc:
        fail(_refusal(exc))
    _report(added, as_json)
    if os.path.realpath(request.registry) not in {os.path.realpath(p) for p in read}:
        typer.echo(
            f"note: a load with {request.config} reads {', '.join(read) or 'no registry'}, not "
            f"{request.registry}: add it to the configuration's registries",
            err=True,
        )


def _declared(options: HostOptions, config: str) -> tuple[dict[str, DriverEntry], list[str]]:
    """The driver entries of the registries the configuration reads, as a load reads them (a
    registry that is missing, such as the one add is about to create, or cannot be read is
    left out: none is needed to add), and the registries a load would read once add wrote."""
    from mcs_host.trust.registry import RegistrySource, load_index, user_registry_path
    from mcs_host.trust.signatures import PublicKey

    if options.config is not None and not os.path.exists(config):
        return {}, [user_registry_path()]  # a configuration add is about to create
    settings = options.host_config()
    read = list(settings.registries) if settings.registries is not None else []
    if settings.registries is None:
        named = os.environ.get("MCS_HOST_REGISTRY", "").split(os.pathsep)
        read = [p for p in named if p] or [user_registry_path()]
    keys = tuple(PublicKey.parse(key) for key in settings.registry_keys)
    sources = [
        RegistrySource(p, keys, settings.registry_threshold, settings.approved_digests.get(p))
        for p in read
        if os.path.isfile(p)
    ]
    index, _ = load_index(sources)
    return dict(index.entries), read


def _ask(confirmation: Confirmation) -> bool:
    """Ask on the terminal whether to trust the identity ``confirmation`` shows."""
    what = f"{confirmation.distribution} {confirmation.version}"
    if confirmation.recorded is None:
        typer.echo(
            f"{what} was published by {confirmation.proven}, as its PEP 740 provenance proves.",
            err=True,
        )
        question = (
            f"Trust {confirmation.proven} as the publisher of {confirmation.distribution} "
            "(later versions must come from it)?"
        )
    else:
        typer.echo(
            f"{what} is attested by {confirmation.proven}, and the registry records "
            f"{confirmation.recorded} as its publisher.",
            err=True,
        )
        question = f"Accept {confirmation.proven} as its publisher from now on?"
    return typer.confirm(question, default=False, err=True)


def _refusal(error: AddError) -> str:
    """``error`` as ``add``'s message: the distribution, the step, what was (not) changed,
    and the fix."""
    state = (
        "undone: " + "; ".join(error.undone) if error.undone else "nothing was installed or written"
    )
    return f"{error.distribution}: {error.step}: {error} ({state})\n  fix: {error.fix}"


_HOW = {
    "no-provenance": "no provenance: pinned from the downloaded wheel",
    "installed": "installed already: pinned as installed",
    "host": "provided by mcs-host",
}


def _line(row: AddedDistribution) -> str:
    """How one distribution was verified, and what happened to it, as one line."""
    name = f"{row.distribution} {row.version}"
    if row.needed_by is not None:
        name += f" (needed by {row.needed_by})"
    if row.how == "attested":
        how = f"attested by {row.publisher} (log index {row.log_index})"
    elif row.shipped is not None:  # what matches a pin mcs-host ships was not pinned on trust
        how = "installed already: " if row.how == "installed" else ""
    else:
        how = _HOW[row.how]
    if row.shipped is not None:
        how += f"{', ' if row.how == 'attested' else ''}matches the pin mcs-host ships "
        how += f"({row.shipped})"
    if row.replaced is not None:
        how += f", installed in place of {row.replaced}"
    elif row.installed:
        how += ", installed"
    elif row.needed_by is None:
        how += ", installed already (the same files)"
    return f"{name}: {how}"


def _report(added: Added, as_json: bool) -> None:
    """Say what was verified, installed and written."""
    document: AddDocument = {
        "schema": schema_urn("add"),
        "registry": added.registry,
        "provenance": list(added.provenance),
        "config": added.config,
        "distributions": [
            {
                "distribution": row.distribution,
                "version": row.version,
                "verified": row.how,
                "publisher": row.publisher,
                "log_index": row.log_index,
                "needed_by": row.needed_by,
                "digest": row.digest,
                "installed": row.installed,
                "replaced": row.replaced,
                "shipped": row.shipped,
            }
            for row in added.distributions
        ],
        "tables": [
            {"table": t.table, "names": t.names, "written": t.written} for t in added.tables
        ],
        "notes": list(added.notes),
    }
    if as_json:
        write_document(json.dumps(document, indent=2))
        return
    for row in added.distributions:
        typer.echo(_line(row))
    stored = len(added.provenance)
    beside = f" (and {stored} provenance file{'s' if stored != 1 else ''} beside it)"
    typer.echo(f"wrote {added.registry}{beside if stored else ''}")
    for table in added.tables:
        if table.written:
            typer.echo(f"wrote [{table.table}] in {added.config}")
        else:
            typer.echo(f"kept [{table.table}] in {added.config} (it names {table.names} already)")
    for note in added.notes:
        typer.echo(f"note: {note}", err=True)
