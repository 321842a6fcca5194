"""The commands that decide what is trusted: ``lock`` (registry pins, of drivers and of the
MCP servers the configuration names) and ``allow`` (approve a project's configuration).

One module: the command group of the docs; ``lock`` pins drivers, libraries and servers into
one registry in one write, each kind by the same options (``--registry``, ``--trust``,
``--replace``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from mcs_host.discovery import PLUGIN_GROUP, Candidate, discover

from ._stdout import write_document
from .console import Progress
from .documents import AllowDocument, LockDocument, PinnedServer, schema_urn
from .options import (
    HostOptions,
    JsonOption,
    LabelsArgument,
    fail,
    host_options,
    parse_ids,
    parse_pairs,
)

if TYPE_CHECKING:
    from mcs_host.loading.config import HostConfig, MCPServerSettings
    from mcs_host.trust.registry import DriverEntry, MCPServerEntry, Registry, TrustLabel
    from mcs_host.trust.release import Release


@host_options("config", "path")
def lock_drivers(
    labels: LabelsArgument = None,
    wheel: Annotated[
        list[Path] | None,
        typer.Option(
            "--wheel",
            help="Pin this wheel file instead of installed drivers (repeatable).",
            exists=True,
            dir_okay=False,
            metavar="WHEEL",
        ),
    ] = None,
    registry: Annotated[
        Path | None,
        typer.Option(
            "--registry",
            help="The registry file to write (default: the one a load reads when none is "
            "named: the first of $MCS_HOST_REGISTRY, else ~/.config/mcs-host/registry.json).",
            metavar="FILE",
            dir_okay=False,
        ),
    ] = None,
    ids: Annotated[
        list[str] | None,
        typer.Option(
            "--id", help="LABEL=ID for a driver without mcs-driver.json.", metavar="LABEL=ID"
        ),
    ] = None,
    trust: Annotated[
        str,
        typer.Option(
            "--trust",
            help="Trust label for new entries: verified, reference, community.",
            metavar="TRUST",
        ),
    ] = "community",
    replace: Annotated[
        bool, typer.Option("--replace", help="Re-pin a version already pinned with another digest.")
    ] = False,
    declare: Annotated[
        list[str] | None,
        typer.Option(
            "--declare",
            help="LABEL=module:object: a driver of a distribution that ships no entry point.",
            metavar="LABEL=OBJECT",
        ),
    ] = None,
    distribution: Annotated[
        list[str] | None,
        typer.Option(
            "--distribution",
            help="Pin this installed distribution (a library, or one --declare names).",
            metavar="NAME",
        ),
    ] = None,
    publisher_keys: Annotated[
        list[str] | None,
        typer.Option(
            "--publisher-key",
            help="Trust this key (from keygen) to sign the drivers' later releases.",
            metavar="KEY",
        ),
    ] = None,
    server: Annotated[
        list[str] | None,
        typer.Option(
            "--server",
            help="Pin the MCP server the configuration names under LABEL, as it names it: its "
            "URL, its command and args, or its distribution (whose installed files are "
            "pinned in libraries) (repeatable).",
            metavar="LABEL",
        ),
    ] = None,
    no_consent: Annotated[
        bool,
        typer.Option(
            "--no-consent",
            help="With --server: calls to the server need no consent plugin's approval "
            "(default: each call does).",
        ),
    ] = False,
    *,
    options: HostOptions,
    as_json: JsonOption = False,
) -> None:
    """Write registry pins for installed drivers, installed distributions, wheel files, or
    the MCP servers the configuration names (--server) into one plain registry file (a
    signed one is refused).

    A wheel or distribution without drivers (and not named by --declare) is pinned as a
    library: a dependency drivers import, verified before they import it.
    """
    from mcs_host.trust.registry import (
        REGISTRY_FORMAT,
        Registry,
        RegistryError,
        is_envelope,
        user_registry_path,
    )
    from mcs_host.trust.release import lock

    if trust not in ("verified", "reference", "community"):
        raise typer.BadParameter(
            f"{trust!r} is not verified, reference or community", param_hint="--trust"
        )
    target = os.fspath(registry) if registry else user_registry_path()
    from pydantic import ValidationError

    from mcs_host._files import REGISTRY_LIMIT, InputError, loads_json, read_text, validation_lines

    try:
        text = read_text(target, "registry", REGISTRY_LIMIT)
        if is_envelope(text):
            fail(f"{target} is a signed registry; lock writes plain registry files only")
        loads_json(text, target)  # its nesting is bounded before the model parses it
        current = Registry.model_validate_json(text)
    except FileNotFoundError:
        current = Registry(format=REGISTRY_FORMAT)
    except InputError as exc:
        fail(str(exc))
    except ValidationError as exc:
        fail(validation_lines(target, exc.errors()))
    declared = parse_pairs(declare, "--declare")
    id_pairs = parse_ids(ids)
    # discovered once, when labels need it; a label a registry declares (no entry point)
    # brings its distribution, object and id from there
    installed = _candidates(options.path) if labels and not wheel else None
    if labels and installed is not None:
        found = _declared(labels, installed, current, options, declared)
        declared = {**declared, **{name: e.object or "" for name, (_, e) in found.items()}}
        id_pairs = {**{name: i for name, (i, _) in found.items()}, **id_pairs}
        distribution = [*(distribution or ()), *(e.distribution for _, e in found.values())]
    label = cast("TrustLabel", trust)
    servers: dict[str, MCPServerEntry] = {}
    releases: list[Release] = []
    try:
        if server:
            servers, served = _servers(server, options, target, label, not no_consent)
            releases += served
            current = lock(current, served, trust=label, replace=replace)
            current = _with_servers(current, servers, target, replace, no_consent)
        with Progress(not as_json) as progress:
            if labels or wheel or distribution or not server:  # --server alone pins no driver
                drivers = _releases(
                    labels, wheel, distribution, options.path, progress, declared, installed
                )
                releases = [*drivers, *releases]
                current = lock(
                    current,
                    drivers,
                    labels=list(labels or ()),
                    ids=id_pairs,
                    declared=declared,
                    trust=label,
                    replace=replace,
                    publisher_keys=publisher_keys or (),
                )
        if registry is None:  # the user's own place, made private on first use
            os.makedirs(os.path.dirname(target) or ".", mode=0o700, exist_ok=True)
        current.save(target)
    except (ValueError, OSError, RegistryError) as exc:
        fail(str(exc))
    written = {name: current.mcp_servers[name] for name in servers}
    _report_pins(target, releases, as_json, written)


def _releases(
    labels: Sequence[str] | None,
    wheels: Sequence[Path] | None,
    distributions: Sequence[str] | None,
    path: Sequence[Path] | None,
    progress: Progress,
    declared: Mapping[str, str] | None = None,
    installed: tuple[Candidate, ...] | None = None,
) -> list[Release]:
    """The releases ``lock`` pins: the wheels and distributions named, and the installed
    drivers and host plugins with the ``labels`` that none of them ships (without wheels or
    distributions: every installed one, or only ``labels``)."""
    from mcs_host.discovery import installed_distribution
    from mcs_host.trust.release import (
        release_from_candidates,
        release_from_installed,
        release_from_wheel,
    )

    if installed is None:
        installed = _candidates(path)
    if not (wheels or distributions):
        return release_from_candidates(_installed_drivers(labels, installed), progress)
    named: list[Path | str] = [*(wheels or ()), *(distributions or ())]
    releases = []
    search = [os.fspath(p) for p in path] if path else sys.path
    for done, item in enumerate(named):
        progress(done, len(named), f"hashing {item}")
        if isinstance(item, Path):
            releases.append(release_from_wheel(item))
            continue
        found_dist = installed_distribution(item, search)
        if found_dist is None:
            fail(f"{item} is not installed")
        dist_name, version, metadata_path, _ = found_dist
        releases.append(release_from_installed(metadata_path, dist_name, version))
    shipped = {label for r in releases for label, _ in r.entry_points} | set(declared or {})
    others = [label for label in labels or () if label not in shipped]
    if others:
        releases += release_from_candidates(_installed_drivers(others, installed), progress)
    return releases


def _declared(
    labels: Sequence[str],
    installed: Sequence[Candidate],
    current: Registry,
    options: HostOptions,
    declared: Mapping[str, str],
) -> dict[str, tuple[str, DriverEntry]]:
    """The labels no installed distribution ships as an entry point that a registry declares
    (the one being written, or one the configuration reads): the declaring entry of each,
    with its id. The reference drivers ship no entry points; their labels exist only so."""
    from mcs_host.loading.config import ConfigError

    shipped = {c.label for c in installed}
    wanted = [name for name in labels if name not in shipped and name not in declared]
    if not wanted:
        return {}
    entries: dict[str, DriverEntry] = dict(current.drivers)
    try:
        settings = options.host_config()
        index, _, _ = settings.trust_index()
    except (ConfigError, ValueError, OSError):
        index = None  # the configuration's registries are not needed to pin: the target's
    if index is not None:
        entries = {**index.entries, **entries}
    found = {}
    for name in wanted:
        matches = [(i, e) for i, e in entries.items() if e.label == name and e.object]
        if len(matches) == 1:
            found[name] = matches[0]
    return found


def _candidates(path: Sequence[Path] | None) -> tuple[Candidate, ...]:
    """The installed drivers and host plugins (metadata only, nothing imported)."""
    found = discover(path)
    plugins = discover(path, group=PLUGIN_GROUP, require_object=False)
    return (*found.candidates, *plugins.candidates)


def _installed_drivers(
    labels: Sequence[str] | None, candidates: Sequence[Candidate]
) -> list[Candidate]:
    """The installed drivers and host plugins with ``labels`` among ``candidates`` (every
    one without labels); a label no installed one has ends the command."""
    wanted = [c for c in candidates if not labels or c.label in labels]
    missing = sorted(set(labels or ()) - {c.label for c in wanted})
    if missing:
        have = ", ".join(sorted({c.label for c in candidates})) or "none"
        fail(
            f"no installed driver has the label {', '.join(missing)} (installed: {have}), and "
            "no registry this reads declares it (a driver with no entry point: name the "
            "registry that does with --config, its registries, or write into it with --registry)"
        )
    return wanted


def _servers(
    labels: Sequence[str],
    options: HostOptions,
    target: str,
    trust: TrustLabel,
    consent: bool,
) -> tuple[dict[str, MCPServerEntry], list[Release]]:
    """The registry entry of each MCP server the configuration names under ``labels``,
    saying exactly what the configuration says, and the releases of those that are
    installed distributions (pinned as libraries)."""
    from dataclasses import replace as replaced

    from mcs_host.discovery import installed_distribution, normalize_name
    from mcs_host.trust.registry import MCPServerEntry
    from mcs_host.trust.release import release_from_installed

    settings = options.host_config()
    _note_unread(settings, target)
    search = [os.fspath(p) for p in options.path] if options.path else sys.path
    entries: dict[str, MCPServerEntry] = {}
    releases: list[Release] = []
    for label in labels:
        named = _configured(settings, label)
        entry = MCPServerEntry(
            url=named.url,
            command=named.command,
            args=named.args if named.command is not None else (),
            distribution=normalize_name(named.distribution) if named.distribution else None,
            script=named.script if named.distribution else None,
            consent=consent,
            trust=trust,
        )
        entries[label] = entry
        if entry.distribution is None:
            continue
        found = installed_distribution(entry.distribution, search)
        if found is None:
            fail(
                f"[mcp_servers.{label}] names the distribution {named.distribution!r}, which "
                "is not installed: install it, then pin it"
            )
        name, version, metadata_path, _ = found
        release = release_from_installed(metadata_path, name, version)
        releases.append(replaced(release, entry_points=()))  # a server's files: a library
    return entries, releases


def _configured(settings: HostConfig, label: str) -> MCPServerSettings:
    """The server ``[mcp_servers.<label>]`` of ``settings``; one that is missing or names
    nothing to pin ends the command."""
    named = settings.mcp_servers.get(label)
    where = settings.source or "no configuration file was found"
    if named is None:
        fail(
            f"the configuration ({where}) has no MCP server {label!r}: add an "
            f"[mcp_servers.{label}] table with a url, a command or a distribution, then pin it"
        )
    if (named.url, named.command, named.distribution) == (None, None, None):
        fail(
            f"[mcp_servers.{label}] in {where} names no url, command or distribution (it "
            "mounts what a registry describes under its label): there is nothing to pin"
        )
    return named


def _note_unread(settings: HostConfig, target: str) -> None:
    """Say on stderr when a load under ``settings`` would not read the registry ``target``."""
    from mcs_host.trust.registry import user_registry_path

    read = settings.registries if settings.registries is not None else (user_registry_path(),)
    if os.path.realpath(target) not in {os.path.realpath(p) for p in read}:
        typer.echo(
            f"note: a load with this configuration reads {', '.join(read) or 'no registry'}, "
            f"not {target}: pin into one of those (--registry FILE), or add it to the "
            "configuration's registries",
            err=True,
        )


def _with_servers(
    current: Registry,
    servers: Mapping[str, MCPServerEntry],
    target: str,
    replace: bool,
    no_consent: bool,
) -> Registry:
    """``current`` with the ``servers`` pinned. An entry for the label that names another
    server is refused unless ``replace``; one that names the same keeps its trust label,
    description and consent (which --no-consent waives)."""
    merged = dict(current.mcp_servers)
    for label, entry in servers.items():
        known = merged.get(label)
        if known is None or replace:
            merged[label] = entry
            continue
        if _names(known) != _names(entry):
            fail(
                f"{target} already pins the MCP server {label!r} as {_shown(known)!r}, and "
                f"the configuration names {_shown(entry)!r}: pass --replace to pin this one "
                "instead"
            )
        consent = known.consent and not no_consent
        merged[label] = known.model_copy(update={"consent": consent})
    return current.model_copy(update={"mcp_servers": dict(sorted(merged.items()))})


def _names(entry: MCPServerEntry) -> tuple[object, ...]:
    """What ``entry`` starts or reaches: its URL, command line, or distribution and script."""
    return entry.url, entry.argv if entry.command else None, entry.distribution, entry.script


def _shown(entry: MCPServerEntry) -> str:
    """What ``entry`` starts or reaches, as the host shows it."""
    if entry.url is not None:
        return entry.url
    if entry.command is not None:
        return " ".join(entry.argv)
    return f"{entry.distribution}:{entry.script}" if entry.script else str(entry.distribution)


def _report_pins(
    target: str,
    releases: list[Release],
    as_json: bool,
    servers: Mapping[str, MCPServerEntry] | None = None,
) -> None:
    rows: list[PinnedServer] = [
        {"label": label, "target": _shown(e), "consent": e.consent, "trust": e.trust}
        for label, e in (servers or {}).items()
    ]
    document: LockDocument = {
        "schema": schema_urn("lock"),
        "registry": target,
        "pinned": [],
        "servers": rows,
    }
    for release in releases:
        pin = release.pin()
        document["pinned"].append(
            {
                "distribution": release.distribution,
                "version": release.version,
                "digest": pin.digest,
                "files": pin.files,
                "bytes": pin.bytes,
            }
        )
    if as_json:
        write_document(json.dumps(document, indent=2))
        return
    for row in document["pinned"]:
        typer.echo(
            f"pinned {row['distribution']} {row['version']}: {row['digest']} "
            f"({row['files']} files, {row['bytes']} bytes)"
        )
    for pinned in rows:
        consent = "each call needs consent" if pinned["consent"] else "calls need no consent"
        typer.echo(
            f"pinned MCP server {pinned['label']}: {pinned['target']} ({pinned['trust']}, "
            f"{consent})"
        )
    typer.echo(f"wrote {target}")


def allow_command(
    directory: Annotated[
        Path,
        typer.Argument(
            help="The project directory whose configuration to approve.",
            file_okay=False,
            metavar="DIR",
        ),
    ] = Path("."),
    revoke: Annotated[
        bool, typer.Option("--revoke", help="Withdraw the directory's approval instead.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Approve a directory's mcs-host.toml / [tool.mcs-host], as they are now, so every
    setting in them is used (like direnv's allow).

    Without approval, a configuration found in the working directory sets only what cannot
    make the host run, reach or tell the model more (the rest is ignored, and the ignoring
    reported). An approval lapses when the files change.
    """
    from mcs_host.loading.config import ConfigError, approve_directory, revoke_directory

    real = os.path.realpath(directory)
    done = True
    try:
        if revoke:
            done = revoke_directory(directory)
            approved: dict[str, str] = {}
        else:
            approved = approve_directory(directory)
    except ConfigError as exc:
        fail(str(exc))
    if as_json:
        document: AllowDocument = {
            "schema": schema_urn("allow"),
            "directory": real,
            "approved": not revoke,
            "changed": done,
            "files": dict(sorted(approved.items())),
        }
        write_document(json.dumps(document, indent=2))
        return
    if revoke:
        typer.echo(f"revoked {real}" if done else f"{real} was not approved")
        return
    typer.echo(f"approved {real}:")
    for name, sha256 in sorted(approved.items()):
        typer.echo(f"  {name} (sha256 {sha256[:16]}...)")
