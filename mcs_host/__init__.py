"""mcs-host: discover, verify, load and orchestrate MCS drivers.

The public API is declared once, in ``__init__.pyi`` beside this file: each ``from .module
import (Name as Name, ...)`` there makes ``mcs_host.Name`` import ``mcs_host.module`` on first
use (PEP 562). So ``import mcs_host`` imports nothing else, and a path that needs no pydantic
(discovery, ``mcs-host list``) never loads it.
"""

# Importing the package imports no module the interpreter has not loaded already (not even
# __future__, typing or re): under ``python -m mcs_host`` the current directory comes first
# on sys.path until the command line drops it. The stub is read with str methods alone.
import importlib


def _read_exports(path: str) -> dict[str, str]:
    """``{name: module}`` from the stub's ``from .module import (Name as Name, ...)`` lines."""
    exports: dict[str, str] = {}
    module = None
    with open(path, encoding="utf-8") as stub:
        for raw in stub:
            line = raw.partition("#")[0].strip()
            if line.startswith("from ."):
                module, _, line = line[len("from .") :].partition(" import ")
                module = module.strip()
            elif module is None:
                continue
            closed = ")" in line or not raw.rstrip().endswith(("(", ","))
            for item in line.replace("(", ",").replace(")", ",").split(","):
                name = item.partition(" as ")[2].strip() or item.strip()
                if name:
                    exports[name] = module
            if closed:
                module = None
    return exports


_EXPORTS = _read_exports(__file__[: -len("__init__.py")] + "__init__.pyi")
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mcs_host' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
