"""The commands that decide what is trusted: ``lock`` (registry pins) and ``allow`` (approve a
project's configuration)."""

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
from .documents import AllowDocument, LockDocument, schema_urn
from .options import JsonOption, LabelsArgument, SearchPathOption, fail, parse_ids, parse_pairs

if TYPE_CHECKING:
    from mcs_host.trust.registry import TrustLabel
    from mcs_host.trust.release import Release


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
    path: SearchPathOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write registry pins for installed drivers, installed distributions, or wheel files
    into one plain registry file (a signed one is refused).

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
    releases: list[Release]
    try:
        with Progress(not as_json) as progress:
            releases = _releases(labels, wheel, distribution, path, progress, declared)
        updated = lock(
            current,
            releases,
            labels=list(labels or ()),
            ids=parse_ids(ids),
            declared=declared,
            trust=cast("TrustLabel", trust),
            replace=replace,
            publisher_keys=publisher_keys or (),
        )
        if registry is None:  # the user's own place, made private on first use
            os.makedirs(os.path.dirname(target) or ".", mode=0o700, exist_ok=True)
        updated.save(target)
    except (ValueError, OSError, RegistryError) as exc:
        fail(str(exc))
    _report_pins(target, releases, as_json)


def _releases(
    labels: Sequence[str] | None,
    wheels: Sequence[Path] | None,
    distributions: Sequence[str] | None,
    path: Sequence[Path] | None,
    progress: Progress,
    declared: Mapping[str, str] | None = None,
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

    if not (wheels or distributions):
        return release_from_candidates(_installed_drivers(labels, path), progress)
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
        releases += release_from_candidates(_installed_drivers(others, path), progress)
    return releases


def _installed_drivers(
    labels: Sequence[str] | None, path: Sequence[Path] | None
) -> list[Candidate]:
    """The installed drivers and host plugins with ``labels`` (every one without labels);
    a label no installed one has ends the command."""
    found = discover(path)
    plugins = discover(path, group=PLUGIN_GROUP, require_object=False)
    candidates = (*found.candidates, *plugins.candidates)
    wanted = [c for c in candidates if not labels or c.label in labels]
    missing = sorted(set(labels or ()) - {c.label for c in wanted})
    if missing:
        fail(f"no installed driver has the label {', '.join(missing)}")
    return wanted


def _report_pins(target: str, releases: list[Release], as_json: bool) -> None:
    document: LockDocument = {"schema": schema_urn("lock"), "registry": target, "pinned": []}
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
