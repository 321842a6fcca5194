"""The commands for publisher and registry keys: ``keygen``, ``public-key``, ``sign`` (a
wheel's release statement) and ``sign-registry``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ._schema import schema_urn
from ._stdout import write_document
from .options import JsonOption, fail, parse_ids

if TYPE_CHECKING:
    from mcs_host.trust.release import ReleaseStatement
    from mcs_host.trust.signatures import PrivateKey

    from .documents import KeyDocument, SignDocument, SignRegistryDocument


def keygen(
    key_file: Annotated[
        Path,
        typer.Argument(
            help="Where to write the private key (mode 0600).", dir_okay=False, metavar="KEYFILE"
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Create an ed25519 signing key (never overwritten; mode 0600, and 0700 for a directory
    it makes); prints the public key to put in a registry."""
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
    _print_key("keygen", key_file, str(key.public_key), key.public_key.keyid, as_json)


def _load_key(path: Path) -> PrivateKey:
    """The private key in ``path``, with a warning on stderr when it is not the user's
    alone (it is read all the same: a key written by a CI step's umask still signs)."""
    from mcs_host._files import private_problem
    from mcs_host.trust.signatures import PrivateKey

    key = PrivateKey.load(path)
    try:
        problem = private_problem(os.stat(path), os.fspath(path))
    except OSError:
        problem = None
    if problem is not None:
        typer.echo(f"warning: {path}: the private key is not yours alone: {problem}", err=True)
    return key


def _print_key(command: str, key_file: Path, public: str, keyid: str, as_json: bool) -> None:
    if as_json:
        document: KeyDocument = {
            "schema": schema_urn(command),
            "key_file": os.fspath(key_file),
            "public_key": public,
            "key_id": keyid,
        }
        write_document(json.dumps(document, indent=2))
    else:
        typer.echo(f"public key: {public}")
        typer.echo(f"key id:     {keyid}")


def public_key(
    key_file: Annotated[
        Path,
        typer.Argument(
            help="A private key file from keygen.", exists=True, dir_okay=False, metavar="KEYFILE"
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Print the public key and key id of an existing private key (for a registry's
    publisher_keys or --registry-key)."""
    try:
        key = _load_key(key_file)
    except (OSError, ValueError) as exc:
        fail(str(exc))
    _print_key("public-key", key_file, str(key.public_key), key.public_key.keyid, as_json)


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
    as_json: JsonOption = False,
) -> None:
    """Sign a wheel's release statement (digest, drivers, trust manifests) with a publisher key."""
    from mcs_host.trust.release import sign_wheel
    from mcs_host.trust.signatures import SignatureError

    try:
        private = _load_key(key)
        statement = sign_wheel(wheel, private, parse_ids(ids), output)
    except (ValueError, SignatureError, OSError) as exc:
        fail(str(exc))
    _warn_placeholder(statement)
    if as_json:
        document: SignDocument = {
            "schema": schema_urn("sign"),
            "wheel": os.fspath(output or wheel),
            "distribution": statement.distribution,
            "version": statement.version,
            "digest": statement.digest,
            "drivers": [
                {"label": d.label, "object": d.object, "id": d.id} for d in statement.drivers
            ],
            "key_id": private.public_key.keyid,
        }
        write_document(json.dumps(document, indent=2))
        return
    typer.echo(f"signed {statement.distribution} {statement.version} {statement.digest}")
    for driver in statement.drivers:
        typer.echo(f"  driver {driver.label} = {driver.object} (id {driver.id})")
    typer.echo(f"  by key {private.public_key.keyid}")


def _warn_placeholder(statement: ReleaseStatement) -> None:
    """Say on stderr which signed drivers' trust manifests still name the publisher
    ``mcs-host new`` wrote for want of one: whoever trusts the key is shown that name."""
    from mcs_host.kit.scaffold import PLACEHOLDER_PUBLISHER

    for driver in statement.drivers:
        if driver.trust is not None and driver.trust.publisher == PLACEHOLDER_PUBLISHER:
            typer.echo(
                f"warning: driver {driver.label}'s trust manifest names the publisher "
                f"{PLACEHOLDER_PUBLISHER!r}, which `mcs-host new` wrote for want of one: set "
                '"publisher" under "trust" in its mcs-driver.json, build the wheel again and '
                "sign that",
                err=True,
            )


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
    as_json: JsonOption = False,
) -> None:
    """Sign a registry's exact bytes into a DSSE envelope (for a shared index), or add
    signatures to an envelope."""
    from mcs_host._files import REGISTRY_LIMIT, InputError, read_bytes
    from mcs_host.trust.registry import REGISTRY_PAYLOAD_TYPE, Registry, is_envelope
    from mcs_host.trust.signatures import Envelope, SignatureError

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
        keys = [_load_key(k) for k in key]
        envelope = envelope.add_signatures(keys)
    except (ValueError, SignatureError) as exc:
        fail(str(exc))
    from mcs_host._files import SHARED, write_atomic

    text = json.dumps(envelope.to_json(), indent=2) + "\n"
    try:
        write_atomic(output, text, "the envelope", mode=SHARED)
    except OSError as exc:
        fail(str(exc))
    if as_json:
        document: SignRegistryDocument = {
            "schema": schema_urn("sign-registry"),
            "output": os.fspath(output),
            "version": registry.version,
            "key_ids": [k.public_key.keyid for k in keys],
        }
        write_document(json.dumps(document, indent=2))
        return
    typer.echo(f"signed registry version {registry.version} with {len(key)} key(s): {output}")
