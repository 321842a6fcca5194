"""A tool cannot take the client down: sys.exit(), other BaseExceptions, a KeyboardInterrupt
raised in a worker thread, and a closed or replaced stdout end the call, not the process.

The driver is a real pinned distribution installed into a venv, and every call goes through
the installed ``mcs-host call`` console script: the command must still print the
DriverResponse on stdout (exit 1 for a failed call) and the next call must work.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from distbuild import Venv, build_wheel, uv_pip
from hostrun import driver_project, entry, pin, write_registry
from scenes import Scene

pytestmark = pytest.mark.venv

DRIVER_ID = "7c1f0000-0000-4000-8000-0000000000c1"

UNRULY = """\
import os
import sys

from mcs_host import MCSToolDriver, Tool
from mcs_host.kit import manifest_meta


class Leaving(BaseException):
    pass


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        names = ("exit", "leave", "interrupt", "close", "replace", "ping")
        return [Tool(name=name, description=f"Do {name}.") for name in names]

    def execute_tool(self, tool_name, arguments):
        if tool_name == "exit":
            sys.exit(3)
        if tool_name == "leave":
            raise Leaving("off I go")
        if tool_name == "interrupt":
            raise KeyboardInterrupt
        if tool_name == "close":
            sys.stdout.close()
            return "closed"
        if tool_name == "replace":
            sys.stdout = open(os.devnull, "w")
            return "replaced"
        return "pong"
"""


@dataclass(frozen=True)
class ContainmentScene(Scene):
    """The unruly driver pinned in ``registry``; ``config`` names the registry and sets a
    call timeout; ``state`` is the host's state directory for every run."""

    registry: Path
    config: Path
    state: Path

    def call(self, tool: str, *options: str) -> subprocess.CompletedProcess[str]:
        return self.host("call", tool, *options, state=self.state)


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> ContainmentScene:
    root = tmp_path_factory.mktemp("containment")
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    project = driver_project(
        "unruly-driver",
        root / "ran.txt",
        DRIVER_ID,
        label="unruly",
        files={"unruly_driver/__init__.py": UNRULY},
    )
    wheel = build_wheel(project.write(root / "src"), root / "wheels")
    uv_pip("install", "--no-index", "--no-deps", str(wheel), python=venv.python)
    registry = write_registry(
        root / "registry.json",
        {
            DRIVER_ID: entry(
                "unruly-driver", "unruly", "unruly_driver:Driver", releases={"1.0.0": pin(wheel)}
            )
        },
    )
    config = root / "mcs-host.toml"
    config.write_text(f'registries = ["{registry}"]\ncall_timeout = 5\n')
    return ContainmentScene(
        root=root, venv=venv, registry=registry, config=config, state=root / "state"
    )


@pytest.mark.parametrize(
    ("tool", "detail"),
    [
        ("exit", "exit failed: it called sys.exit(3)"),
        ("leave", "leave failed: Leaving: off I go"),
        ("close", "close failed: the tool closed or replaced sys.stdout; it was put back"),
        ("replace", "replace failed: the tool closed or replaced sys.stdout; it was put back"),
    ],
)
def test_a_tool_that_exits_raises_base_exceptions_or_closes_stdout_fails_only_its_call(
    scene: ContainmentScene, tool: str, detail: str
) -> None:
    done = scene.call(tool, "--registry", str(scene.registry), "--json")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    response = json.loads(done.stdout)["response"]  # the document still reached stdout
    assert (response["call_failed"], response["call_detail"]) == (True, detail)
    plain = scene.call(tool, "--registry", str(scene.registry))
    assert plain.returncode == 1
    assert f"error: {detail}" in plain.stderr  # without --json, why it failed


def test_a_keyboard_interrupt_raised_by_a_tool_in_a_worker_thread_is_its_failure(
    scene: ContainmentScene,
) -> None:
    """With a call timeout the tool runs in a worker thread, where no signal is delivered:
    its KeyboardInterrupt is the tool's own, not the user's Ctrl-C."""
    done = scene.call("interrupt", "--config", str(scene.config), "--json")
    assert done.returncode == 1, done.stderr
    response = json.loads(done.stdout)["response"]
    assert response["call_detail"] == (
        "interrupt failed: Interrupted: interrupt raised KeyboardInterrupt"
    )


def test_the_python_api_goes_on_after_a_tool_closed_stdout(scene: ContainmentScene) -> None:
    code = (
        "import json, sys; from mcs_host import load_drivers; "
        f"driver, _ = load_drivers(registries=[{str(scene.registry)!r}]); "
        "r = [driver.process_llm_response({'tool': t, 'arguments': {}}) for t in "
        "('close', 'exit', 'ping')]; "
        "print(json.dumps([(x.call_failed, x.tool_call_result) for x in r]))"
    )
    done = scene.venv.run("python", "-c", code, env={"MCS_HOST_STATE_DIR": str(scene.state)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[True, None], [True, None], [False, "pong"]]
