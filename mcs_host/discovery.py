"""Discovery: installed metadata -> driver candidates, without importing any driver code.

One module: discovery is the one reader of installed metadata, whose records, entry point
parser and scans share the private readers of a metadata directory; it is long because every
question the host asks of installed metadata (entry points, names and versions, copies,
requirements) is answered here, and ``mcs-host list`` imports this module alone (no pydantic,
no packaging).

Reads each distribution's ``entry_points.txt`` on the search path, keeps the entries of the
``mcs.drivers`` group, and reports what would make a candidate ambiguous: one distribution
installed twice, two distributions claiming one label, an entry point that does not name an
object, a label that cannot prefix tool names.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ._files import METADATA_LIMIT, InputError, Opened, read_text

if TYPE_CHECKING:  # imported where needed: importlib.metadata costs mcs-host list ~25 ms
    from importlib import metadata

    from packaging.requirements import Requirement

__all__ = [
    "ENTRY_POINT_GROUP",
    "LABEL_RULE",
    "PLUGIN_GROUP",
    "Candidate",
    "Discovery",
    "Problem",
    "declare",
    "discover",
    "installed_copies",
    "installed_distribution",
    "installed_projects",
    "is_valid_label",
    "normalize_name",
    "parse_entry_points",
    "requires_dist",
    "shadowing",
]

ENTRY_POINT_GROUP = "mcs.drivers"
"""The entry point group drivers register in: ``label = module:object``."""
PLUGIN_GROUP = "mcs.host_plugins"
"""The entry point group host plugins register in: ``name = module`` or ``module:object``."""

_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,31}$")
LABEL_RULE = "1 to 32 letters, digits, '-' or single '_', starting with a letter or digit"
"""What a driver's label must be: labels prefix tool names."""
_NAME_SEPARATORS = re.compile(r"[-_.]+")
_METADATA_SUFFIXES = (".dist-info", ".egg-info")


def is_valid_label(label: str) -> bool:
    """Whether ``label`` follows :data:`LABEL_RULE`."""
    return bool(_LABEL.match(label))


def labels_argument(value: object, argument: str) -> tuple[str, ...]:
    """``value`` given as labels: a ``str`` is one label, else an iterable of ``str``.
    Raises :class:`TypeError` naming ``argument`` (``"load_drivers() argument 'labels'"``)
    for anything else, so a string is never read letter by letter."""
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, Iterable) or isinstance(value, (bytes, bytearray)):
        raise TypeError(
            f"{argument} must be a str (one label) or an iterable of str, "
            f"not {type(value).__name__}"
        )
    labels = tuple(value)
    for label in labels:
        if not isinstance(label, str):
            raise TypeError(
                f"{argument} must hold str labels, not {type(label).__name__} {label!r}"
            )
    return labels


def normalize_name(name: str) -> str:
    """The PEP 503 normalized form of a distribution name: ``Foo_Bar`` -> ``foo-bar``."""
    return _NAME_SEPARATORS.sub("-", name).lower()


@dataclass(frozen=True, slots=True)
class Candidate:
    """A driver an installed distribution declares in the ``mcs.drivers`` group."""

    label: str
    """The entry point name: the driver's label in the host."""
    value: str
    """The entry point value, ``module:object``."""
    distribution: str
    """The distribution's name as its metadata spells it."""
    version: str
    """The distribution's version."""
    metadata_path: str
    """The distribution's ``*.dist-info`` (or ``*.egg-info``) directory."""
    location: str
    """The directory on the search path the distribution is installed in."""
    declared: bool = False
    """Declared by a registry for a distribution that ships no entry point for it."""

    @property
    def project(self) -> str:
        """The normalized distribution name (PEP 503)."""
        return normalize_name(self.distribution)

    @property
    def module(self) -> str:
        """The module part of the entry point value."""
        return self.value.partition(":")[0].strip()

    @property
    def attr(self) -> str:
        """The object part of the entry point value (may be dotted)."""
        return self.value.partition(":")[2].strip()


@dataclass(frozen=True, slots=True)
class Problem:
    """Something discovery found wrong, naming the labels and distributions involved."""

    code: str
    """One of ``duplicate-distribution``, ``label-conflict``, ``invalid-entry-point``,
    ``invalid-label``, ``unreadable-metadata``, ``plugin-shadows-driver``."""
    message: str
    labels: tuple[str, ...] = ()
    distributions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Discovery:
    """The outcome of :func:`discover`: candidates in a stable order and the problems found."""

    candidates: tuple[Candidate, ...]
    problems: tuple[Problem, ...]
    group: str = ENTRY_POINT_GROUP
    path: tuple[str, ...] = field(default=())
    _by_label: dict[str, tuple[Candidate, ...]] = field(
        init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        by_label: dict[str, list[Candidate]] = {}
        for candidate in self.candidates:
            by_label.setdefault(candidate.label, []).append(candidate)
        object.__setattr__(self, "_by_label", {k: tuple(v) for k, v in by_label.items()})

    def problems_for(self, candidate: Candidate) -> tuple[Problem, ...]:
        """The problems that name ``candidate``'s label and distribution."""
        return tuple(
            problem
            for problem in self.problems
            if (not problem.labels or candidate.label in problem.labels)
            and (not problem.distributions or candidate.project in problem.distributions)
        )

    def get(self, label: str) -> tuple[Candidate, ...]:
        """The candidates claiming ``label`` (more than one means a conflict)."""
        return self._by_label.get(label, ())

    def without(self, dropped: Iterable[Candidate]) -> Discovery:
        """This discovery without the ``dropped`` candidates, label conflicts worked out
        again over the rest (how a deny or allow rule settles a conflict)."""
        gone = set(dropped)
        if not gone:
            return self
        candidates = tuple(c for c in self.candidates if c not in gone)
        problems = [p for p in self.problems if p.code != "label-conflict"]
        problems.extend(_label_conflicts(candidates))
        problems.sort(key=lambda p: (p.code, p.labels, p.distributions, p.message))
        return Discovery(candidates, tuple(problems), self.group, self.path)


@dataclass(frozen=True, slots=True)
class _Installed:
    """One distribution's metadata directory seen on the search path."""

    project: str
    metadata_path: str
    location: str
    dist: metadata.Distribution | None = None
    """Only for a distribution another finder serves (a zip file); else files are read."""


def discover(
    path: Sequence[str | os.PathLike[str]] | None = None,
    group: str = ENTRY_POINT_GROUP,
    *,
    require_object: bool = True,
) -> Discovery:
    """Find the drivers declared in entry point ``group`` on ``path`` (default ``sys.path``).

    Only metadata files are read; no module of any distribution is imported or resolved.
    With ``require_object`` false, a value may name a module alone (as host plugins do).
    """
    search = tuple(os.fspath(p) for p in (sys.path if path is None else path))
    problems: list[Problem] = []
    candidates: list[Candidate] = []
    copies: dict[str, list[_Installed]] = {}
    for installed in _installed(search):
        copies.setdefault(installed.project, []).append(installed)
    for project, seen in copies.items():
        declared = [(inst, _read_entry_points(inst, group, problems)) for inst in seen]
        if not any(entries for _, entries in declared):
            continue
        used, entries = declared[0]
        if len(seen) > 1:
            problems.append(_duplicate(project, declared))
        candidates.extend(_candidates(used, entries, problems, require_object))
    problems.extend(_label_conflicts(candidates))
    candidates.sort(key=lambda c: (c.label, c.project, c.version, c.metadata_path))
    problems.sort(key=lambda p: (p.code, p.labels, p.distributions, p.message))
    return Discovery(tuple(candidates), tuple(problems), group, search)


def declare(found: Discovery, declarations: Iterable[tuple[str, str, str]]) -> Discovery:
    """``found`` with a candidate for each ``(label, distribution, module:object)`` a registry
    declares, when that distribution is installed and has no entry point of that label.

    This is how drivers that ship no entry point (the published ``mcs-driver-*`` packages)
    are found. Label conflicts are worked out again over all candidates.
    """
    candidates = list(found.candidates)
    problems = [p for p in found.problems if p.code != "label-conflict"]
    have = {(c.project, c.label) for c in candidates}
    for label, distribution, value in declarations:
        project = normalize_name(distribution)
        if (project, label) in have:
            continue  # the distribution's own entry point provides it
        copies = list(_installed(found.path, name=project))
        if not copies:
            continue
        if len(copies) > 1:
            problems.append(_duplicate(project, [(c, [(label, value)]) for c in copies]))
        name, version = _name_and_version(copies[0], problems)
        candidate = Candidate(
            label, value, name, version, copies[0].metadata_path, copies[0].location, True
        )
        reason = _entry_point_error(value)
        if reason:
            problems.append(
                Problem(
                    "invalid-entry-point",
                    f"driver {label!r} declared for {name}: {value!r} {reason}",
                    labels=(label,),
                    distributions=(project,),
                )
            )
        candidates.append(candidate)
        have.add((project, label))
    problems.extend(_label_conflicts(candidates))
    candidates.sort(key=lambda c: (c.label, c.project, c.version, c.metadata_path))
    problems.sort(key=lambda p: (p.code, p.labels, p.distributions, p.message))
    return Discovery(tuple(candidates), tuple(problems), found.group, found.path)


def shadowing(drivers: Discovery, plugins: Discovery) -> tuple[Problem, ...]:
    """A ``plugin-shadows-driver`` problem for each host plugin among ``plugins`` whose label
    a driver among ``drivers`` has, naming both distributions: the one label means two
    things (``mcs-host lock LABEL`` pins the driver alone)."""
    found = []
    for plugin in plugins.candidates:
        for driver in drivers.get(plugin.label):
            found.append(
                Problem(
                    "plugin-shadows-driver",
                    f"host plugin {plugin.label!r} of {plugin.distribution} {plugin.version} "
                    f"has the label of the driver {driver.label!r} of {driver.distribution} "
                    f"{driver.version}: `mcs-host lock {plugin.label}` pins the driver alone; "
                    f"the host plugin, once pinned (`mcs-host lock --plugin {plugin.label}`), "
                    "runs in every command",
                    labels=(plugin.label,),
                    distributions=tuple(sorted({plugin.project, driver.project})),
                )
            )
    return tuple(found)


def installed_distribution(project: str, path: Sequence[str]) -> tuple[str, str, str, str] | None:
    """``(name, version, metadata directory, location)`` of the first installed copy of the
    distribution ``project`` on ``path``, or ``None``."""
    for installed in _installed(path, name=normalize_name(project)):
        name, version = _name_and_version(installed, [])
        return name, version, installed.metadata_path, installed.location
    return None


def installed_projects(path: Sequence[str]) -> dict[str, str]:
    """Every distribution on ``path`` by PEP 503 name: the metadata directory of its first copy."""
    found: dict[str, str] = {}
    for installed in _installed(path):
        found.setdefault(installed.project, installed.metadata_path)
    return found


def installed_copies(path: Sequence[str]) -> dict[str, list[str]]:
    """Every distribution on ``path`` by PEP 503 name: the metadata directories of all its
    copies, in path order (more than one: which is meant is ambiguous)."""
    found: dict[str, list[str]] = {}
    for installed in _installed(path):
        found.setdefault(installed.project, []).append(installed.metadata_path)
    return found


@functools.lru_cache(maxsize=4096)
def parse_requirement(line: str) -> Requirement:
    """A ``Requires-Dist`` line parsed with ``packaging`` (imported only here, not for
    listing); drivers repeat the same few lines, so each is parsed once. Raises
    ``InvalidRequirement``."""
    from packaging.requirements import Requirement  # noqa: PLC0415 - list needs none

    return Requirement(line)


def requires_dist(metadata_path: str) -> list[str]:
    """The ``Requires-Dist`` lines of the installed distribution in ``metadata_path``, read
    from the header of its METADATA (an ``.egg-info`` without one: as importlib reads it)."""
    path = os.path.join(metadata_path, "METADATA")
    if not os.path.lexists(path):
        return _egg_info_requires(metadata_path)
    found = []
    try:
        for raw in _header_lines(path):
            if raw.startswith(b"Requires-Dist:"):  # only these are decoded: a bad byte
                line = raw.decode("utf-8", "replace")  # elsewhere is not our business
                found.append(line.partition(":")[2].strip())
    except (OSError, InputError):
        return []  # the scan of its files names what is wrong with it
    return found


def _egg_info_requires(metadata_path: str) -> list[str]:
    """An ``.egg-info``'s ``requires.txt`` as Requires-Dist lines, as importlib reads it:
    a ``[extra:marker]`` section adds its extra and marker to the lines below it."""
    try:
        text = read_text(
            os.path.join(metadata_path, "requires.txt"),
            "requires.txt",
            METADATA_LIMIT,
            follow=False,
        )
    except (OSError, InputError):
        return []
    found, marker = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            extra, _, condition = line[1:-1].partition(":")
            parts = [f'extra == "{extra}"'] if extra else []
            parts += [f"({condition})"] if condition else []
            marker = " and ".join(parts)
            continue
        found.append(f"{line}; {marker}" if marker else line)
    return found


def _header_lines(path: str) -> Generator[bytes, None, None]:
    """The lines of a METADATA file's header (up to the first blank line), read through one
    non-blocking descriptor of a regular file and at most :data:`METADATA_LIMIT` bytes."""
    with Opened.open(path, os.path.basename(path), follow=False) as opened:
        pending = b""
        total = 0
        while total <= METADATA_LIMIT:
            chunk = os.read(opened.fd, 65536)
            total += len(chunk)
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop() if chunk else b""
            for raw in lines:
                line = raw.removesuffix(b"\r")
                if not line:
                    return  # the end of the header; a line of blanks continues a field
                yield line
            if not chunk:
                return
        raise InputError(f"{path}: its header runs past {METADATA_LIMIT} bytes")


def _installed(search: Sequence[str], name: str | None = None) -> Iterator[_Installed]:
    """Every distribution on ``search`` (or those named ``name``) in path order, each
    metadata directory once; within a directory, in name order."""
    seen: set[str] = set()
    for entry in search:
        if entry and not os.path.isdir(entry):
            if os.path.isfile(entry):
                yield from _served(entry, name)  # a zip file
            continue
        listing = _listing(entry or ".")
        if listing is None:
            continue
        real_base, every, by_project = listing
        for child, is_link, project in every if name is None else by_project.get(name, ()):
            meta_path = os.path.join(real_base, child)
            if is_link:
                meta_path = os.path.realpath(meta_path)
            if meta_path in seen or not os.path.isdir(meta_path):
                continue  # reached twice (lib64 -> lib), or a PKG-INFO file
            seen.add(meta_path)
            yield _Installed(project, meta_path, os.path.dirname(meta_path))


_Child = tuple[str, bool, str]
_Listing = tuple[str, list[_Child], dict[str, list[_Child]]]
_LISTINGS: dict[str, tuple[tuple[int, int, int], _Listing]] = {}


def _listing(base: str) -> _Listing | None:
    """A search path directory's real path and its metadata directories ``(name, is a
    symlink, project)``, in name order and by PEP 503 name; listed once per process, and again
    only when the directory changed (its inode, modification time or size)."""
    try:
        info = os.stat(base)
    except OSError:
        return None
    stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
    known = _LISTINGS.get(base)
    if known is not None and known[0] == stamp:
        return known[1]
    try:
        with os.scandir(base) as listing:
            children = sorted(
                (child.name, child.is_symlink())
                for child in listing
                if child.name.lower().endswith(_METADATA_SUFFIXES)
            )
    except OSError:
        return None
    every: list[_Child] = []
    by_project: dict[str, list[_Child]] = {}
    for child, is_link in children:
        project = normalize_name(child.rpartition(".")[0].partition("-")[0])
        if project:
            every.append((child, is_link, project))
            by_project.setdefault(project, []).append(every[-1])
    found = (os.path.realpath(base), every, by_project)
    _LISTINGS[base] = (stamp, found)
    return found


def _served(entry: str, name: str | None) -> Iterator[_Installed]:
    """Distributions in a search path entry that is a file (a zip), as importlib finds them."""
    from importlib import metadata  # noqa: PLC0415 - only for zip files on the path

    found = (
        metadata.distributions(path=[entry])
        if name is None
        else metadata.distributions(name=name, path=[entry])
    )
    for dist in found:
        project = normalize_name(_field(dist.metadata, "Name") or "?")
        where = str(getattr(dist, "_path", None) or entry)
        yield _Installed(project, where, where, dist)


def _read_text(installed: _Installed, filename: str) -> str | None:
    """A metadata file's text; ``None`` when it does not exist. A file that is not a regular
    file, is too big or is not UTF-8 raises ``InputError``."""
    if installed.dist is not None:
        return installed.dist.read_text(filename)
    path = os.path.join(installed.metadata_path, filename)
    try:
        return read_text(path, filename, METADATA_LIMIT, follow=False)
    except FileNotFoundError:
        return None


def _read_entry_points(
    installed: _Installed, group: str, problems: list[Problem]
) -> list[tuple[str, str]]:
    """The ``(name, value)`` pairs of ``group``, parsed as ``importlib.metadata`` does."""
    try:
        text = _read_text(installed, "entry_points.txt")
    except (OSError, UnicodeDecodeError, InputError) as exc:
        problems.append(_unreadable(installed, "entry_points.txt", exc))
        return []
    if not text or group not in text:
        return []
    entries, bad_lines = parse_entry_points(text, group)
    for number, line in bad_lines:
        problems.append(
            Problem(
                "invalid-entry-point",
                f"{installed.metadata_path}/entry_points.txt line {number}: "
                f"expected 'label = module:object', got {line!r}",
                distributions=(installed.project,),
            )
        )
    return entries


def parse_entry_points(
    text: str, group: str
) -> tuple[list[tuple[str, str]], list[tuple[int, str]]]:
    """The ``(name, value)`` pairs of ``group`` in an ``entry_points.txt``, parsed as
    ``importlib.metadata`` does, and the ``(line number, line)`` of lines that are not pairs."""
    entries: list[tuple[str, str]] = []
    bad: list[tuple[int, str]] = []
    section: str | None = None
    for number, raw_line in enumerate(text.splitlines(), 1):
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        if section != group:
            continue
        name, sep, value = line.partition("=")
        if sep:
            entries.append((name.strip(), value.strip()))
        else:
            bad.append((number, line))
    return entries, bad


def _candidates(
    installed: _Installed,
    entries: Iterable[tuple[str, str]],
    problems: list[Problem],
    require_object: bool,
) -> Iterator[Candidate]:
    distribution, version = _name_and_version(installed, problems)
    for label, value in entries:
        candidate = Candidate(
            label, value, distribution, version, installed.metadata_path, installed.location
        )
        reason = _entry_point_error(value, require_object)
        if reason:
            problems.append(
                Problem(
                    "invalid-entry-point",
                    f"driver {label!r} of {distribution} {version}: entry point {value!r} {reason}",
                    labels=(label,),
                    distributions=(candidate.project,),
                )
            )
        if not is_valid_label(label):
            problems.append(
                Problem(
                    "invalid-label",
                    f"driver {label!r} of {distribution} {version}: a label is {LABEL_RULE}",
                    labels=(label,),
                    distributions=(candidate.project,),
                )
            )
        yield candidate


def _entry_point_error(value: str, require_object: bool = True) -> str | None:
    """Why ``value`` is not a ``module:object`` reference, or ``None`` if it is one."""
    module, sep, attr = value.partition(":")
    if not sep and require_object:
        return "does not name an object (expected 'module:object')"
    if "[" in value:
        return "has extras, which drivers do not support"
    parts = ((module, "module"), (attr, "object")) if sep else ((module, "module"),)
    for part, what in parts:
        names = part.strip().split(".")
        if not all(name.isidentifier() for name in names):
            return f"has an invalid {what} path {part.strip()!r}"
    return None


def _duplicate(project: str, declared: list[tuple[_Installed, list[tuple[str, str]]]]) -> Problem:
    used = declared[0][0]
    copies = "; ".join(
        f"{_version_of(inst)} at {inst.metadata_path}" + (" (used)" if inst is used else "")
        for inst, _ in declared
    )
    labels = sorted({label for _, entries in declared for label, _ in entries})
    return Problem(
        "duplicate-distribution",
        f"{project} is installed {len(declared)} times on the search path: {copies}",
        labels=tuple(labels),
        distributions=(project,),
    )


def _name_and_version(installed: _Installed, problems: list[Problem]) -> tuple[str, str]:
    try:
        if installed.dist is not None:
            meta = installed.dist.metadata
            name, version = _field(meta, "Name"), _field(meta, "Version")
            return name or installed.project, version or "?"
        fields = _core_fields(installed.metadata_path)
        return fields.get("Name") or installed.project, fields.get("Version") or "?"
    except (OSError, UnicodeDecodeError, InputError) as exc:
        problems.append(_unreadable(installed, "METADATA", exc))
        return installed.project, "?"


def _field(meta: metadata.PackageMetadata, key: str) -> str | None:
    """A field of ``meta``, or ``None`` (indexing a missing one warns from Python 3.12)."""
    return meta[key] if key in meta else None  # noqa: SIM401 - the protocol has no get()


def _core_fields(metadata_path: str) -> dict[str, str]:
    """``Name`` and ``Version`` from the header of METADATA (or PKG-INFO), reading only as far
    as they are: the email parser importlib uses reads and parses the whole file."""
    for filename in ("METADATA", "PKG-INFO"):
        path = os.path.join(metadata_path, filename)
        if not os.path.lexists(path):
            continue
        fields: dict[str, str] = {}
        lines = _header_lines(path)
        try:
            for line in lines:
                key, sep, value = line.partition(b":")
                if sep and key in (b"Name", b"Version"):
                    fields.setdefault(key.decode(), value.strip().decode("utf-8"))
                    if len(fields) == 2:
                        break
        finally:
            lines.close()  # closes the file, read only as far as needed
        return fields
    return {}


def _version_of(installed: _Installed) -> str:
    return _name_and_version(installed, [])[1]


def _label_conflicts(candidates: Sequence[Candidate]) -> Iterator[Problem]:
    by_label: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        by_label.setdefault(candidate.label, []).append(candidate)
    for label, claims in by_label.items():
        if len(claims) < 2:
            continue
        claims.sort(key=lambda c: (c.project, c.value))
        who = " and ".join(f"{c.distribution} {c.version} ({c.value})" for c in claims)
        yield Problem(
            "label-conflict",
            f"label {label!r} is claimed by {who}; neither is used until one is renamed "
            "or disallowed",
            labels=(label,),
            distributions=tuple(sorted({c.project for c in claims})),
        )


def _unreadable(installed: _Installed, file: str, exc: Exception) -> Problem:
    return Problem(
        "unreadable-metadata",
        f"{installed.metadata_path}: cannot read {file}: {exc}",
        distributions=(installed.project,),
    )
