"""``mcs-host serve`` as an MCP client meets it: the SDK's own client starts the installed
command (stdio) or connects to it (streamable HTTP on localhost), lists the tools with their
schemas and trust facts, and calls them: the bundled drivers, a failing tool, a call a
consent plugin refuses, and a call the client cancels. What the drivers print never reaches
the protocol stream. The bearer token is readable by nobody but the user: it is in no
environment ``/proc`` shows, of the server or of any process below it, and it is read only
from a file no one else may read."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from distbuild import ROOT, Project, Venv, build_wheel, free_port, uv_pip, wait_for_port
from hostrun import driver_project, entry, pin, write_registry
from scenes import Scene

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
        where = ToolParameter(
            name="path", description="The file.", required=True, schema={"type": "string"}
        )
        return [
            Tool(name="shout", description="Print, then answer."),
            Tool(name="fail", description="Raise."),
            Tool(name="wait", description="Sleep, then answer.", parameters=[seconds]),
            Tool(name="forbidden", description="Refused by the consent plugin."),
            Tool(name="mark", description="Write a line in a file.", parameters=[where]),
        ]

    def execute_tool(self, tool_name, arguments):
        print("noisy driver called", tool_name)
        if tool_name == "fail":
            raise RuntimeError("the backend is down")
        if tool_name == "wait":
            time.sleep(arguments["seconds"])
        if tool_name == "mark":
            with open(arguments["path"], "a") as marker:
                marker.write("the tool ran\\n")
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


@dataclass(frozen=True)
class ServeScene(Scene):
    """The scene's registry (the bundled drivers', the noisy driver's and the consent
    plugin's pins) and the configuration that names it and mounts every driver."""

    registry: Path
    config: Path

    def stdio(self, *args: str) -> StdioServerParameters:
        """``mcs-host serve --config CONFIG ARGS`` as an MCP client starts it: in ``root``,
        with :meth:`Scene.environment` as its whole environment."""
        command = [str(self.venv.bin / "mcs-host"), "serve", "--config", str(self.config), *args]
        return StdioServerParameters(
            command=command[0], args=command[1:], env=self.environment(), cwd=str(self.root)
        )


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path) -> ServeScene:
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
    uv_pip("install", "--no-index", "--no-deps", *map(str, wheels), python=venv.python)
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
        f'registries = ["{registry}"]\nautoload = true  # the noisy driver too\n\n'
        f'[drivers.csv]\nsettings = {{ root = "{data}" }}\n\n'
        f'[drivers.files]\nsettings = {{ root = "{data}" }}\n'
    )
    return ServeScene(root=root, venv=venv, registry=registry, config=config)


def session(server: Any, work: Any) -> Any:
    async def main() -> Any:
        async with Client(server, read_timeout_seconds=60) as client:
            return await work(client)

    return anyio.run(main)


def text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def test_stdio_lists_every_tool_with_its_schema_and_trust_facts(scene: ServeScene) -> None:
    async def work(client: Client) -> Any:
        return client.server_info, client.instructions, await client.list_tools()

    info, instructions, listed = session(scene.stdio(), work)
    assert info is not None
    assert info.name == "mcs-host"
    # the short system message of a client that calls tools natively: no schema again
    assert instructions is not None
    assert "Use the tools you are given" in instructions
    assert "read_csv_head" not in instructions
    assert len(instructions.encode()) < 1024
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


@pytest.mark.parametrize(
    ("choice", "says"),
    [("text", "read_csv_head"), ("none", None), ("native", "Use the tools you are given")],
)
def test_the_instructions_are_the_text_protocol_or_none_when_asked(
    scene: ServeScene, choice: str, says: str | None
) -> None:
    async def work(client: Client) -> Any:
        return client.instructions

    instructions = session(scene.stdio("--instructions", choice), work)
    if says is None:
        assert not instructions
    else:
        assert says in (instructions or "")
    if choice == "text":  # every tool's schema, as a model without native tools needs
        assert '"summarize_column"' in (instructions or "")


def test_serve_refuses_instructions_it_does_not_know(scene: ServeScene) -> None:
    done = scene.host(
        "serve", "--config", scene.config, "--instructions", "all", env=scene.environment()
    )
    assert done.returncode == 2
    assert "'all': give native, text or none" in done.stderr


def broken_csv(scene: ServeScene, tmp_path: Path) -> Path:
    """The scene's configuration, with a setting the CSV driver's constructor rejects."""
    config = tmp_path / "mcs-host.toml"
    data = scene.root / "data"
    config.write_text(
        f'registries = ["{scene.registry}"]\n\n'
        "[drivers.csv]\nsettings = { not_a_setting = 1 }\n\n"
        f'[drivers.files]\nsettings = {{ root = "{data}" }}\n'
    )
    return config


def test_serve_strict_does_not_serve_less_than_the_configuration_names(
    scene: ServeScene, tmp_path: Path
) -> None:
    config = broken_csv(scene, tmp_path)
    args = ("serve", "--strict", "--config", config)
    done = scene.host(*args, env=scene.environment())
    assert done.returncode == 1
    assert "error: csv: constructor-error:" in done.stderr
    assert done.stdout == ""  # no protocol: nothing was served
    # without --strict it serves files, and says csv is not served (tests/system/test_user_path.py)
    # the labels named are all it asks for: files mounts, and it serves
    listed = session(scene.stdio("files"), lambda client: client.list_tools())
    assert "read_file" in {t.name for t in listed.tools}


def test_call_makes_its_call_and_exits_1_when_a_configured_driver_did_not_mount(
    scene: ServeScene, tmp_path: Path
) -> None:
    config = broken_csv(scene, tmp_path)
    args = ("call", "list_directory", "--args", '{"path": "."}', "--config", config)
    done = scene.host(*args, env=scene.environment())
    assert done.returncode == 1
    printed = done.stdout[done.stdout.index("{\n") :]  # after what the noisy driver printed
    assert json.loads(printed)["entries"][0]["path"] == "sales.csv"  # the call was made
    assert "error: csv: constructor-error:" in done.stderr
    as_json = scene.host(*args, "--json", env=scene.environment())
    document = json.loads(as_json.stdout)
    assert as_json.returncode == 1
    assert document["ok"] is False
    assert document["response"]["call_failed"] is False
    assert [e.split(":")[0] for e in document["load"]["errors"]] == ["csv"]


def test_stdio_calls_run_through_the_orchestrator(scene: ServeScene) -> None:
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

    csv, files, shout, fail, invalid, refused, again = session(scene.stdio(), work)
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


def test_a_cancelled_call_leaves_the_server_serving(scene: ServeScene) -> None:
    async def work(client: Client) -> Any:
        with anyio.move_on_after(1):
            await client.call_tool("wait", {"seconds": 30})
        started = time.monotonic()
        after = await client.call_tool("shout", {})
        return after, time.monotonic() - started

    after, seconds = session(scene.stdio(), work)
    assert after.structured_content == {"said": "shout"}
    assert seconds < 20  # not queued behind the cancelled call


def test_serve_without_drivers_to_load_says_why_on_stderr(scene: ServeScene) -> None:
    done = scene.host("serve", "nothing-here", "--config", scene.config, env=scene.environment())
    assert done.returncode == 1
    assert done.stdout == ""
    assert "nothing-here" in done.stderr


def test_a_wrong_http_address_is_a_usage_error(scene: ServeScene) -> None:
    done = scene.host("serve", "--http", "localhost", env=scene.environment())
    assert done.returncode == 2
    assert "give HOST:PORT or :PORT" in done.stderr


def start_http(scene: ServeScene) -> tuple[subprocess.Popen[str], int]:
    """``mcs-host serve --http`` on a free port of 127.0.0.1, once it listens."""
    port = free_port()
    return start_serving(scene, port, "--http", f"127.0.0.1:{port}"), port


@pytest.fixture
def http_server(scene: ServeScene) -> Iterator[str]:
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
    tmp_path: Path, wheelhouse: Path, uv_cache: Path, scene: ServeScene
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
    uv_pip("install", "--no-index", "--no-deps", *map(str, wheels), python=venv.python)
    registry = write_registry(
        tmp_path / "registry.json",
        {
            USES_MCP_ID: entry(
                "uses-mcp", "uses", "uses_mcp.extra:Driver", releases={"1.0.0": pin(wheels[1])}
            )
        },
    )
    other = replace(scene, venv=venv)  # the scene's HOME and state, the other venv's PATH
    for command in ("list", "verify", "load"):
        done = other.host(command, "--registry", registry, env=other.environment())
    assert "import of 'mcp' refused" in done.stdout
    assert "is not part of the standard library or of mcs-host's own installation" in done.stdout
    assert not marker.exists()


def start_stdio(scene: ServeScene) -> subprocess.Popen[str]:
    """``mcs-host serve`` as :meth:`Scene.start` starts it, but with its stdin a pipe, once
    it serves."""
    process = scene.start(
        "serve", "--config", scene.config, stdin=subprocess.PIPE, output=subprocess.PIPE
    )
    assert process.stderr is not None
    for line in process.stderr:  # the load report comes first, then it serves
        if line.startswith("mounted files"):
            break
    return process


@pytest.mark.parametrize("how", ["client disconnects", "SIGTERM", "SIGINT"])
def test_serve_on_stdio_ends_cleanly(scene: ServeScene, how: str) -> None:
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


def test_serve_on_http_ends_cleanly_on_sigterm(scene: ServeScene) -> None:
    process, _ = start_http(scene)
    try:
        process.terminate()
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
        _, errors = process.communicate()
    assert "Traceback" not in errors


# -- serve --http elsewhere than loopback: a token and an allow-list ---------------------------

TOKEN = "test-token-3f9a1c7e5b2d4086"  # noqa: S105 - a test's token
MAX_BODY = 4 * 1024 * 1024  # mcs_host.bridge.http.MAX_BODY
ACCEPT = "application/json, text/event-stream"


def start_serving(
    scene: ServeScene, port: int, *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """``mcs-host serve --config CONFIG ARGS`` as :meth:`Scene.start` starts it, with ``env``
    and the test's stdin, its output piped, once it listens on ``port``."""
    process = scene.start(
        "serve", "--config", scene.config, *args, env=env, stdin=None, output=subprocess.PIPE
    )
    wait_for_port(port, process)
    return process


def stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    process.terminate()
    try:
        out, errors = process.communicate(timeout=30)
    finally:
        process.kill()
        process.wait()
    return out, errors


def rpc(
    url: str,
    message: dict[str, Any],
    *,
    token: str | None = None,
    session: str | None = None,
    headers: dict[str, str] | None = None,
) -> Any:
    """POST one JSON-RPC message as a streamable HTTP client would, with raw headers."""
    import httpx

    sent = {"Accept": ACCEPT, "Content-Type": "application/json", **(headers or {})}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    if session is not None:
        sent["Mcp-Session-Id"] = session
        sent["MCP-Protocol-Version"] = "2025-11-25"
    return httpx.post(url, json=message, headers=sent, timeout=60)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


def mark(path: Path) -> dict[str, Any]:
    arguments = {"name": "mark", "arguments": {"path": str(path)}}
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": arguments}


def test_serve_http_elsewhere_than_loopback_refuses_to_start_without_a_token(
    scene: ServeScene, tmp_path: Path
) -> None:
    env = scene.environment()
    serve = ("serve", "--config", scene.config, "--http", "0.0.0.0:8765")
    done = scene.host(*serve, "--allowed-host", "mcs.example:8765", env=env)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "0.0.0.0:8765 is not a loopback address" in done.stderr
    assert "--token-file FILE" in done.stderr
    assert "--no-auth" in done.stderr
    empty = tmp_path / "token"
    empty.write_text(" \n")
    empty.chmod(0o600)
    done = scene.host(*serve, "--allowed-host", "mcs.example:8765", "--token-file", empty, env=env)
    assert done.returncode == 2
    assert done.stderr == f"error: {empty}: the token is empty\n"
    token = tmp_path / "good-token"
    token.write_text(TOKEN)
    token.chmod(0o600)
    done = scene.host(*serve, "--token-file", token, env=env)  # who may it name as Host?
    assert done.returncode == 2
    assert "--allowed-host" in done.stderr
    assert TOKEN not in done.stderr
    done = scene.host(*serve, "--allowed-host", "a b", "--token-file", token, env=env)
    assert done.returncode == 2
    assert "--allowed-host 'a b'" in done.stderr
    stdio = ("serve", "--config", scene.config, "--no-auth")
    done = scene.host(*stdio, env=env)
    assert done.returncode == 2
    assert "go with --http" in done.stderr


def test_serve_http_elsewhere_than_loopback_admits_only_the_token_and_allowed_headers(
    scene: ServeScene, tmp_path: Path
) -> None:
    port = free_port()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    process = start_serving(
        scene,
        port,
        "--http",
        f"0.0.0.0:{port}",
        "--allowed-host",
        f"127.0.0.1:{port}",
        "--allowed-origin",
        "https://app.example",
        "--token-file",
        token_file,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        the_sdk_client_with_the_token_calls(url, tmp_path / "sdk.txt")
        a_call_without_the_token_runs_nothing(url, tmp_path / "ran.txt")
        a_host_or_origin_no_one_allowed_is_refused(url, port)
        a_body_past_the_bound_is_refused(port)
    finally:
        out, errors = stop(process)
    assert out == ""
    assert "serving MCP on http://0.0.0.0:" in errors
    assert TOKEN not in errors  # not in the startup line, not for the wrong one either


def the_sdk_client_with_the_token_calls(url: str, marker: Path) -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> Any:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx2.AsyncClient(headers=bearer, timeout=60) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, read_timeout_seconds=60) as client:
                listed = await client.list_tools()
                return listed, await client.call_tool("mark", {"path": str(marker)})

    listed, called = anyio.run(main)
    assert "mark" in {tool.name for tool in listed.tools}
    assert not called.is_error
    assert marker.read_text() == "the tool ran\n"


def a_call_without_the_token_runs_nothing(url: str, marker: Path) -> None:
    # a session opened with the token; the same call without it, with another token or with
    # another scheme is answered 401 and runs nothing; with it, the tool runs
    opened = rpc(url, INITIALIZE, token=TOKEN)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert rpc(url, initialized, token=TOKEN, session=session).status_code == 202
    bare = rpc(url, mark(marker), session=session)
    assert bare.status_code == 401
    assert bare.headers["www-authenticate"].startswith("Bearer")
    wrong = rpc(url, mark(marker), token="not-" + TOKEN, session=session)
    assert wrong.status_code == 401
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
    basic = rpc(url, mark(marker), session=session, headers={"Authorization": "Basic eDp5"})
    assert basic.status_code == 401
    assert not marker.exists()
    allowed = rpc(url, mark(marker), token=TOKEN, session=session)
    assert allowed.status_code == 200
    assert marker.read_text() == "the tool ran\n"


def a_host_or_origin_no_one_allowed_is_refused(url: str, port: int) -> None:
    # DNS rebinding: a page on another name reaching this address
    evil_host = rpc(url, INITIALIZE, token=TOKEN, headers={"Host": f"evil.example:{port}"})
    assert evil_host.status_code == 421
    evil_origin = rpc(url, INITIALIZE, token=TOKEN, headers={"Origin": "https://evil.example"})
    assert evil_origin.status_code == 403
    good_origin = rpc(url, INITIALIZE, token=TOKEN, headers={"Origin": "https://app.example"})
    assert good_origin.status_code == 200


def a_body_past_the_bound_is_refused(port: int) -> None:
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nAccept: {ACCEPT}\r\n"
        f"Content-Length: {MAX_BODY + 1}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=60) as raw:
        raw.sendall(head.encode())  # and not one byte of the body: it is refused unread
        status = raw.makefile("rb").readline()
    assert status.split()[1] == b"413"


def test_serve_http_with_no_auth_starts_and_says_so(scene: ServeScene) -> None:
    port = free_port()
    process = start_serving(
        scene, port, "--http", f"0.0.0.0:{port}", "--allowed-host", f"127.0.0.1:{port}", "--no-auth"
    )
    try:
        opened = rpc(f"http://127.0.0.1:{port}/mcp", INITIALIZE)
        assert opened.status_code == 200
    finally:
        _, errors = stop(process)
    assert "warning: --no-auth:" in errors
    assert "serves without a token" in errors


def test_a_token_on_loopback_is_required_there_too(scene: ServeScene) -> None:
    port = free_port()
    process = start_serving(
        scene, port, "--http", f"127.0.0.1:{port}", env={"MCS_HOST_SERVE_TOKEN": TOKEN}
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        assert rpc(url, INITIALIZE).status_code == 401
        assert rpc(url, INITIALIZE, token=TOKEN).status_code == 200
        # on loopback, loopback Host and Origin values stay allowed, and no others
        origin = {"Origin": f"http://localhost:{port}"}
        assert rpc(url, INITIALIZE, token=TOKEN, headers=origin).status_code == 200
        evil = {"Host": f"evil.example:{port}"}
        assert rpc(url, INITIALIZE, token=TOKEN, headers=evil).status_code == 421
    finally:
        _, errors = stop(process)
    assert TOKEN not in errors


# -- the token: in no environment a process can read, from no file another may read ---------


def environ_of(pid: int) -> bytes:
    with open(f"/proc/{pid}/environ", "rb") as file:
        return file.read()


def cmdline_of(pid: int) -> bytes:
    with open(f"/proc/{pid}/cmdline", "rb") as file:
        return file.read()


def below(pid: int) -> list[int]:
    """Every process below ``pid``, read from ``/proc``."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as file:
                    parents[int(name)] = int(file.read().rpartition(b")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found: list[int] = []
    frontier = [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        found += frontier
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/PID/environ is Linux's")
@pytest.mark.parametrize("fork_server", ["1", "0"])
def test_the_environment_s_token_is_in_no_environment_proc_shows(
    scene: ServeScene, fork_server: str
) -> None:
    # every driver isolated: children (and the fork server) that could read /proc/PPID/environ;
    # an isolated child's configuration (it may hold an MCP server's env secrets) neither
    port = free_port()
    env = {"MCS_HOST_SERVE_TOKEN": TOKEN, "MCS_HOST_FORK_SERVER": fork_server}
    process = start_serving(scene, port, "--http", f"127.0.0.1:{port}", "--isolate", env=env)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        assert rpc(url, INITIALIZE, token=TOKEN).status_code == 200  # it still admits
        assert rpc(url, INITIALIZE).status_code == 401
        children = below(process.pid)
        isolated = [pid for pid in children if b"--isolated" in cmdline_of(pid)]
        assert isolated, [cmdline_of(pid) for pid in children]
        for pid in [process.pid, *children]:
            shown = environ_of(pid)
            assert TOKEN.encode() not in shown, cmdline_of(pid)
            assert b"MCS_HOST_SERVE_TOKEN" not in shown, cmdline_of(pid)
            assert b"MCS_HOST_ISOLATED_CONFIG" not in shown, cmdline_of(pid)
    finally:
        _, errors = stop(process)
    assert TOKEN not in errors


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX permissions")
def test_a_token_file_others_may_use_is_refused_naming_the_fix(
    scene: ServeScene, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    port = free_port()
    serve = ("serve", "--config", scene.config, "--http", f"127.0.0.1:{port}")
    for mode in (0o644, 0o640, 0o604, 0o660):
        token_file.chmod(mode)
        done = scene.host(*serve, "--token-file", token_file, env=scene.environment())
        assert done.returncode == 2, done.stderr
        assert done.stderr == (
            f"error: {token_file}: the token file is not yours alone: its mode is {mode:04o}, "
            f"which lets group or others use it: run chmod 600 {token_file}\n"
        )
    token_file.chmod(0o600)
    process = start_serving(scene, port, "--http", f"127.0.0.1:{port}", "--token-file", token_file)
    try:
        assert rpc(f"http://127.0.0.1:{port}/mcp", INITIALIZE, token=TOKEN).status_code == 200
    finally:
        stop(process)


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="giving a file to another user takes root",
)
def test_a_token_file_another_user_owns_is_refused(scene: ServeScene, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    os.chown(token_file, 65534, 65534)  # nobody's
    serve = ("serve", "--config", scene.config, "--http", "127.0.0.1:8765")
    done = scene.host(*serve, "--token-file", token_file, env=scene.environment())
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"error: {token_file}: the token file is not yours alone: it belongs to user 65534, "
        f"not to you (user {os.getuid()}): use a file of your own, with mode 600\n"
    )
