"""Start-up code: what the interpreter runs from the environment before any host can act.

``verify`` names it (executable ``.pth`` lines, ``sitecustomize``/``usercustomize``, modules
beside the console scripts); nothing here can stop it, which is why it is reported. The one
exception is setuptools' own ``distutils-precedence.pth``, in nearly every environment: a
file of that name whose bytes are exactly one that setuptools writes is not reported (any
other byte, and it is).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from mcs_host._files import METADATA_LIMIT, InputError, read_bytes

__all__ = ["startup_findings"]

SETUPTOOLS_PTH = "distutils-precedence.pth"
"""The name of the ``.pth`` file setuptools installs to put its copy of distutils first."""
SETUPTOOLS_LINES = (
    # as setuptools 66.1.1, 80.9.0 and 84.0.0 write it (its distutils first, the default
    # since 60, unless SETUPTOOLS_USE_DISTUTILS says stdlib)
    b"import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, 'local') "
    b"== 'local'; enabled and __import__('_distutils_hack').add_shim(); \n",
    # as setuptools 56.0.0 writes it (before 60: the standard library's unless it says local)
    b"import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, 'stdlib') "
    b"== 'local'; enabled and __import__('_distutils_hack').add_shim(); \n",
)
"""The exact bytes of each ``distutils-precedence.pth`` setuptools writes: not reported."""


def startup_findings(search: Iterable[str] | None = None) -> tuple[tuple[str, str], ...]:
    """``(path, what)`` for code the interpreter runs at start-up from the environment, before
    any host can act: executable ``.pth`` lines, ``sitecustomize``/``usercustomize``, and
    modules beside the console scripts (their directory comes first on their ``sys.path``)."""
    found: list[tuple[str, str]] = []
    scripts = os.path.dirname(os.path.abspath(sys.executable))
    try:
        beside = sorted(os.listdir(scripts))
    except OSError:
        beside = []
    for name in beside:
        path = os.path.join(scripts, name)
        if name.endswith(".py") or os.path.isfile(os.path.join(path, "__init__.py")):
            found.append(
                (path, "is imported before the standard library by console scripts beside it")
            )
    entries = list(dict.fromkeys(sys.path if search is None else search))
    for entry in entries:
        if not entry or not os.path.isdir(entry):
            continue
        try:
            names = sorted(os.listdir(entry))
        except OSError:
            continue
        for name in names:
            path = os.path.join(entry, name)
            if name.endswith(".pth"):
                lines = _executable_lines(path, name)
                if lines:
                    found.append((path, f"runs code at start-up: {lines[0][:80]!r}"))
            elif name in ("sitecustomize.py", "usercustomize.py") or (
                name in ("sitecustomize", "usercustomize") and os.path.isdir(path)
            ):
                found.append((path, "is run by the interpreter at start-up"))
    return tuple(found)


def _executable_lines(path: str, name: str) -> list[str]:
    """The lines of the ``.pth`` file ``path`` that the interpreter runs; none for
    setuptools' own (:data:`SETUPTOOLS_LINES`)."""
    try:
        data = read_bytes(path, ".pth file", METADATA_LIMIT)
    except (OSError, InputError):
        return []
    if name == SETUPTOOLS_PTH and data in SETUPTOOLS_LINES:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    return [line for line in lines if line.startswith(("import ", "import\t"))]
