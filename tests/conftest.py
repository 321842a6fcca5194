"""Session fixtures: a wheelhouse with mcs-host, its dependencies, pip and the bundled drivers."""

from __future__ import annotations

import ensurepip
import os
import shutil
from pathlib import Path

import pytest
from distbuild import PLUGINS, ROOT, build_wheel, pip

WHEELHOUSE_VARIABLE = "MCS_HOST_TEST_WHEELHOUSE"
"""Names a wheelhouse ``scripts/test.py`` built once for the run (:func:`make_wheelhouse`),
which every worker reads instead of building its own."""
UV_CACHE_VARIABLE = "MCS_HOST_TEST_UV_CACHE"
"""Names the uv cache ``scripts/test.py`` made for the run, which every worker shares."""


def make_wheelhouse(house: Path) -> Path:
    """Wheels of mcs-host (built from this checkout), its dependencies (with its mcp and attest
    extras'), the plugins, the plugins' build backend (for builds inside venvs), and pip (the
    one ensurepip bundles, for venvs whose commands run pip), in ``house``."""
    house.mkdir(parents=True, exist_ok=True)
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
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's wheelhouse (:func:`make_wheelhouse`): the one ``scripts/test.py`` built
    before the workers started, else one built for this worker. Tests only read it."""
    given = os.environ.get(WHEELHOUSE_VARIABLE)
    if given:
        house = Path(given)
        assert any(house.glob("mcs_host-*.whl")), f"{WHEELHOUSE_VARIABLE}={given} holds no mcs-host"
        return house
    return make_wheelhouse(tmp_path_factory.mktemp("wheelhouse"))


@pytest.fixture(scope="session")
def fixture_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory to build fixture distributions' wheels into."""
    return tmp_path_factory.mktemp("fixture-wheels")


@pytest.fixture(scope="session")
def uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """uv's cache for the session's venvs (installs copy from it: tests tamper with files):
    the one ``scripts/test.py`` made for the run, shared by its workers, else this one's."""
    given = os.environ.get(UV_CACHE_VARIABLE)
    return Path(given) if given else tmp_path_factory.mktemp("uv-cache")
