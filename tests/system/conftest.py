"""Fixtures of the agent frameworks' tests: a verified load, in this process, of a real bundled
driver and of an MCP server each of whose calls needs approval."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _frameworks import AgentStack
from distbuild import ROOT, install_target
from sample_drivers import GATED_SERVER

from mcs_host import HostConfig, load_drivers


@pytest.fixture(scope="session")
def bundled_site(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled drivers' wheels, as the wheelhouse built them (the bytes registry.json
    pins), installed into a plain directory (``pip install --target``): a ``search_path``
    whose drivers verify as ``pinned``."""
    wheels = [*wheelhouse.glob("mcs_host_csv-*.whl"), *wheelhouse.glob("mcs_host_files-*.whl")]
    assert len(wheels) == 2, wheels
    return install_target(tmp_path_factory.mktemp("bundled") / "site", wheels)


@pytest.fixture
def agent_stack(bundled_site: Path, tmp_path: Path) -> Iterator[AgentStack]:
    """``load_drivers`` of the bundled ``csv`` driver (verified against registry.json, its
    root a copy of the demo data) and ``gated``, an MCP server no registry vouches for, so
    each call needs approval (allowed unverified for it alone); closed after the test."""
    data = tmp_path / "data"
    shutil.copytree(ROOT / "scripts" / "demo" / "data", data)
    server = tmp_path / "gated_server.py"
    server.write_text(GATED_SERVER)
    marker = tmp_path / "wiped.txt"
    config = HostConfig.model_validate(
        {
            "autoload": True,
            "plugins": False,
            "registries": [str(ROOT / "registry.json")],
            "drivers": {"csv": {"settings": {"root": str(data)}}},
            "mcp_servers": {
                "gated": {
                    "command": [sys.executable, str(server), str(marker)],
                    "allow_unverified": True,
                }
            },
        }
    )
    with load_drivers(config, ["csv", "gated"], search_path=bundled_site) as loaded:
        records = {r.label: r for r in loaded.report.records}
        assert records["csv"].verification == "pinned", records["csv"]
        assert loaded.gated == ("gated",)
        yield AgentStack(loaded, data, marker)
