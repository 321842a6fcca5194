"""The commands that decide what is trusted: ``lock`` (registry pins, of drivers and of the
MCP servers the configuration names) and ``allow`` (approve a project's configuration).

A LABEL means one driver: a host plugin (which runs in every command once pinned) is pinned
only by ``--plugin``, an MCP server only by ``--server``, and a label that names more than one
installed or configured thing is refused with the command that pins each.

What ``lock`` pins from the installed environment, it pins with everything it needs: each
distribution of its dependency closure outside the host's own installation (what a load
would check; :func:`mcs_host.trust.dependencies.dependency_closure`) is pinned as a library
in the same write, so one command vouches for all the code a driver runs.

One module: the command group of the docs; ``lock`` pins drivers, host plugins, libraries and
servers into one registry in one write, each kind by the same options (``--registry``,
``--trust``, ``--replace``).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, cast

import typer

from mcs_host.discovery import (
    ENTRY_POINT_GROUP,
    PLUGIN_GROUP,
    Candidate,
    discover,
    normalize_name,
)

from ._schema import schema_urn
from ._stdout import write_document
from .console import Progress
from .options import (
    HostOptions,
    JsonOption,
    LabelsArgument,
    RegistryToWriteOption,
    fail,
    host_options,
    parse_ids,
    parse_pairs,
)

if TYPE_CHECKING:
    from mcs_host.loading.config_schema import HostConfig, MCPServerSettings
    from mcs_host.trust.registry import (
        DriverEntry,
        MCPServerEntry,
        Registry,
        ReleaseEntry,
        TrustLabel,
    )
    from mcs_host.trust.release import Release

    from .documents import AllowDocument, LockDocument, PinnedServer


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
    registry: RegistryToWriteOption = None,
    ids: Annotated[
        list[str] | None,
        typer.Option(
            "--id",
            help="LABEL=ID for a driver without mcs-driver.json (default: "
            "DISTRIBUTION:driver:LABEL).",
            metavar="LABEL=ID",
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
    build: Annotated[
        bool,
        typer.Option(
            "--build",
            help="Pin files of a version already pinned with another digest as another build "
            "of it (a wheel for another Python or platform), beside its pin.",
        ),
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
    plugin: Annotated[
        list[str] | None,
        typer.Option(
            "--plugin",
            help="Pin the installed host plugin with this label (repeatable): a host plugin "
            "runs in every command once pinned, so a LABEL pins drivers only.",
            metavar="LABEL",
        ),
    ] = None,
    publisher_keys: Annotated[
        list[str] | None,
        typer.Option(
            "--publisher-key",
            help="Trust the drivers' releases this key (from keygen) signs: each release "
            "being locked must carry its signature (mcs-host sign), and is then trusted by it, "
            "not pinned.",
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
    """Write registry pins for installed drivers, the host plugins named by --plugin,
    installed distributions, wheel files, or the MCP servers the configuration names
    (--server) into one plain registry file (a signed one is refused).

    A LABEL names one driver: a label that is also a host plugin's, an MCP server's or
    another distribution's is refused, with the command that pins each. A wheel or
    distribution without drivers (and not named by --declare or --plugin) is pinned as a
    library: a dependency drivers import, verified before they import it. What an installed
    driver, host plugin, distribution or server needs (its dependencies, transitively, but
    the host's own) is pinned with it, as libraries.
    """
    from mcs_host.trust.attested import refuse_unattested
    from mcs_host.trust.registry import RegistryError, user_registry_path
    from mcs_host.trust.release import UnsignedReleaseError, lock

    _check_given(trust, publisher_keys or ())
    target = os.fspath(registry) if registry else user_registry_path()
    current = before = _current(target)
    declared = parse_pairs(declare, "--declare")
    id_pairs = parse_ids(ids)
    settings = options.host_config() if labels else None  # the MCP servers a label may name
    # discovered once, when labels need it; a label a registry declares (no entry point)
    # brings its distribution, object and id from there
    installed = _candidates(options.path) if labels and not wheel else None
    if settings is not None and installed is not None:
        labels = [_mounted_driver(name, settings, installed) for name in labels or ()]
    asked = _Asked(
        tuple(labels or ()),
        tuple(plugin or ()),
        _server_targets(settings, server or ()),
        _again(registry, options, trust, replace, ids, publisher_keys),
    )
    if settings is not None and installed is not None:
        found = _declared(asked.labels, installed, current, settings, declared)
        _refuse_declared(asked, installed, current, settings, found, distribution, options.path)
        declared = {**declared, **{name: e.object or "" for name, (_, e) in found.items()}}
        id_pairs = {**{name: i for name, (i, _) in found.items()}, **id_pairs}
        distribution = [*(distribution or ()), *(e.distribution for _, e in found.values())]
    label = cast("TrustLabel", trust)
    servers: dict[str, MCPServerEntry] = {}
    releases: list[Release] = []
    needed: dict[str, str] = {}  # a library pinned for what needs it -> that distribution
    try:
        with Progress(not as_json) as progress:
            if labels or plugin or wheel or distribution or not server:  # --server alone: no driver
                drivers = _releases(
                    asked, wheel, distribution, options.path, progress, declared, installed
                )
                requires = _undeclared(current, settings)
                releases = [*drivers, *_needed(drivers, options.path, requires, progress, needed)]
                current = lock(
                    current,
                    releases,
                    labels=list(asked.labels),
                    plugins=list(asked.plugins),
                    ids=id_pairs,
                    declared=declared,
                    trust=label,
                    replace=replace,
                    publisher_keys=publisher_keys or (),
                    build=build,
                )
            if server:
                servers, served = _servers(server, options, target, label, not no_consent)
                served += _server_needs(served, options.path, progress, needed, releases)
                releases += served
                current = lock(current, served, trust=label, replace=replace, build=build)
                current = _with_servers(current, servers, target, replace, no_consent)
        if registry is None:  # the user's own place, made private on first use
            os.makedirs(os.path.dirname(target) or ".", mode=0o700, exist_ok=True)
        refuse_unattested(before, current)  # a release without its publisher's provenance
        current.save(target)
    except UnsignedReleaseError as exc:
        plain = _again(registry, options, trust, replace, ids, ())
        fail(
            f"{exc}; nothing was written. A publisher key is trusted only for a release it "
            "signed (`mcs-host sign`): check the key with its publisher, or, if you checked "
            f"the installed release, pin it by its files instead: `mcs-host lock "
            f"{_q(exc.label)}{plain}`"
        )
    except (ValueError, OSError, RegistryError) as exc:
        fail(str(exc))
    written = {name: current.mcp_servers[name] for name in servers}
    signed = _signed(releases, current, publisher_keys or ())
    _report_pins(target, releases, as_json, written, current, needed=needed, signed=signed)


def _check_given(trust: str, publisher_keys: Sequence[str]) -> None:
    """End the command when ``--trust`` or a ``--publisher-key`` is not one."""
    from mcs_host.trust.signatures import PublicKey

    if trust not in ("verified", "reference", "community"):
        raise typer.BadParameter(
            f"{trust!r} is not verified, reference or community", param_hint="--trust"
        )
    for key in publisher_keys:
        try:
            PublicKey.parse(key)
        except ValueError as exc:
            hint = _key_file_hint(key)
            raise typer.BadParameter(f"{exc}{hint}", param_hint="--publisher-key") from None


def _key_file_hint(key: str) -> str:
    """For a ``--publisher-key`` that names a file rather than giving a key: how to give
    the key it holds (its text), or that it holds none (a private key never goes there)."""
    if key.startswith("ed25519:") or not os.path.isfile(key):
        return ""
    from mcs_host.trust.signatures import PublicKey

    try:
        with open(key, "rb") as f:
            PublicKey.parse(f.read(4096).decode("utf-8", "replace").strip())
    except (OSError, ValueError):
        return (
            f"; {key} is a file that holds no public key: give the key itself, ed25519:... as "
            "mcs-host keygen or public-key prints it"
        )
    return f'; {key} is a file: give the key it holds, --publisher-key "$(cat {shlex.quote(key)})"'


def _mounted_driver(label: str, settings: HostConfig, installed: _Installed) -> str:
    """The driver ``label`` names: itself, or, when nothing installed has that label, the
    driver its configuration table mounts under it (``[drivers.stats] driver = "acme_stats"``),
    so a fix line that names the mount's label pins what the mount runs."""
    if any(c.label == label for c in (*installed.drivers, *installed.plugins)):
        return label
    table = settings.drivers.get(label)
    return table.driver if table is not None and table.driver else label


def _current(target: str) -> Registry:
    """The plain registry in ``target`` (empty when there is none); a signed one, or one
    that is not a registry, ends the command."""
    from pydantic import ValidationError

    from mcs_host._files import REGISTRY_LIMIT, InputError, loads_json, read_text, validation_lines
    from mcs_host.trust.registry import REGISTRY_FORMAT, Registry, is_envelope

    try:
        text = read_text(target, "registry", REGISTRY_LIMIT)
        if is_envelope(text):
            fail(f"{target} is a signed registry; lock writes plain registry files only")
        loads_json(text, target)  # its nesting is bounded before the model parses it
        return Registry.model_validate_json(text)
    except FileNotFoundError:
        return Registry(format=REGISTRY_FORMAT)
    except InputError as exc:
        fail(str(exc))
    except ValidationError as exc:
        fail(validation_lines(target, exc.errors()))


@dataclass(frozen=True, slots=True)
class _Asked:
    """What ``lock`` was asked to pin by label, and how a fix line repeats the command."""

    labels: tuple[str, ...]
    """The drivers' labels (LABEL...)."""
    plugins: tuple[str, ...]
    """The host plugins' labels (--plugin)."""
    servers: Mapping[str, str]
    """Label -> what the configuration's ``[mcp_servers.<label>]`` names, for the servers
    --server does not name: a LABEL that is also one of theirs is refused."""
    again: str
    """The options a fix line keeps so it writes where this command would (``--registry``,
    ``--config``, ``--path``, ...), each word quoted for the shell, each after a space."""


@dataclass(frozen=True, slots=True)
class _Installed:
    """The installed drivers and host plugins (metadata only, nothing imported)."""

    drivers: tuple[Candidate, ...]
    plugins: tuple[Candidate, ...]


def _releases(
    asked: _Asked,
    wheels: Sequence[Path] | None,
    distributions: Sequence[str] | None,
    path: Sequence[Path] | None,
    progress: Progress,
    declared: Mapping[str, str] | None = None,
    installed: _Installed | None = None,
) -> list[Release]:
    """The releases ``lock`` pins: the wheels and distributions named, and the installed
    drivers with the labels and host plugins with the --plugin labels that none of them
    ships (with none of these: every installed driver). Each host plugin left unpinned is
    noted on stderr."""
    from mcs_host.discovery import installed_distribution
    from mcs_host.trust.release import (
        release_from_candidates,
        release_from_installed,
        release_from_wheel,
    )

    if installed is None:
        installed = _candidates(path)
    named: list[Path | str] = [*(wheels or ()), *(distributions or ())]
    if not (asked.labels or asked.plugins or named):  # every installed driver
        for plugin in installed.plugins:
            _note_plugin(plugin.label, plugin.distribution, plugin.version, asked)
        return release_from_candidates(installed.drivers, progress)
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
    drivers = {label for r in releases for label, _ in r.points(ENTRY_POINT_GROUP)}
    drivers |= set(declared or {})
    plugins = {label for r in releases for label, _ in r.points(PLUGIN_GROUP)}
    others = [label for label in asked.labels if label not in drivers]
    chosen = _installed_drivers(others, installed, asked)
    chosen += _installed_plugins([n for n in asked.plugins if n not in plugins], installed, asked)
    if chosen:
        releases += release_from_candidates(chosen, progress)
    _note_plugins(releases, asked)
    return releases


def _undeclared(current: Registry, settings: HostConfig | None) -> dict[str, tuple[str, ...]]:
    """Distribution -> what a registry says its drivers need without declaring it
    (``requires``): the registry being written's, and the configuration's when it was read."""
    entries = _registry_entries(current, settings) if settings is not None else current.drivers
    found: dict[str, tuple[str, ...]] = {}
    for entry in entries.values():
        found[entry.distribution] = (*found.get(entry.distribution, ()), *entry.requires)
    return found


def _needed(
    releases: Sequence[Release],
    path: Sequence[Path] | None,
    requires: Mapping[str, Sequence[str]],
    progress: Progress,
    needed: dict[str, str],
    done: Iterable[str] = (),
) -> list[Release]:
    """What the installed ``releases`` need as installed, transitively (each one's dependency
    closure, with the ``requires`` a registry adds, outside the host's own installation and
    ``done``): a release of each, to pin as a library. ``needed`` is told, for each, the
    distribution that needs it. What is not installed, or is an editable install, cannot be
    pinned: it is noted on stderr."""
    from dataclasses import replace as replaced

    from mcs_host.discovery import installed_distribution
    from mcs_host.trust.dependencies import Needed, dependency_closure
    from mcs_host.trust.digest import editable_source
    from mcs_host.trust.release import release_from_installed

    search = [os.fspath(p) for p in path] if path else sys.path
    have = {r.project for r in releases} | set(done)
    wanted: dict[str, Needed] = {}
    for release in releases:
        if release.wheel_sha256 is not None:
            continue  # a wheel file: what it needs is not installed from it
        found = installed_distribution(release.project, search)
        if found is None:
            continue
        closure = dependency_closure(
            release.distribution, found[2], search, requires.get(release.project, ())
        )
        for need in closure:
            if need.distribution not in have:
                wanted.setdefault(need.distribution, need)
    libraries = []
    for count, need in enumerate(wanted.values()):
        if need.found is None:
            typer.echo(
                f"note: {need.required_by} needs {need.distribution}, which is not installed: "
                f"it will not load until you install it (`pip install {_q(need.distribution)}`) "
                "and run this again",
                err=True,
            )
            continue
        name, version, metadata_path, _ = need.found
        editable = editable_source(metadata_path)
        if editable is not None:
            typer.echo(
                f"note: {name} {version}, which {need.required_by} needs, is an editable "
                f"install of {editable}: not pinned (no pin can vouch for a working tree)",
                err=True,
            )
            continue
        progress(count, len(wanted), f"hashing {name} {version}")
        release = release_from_installed(metadata_path, name, version)
        libraries.append(replaced(release, entry_points=(), groups=(), problems=()))
        needed[release.project] = need.required_by
    return libraries


def _server_needs(
    served: Sequence[Release],
    path: Sequence[Path] | None,
    progress: Progress,
    needed: dict[str, str],
    done: Sequence[Release],
) -> list[Release]:
    """What the MCP servers' distributions ``served`` need, as :func:`_needed` finds it (but
    what ``done`` pins already), with the ``mcp`` extra's requirements the host's: a
    server's process speaks MCP through the host's SDK."""
    from mcs_host.trust import _origins

    _origins.grant_extras(("mcp",))
    return _needed(served, path, {}, progress, needed, {r.project for r in done})


def _declared(
    labels: Sequence[str],
    installed: _Installed,
    current: Registry,
    settings: HostConfig,
    declared: Mapping[str, str],
) -> dict[str, tuple[str, DriverEntry]]:
    """The labels no installed distribution ships as a driver's entry point that a registry
    declares (the one being written, or one the configuration reads): the declaring entry
    of each, with its id. The reference drivers ship no entry points; their labels exist
    only so."""
    shipped = {c.label for c in installed.drivers}
    wanted = [name for name in labels if name not in shipped and name not in declared]
    if not wanted:
        return {}
    entries = _registry_entries(current, settings)
    found = {}
    for name in wanted:
        matches = [(i, e) for i, e in entries.items() if _declares(e, name)]
        if len(matches) == 1:
            found[name] = matches[0]
    return found


def _refuse_declared(
    asked: _Asked,
    installed: _Installed,
    current: Registry,
    settings: HostConfig,
    found: Mapping[str, tuple[str, DriverEntry]],
    distributions: Sequence[str] | None,
    path: Sequence[Path] | None,
) -> None:
    """End the command when a label a registry declares (``found``) names more than that
    driver (unless ``distributions`` says which it means), or an installed entry point's
    label is declared for another installed distribution too."""
    named = {normalize_name(d) for d in distributions or ()}
    for name, (_, e) in found.items():
        if e.distribution not in named:  # else the command line says which it means
            _refuse_shared(name, [_declared_claim(name, e, asked)], installed, asked)
    for name, entries in _declared_beside(asked.labels, installed, current, settings, path).items():
        shipping = [c for c in installed.drivers if c.label == name]
        each = [what for what, _ in (_driver_claim(name, c, asked) for c in shipping)]
        each += [what for what, _ in (_declared_claim(name, e, asked) for e in entries)]
        fail(
            f"the label {name!r} names {len(each)} drivers, so nothing was pinned: "
            f"{'; '.join(each)}. A load finds them all and runs none (label-conflict): "
            "uninstall the distribution you do not want (`pip uninstall NAME`), then run "
            "this again"
        )


def _declared_beside(
    labels: Sequence[str],
    installed: _Installed,
    current: Registry,
    settings: HostConfig,
    path: Sequence[Path] | None,
) -> dict[str, list[DriverEntry]]:
    """For each of ``labels`` an installed entry point ships, the entries a registry
    declares under that label for another installed distribution: a load would find both
    and run neither, so the label means two things."""
    from mcs_host.discovery import installed_distribution

    shipped: dict[str, set[str]] = {}
    for candidate in installed.drivers:
        if candidate.label in labels:
            shipped.setdefault(candidate.label, set()).add(candidate.project)
    if not shipped:
        return {}
    search = [os.fspath(p) for p in path] if path else sys.path
    beside: dict[str, list[DriverEntry]] = {}
    for entry in _registry_entries(current, settings).values():
        owners = shipped.get(entry.label)
        if owners is None or not _declares(entry, entry.label) or entry.distribution in owners:
            continue
        if installed_distribution(entry.distribution, search) is not None:
            beside.setdefault(entry.label, []).append(entry)
    return beside


def _registry_entries(current: Registry, settings: HostConfig) -> dict[str, DriverEntry]:
    """The driver entries of the registry being written, over those of the registries the
    configuration reads (which are not needed to pin: one that cannot be read is left out)."""
    from mcs_host.loading.config_schema import ConfigError

    entries: dict[str, DriverEntry] = dict(current.drivers)
    try:
        index, _, _ = settings.trust_index()
    except (ConfigError, ValueError, OSError):
        return entries
    return {**index.entries, **entries}


def _declares(entry: DriverEntry, label: str) -> bool:
    """Whether ``entry`` declares a driver (an object in the drivers' group) labelled ``label``."""
    return entry.label == label and bool(entry.object) and entry.group == ENTRY_POINT_GROUP


def _candidates(path: Sequence[Path] | None) -> _Installed:
    """The installed drivers and host plugins (metadata only, nothing imported)."""
    plugins = discover(path, group=PLUGIN_GROUP, require_object=False)
    return _Installed(discover(path).candidates, plugins.candidates)


def _installed_drivers(
    labels: Sequence[str], installed: _Installed, asked: _Asked
) -> list[Candidate]:
    """The installed driver with each of ``labels``. A label nothing installed or configured
    has, or one that names more than one driver, host plugin or MCP server, ends the
    command."""
    named = {c.label for c in (*installed.drivers, *installed.plugins)} | set(asked.servers)
    missing = [name for name in labels if name not in named]
    if missing:
        have = ", ".join(sorted({c.label for c in installed.drivers})) or "none"
        fail(
            f"no installed driver has the label {', '.join(missing)} (installed: {have}), and "
            "no registry this reads declares it (a driver with no entry point: name the "
            "registry that does with --config, its registries, or write into it with --registry)"
        )
    chosen = []
    for name in labels:
        drivers = [c for c in installed.drivers if c.label == name]
        claims = [_driver_claim(name, c, asked) for c in drivers]
        _refuse_shared(name, claims, installed, asked)
        chosen += drivers
    return chosen


def _installed_plugins(
    labels: Sequence[str], installed: _Installed, asked: _Asked
) -> list[Candidate]:
    """The installed host plugin with each of ``labels`` (--plugin); a label no host plugin
    has, or that several distributions' host plugins have, ends the command."""
    chosen = []
    for name in labels:
        plugins = [c for c in installed.plugins if c.label == name]
        if not plugins:
            have = ", ".join(sorted({c.label for c in installed.plugins})) or "none"
            fail(f"no installed host plugin has the label {name} (installed: {have})")
        if len(plugins) > 1:
            _refuse([_plugin_claim(name, c, asked, True) for c in plugins], name)
        chosen += plugins
    return chosen


_Claim = tuple[str, str]
"""What a label names (``the driver of X 1.0 (mcs.drivers)``), and the command that pins it."""


def _driver_claim(label: str, driver: Candidate, asked: _Asked) -> _Claim:
    return (
        f"the driver of {driver.distribution} {driver.version} ({ENTRY_POINT_GROUP})",
        f"mcs-host lock {_q(label)} --distribution {_q(driver.project)}{asked.again}",
    )


def _declared_claim(label: str, entry: DriverEntry, asked: _Asked) -> _Claim:
    return (
        f"the driver a registry declares for {entry.distribution} ({entry.object})",
        f"mcs-host lock {_q(label)} --distribution {_q(entry.distribution)}{asked.again}",
    )


def _plugin_claim(label: str, plugin: Candidate, asked: _Asked, several: bool) -> _Claim:
    which = f" --distribution {_q(plugin.project)}" if several else ""
    return (
        f"the host plugin of {plugin.distribution} {plugin.version} ({PLUGIN_GROUP})",
        f"mcs-host lock --plugin {_q(label)}{which}{asked.again}",
    )


def _refuse_shared(
    label: str, drivers: Sequence[_Claim], installed: _Installed, asked: _Asked
) -> None:
    """End the command unless ``label`` names exactly the one driver of ``drivers``: each
    host plugin and MCP server with the label makes it name more (unless --plugin or
    --server names it too: the command line then says which is which)."""
    plugins = [c for c in installed.plugins if c.label == label and label not in asked.plugins]
    claims = [*drivers, *(_plugin_claim(label, c, asked, len(plugins) > 1) for c in plugins)]
    if label in asked.servers:
        claims.append(
            (
                f"the MCP server [mcp_servers.{label}] of the configuration "
                f"({asked.servers[label]})",
                f"mcs-host lock --server {_q(label)}{asked.again}",
            )
        )
    if len(claims) > 1 or not drivers:
        _refuse(claims, label)


def _refuse(claims: Sequence[_Claim], label: str) -> NoReturn:
    """End the command: ``label`` names each of ``claims`` but not one driver alone; say
    what each is and the command that pins it."""
    each = "; ".join(f"{what}, pinned by `{command}`" for what, command in claims)
    why = "A LABEL pins one driver; only --plugin pins a host plugin (it runs in every command)"
    if len(claims) == 1:
        fail(f"no installed driver has the label {label!r}: it is {each}. {why}")
    fail(f"the label {label!r} names {len(claims)} things, so nothing was pinned: {each}. {why}")


def _note_plugins(releases: Sequence[Release], asked: _Asked) -> None:
    """Say on stderr which host plugins the ``releases`` ship that ``lock`` leaves unpinned
    (only --plugin pins one), and the command that pins each."""
    for release in releases:
        for label, _ in release.points(PLUGIN_GROUP):
            if label not in asked.plugins:
                _note_plugin(label, release.distribution, release.version, asked)


def _note_plugin(label: str, distribution: str, version: str, asked: _Asked) -> None:
    """Say on stderr that the host plugin ``label`` of ``distribution`` is not pinned, and
    the command that pins it."""
    typer.echo(
        f"note: {distribution} {version} ships the host plugin {label}, not pinned (a host "
        f"plugin runs in every command once pinned): `mcs-host lock --plugin {_q(label)} "
        f"--distribution {_q(normalize_name(distribution))}{asked.again}` pins it",
        err=True,
    )


def _server_targets(settings: HostConfig | None, named: Sequence[str]) -> dict[str, str]:
    """Label -> what each ``[mcp_servers.<label>]`` of ``settings`` names, as shown, but
    those --server ``named``."""
    if settings is None:
        return {}
    found = settings.mcp_servers.items()
    return {label: _named(server) for label, server in found if label not in named}


def _named(server: MCPServerSettings) -> str:
    """What a configured MCP server names: its URL, command line or distribution."""
    if server.url is not None:
        return server.url
    if server.command is not None:
        return " ".join(server.argv)
    return server.distribution or "what a registry describes under its label"


def _again(
    registry: Path | None,
    options: HostOptions,
    trust: str,
    replace: bool,
    ids: Sequence[str] | None,
    publisher_keys: Sequence[str] | None,
) -> str:
    """The options of this command line a fix line repeats, so it pins into the same file
    from the same configuration and search path, as this one would."""
    words = ["--registry", os.fspath(registry)] if registry is not None else []
    words += ["--config", os.fspath(options.config)] if options.config is not None else []
    for directory in options.path or ():
        words += ["--path", os.fspath(directory)]
    words += ["--trust", trust] if trust != "community" else []
    words += ["--replace"] if replace else []
    for item in ids or ():
        words += ["--id", item]
    for key in publisher_keys or ():
        words += ["--publisher-key", key]
    return "".join(f" {shlex.quote(word)}" for word in words)


def _q(word: str) -> str:
    """``word`` quoted for the shell, as a command a message names needs it."""
    return shlex.quote(word)


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
        releases.append(replaced(release, entry_points=(), groups=()))  # its files: a library
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
    registry: Registry | None = None,
    *,
    needed: Mapping[str, str] | None = None,
    signed: Mapping[str, tuple[str, ...]] | None = None,
) -> None:
    """Say what was pinned into ``target`` (with the publisher whose provenance each pin of
    ``registry``, as written, carries): each release, the distribution that ``needed`` it
    when its dependencies brought it in, and the keys that ``signed`` it when it is trusted
    by their signature instead of a pin."""
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
                "provenance": _attested_by(registry, release, pin.digest),
                "needed_by": (needed or {}).get(release.project),
                "signed_by": list((signed or {}).get(release.project, ())),
            }
        )
    if as_json:
        write_document(json.dumps(document, indent=2))
        return
    for row in document["pinned"]:
        how = "trusted" if row["signed_by"] else "pinned"
        typer.echo(
            f"{how} {row['distribution']} {row['version']}: {row['digest']} "
            f"({row['files']} files, {row['bytes']} bytes)"
            + (f", attested by {row['provenance']}" if row.get("provenance") else "")
            + (f", needed by {row['needed_by']}" if row["needed_by"] else "")
            + (f", signed by {', '.join(row['signed_by'])} (no pin)" if row["signed_by"] else "")
        )
    for pinned in rows:
        consent = "each call needs consent" if pinned["consent"] else "calls need no consent"
        typer.echo(
            f"pinned MCP server {pinned['label']}: {pinned['target']} ({pinned['trust']}, "
            f"{consent})"
        )
    typer.echo(f"wrote {target}")


def _signed(
    releases: Sequence[Release], written: Registry, keys: Sequence[str]
) -> dict[str, tuple[str, ...]]:
    """Distribution -> the ids of ``keys``, for each of ``releases`` that ``written`` trusts
    by their signature (``lock`` checked it) rather than by a pin of its version."""
    from mcs_host.trust.signatures import PublicKey

    if not keys:
        return {}
    ids = tuple(dict.fromkeys(PublicKey.parse(key).keyid for key in keys))
    found = {}
    for release in releases:
        entries = [e for e in written.drivers.values() if e.distribution == release.project]
        if entries and all(e.pin_for(release.version) is None for e in entries):
            found[release.project] = ids
    return found


def _attested_by(registry: Registry | None, release: Release, digest: str) -> str | None:
    """The publisher whose provenance the pin of ``release`` (with ``digest``) in
    ``registry`` carries, or ``None``."""
    if registry is None:
        return None
    library = registry.libraries.get(release.project)
    entries: list[ReleaseEntry] = [library] if library is not None else []
    entries += [e for e in registry.drivers.values() if e.distribution == release.project]
    for entry in entries:
        pin = entry.pin_for(release.version)
        if pin is not None and pin.digest == digest and pin.provenance is not None:
            return str(pin.provenance.publisher)
    return None


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
    reported). The approval covers every file in the directory the configuration names too
    (registries, prompts, token file, what driver settings and server commands name), and
    lapses when any of them changes. Files outside the directory are not covered.
    """
    from mcs_host.loading.config_project import approve_directory, revoke_directory
    from mcs_host.loading.config_schema import ConfigError

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
    for name, state in approved.items():  # the project files first
        typer.echo(f"  {name} ({_approved_state(state)})")


def _approved_state(state: str) -> str:
    """What an approval recorded of a file, as ``allow`` shows it."""
    shown = {
        "absent": "absent: should it appear, the approval lapses",
        "directory": "a directory: the files in it are not covered",
        "special": "not a regular file",
        "unreadable": "unreadable",
    }
    if state.startswith("outside:"):
        return f"leads outside the directory, to {state.removeprefix('outside:')}: not covered"
    return shown.get(state, f"sha256 {state[:16]}...")
