"""stdout carries only what the command promises: with ``--json`` one JSON document, on
``serve`` over stdio nothing but MCP protocol, from the process's start to its exit.

Two pinned drivers print everywhere a driver can: ``loud`` (a ToolDriver) at import, in
``__init__``, ``list_tools`` and ``execute_tool``, flushed, left in the buffer and with
``os.write(1, ...)``, from background threads and a ``threading.Timer``, from a thread that
prints only once the main thread has finished (after the document), and from an ``atexit``
handler; ``solo`` (a standalone MCSDriver) at import, in ``__init__``, in
``get_driver_system_message`` (what ``serve`` builds its instructions from) and in
``process_llm_response``. The real ``mcs-host`` console script runs in a venv; each print
must turn up on stderr, never on stdout.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from distbuild import Venv, build_wheel, uv_pip
from hostrun import driver_project, entry, pin, write_registry
from scenes import Scene

pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs

pytestmark = pytest.mark.venv

LOUD_ID = "7c1f0000-0000-4000-8000-0000000000f1"
SOLO_ID = "7c1f0000-0000-4000-8000-0000000000f2"

LOUD = """\
import atexit
import os
import sys
import threading

from mcs_host import MCSToolDriver, Tool
from mcs_host.kit import manifest_meta

print("LOUD import")
print("LOUD import left in the buffer", end="")
os.write(1, b"LOUD import on descriptor 1\\n")


def _last_words():
    print("LOUD atexit left in the buffer", end="")  # flushed as the interpreter ends
    os.write(1, b"LOUD atexit on descriptor 1\\n")


atexit.register(_last_words)


def _after_the_main_thread():
    threading.main_thread().join()  # the command has returned: its document is out
    for n in range(20):
        print(f"LOUD thread after the main thread {n}", flush=n % 2 == 0)  # one write
    os.write(1, b"LOUD thread after the main thread on descriptor 1\\n")


def _background(where):
    for n in range(20):
        print(f"LOUD background thread {where} {n}", flush=n % 2 == 0)  # one write
    os.write(1, f"LOUD background thread {where} on descriptor 1\\n".encode())


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def __init__(self):
        print("LOUD init")
        sys.stdout.flush()
        # not daemons (the host may call a driver from a daemon thread): the interpreter
        # waits for them at exit
        threading.Thread(target=_after_the_main_thread, daemon=False).start()
        timer = threading.Timer(0.05, _background, ("timer",))
        timer.daemon = False
        timer.start()

    def list_tools(self):
        print("LOUD list_tools", end="")
        threading.Thread(target=_background, args=("list_tools",), daemon=False).start()
        return [Tool(name="shout", description="Print everywhere, then answer.")]

    def execute_tool(self, tool_name, arguments):
        print("LOUD execute_tool", flush=True)
        os.write(1, b"LOUD execute_tool on descriptor 1\\n")
        threading.Thread(target=_background, args=("execute_tool",), daemon=False).start()
        return {"said": tool_name}
"""

SOLO = """\
import os

from mcs_host import DriverResponse, MCSDriver
from mcs_host.kit import manifest_meta

print("SOLO import", end="")


class Driver(MCSDriver):
    meta = manifest_meta(__package__, "Driver")

    def __init__(self):
        print("SOLO init")

    def get_function_description(self, model_name=None):
        print("SOLO get_function_description")
        return "solo:<text> echoes the text"

    def get_driver_system_message(self, model_name=None):
        print("SOLO get_driver_system_message left in the buffer", end="")
        os.write(1, b"SOLO get_driver_system_message on descriptor 1\\n")
        return "To echo a text, answer solo:<text>."

    def process_llm_response(self, llm_response, streaming=False):
        print("SOLO process_llm_response", end="")
        os.write(1, b"SOLO process_llm_response on descriptor 1\\n")
        if isinstance(llm_response, str) and llm_response.startswith("solo:"):
            return DriverResponse(
                tool_call_result=llm_response.removeprefix("solo:"), call_executed=True
            )
        return DriverResponse()
"""

IMPORTED = [
    "LOUD import",
    "LOUD import left in the buffer",
    "LOUD import on descriptor 1\n",
    "LOUD init",
    "LOUD list_tools",
    "LOUD background thread list_tools 19",
    "LOUD background thread list_tools on descriptor 1\n",
    "LOUD background thread timer 19",
    "LOUD background thread timer on descriptor 1\n",
    "LOUD thread after the main thread 19",
    "LOUD thread after the main thread on descriptor 1\n",
    "LOUD atexit left in the buffer",
    "LOUD atexit on descriptor 1\n",
    "SOLO import",
    "SOLO init",
]
"""What the drivers print whenever the command imports and mounts them (a print's newline
is a write of its own, which another thread's may precede: only ``os.write`` lines keep it)."""
CALLED = [
    "LOUD execute_tool",
    "LOUD execute_tool on descriptor 1\n",
    "LOUD background thread execute_tool 19",
    "LOUD background thread execute_tool on descriptor 1\n",
]
SYSTEM_MESSAGE = [
    "SOLO get_driver_system_message left in the buffer",
    "SOLO get_driver_system_message on descriptor 1\n",
]
PROCESSED = ["SOLO process_llm_response", "SOLO process_llm_response on descriptor 1\n"]


@dataclass(frozen=True)
class StdoutScene(Scene):
    """The configuration that names the registry pinning the two printing drivers."""

    config: Path


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> StdoutScene:
    """A venv with ``mcs-host[mcp]`` and the two printing drivers, pinned by a registry."""
    root = tmp_path_factory.mktemp("stdout")
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host[mcp]", wheelhouse=wheelhouse, cache=uv_cache)
    projects = [
        driver_project(
            "loud-driver",
            root / "marker.txt",
            LOUD_ID,
            label="loud",
            files={"loud_driver/__init__.py": LOUD},
        ),
        driver_project(
            "solo-driver",
            root / "marker.txt",
            SOLO_ID,
            label="solo",
            files={"solo_driver/__init__.py": SOLO},
            meta={"target_llms": ["*"]},
        ),
    ]
    wheels = [build_wheel(p.write(root / "src"), root / "wheels") for p in projects]
    uv_pip("install", "--no-index", "--no-deps", *map(str, wheels), python=venv.python)
    loud, solo = wheels
    drivers = {
        LOUD_ID: entry("loud-driver", "loud", "loud_driver:Driver", releases={"1.0.0": pin(loud)}),
        SOLO_ID: entry("solo-driver", "solo", "solo_driver:Driver", releases={"1.0.0": pin(solo)}),
    }
    registry = write_registry(root / "registry.json", drivers)
    config = root / "mcs-host.toml"
    config.write_text(f'registries = ["{registry}"]\n')
    return StdoutScene(root=root, venv=venv, config=config)


def assert_on_stderr_only(done: subprocess.CompletedProcess[str], printed: list[str]) -> None:
    assert "LOUD" not in done.stdout
    assert "SOLO" not in done.stdout
    for text in printed:
        assert text in done.stderr, text


@pytest.mark.parametrize(
    ("command", "printed"),
    [
        (["verify", "--json"], []),  # imports nothing
        (["verify", "loud", "--json", "--live"], []),  # it starts in a child of its own
        (["load", "--json", "--prompt"], IMPORTED + SYSTEM_MESSAGE),
        (["call", "shout", "--json"], IMPORTED + CALLED),
        (["run", "solo:hello", "--json"], IMPORTED + PROCESSED),
    ],
    ids=["verify", "verify-live", "load", "call", "run"],
)
def test_with_json_stdout_is_one_document_whatever_a_driver_prints(
    scene: StdoutScene, command: list[str], printed: list[str]
) -> None:
    done = scene.host(*command, "--config", scene.config, env=scene.environment())
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)  # one JSON document and nothing else
    assert document["schema"].startswith("urn:mcs-host:cli:")
    assert_on_stderr_only(done, printed)
    if command[0] == "load":
        assert "To echo a text" in document["system_prompt"]
    if command[0] == "call":
        assert document["response"]["tool_call_result"] == {"said": "shout"}
    if command[0] == "run":
        assert document["response"]["tool_call_result"] == "hello"


def test_python_dash_m_keeps_stdout_for_the_document_too(scene: StdoutScene) -> None:
    done = scene.venv.run(
        "python",
        "-P",
        "-m",
        "mcs_host",
        "call",
        "shout",
        "--json",
        "--config",
        scene.config,
        env=scene.environment(),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True
    assert_on_stderr_only(done, IMPORTED + CALLED)


def test_serve_on_stdio_with_the_sdk_client_keeps_every_print_off_the_wire(
    scene: StdoutScene, tmp_path: Path
) -> None:
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    server = StdioServerParameters(
        command=str(scene.venv.bin / "mcs-host"),
        args=["serve", "--config", str(scene.config)],
        env=scene.environment(),
        cwd=str(scene.root),
    )
    seen: dict[str, Any] = {}

    async def main() -> None:
        with (tmp_path / "stderr.txt").open("w") as errlog:
            transport = stdio_client(server, errlog=errlog)
            async with Client(transport, read_timeout_seconds=60) as client:
                seen["instructions"] = client.instructions
                seen["tools"] = [t.name for t in (await client.list_tools()).tools]
                seen["shout"] = await client.call_tool("shout", {})

    anyio.run(main)
    assert "To echo a text" in (seen["instructions"] or "")
    assert seen["tools"] == ["shout"]
    assert seen["shout"].structured_content == {"said": "shout"}
    errors = (tmp_path / "stderr.txt").read_text()
    # what the drivers printed went to stderr, where the client does not read protocol
    for text in ("LOUD import on descriptor 1\n", "LOUD execute_tool on descriptor 1\n"):
        assert text in errors
    assert "SOLO get_driver_system_message on descriptor 1\n" in errors


def _lines(stream: Any, into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


def test_serve_on_stdio_writes_nothing_but_json_rpc_from_start_to_exit(
    scene: StdoutScene,
) -> None:
    # Scene.start, but with a pipe for its stdin: the test is the client
    process = subprocess.Popen(
        [str(scene.venv.bin / "mcs-host"), "serve", "--config", str(scene.config)],
        env=scene.environment(),
        cwd=scene.root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(process.stdout, lines), daemon=True)
    reader.start()
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "shout", "arguments": {}},
        },
    ]
    try:
        for request in requests:
            process.stdin.write(json.dumps(request) + "\n")
        process.stdin.flush()
        wire: list[str] = []
        answered: dict[int, Any] = {}
        while len(answered) < 3:
            line = lines.get(timeout=120)  # a guard against a hang, not a measure
            assert line is not None, f"stdout ended early: {wire}"
            wire.append(line)
            message = json.loads(line)
            if message.get("id") in (1, 2, 3):
                answered[message["id"]] = message
        process.stdin.close()  # the client goes: the server ends, its threads and atexit run
        assert process.wait(timeout=120) == 0
        while (line := lines.get(timeout=120)) is not None:
            wire.append(line)
        errors = process.stderr.read() if process.stderr is not None else ""
    finally:
        process.kill()
        process.wait()
        reader.join(timeout=30)
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    for line in wire:  # every byte on stdout, from start to exit, is protocol
        assert line.endswith("\n")
        assert json.loads(line)["jsonrpc"] == "2.0", line
    assert "To echo a text" in answered[1]["result"]["instructions"]
    assert [t["name"] for t in answered[2]["result"]["tools"]] == ["shout"]
    assert answered[3]["result"]["structuredContent"] == {"said": "shout"}
    for text in IMPORTED + CALLED + SYSTEM_MESSAGE:
        assert text in errors, text
