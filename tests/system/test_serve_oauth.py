"""``mcs-host serve --http`` as an OAuth resource server (``[serve.oauth]``) in front of a real
OpenID provider (``oidc-provider`` from npm, started here on loopback: ``_oidc.py``), called by
the ``mcp`` SDK's client with its OAuth support and by the TypeScript SDK's: a valid token, an
expired one, a wrong audience, a wrong issuer, a key rotated at the provider, a token without
the scope of one tool (whose driver must not run: its marker file stays absent), the RFC 9728
metadata, ``/metrics`` behind its scope, the rate limit by subject, the JSON log naming the
subject, and two replicas of one resource admitting a client that alternates between them."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import jwt
import pytest
from _oidc import (
    CLIENT,
    SHORT_CLIENT,
    Provider,
    new_key,
    run_ts_client,
)
from distbuild import Venv, build_wheel, free_port, uv_pip, wait_for_port
from hostrun import driver_project, entry, pin, write_registry
from scenes import Scene
from test_serve_replicas import Alternating, _Lines, stop

pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs

import httpx2
from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

pytestmark = pytest.mark.venv

TEAM_ID = "7c1f0000-0000-4000-8000-0000000000f2"

TEAM = """\
from pathlib import Path

from mcs_host import MCSToolDriver, Tool, ToolParameter
from mcs_host.kit import manifest_meta


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        text = ToolParameter(name="text", description="What to say.", schema={"type": "string"})
        path = ToolParameter(name="path", description="A file.", schema={"type": "string"})
        return [
            Tool(name="echo", description="Answer with the text.", parameters=[text]),
            Tool(name="wipe", description="Write the marker file.", parameters=[path]),
        ]

    def execute_tool(self, tool_name, arguments):
        if tool_name == "echo":
            return {"said": arguments["text"]}
        Path(arguments["path"]).write_text("wiped")
        return {"wiped": arguments["path"]}
"""

GRANTS = {"csv:read": ["echo"], "csv:write": ["team"]}
"""``echo`` by its name; ``wipe`` only through its label."""


@dataclass(frozen=True)
class OAuthScene(Scene):
    """A venv with the team driver pinned by a registry, and a provider with one key."""

    registry: Path

    def config(self, provider: Provider, port: int, **extra: Any) -> Path:
        """A configuration admitting ``provider``'s tokens for the server on ``port``."""
        oauth = {
            "issuer": provider.issuer,
            "resource": resource(port),
            "scopes": ["mcs:call"],
            "metrics_scope": "mcs:metrics",
            "leeway": 0,
            **extra,
        }
        lines = [f"registries = [{json.dumps(str(self.registry))}]", "autoload = true"]
        lines += [
            "[serve.oauth]",
            *(f"{key} = {json.dumps(value)}" for key, value in oauth.items()),
        ]
        lines += ["[serve.oauth.grants]", *(f'"{k}" = {json.dumps(v)}' for k, v in GRANTS.items())]
        path = self.root / f"oauth-{port}.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    def serve(
        self, provider: Provider, *args: str, **extra: Any
    ) -> tuple[int, subprocess.Popen[str], _Lines]:
        """``mcs-host serve --http`` behind ``provider``, once it listens."""
        port = free_port()
        process = subprocess.Popen(
            [
                str(self.venv.bin / "mcs-host"),
                "serve",
                "--config",
                str(self.config(provider, port, **extra)),
                "--http",
                f"127.0.0.1:{port}",
                "--log-json",
                *args,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.environment(),
            cwd=self.root,
        )
        lines = _Lines(process)
        wait_for_port(port, process)
        return port, process, lines


def resource(port: int) -> str:
    return f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path) -> OAuthScene:
    root = tmp_path_factory.mktemp("oauth")
    project = driver_project(
        "team-driver",
        root / "imported.txt",
        TEAM_ID,
        "1.0.0",
        label="team",
        files={"team_driver/__init__.py": TEAM},
    )
    wheel = build_wheel(project.write(root / "src"), root / "wheels")
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host[mcp]", wheelhouse=wheelhouse, cache=uv_cache)
    uv_pip("install", "--no-index", "--no-deps", str(wheel), python=venv.python)
    drivers = {
        TEAM_ID: entry("team-driver", "team", "team_driver:Driver", releases={"1.0.0": pin(wheel)})
    }
    return OAuthScene(
        root=root, venv=venv, registry=write_registry(root / "registry.json", drivers)
    )


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with Provider([new_key("k1")]) as started:
        yield started


@pytest.fixture(scope="module")
def server(scene: OAuthScene, provider: Provider) -> Iterator[tuple[int, _Lines]]:
    """One stateless replica behind the module's provider."""
    port, process, said = scene.serve(provider, "--stateless")
    try:
        yield port, said
    finally:
        stop(process, said)


def token(provider: Provider, port: int, scope: str, client: tuple[str, str] = CLIENT) -> str:
    return provider.token(*client, resource=resource(port), scope=scope)


def rpc(
    port: int,
    method: str,
    params: dict[str, Any],
    bearer: str | None,
    request_id: str | None = None,
) -> httpx2.Response:
    """One JSON-RPC request of the stateless server, with ``bearer`` as its token and
    ``request_id`` as its ``X-Request-Id`` (which the JSON log's lines of it carry)."""
    headers = {"Accept": "application/json, text/event-stream"}
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    if request_id is not None:
        headers["X-Request-Id"] = request_id
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx2.post(resource(port), json=message, headers=headers, timeout=60)


def listed(port: int, bearer: str) -> list[str]:
    answer = rpc(port, "tools/list", {}, bearer)
    assert answer.status_code == 200, answer.text
    return [tool["name"] for tool in answer.json()["result"]["tools"]]


def logged(said: _Lines, request_id: str, event: str, seconds: float = 30) -> dict[str, Any]:
    """The JSON log's ``event`` line of the request ``request_id``, once its stderr reader
    has it (lines come after the answer they describe)."""
    deadline = time.monotonic() + seconds
    while True:
        for line in list(said.all):
            if line.startswith("{") and f'"{request_id}"' in line:
                found = json.loads(line)
                if found["request_id"] == request_id and found["event"] == event:
                    return dict(found)
        assert time.monotonic() < deadline, f"no {event} line of request {request_id}"
        time.sleep(0.02)


def test_a_token_lists_and_calls_only_what_its_scopes_grant(
    scene: OAuthScene, provider: Provider, server: tuple[int, _Lines], tmp_path: Path
) -> None:
    port, said = server
    reader = token(provider, port, "mcs:call csv:read")
    assert listed(port, reader) == ["echo"]
    answer = rpc(port, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}, reader)
    assert answer.json()["result"]["structuredContent"] == {"said": "hi"}
    marker = tmp_path / "wiped"
    call = {"name": "wipe", "arguments": {"path": str(marker)}}
    refused = rpc(port, "tools/call", call, reader, "refused-wipe").json()["result"]
    assert refused["isError"] is True
    assert refused["content"][0]["text"] == (
        "the call of 'wipe' was not approved: the token of 'mcs-test' is not granted 'wipe': "
        "it needs scope csv:write"
    )
    assert not marker.exists()  # the driver never ran
    writer = token(provider, port, "mcs:call csv:write")
    assert listed(port, writer) == ["echo", "wipe"]
    assert (
        rpc(port, "tools/call", call, writer, "granted-wipe").json()["result"]["isError"] is False
    )
    assert marker.read_text() == "wiped"
    calls = [logged(said, name, "tool_call") for name in ("refused-wipe", "granted-wipe")]
    assert [(c["tool"], c["outcome"], c["subject"]) for c in calls] == [
        ("wipe", "failed", "mcs-test"),
        ("wipe", "ok", "mcs-test"),
    ]


def test_no_token_gets_401_naming_the_metadata_which_lists_the_scopes(
    server: tuple[int, _Lines], provider: Provider
) -> None:
    port, _ = server
    answer = rpc(port, "tools/list", {}, None)
    assert answer.status_code == 401
    metadata_url = f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{metadata_url}"' in answer.headers["www-authenticate"]
    assert 'error="invalid_token"' in answer.headers["www-authenticate"]
    metadata = httpx2.get(metadata_url, timeout=60).json()
    assert metadata["resource"] == resource(port)
    assert metadata["authorization_servers"] == [provider.issuer]
    assert metadata["scopes_supported"] == ["csv:read", "csv:write", "mcs:call", "mcs:metrics"]
    # a token without the scope every token needs: 403, not the tools
    no_call = token(provider, port, "csv:read")
    forbidden = rpc(port, "tools/list", {}, no_call)
    assert forbidden.status_code == 403
    assert 'error="insufficient_scope"' in forbidden.headers["www-authenticate"]


def test_an_expired_token_a_wrong_audience_and_a_wrong_issuer_are_refused(
    provider: Provider, server: tuple[int, _Lines]
) -> None:
    port, said = server
    short = token(provider, port, "mcs:call csv:read", SHORT_CLIENT)
    assert listed(port, short) == ["echo"]  # valid while it lives
    expires = jwt.decode(short, options={"verify_signature": False})["exp"]
    while time.time() < expires + 1:  # past its expiry, whatever this machine's speed
        time.sleep(0.2)
    other_audience = provider.token(
        *CLIENT, resource=f"http://127.0.0.1:{port}/other", scope="mcs:call csv:read"
    )
    with Provider(provider.keys, issuer="http://127.0.0.1:9/impostor") as impostor:
        # the same keys, another issuer
        wrong_issuer = impostor.token(*CLIENT, resource=resource(port), scope="mcs:call csv:read")
    cases = {"expired": short, "audience": other_audience, "issuer": wrong_issuer}
    for name, refused in {**cases, "garbage": "not-a-jwt"}.items():
        answer = rpc(port, "tools/list", {}, refused, name)
        assert answer.status_code == 401, answer.text
        assert 'error="invalid_token"' in answer.headers["www-authenticate"]
    reasons = [
        logged(said, name, "token_refused")["reason"]
        for name in ("expired", "audience", "issuer", "garbage")
    ]
    assert [reason.partition(":")[0] for reason in reasons] == [
        "ExpiredSignatureError",
        "InvalidAudienceError",
        "InvalidIssuerError",
        "DecodeError",
    ]


def test_a_key_rotated_at_the_provider_is_picked_up(scene: OAuthScene, tmp_path: Path) -> None:
    """The provider restarts signing with a new key (the old one still published, then gone):
    the running server reads the keys again for the new key id, and drops the old one."""
    old, new = new_key("old"), new_key("new")
    with Provider([old]) as rotating:
        port, process, said = scene.serve(rotating, "--stateless")
        try:
            before = token(rotating, port, "mcs:call csv:read")
            assert listed(port, before) == ["echo"]
            rotating.restart([new, old])
            after = token(rotating, port, "mcs:call csv:read")
            assert jwt.get_unverified_header(after)["kid"] == "new"
            time.sleep(1.1)  # the keys are read again at most once a second
            assert listed(port, after) == ["echo"]
            assert listed(port, before) == ["echo"]  # the old key is still published
        finally:
            stop(process, said)


def test_the_sdk_client_gets_its_own_token_from_the_provider(
    provider: Provider, server: tuple[int, _Lines]
) -> None:
    """The ``mcp`` SDK's client credentials OAuth: a 401, the RFC 9728 metadata, the
    provider's metadata, a token for this resource; then it lists and calls."""
    port, _ = server

    class Memory:
        def __init__(self) -> None:
            self.tokens: OAuthToken | None = None
            self.client: OAuthClientInformationFull | None = None

        async def get_tokens(self) -> OAuthToken | None:
            return self.tokens

        async def set_tokens(self, tokens: OAuthToken) -> None:
            self.tokens = tokens

        async def get_client_info(self) -> OAuthClientInformationFull | None:
            return self.client

        async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
            self.client = client_info

    storage = Memory()
    auth = ClientCredentialsOAuthProvider(
        resource(port),
        storage,
        *CLIENT,
        scope="mcs:call csv:write",
        issuer=provider.issuer,
    )

    async def main() -> tuple[list[str], Any]:
        async with (
            httpx2.AsyncClient(auth=auth, timeout=60) as http,
            Client(
                streamable_http_client(resource(port), http_client=http), read_timeout_seconds=60
            ) as client,
        ):
            tools = [tool.name for tool in (await client.list_tools()).tools]
            return tools, await client.call_tool("echo", {"text": "from the SDK"})

    tools, result = anyio.run(main)
    assert tools == ["echo", "wipe"]  # csv:write grants the label
    assert result.structured_content == {"said": "from the SDK"}
    assert storage.tokens is not None
    claims = jwt.decode(storage.tokens.access_token, options={"verify_signature": False})
    assert (claims["aud"], claims["iss"]) == (resource(port), provider.issuer)


def test_the_typescript_sdk_client_lists_and_is_refused_what_it_may_not_call(
    provider: Provider, server: tuple[int, _Lines], tmp_path: Path
) -> None:
    port, _ = server
    login = ("--client-id", CLIENT[0], "--client-secret", CLIENT[1], "--issuer", provider.issuer)
    reader = run_ts_client(resource(port), *login, "--scope", "mcs:call csv:read", "list")
    assert (reader.returncode, reader.output) == (0, {"tools": ["echo"]}), reader.stderr
    marker = tmp_path / "wiped"
    arguments = json.dumps({"path": str(marker)})
    called = run_ts_client(
        resource(port), *login, "--scope", "mcs:call csv:read", "call", "wipe", arguments
    )
    assert called.output["isError"] is True, called
    assert "is not granted 'wipe': it needs scope csv:write" in called.output["text"]
    assert not marker.exists()
    refused = run_ts_client(resource(port), "--token", "forged", "list")
    assert (refused.returncode, refused.output["status"]) == (1, 401), refused


def test_metrics_need_the_metrics_scope(provider: Provider, server: tuple[int, _Lines]) -> None:
    port, _ = server
    url = f"http://127.0.0.1:{port}/metrics"
    reader = token(provider, port, "mcs:call csv:read")
    watcher = token(provider, port, "mcs:metrics")
    assert httpx2.get(url, timeout=60).status_code == 401
    assert (
        httpx2.get(url, headers={"Authorization": f"Bearer {reader}"}, timeout=60).status_code
        == 403
    )
    scraped = httpx2.get(url, headers={"Authorization": f"Bearer {watcher}"}, timeout=60)
    assert scraped.status_code == 200
    assert "mcs_host_stack_info" in scraped.text
    assert httpx2.get(f"http://127.0.0.1:{port}/readyz", timeout=60).status_code == 200


def test_the_rate_limit_counts_a_subject_however_many_tokens_it_gets(
    scene: OAuthScene, provider: Provider
) -> None:
    port, process, said = scene.serve(provider, "--stateless", "--rate-limit", "2/600")
    try:
        fresh = [token(provider, port, "mcs:call csv:read") for _ in range(3)]
        codes = [rpc(port, "tools/list", {}, bearer).status_code for bearer in fresh]
        assert codes == [200, 200, 429]
        other = token(provider, port, "mcs:call csv:read", SHORT_CLIENT)
        assert rpc(port, "tools/list", {}, other).status_code == 200  # another subject
    finally:
        stop(process, said)


def test_a_session_of_the_stateful_server_is_held_to_the_grants_too(
    scene: OAuthScene, provider: Provider, tmp_path: Path
) -> None:
    marker = tmp_path / "wiped"
    port, process, said = scene.serve(provider)
    reader = token(provider, port, "mcs:call csv:read")
    try:

        async def main() -> tuple[list[str], Any]:
            headers = {"Authorization": f"Bearer {reader}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60) as http,
                Client(
                    streamable_http_client(resource(port), http_client=http),
                    read_timeout_seconds=60,
                ) as client,
            ):
                tools = [tool.name for tool in (await client.list_tools()).tools]
                return tools, await client.call_tool("wipe", {"path": str(marker)})

        tools, result = anyio.run(main)
    finally:
        stop(process, said)
    assert tools == ["echo"]
    assert result.is_error
    assert "is not granted 'wipe': it needs scope csv:write" in result.content[0].text
    assert not marker.exists()


def test_a_token_and_an_identity_provider_are_not_both_taken(
    scene: OAuthScene, provider: Provider, tmp_path: Path
) -> None:
    config = scene.config(provider, 9)
    token_file = tmp_path / "token"
    token_file.write_text("one-token-for-all")
    token_file.chmod(0o600)
    both = scene.host(
        "serve", "--config", config, "--http", "127.0.0.1:9", "--token-file", token_file
    )
    assert both.returncode == 2
    assert "[serve.oauth] and --token-file contradict each other" in both.stderr
    unreachable = (
        scene.config(provider, 9).read_text().replace(provider.issuer, "http://127.0.0.1:9")
    )
    gone = tmp_path / "gone.toml"
    gone.write_text(unreachable)
    dead = scene.host("serve", "--config", gone, "--http", "127.0.0.1:9")
    assert dead.returncode == 2
    assert (
        "error: [serve.oauth] cannot read the identity provider's keys: "
        "http://127.0.0.1:9/.well-known/openid-configuration: cannot be read"
    ) in dead.stderr


def test_two_replicas_of_one_resource_take_the_same_token_request_by_request(
    scene: OAuthScene, provider: Provider, tmp_path: Path
) -> None:
    """Replicas behind one URL (the balancer's, which tokens name as their audience) share
    nothing but the configuration: a client whose requests alternate between them is
    admitted and held to its grants by each."""
    front = free_port()  # the URL clients reach: nothing listens there, the transport reroutes
    started = [scene.serve(provider, "--stateless", resource=resource(front)) for _ in range(2)]
    reader = token(provider, front, "mcs:call csv:read")
    marker = tmp_path / "wiped"
    transport = Alternating(tuple(port for port, _, _ in started))
    try:

        async def main() -> tuple[list[str], Any, Any]:
            headers = {"Authorization": f"Bearer {reader}"}
            async with (
                httpx2.AsyncClient(transport=transport, headers=headers, timeout=60) as http,
                Client(
                    streamable_http_client(resource(front), http_client=http),
                    read_timeout_seconds=60,
                ) as client,
            ):
                tools = [tool.name for tool in (await client.list_tools()).tools]
                echoed = await client.call_tool("echo", {"text": "either"})
                return tools, echoed, await client.call_tool("wipe", {"path": str(marker)})

        tools, echoed, wiped = anyio.run(main)
    finally:
        for _, process, said in started:
            stop(process, said)
    assert tools == ["echo"]
    assert echoed.structured_content == {"said": "either"}
    assert wiped.is_error
    assert not marker.exists()
    assert {port for port, _ in transport.sent} == {port for port, _, _ in started}
