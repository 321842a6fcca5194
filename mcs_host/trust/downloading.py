"""A wheel from the index the user's pip is configured for, downloaded by that pip, and the
index settings it used.

``pip download --no-deps --only-binary :all:`` does the download, so the user's indexes,
credentials, proxies, certificates and constraints apply as they do to ``pip install``, and
nothing of the package runs: pip never builds a source distribution here. pip runs as ``python
-P -m pip`` without input, so a ``pip`` package in the current directory is never what runs
and pip never waits for a password. :func:`pip_config` reads the settings as ``pip download``
does (its configuration files' ``[global]`` then ``[download]`` sections, then the ``PIP_*``
variables), for :func:`~mcs_host.trust.package_index.fetch_provenance` to ask the same indexes.

Imports only the standard library and ``packaging``; each call runs one pip process.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from mcs_host.trust.package_index import PackageIndexError

# used by mcs-host add (and trust/installing): DEFAULT_INDEX, PipConfig, PipError, download,
# download_all, pip_config, pip_index_urls, pip_summary, run_pip
__all__: list[str] = []

DEFAULT_INDEX = "https://pypi.org/simple/"
"""pip's index when none is configured."""

_SETTINGS = ("index-url", "extra-index-url", "find-links", "no-index", "cert")
_TRUE = frozenset({"1", "y", "yes", "t", "true", "on"})
_SUMMARY_CHARS = 600


class PipError(PackageIndexError):
    """pip failed, or did not download one wheel of the requirement: the message says which
    and what to do."""

    def __init__(self, requirement: str | None, message: str) -> None:
        self.requirement = requirement
        """The requirement being downloaded, ``None`` when pip's settings were read."""
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class PipConfig:
    """Where ``pip download`` looks for files, as pip reads it."""

    index_url: str
    """The main index (``index-url``), :data:`DEFAULT_INDEX` when none is set."""
    extra_index_urls: tuple[str, ...]
    """``extra-index-url``, in order."""
    find_links: tuple[str, ...]
    """``find-links``: directories and pages of files, which serve no provenance."""
    no_index: bool
    """``no-index``: no index is asked, only find-links."""
    cert: str | None
    """``cert``: the CA bundle pip checks HTTPS with, when not the system's."""

    @property
    def indexes(self) -> tuple[str, ...]:
        """The index URLs pip asks, in order (none under ``no-index``)."""
        return () if self.no_index else (self.index_url, *self.extra_index_urls)


def pip_config(
    python: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> PipConfig:
    """The index settings of ``python``'s pip (default: this interpreter's) as ``pip
    download`` reads them: ``pip config list`` for its files (``[global]``, then
    ``[download]``), then the ``PIP_*`` variables of ``env`` (default: this process's)."""
    environment = os.environ if env is None else env
    done = run_pip(python, ["config", "list"], environment, None, timeout=120)
    if done.returncode:
        raise PipError(None, f"pip config list failed: {pip_summary(done)}")
    settings: dict[str, str] = {}
    for section in ("global", "download"):
        for line in done.stdout.splitlines():
            key, _, value = line.partition("=")
            where, _, name = key.partition(".")
            name = name.lower().replace("_", "-")
            if where == section and name in _SETTINGS:
                settings[name] = _literal(value)
    for name in _SETTINGS:
        variable = "PIP_" + name.upper().replace("-", "_")
        if variable in environment:
            settings[name] = environment[variable]
    return PipConfig(
        index_url=settings.get("index-url", "").strip() or DEFAULT_INDEX,
        extra_index_urls=tuple(settings.get("extra-index-url", "").split()),
        find_links=tuple(settings.get("find-links", "").split()),
        no_index=settings.get("no-index", "").strip().lower() in _TRUE,
        cert=settings.get("cert", "").strip() or None,
    )


def pip_index_urls(
    python: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """The index URLs ``python``'s pip is configured for, in the order it asks them."""
    return pip_config(python, env).indexes


def download(
    requirement: str,
    dest: Path,
    *,
    python: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> Path:
    """Download the one wheel of ``requirement`` (``NAME`` or ``NAME<specifier>``) into the
    empty directory ``dest`` with ``python``'s pip and its settings; its path. Raises
    :class:`PipError`, naming the requirement, when pip fails or brings anything but one
    wheel of that project and version."""
    (wheel,) = download_all([requirement], dest, python=python, env=env, timeout=timeout)
    return wheel


def download_all(
    requirements: Sequence[str],
    dest: Path,
    *,
    python: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> list[Path]:
    """Download the one wheel of each of ``requirements`` (as :func:`download` takes one,
    each another project) into the empty directory ``dest`` with one run of ``python``'s
    pip; their paths, in the order given. Raises :class:`PipError`, naming the requirement
    when there is one (else them all), when pip fails or brings anything but one wheel of
    each project and version."""
    wanted = [_requirement(requirement) for requirement in requirements]
    named = requirements[0] if len(requirements) == 1 else ", ".join(requirements)
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise PipError(named, f"{dest} is not empty: download into an empty directory")
    args = ["download", "--no-deps", "--only-binary", ":all:", "--progress-bar", "off"]
    done = run_pip(
        python, [*args, "--dest", str(dest), "--", *map(str, wanted)], env, named, timeout
    )
    if done.returncode:
        raise PipError(
            named,
            f"pip could not download a wheel of {named}: {pip_summary(done)} (mcs-host "
            "installs wheels only)",
        )
    found: dict[str, tuple[Path, Version]] = {}
    for path in sorted(dest.iterdir()):
        if not path.name.endswith(".whl"):
            raise PipError(named, f"pip download of {named} left {path.name}, not a wheel")
        try:
            name, version, _, _ = parse_wheel_filename(path.name)
        except InvalidWheelFilename as error:
            raise PipError(named, f"pip downloaded {path.name}: {error}") from None
        if name in found:
            raise PipError(named, f"pip download of {named} left two wheels of {name}")
        found[name] = (path, version)
    wheels: list[Path] = []
    for requirement, project in zip(requirements, wanted, strict=True):
        got = found.pop(canonicalize_name(project.name), None)
        if got is None:
            left = ", ".join(p.name for p in sorted(dest.iterdir())) or "nothing"
            raise PipError(
                requirement, f"pip download of {requirement} left {left}, no wheel of it"
            )
        path, version = got
        if not project.specifier.contains(version, prereleases=True):
            raise PipError(requirement, f"pip downloaded {path.name}, which is not {requirement}")
        wheels.append(path)
    if found:
        surplus = ", ".join(path.name for path, _ in found.values())
        raise PipError(
            named, f"pip download of {named} left {surplus} too, which was not asked for"
        )
    return wheels


def _requirement(requirement: str) -> Requirement:
    """``requirement`` read as a project name with an optional version specifier."""
    try:
        wanted = Requirement(requirement)
    except InvalidRequirement as error:
        why = str(error).splitlines()[0]
    else:
        if wanted.url is None and wanted.marker is None and not wanted.extras:
            return wanted
        why = "it names a URL" if wanted.url else "it names extras or an environment marker"
    raise PipError(
        requirement,
        f"{requirement!r} is not a project to add ({why}): give its name on the index, "
        "with a version if you want one (NAME or NAME==1.2)",
    )


def run_pip(
    python: str | os.PathLike[str] | None,
    args: list[str],
    env: Mapping[str, str] | None,
    requirement: str | None,
    timeout: float,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -P -m pip ARGS`` without input, its output captured; a :class:`PipError`
    naming ``requirement`` when pip cannot be run or does not finish within ``timeout``."""
    interpreter = os.fspath(python) if python is not None else sys.executable
    command = [interpreter, "-P", "-m", "pip", "--disable-pip-version-check", "--no-input"]
    try:
        done = subprocess.run(
            [*command, *args],
            capture_output=True,
            text=True,
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise PipError(requirement, f"pip {args[0]} did not finish within {timeout:g} s") from None
    except OSError as error:
        raise PipError(requirement, f"could not run {interpreter}: {error}") from None
    if done.returncode and "No module named pip" in done.stderr:
        raise PipError(
            requirement, f"pip is not installed for {interpreter}: run {interpreter} -m ensurepip"
        )
    return done


def pip_summary(done: subprocess.CompletedProcess[str]) -> str:
    """pip's ``ERROR:`` lines (else its last line of output), on one line."""
    lines = [line.strip() for line in (done.stderr + "\n" + done.stdout).splitlines()]
    errors = [line.removeprefix("ERROR:").strip() for line in lines if line.startswith("ERROR:")]
    said = "; ".join(errors) or next((line for line in reversed(lines) if line), "no output")
    return said if len(said) <= _SUMMARY_CHARS else said[: _SUMMARY_CHARS - 1] + "…"


def _literal(value: str) -> str:
    """A value as ``pip config list`` prints it (its ``repr``), read back."""
    try:
        read = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value
    return read if isinstance(read, str) else value
