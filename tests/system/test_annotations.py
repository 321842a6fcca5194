"""MCP tool annotations: what a driver declares about its tools' effects (``Tool.annotations``)
reaches an MCP client of ``mcs-host serve`` as each tool's ``annotations``, hint for hint, and
nothing is claimed for a driver that declares nothing. Through a real ``serve`` and the SDK's
client: the bundled drivers' read-only tools, a driver with hints in process and isolated in a
child process, a driver without any, and an MCP server with annotations mounted as a driver."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from distbuild import ROOT, Project, Venv, build_wheel, uv_pip
from hostrun import driver_project, entry, pin, write_registry
from pydantic import ValidationError
from scenes import Scene

from mcs_host import DriverMeta, MCSToolDriver, Tool, ToolAnnotations, check_driver
from mcs_host.kit import tool_from_model

HINTED_ID = "7c1f0000-0000-4000-8000-0000000000a1"
BARE_ID = "7c1f0000-0000-4000-8000-0000000000a2"

READ_ONLY = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}
"""What each tool of the bundled drivers declares: it reads files under its root."""

ERASE = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": True,
    "openWorldHint": False,
}
APPEND = {"destructiveHint": False, "idempotentHint": False}  # two hints, the rest unclaimed

HINTED = f"""\
import os

from mcs_host import MCSToolDriver, Tool, ToolAnnotations
from mcs_host.kit import manifest_meta


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [
            Tool(
                name="erase",
                description="Delete a record.",
                annotations=ToolAnnotations(
                    read_only_hint=False,
                    destructive_hint=True,
                    idempotent_hint=True,
                    open_world_hint=False,
                ),
            ),
            Tool(name="append", description="Append a line.", annotations={APPEND!r}),
            Tool(name="pid", description="The process this driver runs in."),
        ]

    def execute_tool(self, tool_name, arguments):
        return os.getpid()
"""

BARE = """\
import os

from mcs_host import MCSToolDriver, Tool
from mcs_host.kit import manifest_meta


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [Tool(name="bare_pid", description="The process this driver runs in.")]

    def execute_tool(self, tool_name, arguments):
        return os.getpid()
"""

SERVER = '''\
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

app = MCPServer("hints")


@app.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True))
def lookup(word: str) -> str:
    """Look a word up on the web."""
    return word


@app.tool(annotations=ToolAnnotations(title="Say hello"))
def hello() -> str:
    """Greet."""
    return "hello"


def main():
    app.run()
'''


# -- the contract -------------------------------------------------------------------------


def test_hints_are_given_by_name_or_as_mcp_spells_them_and_kept_in_json() -> None:
    by_name = Tool(name="t", description="d", annotations=ToolAnnotations(read_only_hint=True))
    as_mcp = Tool(name="t", description="d", annotations={"readOnlyHint": True})
    assert by_name == as_mcp
    assert by_name.annotations is not None
    assert by_name.annotations.claimed == {"readOnlyHint": True}  # the unset ones: no claim
    assert Tool.model_validate_json(by_name.model_dump_json(by_alias=True)) == by_name
    assert Tool(name="t", description="d").annotations is None


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_a_hint_must_be_a_boolean(value: object) -> None:
    if value is None:  # None is "not claimed"
        assert Tool(name="t", description="d", annotations={"readOnlyHint": None})
        return
    with pytest.raises(ValidationError, match=r"annotations\.readOnlyHint"):
        Tool(name="t", description="d", annotations={"readOnlyHint": value})


def test_an_unknown_hint_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"annotations\.readonly"):
        Tool(name="t", description="d", annotations={"readonly": True})


def test_a_reference_sdk_tool_declares_nothing() -> None:
    from mcs.driver.core import Tool as ReferenceTool

    tool = Tool.coerce(ReferenceTool(name="ping", description="Answer pong."))
    assert tool.annotations is None


def test_tool_from_model_declares_the_hints_it_is_given() -> None:
    from pydantic import BaseModel

    class NoArgs(BaseModel):
        pass

    tool = tool_from_model("now", NoArgs, description="Now.", annotations=READ_ONLY)
    assert tool.annotations is not None
    assert tool.annotations.claimed == READ_ONLY
    assert tool_from_model("now", NoArgs, description="Now.").annotations is None


def test_conformance_warns_of_a_read_only_tool_that_destroys() -> None:
    class Contradicts(MCSToolDriver):
        meta = DriverMeta(id="contradicts", name="Contradicts", version="1.0.0")

        def list_tools(self) -> list[Tool]:
            hints = {"readOnlyHint": True, "destructiveHint": True}
            return [Tool(name="wipe", description="Wipe.", annotations=hints)]

        def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
            return {}

    found = {r.code: r for r in check_driver(Contradicts)}
    assert found["contradictory-annotations"].level == "warning"
    assert "'wipe'" in found["contradictory-annotations"].message


# -- through mcs-host serve -------------------------------------------------------------------


@dataclass(frozen=True)
class AnnotationScene(Scene):
    """The venv of :func:`scene` and the ``config`` that mounts its drivers and server."""

    config: Path


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> AnnotationScene:
    """A venv with ``mcs-host[mcp]``, the bundled drivers, the hinted driver (mounted twice:
    ``hinted`` in the host's process, ``apart`` isolated in a child process), the bare driver
    and the hints MCP server's distribution, all pinned by one registry."""
    pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs
    root = tmp_path_factory.mktemp("annotations")
    venv = Venv.create(root / "venv")
    venv.uv_install(
        "mcs-host[mcp]", "mcs-host-csv", "mcs-host-files", wheelhouse=wheelhouse, cache=uv_cache
    )
    marker = root / "imported.txt"
    hinted = driver_project(
        "hinted-driver", marker, HINTED_ID, label="hinted",
        files={"hinted_driver/__init__.py": HINTED},
    )  # fmt: skip
    bare = driver_project(
        "bare-driver", marker, BARE_ID, label="bare", files={"bare_driver/__init__.py": BARE}
    )
    server = Project(
        "hints-server",
        files={"hints_server/__init__.py": SERVER},
        entry_points={"console_scripts": {"hints-server": "hints_server:main"}},
        dependencies=["mcp"],
    )
    wheels = [build_wheel(p.write(root / "src"), root / "wheels") for p in (hinted, bare, server)]
    uv_pip("install", "--no-index", "--no-deps", *map(str, wheels), python=venv.python)
    bundled = json.loads((ROOT / "registry.json").read_text())
    drivers = {
        **bundled["drivers"],
        HINTED_ID: entry(
            "hinted-driver", "hinted", "hinted_driver:Driver", releases={"1.0.0": pin(wheels[0])}
        ),
        BARE_ID: entry(
            "bare-driver", "bare", "bare_driver:Driver", releases={"1.0.0": pin(wheels[1])}
        ),
    }
    registry = write_registry(
        root / "registry.json",
        drivers,
        libraries={**bundled["libraries"], "hints-server": {"releases": {"1.0.0": pin(wheels[2])}}},
        mcp_servers={"hints": {"distribution": "hints-server", "consent": False}},
    )
    data = root / "data"
    data.mkdir()
    (data / "sales.csv").write_text("month,units\nJan,61\n")
    config = root / "mcs-host.toml"
    config.write_text(
        f'registries = ["{registry}"]\nautoload = true\n\n'
        f'[drivers.csv]\nsettings = {{ root = "{data}" }}\n\n'
        f'[drivers.files]\nsettings = {{ root = "{data}" }}\n\n'
        '[drivers.hinted]\n\n[drivers.apart]\ndriver = "hinted"\nisolation = "process"\n\n'
        "[mcp_servers.hints]\n"
    )
    return AnnotationScene(root, venv, config)


def served(scene: AnnotationScene) -> tuple[dict[tuple[str, str], Any], dict[str, Any]]:
    """The tools ``serve`` lists, by (label, the driver's own name), and what ``pid`` and
    ``bare_pid`` answer, by label."""
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(
        command=str(scene.venv.bin / "mcs-host"),
        args=["serve", "--config", str(scene.config)],
        env=scene.environment(),
        cwd=str(scene.root),
    )

    async def main() -> tuple[dict[tuple[str, str], Any], dict[str, Any]]:
        async with Client(server, read_timeout_seconds=60) as client:
            listed = (await client.list_tools()).tools
            tools = {}
            for tool in listed:
                facts = (tool.meta or {})["io.mcs-host/driver"]
                tools[facts["label"], facts["tool"]] = tool
            pids = {}
            for (label, own), tool in tools.items():
                if own in ("pid", "bare_pid"):
                    result = await client.call_tool(tool.name, {})
                    pids[label] = (result.structured_content or {}).get("result")
            return tools, pids

    return anyio.run(main)


def hints(tool: Any) -> dict[str, bool] | None:
    """A listed tool's annotations as the wire has them, or ``None`` when it has none."""
    if tool.annotations is None:
        return None
    declared: dict[str, bool] = tool.annotations.model_dump(by_alias=True, exclude_none=True)
    return declared


@pytest.mark.venv
def test_serve_sends_each_tool_the_hints_its_driver_declared_and_no_others(
    scene: AnnotationScene,
) -> None:
    tools, pids = served(scene)
    bundled = {key: hints(tool) for key, tool in tools.items() if key[0] in ("csv", "files")}
    assert len(bundled) == 8
    assert set(map(json.dumps, bundled.values())) == {json.dumps(READ_ONLY)}
    for label in ("hinted", "apart"):  # apart: served from its own process, then again here
        assert hints(tools[label, "erase"]) == ERASE
        assert hints(tools[label, "append"]) == APPEND  # no defaults filled in
        assert tools[label, "pid"].annotations is None  # declared nothing for this tool
    # isolated: the child process answers, not the one that serves the others
    assert isinstance(pids["apart"], int)
    assert pids["apart"] != pids["hinted"] == pids["bare"]
    # a driver that declares nothing: nothing is claimed, not MCP's defaults
    assert tools["bare", "bare_pid"].annotations is None
    # an MCP server mounted as a driver: its hints are passed on, its annotations' title is
    # the tool's title, and a tool with no hint gets no annotations
    assert hints(tools["hints", "lookup"]) == {"readOnlyHint": True, "openWorldHint": True}
    assert tools["hints", "hello"].annotations is None
    assert tools["hints", "hello"].title == "Say hello"
