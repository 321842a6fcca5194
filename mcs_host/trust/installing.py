"""Installing exactly the wheels a caller checked, with the user's own pip, and taking them out
again.

:func:`resolve` asks pip what installing a wheel would bring (``pip install --dry-run --report
--only-binary :all:``): the user's indexes, constraints and installed distributions decide, as
they do for ``pip install``, and nothing is built or run (pip reads metadata, or downloads a
wheel to its own cache to read it). :func:`install` installs the given wheel files and nothing
else (``--no-deps --no-index``, one pip call, which puts back what it replaced when it fails);
:func:`uninstall` takes distributions out. Each runs one pip process of ``python``'s, as
:func:`~mcs_host.trust.downloading.run_pip` runs it (``-P``, no input). Imports only the
standard library and ``packaging``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from mcs_host._files import METADATA_LIMIT, InputError, loads_json, read_bytes

from .downloading import PipError, pip_summary, run_pip

# used by mcs-host add: Resolved, install, resolve, uninstall
__all__: list[str] = []

_QUIET = ("--progress-bar", "off", "--no-warn-script-location")


@dataclass(frozen=True, slots=True)
class Resolved:
    """One distribution pip would install."""

    name: str
    """The PEP 503 name."""
    version: str
    requested: bool
    """Whether it is the wheel asked for (else pip brings it for what that needs)."""
    sha256: str | None
    """The sha256 of the file pip would install, hex, when its report names one."""
    requires: tuple[str, ...]
    """Its ``Requires-Dist`` lines, as its metadata has them."""


def resolve(
    wheel: Path,
    report: Path,
    also: Sequence[str] = (),
    *,
    python: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> tuple[Resolved, ...]:
    """What ``pip install WHEEL ALSO...`` would install into ``python``'s environment (the
    wheel itself, unless the same version is installed, and each distribution its
    requirements, and the requirements ``also`` names, bring that is missing or too old
    there), from pip's installation report, which pip writes to ``report``. Raises
    :class:`~mcs_host.trust.downloading.PipError`, naming the wheel."""
    what = wheel.name
    args = ["install", "--dry-run", "--only-binary", ":all:", *_QUIET]
    done = run_pip(
        python, [*args, "--report", str(report), "--", str(wheel), *also], env, what, timeout
    )
    if done.returncode:
        raise PipError(
            what,
            f"pip could not resolve what {what} needs: {pip_summary(done)} (each distribution "
            "it needs must have a wheel on your index: mcs-host installs wheels only)",
        )
    try:
        document = loads_json(read_bytes(report, "pip's report", METADATA_LIMIT), str(report))
    except (OSError, InputError) as error:
        raise PipError(what, f"pip's installation report could not be read: {error}") from None
    items = document.get("install") if isinstance(document, dict) else None
    if not isinstance(items, list):
        raise PipError(what, "pip's installation report has no list of what it would install")
    return tuple(_resolved(item, what) for item in items)


def _resolved(item: Any, what: str) -> Resolved:
    """One item of the report's ``install`` list."""
    metadata = item.get("metadata") if isinstance(item, dict) else None
    if not isinstance(metadata, dict):
        raise PipError(what, "pip's installation report lists a distribution without metadata")
    name, version = metadata.get("name"), metadata.get("version")
    requires = metadata.get("requires_dist") or []
    if not (isinstance(name, str) and isinstance(version, str) and isinstance(requires, list)):
        raise PipError(what, "pip's installation report lists a distribution it cannot name")
    info = item.get("download_info")
    archive = info.get("archive_info") if isinstance(info, dict) else None
    hashes = archive.get("hashes") if isinstance(archive, dict) else None
    sha256 = hashes.get("sha256") if isinstance(hashes, dict) else None
    return Resolved(
        canonicalize_name(name),
        version,
        item.get("requested") is True,
        sha256.lower() if isinstance(sha256, str) else None,
        tuple(str(line) for line in requires),
    )


def install(
    wheels: Sequence[Path],
    *,
    python: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> None:
    """Install exactly the wheel files ``wheels`` into ``python``'s environment in one pip
    call: nothing else is downloaded (``--no-index``), no requirement followed
    (``--no-deps``); an installed distribution of another version is replaced. Raises
    :class:`~mcs_host.trust.downloading.PipError` with pip's error."""
    names = ", ".join(wheel.name for wheel in wheels)
    args = ["install", "--no-deps", "--no-index", "--only-binary", ":all:", *_QUIET, "--"]
    done = run_pip(python, [*args, *map(str, wheels)], env, names, timeout)
    if done.returncode:
        raise PipError(names, f"pip could not install {names}: {pip_summary(done)}")


def uninstall(
    names: Sequence[str],
    *,
    python: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> None:
    """Uninstall the distributions ``names`` from ``python``'s environment, in one pip call.
    Raises :class:`~mcs_host.trust.downloading.PipError` with pip's error."""
    listed = ", ".join(names)
    done = run_pip(python, ["uninstall", "--yes", "--", *names], env, listed, timeout)
    if done.returncode:
        raise PipError(listed, f"pip could not uninstall {listed}: {pip_summary(done)}")
