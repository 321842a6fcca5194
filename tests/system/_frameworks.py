"""What the agent frameworks' tests share: a verified load, in this process, of a real bundled
driver and of an MCP server each of whose calls needs approval (the fixtures ``bundled_site``
and ``agent_stack``, a pytest plugin of tests/conftest.py)."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from distbuild import ROOT, install_target
from sample_drivers import GATED_SERVER

from mcs_host import (
    DriverMeta,
    HostConfig,
    Loaded,
    MCSToolDriver,
    Tool,
    ToolParameter,
    load_drivers,
)


@dataclass(frozen=True)
class AgentStack:
    """A load as an agent framework gets it, and what its tools touch."""

    loaded: Loaded
    data: Path
    """The csv driver's root: a copy of scripts/demo/data (sales.csv...)."""
    marker: Path
    """What the gated server's tool ``wipe`` appends to: absent until a call of it runs."""


class Keys(MCSToolDriver):
    """A tool ``keys`` whose required string arguments are ``names`` (names a framework might
    take for its own keyword arguments); it gives back the arguments it got."""

    meta = DriverMeta(id="keys-0001", name="Keys", version="1.0.0")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def list_tools(self) -> list[Tool]:
        return [
            Tool(
                name="keys",
                description="Give back the arguments.",
                parameters=[
                    ToolParameter(name=n, description=n, schema={"type": "string"}, required=True)
                    for n in self.names
                ],
            )
        ]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return dict(arguments)


@pytest.fixture(scope="session")
def bundled_site(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled drivers' wheels, as the wheelhouse built them (the bytes registry.json
    pins), installed into a plain directory (``pip install --target``): a ``search_path``
    whose drivers verify as ``pinned``."""
    wheels = [*wheelhouse.glob("mcs_host_csv-*.whl"), *wheelhouse.glob("mcs_host_files-*.whl")]
    assert len(wheels) == 2, wheels
    return install_target(tmp_path_factory.mktemp("bundled") / "site", wheels)


@pytest.fixture
def agent_stack(
    bundled_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[AgentStack]:
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
    # a test before this one in the process may have imported the editable checkout's
    # mcs_host_csv, which the host rightly refuses to vouch for: the load imports its own
    for name in [m for m in sys.modules if m == "mcs_host_csv" or m.startswith("mcs_host_csv.")]:
        monkeypatch.delitem(sys.modules, name)
    with load_drivers(config, ["csv", "gated"], search_path=bundled_site) as loaded:
        records = {r.label: r for r in loaded.report.records}
        assert records["csv"].status == "mounted", records["csv"]
        assert records["csv"].verification == "pinned", records["csv"]
        assert loaded.gated == ("gated",)
        yield AgentStack(loaded, data, marker)
