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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from distbuild import Project, Venv, build_wheel, free_port, pip, uv_pip, wait_for_port
from hostrun import entry, pin, write_registry
from scenes import Scene

pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs

pytestmark = pytest.mark.venv

SERVER = """\
import os
import sys

from mcp.server.mcpserver import MCPServer

try:  # an optional accelerator, declared nowhere: a planted one must not run
    import adder_speedups  # noqa: F401
except ImportError:
    pass

app = MCPServer("adder")


@app.tool()
def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b


@app.tool()
def crash() -> int:
    \"\"\"End the server's process.\"\"\"
    os._exit(3)


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


@dataclass(frozen=True)
class ServersScene(Scene):
    """The registry that pins the adder-server and vouches for it (``adder``, ``script``)
    and for ``url``, where it serves over HTTP; and the wheel of a consent plugin that
    approves its calls, built but not installed."""

    registry: Path
    url: str
    plugin: Path


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> Iterator[ServersScene]:
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
    uv_pip("install", "--no-index", "--no-deps", str(wheel), python=venv.python)
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
        yield ServersScene(root=root, venv=venv, registry=registry, url=url, plugin=plugin)
    finally:
        http.terminate()
        http.wait(30)


def config(scene: ServersScene, directory: Path, text: str = "") -> Path:
    path = directory / "mcs-host.toml"
    path.write_text(f'registries = ["{scene.registry}"]\nautoload = false\n{text}')
    return path


def test_a_pinned_distribution_s_console_script_is_mounted_and_called(
    scene: ServersScene, tmp_path: Path
) -> None:
    cfg = config(scene, tmp_path, "[mcp_servers.adder]\n")
    done = scene.host(
        "call", "add", "--args", '{"a": 20, "b": 22}', "--config", cfg, "--json", home=scene.root
    )
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
    scene: ServersScene, tmp_path: Path
) -> None:
    venv = scene.venv
    # command and args as a client's mcpServers entry has them
    cfg = config(
        scene, tmp_path, f'[mcp_servers.script]\ncommand = "{venv.bin / "adder-server"}"\n'
    )
    done = scene.host(
        "call", "add", "--args", '{"a": 4, "b": 5}', "--config", cfg, "--json", home=scene.root
    )
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
    done = scene.host("load", "--config", extra, home=scene.root)
    line = next(x for x in done.stdout.splitlines() if x.startswith("script:"))
    assert "not-in-registry" in line  # another command line than the registry's


def test_the_console_script_is_never_looked_up_on_path(scene: ServersScene, tmp_path: Path) -> None:
    # an executable named like the console script, first on PATH, is not what starts
    marker = tmp_path / "planted-ran.txt"
    planted = tmp_path / "bin"
    planted.mkdir()
    (planted / "adder-server").write_text(PLANTED.format(marker=marker))
    (planted / "adder-server").chmod(0o755)
    cfg = config(scene, tmp_path, "[mcp_servers.adder]\n")
    path = f"{planted}:{scene.venv.bin}:/usr/bin:/bin"
    done = scene.host(
        "call", "add", "--args", '{"a": 1, "b": 2}', "--config", cfg,
        home=scene.root, env={"PATH": path},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert not marker.exists()


def test_a_tampered_server_distribution_never_starts(scene: ServersScene, tmp_path: Path) -> None:
    marker = tmp_path / "tampered-ran.txt"
    venv = Venv.create(tmp_path / "venv")
    # the same installation, copied, with the server's module changed after the pin
    subprocess.run(["cp", "-a", f"{scene.venv.path}/.", str(venv.path)], check=True)
    site = next(venv.path.glob("lib/python*/site-packages"))
    module = site / "adder_server" / "__init__.py"
    module.write_text(f"open({str(marker)!r}, 'w').write('ran')\n" + module.read_text())
    cfg = config(scene, tmp_path, "[mcp_servers.adder]\n")
    python = venv.path / "bin" / "python"
    done = venv.run(
        python, "-m", "mcs_host", "load", "--config", cfg, env={"HOME": str(scene.root)}
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("adder:"))
    assert "file-modified" in line
    assert "adder_server/__init__.py" in line
    assert not marker.exists()


def test_a_remote_server_is_pinned_by_url_labelled_remote_and_asks_consent(
    scene: ServersScene, tmp_path: Path
) -> None:
    cfg = config(scene, tmp_path, "[mcp_servers.remote]\n")
    done = scene.host(
        "call", "add", "--args", '{"a": 2, "b": 3}', "--config", cfg, "--json", home=scene.root
    )
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
    done = scene.host(
        "call", "add", "--args", '{"a": 2, "b": 3}', "--config", waived, "--json", home=scene.root
    )
    assert done.returncode == 1
    assert "needs approval" in json.loads(done.stdout)["response"]["call_detail"]
    # a consent plugin that approves it: the call goes through
    venv = Venv.create(tmp_path / "venv")
    subprocess.run(["cp", "-a", f"{scene.venv.path}/.", str(venv.path)], check=True)
    python = venv.path / "bin" / "python"  # the copy's: its scripts would run the original's
    uv_pip("install", "--no-index", "--no-deps", str(scene.plugin), python=python)
    done = venv.run(
        python, "-m", "mcs_host", "call", "add", "--args", '{"a": 2, "b": 3}',
        "--config", cfg, "--json", env={"HOME": str(scene.root)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["response"]["tool_call_result"] == 5


def test_a_url_the_registry_does_not_vouch_for_is_refused(
    scene: ServersScene, tmp_path: Path
) -> None:
    other = scene.url.replace("/mcp", "/other")
    cfg = config(scene, tmp_path, f'[mcp_servers.remote]\nurl = "{other}"\n')
    done = scene.host("load", "--config", cfg, home=scene.root)
    line = next(x for x in done.stdout.splitlines() if x.startswith("remote:"))
    assert f"no registry vouches for '{other}' under the label 'remote'" in line
    verified = scene.host("verify", "--config", cfg, home=scene.root)
    assert verified.returncode == 1
    assert "0 of 1 MCP servers may start." in verified.stdout
    listed = scene.host("list", "--config", cfg, "--json", home=scene.root)
    (server,) = json.loads(listed.stdout)["servers"]
    assert (server["label"], server["verification"], server["allowed"]) == (
        "remote",
        "unverified",
        False,
    )


def test_a_project_configuration_may_not_declare_servers(
    scene: ServersScene, tmp_path: Path
) -> None:
    # an mcs-host.toml in the working directory, not approved, declares a command: ignored
    marker = tmp_path / "project-ran.txt"
    project = tmp_path / "project"
    project.mkdir()
    (project / "mcs-host.toml").write_text(
        "autoload = false\n[trust]\nallow_unverified = true\n"
        f'[mcp_servers.evil]\ncommand = ["sh", "-c", "echo ran > {marker}"]\n'
    )
    done = scene.host("load", home=scene.root, cwd=project)
    assert "ignored mcp_servers" in done.stderr
    assert "evil" not in done.stdout
    assert not marker.exists()
    assert os.listdir(project) == ["mcs-host.toml"]


# -- a server's process runs only verified bytes ---------------------------------------------


def copy_of(scene: ServersScene, directory: Path) -> Venv:
    """A copy of the scene's venv to tamper with (its own python: the scripts would run the
    original's)."""
    venv = Venv.create(directory)
    subprocess.run(["cp", "-a", f"{scene.venv.path}/.", str(venv.path)], check=True)
    return venv


def copied_host(venv: Venv, scene: ServersScene, *args: str | Path) -> Any:
    return venv.run(
        venv.path / "bin" / "python", "-m", "mcs_host", *args, env={"HOME": str(scene.root)}
    )


def plant(path: Path, marker: Path, name: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"open({str(marker)!r}, 'a').write({name + chr(10)!r})\n")


def test_a_server_s_process_imports_only_verified_bytes_whatever_is_planted(
    scene: ServersScene, tmp_path: Path
) -> None:
    from test_gate import PROBED

    marker = tmp_path / "planted-ran.txt"
    venv = copy_of(scene, tmp_path / "venv")
    site = next(venv.path.glob("lib/python*/site-packages"))
    python = venv.path / "bin" / "python"
    # bytecode of other code beside the verified source, valid without checking the source
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'a').write('pyc\\n')\n")
    poison = (
        "import importlib.util, py_compile, sys\n"
        "py_compile.compile(sys.argv[2], importlib.util.cache_from_source(sys.argv[1]),\n"
        "    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n"
    )
    source = site / "adder_server" / "__init__.py"
    assert venv.run(python, "-c", poison, str(source), str(evil)).returncode == 0
    # the optional import it probes, and every name a library probes or the stdlib lacks
    plant(site / "adder_speedups.py", marker, "adder_speedups")
    missing = venv.run(
        python,
        "-c",
        "import importlib.util, json, sys\n"
        "print(json.dumps(sorted(n for n in sys.stdlib_module_names\n"
        "    if '.' not in n and importlib.util.find_spec(n) is None)))",
    )
    for name in {*json.loads(missing.stdout), *PROBED}:
        plant(site / f"{name}.py", marker, name)
    control = venv.run(python, "-c", "import adder_server")  # plain Python runs the plants
    assert control.returncode == 0, control.stderr
    assert {"pyc"} <= set(marker.read_text().split())
    marker.unlink()
    cfg = config(scene, tmp_path, "[mcp_servers.adder]\n")
    args = ("call", "add", "--args", '{"a": 40, "b": 2}', "--config", cfg, "--json")
    done = copied_host(venv, scene, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["response"]["tool_call_result"] == 42
    assert not marker.exists(), marker.read_text()


RESTART = """\
import json, pathlib, sys
from mcs_host import load_drivers

config, module, marker = sys.argv[1:]
stack = load_drivers(config).driver
said = {"first": stack.execute_tool("add", {"a": 1, "b": 2})}
source = pathlib.Path(module)
source.write_text(f"open({marker!r}, 'w').write('ran')\\n" + source.read_text())
for name in ("crash", "add"):
    try:
        said[name] = stack.execute_tool(name, {} if name == "crash" else {"a": 1, "b": 2})
    except Exception as exc:
        said[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(said))
"""


def test_a_server_restarted_after_its_files_changed_is_refused(
    scene: ServersScene, tmp_path: Path
) -> None:
    marker = tmp_path / "restarted-ran.txt"
    venv = copy_of(scene, tmp_path / "venv")
    module = next(venv.path.glob("lib/python*/site-packages")) / "adder_server" / "__init__.py"
    cfg = config(scene, tmp_path, "[mcp_servers.adder]\n")
    done = venv.run(
        venv.path / "bin" / "python", "-c", RESTART, cfg, module, marker,
        env={"HOME": str(scene.root)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["first"] == 3
    assert said["crash"].startswith("ToolError")
    assert "file-modified" in said["add"], said
    assert "adder_server/__init__.py" in said["add"]
    assert not marker.exists()


def test_what_a_server_imports_from_another_distribution_must_be_verified(
    scene: ServersScene, tmp_path: Path
) -> None:
    marker = tmp_path / "helper-ran.txt"
    venv = copy_of(scene, tmp_path / "venv")
    python = venv.path / "bin" / "python"
    # a real distribution providing the optional module, installed but declared by nobody
    helper = Project(
        "adder-speedups",
        files={"adder_speedups.py": f"open({str(marker)!r}, 'a').write('speedups\\n')\n"},
    )
    wheel = build_wheel(helper.write(tmp_path / "src"), tmp_path / "wheels")
    uv_pip("install", "--no-index", "--no-deps", str(wheel), python=python)
    assert venv.run(python, "-c", "import adder_server").returncode == 0  # the control
    marker.unlink()
    cfg = config(scene, tmp_path, "[mcp_servers.adder]\n")
    args = ("call", "add", "--args", '{"a": 1, "b": 1}', "--config", cfg, "--json")
    done = copied_host(venv, scene, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["response"]["tool_call_result"] == 2
    assert not marker.exists()  # refused as an import, which the server's try caught


def test_a_server_on_the_path_given_runs_from_there_and_nothing_shadows_it(
    scene: ServersScene, tmp_path: Path
) -> None:
    marker = tmp_path / "shadow-ran.txt"
    venv = copy_of(scene, tmp_path / "venv")
    python = venv.path / "bin" / "python"
    # --path DIR holds the released server; site-packages holds a changed copy of it
    target = tmp_path / "target"
    wheel = next((scene.root / "wheels").glob("adder_server-*.whl"))
    pip("install", "--no-index", "--no-deps", "--target", str(target), str(wheel), python=python)
    module = next(venv.path.glob("lib/python*/site-packages")) / "adder_server" / "__init__.py"
    module.write_text(f"open({str(marker)!r}, 'w').write('ran')\n" + module.read_text())
    cfg = config(scene, tmp_path, "[mcp_servers.adder]\n")
    args = ("call", "add", "--args", '{"a": 5, "b": 6}', "--config", cfg, "--json")
    done = copied_host(venv, scene, *args, "--path", target)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["response"]["tool_call_result"] == 11
    assert not marker.exists()
    # without --path the changed copy is the one found, and refused before it starts
    refused = copied_host(venv, scene, *args)
    assert refused.returncode == 1
    assert "file-modified" in refused.stdout + refused.stderr
    assert not marker.exists()


def test_verify_passes_a_pinned_server_and_not_a_command_it_cannot_check(
    scene: ServersScene, tmp_path: Path
) -> None:
    pinned = scene.host(
        "verify", "--config", config(scene, tmp_path, "[mcp_servers.adder]\n"), home=scene.root
    )
    assert pinned.returncode == 0, pinned.stdout + pinned.stderr
    script = f'[mcp_servers.script]\ncommand = "{scene.venv.bin / "adder-server"}"\n'
    command = scene.host("verify", "--config", config(scene, tmp_path, script), home=scene.root)
    assert command.returncode == 1, command.stdout
    assert "what it runs is not checked" in command.stdout
