"""What a distribution ``mcs-host add`` adds offers, and the configuration tables that name it.

:func:`drivers_of` finds the drivers a wheel ships (its entry points, else the drivers a
registry declares for it, else those the catalog mcs-host ships declares, as it declares the
reference drivers), :func:`server_of` the console
script an MCP server distribution serves; :func:`tables_for` makes the ``[drivers.<label>]``
or ``[mcp_servers.<label>]`` tables, offering a driver's constructor parameters read from the
checked wheel's module source (never imported), and refuses a label the configuration gives
to something else; :func:`config_after` adds them to the configuration's text.
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcs_host.discovery import (
    ENTRY_POINT_GROUP,
    LABEL_RULE,
    PLUGIN_GROUP,
    is_valid_label,
    normalize_name,
    parse_entry_points,
)
from mcs_host.trust.modules import resolve_module
from mcs_host.trust.registry import DriverEntry, Registry
from mcs_host.trust.release import Release

from .add_records import AddError, AddRequest, WrittenTable
from .add_sources import Source
from .config_schema import ConfigError
from .config_tables import (
    Table,
    constructor_parameters,
    driver_table,
    imported_from,
    parsed,
    server_table,
)
from .config_tables import with_tables as _with_tables

# used by mcs-host add: Ships, config_after, drivers_of, how, server_of, tables_for,
# autoload_note
__all__: list[str] = []


@dataclass(frozen=True, slots=True)
class Ships:
    """What the distribution added offers: its drivers, or the console script it serves."""

    drivers: tuple[tuple[str, str], ...]
    """``(label, module:object)`` of each driver (entry points, or what a registry declares)."""
    declared: Mapping[str, str]
    """Label -> ``module:object`` of the drivers a registry declares (no entry point)."""
    ids: Mapping[str, str]
    """Label -> the driver id the declaring registry gives."""
    undeclared: tuple[str, ...]
    """What a registry says its drivers need without declaring it."""
    script: str | None = None
    """The console script, for an MCP server."""
    named_script: bool = False
    """Whether the table names the script (the distribution has several)."""
    notes: tuple[str, ...] = ()
    shipped: Mapping[str, DriverEntry] = field(default_factory=dict)
    """Label -> the catalog's entry, for each driver the catalog mcs-host ships declares (its
    trust label, notes and what it needs go into the entry ``add`` writes)."""


def drivers_of(
    release: Release, request: AddRequest, registry: Registry, catalog: Registry
) -> Ships:
    """The drivers ``release`` ships, or those a registry declares for it (the user's, and
    those the configuration reads), else those ``catalog`` declares; refused when it has
    none."""
    name, project = release.distribution, release.project
    drivers = list(release.points(ENTRY_POINT_GROUP))
    entries = _of(project, {**request.declared, **registry.drivers})
    from_catalog = not entries
    entries = entries or _of(project, catalog.drivers)
    declared: dict[str, str] = {}
    ids: dict[str, str] = {}
    shipped: dict[str, DriverEntry] = {}
    undeclared = [r for e in entries.values() for r in e.requires]
    if not drivers:
        listed = {e.path for e in release.scan.digest.entries} if release.scan.digest else set()
        for driver_id, entry in entries.items():
            if entry.group != ENTRY_POINT_GROUP:
                continue
            if not entry.object or resolve_module(entry.object.partition(":")[0], listed)[1]:
                continue
            drivers.append((entry.label, entry.object))
            declared[entry.label], ids[entry.label] = entry.object, driver_id
            if from_catalog:
                shipped[entry.label] = entry
    if not drivers:
        raise AddError(
            name,
            "pin",
            f"{name} {release.version} ships no driver (no entry point in {ENTRY_POINT_GROUP}), "
            "and neither a registry this reads nor the catalog mcs-host ships declares one for "
            "it",
            f"a library a driver needs is added with that driver (or pinned once installed: "
            f"`mcs-host lock --distribution {project}`); an MCP server: `mcs-host add --server "
            f"{project}`",
        )
    if len(drivers) > 1 and (request.label is not None or request.settings):
        shown = ", ".join(label for label, _ in drivers)
        raise AddError(
            name,
            "configuration",
            f"{name} ships {len(drivers)} drivers ({shown}); --label and --settings name one",
            "add it without --label and --settings, then set each table's settings",
        )
    notes = tuple(
        f"{name} ships the host plugin {label}, not pinned (it would run in every command): "
        f"`mcs-host lock --plugin {label} --distribution {project}` pins it"
        for label, _ in release.points(PLUGIN_GROUP)
    )
    return Ships(tuple(drivers), declared, ids, tuple(undeclared), notes=notes, shipped=shipped)


def _of(project: str, entries: Mapping[str, DriverEntry]) -> dict[str, DriverEntry]:
    """The entries (by id) of ``entries`` that declare a driver of ``project``."""
    return {i: e for i, e in entries.items() if e.distribution == project}


def server_of(release: Release, wheel: Path, request: AddRequest) -> Ships:
    """The console script ``release`` serves as an MCP server (``--label`` chooses among
    several); refused when it has none."""
    name = release.distribution
    with zipfile.ZipFile(wheel) as archive:
        found = [
            n
            for n in archive.namelist()
            if n.count("/") == 1 and n.endswith(".dist-info/entry_points.txt")
        ]
        text = archive.read(found[0]).decode("utf-8", "replace") if found else ""
    scripts = dict(parse_entry_points(text, "console_scripts")[0])
    if len(scripts) == 1:
        return Ships((), {}, {}, (), next(iter(scripts)))
    if request.label in scripts:
        return Ships((), {}, {}, (), request.label, named_script=True)
    if not scripts:
        raise AddError(
            name,
            "configuration",
            f"{name} {release.version} ships no console script to run as an MCP server",
            "add a distribution whose console script serves MCP (or a driver, without --server)",
        )
    raise AddError(
        name,
        "configuration",
        f"{name} {release.version} ships {len(scripts)} console scripts "
        f"({', '.join(sorted(scripts))}): which one serves MCP?",
        "name it with --label SCRIPT",
    )


def tables_for(
    target: Source, ships: Ships, request: AddRequest, text: str, shipped: str | None = None
) -> tuple[list[Table], tuple[WrittenTable, ...]]:
    """The tables to write, and those the configuration has already (kept); an
    :class:`AddError` when a label is taken by something else. ``shipped``: the trust label
    of the catalog's pin the release matches, said in the tables' comment."""
    settings = parsed(text, request.config)
    drivers, servers = settings.get("drivers", {}), settings.get("mcp_servers", {})
    release = target.release
    said = how(target, shipped)
    comment = (f"{release.distribution} {release.version}, added by mcs-host add ({said})",)
    tables: list[Table] = []
    kept: list[WrittenTable] = []
    wanted: list[tuple[str, str | None, str]] = [
        (request.label or label, label, value) for label, value in ships.drivers
    ]
    if ships.script is not None:
        wanted = [(request.label or ships.script, None, ships.script)]
    for label, driver, value in wanted:
        kind, other = ("drivers", servers) if driver is not None else ("mcp_servers", drivers)
        mine = drivers if driver is not None else servers
        if not is_valid_label(label):
            raise AddError(
                release.distribution,
                "configuration",
                f"{label!r} cannot label a table: a label is {LABEL_RULE}",
                "give one with --label LABEL",
            )
        existing = mine.get(label)
        names = driver if driver is not None else release.project
        if label in other or (existing is not None and _named(existing, label, kind) != names):
            taken = other.get(label) or existing
            raise AddError(
                release.distribution,
                "configuration",
                f"{request.config} has a table labelled {label} already, for something else "
                f"({taken})",
                "give this one another label with --label LABEL",
            )
        if existing is not None:
            kept.append(WrittenTable(f"{kind}.{label}", names, False))
        elif driver is not None:
            parameters = _parameters(target, value)
            tables.append(driver_table(label, driver, request.settings, parameters, comment))
        else:
            script = ships.script if ships.named_script else None
            tables.append(server_table(label, release.project, script, comment))
    return tables, tuple(kept)


def _named(table: object, label: str, kind: str) -> str | None:
    """What a configured table names: the driver it mounts, or the server's distribution."""
    if not isinstance(table, dict):
        return None
    if kind == "drivers":
        return str(table.get("driver") or label)
    distribution = table.get("distribution")
    return normalize_name(distribution) if isinstance(distribution, str) else None


_REEXPORTS = 4
"""How many ``from MODULE import NAME`` re-exports :func:`_parameters` follows to the class."""


def _parameters(target: Source, value: str) -> Sequence[Any] | None:
    """The keyword parameters of the driver ``value``'s constructor, read from the checked
    wheel's module source (following the imports by which a module of the wheel re-exports
    the class, as ``mcs.driver.csv`` does ``CsvToolDriver`` from ``.tooldriver``); ``None``
    when they cannot be read."""
    module, _, attribute = value.partition(":")
    module, name = module.strip(), attribute.strip().split(".")[0]
    digest = target.release.scan.digest
    listed = {e.path for e in digest.entries} if digest is not None else set()
    for _ in range(_REEXPORTS + 1):
        files, problem = resolve_module(module, listed)
        if problem is not None or not files or not files[-1].endswith(".py"):
            return None
        try:
            with zipfile.ZipFile(target.wheel) as archive:
                source = archive.read(files[-1])
        except (KeyError, OSError, zipfile.BadZipFile):
            return None
        found = constructor_parameters(source, name)
        origin = imported_from(source, name) if found is None else None
        if origin is None:
            return found
        module = _absolute(origin[0], module, files[-1].endswith("/__init__.py"))
        name = origin[1]
    return None


def _absolute(imported: str, importer: str, package: bool) -> str:
    """The module ``imported`` names (``..sub``: relative) when ``importer`` imports it
    (``package``: ``importer`` is a package's ``__init__``)."""
    dots = len(imported) - len(imported.lstrip("."))
    if not dots:
        return imported
    parts = importer.split(".") if package else importer.split(".")[:-1]
    base = parts[: len(parts) - (dots - 1)] if dots - 1 <= len(parts) else []
    return ".".join([*base, imported[dots:]] if imported[dots:] else base)


def config_after(text: str, path: str, tables: Sequence[Table], release: Release) -> str:
    """The configuration's text with ``tables``; an :class:`AddError` when they cannot be
    added to it as text."""
    try:
        return _with_tables(text, path, tables) if tables else text
    except ConfigError as error:
        raise AddError(
            release.distribution, "configuration", str(error), "fix the configuration file"
        ) from None


def names(table: Table) -> str:
    """What a written table names: the driver, or the server's distribution."""
    return str(table.values.get("driver") or table.values.get("distribution") or table.label)


def how(source: Source, shipped: str | None = None) -> str:
    """How ``source`` was verified, in a few words (``shipped``: the trust label of the pin
    mcs-host ships that its files match)."""
    matches = f"matches the pin mcs-host ships ({shipped})" if shipped is not None else None
    if source.verified is None:
        return matches or "no provenance: pinned from the downloaded wheel"
    attested = f"attested by {source.verified.identity}"
    return f"{attested}, {matches}" if matches else attested


def autoload_note(text: str, path: str, tables: Sequence[Table]) -> tuple[str, ...]:
    """A note when the first driver table turns autoload off (a file naming drivers mounts
    only those)."""
    before = parsed(text, path)
    named = before.get("drivers") or {}
    enabled = [t for t in named.values() if not (isinstance(t, dict) and t.get("enabled") is False)]
    if "autoload" in before or enabled or not any(t.kind == "drivers" for t in tables):
        return ()
    return (
        f"{path} names drivers now, so only those it names mount (set autoload = true in it "
        "to mount every trusted installed driver as well)",
    )
