"""Write mcs_host/__init__.py: the public names of the submodules, imported lazily.

    python scripts/gen_init.py

Each public module's ``__all__`` is exported from ``mcs_host`` under the same name;
``_EXPORTS`` maps every name to its module, so ``from mcs_host import discover`` imports
``mcs_host.discovery`` alone. tests/test_contract.py fails when the file is stale.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mcs_host"
# the command line and the pytest plugin export nothing
PRIVATE = {"cli", "pytest_plugin"}

HEADER = '''"""mcs-host: discover, verify, load and orchestrate MCS drivers.

The public names are imported lazily, so ``import mcs_host`` stays cheap and paths that
need no pydantic (discovery, ``mcs-host list``) do not load it.
"""

import importlib

# Importing the package imports no module the interpreter has not loaded already (not even
# __future__ or typing): under ``python -m mcs_host`` the current directory comes first on
# sys.path until the command line drops it.
TYPE_CHECKING = False

__version__ = "{version}"

if TYPE_CHECKING:
'''

FOOTER = """

def __getattr__(name: str) -> object:
    submodule = _EXPORTS.get(name)
    if submodule is None:
        raise AttributeError(f"module 'mcs_host' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{submodule}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
"""


def render() -> str:
    sys.path.insert(0, str(ROOT))
    import mcs_host  # noqa: PLC0415 - after sys.path names this checkout

    modules = sorted(p.stem for p in PACKAGE.glob("[!_]*.py") if p.stem not in PRIVATE)
    owners: dict[str, str] = {}
    for module in modules:
        for name in importlib.import_module(f"mcs_host.{module}").__all__:
            if name in owners:
                raise SystemExit(f"{name} is exported by {owners[name]} and {module}")
            owners[name] = module
    lines = [HEADER.format(version=mcs_host.__version__)]
    for module in modules:
        names = sorted(n for n, m in owners.items() if m == module)
        if names:
            lines.append(f"    from .{module} import (\n")
            lines += [f"        {name},\n" for name in names]
            lines.append("    )\n")
    lines.append(
        "\n# Each public name and the submodule that defines it: an attribute imports only that"
        " module.\n_EXPORTS = {\n"
    )
    lines += [f'    "{name}": "{owners[name]}",\n' for name in sorted(owners)]
    lines.append("}\n\n__all__ = [\n")
    lines += [f'    "{name}",\n' for name in sorted({*owners, "__version__"})]
    lines.append("]\n")
    lines.append(FOOTER)
    return "".join(lines)


def main() -> int:
    target = PACKAGE / "__init__.py"
    target.write_text(render(), encoding="utf-8")
    for command in (["check", "--fix", "-q", "--select", "I,RUF022"], ["format", "-q"]):
        subprocess.run([sys.executable, "-m", "ruff", *command, str(target)], check=True)
    print(f"wrote {target.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
