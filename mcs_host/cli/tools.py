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
from .options import (
    AllowExtensionsOption,
    AllowUnverifiedOption,
    ConfigOption,
    IsolateOption,
    JsonOption,
    LabelsArgument,
    RegistryKeyOption,
    RegistryOption,
    SearchPathOption,
    SetOption,
    StrictOption,
    ThresholdOption,
    config_from_options,
)

if TYPE_CHECKING:
    from .documents import ToolsDocument

__all__ = ["tools_command"]


def tools_command(
    labels: LabelsArgument = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    registry: RegistryOption = None,
    registry_key: RegistryKeyOption = None,
    threshold: ThresholdOption = None,
    allow_unverified: AllowUnverifiedOption = None,
    allow_extensions: AllowExtensionsOption = None,
    strict: StrictOption = None,
    sets: SetOption = None,
    path: SearchPathOption = None,
    isolate: IsolateOption = None,
) -> None:
    """List the tools the drivers mount, with their signatures (with --json, their JSON
    schemas too), as call and serve name them.

    Exits 1 as load does when anything asked for did not mount.
    """
    from .drivers import loaded_or_exit

    settings = config_from_options(
        config,
        registry,
        registry_key,
        threshold,
        allow_unverified,
        allow_extensions,
        strict=strict,
        sets=sets,
        path=path,
        isolate=isolate,
    )
    loaded, report = loaded_or_exit(settings, path, labels or ())
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
