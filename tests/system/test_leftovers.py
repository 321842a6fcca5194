"""A failed call leaves nothing behind: what a tool held when it raised (its frames' objects,
the files it opened) is released when the call's response is built, not when the cyclic
garbage collector happens to run. With the collector off, each test tracks what the tool
took with weak references, through every entry point, sync and async, in process and in a
process of its own, and through a stack mounted in another (where ``execute_tool`` raises
the tool's error to the outer orchestrator)."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import traceback
import weakref
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from distbuild import Venv, build_wheel, uv_pip
from hostrun import driver_project, entry, pin, write_registry
from scenes import Scene

from mcs_host import (
    DriverMeta,
    DriverResponse,
    Host,
    HostConfig,
    MCSToolDriver,
    Orchestrator,
    Runner,
    Tool,
    ToolCall,
    hookimpl,
)

# a file a tool leaves open is closed when its object is released, with a ResourceWarning
pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


class Hoard:
    """What a tool builds: something large, tracked by a weak reference."""

    __slots__ = ("__weakref__", "data")

    def __init__(self) -> None:
        self.data = bytearray(4 * 2**20)


class Taking:
    """What the tools took: weak references to their large objects and open files."""

    def __init__(self) -> None:
        self.taken: list[weakref.ref[Any]] = []

    def take(self) -> tuple[Hoard, Any]:
        hoard, handle = Hoard(), open(os.devnull, "rb")  # noqa: SIM115 - left open on purpose
        self.taken += [weakref.ref(hoard), weakref.ref(handle)]
        return hoard, handle

    def alive(self) -> list[Any]:
        return [found for found in (ref() for ref in self.taken) if found is not None]


def fail(taking: Taking, tool_name: str) -> None:
    """Take, then fail as ``tool_name`` says, the objects held by the failing frames."""
    _hoard, _handle = taking.take()  # held by this frame, which the traceback holds
    if tool_name == "plain":
        raise ValueError("the record is broken")
    if tool_name == "nested":
        deeper(taking, 3)
    if tool_name == "starve":
        raise MemoryError
    if tool_name == "caught":  # the tool keeps its own exception in a local: a cycle of its own
        try:
            raise KeyError("missing")
        except KeyError as error:
            kept = error
        raise LookupError(f"no luck: {kept}")
    raise AssertionError(tool_name)


def deeper(taking: Taking, depth: int) -> None:
    _hoard, _handle = taking.take()  # each frame of the traceback holds its own
    if depth == 0:
        raise RuntimeError("deep down")
    deeper(taking, depth - 1)


TOOLS = ("plain", "nested", "starve", "caught")
DETAILS = {
    "plain": "plain failed: ValueError: the record is broken",
    "nested": "nested failed: RuntimeError: deep down",
    "starve": "starve failed: MemoryError",
    "caught": "caught failed: LookupError: no luck: 'missing'",
}
META = DriverMeta(id="leaky-0001", name="leaky", version="1.0.0")


def type_of(tool: str) -> str:
    """The type of the error the tool raises."""
    return DETAILS[tool].split(": ")[1]


class Leaky(MCSToolDriver):
    meta = META

    def __init__(self) -> None:
        self.taking = Taking()

    def list_tools(self) -> list[Tool]:
        return [Tool(name=name, description="Take, then fail.") for name in TOOLS]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        fail(self.taking, tool_name)


class AsyncLeaky(MCSToolDriver):
    meta = META

    def __init__(self) -> None:
        self.taking = Taking()

    def list_tools(self) -> list[Tool]:
        return [Tool(name=name, description="Take, then fail.") for name in TOOLS]

    async def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        _hoard, _handle = self.taking.take()  # held by the coroutine's frame too
        await asyncio.sleep(0)
        fail(self.taking, tool_name)


DRIVERS: dict[str, Callable[[], Any]] = {
    "sync": lambda: (Leaky(), None),
    "sync-bounded": lambda: (Leaky(), 30.0),  # call_timeout: the tool runs in a worker thread
    "async": lambda: (AsyncLeaky(), None),
}
ENTRIES = (
    "process_llm_response",
    "execute",
    "aprocess_llm_response",
    "aexecute",
    "stacked",
    "astacked",
    "stacked-bounded",
    "astacked-bounded",
)


def answer(entry: str, stack: Orchestrator, output: str) -> DriverResponse:
    """The response of ``stack`` (or of an orchestrator stacking it) to ``output``."""
    if entry.startswith(("stacked", "astacked")):
        timeout = 30.0 if entry.endswith("-bounded") else None
        outer = Orchestrator({"inner": stack}, call_timeout=timeout)
        return answer(
            "aprocess_llm_response" if entry[0] == "a" else "process_llm_response", outer, output
        )
    if entry == "process_llm_response":
        return stack.process_llm_response(output)
    if entry == "execute":
        return stack.execute(stack.detect(output))
    if entry == "aprocess_llm_response":
        return asyncio.run(stack.aprocess_llm_response(output))
    return asyncio.run(stack.aexecute(stack.detect(output)))


@pytest.fixture
def no_collector() -> Iterator[None]:
    """The cyclic garbage collector off: only what is no longer referenced is released."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.usefixtures("no_collector")
@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("driver", list(DRIVERS))
@pytest.mark.parametrize("entry", ENTRIES)
def test_a_failed_call_releases_what_its_tool_took_when_the_response_is_built(
    entry: str, driver: str, tool: str
) -> None:
    leaky, timeout = DRIVERS[driver]()
    told: list[tuple[str, str | None]] = []

    def audit(call: ToolCall, result: Any, error: BaseException | None) -> None:
        told.append((call.name, None if error is None else type(error).__name__))

    stack = Orchestrator({"leaky": leaky}, call_timeout=timeout, audit=audit)
    response = answer(entry, stack, json.dumps({"tool": tool, "arguments": {}}))
    assert response.call_failed
    assert response.call_detail == DETAILS[tool]
    assert leaky.taking.taken  # the tool ran and took
    assert leaky.taking.alive() == []
    assert told == [(tool, type_of(tool))]  # the audit was told of the error, as before


@pytest.mark.usefixtures("no_collector")
@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("driver", list(DRIVERS))
@pytest.mark.parametrize("asynchronous", [False, True], ids=["execute_tool", "aexecute_tool"])
def test_execute_tool_raises_the_tools_error_holding_nothing_of_what_the_tool_took(
    asynchronous: bool, driver: str, tool: str
) -> None:
    leaky, timeout = DRIVERS[driver]()
    stack = Orchestrator({"inner": Orchestrator({"leaky": leaky}, call_timeout=timeout)})

    def seen(error: BaseException) -> tuple[str, str, bool]:
        """The error's type, its traceback as text, and whether what the tool took is gone
        while the caller holds the error."""
        formatted = "".join(traceback.format_exception(error))
        return type(error).__name__, formatted, leaky.taking.alive() == []

    async def araised() -> tuple[str, str, bool]:
        # caught in the task, not returned from it: asyncio.run's frames (which the frames
        # of a coroutine refer to, on 3.12) hold the task, which would hold the error
        try:
            await stack.aexecute_tool(tool, {})
        except Exception as exc:  # each tool raises its own
            return seen(exc)
        raise AssertionError("no error")

    if asynchronous:
        name, formatted, gone = asyncio.run(araised())
    else:
        try:
            stack.execute_tool(tool, {})
        except Exception as exc:  # each tool raises its own
            name, formatted, gone = seen(exc)
    assert name == type_of(tool)  # the tool's own, as it raised it
    assert "in fail" in formatted  # its traceback still says where it was raised
    assert gone or driver == "async"  # a sync tool's frames hold nothing while it is held
    assert leaky.taking.alive() == []  # once the caller let go of the error


@pytest.mark.usefixtures("no_collector")
@pytest.mark.parametrize("driver", ["sync", "sync-bounded"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["execute", "aprocess"])
def test_an_audit_that_keeps_the_error_keeps_nothing_a_sync_tool_took(
    asynchronous: bool, driver: str
) -> None:
    """Once the audit has seen the error, the finished frames of its traceback are cleared:
    what they held goes even when the error is kept. (An async tool's own frames are a
    coroutine's, which are left as they are: what they hold goes with the error.)"""
    leaky, timeout = DRIVERS[driver]()
    kept: list[BaseException | None] = []
    stack = Orchestrator(
        {"leaky": leaky},
        call_timeout=timeout,
        audit=lambda call, result, error: kept.append(error),
    )
    output = json.dumps({"tool": "nested", "arguments": {}})
    response = answer("aprocess_llm_response" if asynchronous else "execute", stack, output)
    assert response.call_failed
    (error,) = kept
    assert isinstance(error, RuntimeError)
    assert "in deeper" in "".join(traceback.format_exception(error))  # printable as before
    assert leaky.taking.alive() == []


@pytest.mark.usefixtures("no_collector")
def test_the_next_call_in_the_same_response_runs_with_what_the_first_one_took_released() -> None:
    seen: list[int] = []

    class Counting(Leaky):
        def list_tools(self) -> list[Tool]:
            return [*super().list_tools(), Tool(name="count", description="Count.")]

        def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
            if tool_name == "count":
                seen.append(len(self.taking.alive()))
                return "counted"
            return super().execute_tool(tool_name, arguments)

    leaky = Counting()
    stack = Orchestrator({"leaky": leaky})
    calls = [{"tool": "nested", "arguments": {}}, {"tool": "count", "arguments": {}}]
    response = stack.process_llm_response(json.dumps(calls))
    assert response.tool_call_result == [None, "counted"]
    assert seen == [0]  # released before the second call ran


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
@pytest.mark.usefixtures("no_collector")
def test_a_failed_call_leaves_no_descriptor_open() -> None:
    leaky = Leaky()
    stack = Orchestrator({"leaky": leaky})
    before = open_descriptors()
    for tool in TOOLS:
        response = stack.process_llm_response(json.dumps({"tool": tool, "arguments": {}}))
        assert response.call_failed
    assert open_descriptors() == before


class Auditor:
    """A host plugin whose audit hook keeps nothing, or raises."""

    def __init__(self, breaks: bool) -> None:
        self.breaks = breaks
        self.told: list[str | None] = []

    @hookimpl
    def mcs_host_after_tool_call(
        self, call: ToolCall, result: Any, error: BaseException | None
    ) -> None:
        self.told.append(None if error is None else type(error).__name__)
        if self.breaks:
            raise RuntimeError("the audit log is full")


@pytest.mark.usefixtures("no_collector")
@pytest.mark.parametrize("breaks", [False, True], ids=["audits", "raises"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_host_plugins_audit_hook_is_given_the_error_and_keeps_nothing(
    asynchronous: bool, breaks: bool
) -> None:
    # pluggy keeps a hook's exception in a local of the frame its traceback holds, beside the
    # hook's arguments: the error of the call among them (and an async tool's frames, which
    # are a coroutine's, are released only with the error)
    leaky, auditor = AsyncLeaky(), Auditor(breaks)
    host = Host(HostConfig(autoload=False, plugins=False, registries=()), search_path=[])
    host.add_driver("leaky", leaky)
    host.add_plugin(auditor)
    stack, _ = host.load()
    output = json.dumps({"tool": "nested", "arguments": {}})
    with pytest.warns(RuntimeWarning, match="audit hook raised") if breaks else nullcontext():
        response = answer("aprocess_llm_response" if asynchronous else "execute", stack, output)
    assert response.call_detail == DETAILS["nested"]
    assert auditor.told == ["RuntimeError"]
    assert leaky.taking.alive() == []


@pytest.mark.usefixtures("no_collector")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["run", "arun"])
def test_a_runner_whose_call_failed_keeps_nothing_the_tool_took(asynchronous: bool) -> None:
    leaky = Leaky()
    stack = Orchestrator({"leaky": leaky})
    answers = iter([json.dumps({"tool": "plain", "arguments": {}}), "Sorry, it failed."])

    def chat(history: list[dict[str, Any]]) -> str:
        return next(answers)

    runner = Runner(stack, chat)
    run = asyncio.run(runner.arun("Read it.")) if asynchronous else runner.run("Read it.")
    assert run.stopped == "final"
    assert run.responses[0].call_failed
    assert leaky.taking.alive() == []


# -- in a process of its own: the next call of the same child gets what the failed one took --

GRABBY_ID = "7c1f0000-0000-4000-8000-0000000000f1"

GRABBY = """\
import os
import sys

from mcs_host import MCSToolDriver, Tool
from mcs_host.kit import manifest_meta

TOOLS = {
    "pid": "Answer the process id.",
    "hog": "Allocate memory until there is none, and keep it.",
    "take": "Allocate 50 MiB.",
    "hoard": "Open files until no more may be opened, and keep them open.",
    "open": "Open eight files and close them.",
}


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [Tool(name=name, description=text) for name, text in TOOLS.items()]

    def execute_tool(self, tool_name, arguments):
        if tool_name == "pid":
            return os.getpid()
        if tool_name == "hog":
            chunks = []
            while True:  # MemoryError, with every chunk held by this frame
                chunks.append(bytearray(4 * 2**20))
        if tool_name == "take":
            return len(bytearray(50 * 2**20))
        if tool_name == "hoard":
            files = []
            while True:  # OSError (EMFILE), with every file held open by this frame
                files.append(open(os.devnull, "rb"))
        if tool_name == "open":
            files = [open(os.devnull, "rb") for _ in range(8)]
            for file in files:
                file.close()
            return len(files)
        raise ValueError(tool_name)
"""

CALLER = """\
import json, sys
from mcs_host import load_drivers

with load_drivers(sys.argv[1]) as (stack, report):
    out = {"records": {r.label: [r.status, r.reason, r.isolation] for r in report.records}}
    out["calls"] = []
    for name in json.loads(sys.argv[2]):
        response = stack.process_llm_response({"tool": name, "arguments": {}})
        out["calls"].append([response.call_failed, response.call_detail, response.tool_call_result])
print(json.dumps(out))
"""


@dataclass(frozen=True)
class GrabbyScene(Scene):
    """The venv of :func:`grabby`, the ``config`` that isolates the driver, and the caller
    ``script`` (:data:`CALLER`)."""

    config: Path
    script: Path


@pytest.fixture(scope="module")
def grabby(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> GrabbyScene:
    """A venv with ``mcs-host[mcp]`` and the pinned grabby driver, isolated with limits on
    its memory and open files."""
    pytest.importorskip("mcp")  # the mcs-host[mcp] extra, which the README's test command installs
    root = tmp_path_factory.mktemp("leftovers")
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host[mcp]", wheelhouse=wheelhouse, cache=uv_cache)
    project = driver_project(
        "grabby-driver",
        root / "marker.txt",
        GRABBY_ID,
        label="grabby",
        files={"grabby_driver/__init__.py": GRABBY},
    )
    wheel = build_wheel(project.write(root / "src"), root / "wheels")
    uv_pip("install", "--no-index", "--no-deps", str(wheel), python=venv.python)
    drivers = {
        GRABBY_ID: entry(
            "grabby-driver", "grabby", "grabby_driver:Driver", releases={"1.0.0": pin(wheel)}
        )
    }
    registry = write_registry(root / "registry.json", drivers)
    config = root / "mcs-host.toml"
    config.write_text(
        f'registries = ["{registry}"]\n\n'
        "[drivers.grabby]\n"
        'isolation = "process"\n'
        "limits = { memory_mb = 1024, open_files = 128 }\n"
    )
    script = root / "caller.py"
    script.write_text(CALLER)
    return GrabbyScene(root, venv, config, script)


def call_in_one_host(grabby: GrabbyScene, names: list[str]) -> list[list[Any]]:
    """The calls of ``names`` made one after the other by one host process (so to one child
    process of the driver): ``[failed, detail, result]`` each."""
    done = grabby.venv.run(
        grabby.venv.python,
        grabby.script,
        grabby.config,
        json.dumps(names),
        env={"HOME": str(grabby.root)},
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["records"]["grabby"] == ["mounted", "mounted", "process"]
    calls: list[list[Any]] = out["calls"]
    return calls


@pytest.mark.venv
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="limits are POSIX setrlimit")
def test_an_isolated_call_that_ran_out_of_memory_leaves_the_next_call_its_memory(
    grabby: GrabbyScene,
) -> None:
    first, hog, take, last = call_in_one_host(grabby, ["pid", "hog", "take", "pid"])
    assert isinstance(first[2], int)
    assert last[2] == first[2]  # one process made every call
    assert hog[0]
    assert "MemoryError" in hog[1]
    assert "its process is limited to memory_mb = 1024" in hog[1]
    assert take == [False, None, 50 * 2**20]  # what the failed call took was let go


@pytest.mark.venv
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="limits are POSIX setrlimit")
def test_an_isolated_call_that_ran_out_of_files_leaves_the_next_call_its_descriptors(
    grabby: GrabbyScene,
) -> None:
    first, hoard, opened, last = call_in_one_host(grabby, ["pid", "hoard", "open", "pid"])
    assert isinstance(first[2], int)
    assert last[2] == first[2]  # one process made every call
    assert hoard[0]
    assert "Too many open files" in hoard[1]
    assert opened == [False, None, 8]  # the files the failed call left open were closed
