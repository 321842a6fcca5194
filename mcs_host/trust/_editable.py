"""What an editable install provides as its own modules, and nothing else of its project.

An editable install puts a directory on ``sys.path`` (a ``.pth`` line) or installs a finder
with a mapping of top-level names to paths. Its project directory often holds much more than
its modules: a virtual environment, tests, scripts. The gate allows a waived editable
distribution only its package directories and module files, found here.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable, Iterator
from importlib.machinery import all_suffixes

from mcs_host._files import CONFIG_LIMIT, METADATA_LIMIT, InputError, read_text

from ._origins import record_rows
from .digest import editable_source

__all__ = ["editable_modules"]


def editable_modules(metadata_path: str, names: Iterable[str] = ()) -> tuple[list[str], list[str]]:
    """The real paths of the package directories, and of the module files, that an editable
    install provides, and nothing else of its project: each top-level name (of ``names``, its
    ``top_level.txt``, its entry points, an editable finder's mapping, or its own normalized
    name) where the install's ``.pth`` files or editable finder point. Empty when it is not an
    editable install or nothing is found (its modules are then refused: nothing is guessed)."""
    if editable_source(metadata_path) is None:
        return [], []
    site = os.path.dirname(metadata_path)
    folders, mapping = _editable_pointers(metadata_path, site)
    wanted = {name.partition(".")[0] for name in names}
    wanted |= set(mapping)
    wanted |= _metadata_modules(metadata_path)
    found: set[str] = set()
    for name in sorted(wanted):
        if name in mapping:
            found.add(os.path.realpath(mapping[name]))
        for folder in folders:
            found.update(_module_places(folder, name))
    places = sorted(found)
    return [p for p in places if os.path.isdir(p)], [p for p in places if os.path.isfile(p)]


def _editable_pointers(metadata_path: str, site: str) -> tuple[list[str], dict[str, str]]:
    """The directories an editable install's ``.pth`` files put on ``sys.path``, and the
    mapping (top-level name -> path) of a setuptools editable finder it installed."""
    folders: list[str] = []
    mapping: dict[str, str] = {}
    for path, _ in record_rows(metadata_path):
        if "/" in path or not path.endswith((".pth", "_finder.py")):
            continue
        try:
            text = read_text(os.path.join(site, path), path, CONFIG_LIMIT)
        except (OSError, InputError):
            continue
        if path.endswith(".pth"):
            for raw in text.splitlines():
                line = raw.strip()
                if line and not line.startswith(("#", "import ", "import\t")):
                    folders.append(os.path.join(site, line))
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError):
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                target, value = node.target, node.value
            else:
                continue
            if not (isinstance(target, ast.Name) and target.id == "MAPPING"):
                continue
            try:
                literal = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, RecursionError):
                continue
            if isinstance(literal, dict):
                mapping.update(
                    (k, v) for k, v in literal.items() if isinstance(k, str) and isinstance(v, str)
                )
    return folders, mapping


def _metadata_modules(metadata_path: str) -> set[str]:
    """Top-level module names a distribution's metadata gives: ``top_level.txt``, its entry
    points' modules, and its own name as a module."""
    name = os.path.basename(metadata_path).partition("-")[0]
    found = {re.sub(r"[-_.]+", "_", name).lower()}
    for file in ("top_level.txt", "entry_points.txt"):
        try:
            text = read_text(os.path.join(metadata_path, file), file, METADATA_LIMIT)
        except (OSError, InputError):
            continue
        for raw in text.splitlines():
            line = raw.strip()
            if file == "entry_points.txt":
                if "=" not in line or line.startswith(("[", "#")):
                    continue
                line = line.partition("=")[2]
            module = line.partition(":")[0].strip().partition(".")[0]
            if module.isidentifier():
                found.add(module)
    return found


def _module_places(folder: str, name: str) -> Iterator[str]:
    """What ``name`` may be found as in ``folder``: its package directory, its module files."""
    if not name.isidentifier():
        return
    yield os.path.realpath(os.path.join(folder, name))
    for suffix in all_suffixes():
        yield os.path.realpath(os.path.join(folder, name + suffix))
