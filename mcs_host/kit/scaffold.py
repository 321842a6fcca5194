"""``mcs-host new``: a driver distribution to start from, ready to test, build and sign, with
a GitHub Actions workflow that publishes its releases to PyPI with PEP 740 attestations."""

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
from mcs_host.trust.publishers import PublisherIdentity

__all__ = ["PLACEHOLDER_PUBLISHER", "new_driver"]

PLACEHOLDER_PUBLISHER = "Your name"
"""The publisher a new driver's trust manifest names when ``--publisher`` is not given:
``mcs-host check`` and ``mcs-host sign`` warn while it is still there."""

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*$")
_GITHUB_URL = re.compile(r"(?:https|ssh|git)://(?:git@)?github\.com/([^/]+/[^/]+?)(?:\.git)?/?")
"""A repository URL on GitHub; its group is ``OWNER/REPO``."""
_WORKFLOW = "release.yml"
_ENVIRONMENT = "pypi"
_PLACEHOLDER = """
#      OWNER and REPO stand for this repository's owner and name on GitHub: put them in
#      here and below (`mcs-host new --repository OWNER/REPO` writes them)."""

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

Publishing a release on GitHub runs `.github/workflows/release.yml`: it builds the wheel and
the sdist and uploads them to PyPI with Trusted Publishing and PEP 740 attestations (its first
lines say what to set up once). Users then install the driver, verified as that workflow's:

    mcs-host add {name} --publisher {identity}

Publishing elsewhere, sign each wheel with a key of your own (`mcs-host keygen KEYFILE`):

    python -m build --wheel                 # or any PEP 517 builder
    mcs-host sign dist/*.whl --key KEYFILE  # a publisher signature over the release
"""

RELEASE = """\
# Publishes {name} to PyPI when you publish a release of this repository on GitHub. The
# build job makes the sdist and the wheel; the publish job uploads them with Trusted
# Publishing (no API token) and PEP 740 attestations, which bind each file to this
# repository, this workflow ({workflow}) and its environment ({environment}).
#
# Once, before the first release:
#   1. On PyPI, add a Trusted Publisher (for a project not yet on PyPI, a pending publisher)
#      to the project {name}: owner {owner}, repository {repo},
#      workflow {workflow}, environment {environment}.{placeholder}
#   2. On GitHub, create the environment {environment} (Settings, Environments) and give it
#      required reviewers, so that nothing is published until one of them approves.
#
# Users then install the driver, verified as this workflow's, with:
#   mcs-host add {name} --publisher {identity}

name: release

on:
  release:
    types: [published]

permissions:
  contents: read

# one release at a time: a second one waits for the first instead of racing it to PyPI
concurrency:
  group: release
  cancel-in-progress: false

jobs:
  build:
    name: Build the sdist and the wheel
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1
        with:
          persist-credentials: false
      - uses: actions/setup-python@5fda3b95a4ea91299a34e894583c3862153e4b97 # v7.0.0
        with:
          python-version: "3.12"
      # pypa/build makes the sdist, then the wheel from that sdist, with the backend that
      # pyproject.toml pins; with the commit's time as SOURCE_DATE_EPOCH both are the same
      # bytes on every run, so anyone can rebuild a release and compare its sha256
      - name: Build
        run: |
          python -m pip install build==1.6.1
          SOURCE_DATE_EPOCH="$(git log -1 --format=%ct)" python -m build
      - uses: actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f # v7.0.0
        with:
          name: dist
          path: dist/
          if-no-files-found: error

  publish:
    name: Publish to PyPI
    needs: build
    runs-on: ubuntu-24.04
    environment:
      name: {environment}
      url: https://pypi.org/project/{name}/
    permissions:
      id-token: write # to prove this workflow's identity to PyPI and to Sigstore
    steps:
      - uses: actions/download-artifact@3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c # v8.0.1
        with:
          name: dist
          path: dist/
      - uses: pypa/gh-action-pypi-publish@dc37677b2e1c63e2034f94d8a5b11f265b73ba33 # v1.14.2
        with:
          attestations: true
"""


def new_driver(
    name: str,
    directory: str | Path = ".",
    *,
    label: str | None = None,
    publisher: str = PLACEHOLDER_PUBLISHER,
    repository: str | None = None,
) -> Path:
    """Write a new driver distribution ``name`` under ``directory`` (in a directory made
    for it: nothing may be there, not even a symbolic link); returns its path.

    ``repository`` is its source repository's URL, or ``OWNER/REPO`` for one on GitHub; the
    release workflow's instructions name its ``OWNER/REPO`` when it is on GitHub."""
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
    source, on_github = _on_github(repository)
    trust: dict[str, str] = {"publisher": publisher}
    if source:
        trust["source_repository"] = source
    try:
        TrustManifest.model_validate(trust)
    except ValidationError as exc:
        problem = exc.errors()[0]
        field = ".".join(str(p) for p in problem["loc"])
        option = {"publisher": "--publisher", "source_repository": "--repository"}.get(field)
        message = str(problem["msg"]).removeprefix("Value error, ")
        if field == "source_repository":
            message += "; or give OWNER/REPO for a repository on GitHub"
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
    owner, _, repo = (on_github or "OWNER/REPO").partition("/")
    release = {
        "name": name,
        "owner": owner,
        "repo": repo,
        "workflow": _WORKFLOW,
        "environment": _ENVIRONMENT,
        "identity": str(PublisherIdentity("github", f"{owner}/{repo}", _WORKFLOW, _ENVIRONMENT)),
        "placeholder": "" if on_github else _PLACEHOLDER,
    }
    files = {
        "pyproject.toml": PYPROJECT.format(**values),
        "README.md": README.format(**values, identity=release["identity"]),
        f"{package}/__init__.py": DRIVER.format(**values),
        f"{package}/{MANIFEST_FILE}": json.dumps(manifest, indent=2) + "\n",
        f"tests/test_{package}.py": TESTS.format(**values),
        ".gitignore": GITIGNORE,
        f".github/workflows/{_WORKFLOW}": RELEASE.format(**release),
    }
    root.parent.mkdir(parents=True, exist_ok=True)
    root.mkdir()  # made here, so every file below is new (each made where nothing was)
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        create_new(path, text, relative, mode=SHARED)
    return root


def _on_github(repository: str | None) -> tuple[str | None, str | None]:
    """``(source repository URL, OWNER/REPO)`` of what ``--repository`` gave: a URL, with
    its ``OWNER/REPO`` when it is on GitHub, or GitHub's ``OWNER/REPO`` alone."""
    if not repository:
        return None, None
    if "://" not in repository and _is_github(repository):
        return f"https://github.com/{repository}", repository
    found = _GITHUB_URL.fullmatch(repository)
    return repository, found.group(1) if found and _is_github(found.group(1)) else None


def _is_github(owner_repo: str) -> bool:
    """Whether ``owner_repo`` is a repository GitHub could name, as ``--publisher`` takes it."""
    try:
        PublisherIdentity.parse(f"github:{owner_repo}")
    except ValueError:
        return False
    return True
