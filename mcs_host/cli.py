"""The ``mcs-host`` command line."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, cast

import typer

from . import __version__
from ._listing import render_listing, table
from .discovery import PLUGIN_GROUP, discover

if TYPE_CHECKING:
    from .config import HostConfig
    from .contract import DriverResponse
    from .host import Loaded, LoadReport, VerifyRecord, VerifyReport
    from .registry import TrustLabel

app = typer.Typer(
    name="mcs-host",
    help="Discover, verify, load and orchestrate MCS drivers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"mcs-host {__version__}")
        raise typer.Exit


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """Discover, verify, load and orchestrate MCS drivers."""


JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
SearchPathOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--path",
        help="Search this directory instead of sys.path (repeatable).",
        metavar="DIR",
        file_okay=False,
    ),
]
LabelsArgument = Annotated[
    list[str] | None, typer.Argument(help="Driver labels (default: all).", show_default=False)
]
RegistryOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--registry",
        help=(
            "Registry file (repeatable). Default: $MCS_HOST_REGISTRY, else ./registry.json, "
            "else ~/.config/mcs-host/registry.json."
        ),
        metavar="FILE",
        dir_okay=False,
    ),
]
RegistryKeyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--registry-key",
        help="A public key (ed25519:...) that may sign the signed registries (repeatable).",
        metavar="KEY",
    ),
]
ThresholdOption = Annotated[
    int | None,
    typer.Option("--threshold", min=1, help="Signatures by distinct keys a signed registry needs."),
]
AllowUnverifiedOption = Annotated[
    bool | None,
    typer.Option(
        "--allow-unverified/--no-allow-unverified",
        help="Allow drivers no registry pins or signs (development only; each load warns). "
        "Also MCS_HOST_ALLOW_UNVERIFIED=1.",
        show_default=False,
    ),
]
AllowExtensionsOption = Annotated[
    bool | None,
    typer.Option(
        "--allow-extensions/--no-allow-extensions",
        help="Allow drivers that ship extension modules (not re-checked at import).",
        show_default=False,
    ),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="Host config file. Default: $MCS_HOST_CONFIG, else ./mcs-host.toml, else "
        "[tool.mcs-host] in ./pyproject.toml.",
        metavar="FILE",
        dir_okay=False,
    ),
]
StrictOption = Annotated[
    bool | None,
    typer.Option(
        "--strict/--no-strict",
        help="Any driver that does not mount is an error (exit 1).",
        show_default=False,
    ),
]
HealthcheckOption = Annotated[
    bool | None,
    typer.Option(
        "--healthcheck/--no-healthcheck",
        help="Run healthcheck() of drivers that declare it; unhealthy ones are not mounted.",
        show_default=False,
    ),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="A constructor setting LABEL.KEY=VALUE (VALUE is JSON, else a string); repeatable.",
        metavar="LABEL.KEY=VALUE",
    ),
]


@app.command("list")
def list_drivers(as_json: JsonOption = False, path: SearchPathOption = None) -> None:
    """List the installed drivers and host plugins from their metadata, without importing
    any of them."""
    plugins = discover(path, group=PLUGIN_GROUP, require_object=False)
    typer.echo(render_listing(discover(path), as_json, plugins))


def _config(
    config: Path | None,
    registry: Sequence[Path] | None,
    registry_key: Sequence[str] | None,
    threshold: int | None,
    allow_unverified: bool | None,
    allow_extensions: bool | None,
    *,
    strict: bool | None = None,
    healthcheck: bool | None = None,
    sets: Sequence[str] | None = None,
) -> HostConfig:
    """The host configuration: file and environment, then the command line's options."""
    from .config import ConfigError, load_config, override_config

    trust = {
        key: value
        for key, value in (
            ("allow_unverified", allow_unverified),
            ("allow_extensions", allow_extensions),
        )
        if value is not None
    }
    try:
        loaded = load_config(
            config,
            registries=[os.fspath(p) for p in registry] if registry else None,
            registry_keys=list(registry_key) if registry_key else None,
            registry_threshold=threshold,
            trust=trust,
            strict=strict,
            healthcheck=healthcheck,
        )
        for note in loaded.notes:
            typer.echo(f"note: {note}", err=True)
        if not sets:
            return loaded
        drivers: dict[str, Any] = {label: s.model_dump() for label, s in loaded.drivers.items()}
        for target, value in _settings_from(sets, "LABEL.KEY=VALUE").items():
            label, dot, key = target.partition(".")
            if not (dot and label and key):
                message = f"{target!r} names no driver setting: use LABEL.KEY=VALUE"
                raise typer.BadParameter(message, param_hint="--set")
            drivers.setdefault(label, {}).setdefault("settings", {})[key] = value
        return override_config(loaded, drivers=drivers)
    except ConfigError as exc:
        _fail(str(exc))


@app.command("verify")
def verify_drivers(
    labels: LabelsArgument = None,
    as_json: JsonOption = False,
    path: SearchPathOption = None,
    config: ConfigOption = None,
    registry: RegistryOption = None,
    registry_key: RegistryKeyOption = None,
    threshold: ThresholdOption = None,
    allow_unverified: AllowUnverifiedOption = None,
    allow_extensions: AllowExtensionsOption = None,
) -> None:
    """Check each driver and host plugin, and what it depends on, against the registries,
    without importing any of them.

    Exits 0 only when every one asked for may be loaded and would run nothing but verified
    code (and the host's); 1 otherwise.
    """
    from .host import Host

    settings = _config(
        config, registry, registry_key, threshold, allow_unverified, allow_extensions
    )
    search = [os.fspath(p) for p in path] if path else None
    report = Host(settings, search_path=search).verify(list(labels or ()))
    if as_json:
        document = {**_verify_json(report), "config_notes": list(settings.notes)}
        typer.echo(json.dumps(document, indent=2))
    else:
        typer.echo(_verify_text(report))
    if not report.ok:
        raise typer.Exit(1)


def _verify_json(report: VerifyReport) -> dict[str, Any]:
    def record(r: VerifyRecord) -> dict[str, Any]:
        v = r.verification
        return {
            "label": r.label,
            "kind": r.kind,
            "distribution": v.candidate.distribution,
            "version": v.candidate.version,
            "status": v.status,
            "allowed": v.allowed,
            "loadable": r.loadable,
            "verified": r.verified,
            "reason": v.reason,
            "message": v.message,
            "refusal": {"reason": r.refusal[0], "message": r.refusal[1]} if r.refusal else None,
            "unverified": list(r.unverified),
            "driver_id": v.driver_id,
            "trust": v.trust_label,
            "digest": v.digest,
            "files": v.scan.digest.files if v.scan and v.scan.digest else None,
            "bytes": v.scan.digest.bytes if v.scan and v.scan.digest else None,
            "signers": list(v.signers),
            "findings": [
                {"code": f.code, "path": f.path, "message": f.message}
                for f in (v.scan.findings if v.scan else ())
            ],
            "extensions": list(v.scan.extensions) if v.scan else [],
            "dependencies": [
                {
                    "distribution": d.distribution,
                    "version": d.version,
                    "required_by": d.required_by,
                    "declared": d.declared,
                    "status": d.status,
                    "reason": d.reason,
                    "message": d.message,
                }
                for d in r.dependencies
            ],
            "warnings": list(v.warnings),
        }

    return {
        "ok": report.ok,
        "registries": list(report.registries),
        "registry_errors": [
            {"reason": reason, "message": message} for reason, message in report.registry_errors
        ],
        "missing": list(report.missing),
        "drivers": [record(r) for r in report.records if r.kind == "driver"],
        "plugins": [record(r) for r in report.records if r.kind == "plugin"],
        "environment": list(report.environment),
        "startup": [{"path": path, "what": what} for path, what in report.startup],
    }


def _verify_text(report: VerifyReport) -> str:
    lines = [f"Registries: {', '.join(report.registries) if report.registries else 'none'}"]
    lines += [f"  refused: {message}" for _, message in report.registry_errors]
    lines.append("")
    rows = []
    for r in report.records:
        v = r.verification
        status = str(v.status)
        if v.status not in ("revoked", "rejected") and not r.loadable:
            status += " (refused)"
        rows.append(
            [
                r.label,
                r.kind,
                v.candidate.distribution,
                v.candidate.version,
                status,
                v.trust_label or "-",
                (v.digest or "-")[:19],
            ]
        )
    if rows:
        headers = ["LABEL", "KIND", "DISTRIBUTION", "VERSION", "STATUS", "TRUST", "DIGEST"]
        lines += table(headers, rows)
        lines.append("")
    for r in report.records:
        v = r.verification
        lines.append(f"{r.label}: {v.reason}: {v.message}")
        lines += [f"{r.label}: WARNING: {w}" for w in v.warnings]
        if r.refusal is not None:
            lines.append(f"{r.label}: refused at load: {r.refusal[0]}: {r.refusal[1]}")
        elif r.loadable:
            lines += [f"{r.label}: UNVERIFIED CODE would run: {u}" for u in r.unverified]
    lines += [f"{label}: no driver or plugin has this label" for label in report.missing]
    if report.environment:
        lines.append("Host installation (ignored, grants nothing):")
        lines += [f"  {finding}" for finding in report.environment]
    if report.startup:
        lines.append("Start-up code (the interpreter runs it before any host can act):")
        lines += [f"  {path} {what}" for path, what in report.startup]
    for kind, noun in (("driver", "drivers"), ("plugin", "host plugins")):
        records = [r for r in report.records if r.kind == kind]
        total = len(records) + (len(report.missing) if kind == "driver" else 0)
        if kind == "plugin" and not records:
            continue
        loadable = sum(r.loadable for r in records)
        verified = sum(r.verified for r in records)
        lines.append(
            f"{loadable} of {total} {noun} may be loaded; {verified} would run only verified code."
        )
    return "\n".join(lines)


def _parse_ids(ids: Sequence[str] | None) -> dict[str, str]:
    return _parse_pairs(ids, "--id")


def _settings_from(items: Sequence[str] | None, form: str) -> dict[str, Any]:
    """``--set`` items as settings: the value is JSON, else the text itself ("" when empty)."""
    from ._files import InputError, loads_json

    settings: dict[str, Any] = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"{item!r} is not {form}", param_hint="--set")
        try:
            settings[key] = loads_json(raw, key)
        except InputError as exc:
            if "nested" in str(exc):
                raise typer.BadParameter(str(exc), param_hint="--set") from None
            settings[key] = raw
    return settings


def _parse_pairs(items: Sequence[str] | None, option: str) -> dict[str, str]:
    parsed = {}
    for item in items or ():
        label, sep, value = item.partition("=")
        if not sep or not label or not value:
            raise typer.BadParameter(f"{item!r} is not LABEL=VALUE", param_hint=option)
        parsed[label] = value
    return parsed


@app.command("lock")
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
            "--trust", help="Trust label for new entries: verified, reference, community."
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
    from .discovery import installed_distribution
    from .registry import (
        REGISTRY_FORMAT,
        Registry,
        RegistryError,
        default_registry_paths,
        is_envelope,
    )
    from .release import (
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

    from ._files import REGISTRY_LIMIT, InputError, loads_json, read_text, validation_lines

    try:
        text = read_text(target, "registry", REGISTRY_LIMIT)
        if is_envelope(text):
            _fail(f"{target} is a signed registry; lock writes plain registry files only")
        loads_json(text, target)  # its nesting is bounded before the model parses it
        current = Registry.model_validate_json(text)
    except FileNotFoundError:
        current = Registry(format=REGISTRY_FORMAT)
    except InputError as exc:
        _fail(str(exc))
    except ValidationError as exc:
        _fail(validation_lines(target, exc.errors()))
    declared = _parse_pairs(declare, "--declare")
    releases: list[Release]
    try:
        if wheel or distribution:
            releases = [release_from_wheel(w) for w in wheel or ()]
            search = [os.fspath(p) for p in path] if path else sys.path
            for name in distribution or ():
                found_dist = installed_distribution(name, search)
                if found_dist is None:
                    _fail(f"{name} is not installed")
                dist_name, version, metadata_path, _ = found_dist
                releases.append(release_from_installed(metadata_path, dist_name, version))
        else:
            found = discover(path)
            plugins = discover(path, group=PLUGIN_GROUP, require_object=False)
            candidates = (*found.candidates, *plugins.candidates)
            wanted = [c for c in candidates if not labels or c.label in labels]
            missing = sorted(set(labels or ()) - {c.label for c in wanted})
            if missing:
                _fail(f"no installed driver has the label {', '.join(missing)}")
            releases = release_from_candidates(wanted)
        updated = lock(
            current,
            releases,
            labels=list(labels or ()),
            ids=_parse_ids(ids),
            declared=declared,
            trust=cast("TrustLabel", trust),
            replace=replace,
            publisher_keys=publisher_keys or (),
        )
        updated.save(target)
    except (ValueError, OSError, RegistryError) as exc:
        _fail(str(exc))
    for release in releases:
        pin = release.pin()
        typer.echo(
            f"pinned {release.distribution} {release.version}: {pin.digest} "
            f"({pin.files} files, {pin.bytes} bytes)"
        )
    typer.echo(f"wrote {target}")


@app.command("keygen")
def keygen(
    key_file: Annotated[
        Path, typer.Argument(help="Where to write the private key (mode 0600).", dir_okay=False)
    ],
) -> None:
    """Create an ed25519 signing key; prints the public key to put in a registry."""
    from .signing import PrivateKey

    key = PrivateKey.generate()
    try:
        key.save(key_file)
    except FileExistsError:
        _fail(f"{key_file} exists; refusing to overwrite a key")
    except OSError as exc:
        _fail(f"cannot write {key_file}: {exc.strerror}")
    typer.echo(f"public key: {key.public_key}")
    typer.echo(f"key id:     {key.public_key.keyid}")


@app.command("sign")
def sign(
    wheel: Annotated[Path, typer.Argument(help="The wheel to sign.", exists=True, dir_okay=False)],
    key: Annotated[
        Path,
        typer.Option("--key", help="Private key file from keygen.", exists=True, dir_okay=False),
    ],
    ids: Annotated[
        list[str] | None,
        typer.Option(
            "--id", help="LABEL=ID for a driver without mcs-driver.json.", metavar="LABEL=ID"
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", help="Write the signed wheel here instead.", dir_okay=False),
    ] = None,
) -> None:
    """Sign a wheel's release statement (digest, drivers, trust manifests) with a publisher key."""
    from .release import sign_wheel
    from .signing import PrivateKey, SignatureError

    try:
        private = PrivateKey.load(key)
        statement = sign_wheel(wheel, private, _parse_ids(ids), output)
    except (ValueError, SignatureError) as exc:
        _fail(str(exc))
    typer.echo(f"signed {statement.distribution} {statement.version} {statement.digest}")
    for driver in statement.drivers:
        typer.echo(f"  driver {driver.label} = {driver.object} (id {driver.id})")
    typer.echo(f"  by key {private.public_key.keyid}")


@app.command("sign-registry")
def sign_registry(
    source: Annotated[
        Path,
        typer.Argument(
            help="A registry file, or an envelope to add signatures to.",
            exists=True,
            dir_okay=False,
        ),
    ],
    key: Annotated[
        list[Path],
        typer.Option("--key", help="Private key file (repeatable).", exists=True, dir_okay=False),
    ],
    output: Annotated[
        Path, typer.Option("--output", help="Where to write the signed envelope.", dir_okay=False)
    ],
) -> None:
    """Sign a registry's exact bytes into a DSSE envelope (for a shared index)."""
    from ._files import REGISTRY_LIMIT, InputError, read_bytes
    from .registry import REGISTRY_PAYLOAD_TYPE, Registry, is_envelope
    from .signing import Envelope, PrivateKey, SignatureError

    try:
        data = read_bytes(source, "registry", REGISTRY_LIMIT)
    except (OSError, InputError) as exc:
        _fail(str(exc))
    try:
        if is_envelope(data):
            envelope = Envelope.from_json(data, os.fspath(source))
        else:
            envelope = Envelope(REGISTRY_PAYLOAD_TYPE, data)
        registry = Registry.model_validate_json(envelope.payload)
        for field_name in ("expires", "name"):
            if getattr(registry, field_name) is None:
                _fail(f"{source}: a signed registry must set {field_name}")
        envelope = envelope.add_signatures([PrivateKey.load(k) for k in key])
    except (ValueError, SignatureError) as exc:
        _fail(str(exc))
    output.write_text(json.dumps(envelope.to_json(), indent=2) + "\n", encoding="utf-8")
    typer.echo(f"signed registry version {registry.version} with {len(key)} key(s): {output}")


@app.command("allow")
def allow_command(
    directory: Annotated[
        Path,
        typer.Argument(
            help="The project directory whose configuration to approve.", file_okay=False
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
    from .config import ConfigError, approve_directory, revoke_directory

    real = os.path.realpath(directory)
    try:
        if revoke:
            done = revoke_directory(directory)
            typer.echo(f"revoked {real}" if done else f"{real} was not approved")
            return
        approved = approve_directory(directory)
    except ConfigError as exc:
        _fail(str(exc))
    typer.echo(f"approved {real}:")
    for name, sha256 in sorted(approved.items()):
        typer.echo(f"  {name} (sha256 {sha256[:16]}...)")


def _load(
    config: HostConfig, labels: Sequence[str], path: Sequence[Path] | None
) -> tuple[Loaded | None, LoadReport]:
    from .host import Host, LoadError

    search = [os.fspath(p) for p in path] if path else None
    try:
        loaded = Host(config, search_path=search).load(list(labels))
    except LoadError as exc:
        return None, exc.report
    return loaded, loaded.report


@app.command("load")
def load_command(
    labels: LabelsArgument = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    registry: RegistryOption = None,
    registry_key: RegistryKeyOption = None,
    threshold: ThresholdOption = None,
    allow_unverified: AllowUnverifiedOption = None,
    allow_extensions: AllowExtensionsOption = None,
    strict: StrictOption = None,
    healthcheck: HealthcheckOption = None,
    sets: SetOption = None,
    path: SearchPathOption = None,
    prompt: Annotated[
        bool, typer.Option("--prompt", help="Also print the system prompt of the loaded stack.")
    ] = False,
    model: Annotated[
        str | None, typer.Option("--model", help="The model the prompt is for.", metavar="NAME")
    ] = None,
) -> None:
    """Discover, verify, check, import and mount the drivers; show the load report.

    Exits 1 only for errors: strict mode, required drivers, labels that do not exist.
    """
    settings = _config(
        config,
        registry,
        registry_key,
        threshold,
        allow_unverified,
        allow_extensions,
        strict=strict,
        healthcheck=healthcheck,
        sets=sets,
    )
    loaded, report = _load(settings, labels or (), path)
    if as_json:
        document = {**_report_json(report, loaded), "config_notes": list(settings.notes)}
        if prompt and loaded is not None:
            document["system_prompt"] = loaded.driver.get_driver_system_message(model)
        typer.echo(json.dumps(document, indent=2, default=str))
    else:
        typer.echo(_report_text(report, loaded))
        if prompt and loaded is not None:
            typer.echo("\nSystem prompt:\n" + loaded.driver.get_driver_system_message(model))
    if not report.ok:
        raise typer.Exit(1)


def _report_json(report: LoadReport, loaded: Loaded | None) -> dict[str, Any]:
    def record(r: Any) -> dict[str, Any]:
        return {
            "label": r.label,
            "kind": r.kind,
            "driver": r.driver,
            "distribution": r.distribution,
            "version": r.version,
            "status": r.status,
            "reason": r.reason,
            "message": r.message,
            "trust": r.trust,
            "tools": list(r.tools),
            "timings_ms": {k: round(v * 1000, 3) for k, v in r.timings.items()},
            "warnings": list(r.warnings),
            "traceback": r.traceback,
            "health": r.health,
        }

    tools = []
    if loaded is not None:
        for tool in loaded.driver.list_tools():
            label, own = loaded.driver.route(tool.name)
            tools.append({"name": tool.name, "label": label, "tool": own})
    return {
        "ok": report.ok,
        "errors": list(report.errors),
        "registry_errors": list(report.registry_errors),
        "drivers": [record(r) for r in report.records],
        "plugins": [record(r) for r in report.plugins],
        "tools": tools,
        "timings_ms": {k: round(v * 1000, 3) for k, v in report.timings.items()},
        "environment": list(report.environment),
    }


def _report_text(report: LoadReport, loaded: Loaded | None) -> str:
    lines = [f"  registry refused: {e}" for e in report.registry_errors]
    rows = [
        [
            r.label,
            r.driver or "-",
            r.distribution or "-",
            r.version or "-",
            r.status,
            r.trust or "-",
            str(len(r.tools)) if r.status == "mounted" else "-",
            f"{sum(r.timings.values()) * 1000:.1f} ms" if r.timings else "-",
        ]
        for r in (*report.records, *report.plugins)
    ]
    if rows:
        headers = ["LABEL", "DRIVER", "DISTRIBUTION", "VERSION", "STATUS", "TRUST", "TOOLS", "TIME"]
        lines += table(headers, rows)
        lines.append("")
    for r in (*report.records, *report.plugins):
        if r.status != "mounted":
            lines.append(f"{r.label}: {r.reason}: {r.message}")
        lines += [f"{r.label}: WARNING: {w}" for w in r.warnings]
    tools = loaded.driver.list_tools() if loaded is not None else []
    if loaded is not None and tools:
        lines.append("Tools:")
        for tool in tools:
            label, own = loaded.driver.route(tool.name)
            lines.append(f"  {tool.name}  ({label}: {own})")
    lines += [f"host installation (ignored, grants nothing): {e}" for e in report.environment]
    lines += [f"error: {e}" for e in report.errors]
    mounted = len(report.mounted)
    total = report.timings.get("total", 0.0) * 1000
    lines.append(f"{mounted} of {len(report.records)} drivers mounted in {total:.0f} ms.")
    return "\n".join(lines)


def _respond(response: DriverResponse) -> None:
    typer.echo(json.dumps(response.model_dump(mode="python"), indent=2, default=str))
    if response.call_failed:
        raise typer.Exit(1)


@app.command("call")
def call_command(
    tool: Annotated[str, typer.Argument(help="The tool's name as the loaded stack lists it.")],
    args: Annotated[str, typer.Option("--args", help="The arguments, a JSON object.")] = "{}",
    config: ConfigOption = None,
    registry: RegistryOption = None,
    registry_key: RegistryKeyOption = None,
    threshold: ThresholdOption = None,
    allow_unverified: AllowUnverifiedOption = None,
    sets: SetOption = None,
    path: SearchPathOption = None,
) -> None:
    """Load the stack and send it one tool call; print the DriverResponse."""
    from ._files import InputError, loads_json

    try:
        arguments = loads_json(args, "--args")
    except InputError as exc:
        raise typer.BadParameter(str(exc).removeprefix("--args: "), param_hint="--args") from None
    settings = _config(config, registry, registry_key, threshold, allow_unverified, None, sets=sets)
    loaded = _loaded_or_exit(settings, path)
    _respond(loaded.driver.process_llm_response({"tool": tool, "arguments": arguments}))


@app.command("run")
def run_command(
    text: Annotated[str, typer.Argument(help="An LLM's output, or - to read it from stdin.")],
    as_object: Annotated[
        bool, typer.Option("--object", help="The output is a provider's JSON message object.")
    ] = False,
    config: ConfigOption = None,
    registry: RegistryOption = None,
    registry_key: RegistryKeyOption = None,
    threshold: ThresholdOption = None,
    allow_unverified: AllowUnverifiedOption = None,
    sets: SetOption = None,
    path: SearchPathOption = None,
) -> None:
    """Load the stack and pass it an LLM's output; print the DriverResponse."""
    raw = sys.stdin.read() if text == "-" else text
    output: str | dict[str, Any] = raw
    if as_object:
        from ._files import InputError, loads_json

        try:
            output = loads_json(raw, "--object")
        except InputError as exc:
            message = str(exc).removeprefix("--object: ")
            raise typer.BadParameter(message, param_hint="--object") from None
    settings = _config(config, registry, registry_key, threshold, allow_unverified, None, sets=sets)
    loaded = _loaded_or_exit(settings, path)
    _respond(loaded.driver.process_llm_response(output))


def _loaded_or_exit(settings: HostConfig, path: Sequence[Path] | None) -> Loaded:
    loaded, report = _load(settings, (), path)
    for refused in report.registry_errors:
        typer.echo(f"registry refused: {refused}", err=True)
    for finding in report.environment:
        typer.echo(f"host installation (ignored, grants nothing): {finding}", err=True)
    for record in report.records:
        if record.status == "mounted":
            typer.echo(f"mounted {record.label} ({record.trust})", err=True)
        elif record.status in ("rejected", "failed"):
            typer.echo(f"not mounted {record.label}: {record.reason}: {record.message}", err=True)
    if loaded is None:
        for error in report.errors:
            typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1)
    return loaded


@app.command("new")
def new_command(
    name: Annotated[str, typer.Argument(help="The distribution name, e.g. acme-weather.")],
    directory: Annotated[
        Path, typer.Option("--dir", help="Where to create it.", file_okay=False)
    ] = Path("."),
    label: Annotated[
        str | None, typer.Option("--label", help="Its entry point label (default: from NAME).")
    ] = None,
    publisher: Annotated[
        str, typer.Option("--publisher", help="Who publishes it (its trust manifest).")
    ] = "Your name",
    repository: Annotated[
        str | None, typer.Option("--repository", help="Its source repository URL.")
    ] = None,
) -> None:
    """Create a driver distribution: pyproject with the entry point, manifest, a tool, tests."""
    from .scaffold import new_driver

    try:
        root = new_driver(name, directory, label=label, publisher=publisher, repository=repository)
    except (ValueError, FileExistsError) as exc:
        _fail(str(exc))
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        typer.echo(f"created {path}")
    typer.echo(f"next: cd {root} && pip install -e '.[test]' && pytest && mcs-host check .")


@app.command("check")
def check_command(
    target: Annotated[
        str, typer.Argument(help="A driver project directory, or an installed driver's label.")
    ],
    sets: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="A constructor setting KEY=VALUE (VALUE is JSON, else a string).",
            metavar="KEY=VALUE",
        ),
    ] = None,
    path: SearchPathOption = None,
) -> None:
    """Check that a driver keeps the MCS contract (this runs the driver's code).

    Exits 1 when a driver has an error.
    """
    from .conformance import check_driver

    settings = _settings_from(sets, "KEY=VALUE")
    try:
        drivers = _drivers_to_check(target, path)
    except (ValueError, OSError) as exc:
        _fail(f"{target}: {type(exc).__name__}: {exc}")
    errors = 0
    for label, value in drivers:
        try:
            obj = _load_object(value)
        except (Exception, SystemExit) as exc:  # one driver that cannot be imported is its error
            errors += 1
            typer.echo(f"{label}: breaks the contract\n  ERROR import: {value}: {exc!r}")
            continue
        results = check_driver(obj, settings)
        errors += sum(r.level == "error" for r in results)
        verdict = "breaks the contract" if any(r.level == "error" for r in results) else "passes"
        typer.echo(f"{label}: {verdict}")
        for result in results:
            typer.echo(f"  {result}")
    if errors:
        raise typer.Exit(1)


def _load_object(value: str) -> Any:
    import importlib

    module, _, attr = value.partition(":")
    obj: Any = importlib.import_module(module.strip())
    for part in filter(None, attr.strip().split(".")):
        obj = getattr(obj, part)
    return obj


def _drivers_to_check(target: str, path: Sequence[Path] | None) -> list[tuple[str, str]]:
    """``(label, entry point value)`` of the drivers to check, their directory put first on
    ``sys.path`` so the copy found is the copy imported."""
    import tomllib

    project = Path(target)
    if project.is_dir():
        with open(project / "pyproject.toml", "rb") as f:
            document = tomllib.load(f)
        entries = document.get("project", {}).get("entry-points", {}).get("mcs.drivers", {})
        if not entries:
            raise ValueError('its pyproject.toml declares no [project.entry-points."mcs.drivers"]')
        sys.path.insert(0, str(project.resolve()))
        return list(entries.items())
    found = discover(path).get(target)
    if not found:
        raise ValueError("no installed driver has this label, and it is not a directory")
    sys.path.insert(0, found[0].location)
    return [(target, found[0].value)]


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``)."""
    app(args=list(sys.argv[1:] if argv is None else argv), prog_name="mcs-host")
