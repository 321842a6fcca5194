"""Session fixtures (a wheelhouse with mcs-host, its dependencies, pip and the bundled drivers)
and the line between the two kinds of test.

tests/unit runs in this process and starts none: a test there that starts a process (a
subprocess, a fork, a spawn, ``os.system``) fails naming the way out, and so does one that asks
for a fixture that installs distributions; ``pytest tests/unit`` checks a change to the
orchestrator, the parsers or the models in seconds. tests/system starts the host, pip, servers
and clients as processes, in venvs the tests make."""

from __future__ import annotations

import ensurepip
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, NoReturn

import pytest
from distbuild import PLUGINS, ROOT, build_wheel, pip

pytest_plugins = ["_frameworks"]  # the agent frameworks' fixtures (tests/system/_frameworks.py)

WHEELHOUSE_VARIABLE = "MCS_HOST_TEST_WHEELHOUSE"
"""Names a wheelhouse ``scripts/test.py`` built once for the run (:func:`make_wheelhouse`),
which every worker reads instead of building its own."""
UV_CACHE_VARIABLE = "MCS_HOST_TEST_UV_CACHE"
"""Names the uv cache ``scripts/test.py`` made for the run, which every worker shares."""
FRAMEWORKS = ("pydantic-ai", "openai-agents", "langchain", "llm")
"""The extras of the agent frameworks: their wheels are in the wheelhouse, for the pages and
tests that install one."""


def make_wheelhouse(house: Path) -> Path:
    """Wheels of mcs-host (built from this checkout), its dependencies (with its mcp and attest
    extras', and the agent frameworks'), the plugins, the plugins' build backend (for builds
    inside venvs), and pip (the one ensurepip bundles, for venvs whose commands run pip), in
    ``house``."""
    house.mkdir(parents=True, exist_ok=True)
    # mcs-host with the mcp and attest extras' dependencies too: tests/system/test_serve.py
    # installs mcs-host[mcp], tests/system/test_add.py mcs-host[attest] with pip (its add runs
    # the user's pip)
    pip(
        "wheel",
        "--no-build-isolation",
        "--wheel-dir",
        str(house),
        f"{ROOT}[mcp,attest,{','.join(FRAMEWORKS)}]",
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


UNIT = Path(__file__).resolve().parent / "unit"
SYSTEM = Path(__file__).resolve().parent / "system"
_SYSTEM_FIXTURES = frozenset(
    {"wheelhouse", "uv_cache", "fixture_wheels", "bundled_site", "agent_stack"}
)
"""Fixtures that build or install distributions: only tests/system asks for them."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # tests/system first: with a module a worker's unit of work, the slow modules start early
    # and the many fast ones fill what is left, so no worker waits alone for a slow one
    items.sort(key=lambda item: not item.path.is_relative_to(SYSTEM))
    for item in items:
        used = _SYSTEM_FIXTURES & set(getattr(item, "fixturenames", ()))
        if used and item.path.is_relative_to(UNIT):
            raise pytest.UsageError(
                f"{item.nodeid} asks for {', '.join(sorted(used))}: a unit test installs "
                "nothing; move it to tests/system/"
            )


@pytest.fixture(autouse=True)
def _unit_tests_start_no_process(request: pytest.FixtureRequest) -> None:
    """In tests/unit, refuse every way this process could start another, for the test's
    length."""
    if not request.node.path.is_relative_to(UNIT):
        return
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")

    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        raise AssertionError(
            "a unit test starts no process: move this test to tests/system/ "
            f"(it started {args[1:2] or args[:1]})"
        )

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    for name in ("fork", "forkpty", "system", "posix_spawn", "posix_spawnp", "execv", "execve"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refuse)
