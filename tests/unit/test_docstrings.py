"""Docstrings that cannot go stale: every Sphinx cross-reference in ``mcs_host`` names an object
that exists, by its exact path.

Nothing renders these references any more (``docs/reference/python-api.md`` is generated as
Markdown), and Sphinx used to accept a dotted name whose tail matched some object, so a
reference to a module that had moved survived. This test reads every module of the package
(``pkgutil.walk_packages``) with ``ast``: the docstrings of the module, its classes, functions
and methods, and attribute docstrings (a string expression right after an assignment). Each
``:mod:``, ``:func:``, ``:class:``, ``:meth:``, ``:data:`` and ``:attr:`` reference is resolved
exactly, in the module it is written in, by these rules:

- in ``title <target>`` the target is the reference; a leading ``~`` and a trailing ``()``
  are stripped;
- a leading ``.`` (or ``..``) is relative to the module's package, as a Python relative import
  is (``.registry`` in ``mcs_host/trust/x.py`` is ``mcs_host.trust.registry``); a single dot
  followed by a name may also name something in the current module (Sphinx's ``.name``);
- a name without dots is a member of the enclosing class (in the docstring of a class, its
  method or its attribute), else one of the module's own names (defined, assigned or
  imported, imports under ``if TYPE_CHECKING:`` included: read from the source and resolved to
  what they import), else a builtin;
- a dotted name is an absolute importable path (the longest prefix that imports as a module,
  then attributes), else its first part resolved as a name without dots and the rest looked up
  on it;
- a member exists when ``getattr`` finds it, or it is a field of a dataclass
  (``__dataclass_fields__``) or a pydantic model (``model_fields``), an annotation in a class
  body along the MRO (the fields of a TypedDict, NamedTuple or Protocol), a ``__slots__``
  name, or an instance attribute a method of a class of this package (along the MRO) assigns
  as ``self.name = ...`` (read from the source);
- ``:mod:`` must name a module (a name without dots may also be an absolute module name).

One assertion lists every reference that does not resolve, with its file, line, role and
target. Every module is imported in this process (except ``mcs_host.__main__``, which would
run the command line); nothing else runs.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import inspect
import pkgutil
import re
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import mcs_host

ROLE = re.compile(r":(mod|func|class|meth|data|attr):`([^`]+)`")
TITLED = re.compile(r"[^<]*<([^<>]+)>", re.DOTALL)
NOT_IMPORTED = frozenset({"mcs_host.__main__"})
"""Modules whose import has an effect (``python -m mcs_host`` runs the command line)."""


class _Missing:
    """What a lookup returns when nothing by that name exists."""


MISSING: Any = _Missing()


class _Declared:
    """A name that exists with no object to look further into: a field, a slot, an annotation,
    or a module-level name only the source binds (one assigned under ``if TYPE_CHECKING:``)."""


DECLARED: Any = _Declared()


@dataclass(frozen=True)
class Reference:
    module: str
    path: Path
    line: int
    role: str
    target: str
    owner: tuple[str, ...]
    """The qualified name of the enclosing class, empty outside any class."""

    def __str__(self) -> str:
        where = self.path.relative_to(Path(mcs_host.__file__).parent.parent)
        return f"{where}:{self.line}: :{self.role}:`{self.target}`"


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    package: str
    namespace: types.ModuleType | None
    """The imported module; None for a module in NOT_IMPORTED."""
    imports: dict[str, tuple[str, str | None]]
    """Each name the source imports at module level: ``(module, attribute or None)``."""
    defined: frozenset[str]
    """Each other name the source binds at module level."""
    instance: dict[tuple[str, ...], frozenset[str]]
    """Each class's qualified name: the ``self.name`` its methods assign."""


def _modules() -> Iterator[tuple[str, Path, bool]]:
    """``(name, file, is_package)`` for the package and every module in it."""
    yield "mcs_host", Path(mcs_host.__file__), True
    for info in pkgutil.walk_packages(mcs_host.__path__, "mcs_host."):
        spec = importlib.util.find_spec(info.name)
        assert spec is not None
        assert spec.origin is not None
        yield info.name, Path(spec.origin), info.ispkg


def _statements(body: list[ast.stmt]) -> Iterator[list[ast.stmt]]:
    """``body`` and every block nested in it by ``if``, ``try``, ``with``, ``for`` or
    ``while`` (not the bodies of functions or classes)."""
    yield body
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for field in ("body", "orelse", "finalbody"):
            nested = getattr(node, field, None)
            if isinstance(nested, list) and nested and isinstance(nested[0], ast.stmt):
                yield from _statements(nested)
        for handler in getattr(node, "handlers", ()):
            yield from _statements(handler.body)
        for case in getattr(node, "cases", ()):
            yield from _statements(case.body)


def _absolute(package: str, level: int, module: str | None) -> str:
    base = package.split(".")
    base = base[: len(base) - level + 1]
    return ".".join([*base, *([module] if module else [])])


def _bindings(tree: ast.Module, package: str) -> tuple[dict[str, tuple[str, str | None]], set[str]]:
    imports: dict[str, tuple[str, str | None]] = {}
    defined: set[str] = set()
    for block in _statements(tree.body):
        for node in block:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        imports[alias.asname] = (alias.name, None)
                    else:
                        first = alias.name.partition(".")[0]
                        imports[first] = (first, None)
            elif isinstance(node, ast.ImportFrom):
                source = (
                    _absolute(package, node.level, node.module) if node.level else node.module or ""
                )
                for alias in node.names:
                    imports[alias.asname or alias.name] = (source, alias.name)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            defined.add(name.id)
            elif type(node).__name__ == "TypeAlias":  # Python 3.12's ``type X = ...``
                defined.add(node.name.id)  # type: ignore[attr-defined]
    return imports, defined


def _instance_attributes(tree: ast.Module) -> dict[tuple[str, ...], frozenset[str]]:
    found: dict[tuple[str, ...], frozenset[str]] = {}

    def visit(nodes: list[ast.stmt], owner: tuple[str, ...]) -> None:
        for node in nodes:
            if not isinstance(node, ast.ClassDef):
                continue
            qualname = (*owner, node.name)
            names: set[str] = set()
            for method in node.body:
                if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                if not method.args.args:
                    continue
                self = method.args.args[0].arg
                for child in ast.walk(method):
                    if (
                        isinstance(child, ast.Attribute)
                        and isinstance(child.ctx, ast.Store)
                        and isinstance(child.value, ast.Name)
                        and child.value.id == self
                    ):
                        names.add(child.attr)
            found[qualname] = frozenset(names)
            visit(node.body, qualname)

    visit(tree.body, ())
    return found


def _string(node: ast.stmt) -> ast.Constant | None:
    if (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ):
        return node.value
    return None


def _docstrings(tree: ast.Module) -> Iterator[tuple[ast.Constant, tuple[str, ...]]]:
    """Every docstring in ``tree`` with the qualified name of its enclosing class."""

    def body(
        nodes: list[ast.stmt], owner: tuple[str, ...]
    ) -> Iterator[tuple[ast.Constant, tuple[str, ...]]]:
        for block in _statements(nodes):
            for before, node in zip([None, *block], block, strict=False):
                if isinstance(before, ast.Assign | ast.AnnAssign | ast.AugAssign):
                    string = _string(node)
                    if string is not None:
                        yield string, owner
                if isinstance(node, ast.ClassDef):
                    yield from definition(node, (*owner, node.name))
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield from definition(node, owner)

    def definition(
        node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef, owner: tuple[str, ...]
    ) -> Iterator[tuple[ast.Constant, tuple[str, ...]]]:
        string = _string(node.body[0])
        if string is not None:
            yield string, owner
        yield from body(node.body, owner)

    if tree.body and (string := _string(tree.body[0])) is not None:
        yield string, ()
    yield from body(tree.body, ())


def _load() -> tuple[dict[str, Module], list[Reference]]:
    modules: dict[str, Module] = {}
    references: list[Reference] = []
    for name, path, is_package in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        package = name if is_package else name.rpartition(".")[0]
        imports, defined = _bindings(tree, package)
        namespace = None if name in NOT_IMPORTED else importlib.import_module(name)
        modules[name] = Module(
            name, path, package, namespace, imports, frozenset(defined), _instance_attributes(tree)
        )
        for string, owner in _docstrings(tree):
            text = string.value
            assert isinstance(text, str)
            for match in ROLE.finditer(text):
                line = string.lineno + text.count("\n", 0, match.start())
                role, target = match.groups()
                references.append(Reference(name, path, line, role, target, owner))
    return modules, references


def _import(name: str) -> Any:
    """The module ``name``, or MISSING when it does not import; a module in NOT_IMPORTED is
    found, not run."""
    if name in NOT_IMPORTED:
        return types.ModuleType(name)
    try:
        return importlib.import_module(name)
    except ImportError:
        return MISSING


def _member(owner: Any, name: str) -> Any:
    if owner is MISSING or owner is DECLARED or not name.isidentifier():
        return MISSING
    try:
        return getattr(owner, name)
    except AttributeError:
        pass
    except Exception:  # a descriptor that fails on its class still names a member
        return DECLARED
    if isinstance(owner, type):
        if name in getattr(owner, "__dataclass_fields__", {}):
            return DECLARED
        fields = getattr(owner, "model_fields", None)
        if isinstance(fields, dict) and name in fields:
            return DECLARED
        for klass in owner.__mro__:
            if name in inspect.get_annotations(klass):
                return DECLARED
            slots = klass.__dict__.get("__slots__", ())
            if name in ((slots,) if isinstance(slots, str) else slots):
                return DECLARED
            module = MODULES.get(klass.__module__)
            qualname = tuple(klass.__qualname__.split("."))
            if module is not None and name in module.instance.get(qualname, ()):
                return DECLARED
    return MISSING


def _path(owner: Any, parts: list[str]) -> Any:
    for part in parts:
        owner = _member(owner, part)
    return owner


def _absolute_path(target: str) -> Any:
    parts = target.split(".")
    if not all(part.isidentifier() for part in parts):
        return MISSING
    for cut in range(len(parts), 0, -1):
        module = _import(".".join(parts[:cut]))
        if module is not MISSING:
            return _path(module, parts[cut:])
    return MISSING


def _module_name(module: Module, name: str) -> Any:
    if module.namespace is not None:
        found = _member(module.namespace, name)
        if found is not MISSING:
            return found
    if name in module.imports:
        source, attribute = module.imports[name]
        if attribute is None:
            return _import(source)
        found = _member(_import(source), attribute)
        return found if found is not MISSING else _import(f"{source}.{attribute}")
    if name in module.defined:
        return DECLARED
    return MISSING


def _name(module: Module, owner: tuple[str, ...], name: str) -> Any:
    """A name without dots, as the docstring's place sees it."""
    if owner and module.namespace is not None:
        found = _member(_path(module.namespace, list(owner)), name)
        if found is not MISSING:
            return found
    found = _module_name(module, name)
    if found is not MISSING:
        return found
    return _member(builtins, name)


def resolve(module: Module, owner: tuple[str, ...], role: str, target: str) -> Any:
    """The object ``target`` names in ``module`` (inside the class ``owner``), or MISSING."""
    if titled := TITLED.fullmatch(target):
        target = titled.group(1)
    target = target.removeprefix("~").removesuffix("()")
    if target.startswith("."):
        rest = target.lstrip(".")
        level = len(target) - len(rest)
        found = _absolute_path(_absolute(module.package, level, rest))
        if found is MISSING and level == 1 and rest:
            first, *others = rest.split(".")
            found = _path(_module_name(module, first), others)
    elif "." not in target:
        found = _name(module, owner, target)
        if role == "mod" and not isinstance(found, types.ModuleType):
            found = _absolute_path(target)
    else:
        found = _absolute_path(target)
        if found is MISSING:
            first, *others = target.split(".")
            found = _path(_name(module, owner, first), others)
    if role == "mod" and not isinstance(found, types.ModuleType):
        return MISSING
    return found


MODULES, REFERENCES = _load()


def test_every_reference_resolves_exactly() -> None:
    broken = [
        reference
        for reference in REFERENCES
        if resolve(MODULES[reference.module], reference.owner, reference.role, reference.target)
        is MISSING
    ]
    assert not broken, (
        f"{len(broken)} of {len(REFERENCES)} references do not resolve:\n"
        + "\n".join(map(str, broken))
    )


def test_the_references_are_all_read() -> None:
    """The walk reaches every module and the kinds of docstring the references live in."""
    assert len(MODULES) == len(list(Path(mcs_host.__file__).parent.rglob("*.py")))
    assert len(REFERENCES) > 400
    assert {reference.role for reference in REFERENCES} == {
        "mod",
        "func",
        "class",
        "meth",
        "data",
        "attr",
    }


@pytest.mark.parametrize(
    ("target", "role", "resolves"),
    [
        ("mcs_host.trust.importer", "mod", True),
        ("mcs_host.importer", "mod", False),  # a tail that matches is not the path
        ("importer", "mod", False),
        (".importer", "mod", True),
        ("._errors.IntegrityError", "class", True),
        ("~mcs_host.trust._errors.IntegrityError", "class", True),
        ("IntegrityError", "class", True),  # imported by the module
        ("Refusal", "class", True),  # defined by the module
        ("ModuleSpec", "class", True),  # imported only under TYPE_CHECKING
        ("FrameType.f_back", "attr", True),
        ("ModuleSpec.no_such_attribute", "attr", False),
        ("VerifiedImporter.find_spec()", "meth", True),
        ("VerifiedImporter._locked", "attr", True),  # assigned as self._locked in __init__
        ("VerifiedImporter._unlocked", "attr", False),
        ("the gate <VerifiedImporter>", "class", True),
        ("the gate <mcs_host.integrity.VerifiedImporter>", "class", False),
        ("..contract.Tool", "class", True),
        ("..registry", "mod", False),  # mcs_host.trust.registry is .registry here
        (".registry", "mod", True),
        ("find_spec", "meth", False),  # outside the class
        ("ValueError", "class", True),
        ("sys", "mod", True),
        ("VerifiedImporter", "mod", False),
        ("ImportError", "mod", False),
    ],
)
def test_the_resolver_is_exact(target: str, role: str, resolves: bool) -> None:
    found = resolve(MODULES["mcs_host.trust._gate"], (), role, target)
    assert (found is not MISSING) is resolves
