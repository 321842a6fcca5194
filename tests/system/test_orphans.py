"""No process outlives the host (Linux): a real, pinned driver and a real, pinned MCP server
whose tools start a daemon (fork, ``setsid``, fork again, the first child gone), which leaves
the process group of the process that started it and would be handed to init when its
parent ends. Hosts and child hosts are child subreapers: the daemon stays below them, and
is ended when they end, however they end (but SIGKILL, which the host that gets it cannot
act on: an isolated driver's or a server's process then ends what it started itself).

Each daemon carries a marker in its command line; ``/proc`` is searched for it until a
deadline, so no test depends on how fast a process ends."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from distbuild import Project, Venv, build_wheel, uv_pip
from hostrun import driver_project, entry, pin, write_registry
from scenes import Scene

pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs

pytestmark = [
    pytest.mark.venv,
    pytest.mark.skipif(
        not sys.platform.startswith("linux") or not os.path.isdir("/proc/self"),
        reason="a child subreaper and /proc are Linux's",
    ),
]

DEADLINE = 20.0
"""Seconds a daemon has to be gone (or a process to appear); polled every 0.1 s."""

SPAWNER_ID = "7c1f0000-0000-4000-8000-0000000000e7"

DAEMONIZE = """\
import os, sys
marker = sys.argv[1]
out = os.dup(1)
if os.fork() == 0:  # the first child leaves the session, forks the daemon, and is gone
    os.setsid()
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, 256)
        sleep = "import time\\nwhile True:\\n    time.sleep(60)\\n"
        os.execv(sys.executable, [sys.executable, "-c", sleep, "daemon:" + marker])
    os.write(out, b"%d\\n" % pid)
    os._exit(0)
os.wait()
"""
"""Started by a tool: prints the daemon's pid, and is gone with its first child."""

SPAWN = f"""\
import os
import subprocess
import sys

DAEMONIZE = {DAEMONIZE!r}


def start_daemon(marker):
    \"\"\"Start a daemon whose command line carries ``daemon:MARKER``; what it is then: its
    pid, its parent's, and this process's.\"\"\"
    done = subprocess.run(
        [sys.executable, "-c", DAEMONIZE, marker], capture_output=True, check=True, timeout=60
    )
    pid = int(done.stdout)
    with open(f"/proc/{{pid}}/stat", "rb") as file:
        parent = int(file.read().rpartition(b")")[2].split()[1])
    return {{"daemon": pid, "parent": parent, "host": os.getpid()}}
"""

DRIVER = """\
import os
import signal
import time

from mcs_host import MCSToolDriver, Tool, ToolParameter
from mcs_host.kit import manifest_meta

from .spawn import start_daemon

MARKER = [
    ToolParameter(
        name="marker", description="Carried in the daemon's command line.", required=True,
        schema={"type": "string"},
    )
]


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [
            Tool(name="daemon", description="Start a daemon.", parameters=MARKER),
            Tool(name="daemon_and_hang", description="Start one, then hang.", parameters=MARKER),
            Tool(name="crash", description="Die of SIGKILL."),
            Tool(name="pid", description="Answer the process id."),
        ]

    def execute_tool(self, tool_name, arguments):
        if tool_name == "pid":
            return os.getpid()
        if tool_name == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        started = start_daemon(arguments["marker"])
        while tool_name == "daemon_and_hang":
            time.sleep(1)
        return started
"""

SERVER = """\
import time

from mcp.server.mcpserver import MCPServer

from .spawn import start_daemon

app = MCPServer("spawner")


@app.tool()
def daemon(marker: str) -> dict:
    \"\"\"Start a daemon.\"\"\"
    return start_daemon(marker)


@app.tool()
def daemon_and_hang(marker: str) -> dict:
    \"\"\"Start a daemon, then hang.\"\"\"
    start_daemon(marker)
    while True:
        time.sleep(1)


def main():
    app.run()
"""


@dataclass(frozen=True)
class OrphanScene(Scene):
    """The registry that pins the spawner driver and server, and a configuration for each:
    ``drivers`` (the driver alone) and ``servers`` (the server alone)."""

    registry: Path
    drivers: Path
    servers: Path

    @property
    def state(self) -> Path:
        """The host's state directory for every command here, started or run: the venv's,
        where :meth:`Venv.run` puts it."""
        return self.venv.path / "mcs-host-state"


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> OrphanScene:
    """A venv with ``mcs-host[mcp]``, the spawner driver and the spawner server, a registry
    that pins both, and a configuration for each (``drivers``, ``servers``)."""
    root = tmp_path_factory.mktemp("orphans")
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host[mcp]", wheelhouse=wheelhouse, cache=uv_cache)
    driver = driver_project(
        "spawner-driver",
        root / "marker.txt",
        SPAWNER_ID,
        label="spawner",
        files={"spawner_driver/__init__.py": DRIVER, "spawner_driver/spawn.py": SPAWN},
    )
    server = Project(
        "spawner-server",
        files={"spawner_server/__init__.py": SERVER, "spawner_server/spawn.py": SPAWN},
        entry_points={"console_scripts": {"spawner-server": "spawner_server:main"}},
        dependencies=["mcp"],
    )
    wheels = [build_wheel(p.write(root / "src"), root / "wheels") for p in (driver, server)]
    uv_pip("install", "--no-index", "--no-deps", *map(str, wheels), python=venv.python)
    registry = write_registry(
        root / "registry.json",
        {
            SPAWNER_ID: entry(
                "spawner-driver", "spawner", "spawner_driver:Driver",
                releases={"1.0.0": pin(wheels[0])},
            )
        },
        libraries={"spawner-server": {"releases": {"1.0.0": pin(wheels[1])}}},
        mcp_servers={
            "spawnsrv": {"distribution": "spawner-server", "consent": False, "trust": "verified"}
        },
    )  # fmt: skip
    drivers = root / "drivers.toml"  # the driver alone
    drivers.write_text(f'registries = ["{registry}"]\nnamespace = "always"\n')
    servers = root / "servers.toml"  # the server alone
    servers.write_text(
        f'registries = ["{registry}"]\nautoload = false\nnamespace = "always"\n'
        "[mcp_servers.spawnsrv]\n"
    )
    return OrphanScene(root=root, venv=venv, registry=registry, drivers=drivers, servers=servers)


@pytest.fixture
def marker() -> Iterator[str]:
    """A marker no other process has; whatever still carries it afterwards is killed (a
    run without the containment leaves its daemons behind otherwise)."""
    mark = f"MCS-ORPHAN-{uuid.uuid4().hex}"
    yield mark
    for pid in daemons(mark):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def daemons(marker: str) -> list[int]:
    """The live processes whose command line carries ``daemon:MARKER``."""
    wanted = f"daemon:{marker}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as file:
                argv = file.read().split(b"\0")
        except OSError:
            continue  # it ended meanwhile
        if wanted in argv:  # a zombie's command line is empty: it has ended
            found.append(int(name))
    return found


def wait_until(predicate: Any, seconds: float = DEADLINE) -> bool:
    """Poll ``predicate`` every 0.1 s until it is true or ``seconds`` pass; its last value."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return bool(predicate())
        time.sleep(0.1)
    return True


def assert_gone(marker: str) -> None:
    assert wait_until(lambda: not daemons(marker)), f"a daemon outlived its host: {marker}"


def arguments(marker: str) -> str:
    return json.dumps({"marker": marker})


def started_by(done: subprocess.CompletedProcess[str]) -> dict[str, int]:
    """What the tool said of the daemon it started (a server's tool says it as JSON text)."""
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)["response"]["tool_call_result"]
    started: dict[str, int] = json.loads(result) if isinstance(result, str) else result
    return started


# -- mcs-host call and run ---------------------------------------------------------------------


@pytest.mark.parametrize("isolate", ["--isolate", "--no-isolate"])
def test_a_daemon_a_driver_starts_is_ended_when_mcs_host_call_exits(
    scene: OrphanScene, marker: str, isolate: str
) -> None:
    done = scene.host(
        "call", "spawner__daemon", "--args", arguments(marker),
        "--config", scene.drivers, isolate, "--json", home=scene.root,
    )  # fmt: skip
    started = started_by(done)
    assert_gone(marker)
    # its first child is gone: it was handed to the process the tool ran in (a subreaper),
    # the host's own in process, its child host when isolated
    assert started["parent"] == started["host"]


def test_a_daemon_an_isolated_driver_starts_is_ended_when_mcs_host_run_exits(
    scene: OrphanScene, marker: str
) -> None:
    output = json.dumps({"tool": "spawner__daemon", "arguments": {"marker": marker}})
    done = scene.host(
        "run", output, "--config", scene.drivers, "--isolate", "--json", home=scene.root
    )
    started = started_by(done)
    assert_gone(marker)
    assert started["parent"] == started["host"]


def test_a_daemon_an_mcp_server_starts_is_ended_when_mcs_host_call_exits(
    scene: OrphanScene, marker: str
) -> None:
    done = scene.host(
        "call", "spawnsrv__daemon", "--args", arguments(marker),
        "--config", scene.servers, "--json", home=scene.root,
    )  # fmt: skip
    started = started_by(done)
    assert_gone(marker)
    assert started["parent"] == started["host"]  # the run-server process


# -- a host that is ended mid-call -------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "tool", "isolate"),
    [
        ("drivers", "spawner__daemon_and_hang", "--isolate"),
        ("servers", "spawnsrv__daemon_and_hang", "--no-isolate"),
    ],
)
def test_a_host_killed_mid_call_leaves_no_daemon_of_an_isolated_driver_or_server(
    scene: OrphanScene, marker: str, config: str, tool: str, isolate: str
) -> None:
    # SIGKILL: the host cannot act, its child host gets SIGTERM (PR_SET_PDEATHSIG) while
    # the tool is stuck, and ends what it started before it exits
    configuration: Path = getattr(scene, config)
    process = scene.start(
        "call", tool, "--args", arguments(marker), "--config", configuration, isolate,
        state=scene.state,
    )  # fmt: skip
    try:
        assert wait_until(lambda: bool(daemons(marker)), 60), "the daemon never started"
        process.kill()
    finally:
        process.kill()
        process.wait(30)
    assert_gone(marker)


def test_a_host_ended_by_sigterm_mid_call_leaves_no_daemon_of_an_in_process_driver(
    scene: OrphanScene, marker: str
) -> None:
    process = scene.start(
        "call", "spawner__daemon_and_hang", "--args", arguments(marker),
        "--config", scene.drivers, "--no-isolate", state=scene.state,
    )  # fmt: skip
    try:
        assert wait_until(lambda: bool(daemons(marker)), 60), "the daemon never started"
        process.terminate()
        assert process.wait(30) == -signal.SIGTERM  # it dies of the signal, as it would have
    finally:
        process.kill()
        process.wait(30)
    assert_gone(marker)


# -- mcs-host serve ----------------------------------------------------------------------------


def serve(scene: OrphanScene, calls: Any) -> dict[str, Any]:
    """Run ``mcs-host serve --isolate`` for an MCP client, which makes ``calls(client,
    seen)`` and then closes the connection."""
    import anyio
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(
        command=str(scene.venv.bin / "mcs-host"),
        args=["serve", "--config", str(scene.drivers), "--isolate"],
        env=scene.environment(state=scene.state),
        cwd=str(scene.root),
    )
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with Client(server, read_timeout_seconds=60) as client:
            await calls(client, seen)

    anyio.run(main)
    return seen


def test_a_daemon_an_isolated_driver_starts_is_ended_when_the_client_closes_serve(
    scene: OrphanScene, marker: str
) -> None:
    async def calls(client: Any, seen: dict[str, Any]) -> None:
        result = await client.call_tool("spawner__daemon", {"marker": marker})
        seen["started"] = result.structured_content
        seen["alive"] = daemons(marker)

    seen = serve(scene, calls)
    started = seen["started"]
    assert started["parent"] == started["host"]  # the isolated driver's process
    assert seen["alive"] == [started["daemon"]]  # it ran while the client was connected
    assert_gone(marker)


def test_a_daemon_of_an_isolated_driver_killed_by_its_tool_is_ended_with_it(
    scene: OrphanScene, marker: str
) -> None:
    # the child host dies of SIGKILL and cannot act: its daemon, handed to the host (a
    # subreaper too), is found by the mark it inherited and ended when the child's end is seen
    async def calls(client: Any, seen: dict[str, Any]) -> None:
        result = await client.call_tool("spawner__daemon", {"marker": marker})
        seen["started"] = result.structured_content
        seen["crash"] = await client.call_tool("spawner__crash", {})
        seen["gone"] = await anyio_wait_until(lambda: not daemons(marker))

    seen = serve(scene, calls)
    assert seen["crash"].is_error
    assert "its process ended" in seen["crash"].content[0].text
    assert seen["gone"], "the daemon of a child killed by SIGKILL outlived it while the host ran"
    assert_gone(marker)


def test_a_daemon_of_an_isolated_driver_killed_by_its_tool_is_ended_by_the_restart(
    scene: OrphanScene, marker: str
) -> None:
    async def calls(client: Any, seen: dict[str, Any]) -> None:
        result = await client.call_tool("spawner__daemon", {"marker": marker})
        seen["started"] = result.structured_content
        seen["crash"] = await client.call_tool("spawner__crash", {})
        seen["pid"] = await client.call_tool("spawner__pid", {})
        seen["gone"] = await anyio_wait_until(lambda: not daemons(marker))

    seen = serve(scene, calls)
    assert seen["crash"].is_error
    assert seen["pid"].structured_content["result"] != seen["started"]["host"]  # a new one
    assert seen["gone"], "the first child's daemon outlived it while the host ran"


async def anyio_wait_until(predicate: Any, seconds: float = DEADLINE) -> bool:
    """:func:`wait_until` on an event loop."""
    import anyio

    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return bool(predicate())
        await anyio.sleep(0.1)
    return True


# -- an isolated driver's process, driven directly ---------------------------------------------


def start_child(scene: OrphanScene) -> subprocess.Popen[bytes]:
    """``python -I -m mcs_host serve --isolated spawner`` as a host starts it, with the
    configuration a host would write for it."""
    from mcs_host.bridge.isolation import CONFIG_VARIABLE
    from mcs_host.loading.config_schema import HostConfig

    child = HostConfig.model_validate(
        {
            "registries": [str(scene.registry)],
            "drivers": {"spawner": {}},
            "autoload": False,
            "plugins": False,
        }
    )
    return subprocess.Popen(
        [str(scene.venv.python), "-I", "-m", "mcs_host", "serve", "--isolated", "spawner"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**scene.environment(state=scene.state), CONFIG_VARIABLE: child.model_dump_json()},
        cwd=scene.root,
        start_new_session=True,
    )


def send(process: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
    process.stdin.flush()


@pytest.mark.parametrize("how", ["stdin closed", "SIGTERM", "SIGINT"])
def test_an_isolated_driver_s_process_ends_its_daemon_however_it_is_ended_mid_call(
    scene: OrphanScene, marker: str, how: str
) -> None:
    # its tool is stuck in a thread: the process still ends, and what it started first
    process = start_child(scene)
    try:
        assert process.stdout is not None
        send(
            process,
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"},
                },
            },
        )
        assert json.loads(process.stdout.readline())["id"] == 1
        send(process, {"method": "notifications/initialized"})
        send(
            process,
            {
                "id": 2,
                "method": "tools/call",
                "params": {"name": "daemon_and_hang", "arguments": {"marker": marker}},
            },
        )
        assert wait_until(lambda: bool(daemons(marker)), 60), "the daemon never started"
        if how == "stdin closed":
            assert process.stdin is not None
            process.stdin.close()
        else:
            process.send_signal(signal.SIGTERM if how == "SIGTERM" else signal.SIGINT)
        assert wait_until(lambda: process.poll() is not None), "the child did not end"
        assert_gone(marker)
    finally:
        process.kill()
        process.wait(30)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()
