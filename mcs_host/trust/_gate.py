"""The import gate: one meta path finder decides which code the host lets run.

:class:`VerifiedImporter` sits first on ``sys.meta_path``. It claims by name the modules of
verified distributions (their loaders, in :mod:`mcs_host.trust._loaders`, compile or load only the
verified bytes) and the namespace packages on their dotted paths, so no other path entry,
``.pth`` file or finder can provide them. Every other import is judged when it matters —
while code of a verified distribution is on the stack, or everywhere in a locked-down process
(the command line) — by where its file is: the standard library, the running host's own
installation, or a file the host chose to allow. Anything else is refused before it runs, with
an :class:`IntegrityError` (an ``ImportError``: optional imports fall back as if the module
were absent) and a :class:`Refusal` the host reports.

Only ``os`` and ``sys`` are imported at module level: the command line installs the gate before
it imports anything an attacker could have planted.

One module: the gate is one object on ``sys.meta_path`` whose finder, claims and guarded
``import`` share state and a lock, and it imports nothing at module level that could be
planted; split, its parts would have to import each other.
"""

from __future__ import annotations

import _thread
import builtins
import os
import sys
from typing import TYPE_CHECKING, Any, NamedTuple

from . import _origins
from ._errors import IntegrityError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from importlib.machinery import ModuleSpec
    from types import FrameType, ModuleType

__all__ = ["Allowed", "ImportRefusedError", "IntegrityError", "Refusal", "VerifiedImporter", "gate"]


class ImportRefusedError(IntegrityError, ModuleNotFoundError):
    """The gate refused a module that is not verified, the standard library's or the host's.

    A ``ModuleNotFoundError`` too: code that probes for an optional module
    (``except ModuleNotFoundError``) takes it for absent, as it should.
    """


class Refusal(NamedTuple):
    """An import the gate refused."""

    module: str
    origin: str | None
    message: str
    owner: str | None
    """The verified distribution whose code asked for it, if any was on the stack."""


class Allowed(NamedTuple):
    """A module imported from an unverified file the host chose to allow."""

    module: str
    origin: str
    distribution: str
    """The distribution whose file it is."""
    why: str
    """Why the host allows it (its policy)."""


class _Allowance(NamedTuple):
    """Unverified files the host allows, and for whose imports."""

    distribution: str
    why: str
    serves: str | None
    """The verified code (its owner, as registered) it is allowed for; ``None``: for no
    verified code, only the host and unverified code the policy admits (a waived driver)."""


class _Claim(NamedTuple):
    """A module name claimed for a verified distribution."""

    location: str
    """The directory the distribution is installed in."""
    module: Any
    """Its :class:`~mcs_host.trust.modules.ModuleFile`."""
    extension: bool
    owner: str


class VerifiedImporter:
    """The meta path finder for verified distributions, and the judge of every other import
    while verified code runs (or always, once :meth:`lock_down` is called)."""

    def __init__(self) -> None:
        self._claims: dict[str, _Claim] = {}
        self._packages: set[str] = set()
        self._namespaces: dict[str, list[str]] = {}
        self._code: dict[str, str] = {}
        self._allowed: dict[str, list[_Allowance]] = {}
        self._allowed_trees: dict[str, list[_Allowance]] = {}
        self._verdicts: dict[str, int] = {}
        self._locked = False
        self._sequence = 0
        self._refusals: list[tuple[int, Refusal]] = []
        self._allowed_log: list[tuple[int, Allowed]] = []
        self._resolving: set[int] = set()
        self._builtins: dict[str, Any] | None = None

    # -- what is claimed and allowed ------------------------------------------------------

    def register(
        self,
        location: str,
        modules: Sequence[Any],
        extensions: Sequence[Any] = (),
        owner: str = "a verified distribution",
        libraries: Sequence[Any] = (),
    ) -> None:
        """Claim ``modules`` (source) and ``extensions`` (extension modules), the
        :class:`~mcs_host.trust.modules.ModuleFile` records of a distribution installed under
        ``location``, for import from their verified bytes only; and the namespace packages on
        their dotted paths. Its ``libraries`` (the :class:`~mcs_host.trust.digest.FileEntry`
        of each shared object it ships) are what its extension modules may link. Raises
        :class:`IntegrityError` when another verified distribution claims a name for other
        bytes."""
        claims = [_Claim(location, m, False, owner) for m in modules]
        claims += [_Claim(location, m, True, owner) for m in extensions]
        regular = {c.module.name for c in claims if c.module.package}
        spaces: dict[str, str] = {}
        for claim in claims:
            parts = claim.module.name.split(".")
            folder = location
            for depth in range(1, len(parts)):
                folder = os.path.join(folder, parts[depth - 1])
                parent = ".".join(parts[:depth])
                if parent not in regular:
                    spaces.setdefault(parent, folder)
        for claim in claims:
            known = self._claims.get(claim.module.name)
            if known is not None and _key(known) != _key(claim):
                raise IntegrityError(
                    f"module {claim.module.name!r} is claimed by two verified distributions: "
                    f"{_where(known)} and {_where(claim)}"
                )
            if claim.module.name in self._namespaces:
                raise IntegrityError(
                    f"module {claim.module.name!r} of {_where(claim)} is a namespace package "
                    "of another verified distribution"
                )
        for name in spaces:
            if name in self._packages or (name in self._claims and name not in regular):
                raise IntegrityError(
                    f"{name!r} is a namespace package for {owner} but a module of another "
                    "verified distribution"
                )
        for claim in claims:
            self._claims[claim.module.name] = claim
            if claim.module.package:
                self._packages.add(claim.module.name)
            if not claim.extension:
                self._code[_origin(claim)] = owner
        for name, folder in spaces.items():
            folders = self._namespaces.setdefault(name, [])
            if folder not in folders:
                folders.append(folder)
        if libraries:
            from ._native import linker

            linker().add_libraries(location, {entry.path: entry for entry in libraries})
        self._verdicts.clear()

    def claims(self, name: str) -> bool:
        """Whether ``name`` is a module of a verified distribution."""
        return name in self._claims

    def namespace(self, name: str) -> bool:
        """Whether ``name`` is a namespace package on a verified module's dotted path."""
        return name in self._namespaces

    def allow(
        self,
        files: Iterable[str],
        distribution: str,
        why: str,
        trees: Iterable[str] = (),
        serves: str | None = None,
    ) -> None:
        """Let the unverified ``files`` (and every file under ``trees``, but none inside a
        virtual environment or site directory below one) of ``distribution`` be imported
        where the gate judges imports: the host allows them, saying ``why``, for the imports
        of the verified code of ``serves`` (its owner, as :meth:`register` was given it) and
        of code that is not verified; never for another verified distribution's code."""
        allowance = _Allowance(distribution, why, serves)
        for path in files:
            self._allowed.setdefault(_origins.real_file(path), []).append(allowance)
        for tree in trees:
            self._allowed_trees.setdefault(os.path.realpath(tree), []).append(allowance)
        self._verdicts.clear()

    def install(self) -> None:
        """Put this finder first on ``sys.meta_path``."""
        if sys.meta_path and sys.meta_path[0] is self:
            return
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        sys.meta_path.insert(0, self)

    def lock_down(self) -> None:
        """Judge every import from now on, not only those verified code asks for: the
        process runs nothing but the standard library, the host and what it verifies or
        allows."""
        self._locked = True
        self.install()

    # -- what was refused and allowed -----------------------------------------------------

    def mark(self) -> int:
        """A position in the logs, for :meth:`refusals` and :meth:`allowed` to read from."""
        return self._sequence

    def refusals(self, since: int = 0) -> tuple[Refusal, ...]:
        """The imports refused after position ``since``."""
        return tuple(r for n, r in self._refusals if n > since)

    def allowed(self, since: int = 0) -> tuple[Allowed, ...]:
        """The unverified modules imported by allowance after position ``since``."""
        return tuple(a for n, a in self._allowed_log if n > since)

    def _log(self, log: list[tuple[int, Any]], entry: object) -> None:
        self._sequence += 1
        log.append((self._sequence, entry))
        if len(log) > 2000:  # a long-running app: keep the recent past
            del log[:1000]

    # -- the finder -----------------------------------------------------------------------

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        claim = self._claims.get(fullname)
        if claim is not None:
            from ._loaders import verified_spec

            return verified_spec(
                fullname,
                claim.location,
                claim.module,
                claim.extension,
                self.builtins_for_verified(),
            )
        folders = self._namespaces.get(fullname)
        if folders is not None:
            return _namespace_spec(fullname, folders, path)
        parent = fullname.rpartition(".")[0]
        if parent in self._packages:
            spec = self._find_elsewhere(fullname, path, target)
            if spec is None:
                return None  # a missing module stays missing
            raise self._refuse(
                fullname,
                spec.origin,
                f"{fullname} ({spec.origin}) is not among the verified files of {parent}; "
                "not imported",
            )
        if not (self._locked or self._verified_caller() is not None):
            return None
        spec = self._find_elsewhere(fullname, path, target)
        if spec is not None:
            self._judge_spec(fullname, spec)
        return spec

    def invalidate_caches(self) -> None:
        self._verdicts.clear()

    def _find_elsewhere(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> ModuleSpec | None:
        """What the rest of ``sys.meta_path`` would import for ``fullname``."""
        for finder in list(sys.meta_path):
            if finder is self:
                continue
            find: Callable[..., ModuleSpec | None] | None = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def _verified_caller(self) -> str | None:
        """The owner of the innermost verified code on this thread's stack, if any."""
        if not self._code:
            return None
        frame: FrameType | None = sys._getframe(1)
        code = self._code
        while frame is not None:
            owner = code.get(frame.f_code.co_filename)
            if owner is not None:
                return owner
            frame = frame.f_back
        return None

    def _verified_callers(self) -> set[str]:
        """The owners of all verified code on this thread's stack."""
        owners: set[str] = set()
        frame: FrameType | None = sys._getframe(1)
        code = self._code
        while frame is not None:
            owner = code.get(frame.f_code.co_filename)
            if owner is not None:
                owners.add(owner)
            frame = frame.f_back
        return owners

    # -- judging --------------------------------------------------------------------------

    def _judge_spec(self, fullname: str, spec: ModuleSpec) -> None:
        origin = spec.origin
        if origin is None or not spec.has_location:
            if origin in ("built-in", "frozen"):
                return
            if spec.loader is None or type(spec.loader).__name__ == "NamespaceLoader":
                return  # a namespace package runs no code; its modules are judged one by one
            raise self._refuse(
                fullname, origin, f"import of {fullname!r} refused: its origin is unknown"
            )
        self._judge_file(fullname, origin)

    def _judge_file(self, fullname: str, origin: str) -> None:
        real = _origins.real_file(origin)
        if self._trusted(real):
            return
        allowances = self._allowances(real)
        if allowances:
            callers = self._verified_callers() if self._code else set()
            for allowance in allowances:
                if not callers or allowance.serves in callers:
                    entry = Allowed(fullname, origin, allowance.distribution, allowance.why)
                    self._log(self._allowed_log, entry)
                    return
            raise self._refuse(
                fullname,
                origin,
                f"import of {fullname!r} refused: {origin} is not verified; it is allowed "
                f"only for the imports of {allowances[0].distribution} "
                f"({allowances[0].why}), not for other verified code",
            )
        raise self._refuse(
            fullname,
            origin,
            f"import of {fullname!r} refused: {origin} is not verified, and is not part of the "
            "standard library or of mcs-host's own installation",
        )

    def _trusted(self, real: str) -> bool:
        if _origins.is_stdlib(real):
            return True
        if real.startswith(_host_dir() + os.sep):
            return True
        thread = _thread.get_ident()
        if thread in self._resolving:  # resolving the host imports packaging: allow its files
            return real in _origins.bootstrap_files()
        self._resolving.add(thread)
        try:
            host = _origins.host_install()
        finally:
            self._resolving.discard(thread)
        return host.owns(real)

    def _allowances(self, real: str) -> list[_Allowance]:
        """The allowances that name the file ``real``: its own, and those of the trees it is
        in (a tree never covers a virtual environment or site directory inside it)."""
        found = list(self._allowed.get(real, ()))
        for tree, allowances in self._allowed_trees.items():
            if real.startswith(tree + os.sep) and not _in_environment(tree, real):
                found.extend(allowances)
        return found

    def _refuse(self, fullname: str, origin: str | None, message: str) -> ImportRefusedError:
        owner = self._verified_caller()
        if owner is not None:
            message += f" (asked for by {owner})"
        self._log(self._refusals, Refusal(fullname, origin, message, owner))
        return ImportRefusedError(message, name=fullname, path=origin)

    def judge_module(self, name: str, module: object) -> None:
        """Refuse ``module``, already in ``sys.modules`` as ``name``, unless it is verified,
        the standard library's, the host's or allowed (for verified code that imports it)."""
        if self._verdicts.get(name) == id(module):
            return
        claim = self._claims.get(name)
        spec = getattr(module, "__spec__", None)
        if claim is not None:
            from ._loaders import loaded_from

            if not loaded_from(module, claim.module):
                where = getattr(module, "__file__", None) or "an unknown place"
                raise self._refuse(
                    name,
                    where,
                    f"module {name!r} was imported from {where}, not from the verified "
                    f"{_origin(claim)}",
                )
        elif name in self._namespaces:
            if getattr(module, "__file__", None) is not None:
                raise self._refuse(
                    name,
                    module.__file__,  # type: ignore[attr-defined]
                    f"{name!r} was imported from {module.__file__} (not the namespace "  # type: ignore[attr-defined]
                    "package of the verified distributions)",
                )
        elif spec is not None:
            self._judge_spec(name, spec)
        elif getattr(module, "__file__", None) is not None:
            self._judge_file(name, module.__file__)  # type: ignore[attr-defined]
        self._verdicts[name] = id(module)

    # -- the import statement of verified modules -----------------------------------------

    def builtins_for_verified(self) -> dict[str, Any]:
        """The builtins verified modules run with: their ``import`` statements also check
        modules that are already imported."""
        if self._builtins is None:
            guarded = dict(vars(builtins))
            guarded["__import__"] = self._import
            self._builtins = guarded
        return self._builtins

    def _import(
        self,
        name: str,
        globals: dict[str, Any] | None = None,
        locals: dict[str, Any] | None = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> ModuleType:
        module = _REAL_IMPORT(name, globals, locals, fromlist, level)
        absolute = _absolute(name, globals, level)
        if absolute is None:
            return module
        names = [".".join(absolute.split(".")[: i + 1]) for i in range(absolute.count(".") + 1)]
        names += [f"{absolute}.{item}" for item in fromlist or () if item != "*"]
        for each in names:
            found = sys.modules.get(each)
            if found is not None:
                self.judge_module(each, found)
        return module


_REAL_IMPORT = builtins.__import__


def _absolute(name: str, globals: dict[str, Any] | None, level: int) -> str | None:
    if level == 0:
        return name
    if not globals:
        return None
    package = globals.get("__package__")
    if package is None:
        module = str(globals.get("__name__", ""))
        package = module if "__path__" in globals else module.rpartition(".")[0]
    base = str(package).rsplit(".", level - 1)[0] if level > 1 else str(package)
    return f"{base}.{name}" if name else base


def _namespace_spec(fullname: str, folders: list[str], path: Sequence[str] | None) -> ModuleSpec:
    """A namespace package over the verified ``folders`` and the namespace portions of the
    same name elsewhere on the path (never a module or a regular package shadowing it)."""
    from importlib.machinery import ModuleSpec, all_suffixes

    portions = list(folders)
    seen = {os.path.realpath(f) for f in folders}
    tail = fullname.rpartition(".")[2]
    for entry in sys.path if path is None else path:
        candidate = os.path.join(entry or ".", tail)
        real = os.path.realpath(candidate)
        if real in seen or not os.path.isdir(candidate):
            continue
        if any(os.path.exists(os.path.join(candidate, "__init__" + s)) for s in all_suffixes()):
            continue
        seen.add(real)
        portions.append(candidate)
    spec = ModuleSpec(fullname, None, is_package=True)
    spec.submodule_search_locations = portions
    return spec


def _in_environment(tree: str, real: str) -> bool:
    """Whether ``real``, a file below ``tree``, lies in a site directory or a virtual
    environment (a folder with ``pyvenv.cfg``) between the two: installed files, not the
    tree's own."""
    folder = os.path.dirname(real)
    while len(folder) > len(tree):
        if os.path.basename(folder) in _origins.SITE_NAMES:
            return True
        if os.path.exists(os.path.join(folder, "pyvenv.cfg")):
            return True
        folder = os.path.dirname(folder)
    return os.path.exists(os.path.join(tree, "pyvenv.cfg"))


def _origin(claim: _Claim) -> str:
    return os.path.join(claim.location, *claim.module.path.split("/"))


def _key(claim: _Claim) -> tuple[str, str, str]:
    return (claim.location, claim.module.path, claim.module.sha256)


def _where(claim: _Claim) -> str:
    return f"{claim.location}/{claim.module.path}"


_HOST_DIR: str | None = None


def _host_dir() -> str:
    global _HOST_DIR  # noqa: PLW0603 - computed once per process
    if _HOST_DIR is None:
        _HOST_DIR = _origins.host_package_dir()
    return _HOST_DIR


_GATE = VerifiedImporter()


def gate() -> VerifiedImporter:
    """The process-wide import gate."""
    return _GATE
