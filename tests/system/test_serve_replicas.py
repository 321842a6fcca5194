"""``mcs-host serve --http`` as replicas of one deployment: stateless replicas answer a client
that alternates between them request by request (stateful ones cannot), each reports the
fingerprint of the stack it serves at ``/readyz`` (a replica whose driver differs is alive but
not ready), the probes need no token while MCP does, and SIGTERM stops accepting, lets the
call in flight finish and exits 0."""

from __future__ import annotations

import importlib
import itertools
import json
import queue
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from distbuild import ROOT, Venv, build_wheel, free_port, uv_pip, wait_for_port
from hostrun import driver_project, entry, pin, write_registry
from scenes import Scene

pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.venv

GATE_ID = "7c1f0000-0000-4000-8000-0000000000e1"

GATE = """\
import os
import sys
import time

from mcs_host import MCSToolDriver, Tool, ToolParameter
from mcs_host.kit import manifest_meta


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        text = ToolParameter(name="text", description="What to say.", schema={"type": "string"})
        path = ToolParameter(name="path", description="The gate file.", schema={"type": "string"})
        return [
            Tool(name="echo", description="Answer with the text.", parameters=[text]),
            Tool(name="gate", description="Answer once the file exists.", parameters=[path]),
        ]

    def execute_tool(self, tool_name, arguments):
        if tool_name == "echo":
            return {"said": arguments["text"], "pid": os.getpid()}
        print("gate waiting", file=sys.stderr, flush=True)
        deadline = time.monotonic() + 300
        while not os.path.exists(arguments["path"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        return {"gate": "opened"}
"""

TOKEN = "replica-token-5e2b8c1d7a904f36"  # noqa: S105 - a test's token


@dataclass(frozen=True)
class ReplicaScene(Scene):
    """Two venvs: ``venv`` with the gate driver 1.0.0, ``other`` with 1.0.1; one registry
    pins both, one configuration mounts it, and a token file is the user's alone."""

    other: Venv
    config: Path
    token_file: Path

    def serve(
        self, port: int, *args: str, venv: Venv | None = None
    ) -> tuple[subprocess.Popen[str], _Lines]:
        """``mcs-host serve --http 127.0.0.1:PORT ARGS`` from ``venv`` (default: the
        scene's), once it listens; its stderr read line by line."""
        bin_dir = (venv or self.venv).bin
        process = subprocess.Popen(
            [
                str(bin_dir / "mcs-host"),
                "serve",
                "--config",
                str(self.config),
                "--http",
                f"127.0.0.1:{port}",
                *args,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**self.environment(), "PATH": f"{bin_dir}:/usr/bin:/bin"},
            cwd=self.root,
        )
        lines = _Lines(process)
        wait_for_port(port, process)
        return process, lines


class _Lines:
    """A process's stderr, read by a thread as it comes; the stream is closed at its end."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.seen: queue.Queue[str] = queue.Queue()
        self.all: list[str] = []
        assert process.stderr is not None
        self._reader = threading.Thread(target=self._read, args=(process.stderr,), daemon=True)
        self._reader.start()

    def _read(self, stream: Any) -> None:
        with stream:
            for line in stream:
                self.all.append(line)
                self.seen.put(line)

    def wait_for(self, text: str, seconds: float = 120) -> None:
        while True:
            line = self.seen.get(timeout=seconds)
            if text in line:
                return

    def join(self) -> None:
        self._reader.join(timeout=60)


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> ReplicaScene:
    root = tmp_path_factory.mktemp("replicas")
    wheels = []
    for version in ("1.0.0", "1.0.1"):
        project = driver_project(
            "gate-driver",
            root / "imported.txt",
            GATE_ID,
            version,
            label="gate",
            files={"gate_driver/__init__.py": GATE},
        )
        wheels.append(build_wheel(project.write(root / f"src-{version}"), root / "wheels"))
    venvs = []
    for name, wheel in zip(("venv", "other"), wheels, strict=True):
        venv = Venv.create(root / name)
        venv.uv_install("mcs-host[mcp]", wheelhouse=wheelhouse, cache=uv_cache)
        uv_pip("install", "--no-index", "--no-deps", str(wheel), python=venv.python)
        venvs.append(venv)
    releases = {"1.0.0": pin(wheels[0]), "1.0.1": pin(wheels[1])}
    drivers = {GATE_ID: entry("gate-driver", "gate", "gate_driver:Driver", releases=releases)}
    registry = write_registry(root / "registry.json", drivers)
    config = root / "mcs-host.toml"
    config.write_text(f'registries = ["{registry}"]\nautoload = true\n')
    token_file = root / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    return ReplicaScene(
        root=root, venv=venvs[0], other=venvs[1], config=config, token_file=token_file
    )


def stop(process: subprocess.Popen[str], said: _Lines) -> None:
    """End ``process`` (SIGTERM, then SIGKILL) and close its pipes."""
    process.terminate()
    try:
        process.wait(timeout=60)
    finally:
        process.kill()
        process.wait()
        said.join()
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture
def replicas(scene: ReplicaScene, request: pytest.FixtureRequest) -> Iterator[tuple[int, int]]:
    """Two replicas on two ports, ``--stateless`` or not (the test's parameter)."""
    args = ("--stateless",) if request.param else ()
    ports = free_port(), free_port()
    started = [scene.serve(port, *args) for port in ports]
    try:
        yield ports
    finally:
        for process, said in started:
            stop(process, said)


class Alternating(httpx2.AsyncBaseTransport):
    """Sends each request to the next of ``ports`` in turn: a round-robin load balancer
    without session affinity."""

    def __init__(self, ports: tuple[int, ...]) -> None:
        self._ports = itertools.cycle(ports)
        self._inner = httpx2.AsyncHTTPTransport()
        self.sent: list[tuple[int, str]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = next(self._ports)
        request.url = request.url.copy_with(port=port)
        self.sent.append((port, request.method))
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def alternate(ports: tuple[int, int]) -> tuple[list[Any], list[tuple[int, str]]]:
    """List the tools, then make four calls, through a client whose requests alternate
    between the two replicas; the results, and the port and method of each request."""
    transport = Alternating(ports)

    async def main() -> list[Any]:
        async with httpx2.AsyncClient(transport=transport, timeout=60) as http:
            url = f"http://127.0.0.1:{ports[0]}/mcp"
            async with Client(
                streamable_http_client(url, http_client=http), read_timeout_seconds=60
            ) as client:
                results: list[Any] = [await client.list_tools()]
                for n in range(4):
                    results.append(await client.call_tool("echo", {"text": f"call {n}"}))
                return results

    return anyio.run(main), transport.sent


CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "echo", "arguments": {"text": "hi"}},
}


def rpc(port: int, message: dict[str, Any], session: str | None = None) -> httpx2.Response:
    """POST one JSON-RPC message of the 2025-11-25 protocol, whose clients open a session."""
    headers = {"Accept": "application/json, text/event-stream"}
    if session is not None:
        headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    return httpx2.post(f"http://127.0.0.1:{port}/mcp", json=message, headers=headers, timeout=60)


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


@pytest.mark.parametrize("replicas", [True], indirect=True, ids=["stateless"])
def test_stateless_replicas_answer_a_client_that_alternates_between_them(
    replicas: tuple[int, int],
) -> None:
    # the SDK's client, its requests alternating between the replicas
    results, sent = alternate(replicas)
    listed, *calls = results
    assert {tool.name for tool in listed.tools} == {"echo", "gate"}
    assert [c.structured_content["said"] for c in calls] == [f"call {n}" for n in range(4)]
    assert not any(c.is_error for c in calls)
    assert len({c.structured_content["pid"] for c in calls}) == 2  # both replicas answered
    assert {port for port, method in sent if method == "POST"} == set(replicas)
    # a client of the 2025-11-25 protocol: no session to lose, each answer in JSON
    first, second = replicas
    opened = rpc(first, INITIALIZE)
    assert opened.status_code == 200
    assert "mcp-session-id" not in opened.headers
    answered = rpc(second, CALL, session=None)
    assert (answered.status_code, answered.headers["content-type"]) == (200, "application/json")
    assert answered.json()["result"]["structuredContent"]["said"] == "hi"


@pytest.mark.parametrize("replicas", [False], indirect=True, ids=["stateful"])
def test_stateful_replicas_lose_a_session_when_requests_alternate(
    replicas: tuple[int, int],
) -> None:
    # what --stateless is for: a 2025-11-25 client's session opened on one replica is
    # unknown to the other (the SDK's own client speaks 2026-07-28, which has no session)
    first, second = replicas
    session = rpc(first, INITIALIZE).headers["mcp-session-id"]
    lost = rpc(second, CALL, session=session)
    assert (lost.status_code, lost.json()["error"]["message"]) == (404, "Session not found")
    assert rpc(first, CALL, session=session).status_code == 200


def probe(port: int, path: str, token: str | None = None) -> httpx2.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx2.get(f"http://127.0.0.1:{port}{path}", headers=headers, timeout=60)


def test_readyz_shows_the_fingerprint_and_a_replica_that_serves_another_stack_is_not_ready(
    scene: ReplicaScene,
) -> None:
    first_port, same_port, other_port = free_port(), free_port(), free_port()
    first, said = scene.serve(first_port, "--stateless", "--token-file", str(scene.token_file))
    started = [(first, said)]
    try:
        # the probes need no token; MCP does
        assert (probe(first_port, "/healthz").status_code, probe(first_port, "/healthz").text) == (
            200,
            "ok\n",
        )
        ready = probe(first_port, "/readyz")
        assert ready.status_code == 200
        fingerprint = ready.json()["fingerprint"]
        assert ready.json() == {"ready": True, "fingerprint": fingerprint}
        assert fingerprint.startswith("sha256:")
        assert len(fingerprint) == 71
        assert probe(first_port, "/mcp").status_code == 401
        assert probe(first_port, "/readyz", token="not-the-token").status_code == 200  # noqa: S106
        # what it stands for is on the server's stderr
        assert f"fingerprint {fingerprint}\n" in said.all
        assert any("gate: gate-driver 1.0.0 (pinned, sha256:" in line for line in said.all)
        # another replica of the same stack is ready with the expected fingerprint
        same = scene.serve(same_port, "--stateless", "--expect-fingerprint", fingerprint)
        started.append(same)
        assert probe(same_port, "/readyz").json() == {"ready": True, "fingerprint": fingerprint}
        # a replica with another release of the driver, verified too, serves another stack
        other, other_said = scene.serve(
            other_port, "--stateless", "--expect-fingerprint", fingerprint, venv=scene.other
        )
        started.append((other, other_said))
        refused = probe(other_port, "/readyz")
        assert refused.status_code == 503
        body = refused.json()
        assert (body["ready"], body["expected"]) == (False, fingerprint)
        assert body["fingerprint"] != fingerprint
        assert body["reason"] == (
            f"this replica serves {body['fingerprint']}, and its configuration expects "
            f"{fingerprint}: its drivers, versions, files or tools differ"
        )
        assert probe(other_port, "/healthz").status_code == 200  # alive, not ready
        assert any(line.startswith("not ready: this replica serves") for line in other_said.all)
    finally:
        for process, lines in started:
            stop(process, lines)


def test_a_fingerprint_that_is_no_sha256_is_a_usage_error(scene: ReplicaScene) -> None:
    done = scene.host(
        "serve", "--config", scene.config, "--http", "127.0.0.1:9", "--expect-fingerprint", "abc"
    )
    assert done.returncode == 2
    assert "'abc': give sha256: and 64 hex digits" in done.stderr
    assert "--expect-fingerprint" in done.stderr
    for option in (("--stateless",), ("--drain", "5")):  # nothing to drain on stdio
        alone = scene.host("serve", "--config", scene.config, *option)
        assert alone.returncode == 2
        assert "--expect-fingerprint and --drain go with --http" in alone.stderr


def refuses_connections(port: int) -> bool:
    with socket.socket() as attempt:
        return attempt.connect_ex(("127.0.0.1", port)) != 0


def call_in_thread(port: int, arguments: dict[str, Any]) -> tuple[threading.Thread, list[Any]]:
    """POST a ``gate`` call in a thread, as a load balancer passes a client's request on; the
    response (or the error) lands in the returned list."""
    outcome: list[Any] = []
    call = {**CALL, "params": {"name": "gate", "arguments": arguments}}

    def run() -> None:
        try:
            response = httpx2.post(
                f"http://127.0.0.1:{port}/mcp",
                json=call,
                headers={"Accept": "application/json, text/event-stream"},
                timeout=300,
            )
            outcome.append(response)
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_sigterm_stops_accepting_and_lets_the_call_in_flight_finish(
    scene: ReplicaScene, tmp_path: Path
) -> None:
    port = free_port()
    process, said = scene.serve(port, "--stateless")
    gate = tmp_path / "open"
    try:
        thread, outcome = call_in_thread(port, {"path": str(gate)})
        said.wait_for("gate waiting")
        process.terminate()
        # it stops accepting while the call is still in flight (the gate is shut)
        for _ in range(600):
            if refuses_connections(port):
                break
            thread.join(timeout=0.1)
        assert refuses_connections(port)
        assert thread.is_alive()
        assert process.poll() is None
        gate.touch()
        thread.join(timeout=120)
        (response,) = outcome
        assert not isinstance(response, Exception), response
        assert response.status_code == 200
        result = response.json()["result"]
        assert (result["isError"], result["structuredContent"]) == (False, {"gate": "opened"})
        assert process.wait(timeout=60) == 0
    finally:
        stop(process, said)
    assert not any("Traceback" in line for line in said.all), "".join(said.all)


def test_a_call_past_the_drain_bound_is_cut_and_the_replica_exits(
    scene: ReplicaScene, tmp_path: Path
) -> None:
    port = free_port()
    process, said = scene.serve(port, "--stateless", "--drain", "1")
    try:
        thread, outcome = call_in_thread(port, {"path": str(tmp_path / "never")})
        said.wait_for("gate waiting")
        process.terminate()
        assert process.wait(timeout=120) == 0  # the gate never opens: the drain bound ends it
        thread.join(timeout=120)
        (response,) = outcome  # the connection was cut: no answer, or an error
        assert isinstance(response, Exception) or response.status_code != 200, response.text
    finally:
        stop(process, said)


def bearer_rpc(port: int, message: dict[str, Any], token: str | None) -> httpx2.Response:
    """POST one JSON-RPC message to a stateless server, with ``token`` as the bearer."""
    headers = {"Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx2.post(f"http://127.0.0.1:{port}/mcp", json=message, headers=headers, timeout=60)


def called(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {**CALL, "params": {"name": name, "arguments": arguments}}


def test_metrics_count_each_call_by_tool_and_outcome_and_need_the_token(
    scene: ReplicaScene,
) -> None:
    port = free_port()
    args = ("--stateless", "--token-file", str(scene.token_file))
    process, said = scene.serve(port, *args)
    try:
        assert probe(port, "/metrics").status_code == 401
        for message in (
            called("echo", {"text": "a"}),
            called("echo", {"text": "b"}),
            called("echo", {"text": 3}),  # refused by the schema: a failed call
            called("no-such-tool", {}),
        ):
            assert bearer_rpc(port, message, TOKEN).status_code == 200
        scraped = probe(port, "/metrics", token=TOKEN)
        assert scraped.status_code == 200
        assert scraped.headers["content-type"].startswith("text/plain")
        lines = set(scraped.text.splitlines())
        fingerprint = probe(port, "/readyz").json()["fingerprint"]
    finally:
        stop(process, said)
    assert 'mcs_host_tool_calls_total{outcome="ok",tool="echo"} 2.0' in lines
    assert 'mcs_host_tool_calls_total{outcome="failed",tool="echo"} 1.0' in lines
    assert 'mcs_host_tool_calls_total{outcome="failed",tool="(unknown)"} 1.0' in lines
    assert 'mcs_host_tool_call_seconds_count{tool="echo"} 3.0' in lines
    assert f'mcs_host_stack_info{{expected="yes",fingerprint="{fingerprint}"}} 1.0' in lines


def test_the_rate_limit_answers_429_with_retry_after_for_each_client_alone(
    scene: ReplicaScene,
) -> None:
    port = free_port()
    process, said = scene.serve(port, "--stateless", "--rate-limit", "2/600")
    try:
        # a server that checks no token: a new Authorization header each time is still the
        # same client, its address, and does not escape the limit
        first = [bearer_rpc(port, called("echo", {"text": "x"}), f"made-up-{n}") for n in range(3)]
        assert [r.status_code for r in first] == [200, 200, 429]
        assert 1 <= int(first[2].headers["retry-after"]) <= 300
        assert first[2].text == "too many requests: the rate limit of this server is reached\n"
        # a client at another address has its own allowance; the probes are not limited
        other_address = httpx2.HTTPTransport(local_address="127.0.0.2")
        with httpx2.Client(transport=other_address, timeout=60) as other:
            answered = other.post(
                f"http://127.0.0.1:{port}/mcp",
                json=called("echo", {"text": "y"}),
                headers={"Accept": "application/json, text/event-stream"},
            )
        assert answered.status_code == 200
        assert probe(port, "/readyz").status_code == 200
    finally:
        stop(process, said)
    bad = scene.host(
        "serve", "--config", scene.config, "--http", "127.0.0.1:9", "--rate-limit", "many"
    )
    assert bad.returncode == 2
    assert "'many': give COUNT/SECONDS" in bad.stderr


def test_the_json_log_has_a_line_per_request_and_per_call_joined_by_the_request_id(
    scene: ReplicaScene,
) -> None:
    port = free_port()
    args = ("--stateless", "--log-json", "--token-file", str(scene.token_file))
    process, said = scene.serve(port, *args)
    try:
        headers = {
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {TOKEN}",
            "X-Request-Id": "lb-7f3a",
        }
        url = f"http://127.0.0.1:{port}/mcp"
        answered = httpx2.post(url, json=called("echo", {"text": "a"}), headers=headers, timeout=60)
        assert answered.headers["x-request-id"] == "lb-7f3a"
        refused = httpx2.post(url, json=called("echo", {"text": "b"}), timeout=60)
        assert refused.status_code == 401
        generated = refused.headers["x-request-id"]
    finally:
        stop(process, said)
    logged = [json.loads(line) for line in said.all if line.startswith("{")]
    by_event: dict[str, list[dict[str, Any]]] = {}
    for line in logged:
        by_event.setdefault(line["event"], []).append(line)
    (call,) = by_event["tool_call"]
    assert (call["request_id"], call["tool"], call["outcome"]) == ("lb-7f3a", "echo", "ok")
    requests = {line["request_id"]: line for line in by_event["http_request"]}
    assert (requests["lb-7f3a"]["path"], requests["lb-7f3a"]["status"]) == ("/mcp", 200)
    assert requests[generated]["status"] == 401  # a refused request is logged too
    assert len(generated) == 32
    assert all(isinstance(line["time"], float) for line in logged)


@pytest.fixture(scope="module")
def load_balancer() -> tuple[list[str], dict[str, str], Any]:
    """HAProxy (scripts/_haproxy.py: the one on PATH, else Debian's package, fetched and
    unpacked) and the module that writes its configuration."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        module = importlib.import_module("_haproxy")
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    try:
        command, env, _ = module.haproxy()
    except FileNotFoundError as exc:
        pytest.skip(f"no load balancer here: {exc}")
    return command, env, module


@pytest.mark.network  # Debian's package, when no haproxy is installed
def test_two_stateless_replicas_behind_haproxy_serve_through_a_rolling_stop(
    scene: ReplicaScene,
    load_balancer: tuple[list[str], dict[str, str], Any],
    tmp_path: Path,
) -> None:
    command, env, module = load_balancer
    ports = [free_port(), free_port()]
    replicas = [scene.serve(port, "--stateless") for port in ports]
    front = free_port()
    config = tmp_path / "haproxy.cfg"
    config.write_text(module.configuration(front, ports))
    balancer = subprocess.Popen(
        [*command, "-db", "-f", str(config)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(front, balancer)

        async def calls(count: int) -> list[Any]:
            async with httpx2.AsyncClient(timeout=60) as http:
                url = f"http://127.0.0.1:{front}/mcp"
                transport = streamable_http_client(url, http_client=http)
                async with Client(transport, read_timeout_seconds=60) as client:
                    return [
                        await client.call_tool("echo", {"text": f"call {n}"}) for n in range(count)
                    ]

        before = anyio.run(calls, 6)
        assert not any(result.is_error for result in before)
        answered = {result.structured_content["pid"] for result in before}
        # round robin: both replicas answered one client
        assert len(answered) == 2
        # a rolling update stops one replica: every call after it still succeeds, on the other
        stopped = replicas[1][0]
        stopped.terminate()
        assert stopped.wait(timeout=60) == 0
        after = anyio.run(calls, 6)
        assert not any(result.is_error for result in after)
        assert len({result.structured_content["pid"] for result in after}) == 1
    finally:
        balancer.terminate()
        balancer.wait(timeout=60)
        for process, lines in replicas:
            stop(process, lines)


def test_a_sessions_tool_calls_are_logged_with_the_id_of_the_request_that_carried_each(
    scene: ReplicaScene,
) -> None:
    """With sessions (no ``--stateless``), each call runs in the session's task, which began
    with the first request: its log line must still name the request that carried it."""
    port = free_port()
    process, said = scene.serve(port, "--log-json")
    try:
        opened = rpc(port, INITIALIZE)
        session = opened.headers["mcp-session-id"]
        headers = {
            "Accept": "application/json, text/event-stream",
            "Mcp-Session-Id": session,
            "MCP-Protocol-Version": "2025-11-25",
        }
        url = f"http://127.0.0.1:{port}/mcp"
        for request_id in ("call-a", "call-b"):
            answered = httpx2.post(
                url,
                json=called("echo", {"text": request_id}),
                headers={**headers, "X-Request-Id": request_id},
                timeout=60,
            )
            assert answered.status_code == 200
    finally:
        stop(process, said)
    calls = [json.loads(line) for line in said.all if '"tool_call"' in line]
    assert [call["request_id"] for call in calls] == ["call-a", "call-b"]
