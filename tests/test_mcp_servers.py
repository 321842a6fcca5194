"""MCP servers declared in the configuration and vouched for by the registry: a stdio server
that is an installed distribution's console script (verified by its pins before it starts,
run from the verified copy, never found on ``PATH``), a remote server over streamable HTTP
(pinned by URL, labelled remote), consent required unless the registry says otherwise, and
what ``list`` and ``verify`` say about each. Attacks write a marker file that must not
appear."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from distbuild import Project, Venv, build_wheel, free_port, pip, wait_for_port
from hostrun import entry, pin, write_registry

pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs

pytestmark = pytest.mark.venv

SERVER = """\
import sys

from mcp.server.mcpserver import MCPServer

app = MCPServer("adder")


@app.tool()
def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b


def main():
    if len(sys.argv) > 1:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
    else:
        app.run()
"""

APPROVE = """\
from mcs_host.loading.hooks import hookimpl


@hookimpl
def mcs_host_consent(call):
    return True if call.name.endswith("add") else None
"""

APPROVE_ID = "7c1f0000-0000-4000-8000-0000000000f1"
PLANTED = "#!/bin/sh\necho planted > {marker}\n"


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> Iterator[dict[str, Any]]:
    """A venv with ``mcs-host[mcp]`` and the adder-server distribution (its console script
    serves the adder over stdio, or HTTP given a port), a registry that pins it and vouches
    for it and for the same server reached over HTTP, and that server running."""
    root = tmp_path_factory.mktemp("servers")
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host[mcp]", wheelhouse=wheelhouse, cache=uv_cache)
    server = Project(
        "adder-server",
        files={"adder_server/__init__.py": SERVER},
        entry_points={"console_scripts": {"adder-server": "adder_server:main"}},
        dependencies=["mcp"],
    )
    approve = Project(
        "approve-adds",
        files={"approve_adds/__init__.py": APPROVE},
        entry_points={"mcs.host_plugins": {"approve": "approve_adds"}},
        dependencies=["mcs-host"],
    )
    wheel = build_wheel(server.write(root / "src"), root / "wheels")
    plugin = build_wheel(approve.write(root / "src"), root / "wheels")
    pip("install", "--no-index", "--no-deps", str(wheel), python=venv.python)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    registry = write_registry(
        root / "registry.json",
        {
            APPROVE_ID: entry(
                "approve-adds",
                "approve",
                "approve_adds",
                group="mcs.host_plugins",
                releases={"1.0.0": pin(plugin)},
            )
        },
        libraries={"adder-server": {"releases": {"1.0.0": pin(wheel)}}},
        mcp_servers={
            "adder": {"distribution": "adder-server", "consent": False, "trust": "verified"},
            "remote": {"url": url, "trust": "community"},
            "script": {"command": str(venv.bin / "adder-server"), "args": [], "consent": False},
        },
    )
    http = subprocess.Popen(
        [str(venv.bin / "adder-server"), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, http)
        yield {"venv": venv, "registry": registry, "root": root, "url": url, "plugin": plugin}
    finally:
        http.terminate()
        http.wait(30)


def config(scene: dict[str, Any], directory: Path, text: str = "") -> Path:
    path = directory / "mcs-host.toml"
    path.write_text(f'registries = ["{scene["registry"]}"]\nautoload = false\n{text}')
    return path


def host(scene: dict[str, Any], *args: str | Path, path: str | None = None) -> Any:
    venv: Venv = scene["venv"]
    env = {"HOME": str(scene["root"])}
    if path is not None:
        env["PATH"] = path
    return venv.run("mcs-host", *args, env=env)


def test_a_pinned_distribution_s_console_script_is_mounted_and_called(
    scene: dict[str, Any], tmp_path: Path
) -> None:
    cfg = config(scene, tmp_path, "[mcp_servers.adder]\n")
    done = host(scene, "call", "add", "--args", '{"a": 20, "b": 22}', "--config", cfg, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document["response"]["tool_call_result"] == 42
    (mount,) = document["load"]["drivers"]
    assert mount["kind"] == "mcp"
    assert (mount["verification"], mount["trust"], mount["isolation"]) == (
        "pinned",
        "verified",
        "process",
    )
    assert mount["distribution"] == "adder-server"


def test_a_command_in_the_mcp_servers_form_is_registered_when_the_registry_names_it(
    scene: dict[str, Any], tmp_path: Path
) -> None:
    venv: Venv = scene["venv"]
    # command and args as a client's mcpServers entry has them
    cfg = config(
        scene, tmp_path, f'[mcp_servers.script]\ncommand = "{venv.bin / "adder-server"}"\n'
    )
    done = host(scene, "call", "add", "--args", '{"a": 4, "b": 5}', "--config", cfg, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document["response"]["tool_call_result"] == 9
    (mount,) = document["load"]["drivers"]
    assert (mount["verification"], mount["isolation"]) == ("registered", "process")
    extra = config(
        scene,
        tmp_path,
        f'[mcp_servers.script]\ncommand = "{venv.bin / "adder-server"}"\nargs = ["9999"]\n',
    )
    done = host(scene, "load", "--config", extra)
    line = next(x for x in done.stdout.splitlines() if x.startswith("script:"))
    assert "not-in-registry" in line  # another command line than the registry's


def test_the_console_script_is_never_looked_up_on_path(
    scene: dict[str, Any], tmp_path: Path
) -> None:
    # an executable named like the console script, first on PATH, is not what starts
    marker = tmp_path / "planted-ran.txt"
    planted = tmp_path / "bin"
    planted.mkdir()
    (planted / "adder-server").write_text(PLANTED.format(marker=marker))
    (planted / "adder-server").chmod(0o755)
    cfg = config(scene, tmp_path, "[mcp_servers.adder]\n")
    venv: Venv = scene["venv"]
    path = f"{planted}:{venv.bin}:/usr/bin:/bin"
    done = host(scene, "call", "add", "--args", '{"a": 1, "b": 2}', "--config", cfg, path=path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not marker.exists()


def test_a_tampered_server_distribution_never_starts(scene: dict[str, Any], tmp_path: Path) -> None:
    marker = tmp_path / "tampered-ran.txt"
    venv = Venv.create(tmp_path / "venv")
    scene_venv: Venv = scene["venv"]
    # the same installation, copied, with the server's module changed after the pin
    subprocess.run(["cp", "-a", f"{scene_venv.path}/.", str(venv.path)], check=True)
    site = next(venv.path.glob("lib/python*/site-packages"))
    module = site / "adder_server" / "__init__.py"
    module.write_text(f"open({str(marker)!r}, 'w').write('ran')\n" + module.read_text())
    cfg = config(scene, tmp_path, "[mcp_servers.adder]\n")
    python = venv.path / "bin" / "python"
    done = venv.run(
        python, "-m", "mcs_host", "load", "--config", cfg, env={"HOME": str(scene["root"])}
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("adder:"))
    assert "file-modified" in line
    assert "adder_server/__init__.py" in line
    assert not marker.exists()


def test_a_remote_server_is_pinned_by_url_labelled_remote_and_asks_consent(
    scene: dict[str, Any], tmp_path: Path
) -> None:
    cfg = config(scene, tmp_path, "[mcp_servers.remote]\n")
    done = host(scene, "call", "add", "--args", '{"a": 2, "b": 3}', "--config", cfg, "--json")
    assert done.returncode == 1
    document = json.loads(done.stdout)
    (mount,) = document["load"]["drivers"]
    assert (mount["status"], mount["verification"], mount["isolation"]) == (
        "mounted",
        "registered",
        "remote",
    )
    detail = document["response"]["call_detail"]
    assert "each call to the MCP server 'remote' needs approval" in detail
    assert 'unless its registry entry says "consent": false' in detail
    # the configuration cannot waive what the registry asks for
    waived = config(scene, tmp_path, "[mcp_servers.remote]\nconsent = false\n")
    done = host(scene, "call", "add", "--args", '{"a": 2, "b": 3}', "--config", waived, "--json")
    assert done.returncode == 1
    assert "needs approval" in json.loads(done.stdout)["response"]["call_detail"]
    # a consent plugin that approves it: the call goes through
    venv = Venv.create(tmp_path / "venv")
    scene_venv: Venv = scene["venv"]
    subprocess.run(["cp", "-a", f"{scene_venv.path}/.", str(venv.path)], check=True)
    python = venv.path / "bin" / "python"  # the copy's: its scripts would run the original's
    pip("install", "--no-index", "--no-deps", str(scene["plugin"]), python=python)
    done = venv.run(
        python, "-m", "mcs_host", "call", "add", "--args", '{"a": 2, "b": 3}',
        "--config", cfg, "--json", env={"HOME": str(scene["root"])},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["response"]["tool_call_result"] == 5


def test_a_url_the_registry_does_not_vouch_for_is_refused(
    scene: dict[str, Any], tmp_path: Path
) -> None:
    other = scene["url"].replace("/mcp", "/other")
    cfg = config(scene, tmp_path, f'[mcp_servers.remote]\nurl = "{other}"\n')
    done = host(scene, "load", "--config", cfg)
    line = next(x for x in done.stdout.splitlines() if x.startswith("remote:"))
    assert f"no registry vouches for '{other}' under the label 'remote'" in line
    verified = host(scene, "verify", "--config", cfg)
    assert verified.returncode == 1
    assert "0 of 1 MCP servers may start." in verified.stdout
    listed = host(scene, "list", "--config", cfg, "--json")
    (server,) = json.loads(listed.stdout)["servers"]
    assert (server["label"], server["verification"], server["allowed"]) == (
        "remote",
        "unverified",
        False,
    )


def test_a_project_configuration_may_not_declare_servers(
    scene: dict[str, Any], tmp_path: Path
) -> None:
    # an mcs-host.toml in the working directory, not approved, declares a command: ignored
    marker = tmp_path / "project-ran.txt"
    project = tmp_path / "project"
    project.mkdir()
    (project / "mcs-host.toml").write_text(
        "autoload = false\n[trust]\nallow_unverified = true\n"
        f'[mcp_servers.evil]\ncommand = ["sh", "-c", "echo ran > {marker}"]\n'
    )
    venv: Venv = scene["venv"]
    done = venv.run("mcs-host", "load", env={"HOME": str(scene["root"])}, cwd=project)
    assert "ignored mcp_servers" in done.stderr
    assert "evil" not in done.stdout
    assert not marker.exists()
    assert os.listdir(project) == ["mcs-host.toml"]
