"""The commands that manage trust: ``lock`` (registry pins), ``keygen``, ``sign``,
``sign-registry`` and ``allow`` (approve a project's configuration)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from mcs_host.discovery import PLUGIN_GROUP, discover

from .options import LabelsArgument, SearchPathOption, fail, parse_ids, parse_pairs

if TYPE_CHECKING:
    from mcs_host.trust.registry import TrustLabel


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
            help="The registry file to write (default: the first default one, "
            "else ./registry.json).",
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
) -> None:
    """Write registry pins for installed drivers, installed distributions, or wheel files.

    A wheel or distribution without drivers (and not named by --declare) is pinned as a
    library: a dependency drivers import, verified before they import it.
    """
    from mcs_host.discovery import installed_distribution
    from mcs_host.trust.registry import (
        REGISTRY_FORMAT,
        Registry,
        RegistryError,
        default_registry_paths,
        is_envelope,
    )
    from mcs_host.trust.release import (
        Release,
        lock,
        release_from_candidates,
        release_from_installed,
        release_from_wheel,
    )

    if trust not in ("verified", "reference", "community"):
        raise typer.BadParameter(
            f"{trust!r} is not verified, reference or community", param_hint="--trust"
        )
    target = (
        os.fspath(registry) if registry else next(iter(default_registry_paths()), "registry.json")
    )
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
        if wheel or distribution:
            releases = [release_from_wheel(w) for w in wheel or ()]
            search = [os.fspath(p) for p in path] if path else sys.path
            for name in distribution or ():
                found_dist = installed_distribution(name, search)
                if found_dist is None:
                    fail(f"{name} is not installed")
                dist_name, version, metadata_path, _ = found_dist
                releases.append(release_from_installed(metadata_path, dist_name, version))
        else:
            found = discover(path)
            plugins = discover(path, group=PLUGIN_GROUP, require_object=False)
            candidates = (*found.candidates, *plugins.candidates)
            wanted = [c for c in candidates if not labels or c.label in labels]
            missing = sorted(set(labels or ()) - {c.label for c in wanted})
            if missing:
                fail(f"no installed driver has the label {', '.join(missing)}")
            releases = release_from_candidates(wanted)
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
        updated.save(target)
    except (ValueError, OSError, RegistryError) as exc:
        fail(str(exc))
    for release in releases:
        pin = release.pin()
        typer.echo(
            f"pinned {release.distribution} {release.version}: {pin.digest} "
            f"({pin.files} files, {pin.bytes} bytes)"
        )
    typer.echo(f"wrote {target}")


def keygen(
    key_file: Annotated[
        Path,
        typer.Argument(
            help="Where to write the private key (mode 0600).", dir_okay=False, metavar="KEYFILE"
        ),
    ],
) -> None:
    """Create an ed25519 signing key; prints the public key to put in a registry."""
    from mcs_host.trust.signatures import PrivateKey

    key = PrivateKey.generate()
    try:
        # a directory made for the key is its owner's alone, as the key file is
        key_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        key.save(key_file)
    except FileExistsError:
        fail(f"{key_file} exists; refusing to overwrite a key")
    except OSError as exc:
        fail(f"cannot write {key_file}: {exc.strerror}")
    typer.echo(f"public key: {key.public_key}")
    typer.echo(f"key id:     {key.public_key.keyid}")


def public_key(
    key_file: Annotated[
        Path,
        typer.Argument(
            help="A private key file from keygen.", exists=True, dir_okay=False, metavar="KEYFILE"
        ),
    ],
) -> None:
    """Print the public key and key id of an existing private key (for a registry's
    publisher_keys or --registry-key)."""
    from mcs_host.trust.signatures import PrivateKey

    try:
        key = PrivateKey.load(key_file)
    except (OSError, ValueError) as exc:
        fail(str(exc))
    typer.echo(f"public key: {key.public_key}")
    typer.echo(f"key id:     {key.public_key.keyid}")


def sign(
    wheel: Annotated[
        Path,
        typer.Argument(help="The wheel to sign.", exists=True, dir_okay=False, metavar="WHEEL"),
    ],
    key: Annotated[
        Path,
        typer.Option(
            "--key",
            help="Private key file from keygen.",
            exists=True,
            dir_okay=False,
            metavar="KEYFILE",
        ),
    ],
    ids: Annotated[
        list[str] | None,
        typer.Option(
            "--id", help="LABEL=ID for a driver without mcs-driver.json.", metavar="LABEL=ID"
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", help="Write the signed wheel here instead.", dir_okay=False, metavar="WHEEL"
        ),
    ] = None,
) -> None:
    """Sign a wheel's release statement (digest, drivers, trust manifests) with a publisher key."""
    from mcs_host.trust.release import sign_wheel
    from mcs_host.trust.signatures import PrivateKey, SignatureError

    try:
        private = PrivateKey.load(key)
        statement = sign_wheel(wheel, private, parse_ids(ids), output)
    except (ValueError, SignatureError) as exc:
        fail(str(exc))
    typer.echo(f"signed {statement.distribution} {statement.version} {statement.digest}")
    for driver in statement.drivers:
        typer.echo(f"  driver {driver.label} = {driver.object} (id {driver.id})")
    typer.echo(f"  by key {private.public_key.keyid}")


def sign_registry(
    source: Annotated[
        Path,
        typer.Argument(
            help="A registry file, or an envelope to add signatures to.",
            exists=True,
            dir_okay=False,
            metavar="FILE",
        ),
    ],
    key: Annotated[
        list[Path],
        typer.Option(
            "--key",
            help="Private key file (repeatable).",
            exists=True,
            dir_okay=False,
            metavar="KEYFILE",
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            help="Where to write the signed envelope.",
            dir_okay=False,
            metavar="ENVELOPE",
        ),
    ],
) -> None:
    """Sign a registry's exact bytes into a DSSE envelope (for a shared index)."""
    from mcs_host._files import REGISTRY_LIMIT, InputError, read_bytes
    from mcs_host.trust.registry import REGISTRY_PAYLOAD_TYPE, Registry, is_envelope
    from mcs_host.trust.signatures import Envelope, PrivateKey, SignatureError

    try:
        data = read_bytes(source, "registry", REGISTRY_LIMIT)
    except (OSError, InputError) as exc:
        fail(str(exc))
    try:
        if is_envelope(data):
            envelope = Envelope.from_json(data, os.fspath(source))
        else:
            envelope = Envelope(REGISTRY_PAYLOAD_TYPE, data)
        registry = Registry.model_validate_json(envelope.payload)
        for field_name in ("expires", "name"):
            if getattr(registry, field_name) is None:
                fail(f"{source}: a signed registry must set {field_name}")
        envelope = envelope.add_signatures([PrivateKey.load(k) for k in key])
    except (ValueError, SignatureError) as exc:
        fail(str(exc))
    output.write_text(json.dumps(envelope.to_json(), indent=2) + "\n", encoding="utf-8")
    typer.echo(f"signed registry version {registry.version} with {len(key)} key(s): {output}")


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
) -> None:
    """Approve a directory's mcs-host.toml / [tool.mcs-host], as they are now, to choose
    registries and keys and relax the trust policy (like direnv's allow).

    Without approval, a configuration found in the working directory is read for everything
    else, but those settings are ignored (and the ignoring reported). An approval lapses when
    the files change.
    """
    from mcs_host.loading.config import ConfigError, approve_directory, revoke_directory

    real = os.path.realpath(directory)
    try:
        if revoke:
            done = revoke_directory(directory)
            typer.echo(f"revoked {real}" if done else f"{real} was not approved")
            return
        approved = approve_directory(directory)
    except ConfigError as exc:
        fail(str(exc))
    typer.echo(f"approved {real}:")
    for name, sha256 in sorted(approved.items()):
        typer.echo(f"  {name} (sha256 {sha256[:16]}...)")
