"""Session fixtures: a wheelhouse with mcs-host, its dependencies and the bundled drivers."""

from __future__ import annotations

from pathlib import Path

import pytest
from distbuild import PLUGINS, ROOT, build_wheel, pip


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Wheels of mcs-host (built from this checkout), its dependencies, the plugins, and the
    plugins' build backend (for builds inside venvs)."""
    house = tmp_path_factory.mktemp("wheelhouse")
    # mcs-host with the mcp extra's dependencies too: tests/test_serve.py installs mcs-host[mcp]
    pip(
        "wheel",
        "--no-build-isolation",
        "--wheel-dir",
        str(house),
        f"{ROOT}[mcp]",
        "flit_core==4.2.0",
    )
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
