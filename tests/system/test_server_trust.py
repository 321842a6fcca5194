"""MCP servers as easy to trust as drivers, through the installed ``mcs-host`` console script
with a temporary HOME: ``lock --server LABEL`` pins the server the configuration names (its
URL, its command line, or its distribution's files) into the user's registry, after which it
mounts as vouched for; ``allow_unverified`` in one ``[drivers.<label>]`` or
``[mcp_servers.<label>]`` table lets that mount alone load unverified (attacks: any other
unverified driver or server is refused, and its marker file never appears; a project file
cannot set it); ``call``/``run --approve`` ask on the terminal before each call that needs
approval, driven here through a pseudo-terminal."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from distbuild import Project, Venv, build_wheel, free_port, uv_pip
from hostrun import driver_project, pin, write_registry
from scenes import Scene

from mcs_host.trust.registry import Registry

pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs

pytestmark = pytest.mark.venv

SERVER = """\
from mcp.server.mcpserver import MCPServer

app = MCPServer("adder")


@app.tool()
def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b


def main():
    app.run()
"""

ALPHA_ID = "7c1f0000-0000-4000-8000-0000000000a1"
BETA_ID = "7c1f0000-0000-4000-8000-0000000000b2"


@dataclass(frozen=True)
class TrustScene(Scene):
    """The adder-server's wheel (``server``) and the marker file each driver no registry
    knows writes when imported (``markers``, by name: ``alpha``, ``beta``)."""

    server: Path
    markers: Mapping[str, Path]

    def as_user(
        self, home: Path, *args: str | Path, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``mcs-host ARGS`` run by :meth:`Scene.host` as the user whose HOME is ``home``
        (see :func:`environment`)."""
        return self.host(*args, env=environment(home), cwd=cwd)

    def load(self, home: Path, *args: str | Path) -> dict[str, Any]:
        """``load --json``'s mounts by label."""
        done = self.as_user(home, "load", "--json", *args)
        return {mount["label"]: mount for mount in json.loads(done.stdout)["drivers"]}


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path) -> TrustScene:
    """A venv with ``mcs-host[mcp]``, the adder-server distribution (its console script
    serves the adder over stdio) and two drivers no registry knows, each of which writes its
    own marker file when imported."""
    root = tmp_path_factory.mktemp("server-trust")
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host[mcp]", wheelhouse=wheelhouse, cache=uv_cache)
    server = Project(
        "adder-server",
        files={"adder_server/__init__.py": SERVER},
        entry_points={"console_scripts": {"adder-server": "adder_server:main"}},
        dependencies=["mcp"],
    )
    markers = {"alpha": root / "alpha-ran.txt", "beta": root / "beta-ran.txt"}
    wheels = [
        build_wheel(server.write(root / "src"), root / "wheels"),
        *(
            build_wheel(driver_project(f"{name}-driver", markers[name], ident).write(root / "src"),
                        root / "wheels")
            for name, ident in (("alpha", ALPHA_ID), ("beta", BETA_ID))
        ),
    ]  # fmt: skip
    uv_pip("install", "--no-index", "--no-deps", *map(str, wheels), python=venv.python)
    return TrustScene(root=root, venv=venv, server=wheels[0], markers=markers)


def environment(home: Path) -> dict[str, str]:
    """A temporary HOME, whose ~/.config holds the user's registry and configuration."""
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}


def user_registry(home: Path) -> Registry:
    path = home / ".config" / "mcs-host" / "registry.json"
    return Registry.model_validate_json(path.read_text("utf-8"))


# -- lock --server ----------------------------------------------------------------------------


def test_lock_server_pins_a_command_and_a_url_exactly_and_they_then_mount_as_registered(
    scene: TrustScene, tmp_path: Path
) -> None:
    venv = scene.venv
    url = f"http://127.0.0.1:{free_port()}/mcp"
    cfg = tmp_path / "mcs-host.toml"
    cfg.write_text(
        f'autoload = false\n[mcp_servers.script]\ncommand = "{venv.bin / "adder-server"}"\n'
        f'[mcp_servers.remote]\nurl = "{url}"\n'
    )
    before = scene.load(tmp_path, "--config", cfg, "script")
    assert (before["script"]["status"], before["script"]["reason"]) == (
        "rejected",
        "not-in-registry",
    )
    assert "mcs-host lock --server script" in before["script"]["message"]
    args = ("--server", "script", "--server", "remote", "--trust", "verified")
    done = scene.as_user(tmp_path, "lock", *args, "--config", cfg, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document["pinned"] == []
    assert {s["label"]: (s["target"], s["consent"], s["trust"]) for s in document["servers"]} == {
        "script": (str(venv.bin / "adder-server"), True, "verified"),
        "remote": (url, True, "verified"),
    }
    written = user_registry(tmp_path)
    assert document["registry"] == str(tmp_path / ".config" / "mcs-host" / "registry.json")
    assert written.drivers == {}  # --server alone pins no installed driver
    script, remote = written.mcp_servers["script"], written.mcp_servers["remote"]
    assert (script.command, script.args, script.url, script.consent) == (
        str(venv.bin / "adder-server"),
        (),
        None,
        True,
    )
    assert (remote.url, remote.command, remote.consent, remote.trust) == (
        url,
        None,
        True,
        "verified",
    )
    # the load reads the user's registry: registered, and each call still needs consent
    call = scene.as_user(tmp_path, "call", "add", "a=20", "b=22", "--label", "script",
                         "--config", cfg, "--json")  # fmt: skip
    assert call.returncode == 1
    called = json.loads(call.stdout)
    (mount,) = [m for m in called["load"]["drivers"] if m["label"] == "script"]
    assert (mount["status"], mount["verification"], mount["trust"]) == (
        "mounted",
        "registered",
        "verified",
    )
    assert (
        "each call to the MCP server 'script' needs approval" in (called["response"]["call_detail"])
    )
    listed = scene.as_user(tmp_path, "list", "--config", cfg, "--json")
    servers = {s["label"]: s for s in json.loads(listed.stdout)["servers"]}
    assert (servers["remote"]["verification"], servers["remote"]["allowed"]) == (
        "registered",
        True,
    )


def test_lock_server_pins_a_distribution_s_files_and_waives_consent_only_when_told(
    scene: TrustScene, tmp_path: Path
) -> None:
    cfg = tmp_path / "mcs-host.toml"
    # the distribution as a person writes it; the registry has its PEP 503 name
    cfg.write_text('autoload = false\n[mcp_servers.adder]\ndistribution = "Adder_Server"\n')
    # before: the fix names lock --server, which also writes the server's entry (a library
    # pin alone would leave it without one)
    (before,) = scene.load(tmp_path, "--config", cfg).values()
    assert before["reason"] == "not-in-registry"
    assert f"`mcs-host lock --server adder --config {cfg}`" in before["fix"]  # as run
    done = scene.as_user(tmp_path, "lock", "--server", "adder", "--no-consent", "--config", cfg)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pinned MCP server adder: adder-server (community, calls need no consent)" in (
        done.stdout
    )
    written = user_registry(tmp_path)
    entry = written.mcp_servers["adder"]
    assert (entry.distribution, entry.script, entry.consent) == ("adder-server", None, False)
    release = written.libraries["adder-server"].releases["1.0.0"]
    assert release.digest == pin(scene.server)["digest"]
    call = scene.as_user(tmp_path, "call", "add", "a=1", "b=2", "--config", cfg, "--json")
    assert call.returncode == 0, call.stdout + call.stderr
    called = json.loads(call.stdout)
    assert called["response"]["tool_call_result"] == 3
    (mount,) = called["load"]["drivers"]
    assert (mount["verification"], mount["isolation"]) == ("pinned", "process")


def test_lock_server_refuses_a_label_the_configuration_lacks_and_one_pinned_otherwise(
    scene: TrustScene, tmp_path: Path
) -> None:
    cfg = tmp_path / "mcs-host.toml"
    script = f'[mcp_servers.script]\ncommand = "{scene.venv.bin / "adder-server"}"\n'
    cfg.write_text(script)
    registry = tmp_path / ".config" / "mcs-host" / "registry.json"
    missing = scene.as_user(tmp_path, "lock", "--server", "nope", "--config", cfg)
    assert missing.returncode == 2
    assert "has no MCP server 'nope'" in missing.stderr
    assert "[mcp_servers.nope]" in missing.stderr
    assert not registry.exists()
    assert scene.as_user(tmp_path, "lock", "--server", "script", "--config", cfg).returncode == 0
    pinned = registry.read_bytes()
    cfg.write_text(script + 'args = ["--verbose"]\n')
    other = scene.as_user(tmp_path, "lock", "--server", "script", "--config", cfg)
    assert other.returncode == 2
    assert "already pins the MCP server 'script'" in other.stderr
    assert "--replace" in other.stderr
    assert registry.read_bytes() == pinned
    replaced = scene.as_user(tmp_path, "lock", "--server", "script", "--replace", "--config", cfg)
    assert replaced.returncode == 0, replaced.stderr
    assert user_registry(tmp_path).mcp_servers["script"].args == ("--verbose",)


# -- allow_unverified per label -----------------------------------------------------------------


def test_allow_unverified_on_one_server_starts_it_and_no_other(
    scene: TrustScene, tmp_path: Path
) -> None:
    venv = scene.venv
    marker = tmp_path / "evil-ran.txt"
    cfg = tmp_path / "mcs-host.toml"
    cfg.write_text(
        "autoload = false\n"
        f'[mcp_servers.mine]\ncommand = "{venv.bin / "adder-server"}"\nallow_unverified = true\n'
        f'[mcp_servers.evil]\ncommand = ["sh", "-c", "echo ran > {marker}"]\n'
    )
    mounts = scene.load(tmp_path, "--config", cfg)
    mine, evil = mounts["mine"], mounts["evil"]
    assert (mine["status"], mine["verification"]) == ("mounted", "unverified")
    assert any("UNVERIFIED CODE runs" in w for w in mine["warnings"])
    assert (evil["status"], evil["reason"]) == ("rejected", "not-in-registry")
    assert not marker.exists()


def test_allow_unverified_on_one_driver_loads_it_and_no_other(
    scene: TrustScene, tmp_path: Path
) -> None:
    alpha, beta = scene.markers["alpha"], scene.markers["beta"]
    cfg = tmp_path / "mcs-host.toml"
    cfg.write_text(
        "[drivers.alpha_driver]\nallow_unverified = true\n"
        # the same driver in a process of its own: the child allows that mount too
        '[drivers.isolated]\ndriver = "alpha_driver"\nisolation = "process"\n'
        "allow_unverified = true\n"
        "[drivers.beta_driver]\n"
        '[drivers.other]\ndriver = "beta_driver"\n'
    )
    mounts = scene.load(tmp_path, "--config", cfg)
    for label in ("alpha_driver", "isolated"):
        assert (mounts[label]["status"], mounts[label]["verification"]) == (
            "mounted",
            "unverified",
        ), mounts[label]
    assert mounts["isolated"]["isolation"] == "process"
    for label in ("beta_driver", "other"):
        assert (mounts[label]["status"], mounts[label]["reason"]) == (
            "rejected",
            "not-in-registry",
        ), mounts[label]
    assert "alpha-driver ran" in alpha.read_text()
    assert not beta.exists()
    # verify says the same: alpha loadable though unverified, beta refused; not all verified
    verified = scene.as_user(tmp_path, "verify", "--config", cfg, "--json")
    assert verified.returncode == 1
    drivers = {d["label"]: d for d in json.loads(verified.stdout)["drivers"]}
    assert (drivers["alpha_driver"]["loadable"], drivers["beta_driver"]["loadable"]) == (
        True,
        False,
    )
    assert not beta.exists()


def test_a_project_file_cannot_allow_a_driver_or_a_server_unverified(
    scene: TrustScene, tmp_path: Path
) -> None:
    beta = scene.markers["beta"]
    marker = tmp_path / "evil-ran.txt"
    project = tmp_path / "project"
    project.mkdir()
    (project / "mcs-host.toml").write_text(
        "[drivers.beta_driver]\nallow_unverified = true\n"
        f'[mcp_servers.evil]\ncommand = ["sh", "-c", "echo ran > {marker}"]\n'
        "allow_unverified = true\n"
    )
    done = scene.as_user(tmp_path, "load", "--json", "beta_driver", cwd=project)
    ignored = done.stderr.split(": ignored ", 1)[1].split(": ", 1)[0].split(", ")
    assert sorted(ignored) == ["drivers.beta_driver.allow_unverified", "mcp_servers.evil"]
    (mount,) = [m for m in json.loads(done.stdout)["drivers"] if m["label"] == "beta_driver"]
    assert (mount["status"], mount["reason"]) == ("rejected", "not-in-registry")
    assert not beta.exists()
    assert not marker.exists()


# -- call and run --approve ---------------------------------------------------------------------


def on_terminal(
    scene: TrustScene, home: Path, args: Sequence[str | Path], answers: Sequence[str]
) -> tuple[int, str]:
    """Run ``mcs-host ARGS`` with stdin, stdout and stderr on a pseudo-terminal, typing each
    of ``answers`` when the next ``Run it? [y/N]`` appears; its exit code and all it wrote."""
    venv = scene.venv
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCS_HOST_", "PYTHON"))}
    env.update(environment(home), PATH=f"{venv.bin}{os.pathsep}{env.get('PATH', '')}")
    env.update(VIRTUAL_ENV=str(venv.path), MCS_HOST_STATE_DIR=str(venv.path / "mcs-host-state"))
    env.update(TERM="xterm", NO_COLOR="1")
    main, side = os.openpty()
    process = subprocess.Popen(
        [str(venv.bin / "mcs-host"), *map(str, args)],
        stdin=side, stdout=side, stderr=side, env=env, cwd=venv.path, close_fds=True,
    )  # fmt: skip
    os.close(side)
    said, typed, pending = b"", 0, list(answers)
    deadline = time.monotonic() + 120  # a hang guard, not a measurement
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 1)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal closed: every writer has exited
                break
            if not chunk:
                break
            said += chunk
            if pending and said.count(b"Run it? [y/N]") > typed:
                typed += 1
                os.write(main, f"{pending.pop(0)}\n".encode())
        else:
            pytest.fail(f"mcs-host did not finish: {said.decode(errors='replace')}")
        return process.wait(30), said.decode(errors="replace").replace("\r\n", "\n")
    finally:
        os.close(main)
        if process.poll() is None:
            process.kill()
            process.wait()


def test_approve_asks_on_the_terminal_before_each_call_that_needs_approval(
    scene: TrustScene, tmp_path: Path
) -> None:
    command = str(scene.venv.bin / "adder-server")
    registry = write_registry(
        tmp_path / "registry.json",
        {},
        mcp_servers={
            "asks": {"command": command},  # each call needs consent: no plugin gives it here
            "free": {"command": command, "args": ["--free"], "consent": False},
        },
    )
    cfg = tmp_path / "mcs-host.toml"
    cfg.write_text(
        f'registries = ["{registry}"]\nautoload = false\n'
        f'[mcp_servers.asks]\ncommand = "{command}"\n'
        f'[mcp_servers.free]\ncommand = "{command}"\nargs = ["--free"]\n'
    )
    # yes: the call runs, after the question names the tool, the label and the arguments
    code, said = on_terminal(
        scene, tmp_path, ["call", "asks__add", "a=2", "b=3", "--approve", "--config", cfg], ["y"]
    )
    assert code == 0, said
    asked = 'approval needed: the tool "asks__add" of asks, with the arguments {"a": 2, "b": 3}'
    assert asked in said
    assert said.count("Run it? [y/N]") == 1
    assert said.rstrip().endswith("5")
    # no: the call is denied, and the model (here: run's response) is told why
    output = json.dumps({"tool": "asks__add", "arguments": {"a": 4, "b": 5}})
    code, said = on_terminal(scene, tmp_path, ["run", output, "--approve", "--config", cfg], ["n"])
    assert code == 1, said
    assert said.count("Run it? [y/N]") == 1
    assert "the call of 'asks__add' was not approved: denied at the terminal" in said
    assert '"call_executed": false' in said
    # a call that needs no approval is not asked about
    code, said = on_terminal(
        scene, tmp_path, ["call", "free__add", "a=1", "b=1", "--approve", "--config", cfg], []
    )
    assert code == 0, said
    assert "Run it?" not in said
    assert said.rstrip().endswith("2")
    # without a terminal it cannot ask: it refuses to start
    piped = scene.as_user(tmp_path, "call", "asks__add", "a=1", "b=1", "--approve", "--config", cfg)
    assert piped.returncode == 2
    assert "--approve asks on the terminal" in piped.stderr
    assert "mounted" not in piped.stderr  # nothing was loaded
