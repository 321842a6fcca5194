"""Session fixtures: a wheelhouse with mcs-host, its dependencies, pip and the bundled drivers."""

from __future__ import annotations

import ensurepip
import shutil
from pathlib import Path

import pytest
from distbuild import PLUGINS, ROOT, build_wheel, pip


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Wheels of mcs-host (built from this checkout), its dependencies (with its mcp and attest
    extras'), the plugins, the plugins' build backend (for builds inside venvs), and pip (the
    one ensurepip bundles, for venvs whose commands run pip)."""
    house = tmp_path_factory.mktemp("wheelhouse")
    # mcs-host with the mcp and attest extras' dependencies too: tests/test_serve.py installs
    # mcs-host[mcp], tests/test_add.py mcs-host[attest] with pip (its add runs the user's pip)
    pip(
        "wheel",
        "--no-build-isolation",
        "--wheel-dir",
        str(house),
        f"{ROOT}[mcp,attest]",
        "flit_core==4.2.0",
    )
    bundled = Path(ensurepip.__file__).with_name("_bundled")
    for wheel in bundled.glob("pip-*.whl"):
        shutil.copy2(wheel, house / wheel.name)
    for plugin in sorted(PLUGINS.iterdir()):
        if (plugin / "pyproject.toml").is_file():
            build_wheel(plugin, house)
    return house


@pytest.fixture(scope="session")
def fixture_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory to build fixture distributions' wheels into."""
    return tmp_path_factory.mktemp("fixture-wheels")


@pytest.fixture(scope="session")
def uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """uv's cache for the session's venvs (installs copy from it: tests tamper with files)."""
    return tmp_path_factory.mktemp("uv-cache")
