"""``mcs-host new``: a driver distribution to start from, ready to test, build and sign."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

from pydantic import ValidationError

from mcs_host._files import SHARED, create_new
from mcs_host._version import __version__
from mcs_host.contract import TrustManifest
from mcs_host.discovery import LABEL_RULE, is_valid_label
from mcs_host.interfaces import MANIFEST_FILE

__all__ = ["new_driver"]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*$")

PYPROJECT = """\
[build-system]
# pinned: the wheel's WHEEL file names the backend's version, and the digest covers it
requires = ["flit_core==4.2.0"]
build-backend = "flit_core.buildapi"

[project]
name = "{name}"
version = "0.1.0"
description = "An MCS driver: {title}."
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["mcs-host>={host_minor},<{host_next}", "pydantic>=2.7,<3"]

[project.optional-dependencies]
test = ["pytest>=8"]

[project.entry-points."mcs.drivers"]
{label} = "{package}:{cls}"

[tool.pytest.ini_options]
pythonpath = ["."]
"""

DRIVER = '''\
"""{title}: an MCS ToolDriver."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mcs_host import MCSToolDriver, Tool, UnknownToolError
from mcs_host.kit import manifest_meta, parse_arguments, tool_from_model


class GreetArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="Whom to greet.")
    excited: bool = Field(False, description="End with an exclamation mark.")


TOOLS = {{
    "greet": (GreetArgs, tool_from_model("greet", GreetArgs, description="Greet someone.")),
}}


class {cls}(MCSToolDriver):
    """{title}."""

    meta = manifest_meta(__package__, "{cls}")

    def __init__(self, greeting: str = "Hello") -> None:
        self.greeting = greeting

    def list_tools(self) -> list[Tool]:
        return [tool for _, tool in TOOLS.values()]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        if tool_name not in TOOLS:
            raise UnknownToolError(tool_name, TOOLS)
        model, _ = TOOLS[tool_name]
        args = parse_arguments(tool_name, model, arguments)
        return f"{{self.greeting}}, {{args.name}}{{'!' if args.excited else '.'}}"
'''

TESTS = '''\
"""Tests of {cls}: found through the entry point pyproject.toml declares (as mcs-host finds
it once the project is installed), the MCS contract (the mcs_conformance fixture of mcs-host)
and its tools."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path
from typing import Any

import pytest

from mcs_host import ToolArgumentError
from {package} import {cls}

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def entry_point_object() -> Any:
    """What the ``mcs.drivers`` entry point of pyproject.toml names, imported."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    (target,) = project["entry-points"]["mcs.drivers"].values()
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def test_its_entry_point_names_the_driver() -> None:
    assert entry_point_object() is {cls}


def test_it_keeps_the_mcs_contract(mcs_conformance: Any) -> None:
    mcs_conformance(entry_point_object())


def test_greet() -> None:
    driver = {cls}(greeting="Hi")
    assert driver.execute_tool("greet", {{"name": "Ann", "excited": True}}) == "Hi, Ann!"
    with pytest.raises(ToolArgumentError, match="argument 'name'"):
        driver.execute_tool("greet", {{}})
'''

GITIGNORE = """\
__pycache__/
*.egg-info/
.pytest_cache/
.venv/
build/
dist/
*.key
"""

README = """\
# {name}

{title}: an MCS driver ([Model Context Standard](https://www.modelcontextstandard.io)) for mcs-host.

    pip install -e '.[test]' && pytest      # the contract and the tools
    mcs-host check .                        # the contract, from the command line
    python -m build --wheel                 # or any PEP 517 builder
    mcs-host sign dist/*.whl --key KEYFILE  # a publisher signature over the release
"""


def new_driver(
    name: str,
    directory: str | Path = ".",
    *,
    label: str | None = None,
    publisher: str = "Your name",
    repository: str | None = None,
) -> Path:
    """Write a new driver distribution ``name`` under ``directory`` (in a directory made
    for it: nothing may be there, not even a symbolic link); returns its path."""
    if not _NAME.match(name):
        raise ValueError(f"{name!r} is not a distribution name: use letters, digits, '-' and '_'")
    root = Path(directory) / name
    if root.exists() or root.is_symlink():
        raise FileExistsError(f"{root} exists; choose another name or directory")
    package = re.sub(r"[-.]+", "_", name).lower()
    cls = "".join(part.capitalize() for part in re.split(r"[-_]+", name)) + "ToolDriver"
    label = label or package.replace("_", "-")
    if not is_valid_label(label):
        raise ValueError(f"the label {label!r} is not {LABEL_RULE}; give one with --label")
    title = name.replace("-", " ").replace("_", " ").capitalize()
    major, minor = (int(x) for x in __version__.split(".")[:2])
    host_next = f"{major + 1}" if major else f"0.{minor + 1}"
    trust: dict[str, str] = {"publisher": publisher}
    if repository:
        trust["source_repository"] = repository
    try:
        TrustManifest.model_validate(trust)
    except ValidationError as exc:
        problem = exc.errors()[0]
        field = ".".join(str(p) for p in problem["loc"])
        option = {"publisher": "--publisher", "source_repository": "--repository"}.get(field)
        message = str(problem["msg"]).removeprefix("Value error, ")
        raise ValueError(f"{option or field}: {message}") from None
    manifest = {
        "format": "mcs-driver-manifest/1",
        "drivers": {
            cls: {
                "id": str(uuid.uuid4()),
                "name": title,
                "version": "0.1.0",
                "bindings": [
                    {"capability": "greeting", "adapter": "*", "spec_format": "JSON-Schema"}
                ],
                "target_llms": None,
                "capabilities": [],
                "trust": trust,
            }
        },
    }
    values = {
        "name": name,
        "package": package,
        "cls": cls,
        "label": label,
        "title": title,
        "host_minor": f"{major}.{minor}",
        "host_next": host_next,
    }
    files = {
        "pyproject.toml": PYPROJECT.format(**values),
        "README.md": README.format(**values),
        f"{package}/__init__.py": DRIVER.format(**values),
        f"{package}/{MANIFEST_FILE}": json.dumps(manifest, indent=2) + "\n",
        f"tests/test_{package}.py": TESTS.format(**values),
        ".gitignore": GITIGNORE,
    }
    root.parent.mkdir(parents=True, exist_ok=True)
    root.mkdir()  # made here, so every file below is new (each made where nothing was)
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        create_new(path, text, relative, mode=SHARED)
    return root
