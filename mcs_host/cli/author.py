"""The driver author's commands: ``new`` (scaffold a driver) and ``check`` (conformance)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mcs_host.discovery import discover

from ._schema import schema_urn
from ._stdout import write_document
from .options import JsonOption, SearchPathOption, fail, settings_from

if TYPE_CHECKING:
    from .documents import BumpDocument, CheckDocument, CheckedDriver, CheckResult, NewDocument


def new_command(
    name: Annotated[
        str, typer.Argument(help="The distribution name, e.g. acme-weather.", metavar="NAME")
    ],
    directory: Annotated[
        Path, typer.Option("--dir", help="Where to create it.", file_okay=False, metavar="DIR")
    ] = Path("."),
    label: Annotated[
        str | None,
        typer.Option(
            "--label", help="Its entry point label (default: from NAME).", metavar="LABEL"
        ),
    ] = None,
    publisher: Annotated[
        str,
        typer.Option("--publisher", help="Who publishes it (its trust manifest).", metavar="NAME"),
    ] = "Your name",
    repository: Annotated[
        str | None,
        typer.Option(
            "--repository",
            help="Its source repository: a URL, or OWNER/REPO on GitHub (named in the release "
            "workflow's instructions too).",
            metavar="REPOSITORY",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Create a driver distribution: pyproject with the entry point, manifest, a tool, tests,
    and a GitHub Actions workflow that publishes its releases to PyPI with attestations.

    A label that breaks the label rule, or a repository that is no https, ssh or git URL nor
    GitHub's OWNER/REPO, is refused before anything is written.
    """
    from mcs_host.kit.scaffold import new_driver

    try:
        root = new_driver(name, directory, label=label, publisher=publisher, repository=repository)
    except (ValueError, FileExistsError) as exc:
        fail(str(exc))
    created = [os.fspath(p) for p in sorted(p for p in root.rglob("*") if p.is_file())]
    advice = f"cd {root} && pip install -e '.[test]' && pytest && mcs-host check ."
    if as_json:
        document: NewDocument = {
            "schema": schema_urn("new"),
            "root": os.fspath(root),
            "created": created,
            "next": advice,
        }
        write_document(json.dumps(document, indent=2))
        return
    for path in created:
        typer.echo(f"created {path}")
    typer.echo(f"next: {advice}")


def bump_command(
    version: Annotated[
        str, typer.Argument(help="The new version, SemVer (e.g. 0.2.0).", metavar="VERSION")
    ],
    directory: Annotated[
        Path, typer.Option("--dir", help="The driver project.", file_okay=False, metavar="DIR")
    ] = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Set a driver project's version in pyproject.toml and in every mcs-driver.json at once
    (SemVer that is also PEP 440); nothing is written if any file cannot be."""
    from mcs_host.kit.versioning import bump_version

    try:
        changed = bump_version(directory, version)
    except ValueError as exc:
        fail(str(exc))
    if as_json:
        document: BumpDocument = {
            "schema": schema_urn("bump"),
            "version": version,
            "changed": [os.fspath(p) for p in changed],
        }
        write_document(json.dumps(document, indent=2))
        return
    for path in changed:
        typer.echo(f"set {version} in {path}")


def check_command(
    target: Annotated[
        str,
        typer.Argument(
            help="A driver project directory, or an installed driver's label.", metavar="TARGET"
        ),
    ],
    sets: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="A constructor setting LABEL.KEY=VALUE, as load takes it (VALUE is JSON, else "
            "a string); KEY=VALUE sets it for every driver checked. Repeatable.",
            metavar="LABEL.KEY=VALUE",
        ),
    ] = None,
    path: SearchPathOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check that a project directory's drivers, or an installed driver, keep the MCS
    contract (this runs the driver's code).

    Exits 1 when a driver has an error.
    """
    from mcs_host.kit.conformance import check_driver

    try:
        drivers = _drivers_to_check(target, path)
    except ValueError as exc:
        fail(str(exc))
    labels = {label for label, _ in drivers}
    shared: dict[str, Any] = {}
    own: dict[str, dict[str, Any]] = {}
    for key, value in settings_from(sets, "LABEL.KEY=VALUE").items():
        label, dot, name = key.partition(".")
        if dot and label in labels and name:
            own.setdefault(label, {})[name] = value
        elif dot:
            fail(f"--set {key}: no driver checked here has the label {label!r}")
        else:
            shared[key] = value
    checked: list[CheckedDriver] = []
    for label, value in drivers:
        try:
            obj = _load_object(value)
        except (Exception, SystemExit) as exc:  # one driver that cannot be imported is its error
            failure: CheckResult = {
                "level": "error",
                "code": "import",
                "message": f"{value}: {exc!r}",
            }
            checked.append({"label": label, "passes": False, "results": [failure]})
            continue
        results = check_driver(obj, {**shared, **own.get(label, {})})
        results += _version_skew(target, obj) + _placeholder_publisher(obj)
        checked.append(
            {
                "label": label,
                "passes": not any(r.level == "error" for r in results),
                "results": [
                    {"level": r.level, "code": r.code, "message": r.message} for r in results
                ],
            }
        )
    ok = all(d["passes"] for d in checked)
    if as_json:
        document: CheckDocument = {"schema": schema_urn("check"), "ok": ok, "drivers": checked}
        write_document(json.dumps(document, indent=2))
    else:
        for driver in checked:
            verdict = "passes" if driver["passes"] else "breaks the contract"
            typer.echo(f"{driver['label']}: {verdict}")
            for result in driver["results"]:
                typer.echo(f"  {result['level'].upper()} {result['code']}: {result['message']}")
    if not ok:
        raise typer.Exit(1)


def _version_skew(target: str, obj: Any) -> tuple[Any, ...]:
    """An error when a project directory's pyproject.toml gives another version than the
    driver's meta (its mcs-driver.json): the host refuses such a driver once installed."""
    import tomllib

    from mcs_host.kit.conformance import ConformanceResult

    project = Path(target)
    if not project.is_dir():
        return ()
    with open(project / "pyproject.toml", "rb") as f:
        version = tomllib.load(f).get("project", {}).get("version")
    meta = getattr(obj, "meta", None)
    declared = getattr(meta, "version", None)
    if not isinstance(version, str) or not isinstance(declared, str) or version == declared:
        return ()
    message = (
        f"pyproject.toml says version {version}, its meta (mcs-driver.json) says {declared}; "
        "the host refuses a driver whose two versions differ: set both with "
        "`mcs-host bump VERSION`"
    )
    return (ConformanceResult("error", "version-skew", message),)


def _placeholder_publisher(obj: Any) -> tuple[Any, ...]:
    """A warning while the driver's trust manifest names the publisher ``mcs-host new``
    wrote for want of one: whoever trusts its releases would be shown that name."""
    from mcs_host.kit.conformance import ConformanceResult
    from mcs_host.kit.scaffold import PLACEHOLDER_PUBLISHER

    trust = getattr(getattr(obj, "meta", None), "trust", None)
    if getattr(trust, "publisher", None) != PLACEHOLDER_PUBLISHER:
        return ()
    message = (
        f"its trust manifest names the publisher {PLACEHOLDER_PUBLISHER!r}, which `mcs-host "
        'new` wrote for want of one: set "publisher" under "trust" in its mcs-driver.json '
        "to who publishes it before a release"
    )
    return (ConformanceResult("warning", "placeholder-publisher", message),)


def _load_object(value: str) -> Any:
    import importlib

    module, _, attr = value.partition(":")
    obj: Any = importlib.import_module(module.strip())
    for part in filter(None, attr.strip().split(".")):
        obj = getattr(obj, part)
    return obj


def _drivers_to_check(target: str, path: Sequence[Path] | None) -> list[tuple[str, str]]:
    """``(label, entry point value)`` of the drivers to check, their directory put first on
    ``sys.path`` so the copy found is the copy imported; ``ValueError`` naming the target
    (and, for a name that is neither, the closest project directories and labels)."""
    project = Path(target)
    if project.is_dir():
        entries = _project_entries(project)
        sys.path.insert(0, str(project.resolve()))
        return list(entries.items())
    found = discover(path)
    claimed = found.get(target)
    if not claimed:
        raise ValueError(_unknown_target(target, sorted({c.label for c in found.candidates})))
    sys.path.insert(0, claimed[0].location)
    return [(target, claimed[0].value)]


def _project_entries(project: Path) -> dict[str, str]:
    """The ``mcs.drivers`` entry points the ``pyproject.toml`` of ``project`` declares;
    ``ValueError`` naming the file when it is missing, unreadable or declares none."""
    import tomllib

    pyproject = project / "pyproject.toml"
    try:
        with open(pyproject, "rb") as f:
            document = tomllib.load(f)
    except FileNotFoundError:
        raise ValueError(
            f"{project}: no pyproject.toml there; give a driver project's directory (mcs-host "
            "new writes one) or an installed driver's label"
        ) from None
    except OSError as exc:
        raise ValueError(f"{pyproject}: cannot be read ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{pyproject}: not valid TOML ({exc})") from None
    entries = document.get("project", {}).get("entry-points", {}).get("mcs.drivers", {})
    if not entries or not isinstance(entries, dict):
        raise ValueError(f'{pyproject}: declares no [project.entry-points."mcs.drivers"]')
    return {str(label): str(value) for label, value in entries.items()}


def _unknown_target(target: str, labels: Sequence[str]) -> str:
    """Why ``target`` is no project directory nor installed driver, with the closest of the
    project directories beside where it would be and of the installed ``labels``."""
    import difflib

    where = Path(target).parent
    projects: list[str] = []
    try:
        with os.scandir(where) as entries:
            for entry in entries:
                if entry.is_dir() and os.path.isfile(os.path.join(entry.path, "pyproject.toml")):
                    projects.append(entry.name if where == Path(".") else str(where / entry.name))
    except OSError:
        pass  # nothing beside it to suggest
    close = difflib.get_close_matches(target, sorted({*projects, *labels}), n=3, cutoff=0.6)
    message = (
        f"{target}: no such project directory ({Path(target).absolute()}), and no installed "
        "driver has this label"
    )
    if close:
        return message + f"; did you mean {' or '.join(close)}?"
    return message + "; give a driver project's directory or a label mcs-host list shows"
