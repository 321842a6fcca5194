"""Drivers in a process of their own: a real, pinned driver whose tools crash, exit, hang,
eat memory and print on stdout, loaded with ``isolation = "process"`` next to the bundled
drivers. Each misdeed fails only its call; the next call starts a new process, other drivers
keep answering, restarts are bounded, and when the host ends no child process is left."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from distbuild import ROOT, Venv, build_wheel, uv_pip
from hostrun import driver_project, entry, pin, write_registry
from scenes import Scene

pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs

pytestmark = [
    pytest.mark.venv,
    pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="orphans are looked for in /proc"),
]

WILD_ID = "7c1f0000-0000-4000-8000-0000000000e1"

WILD = """\
import os
import signal
import sys
import time

from mcs_host import MCSToolDriver, Tool
from mcs_host.kit import manifest_meta

TOOLS = {
    "ok": "Answer fine.",
    "pid": "Answer the process id.",
    "shout": "Print on stdout, then answer.",
    "crash": "Die of SIGKILL, as a segfault would end it.",
    "quit": "Call sys.exit(3).",
    "hang": "Loop forever.",
    "hog": "Allocate memory until there is none.",
    "hoard": "Open files until no more may be opened.",
}


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [Tool(name=name, description=text) for name, text in TOOLS.items()]

    def execute_tool(self, tool_name, arguments):
        if tool_name == "pid":
            return os.getpid()
        if tool_name == "shout":
            print("a driver writing on the protocol's stream")
            sys.stdout.flush()
            os.write(1, b"and on descriptor 1 itself\\n")
        if tool_name == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if tool_name == "quit":
            sys.exit(3)
        if tool_name == "hang":
            while True:
                pass
        if tool_name == "hog":
            chunks = []
            while True:
                chunks.append(bytearray(64 * 2**20))
        if tool_name == "hoard":
            files = []
            try:
                while True:
                    files.append(open(os.devnull))
            except OSError as error:
                raise RuntimeError(f"{error.strerror} after {len(files)}") from None
            finally:
                for file in files:
                    file.close()
        return "fine"
"""

PARENT = """\
import json, sys
from mcs_host import load_drivers

with load_drivers(sys.argv[1]) as loaded:
    stack, report = loaded
    out = {
        "records": {
            r.label: [r.status, r.reason, r.message, r.isolation] for r in report.records
        },
        "calls": [],
    }
    for name, arguments in json.loads(sys.argv[2]):
        response = stack.process_llm_response({"tool": name, "arguments": arguments})
        out["calls"].append(
            [name, response.call_failed, response.call_detail, response.tool_call_result]
        )
    out["now"] = {r.label: [r.status, r.reason] for r in loaded.current_report().records}
print(json.dumps(out, default=str))
"""


@dataclass(frozen=True)
class IsolationScene(Scene):
    """The venv, the registry pinning the bundled drivers and the wild one, and the
    configuration that isolates them."""

    registry: Path
    config: Path


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> IsolationScene:
    """A venv with ``mcs-host[mcp]``, the bundled drivers and the wild driver, one registry
    pinning them all, and a configuration that isolates the wild driver twice (``wild``,
    and ``fragile`` with one restart) and the CSV driver."""
    root = tmp_path_factory.mktemp("isolation")
    venv = Venv.create(root / "venv")
    venv.uv_install(
        "mcs-host[mcp]", "mcs-host-csv", "mcs-host-files", wheelhouse=wheelhouse, cache=uv_cache
    )
    wild = driver_project(
        "wild-driver",
        root / "marker.txt",
        WILD_ID,
        label="wild",
        files={"wild_driver/__init__.py": WILD},
    )
    wheel = build_wheel(wild.write(root / "src"), root / "wheels")
    uv_pip("install", "--no-index", "--no-deps", str(wheel), python=venv.python)
    bundled = json.loads((ROOT / "registry.json").read_text())
    drivers = {
        **bundled["drivers"],
        WILD_ID: entry("wild-driver", "wild", "wild_driver:Driver", releases={"1.0.0": pin(wheel)}),
    }
    registry = write_registry(root / "registry.json", drivers, libraries=bundled["libraries"])
    data = root / "data"
    data.mkdir()
    (data / "sales.csv").write_text("month,units\nJan,61\nFeb,90\n")
    config = root / "mcs-host.toml"
    config.write_text(
        f'registries = ["{registry}"]\n'
        'namespace = "always"\n'
        "call_timeout = 5\n\n"
        "[drivers.wild]\n"
        'isolation = "process"\n'
        "limits = { memory_mb = 1024, open_files = 256 }\n\n"
        "[drivers.fragile]\n"
        'driver = "wild"\n'
        'isolation = "process"\n'
        "restarts = 1\n\n"
        "[drivers.capped]\n"
        'driver = "wild"\n'
        'isolation = "process"\n'
        "limits = { cpu_seconds = 3 }\n\n"
        f'[drivers.csv]\nisolation = "process"\nsettings = {{ root = "{data}" }}\n\n'
        f'[drivers.files]\nsettings = {{ root = "{data}" }}\n'
    )
    return IsolationScene(root=root, venv=venv, registry=registry, config=config)


def children(venv: Venv) -> list[tuple[int, str]]:
    """The isolated children of this venv's interpreter still alive: (pid, command line)."""
    found = []
    for entry_ in os.scandir("/proc"):
        if not entry_.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry_.name}/cmdline", "rb") as file:
                argv = file.read().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv if a]
        if "--isolated" in words and any(w.startswith(str(venv.path)) for w in words):
            found.append((int(entry_.name), " ".join(words)))
    return found


def run_parent(scene: IsolationScene, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    venv = scene.venv
    script = scene.root / "parent.py"
    script.write_text(PARENT)
    done = venv.run(
        venv.python,
        script,
        scene.config,
        json.dumps(calls),
        env={"HOME": str(scene.root)},
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_each_misdeed_fails_only_its_call_and_the_next_call_gets_a_new_process(
    scene: IsolationScene,
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("wild__pid", {}),
        ("wild__shout", {}),
        ("wild__crash", {}),
        ("wild__pid", {}),
        ("csv__read_csv_head", {"file": "sales.csv"}),
        ("wild__quit", {}),
        ("wild__ok", {}),
        ("wild__hang", {}),
        ("wild__pid", {}),
        ("files__list_directory", {"path": "."}),
        ("wild__hog", {}),
        ("wild__ok", {}),
        ("wild__hoard", {}),
        ("wild__ok", {}),
    ]
    out = run_parent(scene, calls)
    records = out["records"]
    for label in ("wild", "fragile", "csv"):
        assert records[label][0] == "mounted", records[label]
        assert records[label][3] == "process"
    assert records["files"][0] == "mounted"
    assert records["files"][3] is None  # in the host's own process
    results = [(name, failed, detail, result) for name, failed, detail, result in out["calls"]]

    first_pid = results[0][3]
    assert isinstance(first_pid, int)
    assert first_pid != os.getpid()
    assert (results[1][1], results[1][3]) == (False, "fine")  # its prints did no harm

    _, failed, detail, _ = results[2]  # SIGKILL mid-call
    assert failed
    assert "the isolated driver 'wild' failed during 'crash': its process ended" in detail
    second_pid = results[3][3]
    assert isinstance(second_pid, int)
    assert second_pid != first_pid  # started again
    assert not results[4][1]  # another isolated driver went on
    assert results[4][3]["columns"] == ["month", "units"]

    assert results[5][1]
    assert "it called sys.exit(3)" in results[5][2]
    assert results[6][3] == "fine"

    _, failed, detail, _ = results[7]  # a call that never returns
    assert failed
    assert "within 5 s" in detail
    third_pid = results[8][3]
    assert isinstance(third_pid, int)
    assert third_pid != second_pid
    assert not results[9][1]  # the in-process driver too

    assert results[10][1]  # past its memory limit
    assert "MemoryError" in results[10][2]
    assert results[11][3] == "fine"

    assert results[12][1]  # past its open files limit (256, far below the default)
    opened = int(results[12][2].rsplit("Too many open files after ", 1)[1])
    assert 200 < opened < 256
    assert results[13][3] == "fine"

    assert children(scene.venv) == []  # nothing left once the host closed them


def test_restarts_are_bounded_then_the_driver_says_it_failed(scene: IsolationScene) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("fragile__crash", {}),
        ("fragile__crash", {}),
        ("fragile__ok", {}),
        ("wild__ok", {}),
    ]
    out = run_parent(scene, calls)
    first, second, third, other = out["calls"]
    assert first[1]
    assert second[1]
    assert third[1]
    assert "the isolated driver 'fragile' failed 2 times in a row" in third[2]
    assert "it is not started again" in third[2]
    assert other[3] == "fine"  # the same driver, mounted again, is unaffected
    assert out["now"]["fragile"] == ["failed", "restarts-exhausted"]  # the report as it stands
    assert out["now"]["wild"] == ["mounted", "mounted"]
    assert out["records"]["fragile"][0] == "mounted"  # the report of the load itself
    assert children(scene.venv) == []


def test_a_cpu_limit_ends_a_spinning_process_before_the_call_timeout(
    scene: IsolationScene, tmp_path: Path
) -> None:
    # the call may take a minute of wall-clock time, twenty times the CPU budget (3 s): on a
    # loaded machine the spinning process gets its CPU seconds slowly, and the CPU limit must
    # still be what ends it. The message says which: nothing else ends a spinning process
    # here, and the call timeout would say that it did not answer within 60 s
    config = tmp_path / "mcs-host.toml"
    text = scene.config.read_text()
    assert "call_timeout = 5\n" in text
    config.write_text(text.replace("call_timeout = 5\n", "call_timeout = 60\n"))
    out = run_parent(replace(scene, config=config), [("capped__hang", {}), ("capped__ok", {})])
    (_, failed, detail, _), (_, again, _, result) = out["calls"]
    assert failed
    assert "the isolated driver 'capped' failed during 'hang': its process ended" in detail
    assert "did not answer" not in detail
    assert (again, result) == (False, "fine")  # a new process, with a new CPU budget
    assert children(scene.venv) == []


def test_a_killed_host_leaves_no_child_behind(scene: IsolationScene) -> None:
    # the host is SIGKILLed while its isolated driver is stuck in a call: the child hears
    # of its parent's death (Linux) or of stdin's end, and ends within the grace period
    venv = scene.venv
    script = scene.root / "killed.py"
    script.write_text(
        "import sys\n"
        "from mcs_host import load_drivers\n"
        "stack, report = load_drivers(sys.argv[1], ['wild'])\n"
        "print('loaded', flush=True)\n"
        "stack.process_llm_response({'tool': 'wild__hang', 'arguments': {}})\n"
    )
    process = subprocess.Popen(
        [str(venv.python), str(script), str(scene.config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=scene.environment(state=venv.path / "mcs-host-state"),
        cwd=venv.path,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "loaded"
    time.sleep(1)  # the call is under way
    assert children(venv)
    process.kill()
    process.wait(30)
    process.stdout.close()
    deadline = time.monotonic() + 15
    while children(venv) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert children(venv) == []


def test_the_command_line_isolates_with_isolate(scene: IsolationScene) -> None:
    arguments = json.dumps({"file": "sales.csv", "column": "units"})
    config = scene.config
    done = scene.host(
        "call", "csv__summarize_column", "--args", arguments, "--config", config,
        "--isolate", "--json", home=scene.root,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    mounts = {m["label"]: m for m in document["load"]["drivers"]}
    assert mounts["files"]["isolation"] == "process"  # --isolate: every installed driver
    assert document["response"]["tool_call_result"]["sum"] == 151.0
    loaded = scene.host("load", "--config", config, "--isolate", home=scene.root)
    assert "files: isolated: runs in a process of its own" in loaded.stdout
    assert children(scene.venv) == []


def test_a_driver_the_child_refuses_fails_its_mount_with_the_childs_reason(
    scene: IsolationScene, tmp_path: Path
) -> None:
    # the parent cannot see that a setting is wrong (it imports nothing): the child's load
    # fails, and the parent's record repeats what the child said
    config = tmp_path / "mcs-host.toml"
    config.write_text(
        f'registries = ["{scene.registry}"]\n[drivers.wild]\nisolation = "process"\n'
        "[drivers.wild.settings]\nnot_a_setting = 1\n"
    )
    done = scene.host("load", "wild", "--config", config, home=tmp_path)
    assert done.returncode == 1  # the label asked for did not mount
    line = next(x for x in done.stdout.splitlines() if x.startswith("wild:"))
    assert "isolated-start" in line
    assert "constructor raised TypeError" in line
    assert children(scene.venv) == []


def test_verify_live_starts_each_driver_in_its_own_process_and_reports_it(
    scene: IsolationScene, tmp_path: Path
) -> None:
    done = scene.host(
        "verify", "wild", "files", "--config", scene.config, "--live", "--json",
        home=scene.root,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    live = {d["label"]: d["live"] for d in json.loads(done.stdout)["drivers"]}
    assert live["wild"]["ok"]
    assert "pid" in live["wild"]["tools"]
    assert live["wild"]["health"] is None  # it declares no healthcheck
    assert live["files"]["ok"]
    assert live["files"]["health"]["status"] == "OK"  # the files driver declares one
    bad = tmp_path / "mcs-host.toml"
    bad.write_text(f'registries = ["{scene.registry}"]\n')  # csv without its root
    done = scene.host("verify", "csv", "--config", bad, "--live", home=scene.root)
    assert done.returncode == 1
    failed = "csv: live: FAILED: isolated-start: cannot start the isolated driver 'csv'"
    assert failed in done.stdout
    assert "missing 1 required positional argument: 'root'" in done.stdout
    assert "0 of 1 started in a process of their own (--live)." in done.stdout
    assert "or --set <label>.<key>=<value>" in done.stdout  # the way out it names
    root = tmp_path / "data"
    root.mkdir()
    done = scene.host(
        "verify", "csv", "--config", bad, "--live", "--set", f"csv.root={root}",
        home=scene.root,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 of 1 started in a process of their own (--live)." in done.stdout
    assert children(scene.venv) == []


def test_serve_isolate_serves_each_driver_from_its_own_process_and_leaves_none(
    scene: IsolationScene,
) -> None:
    import anyio
    from mcp import Client, StdioServerParameters

    venv = scene.venv
    server = StdioServerParameters(
        command=str(venv.bin / "mcs-host"),
        args=["serve", "--config", str(scene.config), "--isolate"],
        env=scene.environment(state=venv.path / "mcs-host-state"),
        cwd=str(scene.root),
    )
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with Client(server, read_timeout_seconds=60) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            seen["names"] = names
            seen["crash"] = await client.call_tool("wild__crash", {})
            seen["pid"] = await client.call_tool("wild__pid", {})
            seen["csv"] = await client.call_tool("csv__read_csv_head", {"file": "sales.csv"})
            seen["children"] = children(venv)

    anyio.run(main)
    assert {"wild__ok", "files__stat", "csv__read_csv_head"} <= seen["names"]
    assert seen["crash"].is_error  # the driver's process died; the server did not
    assert "its process ended" in seen["crash"].content[0].text
    assert not seen["pid"].is_error
    assert seen["csv"].structured_content["columns"] == ["month", "units"]
    assert len(seen["children"]) == 5  # wild, fragile, capped, csv and files: one each
    deadline = time.monotonic() + 15
    while children(venv) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert children(venv) == []


def test_an_isolated_driver_s_process_mounts_nothing_else(
    scene: IsolationScene, tmp_path: Path
) -> None:
    # the configuration declares an MCP server besides the drivers: the host starts it once,
    # and no isolated driver's process starts it again
    marker = tmp_path / "started.txt"
    config = tmp_path / "mcs-host.toml"
    config.write_text(
        scene.config.read_text()
        + "\n[trust]\nallow_unverified = true\n"
        + f'[mcp_servers.echo]\ncommand = ["sh", "-c", "echo started >> {marker}"]\n'
    )
    done = scene.host("load", "--config", config, home=scene.root)
    assert "wild: isolated: runs in a process of its own" in done.stdout
    assert marker.read_text().splitlines() == ["started"]
    assert children(scene.venv) == []


def test_a_registry_entry_that_requires_isolation_wins_over_the_configuration(
    scene: IsolationScene, tmp_path: Path
) -> None:
    document = json.loads(scene.registry.read_text())
    document["drivers"][WILD_ID]["isolation"] = "process"
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps(document))
    config = tmp_path / "mcs-host.toml"
    config.write_text(f'registries = ["{registry}"]\n[drivers.wild]\nisolation = "none"\n')
    done = scene.host("load", "wild", "--config", config, "--json", home=scene.root)
    assert done.returncode == 0, done.stdout + done.stderr
    (mount,) = [m for m in json.loads(done.stdout)["drivers"] if m["label"] == "wild"]
    assert (mount["status"], mount["isolation"]) == ("mounted", "process")
    assert children(scene.venv) == []
