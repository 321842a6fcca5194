"""``mcs-host serve`` as an MCP client meets it: the SDK's own client starts the installed
command (stdio) or connects to it (streamable HTTP on localhost), lists the tools with their
schemas and trust facts, and calls them: the bundled drivers, a failing tool, a call a
consent plugin refuses, and a call the client cancels. What the drivers print never reaches
the protocol stream."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from distbuild import ROOT, Project, Venv, build_wheel, free_port, pip, wait_for_port
from hostrun import driver_project, entry, pin, write_registry

pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs

from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.venv

NOISY_ID = "7c1f0000-0000-4000-8000-0000000000d1"
CONSENT_ID = "7c1f0000-0000-4000-8000-0000000000d3"

NOISY = """\
print("noisy driver imported")  # on stdout, where the protocol runs
import time

from mcs_host import MCSToolDriver, Tool, ToolParameter
from mcs_host.kit import manifest_meta


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def __init__(self):
        print("noisy driver constructed")

    def list_tools(self):
        seconds = ToolParameter(
            name="seconds", description="How long.", required=True, schema={"type": "number"}
        )
        return [
            Tool(name="shout", description="Print, then answer."),
            Tool(name="fail", description="Raise."),
            Tool(name="wait", description="Sleep, then answer.", parameters=[seconds]),
            Tool(name="forbidden", description="Refused by the consent plugin."),
        ]

    def execute_tool(self, tool_name, arguments):
        print("noisy driver called", tool_name)
        if tool_name == "fail":
            raise RuntimeError("the backend is down")
        if tool_name == "wait":
            time.sleep(arguments["seconds"])
        return {"said": tool_name}
"""

CONSENT = """\
from mcs_host.loading.hooks import hookimpl


@hookimpl
def mcs_host_consent(call):
    if call.name == "forbidden":
        return "the user said no"
    return None
"""


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> dict[str, Any]:
    """A venv with ``mcs-host[mcp]``, the bundled drivers, a noisy driver and a consent
    plugin, all pinned by one registry."""
    root = tmp_path_factory.mktemp("serve")
    venv = Venv.create(root / "venv")
    venv.uv_install(
        "mcs-host[mcp]", "mcs-host-csv", "mcs-host-files", wheelhouse=wheelhouse, cache=uv_cache
    )
    noisy = driver_project(
        "noisy-driver",
        root / "marker.txt",
        NOISY_ID,
        label="noisy",
        files={"noisy_driver/__init__.py": NOISY},
    )
    consent = Project(
        "consent-plugin",
        files={"consent_plugin/__init__.py": CONSENT},
        entry_points={"mcs.host_plugins": {"consent": "consent_plugin"}},
        dependencies=["mcs-host"],
    )
    wheels = [build_wheel(p.write(root / "src"), root / "wheels") for p in (noisy, consent)]
    pip("install", "--no-index", "--no-deps", *map(str, wheels), python=venv.python)
    bundled = json.loads((ROOT / "registry.json").read_text())
    drivers = {
        **bundled["drivers"],
        NOISY_ID: entry(
            "noisy-driver", "noisy", "noisy_driver:Driver", releases={"1.0.0": pin(wheels[0])}
        ),
        CONSENT_ID: entry(
            "consent-plugin",
            "consent",
            "consent_plugin",
            group="mcs.host_plugins",
            releases={"1.0.0": pin(wheels[1])},
        ),
    }
    registry = write_registry(root / "registry.json", drivers, libraries=bundled["libraries"])
    data = root / "data"
    data.mkdir()
    (data / "sales.csv").write_text("month,units\nJan,61\nFeb,90\nMar,143\n")
    config = root / "mcs-host.toml"
    config.write_text(
        f'registries = ["{registry}"]\n\n'
        f'[drivers.csv]\nsettings = {{ root = "{data}" }}\n\n'
        f'[drivers.files]\nsettings = {{ root = "{data}" }}\n'
    )
    return {"venv": venv, "registry": registry, "config": config, "root": root}


def environment(scene: dict[str, Any]) -> dict[str, str]:
    venv: Venv = scene["venv"]
    return {
        "PATH": f"{venv.bin}:/usr/bin:/bin",
        "MCS_HOST_STATE_DIR": str(scene["root"] / "state"),
        "HOME": str(scene["root"]),
    }


def stdio(scene: dict[str, Any], *args: str) -> StdioServerParameters:
    venv: Venv = scene["venv"]
    command = [str(venv.bin / "mcs-host"), "serve", "--config", str(scene["config"]), *args]
    return StdioServerParameters(
        command=command[0], args=command[1:], env=environment(scene), cwd=str(scene["root"])
    )


def session(server: Any, work: Any) -> Any:
    async def main() -> Any:
        async with Client(server, read_timeout_seconds=60) as client:
            return await work(client)

    return anyio.run(main)


def text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def test_stdio_lists_every_tool_with_its_schema_and_trust_facts(scene: dict[str, Any]) -> None:
    async def work(client: Client) -> Any:
        return client.server_info, client.instructions, await client.list_tools()

    info, instructions, listed = session(stdio(scene), work)
    assert info is not None
    assert info.name == "mcs-host"
    assert "read_csv_head" in (instructions or "")  # the stack's system message
    tools = {tool.name: tool for tool in listed.tools}
    assert {"read_csv_head", "summarize_column", "read_file", "shout", "fail"} <= set(tools)
    csv = tools["read_csv_head"]
    assert csv.input_schema["type"] == "object"
    assert "file" in csv.input_schema["properties"]
    facts = csv.meta["io.mcs-host/driver"]
    assert facts["label"] == "csv"
    assert facts["distribution"] == "mcs-host-csv"
    assert (facts["verification"], facts["trust"]) == ("pinned", "verified")
    assert tools["shout"].meta["io.mcs-host/driver"]["verification"] == "pinned"


def test_stdio_calls_run_through_the_orchestrator(scene: dict[str, Any]) -> None:
    async def work(client: Client) -> Any:
        return (
            await client.call_tool("read_csv_head", {"file": "sales.csv", "rows": 2}),
            await client.call_tool("list_directory", {"path": "."}),
            await client.call_tool("shout", {}),
            await client.call_tool("fail", {}),
            await client.call_tool("read_csv_head", {"file": "sales.csv", "rows": "many"}),
            await client.call_tool("forbidden", {}),
            await client.call_tool("shout", {}),  # the server is still there
        )

    csv, files, shout, fail, invalid, refused, again = session(stdio(scene), work)
    assert not csv.is_error
    assert csv.structured_content["columns"] == ["month", "units"]
    assert not files.is_error
    assert "sales.csv" in text(files)
    assert shout.structured_content == {"said": "shout"}  # its print went to stderr
    assert fail.is_error
    assert text(fail) == "fail failed: RuntimeError: the backend is down"
    assert invalid.is_error
    assert "argument 'rows'" in text(invalid)
    assert refused.is_error
    assert text(refused) == "the call of 'forbidden' was not approved: the user said no"
    assert again.structured_content == {"said": "shout"}


def test_a_cancelled_call_leaves_the_server_serving(scene: dict[str, Any]) -> None:
    async def work(client: Client) -> Any:
        with anyio.move_on_after(1):
            await client.call_tool("wait", {"seconds": 30})
        started = time.monotonic()
        after = await client.call_tool("shout", {})
        return after, time.monotonic() - started

    after, seconds = session(stdio(scene), work)
    assert after.structured_content == {"said": "shout"}
    assert seconds < 20  # not queued behind the cancelled call


def test_serve_without_drivers_to_load_says_why_on_stderr(scene: dict[str, Any]) -> None:
    venv: Venv = scene["venv"]
    done = venv.run(
        "mcs-host", "serve", "nothing-here", "--config", scene["config"], env=environment(scene)
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert "nothing-here" in done.stderr


def test_a_wrong_http_address_is_a_usage_error(scene: dict[str, Any]) -> None:
    venv: Venv = scene["venv"]
    done = venv.run("mcs-host", "serve", "--http", "localhost", env=environment(scene))
    assert done.returncode == 2
    assert "give HOST:PORT or :PORT" in done.stderr


def start_http(scene: dict[str, Any]) -> tuple[subprocess.Popen[str], int]:
    """``mcs-host serve --http`` on a free port of 127.0.0.1, once it listens."""
    port = free_port()
    venv: Venv = scene["venv"]
    command = [venv.bin / "mcs-host", "serve", "--config", scene["config"]]
    process = subprocess.Popen(
        [*map(str, command), "--http", f"127.0.0.1:{port}"],
        env=environment(scene),
        cwd=scene["root"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_port(port, process)
    return process, port


@pytest.fixture
def http_server(scene: dict[str, Any]) -> Iterator[str]:
    process, port = start_http(scene)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=30)
        assert process.returncode is not None
        assert out == ""


def test_streamable_http_serves_the_same_tools_and_calls(http_server: str) -> None:
    async def work(client: Client) -> Any:
        listed = await client.list_tools()
        return listed, await client.call_tool("read_csv_head", {"file": "sales.csv"})

    listed, csv = session(http_server, work)
    assert "summarize_column" in {tool.name for tool in listed.tools}
    assert csv.structured_content["columns"] == ["month", "units"]


PLANTED = """\
open({marker!r}, "a").write("planted mcp ran\\n")
"""
USES_MCP_ID = "7c1f0000-0000-4000-8000-0000000000d4"


def test_a_planted_mcp_package_is_the_hosts_only_under_serve(
    tmp_path: Path, wheelhouse: Path, uv_cache: Path, scene: dict[str, Any]
) -> None:
    # the mcp extra's requirements count as the host's only in `serve`, the command that
    # needs them: elsewhere a distribution named mcp, planted in site-packages, is nobody's
    # verified code, and a verified driver that imports it is refused
    marker = tmp_path / "ran.txt"
    venv = Venv.create(tmp_path / "venv")
    venv.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    planted = Project("mcp", "2.3.0", files={"mcp/__init__.py": PLANTED.format(marker=str(marker))})
    uses = driver_project(
        "uses-mcp",
        tmp_path / "driver-ran.txt",
        USES_MCP_ID,
        label="uses",
        files={"uses_mcp/extra.py": "import mcp\n"},
        entry_point="uses_mcp.extra:Driver",
    )
    wheels = [build_wheel(p.write(tmp_path / "src"), tmp_path / "wheels") for p in (planted, uses)]
    pip("install", "--no-index", "--no-deps", *map(str, wheels), python=venv.python)
    registry = write_registry(
        tmp_path / "registry.json",
        {
            USES_MCP_ID: entry(
                "uses-mcp", "uses", "uses_mcp.extra:Driver", releases={"1.0.0": pin(wheels[1])}
            )
        },
    )
    env = {**environment(scene), "PATH": f"{venv.bin}:/usr/bin:/bin"}
    for command in ("list", "verify", "load"):
        done = venv.run("mcs-host", command, "--registry", registry, env=env)
    assert "import of 'mcp' refused" in done.stdout
    assert "is not part of the standard library or of mcs-host's own installation" in done.stdout
    assert not marker.exists()


def start_stdio(scene: dict[str, Any]) -> subprocess.Popen[str]:
    venv: Venv = scene["venv"]
    process = subprocess.Popen(
        [str(venv.bin / "mcs-host"), "serve", "--config", str(scene["config"])],
        env=environment(scene),
        cwd=scene["root"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:  # the load report comes first, then it serves
        if line.startswith("mounted files"):
            break
    return process


@pytest.mark.parametrize("how", ["client disconnects", "SIGTERM", "SIGINT"])
def test_serve_on_stdio_ends_cleanly(scene: dict[str, Any], how: str) -> None:
    import signal

    process = start_stdio(scene)
    time.sleep(0.5)
    if how == "client disconnects":
        assert process.stdin is not None
        process.stdin.close()
    else:
        process.send_signal(signal.SIGTERM if how == "SIGTERM" else signal.SIGINT)
    try:
        assert process.wait(timeout=30) == 0
        assert process.stdout is not None
        assert process.stdout.read() == ""  # no traceback, no stray output on the wire
    finally:
        process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_serve_on_http_ends_cleanly_on_sigterm(scene: dict[str, Any]) -> None:
    process, _ = start_http(scene)
    try:
        process.terminate()
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
        _, errors = process.communicate()
    assert "Traceback" not in errors
