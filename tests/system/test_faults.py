"""How an isolated driver's process fails, and what the call says of it: a real, pinned driver
whose tools return 50 MB, flood the link, abort, segfault, exit, spin past their CPU limit,
run out of memory in native code and hang while ignoring SIGTERM, mounted with ``isolation =
"process"``. Each failure names its cause, the next call works, a big result is refused in
its process (never sent, never a crash) and a result under the bound arrives intact, and a
timed-out call leaves no process of its child behind, not even a grandchild that left the
process group."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from distbuild import ROOT, Venv, build_wheel, uv_pip
from hostrun import driver_project, entry, pin, write_registry
from scenes import Scene

pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs

pytestmark = [
    pytest.mark.venv,
    pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="processes are looked for in /proc"),
]

FAULTY_ID = "7c1f0000-0000-4000-8000-0000000000f2"
GRANDCHILD = "mcs-faults-grandchild"
"""In the command line of the process the hanging tool starts (its grandchild)."""

FAULTY = r'''
import ctypes
import hashlib
import os
import signal
import subprocess
import sys
import time

from mcs_host import MCSToolDriver, Tool, ToolParameter
from mcs_host.kit import manifest_meta, report_progress

GRANDCHILD = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(10**6)
"""


def text(mb):
    """``mb`` MiB of lines that JSON must escape (quotes, tabs, newlines, non-ASCII)."""
    size = int(mb * 2**20)
    lines = [f'line {i:07d}: "quoted" \t é ✓\n' for i in range(size // 24 + 1)]
    return "".join(lines)[:size]


def number(name):
    return ToolParameter(name=name, description=name, required=True, schema={"type": "number"})


TOOLS = {
    "ok": [],
    "blob": [number("mb")],
    "flood": [],
    "abort": [],
    "segv": [],
    "exit0": [],
    "spin": [],
    "oom": [],
    "stuck": [ToolParameter(name="path", description="path", required=True)],
}


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [Tool(name=n, description=n, parameters=p) for n, p in TOOLS.items()]

    def execute_tool(self, tool_name, arguments):
        if tool_name == "blob":
            data = text(arguments["mb"])
            return {"data": data, "sha256": hashlib.sha256(data.encode()).hexdigest()}
        if tool_name == "flood":  # a message past what the parent reads, not a result
            report_progress(1, 2, "x" * (30 * 2**20))
            time.sleep(600)
        if tool_name == "abort":
            os.abort()
        if tool_name == "segv":
            ctypes.string_at(0)
        if tool_name == "exit0":
            os._exit(0)
        if tool_name == "spin":
            while True:
                pass
        if tool_name == "oom":  # native code aborts when an allocation fails
            import pydantic_core

            pydantic_core.to_json(["x" * 2**20] * 8192)
        if tool_name == "stuck":
            libc = ctypes.CDLL(None)
            libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
            libc.signal(signal.SIGTERM, 1)  # SIG_IGN, for the whole process
            grandchild = subprocess.Popen(
                [sys.executable, "-c", GRANDCHILD, "mcs-faults-grandchild"],
                start_new_session=True,  # it leaves the process group
            )
            with open(arguments["path"], "w") as file:
                file.write(f"{os.getpid()} {grandchild.pid}\n")
            while True:
                time.sleep(1)
        return "fine"
'''

PARENT = """\
import hashlib, json, sys
from mcs_host import load_drivers

with load_drivers(sys.argv[1]) as loaded:
    calls = []
    for name, arguments in json.loads(sys.argv[2]):
        response = loaded.driver.process_llm_response({"tool": name, "arguments": arguments})
        result = response.tool_call_result
        if isinstance(result, dict) and "data" in result:
            data = result["data"].encode()
            result = {"sha256": hashlib.sha256(data).hexdigest(), "said": result["sha256"]}
        calls.append([response.call_failed, response.call_detail, result])
print(json.dumps(calls))
"""


def running(pid: int, marker: str) -> bool:
    """Whether ``pid`` is alive, is that process (its command line holds ``marker``) and is
    not being killed (no SIGKILL pending)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            cmdline = file.read()
        with open(f"/proc/{pid}/status") as file:
            status = dict(line.split(":", 1) for line in file if ":" in line)
    except OSError:
        return False
    if marker.encode() not in cmdline or status["State"].strip().startswith(("Z", "X")):
        return False  # gone, a zombie, or another process
    pending = int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)
    return not pending & (1 << (signal.SIGKILL - 1))


STUCK = (
    "import signal\n"
    + inspect.getsource(running)
    + """
import json, sys
from pathlib import Path
from mcs_host import load_drivers

config, path = sys.argv[1], sys.argv[2]
with load_drivers(config) as loaded:
    response = loaded.driver.process_llm_response({"tool": "stuck", "arguments": {"path": path}})
    child, grandchild = (int(pid) for pid in Path(path).read_text().split())
    # right after the call returned
    alive = [running(child, "--isolated"), running(grandchild, "mcs-faults-grandchild")]
    again = loaded.driver.process_llm_response({"tool": "ok", "arguments": {}})
print(json.dumps([response.call_detail, alive, again.tool_call_result]))
"""
)


@dataclass(frozen=True)
class FaultScene(Scene):
    """The venv with the faulty driver, ``config`` that mounts it isolated three times and
    ``stuck`` that mounts it with a call timeout of 2 s."""

    config: Path
    stuck: Path


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path) -> FaultScene:
    """A venv with ``mcs-host[mcp]`` and the faulty driver, pinned, and a configuration that
    mounts it isolated four times: as it is (``faulty``), with a CPU limit (``spinner``),
    with a memory limit (``glutton``); and one (``stuck``) with a call timeout of 2 s."""
    root = tmp_path_factory.mktemp("faults")
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host[mcp]", wheelhouse=wheelhouse, cache=uv_cache)
    faulty = driver_project(
        "faulty-driver",
        root / "marker.txt",
        FAULTY_ID,
        label="faulty",
        files={"faulty_driver/__init__.py": FAULTY},
    )
    wheel = build_wheel(faulty.write(root / "src"), root / "wheels")
    uv_pip("install", "--no-index", "--no-deps", str(wheel), python=venv.python)
    bundled = json.loads((ROOT / "registry.json").read_text())
    drivers = {
        FAULTY_ID: entry("faulty-driver", "faulty", "faulty_driver:Driver", releases={
            "1.0.0": pin(wheel)
        })
    }  # fmt: skip
    registry = write_registry(root / "registry.json", drivers, libraries=bundled["libraries"])
    config = root / "mcs-host.toml"
    config.write_text(
        f'registries = ["{registry}"]\n'
        'namespace = "always"\n'
        "call_timeout = 120\n\n"
        '[drivers.faulty]\nisolation = "process"\nrestarts = 10\n\n'
        '[drivers.spinner]\ndriver = "faulty"\nisolation = "process"\n'
        "limits = { cpu_seconds = 1 }\n\n"
        '[drivers.glutton]\ndriver = "faulty"\nisolation = "process"\n'
        "limits = { memory_mb = 1024 }\n"
    )
    stuck = root / "stuck.toml"
    stuck.write_text(
        f'registries = ["{registry}"]\nautoload = false\ncall_timeout = 2\n\n'
        '[drivers.stuck]\ndriver = "faulty"\nisolation = "process"\n'
    )
    return FaultScene(root=root, venv=venv, config=config, stuck=stuck)


def run_parent(scene: FaultScene, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    venv = scene.venv
    script = scene.root / "parent.py"
    script.write_text(PARENT)
    done = venv.run(venv.python, script, scene.config, json.dumps(calls), env=home(scene))
    assert done.returncode == 0, done.stderr
    out: list[Any] = json.loads(done.stdout)
    return out


def home(scene: FaultScene) -> dict[str, str]:
    return {"HOME": str(scene.root)}


def expected_sha256(mb: float) -> str:
    """What the driver's ``blob`` sends for ``mb`` MiB, computed here."""
    size = int(mb * 2**20)
    lines = [f'line {i:07d}: "quoted" \t é ✓\n' for i in range(size // 24 + 1)]
    return hashlib.sha256("".join(lines)[:size].encode()).hexdigest()


def test_a_big_result_fails_in_its_process_naming_the_bound_and_a_smaller_one_arrives_whole(
    scene: FaultScene,
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("faulty__blob", {"mb": 50}),
        ("faulty__ok", {}),
        ("faulty__blob", {"mb": 5}),
        ("faulty__flood", {}),
        ("faulty__ok", {}),
    ]
    big, ok, whole, flood, again = run_parent(scene, calls)
    assert big[0]  # refused in the child, before it was sent: not a crash
    bound = r"more than max_result_mb = 16 of driver 'faulty'"
    # 50 MiB of text is more as JSON: its quotes, tabs and newlines are escaped
    assert re.search(rf"the result of 'blob' is 6\d\.\d MB, {bound}", big[1]), big[1]
    assert "its process ended" not in big[1]
    assert ok == [False, None, "fine"]  # the same process went on
    assert not whole[0], whole[1]
    assert whole[2]["sha256"] == whole[2]["said"] == expected_sha256(5)
    # a message longer than the parent reads (a progress report, not a result) ends the child
    assert flood[0]
    assert "its process sent a message of more than 19 MB, past max_result_mb = 16" in flood[1]
    assert again == [False, None, "fine"]


@pytest.mark.parametrize(
    ("tool", "cause"),
    [
        ("faulty__abort", "its process ended (killed by SIGABRT)"),
        ("faulty__segv", "its process ended (killed by SIGSEGV)"),
        ("faulty__exit0", "its process ended (exited with status 0 during the call)"),
        ("spinner__spin", "its process ended (the CPU limit, cpu_seconds = 1: killed by SIG"),
        ("glutton__oom", "its process ended (the memory limit, memory_mb = 1024: killed by "),
    ],
)
def test_each_end_of_a_process_is_named_and_the_next_call_works(
    scene: FaultScene, tool: str, cause: str
) -> None:
    label = tool.split("__", maxsplit=1)[0]
    (failed, detail, _), again = run_parent(scene, [(tool, {}), (f"{label}__ok", {})])
    assert failed
    assert f"the isolated driver {label!r} failed during {tool.split('__')[1]!r}: " in detail
    assert cause in detail, detail
    assert again == [False, None, "fine"]


def test_an_allocation_that_fails_in_native_code_is_told_by_what_the_process_said(
    scene: FaultScene,
) -> None:
    ((failed, detail, _),) = run_parent(scene, [("glutton__oom", {})])
    assert failed
    assert "; it said: memory allocation of " in detail  # Rust's words, as it aborted


def test_a_timed_out_call_leaves_no_process_of_its_child_not_even_a_grandchild(
    scene: FaultScene, tmp_path: Path
) -> None:
    venv = scene.venv
    script = tmp_path / "stuck.py"
    script.write_text(STUCK)
    pids = tmp_path / "pids.txt"
    done = venv.run(venv.python, script, scene.stuck, pids, env=home(scene))
    assert done.returncode == 0, done.stderr
    detail, alive, again = json.loads(done.stdout)
    assert "did not answer 'stuck' within 2 s; its process is ended" in detail
    assert alive == [False, False]  # both ended before the call returned, SIGTERM ignored
    assert again == "fine"  # a new process


def test_mcs_host_call_has_ended_the_child_and_its_grandchild_when_it_answers(
    scene: FaultScene, tmp_path: Path
) -> None:
    venv = scene.venv
    pids = tmp_path / "pids.txt"
    # not Scene.start: in the venv's directory, with the venv's state directory, and only
    # its stdout is read
    process = subprocess.Popen(
        [
            str(venv.bin / "mcs-host"), "call", "stuck", "--args", json.dumps({"path": str(pids)}),
            "--config", str(scene.stuck), "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=scene.environment(state=venv.path / "mcs-host-state"),
        cwd=venv.path,
    )  # fmt: skip
    assert process.stdout is not None
    first = process.stdout.readline()  # the document is written as the call has returned
    child, grandchild = (int(pid) for pid in pids.read_text().split())
    # as it answers, nothing of the stuck child is left to wait for at its exit
    assert first.startswith("{")
    assert not running(child, "--isolated")
    assert not running(grandchild, GRANDCHILD)
    document = json.loads(first + process.stdout.read())
    assert process.wait(120) == 1
    process.stdout.close()
    assert "did not answer 'stuck' within 2 s" in document["response"]["call_detail"]
    assert not running(child, "--isolated")
    assert not running(grandchild, GRANDCHILD)


def test_signal_names_are_what_the_messages_say() -> None:
    from mcs_host.bridge._stdio import signal_name

    assert signal_name(signal.SIGSEGV) == "SIGSEGV"
    assert signal_name(signal.SIGABRT) == "SIGABRT"
    assert signal_name(250) == "signal 250"


def test_a_parent_host_gets_a_result_once_and_any_other_client_as_the_spec_asks() -> None:
    import anyio
    from mcp import Client

    from mcs_host import DriverMeta, MCSToolDriver, Orchestrator, Tool
    from mcs_host.bridge._shapes import LINK_KEY, as_result
    from mcs_host.bridge.server import mcp_server

    class Answers(MCSToolDriver):
        meta = DriverMeta(id="answers", name="answers", version="1.0.0")

        def list_tools(self) -> list[Tool]:
            return [Tool(name=n, description=n) for n in ("table", "numbers", "words")]

        def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
            values = {"table": {"rows": ['é\t"x"'] * 1000}, "numbers": [1, 2.5, None]}
            return values.get(tool_name, "plain words")

    parent: Any = {LINK_KEY: {"max_result_mb": 16, "label": "answers"}}
    tight: Any = {LINK_KEY: {"max_result_mb": 0.001, "label": "answers"}}

    async def main() -> dict[tuple[str, str], Any]:
        async with Client(mcp_server(Orchestrator({"answers": Answers()}))) as client:
            return {
                (name, kind): await client.call_tool(name, {}, meta=meta)
                for name in ("table", "numbers", "words")
                for kind, meta in (("client", None), ("parent", parent), ("tight", tight))
            }

    got = anyio.run(main)
    table = {"rows": ['é\t"x"'] * 1000}
    # a client that did not ask: the JSON as text, and structured content (MCP's SHOULD)
    assert json.loads(got["table", "client"].content[0].text) == table
    assert got["table", "client"].structured_content == table
    assert got["numbers", "client"].structured_content == {"result": [1, 2.5, None]}
    assert got["words", "client"].content[0].text == "plain words"
    # a parent host: once, and what it reads back is the tool's result
    assert got["table", "parent"].content == []
    assert got["numbers", "parent"].content == []
    assert got["words", "parent"].structured_content is None
    for name, value in (("table", table), ("numbers", [1, 2.5, None]), ("words", "plain words")):
        assert as_result(name, got[name, "parent"]) == value
    # past its bound: not sent, and the call says why
    assert got["table", "tight"].is_error
    text = got["table", "tight"].content[0].text
    bound = r"more than max_result_mb = 0\.001 of driver 'answers'"
    assert re.fullmatch(rf"the result of 'table' is 0\.0\d+ MB, {bound}", text), text
    assert not got["words", "tight"].is_error  # 13 bytes
