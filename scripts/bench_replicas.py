"""Benchmark ``mcs-host serve --http --stateless`` replicas behind a real load balancer
(HAProxy) against one plain ``mcp`` SDK server, and a replica stopped in the middle of a run.

    python scripts/bench_replicas.py [--seconds 8] [--sessions 32] [--json]

Each replica serves the bundled files driver, pinned and verified (its ``stat`` tool on the
demo data); the plain server is the SDK's ``MCPServer`` with a ``stat`` tool of its own, served
stateless by uvicorn. ``--sessions`` clients of the SDK (``Client`` over streamable HTTP, in
this process, on one event loop) call ``stat`` as fast as they are answered for ``--seconds``:
first the plain server directly, then HAProxy in front of 1, 2 and 3 replicas (round robin,
health check ``GET /readyz``), then of 1 replica behind ``[serve.oauth]``: each request's JWT
access token (RS256) checked against an issuer's keys, which a small issuer in this process
publishes (discovery and JWKS; the keys are read once, so the issuer is off the request
path, as a real provider is). The figures are calls per second, their ratio to the plain
server's in the same run, failed calls, and the median and 99th percentile latency. Then,
with 2 replicas, one gets SIGTERM halfway through: the calls that failed, and the time until
HAProxy marked it down. On a machine with few cores the replicas, HAProxy and the clients
share them: the ratios, not the rates, are what carries over.

HAProxy is the one on ``PATH``, else Debian's package, fetched with ``apt-get download`` and
unpacked (not installed) into ``~/.cache/mcs-host/haproxy``. Needs the mcs-host[mcp] extra and
the bundled drivers installed (as ``scripts/bench.py`` sets up ``.venvs/bench``).
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from _bench import emit
from _haproxy import configuration, haproxy
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "scripts" / "demo" / "data"
ARGUMENTS = {"path": "sales.csv"}

PLAIN = """\
import os
import sys

import uvicorn
from mcp.server.mcpserver import MCPServer

ROOT = sys.argv[2]
server = MCPServer("plain")


@server.tool()
def stat(path: str) -> dict:
    \"\"\"The size and modification time of a file under the root.\"\"\"
    found = os.stat(os.path.join(ROOT, path))
    return {"path": path, "size": found.st_size, "modified": found.st_mtime}


app = server.streamable_http_app(stateless_http=True, json_response=True)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


def free_port() -> int:
    import socket  # noqa: PLC0415

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def version(command: list[str], env: dict[str, str]) -> str:
    done = subprocess.run([*command, "-v"], env=env, capture_output=True, text=True, check=True)
    return done.stdout.splitlines()[0]


def ready(port: int, path: str = "/readyz", seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"nothing ready on port {port}{path}")


class Processes:
    """The processes a run started, ended at its end."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[str]] = []

    def start(self, command: Sequence[str], **kwargs: Any) -> subprocess.Popen[str]:
        process = subprocess.Popen(list(command), text=True, **kwargs)
        self.started.append(process)
        return process

    def end(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.terminate()
        for process in self.started:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.started.clear()


def replica(processes: Processes, config: Path) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    command = [str(Path(sys.executable).parent / "mcs-host"), "serve", "--config", str(config)]
    command += ["--http", f"127.0.0.1:{port}", "--stateless"]
    process = processes.start(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ready(port)
    return process, port


@dataclass
class Balancer:
    process: subprocess.Popen[str]
    port: int
    down: dict[str, float] = field(default_factory=dict)
    """Per server name, when HAProxy said it is down (``time.monotonic()``)."""


def balancer(
    processes: Processes,
    command: list[str],
    env: dict[str, str],
    ports: Sequence[int],
    where: Path,
    port: int | None = None,
) -> Balancer:
    port = port or free_port()
    config = where / f"haproxy-{port}.cfg"
    config.write_text(configuration(port, ports))
    process = processes.start(
        [*command, "-db", "-f", str(config)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    found = Balancer(process, port)

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if " is DOWN" in line:
                name = line.split("replicas/", 1)[1].split()[0] if "replicas/" in line else "?"
                found.down.setdefault(name, time.monotonic())

    threading.Thread(target=read, daemon=True).start()
    ready(port, "/readyz")
    return found


@dataclass
class Load:
    calls: int = 0
    failed: int = 0
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def drive(
    port: int, sessions: int, seconds: float, halfway: Any = None, token: str | None = None
) -> Load:
    """``sessions`` clients calling ``stat`` on ``port`` for ``seconds``, with ``token`` as
    their bearer; ``halfway()`` is called once, halfway through."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    load = Load()
    url = f"http://127.0.0.1:{port}/mcp"
    started = time.monotonic()
    deadline = started + seconds

    async def one() -> None:
        async with (
            httpx2.AsyncClient(timeout=120, headers=headers) as http,
            Client(
                streamable_http_client(url, http_client=http), read_timeout_seconds=120
            ) as client,
        ):
            while time.monotonic() < deadline:
                began = time.perf_counter()
                try:
                    result = await client.call_tool("stat", ARGUMENTS)
                except Exception as exc:
                    load.failed += 1
                    load.errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                if result.is_error:
                    load.failed += 1
                    load.errors.append(str(result.content))
                    continue
                load.calls += 1
                load.latencies.append(time.perf_counter() - began)

    async def midway() -> None:
        await anyio.sleep(seconds / 2)
        if halfway is not None:
            halfway()

    async with anyio.create_task_group() as group:
        group.start_soon(midway)
        for _ in range(sessions):
            group.start_soon(one)
    return load


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def row(name: str, load: Load, seconds: float, plain_rate: float | None) -> str:
    rate = load.calls / seconds
    ratio = f"{rate / plain_rate:.2f}x" if plain_rate else "1x"
    p50 = statistics.median(load.latencies) * 1000 if load.latencies else float("nan")
    p99 = percentile(load.latencies, 0.99) * 1000
    return f"| {name} | {rate:.0f} | {ratio} | {load.failed} | {p50:.1f} ms | {p99:.1f} ms |"


def write_config(directory: Path, oauth: tuple[str, str] | None = None) -> Path:
    """A configuration mounting only the bundled files driver on the demo data; with
    ``oauth`` (issuer, resource), admitting that issuer's tokens for that resource."""
    path = directory / ("replica.toml" if oauth is None else "replica-oauth.toml")
    text = (
        f"registries = [{str(ROOT / 'registry.json')!r}]\n"
        "autoload = false\n"
        "[drivers.files]\n"
        f"settings = {{ root = {str(DATA)!r} }}\n"
    )
    if oauth is not None:
        text += f"[serve.oauth]\nissuer = {oauth[0]!r}\nresource = {oauth[1]!r}\n"
    path.write_text(text)
    return path


class Issuer:
    """An identity provider's published documents (discovery, JWKS) on loopback, and its
    signing key: enough for a resource server, which reads them once."""

    def __init__(self) -> None:
        import json  # noqa: PLC0415
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: PLC0415

        from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: PLC0415
        from jwt.algorithms import RSAAlgorithm  # noqa: PLC0415

        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        jwks = {"keys": [{**public, "kid": "bench", "alg": "RS256", "use": "sig"}]}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        documents = {
            "/.well-known/openid-configuration": {
                "issuer": self.url,
                "jwks_uri": f"{self.url}/jwks",
            },
            "/jwks": jwks,
        }

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                document = documents.get(self.path)
                body = json.dumps(document).encode()
                self.send_response(200 if document is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server.RequestHandlerClass = Handler
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def token(self, resource: str) -> str:
        """An access token for ``resource``, valid for an hour."""
        import jwt  # noqa: PLC0415

        now = int(time.time())
        claims = {"iss": self.url, "aud": resource, "sub": "bench", "iat": now, "exp": now + 3600}
        return jwt.encode(claims, self.key, "RS256", {"kid": "bench", "typ": "at+jwt"})


def oauth_row(
    processes: Processes,
    haproxy_run: tuple[list[str], dict[str, str]],
    where: Path,
    args: argparse.Namespace,
    plain_rate: float,
) -> str:
    """The row of HAProxy in front of one replica behind ``[serve.oauth]``."""
    issuer = Issuer()
    front_port = free_port()
    resource = f"http://127.0.0.1:{front_port}/mcp"
    try:
        ports = [replica(processes, write_config(where, (issuer.url, resource)))[1]]
        front = balancer(processes, *haproxy_run, ports, where, front_port)
        token = issuer.token(resource)
        load = anyio.run(drive, front.port, args.sessions, args.seconds, None, token)
    finally:
        processes.end()
        issuer.server.shutdown()
    name = "HAProxy, 1 replica of `serve --http --stateless` with `[serve.oauth]`"
    return row(name, load, args.seconds, plain_rate)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    command, env, source = haproxy()
    processes = Processes()
    markdown = [
        f"HAProxy: {version(command, env)}, {source}; {args.sessions} sessions of the SDK's "
        f"client, {args.seconds:.0f} s a row.",
        "",
        "| server | calls/s | against the plain server | failed | p50 | p99 |",
        "|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as scratch:
        where = Path(scratch)
        config = write_config(where)
        try:
            plain_script = where / "plain.py"
            plain_script.write_text(PLAIN)
            port = free_port()
            processes.start(
                [sys.executable, str(plain_script), str(port), str(DATA)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            _wait_listening(port)
            plain = anyio.run(drive, port, args.sessions, args.seconds)
            plain_rate = plain.calls / args.seconds
            plain_name = "one plain `mcp` SDK server, no balancer"
            markdown.append(row(plain_name, plain, args.seconds, None))
            processes.end()
            for count in (1, 2, 3):
                ports = [replica(processes, config)[1] for _ in range(count)]
                front = balancer(processes, command, env, ports, where)
                load = anyio.run(drive, front.port, args.sessions, args.seconds)
                replicas = f"{count} replica{'s' if count > 1 else ''}"
                name = f"HAProxy, {replicas} of `serve --http --stateless`"
                markdown.append(row(name, load, args.seconds, plain_rate))
                processes.end()
            # one replica behind [serve.oauth]: a JWT checked on every request
            markdown.append(oauth_row(processes, (command, env), where, args, plain_rate))
            # a rolling update: SIGTERM one of two replicas halfway through
            started = [replica(processes, config) for _ in range(2)]
            front = balancer(processes, command, env, [p for _, p in started], where)
            stopped: dict[str, float] = {}

            def stop_one() -> None:
                stopped["at"] = time.monotonic()
                started[1][0].send_signal(signal.SIGTERM)

            load = anyio.run(drive, front.port, args.sessions, args.seconds, stop_one)
            exit_status = started[1][0].wait(timeout=120)
            down = front.down.get("r2")
            marked = f"{(down - stopped['at']) * 1000:.0f} ms" if down is not None else "never"
            markdown += [
                "",
                f"One of 2 replicas stopped with SIGTERM halfway through: {load.calls} calls "
                f"answered, {load.failed} failed; it exited with status {exit_status}; HAProxy "
                f"marked it down {marked} after the signal.",
            ]
            if load.errors:
                markdown.append(f"First failure: `{load.errors[0][:200]}`")
        finally:
            processes.end()
    emit("Replicas behind a load balancer", markdown, [], args.json)
    return 0


def _wait_listening(port: int, seconds: float = 60) -> None:
    import socket  # noqa: PLC0415

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as attempt:
            if attempt.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"nothing listens on port {port}")


if __name__ == "__main__":
    sys.exit(main())
