"""Bumping a driver's version in one step: ``pyproject.toml`` and every ``mcs-driver.json``.

A driver's version is written twice, in ``[project] version`` and in the manifest beside each
entry point module, and the host refuses a driver whose two versions differ. :func:`bump_version`
rewrites both: the ``version = "..."`` line of ``[project]`` in place (the rest of the file is
kept byte for byte) and the ``version`` of each driver in the manifests of the packages that
``[project.entry-points."mcs.drivers"]`` names. A file that is a symbolic link is refused,
neither read nor written through (a cloned project's link may lead anywhere); each is
replaced whole (:func:`mcs_host._files.write_atomic`), keeping its mode.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path

from packaging.version import InvalidVersion, Version

from mcs_host._files import CONFIG_LIMIT, MANIFEST_LIMIT, SHARED, read_text, write_atomic
from mcs_host.interfaces import MANIFEST_FILE, is_semver

__all__ = ["bump_version"]

_PROJECT_VERSION = re.compile(r'^(version\s*=\s*)(["\'])([^"\']*)\2', re.MULTILINE)


def bump_version(directory: str | Path, version: str) -> list[Path]:
    """Set the version of the driver project in ``directory`` to ``version`` in its
    ``pyproject.toml`` and manifests; the files changed. Raises ``ValueError`` naming the file
    and what is wrong; nothing is written unless every file can be."""
    if not is_semver(version):
        raise ValueError(f"{version!r} is not a SemVer version such as 1.2.0")
    try:
        Version(version)
    except InvalidVersion:
        raise ValueError(f"{version!r} is SemVer but not a PEP 440 version") from None
    root = Path(directory)
    pyproject = root / "pyproject.toml"
    try:
        text = _read(pyproject, CONFIG_LIMIT)
        document = tomllib.loads(text)
    except FileNotFoundError:
        raise ValueError(f"{pyproject}: no such file") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{pyproject}: {exc}") from None
    project = document.get("project", {})
    if "version" not in project:
        raise ValueError(f"{pyproject}: [project] has no version (a dynamic version is not bumped)")
    entry_points = project.get("entry-points", {}).get("mcs.drivers", {})
    if not entry_points:
        raise ValueError(f'{pyproject}: declares no [project.entry-points."mcs.drivers"]')
    updated = {pyproject: _with_project_version(text, version, pyproject)}
    for value in entry_points.values():
        manifest = _manifest_of(root, str(value))
        if manifest not in updated:
            updated[manifest] = _with_manifest_version(manifest, version)
    for path, content in updated.items():
        try:
            write_atomic(path, content, path.name, mode=SHARED)
        except OSError as exc:
            raise ValueError(str(exc)) from None
    return list(updated)


def _read(path: Path, limit: int) -> str:
    """The text of the project's file ``path``; ``ValueError`` when it is a symbolic link,
    saying where it leads (a link is neither read nor written through)."""
    if path.is_symlink():
        raise ValueError(
            f"{path}: a symbolic link (to {os.readlink(path)}); bump writes no file through a "
            "link: bump the project it leads to, or put the file itself there"
        )
    return read_text(path, path.name, limit, follow=False)


def _with_project_version(text: str, version: str, path: Path) -> str:
    """``text`` with the ``version`` line of its ``[project]`` table set to ``version``."""
    start = re.search(r"^\[project\]\s*$", text, re.MULTILINE)
    if start is None:
        raise ValueError(f"{path}: no [project] table")
    following = re.search(r"^\[", text[start.end() :], re.MULTILINE)
    end = start.end() + following.start() if following else len(text)
    table, count = _PROJECT_VERSION.subn(
        lambda m: f"{m.group(1)}{m.group(2)}{version}{m.group(2)}", text[start.end() : end], 1
    )
    if not count:
        raise ValueError(f"{path}: [project] has no version line to rewrite")
    return text[: start.end()] + table + text[end:]


def _manifest_of(root: Path, value: str) -> Path:
    """The manifest beside the module of entry point ``value`` (``package.module:Object``)."""
    parts = value.partition(":")[0].strip().split(".")
    for base in (root, root / "src"):
        package = base.joinpath(*parts)
        folder = package if package.is_dir() else package.parent
        if (folder / MANIFEST_FILE).is_file():
            return folder / MANIFEST_FILE
    raise ValueError(f"{root}: no {MANIFEST_FILE} beside the entry point module of {value!r}")


def _with_manifest_version(path: Path, version: str) -> str:
    try:
        text = _read(path, MANIFEST_LIMIT)
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    try:
        manifest = json.loads(text)
        drivers = manifest["drivers"]
        for meta in drivers.values():
            meta["version"] = version
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not a driver manifest ({exc})") from None
    return json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
