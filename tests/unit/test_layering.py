"""The package's shape: imports point down the pipeline, never up, and never in a circle.

Every ``import`` in ``mcs_host`` that can run (at module level and inside functions) is
read from the source, so a lazy import cannot hide a wrong arrow; one under ``if
TYPE_CHECKING:`` never runs and only names a type. The layers, top to bottom, are those of
ARCHITECTURE.md::

    cli -> kit | frameworks -> loading -> bridge -> trust | orchestration -> contract | discovery
        -> interfaces -> private helpers

A module may import its own subpackage's modules and anything in a lower layer; modules on
the same layer in different subpackages (trust and orchestration, contract and discovery) do
not import each other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "mcs_host"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("mcs_host.__main__",),
    ("mcs_host.cli",),
    ("mcs_host.kit", "mcs_host.frameworks"),
    ("mcs_host.loading",),
    ("mcs_host.bridge",),
    ("mcs_host.trust", "mcs_host.orchestration"),
    ("mcs_host.contract", "mcs_host.discovery"),
    ("mcs_host.interfaces",),
    (
        "mcs_host._files",
        "mcs_host._bounded",
        "mcs_host._places",
        "mcs_host._version",
        "mcs_host._descendants",
        "mcs_host._reasons",
        "mcs_host._install_hint",
    ),
)


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> Iterator[tuple[int, str]]:
    """``(line, module)`` for every import in ``path`` of a module of this package that can
    run; imports under ``if TYPE_CHECKING:`` never run (annotations only) and are left out."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _runnable(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "mcs_host":
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != "mcs_host":
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                yield node.lineno, submodule if submodule in MODULES else target


def _runnable(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and everything under it, except the bodies of ``if TYPE_CHECKING:``."""
    yield node
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and ast.unparse(child.test) in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        ):
            for other in child.orelse:
                yield from _runnable(other)
            continue
        yield from _runnable(child)


def _layer(module: str) -> tuple[int, str]:
    """The layer's index (0 is the top) and the unit of ``module`` within it."""
    for index, units in enumerate(LAYERS):
        for unit in units:
            if module == unit or module.startswith(unit + "."):
                return index, unit
    raise AssertionError(f"{module} is in no layer: add it to LAYERS and ARCHITECTURE.md")


GRAPH = {
    name: sorted({target for _, target in _imports(name, path)} - {name})
    for name, path in MODULES.items()
}


def test_every_module_is_placed_in_a_layer() -> None:
    for name in MODULES:
        if name != "mcs_host":
            _layer(name)


def test_imports_point_down_the_layers() -> None:
    wrong = []
    for name, path in MODULES.items():
        if name == "mcs_host":
            continue  # the facade reads its stub; it imports submodules by name only
        here, unit = _layer(name)
        for line, target in _imports(name, path):
            if target == "mcs_host":
                wrong.append(f"{path.name}:{line} {name} imports the package's __init__")
                continue
            there, other = _layer(target)
            if there > here or other == unit:
                continue
            way = "up" if there < here else "sideways"
            wrong.append(f"{name}:{line} imports {target} ({way}: {unit} -> {other})")
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_its_own_package_init() -> None:
    wrong = []
    for name, path in MODULES.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for line, target in _imports(name, path):
            if target == package and name != package:
                wrong.append(f"{name}:{line} imports from its own package's __init__")
    assert not wrong, "\n".join(wrong)


def test_there_is_no_import_circle() -> None:
    state: dict[str, int] = {}
    circles: list[str] = []

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for target in GRAPH.get(module, ()):
            if state.get(target) == 1:
                circles.append(" -> ".join([*trail[trail.index(target) :], target]))
            elif target not in state:
                visit(target, [*trail, target])
        state[module] = 2

    for module in GRAPH:
        if module not in state:
            visit(module, [module])
    assert not circles, "\n".join(circles)


@pytest.mark.parametrize(
    "name", sorted(n for n, p in MODULES.items() if len(p.read_text().splitlines()) > 400)
)
def test_a_long_module_says_why_at_its_top(name: str) -> None:
    """A module over 400 lines states at its top why it stays one module."""
    docstring = ast.get_docstring(ast.parse(MODULES[name].read_text(encoding="utf-8"))) or ""
    assert "One module:" in docstring, f"{name} is long and its docstring does not say why"


# A response's way through orchestration, first step first; the helpers each step may use
# (healing, the call records) come before the steps that use them.
RESPONSE_FLOW = (
    "healing",
    "calls",
    "scanning",
    "families",
    "native",
    "native_streams",
    "text",
    "detection",
    "validation",
    "messages",
    "prompting",
    "response_schema",
    "streaming",
    "routing",
    "leftovers",
    "execution",
    "orchestrator",
    "runner",
)


def test_a_response_flows_one_way_through_orchestration() -> None:
    """native shapes -> text protocols -> healing -> ToolCalls -> validation -> messages:
    a step imports only the steps before it, so none calls back up."""

    def step_of(module: str) -> int:
        """A module's step; a subpackage (``families``) is one step, its modules with it."""
        return RESPONSE_FLOW.index(module.removeprefix("mcs_host.orchestration.").partition(".")[0])

    modules = {n for n in MODULES if n.startswith("mcs_host.orchestration.")}
    assert {step_of(n) for n in modules} == set(range(len(RESPONSE_FLOW)))
    wrong = []
    for module in sorted(modules):
        for target in GRAPH[module]:
            if target.startswith("mcs_host.orchestration.") and step_of(target) > step_of(module):
                wrong.append(f"{module} imports {target}, a later step")
    assert not wrong, "\n".join(wrong)
