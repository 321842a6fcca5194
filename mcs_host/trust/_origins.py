"""Origins: whether a file is the standard library's or the running host's, by where it is.

Nothing here trusts a name. The standard library is the interpreter's own library directories
(never a ``site-packages`` below them); the host is the installation the running ``mcs_host``
package was loaded from, found by its files, and the distributions that installation
requires, each resolved to its one installed copy. A second or fake ``mcs-host`` distribution,
or a requirement installed twice, is reported and grants nothing.

Only ``os`` and ``sys`` are imported at module level: the import gate uses this module while
the command line starts, before it may import anything an attacker could have planted.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = [
    "SITE_NAMES",
    "HostInstall",
    "bootstrap_files",
    "editable_tree",
    "host_install",
    "host_package_dir",
    "is_stdlib",
    "real_file",
    "record_files",
    "record_rows",
    "stdlib_roots",
]

SITE_NAMES = frozenset({"site-packages", "dist-packages"})
"""The names of the directories installers put distributions in."""
_ROOTS: tuple[str, ...] | None = None


_REAL_DIRS: dict[str, str] = {}


def real_file(path: str) -> str:
    """``path`` with its directory's symlinks resolved (the file itself is not followed);
    directories are resolved once per process."""
    head, tail = os.path.split(path)
    real = _REAL_DIRS.get(head)
    if real is None:
        real = _REAL_DIRS[head] = os.path.realpath(head)
    return os.path.join(real, tail)


def stdlib_roots() -> tuple[str, ...]:
    """The real paths of this interpreter's standard library directories and zip files."""
    global _ROOTS  # noqa: PLW0603 - computed once per process
    if _ROOTS is None:
        major, minor = sys.version_info[:2]
        candidates = {os.path.dirname(os.__file__)}
        for prefix in {sys.base_prefix, sys.base_exec_prefix}:
            for libdir in {sys.platlibdir, "lib"}:
                candidates.add(os.path.join(prefix, libdir, f"python{major}.{minor}"))
                candidates.add(os.path.join(prefix, libdir, f"python{major}{minor}.zip"))
        _ROOTS = tuple(sorted({os.path.realpath(c) for c in candidates if os.path.exists(c)}))
    return _ROOTS


def is_stdlib(real: str) -> bool:
    """Whether the real path ``real`` lies in the standard library (not in a site directory
    below it, where pyenv and CPython's own layout put ``site-packages``)."""
    for root in stdlib_roots():
        if real.startswith(root) and real[len(root) : len(root) + 1] in (os.sep, ""):
            below = real[len(root) + 1 :].split(os.sep, 1)[0]
            return below not in SITE_NAMES
    return False


def host_package_dir() -> str:
    """The real path of the running ``mcs_host`` package directory."""
    return os.path.dirname(os.path.dirname(real_file(os.path.abspath(__file__))))


class HostInstall(NamedTuple):
    """The running host's installation: its distributions and their files."""

    package_dir: str
    """The real path of the ``mcs_host`` package that is running."""
    metadata_path: str | None
    """The ``*.dist-info`` of the installation it was loaded from (``None``: not found)."""
    distributions: dict[str, str]
    """PEP 503 name -> ``*.dist-info``: mcs-host and what it requires, transitively."""
    files: frozenset[str]
    """Real paths of their installed files."""
    trees: tuple[str, ...]
    """Directories whose every file is the host's (an editable install's source)."""
    findings: tuple[str, ...]
    """What was ignored and why: fake or second mcs-host distributions, ambiguous ones."""

    def owns(self, real: str) -> bool:
        """Whether the real path ``real`` is one of the host's files."""
        if real in self.files:
            return True
        return any(real.startswith(tree + os.sep) for tree in self.trees)


_HOST: HostInstall | None = None
_EXTRAS: frozenset[str] = frozenset()
"""The host's extras whose requirements count as the host's (:func:`grant_extras`)."""


def grant_extras(extras: Iterable[str]) -> None:
    """Count the requirements of the host's ``extras`` (as installed) as the host's own in
    this process, from now on: the command line grants ``mcp`` to ``serve``, and a load grants
    it when it mounts a driver over MCP. Grants only add: a host already resolved gains what
    the new extras require, and nothing is resolved again."""
    global _EXTRAS, _HOST  # noqa: PLW0603 - the process's grants
    added = frozenset(extras) - _EXTRAS
    if not added:
        return
    _EXTRAS |= added
    if _HOST is not None:
        _HOST = _with_extras(_HOST, added)


_BOOTSTRAP: frozenset[str] | None = None


def host_install() -> HostInstall:
    """The running host's installation, resolved once per process."""
    global _HOST  # noqa: PLW0603 - resolved once per process
    if _HOST is None:
        _HOST = _resolve_host(sys.path)
    return _HOST


def bootstrap_files() -> frozenset[str]:
    """The files of the one installed ``packaging``, which resolving the host imports (to read
    requirement markers) before the host's files are known; empty if it is not unique."""
    global _BOOTSTRAP  # noqa: PLW0603 - resolved once per process
    if _BOOTSTRAP is None:
        copies = _copies(sys.path).get("packaging", [])
        _BOOTSTRAP = frozenset(record_files(copies[0])) if len(copies) == 1 else frozenset()
    return _BOOTSTRAP


def _resolve_host(search: list[str]) -> HostInstall:
    from mcs_host.discovery import normalize_name, requires_dist

    package_dir = host_package_dir()
    findings: list[str] = []
    installed = _copies([*search, os.path.dirname(package_dir)])
    copies = installed.get("mcs-host", [])
    owner = [path for path in copies if _loaded_from(path, package_dir)]
    metadata_path = owner[0] if len(owner) == 1 else None
    if len(owner) > 1:
        findings.append(
            "the running mcs_host package is claimed by "
            + " and ".join(owner)
            + ": only the files and requirements all of them list are trusted as the host's; "
            "remove the copies that should not be there"
        )
    for path in copies:
        if path not in owner:
            findings.append(
                f"{path} is an mcs-host distribution, but the running host was not loaded "
                f"from it ({package_dir}); it is ignored and exempts nothing"
            )
    requirements: list[str] = []
    if metadata_path is not None:
        requirements = requires_dist(metadata_path)
    elif owner:
        requirements = sorted(set.intersection(*(set(requires_dist(o)) for o in owner)))
    else:
        checkout = _checkout_requirements(package_dir)
        if checkout is None:
            findings.append(
                f"no installed mcs-host distribution lists {package_dir}; only that package "
                "directory is trusted as the host"
            )
        requirements = checkout or []
    _REQUIREMENTS[:] = requirements
    distributions: dict[str, str] = {}
    files: set[str] = set()
    if metadata_path is not None:
        distributions["mcs-host"] = metadata_path
    if owner:
        files |= set.intersection(*(record_files(o) for o in owner))
    closure = _requirement_closure(requirements, installed, findings, _EXTRAS)
    for project, found, listed in closure:
        if found is not None:
            distributions[normalize_name(project)] = found
        files |= listed
    return HostInstall(
        package_dir, metadata_path, distributions, frozenset(files), (package_dir,), tuple(findings)
    )


_REQUIREMENTS: list[str] = []
"""The requirements of the running host, as its resolution found them."""


def _with_extras(host: HostInstall, extras: frozenset[str]) -> HostInstall:
    """``host`` with what its ``extras`` require, transitively, beyond what it has."""
    from mcs_host.discovery import normalize_name

    findings = list(host.findings)
    installed = _copies([*sys.path, os.path.dirname(host.package_dir)])
    known = {*host.distributions, "mcs-host"}
    distributions, files = dict(host.distributions), set(host.files)
    for project, found, listed in _requirement_closure(
        _REQUIREMENTS, installed, findings, extras, known
    ):
        if found is not None:
            distributions[normalize_name(project)] = found
        files |= listed
    return host._replace(
        distributions=distributions,
        files=frozenset(files),
        findings=tuple(dict.fromkeys(findings)),  # an ambiguous copy is found again
    )


def _checkout_requirements(package_dir: str) -> list[str] | None:
    """The requirements the source checkout the host runs from declares (its
    ``pyproject.toml`` beside the package, naming mcs-host), or ``None``."""
    import tomllib

    from mcs_host._files import CONFIG_LIMIT, InputError, read_bytes
    from mcs_host.discovery import normalize_name

    try:
        data = read_bytes(
            os.path.join(os.path.dirname(package_dir), "pyproject.toml"),
            "pyproject.toml",
            CONFIG_LIMIT,
        )
        project = tomllib.loads(data.decode("utf-8")).get("project", {})
    except (OSError, InputError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return None
    if not isinstance(project, dict) or normalize_name(str(project.get("name", ""))) != "mcs-host":
        return None
    dependencies = project.get("dependencies", [])
    if not isinstance(dependencies, list):
        return None
    optional = project.get("optional-dependencies", {})
    for extra in sorted(_EXTRAS):  # written as an installed distribution's metadata has them
        listed = optional.get(extra, []) if isinstance(optional, dict) else []
        dependencies += [f"{d}; extra == {extra!r}" for d in listed if isinstance(d, str)]
    return [str(d) for d in dependencies]


def _copies(search: Iterable[str]) -> dict[str, list[str]]:
    from mcs_host.discovery import installed_copies

    return installed_copies(list(dict.fromkeys(search)))


def _loaded_from(metadata_path: str, package_dir: str) -> bool:
    """Whether the distribution in ``metadata_path`` is the one ``package_dir`` belongs to:
    its RECORD lists the running ``__init__.py`` with that file's hash, or it is an editable
    install whose source holds ``package_dir``."""
    from .digest import editable_source

    if editable_source(metadata_path) is not None:
        tree = editable_tree(metadata_path)
        if tree is None:
            return False
        root = os.path.realpath(tree)
        return package_dir in (
            os.path.join(root, "mcs_host"),
            os.path.join(root, "src", "mcs_host"),
        )
    site = os.path.dirname(metadata_path)
    if os.path.realpath(os.path.join(site, "mcs_host")) != package_dir:
        return False
    rows = dict(record_rows(metadata_path))
    recorded = rows.get("mcs_host/__init__.py")
    if recorded is None:
        return False
    return _file_hash(os.path.join(package_dir, "__init__.py"), recorded[0]) == recorded[1]


def editable_tree(metadata_path: str) -> str | None:
    """The local directory an editable install's ``direct_url.json`` points at, if any."""
    from urllib.parse import unquote, urlsplit

    from .digest import editable_source

    source = editable_source(metadata_path)
    if source is None or not source.startswith("file://"):
        return None
    return unquote(urlsplit(source).path)


def _file_hash(path: str, algorithm: str) -> str | None:
    import hashlib

    from mcs_host._files import InputError, read_bytes

    from .digest import record_hash

    try:
        data = read_bytes(path, "the host's own file", 64 * 1024 * 1024, follow=False)
        return record_hash(hashlib.new(algorithm, data).digest())
    except (OSError, InputError, ValueError):
        return None


def record_rows(metadata_path: str) -> Iterator[tuple[str, tuple[str, str]]]:
    """``(path, (algorithm, hash))`` of each RECORD row; nothing for an unreadable RECORD."""
    import csv
    import io

    from mcs_host._files import RECORD_LIMIT, InputError, read_text

    try:
        text = read_text(os.path.join(metadata_path, "RECORD"), "RECORD", RECORD_LIMIT)
    except (OSError, InputError):
        return
    for row in csv.reader(io.StringIO(text)):
        if len(row) == 3:
            algorithm, _, value = row[1].partition("=")
            yield row[0], (algorithm, value)


def record_files(metadata_path: str) -> set[str]:
    """The real paths of the files a distribution's RECORD lists inside its site directory."""
    site = os.path.realpath(os.path.dirname(metadata_path))
    found = set()
    for path, _ in record_rows(metadata_path):
        parts = path.split("/")
        if not path or path.startswith(("/", "\\")) or ".." in parts:
            continue  # scripts and data land outside the site directory
        found.add(f"{site}/{path}" if os.sep == "/" else os.path.join(site, *parts))
    return found


def _requirement_closure(
    requirements: list[str],
    installed: dict[str, list[str]],
    findings: list[str],
    extras: frozenset[str] = frozenset(),
    known: set[str] | None = None,
) -> Iterator[tuple[str, str | None, set[str]]]:
    """``(project, dist-info, files)`` of every distribution the host's ``requirements``
    (with the host's granted ``extras``) name, transitively, but those ``known`` already. A
    requirement installed more than once is reported, has no one dist-info, and is granted
    only the files (and requirements) every copy lists."""
    from packaging.requirements import InvalidRequirement, Requirement

    from mcs_host.discovery import normalize_name, requires_dist

    queue: list[tuple[list[str], frozenset[str]]] = [(requirements, extras)]
    seen: set[str] = {"mcs-host"} | (known or set())
    while queue:
        lines, extras = queue.pop()
        for line in lines:
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                continue
            marker = requirement.marker
            wanted = extras | {""}
            if marker is not None and not any(marker.evaluate({"extra": e}) for e in wanted):
                continue
            project = normalize_name(requirement.name)
            if project in seen:
                continue
            seen.add(project)
            copies = installed.get(project, [])
            if not copies:
                continue
            if len(copies) == 1:
                yield project, copies[0], record_files(copies[0])
                queue.append((requires_dist(copies[0]), frozenset(requirement.extras)))
                continue
            findings.append(
                f"{project}, which the host requires, is installed {len(copies)} times "
                f"({', '.join(copies)}): only the files and requirements every copy lists "
                "are trusted as the host's; remove the copies that should not be there"
            )
            shared = set.intersection(*(record_files(c) for c in copies))
            needs = set.intersection(*(set(requires_dist(c)) for c in copies))
            yield project, None, shared
            queue.append((sorted(needs), frozenset(requirement.extras)))
