"""``mcs-host tools``: the tools a load mounts, as signatures a person reads
(``read_csv_head(file: str, rows: int = 5)``) or, with ``--json``, with
their schemas."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer

from ._schema import schema_urn
from ._signatures import signature
from ._stdout import write_document
from .options import LOAD_OPTIONS, HostOptions, JsonOption, LabelsArgument, host_options

if TYPE_CHECKING:
    from .documents import ToolsDocument

__all__ = ["tools_command"]


@host_options(*LOAD_OPTIONS)
def tools_command(
    labels: LabelsArgument = None,
    as_json: JsonOption = False,
    *,
    options: HostOptions,
) -> None:
    """List the tools the drivers mount, with their signatures (with --json, their JSON
    schemas too), as call and serve name them.

    Exits 1 as load does when anything asked for did not mount.
    """
    from .drivers import loaded_or_exit

    settings = options.host_config()
    again = options.lock_again(settings)
    loaded, report = loaded_or_exit(settings, options.path, labels or (), again=again)
    stack = loaded.driver
    rows = []
    for tool in stack.list_tools():
        label, own = stack.route(tool.name)
        rows.append((label, own, tool))
    if as_json:
        document: ToolsDocument = {
            "schema": schema_urn("tools"),
            "ok": report.ok,
            "tools": [
                {
                    "name": tool.name,
                    "label": label,
                    "tool": own,
                    "description": tool.description,
                    "signature": signature(tool),
                    "input_schema": tool.input_schema(),
                    "annotations": tool.annotations.claimed if tool.annotations else {},
                }
                for label, own, tool in rows
            ],
        }
        write_document(json.dumps(document, indent=2))
    else:
        current = None
        for label, _, tool in rows:
            if label != current:
                typer.echo(f"{label}:")
                current = label
            typer.echo(f"  {signature(tool)}")
            summary = (tool.description or "").strip().splitlines()
            if summary:
                typer.echo(f"      {summary[0]}")
    loaded.close()
    if not report.ok:
        raise typer.Exit(1)
