"""Isolated drivers forked by the host's fork server: a real pinned driver mounted four times
with ``isolation = "process"`` in a venv of its own. The children start side by side and mount
in the planned order; each is forked by the one fork server, shows in ``/proc`` what it runs
and its own mark, and holds no descriptor of the fork server or of another child; what is
planted where the fork server's imports look never runs; ``MCS_HOST_FORK_SERVER=0`` starts
each child alone; and a host killed with SIGKILL leaves neither the fork server nor a child."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from distbuild import Venv, build_wheel, uv_pip
from hostrun import driver_project, entry, pin, write_registry
from scenes import Scene

pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs

pytestmark = [
    pytest.mark.venv,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux's"),
]

PEEK_ID = "7c1f0000-0000-4000-8000-0000000000f5"
LABELS = ("d", "b", "a", "c")
PLANNED = tuple(sorted(LABELS))  # the order mounts are planned in

PEEK = """\
import os

from mcs_host import MCSToolDriver, Tool
from mcs_host.kit import manifest_meta


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [
            Tool(name="pid", description="Answer the process id."),
            Tool(name="parent", description="Answer the parent's command line."),
        ]

    def execute_tool(self, tool_name, arguments):
        if tool_name == "parent":
            with open(f"/proc/{os.getppid()}/cmdline", "rb") as file:
                return [w.decode() for w in file.read().split(b"\\0") if w]
        return os.getpid()
"""

PARENT = """\
import json, sys
from mcs_host import load_drivers

loaded = load_drivers(sys.argv[1])
stack, report = loaded
pids = {
    label: stack.process_llm_response({"tool": f"{label}__pid", "arguments": {}}).tool_call_result
    for label in sys.argv[2].split(",")
}
said = {
    "records": [[r.label, r.status, r.isolation] for r in report.records],
    "tools": [t.name for t in stack.list_tools()],
    "pids": pids,
}
print(json.dumps(said), flush=True)
sys.stdin.readline()  # the test looks at the processes meanwhile
loaded.close()
"""


@dataclass(frozen=True)
class ForkScene(Scene):
    """The venv with the peek driver, and the configuration that isolates it four times."""

    config: Path


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path) -> ForkScene:
    """A venv with ``mcs-host[mcp]`` and the peek driver, pinned, and a configuration that
    isolates it under four labels."""
    root = tmp_path_factory.mktemp("forkserver")
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host[mcp]", wheelhouse=wheelhouse, cache=uv_cache)
    peek = driver_project(
        "peek-driver",
        root / "imported.txt",
        PEEK_ID,
        label="peek",
        files={"peek_driver/__init__.py": PEEK},
    )
    wheel = build_wheel(peek.write(root / "src"), root / "wheels")
    uv_pip("install", "--no-index", "--no-deps", str(wheel), python=venv.python)
    drivers = {
        PEEK_ID: entry("peek-driver", "peek", "peek_driver:Driver", releases={"1.0.0": pin(wheel)})
    }
    registry = write_registry(root / "registry.json", drivers)
    mounts = "".join(
        f'[drivers.{label}]\ndriver = "peek"\nisolation = "process"\n\n' for label in LABELS
    )
    config = root / "mcs-host.toml"
    config.write_text(
        f'registries = ["{registry}"]\nnamespace = "always"\nautoload = false\n\n{mounts}'
    )
    return ForkScene(root=root, venv=venv, config=config)


def parent(scene: ForkScene, **env: str) -> subprocess.Popen[str]:
    """The parent script, started in the scene's venv: it has printed what it loaded once it
    returns."""
    venv = scene.venv
    script = scene.root / "parent.py"
    script.write_text(PARENT)
    environment = {**scene.environment(state=venv.path / "mcs-host-state"), **env}
    return subprocess.Popen(
        [str(venv.python), str(script), str(scene.config), ",".join(LABELS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        cwd=venv.path,
    )


@pytest.fixture
def running(scene: ForkScene) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any]]]:
    """The parent with its four children running, and what it said."""
    process = parent(scene)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        process.kill()
        pytest.fail(process.communicate()[1])
    try:
        yield process, json.loads(line)
    finally:
        process.communicate("\n", timeout=60)


def cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as file:
        return [w.decode() for w in file.read().split(b"\0") if w]


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as file:
        return int(file.read().rpartition(b")")[2].split()[1])


def mark_of(pid: int) -> str | None:
    with open(f"/proc/{pid}/environ", "rb") as file:
        for entry_ in file.read().split(b"\0"):
            if entry_.startswith(b"MCS_HOST_TREE="):
                return entry_.partition(b"=")[2].decode()
    return None


def descriptors(pid: int) -> dict[int, str]:
    """What each open descriptor of ``pid`` is (``pipe:[N]``, ``socket:[N]``, a path)."""
    found = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
    return found


def alive(marker: str, venv: Venv) -> list[int]:
    """The processes of this venv's interpreter whose command line has ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            words = cmdline(int(name))
        except OSError:
            continue
        if marker in words and any(w.startswith(str(venv.path)) for w in words):
            found.append(int(name))
    return found


def test_isolated_drivers_mount_in_the_planned_order_forked_by_one_fork_server(
    running: tuple[subprocess.Popen[str], dict[str, Any]],
) -> None:
    process, said = running
    assert said["records"] == [[label, "mounted", "process"] for label in PLANNED]
    assert said["tools"] == [f"{label}__{tool}" for label in PLANNED for tool in ("pid", "parent")]
    pids = said["pids"]
    assert len(set(pids.values())) == len(LABELS)
    servers = {parent_of(pid) for pid in pids.values()}
    assert len(servers) == 1
    (server,) = servers
    assert parent_of(server) == process.pid
    assert cmdline(server)[3:5] == ["mcs_host", "fork-server"]
    for label, pid in pids.items():
        assert cmdline(pid)[1:] == ["-I", "-m", "mcs_host", "serve", "--isolated", label]
    marks = [mark_of(pid) for pid in pids.values()]
    assert all(m is not None and re.fullmatch(r"[0-9a-f]{32}", m) for m in marks)
    assert len(set(marks)) == len(LABELS)
    assert mark_of(server) == "0" * 32  # the placeholder each child writes its own over


def test_an_isolated_driver_holds_no_descriptor_of_the_fork_server_or_another_driver(
    running: tuple[subprocess.Popen[str], dict[str, Any]],
) -> None:
    process, said = running
    pids = said["pids"]
    server = parent_of(next(iter(pids.values())))
    held = {label: set(descriptors(pid).values()) for label, pid in pids.items()}
    for label, pid in pids.items():  # its stdin and stdout, each held once
        own = [t for t in descriptors(pid).values() if t.startswith("pipe:")]
        assert len(own) == len(set(own)) == 2, (label, own)
    server_sockets = {t for t in descriptors(server).values() if t.startswith("socket:")}
    assert server_sockets  # its end of the host's socket, and one for each child
    host_pipes = {t for t in descriptors(process.pid).values() if t.startswith("pipe:")}
    for label, targets in held.items():
        assert not targets & server_sockets, label
        others = set().union(*(held[o] for o in held if o != label))
        pipes = {t for t in targets if t.startswith("pipe:")}
        assert pipes, label  # its own stdin and stdout
        assert not pipes & others, label
        assert pipes <= host_pipes, label  # only pipes the host holds the other end of


def test_without_the_fork_server_each_child_is_the_host_s_own(scene: ForkScene) -> None:
    process = parent(scene, MCS_HOST_FORK_SERVER="0")
    try:
        assert process.stdout is not None
        said = json.loads(process.stdout.readline())
        assert said["records"] == [[label, "mounted", "process"] for label in PLANNED]
        for label, pid in said["pids"].items():
            assert parent_of(pid) == process.pid
            assert cmdline(pid)[1:] == ["-I", "-m", "mcs_host", "serve", "--isolated", label]
        assert alive("fork-server", scene.venv) == []
    finally:
        process.communicate("\n", timeout=60)


def test_a_host_killed_with_sigkill_leaves_neither_its_fork_server_nor_a_child(
    scene: ForkScene,
) -> None:
    process = parent(scene)
    assert process.stdout is not None
    said = json.loads(process.stdout.readline())
    server = parent_of(next(iter(said["pids"].values())))
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    deadline = time.monotonic() + 15
    left = [server, *said["pids"].values()]
    while time.monotonic() < deadline:
        left = [pid for pid in left if os.path.exists(f"/proc/{pid}") and not _zombie(pid)]
        if not left:
            break
        time.sleep(0.2)
    assert left == []


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            return file.read().rpartition(b")")[2].split()[0] == b"Z"
    except OSError:
        return True


def test_what_is_planted_where_the_fork_server_imports_look_never_runs(
    scene: ForkScene, tmp_path: Path, wheelhouse: Path, uv_cache: Path
) -> None:
    from test_gate import PROBED

    marker = tmp_path / "planted-ran.txt"
    venv = Venv.create(tmp_path / "venv")
    venv.uv_install("mcs-host[mcp]", wheelhouse=wheelhouse, cache=uv_cache)
    wheel = next((scene.root / "wheels").glob("*.whl"))
    uv_pip("install", "--no-index", "--no-deps", str(wheel), python=venv.python)
    site = next(venv.path.glob("lib/python*/site-packages"))
    missing = venv.run(
        venv.python,
        "-c",
        "import importlib.util, json, sys\n"
        "print(json.dumps(sorted(n for n in sys.stdlib_module_names\n"
        "    if '.' not in n and importlib.util.find_spec(n) is None)))",
    )
    for name in {*json.loads(missing.stdout), *PROBED}:
        (site / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name + chr(10)!r})\n")
    control = venv.run(venv.python, "-c", "import nt")  # plain Python runs a plant
    assert control.returncode == 0, control.stderr
    assert marker.read_text() == "nt\n"
    marker.unlink()
    planted = Scene(tmp_path, venv)
    done = planted.host("call", "a__parent", "--config", scene.config, "--json", home=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    parent_line = json.loads(done.stdout)["response"]["tool_call_result"]
    assert parent_line[3:5] == ["mcs_host", "fork-server"]  # forked by it, not started alone
    assert not marker.exists(), marker.read_text()
