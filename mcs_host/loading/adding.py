"""``mcs-host add``: from a name on the user's package index to a verified, pinned, installed
and configured driver (or MCP server), all or nothing.

:func:`add` runs the stages top to bottom: the wheel is downloaded by the user's own pip and
pinned from its bytes, and its PEP 740 provenance verified by add's rules of identity
(:mod:`.add_sources`); what it needs is resolved by pip, downloaded and verified likewise
(:mod:`.add_closure`); each of them whose version the catalog mcs-host ships pins must be that
pin's files (:mod:`.add_catalog`); the registry with every pin, and the configuration with its table
(:mod:`.config_tables`), are made in memory and checked. Only then does anything change
(:mod:`.add_install`), and a failure there undoes it. No code of what is added runs: pip only
downloads and installs wheels, and the constructor's parameters are read from the entry
point's module with :mod:`ast`. Each stage costs one pip process or one request per
distribution; the first verification imports Sigstore (about half a second).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from pydantic import ValidationError

from mcs_host._files import (
    CONFIG_LIMIT,
    REGISTRY_LIMIT,
    InputError,
    loads_json,
    read_text,
    validation_lines,
)
from mcs_host._reasons import REASONS, Subject
from mcs_host.discovery import normalize_name
from mcs_host.trust import _origins
from mcs_host.trust.attested import attest, refuse_unattested
from mcs_host.trust.catalog import shipped_catalog
from mcs_host.trust.downloading import PipConfig, PipError, pip_config
from mcs_host.trust.registry import (
    REGISTRY_FORMAT,
    MCPServerEntry,
    Registry,
    RegistryError,
    TrustLabel,
    is_envelope,
)
from mcs_host.trust.release import Release, lock

from .add_catalog import described, held
from .add_closure import Closure, closure
from .add_install import Change, apply, writable
from .add_offers import (
    Ships,
    autoload_note,
    config_after,
    drivers_of,
    names,
    server_of,
    tables_for,
)
from .add_records import Added, AddedDistribution, AddError, AddRequest, WrittenTable
from .add_sources import Source, downloaded, target_source
from .config_schema import ConfigError
from .config_tables import parsed

# used by mcs-host add: add
__all__: list[str] = []


def add(request: AddRequest, *, catalog: Registry | None = None) -> Added:
    """Add what ``request`` names (this module's docstring); an :class:`AddError` naming the
    distribution, the step and the fix, with the environment, the registry and the
    configuration as they were.

    ``catalog`` is for tests only (no command sets it): the catalog to hold releases to and
    read declarations from, in place of the one mcs-host ships
    (:func:`~mcs_host.trust.catalog.shipped_catalog`)."""
    catalog = shipped_catalog() if catalog is None else catalog
    registry = _registry(request)
    text = _config_text(request)
    if request.server:  # a server's process speaks MCP through the host's SDK
        _origins.grant_extras(("mcp",))
    with tempfile.TemporaryDirectory(prefix="mcs-host-add-") as temporary:
        work = Path(temporary)
        pip = _pip_config(request)
        wheel, release = downloaded(request.requirement, work / "wheel", request)
        shipped = _held({}, release, catalog)  # before an identity is asked to be confirmed
        ships = (
            server_of(release, wheel, request)
            if request.server
            else drivers_of(release, request, registry, catalog)
        )
        target = target_source(wheel, release, request, registry, pip)
        tables, kept = tables_for(target, ships, request, text, shipped.get(target.name))
        found = closure(target, request, registry, pip, work, ships.undeclared)
        for source in found.sources:
            shipped = _held(shipped, source.release, catalog, found.needed_by.get(source.name))
        for item in found.kept:
            if item.release is not None:
                shipped = _held(shipped, item.release, catalog, item.needed_by, installed=True)
        after, provenance = _pins(registry, target, found, ships, request, shipped)
        change = Change(
            added=release.distribution,
            install=((target,) if found.install_target else ()) + found.sources,
            restore=found.restore,
            registry=after,
            registry_path=request.registry,
            provenance=provenance,
            config_path=request.config,
            config_text=config_after(text, request.config, tables, release),
            python=request.python,
            env=request.env,
        )
        writable(change)
        stored = apply(change)
    written = tuple(WrittenTable(t.name, names(t), True) for t in tables)
    return Added(
        distributions=_report(target, found, shipped),
        registry=request.registry,
        provenance=stored,
        config=request.config,
        tables=written + kept,
        notes=ships.notes + autoload_note(text, request.config, tables) + _unchanged(request, kept),
    )


def _registry(request: AddRequest) -> Registry:
    """The plain registry ``add`` writes (empty when there is none yet: :func:`writable` says
    when it cannot be made)."""
    path = request.registry
    if not os.path.lexists(path):
        return Registry(format=REGISTRY_FORMAT)
    try:
        data = read_text(path, "registry", REGISTRY_LIMIT)
        if is_envelope(data):
            raise AddError(
                request.requirement,
                "registry",
                f"{path} is a signed registry; add writes plain registry files only",
                "name your own registry with --registry FILE",
            )
        loads_json(data, path)
        return Registry.model_validate_json(data)
    except (OSError, InputError) as error:
        said = str(error) if path in str(error) else f"{path}: {error}"
        raise AddError(request.requirement, "registry", said, _RESTORE) from None
    except ValidationError as error:
        said = validation_lines(path, error.errors())
        raise AddError(request.requirement, "registry", said, _RESTORE) from None


_RESTORE = "fix the registry file, or restore it from where it came"


def _config_text(request: AddRequest) -> str:
    """The text of the configuration ``add`` writes ("" when there is none yet)."""
    if not os.path.lexists(request.config):
        return ""
    try:
        text = read_text(request.config, "configuration", CONFIG_LIMIT)
        parsed(text, request.config)
        return text
    except (OSError, InputError, ConfigError) as error:
        raise AddError(
            request.requirement, "configuration", str(error), "fix the configuration file"
        ) from None


def _pip_config(request: AddRequest) -> PipConfig:
    """The indexes the user's pip asks."""
    try:
        return pip_config(request.python, request.env)
    except PipError as error:
        raise AddError(
            request.requirement, "download", str(error), "check your pip (`pip config list`)"
        ) from None


def _held(
    shipped: Mapping[str, TrustLabel],
    release: Release,
    catalog: Registry,
    needed_by: str | None = None,
    installed: bool = False,
) -> dict[str, TrustLabel]:
    """``shipped`` (PEP 503 name -> the trust label of the catalog's pin its files match)
    with ``release``, when the catalog pins its version (:func:`.add_catalog.held`)."""
    label = held(release, catalog, needed_by, installed)
    return {**shipped, release.project: label} if label is not None else dict(shipped)


def _pins(
    registry: Registry,
    target: Source,
    found: Closure,
    ships: Ships,
    request: AddRequest,
    shipped: Mapping[str, TrustLabel],
) -> tuple[Registry, tuple[tuple[str, bytes], ...]]:
    """``registry`` with every pin of what is added (and its provenance, recorded), and the
    provenance files to store; an :class:`AddError` when the registry refuses them. A new
    entry of a release the catalog pins gets the catalog's trust label, and one of a driver
    the catalog declares its notes and what it needs too."""
    main = target.release if ships.script is None else _library(target.release)
    libraries = [s.release for s in found.sources]
    libraries += [k.release for k in found.kept if k.release is not None]
    provenance: list[tuple[str, bytes]] = []
    source = target  # the one a refusal is about
    try:
        after = described(_locked(registry, [main], ships, shipped), ships)
        after = _locked(after, libraries, ships, shipped)
        for source in (target, *found.sources):
            if source.verified is None or source.provenance is None:
                continue
            accept = source.accept if source is target else None
            for entry_id in _entry_ids(after, source, source is target, ships):
                after = attest(
                    after,
                    entry_id,
                    source.release.version,
                    source.verified,
                    source.provenance,
                    accept=accept,
                )
            provenance.append((source.verified.filename, source.provenance))
        source = target
        if ships.script is not None:
            after = _with_server(after, request.label or ships.script, target, ships)
        refuse_unattested(registry, after)
    except RegistryError as error:
        known = REASONS.get(error.reason)
        subject: Subject = "driver" if source is target and ships.script is None else "library"
        fix = known.fix_for(None, source.name, subject) if known else "see the message"
        raise AddError(source.release.distribution, "pin", str(error), fix, error.reason) from None
    except ValueError as error:
        raise AddError(
            source.release.distribution,
            "pin",
            str(error),
            "install it with pip, then pin it by hand (`mcs-host lock LABEL --id LABEL=ID` "
            "for a driver without mcs-driver.json)",
        ) from None
    return after, tuple(provenance)


def _locked(
    registry: Registry,
    releases: Sequence[Release],
    ships: Ships,
    shipped: Mapping[str, TrustLabel],
) -> Registry:
    """``registry`` with pins of ``releases``, each from its own files: a pin of the same
    files made from an installed tree gains the wheel's sha256 (a provenance needs it). A new
    entry gets the trust label ``shipped`` gives its distribution (else ``community``)."""
    for release in releases:
        pin = release.pin()
        entries = [e for e in registry.drivers.values() if e.distribution == release.project]
        library = registry.libraries.get(release.project)
        entries += [library] if library is not None else []  # type: ignore[list-item]
        known = [e.pin_for(release.version) for e in entries]
        again = any(
            p is not None
            and p.digest == pin.digest
            and p.wheel_sha256 is None
            and pin.wheel_sha256 is not None
            for p in known
        )
        trust = shipped.get(release.project, "community")
        registry = lock(
            registry,
            [release],
            declared=ships.declared,
            ids=ships.ids,
            trust=trust,
            replace=again,
        )
    return registry


def _library(release: Release) -> Release:
    """``release`` pinned as a library (an MCP server's distribution)."""
    return replace(release, entry_points=(), groups=(), problems=())


def _entry_ids(registry: Registry, source: Source, target: bool, ships: Ships) -> list[str]:
    """The entries that pin ``source``'s release: the drivers' ids, for the distribution
    added as a driver; else its library's name."""
    project = source.release.project
    if target and ships.script is None:
        labels = {label for label, _ in ships.drivers}
        return [
            i
            for i, e in registry.drivers.items()
            if e.distribution == project and e.label in labels
        ]
    return [project]


def _with_server(registry: Registry, label: str, target: Source, ships: Ships) -> Registry:
    """``registry`` vouching for the MCP server ``label``: the console script of the added
    distribution (each call needing consent); one naming another server is refused."""
    entry = MCPServerEntry(
        distribution=target.release.project,
        script=ships.script if ships.named_script else None,
        consent=True,
    )
    known = registry.mcp_servers.get(label)
    if known is not None and (known.distribution, known.script) != (
        entry.distribution,
        entry.script,
    ):
        raise ValueError(
            f"the registry vouches for another MCP server under the label {label!r}: give this "
            "one another label with --label LABEL"
        )
    servers = {**registry.mcp_servers, label: known or entry}
    return registry.model_copy(update={"mcp_servers": dict(sorted(servers.items()))})


def _report(
    target: Source, found: Closure, shipped: Mapping[str, TrustLabel]
) -> tuple[AddedDistribution, ...]:
    """One row per distribution: the one added, then what it needs."""
    replaced = {normalize_name(r.name): r.version for r in found.restore}

    def row(source: Source, needed_by: str | None, installed: bool) -> AddedDistribution:
        verified = source.verified
        return AddedDistribution(
            source.release.distribution,
            source.release.version,
            "attested" if verified is not None else "no-provenance",
            str(verified.identity) if verified is not None else None,
            verified.log_index if verified is not None else None,
            needed_by,
            source.release.pin().digest,
            installed,
            replaced.get(source.name) if installed else None,
            shipped.get(source.name),
        )

    rows = [row(target, None, found.install_target)]
    rows += [row(s, found.needed_by.get(s.name), True) for s in found.sources]
    rows += [
        AddedDistribution(
            k.name,
            k.version,
            "installed" if k.release is not None else "host",
            None,
            None,
            k.needed_by,
            k.release.pin().digest if k.release is not None else None,
            False,
            shipped=shipped.get(normalize_name(k.name)),
        )
        for k in found.kept
    ]
    return tuple(rows)


def _unchanged(request: AddRequest, kept: Sequence[WrittenTable]) -> tuple[str, ...]:
    """A note when ``--settings`` were given for a table the configuration has already."""
    if not request.settings:
        return ()
    return tuple(
        f"[{t.table}] in {request.config} is kept as it is: --settings did not change it "
        "(edit its settings there)"
        for t in kept
    )
