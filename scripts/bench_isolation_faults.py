"""Benchmark how isolated drivers contain faults: through mcs-host call, run and serve.

A driver isolated in a process of its own (``isolation = "process"``) is reached three ways:
``mcs-host call``, ``mcs-host run`` and an MCP client of ``mcs-host serve --isolate``.

    python scripts/bench_isolation_faults.py [--repeat 1] [--faults segfault,hang]
        [--paths call,run,serve]

Builds one driver (its wheel with flit_core), installs it into a directory, pins it in a
registry of its own and mounts it with ``isolation = "process"``, ``limits = {memory_mb,
cpu_seconds = 2, open_files}``, ``max_result_mb = 4``, ``restarts = 100`` and
``call_timeout = 5`` (room for 2 s of CPU on a busy machine before the timeout). Each of its
tools commits one fault: it segfaults, aborts, calls ``os._exit(0)``, spins past its CPU
limit, allocates past its memory limit, opens files past its limit, returns more than
``max_result_mb``, hangs past the call timeout, starts a daemon (fork, ``setsid``, fork
again, the daemon ignoring SIGTERM) and returns, or starts one and dies of SIGKILL. ``ok``
allocates 50 MiB and opens 50 files, lets them go and answers its pid.

For each fault and each path, a host process (fresh ``HOME`` and ``MCS_HOST_STATE_DIR``) makes
the faulty call and then a call of ``ok``:

- ``call`` makes one call per process: the fault, then ``ok`` in a fresh process;
- ``run`` is given one LLM output with three calls (``ok``, the fault, ``ok``), which the
  orchestrator runs in order in the one process;
- ``serve`` is driven by the ``mcp`` SDK's stdio client, the three calls on one session;
  the client starts this script with ``--supervise``, which starts ``mcs-host serve`` on the
  same pipes and watches it as the other paths watch theirs.

Each row says whether the fault's call failed naming its cause (``contained``), whether the
``ok`` after it answered (and from the same child process or a new one), whether any process
the host started (its ``HOME`` in the environment) or the daemon (a marker in its command
line) is alive once the host has exited (waiting up to 5 s), the host's peak RSS and its wall
time. The peak is ``VmHWM`` of the ``mcs-host`` process itself, read while it runs; the
``ru_maxrss`` of ``os.wait4`` is shown beside it, which on Linux is the largest of the
process and every descendant it (or its fork server) reaped: an isolated driver's peak
counts there. With ``--repeat N`` each row runs N times: contained and the next call must
hold every time, the peaks are the largest and the wall time the median. Needs the
mcs-host[mcp] extra and flit_core (to build the wheel), and Linux (``/proc``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio
from _bench import Budget, emit, install_pinned_driver
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

DRIVER_ID = "7c1f0000-0000-4000-8000-00000000fa17"
LABEL = "faults"
CPU_SECONDS = 2
MEMORY_MB = 512
OPEN_FILES = 128
MAX_RESULT_MB = 4
CALL_TIMEOUT = 5
"""Seconds: past ``cpu_seconds`` of CPU with room for a busy machine (the CPU limit must be
met before the call timeout), so ``hang`` costs this much on each path."""
ORPHAN_WAIT = 5.0
"""Seconds a process of the host has to be gone once the host has exited."""
PREFIX = "mcs-bench-faults-"
"""Begins the name of the temporary directory (its ``home`` the hosts' ``HOME``) and of each
daemon's marker (a path in it, with a random part)."""
SAMPLE = 0.01
"""Seconds between reads of the host's ``VmHWM``."""

SOURCE = """\
import ctypes
import os
import signal
import sys
import time

from mcs_host import MCSToolDriver, Tool, ToolParameter
from mcs_host.kit import manifest_meta

SLEEP = '''
import signal, sys, time
for name in ("SIGTERM", "SIGHUP", "SIGINT"):
    signal.signal(getattr(signal, name), signal.SIG_IGN)
open(sys.argv[1].removeprefix("daemon:"), "w").close()  # it started
while True:
    time.sleep(60)
'''


def start_daemon(marker):
    \"\"\"Fork, setsid, fork again: the grandchild execs a Python that sleeps (ignoring
    SIGTERM) with ``daemon:MARKER`` in its command line; the first child exits. Its pid.\"\"\"
    read, write = os.pipe()
    first = os.fork()
    if first == 0:
        try:
            os.close(read)
            os.setsid()
            pid = os.fork()
            if pid == 0:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.closerange(3, 4096)
                os.execv(sys.executable, [sys.executable, "-c", SLEEP, "daemon:" + marker])
            os.write(write, b"%d" % pid)
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(first, 0)
    with os.fdopen(read, "rb") as pipe:
        pid = int(pipe.read())
    deadline = time.monotonic() + 30
    while not os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(0.01)  # until it runs, ignoring SIGTERM
    return pid


MARKER = ToolParameter(
    name="marker",
    description="A path, in the daemon's command line, which it creates.",
    schema={"type": "string"},
)
TOOLS = {
    "ok": "Allocate 50 MiB and open 50 files, let them go, answer the pid.",
    "segfault": "Read address 0.",
    "abort": "Call abort().",
    "exit0": "Call os._exit(0).",
    "cpu": "Spin.",
    "memory": "Allocate until memory runs out.",
    "files": "Open files until none may be opened.",
    "big": "Answer 5 MiB of text.",
    "hang": "Sleep for an hour.",
    "daemon": "Start a daemon and answer.",
    "crash_with_daemon": "Start a daemon and die of SIGKILL.",
}


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [
            Tool(name=name, description=text, parameters=[MARKER] if "daemon" in name else [])
            for name, text in TOOLS.items()
        ]

    def execute_tool(self, tool_name, arguments):
        if tool_name == "ok":
            block = bytearray(50 * 2**20)
            files = [open(os.devnull, "rb") for _ in range(50)]
            for file in files:
                file.close()
            return {"pid": os.getpid(), "mb": len(block) // 2**20, "files": len(files)}
        if tool_name == "segfault":
            ctypes.string_at(0)
        if tool_name == "abort":
            os.abort()
        if tool_name == "exit0":
            os._exit(0)
        if tool_name == "cpu":
            while True:
                pass
        if tool_name == "memory":
            chunks = []
            while True:
                chunks.append(bytearray(16 * 2**20))
        if tool_name == "files":
            files = []
            while True:
                files.append(open(os.devnull, "rb"))
        if tool_name == "big":
            return {"text": "x" * (5 * 2**20)}
        if tool_name == "hang":
            time.sleep(3600)
        if tool_name == "daemon":
            return {"daemon": start_daemon(arguments["marker"]), "pid": os.getpid()}
        if tool_name == "crash_with_daemon":
            start_daemon(arguments["marker"])
            os.kill(os.getpid(), signal.SIGKILL)
        raise ValueError(tool_name)
"""
MANIFEST = {
    "format": "mcs-driver-manifest/1",
    "drivers": {
        "Driver": {
            "id": DRIVER_ID,
            "name": "bench-faults",
            "version": "1.0.0",
            "trust": {"publisher": "Bench"},
        }
    },
}
PYPROJECT = f"""\
[build-system]
requires = ["flit_core>=3.9,<5"]
build-backend = "flit_core.buildapi"

[project]
name = "bench-faults"
version = "1.0.0"
description = "mcs-host benchmark driver"
dependencies = ["mcs-host"]

[project.entry-points."mcs.drivers"]
{LABEL} = "bench_faults:Driver"
"""
CONFIG = f"""\
autoload = false
call_timeout = {CALL_TIMEOUT}

[drivers.{LABEL}]
isolation = "process"
restarts = 100
max_result_mb = {MAX_RESULT_MB}
limits = {{ memory_mb = {MEMORY_MB}, cpu_seconds = {CPU_SECONDS}, open_files = {OPEN_FILES} }}
"""

FAULTS: dict[str, tuple[str, ...]] = {
    "segfault": ("SIGSEGV",),
    "abort": ("SIGABRT",),
    "exit0": ("exited with status 0",),
    "cpu": ("cpu_seconds",),
    "memory": ("MemoryError",),
    "files": ("Too many open files",),
    "big": ("max_result_mb",),
    "hang": ("did not answer",),
    "daemon": (),  # the call answers; what must not outlive the host is its daemon
    "crash_with_daemon": ("SIGKILL",),
}
"""Each faulty tool, and the words its failed call must say (none: it must answer)."""
PATHS = ("call", "run", "serve")


def install_driver(directory: Path) -> tuple[Path, Path]:
    """Build, install and pin the driver: (the directory it is installed in, the registry)."""
    files = {
        "pyproject.toml": PYPROJECT,
        "bench_faults/__init__.py": SOURCE,
        "bench_faults/mcs-driver.json": json.dumps(MANIFEST),
    }
    return install_pinned_driver(directory, "bench_faults", files, driver_id=DRIVER_ID, label=LABEL)


# -- a host process, watched -------------------------------------------------------------------


@dataclass
class Watched:
    """How a host process went: its exit code, peaks in KiB, wall seconds."""

    code: int
    own_kib: int
    """``VmHWM`` of the process itself, as last read while it ran."""
    maxrss_kib: int
    """``ru_maxrss`` from ``os.wait4``: the largest of it and the descendants it reaped."""
    wall: float


def high_water(pid: int) -> int:
    """``VmHWM`` of ``pid`` in KiB (0 when it has gone or exited)."""
    try:
        with open(f"/proc/{pid}/status") as file:
            for line in file:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def watch(process: subprocess.Popen[Any], started: float) -> Watched:
    """Read the peak of ``process`` while it runs, then reap it with ``os.wait4``."""
    own = 0
    while True:
        own = max(own, high_water(process.pid))
        # WNOWAIT: left a zombie, to be reaped with its resource use
        exited = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if exited is not None:
            break
        time.sleep(SAMPLE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    return Watched(process.returncode, own, usage.ru_maxrss, wall)


def run_watched(
    argv: Sequence[str], env: dict[str, str], cwd: Path, timeout: float = 120.0
) -> tuple[Watched, str, str]:
    """Run ``argv`` to its end: how it went, its stdout and stderr."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=cwd
        )
        try:
            watched = watch(process, started)
        finally:
            if process.returncode is None:
                process.kill()
                process.wait(timeout)
        out.seek(0)
        err.seek(0)
        return watched, out.read().decode(errors="replace"), err.read().decode(errors="replace")


def supervise(record: Path, argv: Sequence[str]) -> int:
    """Run ``argv`` with this process's stdin and stdout (the MCP client's pipes) and write
    how it went to ``record``: what the client starts in place of ``mcs-host serve``, so the
    host is a child of a process that can ``wait4`` it."""
    # the client ends its server with SIGTERM to the process group after a grace period:
    # the host gets it too, and this process stays to say how the host went
    signal.signal(signal.SIGTERM, lambda number, frame: None)
    started = time.perf_counter()
    process = subprocess.Popen(argv)
    watched = watch(process, started)
    record.write_text(json.dumps(asdict(watched)))
    return 0


# -- the processes of a run --------------------------------------------------------------------


def processes_of(home: Path | None, marker: str) -> list[str]:
    """The live processes that carry ``HOME=home`` in their environment (every process the
    host started keeps it) or ``marker`` (if any) in their command line: ``PID CMDLINE``
    each."""
    wanted = f"HOME={home}".encode() if home is not None else None
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as file:
                argv = file.read().split(b"\0")
            with open(f"/proc/{name}/environ", "rb") as file:
                environ = file.read().split(b"\0")
        except OSError:
            continue  # it ended meanwhile, or is not ours to read
        if not argv or argv == [b""]:
            continue  # a zombie: it has ended
        if (wanted is not None and wanted in environ) or (
            marker and any(marker.encode() in arg for arg in argv)
        ):
            found.append(f"{name} {b' '.join(argv).decode(errors='replace')[:80]}")
    return found


def left_behind(home: Path, marker: str) -> list[str]:
    """What of the host is still alive after ``ORPHAN_WAIT`` seconds at most."""
    deadline = time.monotonic() + ORPHAN_WAIT
    while True:
        found = processes_of(home, marker)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def kill_all(home: Path, marker: str) -> None:
    """End what a run left (so the next row starts clean): only what carries this run's own
    ``HOME`` or daemon marker, never a process found by a broader name."""
    if PREFIX not in marker or PREFIX not in home.parent.name:
        raise ValueError(f"not a marker or home of this benchmark: {marker!r}, {home}")
    for line in processes_of(home, marker):
        with contextlib.suppress(OSError):
            os.kill(int(line.split()[0]), signal.SIGKILL)


# -- the three paths ---------------------------------------------------------------------------


@dataclass
class Outcome:
    """One fault through one path, once."""

    detail: str
    """What the fault's call said (its error, or its result)."""
    contained: bool
    next_works: bool
    next_how: str
    """Where the ``ok`` after it ran: ``same child``, ``new child``, ``fresh host``."""
    left: list[str]
    """What of the host was alive ``ORPHAN_WAIT`` seconds after it exited."""
    watched: Watched | None
    notes: list[str] = field(default_factory=list)


@dataclass
class Scene:
    """The installed driver, and what each host process is given."""

    root: Path
    target: Path
    registry: Path
    config: Path
    script: str
    """The ``mcs-host`` console script."""

    @property
    def home(self) -> Path:
        return self.root / "home"

    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "MCS_HOST_STATE_DIR": str(self.root / "state"),
        }

    def mcs_host(self, *args: str) -> list[str]:
        return [
            *(self.script, *args, "--config", str(self.config)),
            *("--registry", str(self.registry), "--path", str(self.target), "--isolate"),
        ]


def arguments(fault: str, marker: str) -> dict[str, Any]:
    return {"marker": marker} if "daemon" in fault else {}


def three_calls(fault: str, marker: str) -> list[dict[str, Any]]:
    """``ok``, the fault, ``ok``: where the first ``ok`` ran says where the second did."""
    return [
        {"tool": "ok", "arguments": {}},
        {"tool": fault, "arguments": arguments(fault, marker)},
        {"tool": "ok", "arguments": {}},
    ]


def judge(fault: str, failed: bool, detail: str) -> bool:
    """Whether the fault's call went as it must: failed naming its cause, or answered."""
    words = FAULTS[fault]
    if not words:
        return not failed
    return failed and all(word.lower() in detail.lower() for word in words)


def ok_result(result: Any) -> bool:
    """Whether ``result`` is what ``ok`` answers."""
    return isinstance(result, dict) and result.get("mb") == 50 and result.get("files") == 50


def where(before: Any, after: Any) -> str:
    """Whether two answers of ``ok`` came from one child process."""
    if not (ok_result(before) and ok_result(after)):
        return "?"
    return "same child" if before["pid"] == after["pid"] else "new child"


def response_of(out: str) -> dict[str, Any] | None:
    """The ``response`` of a ``--json`` document of ``call`` or ``run``."""
    try:
        response = json.loads(out)["response"]
    except (ValueError, KeyError, TypeError):
        return None
    return response if isinstance(response, dict) else None


def exit_note(watched: Watched, expected: int) -> list[str]:
    return [] if watched.code == expected else [f"the host exited with {watched.code}"]


def via_call(scene: Scene, fault: str, marker: str) -> Outcome:
    """``mcs-host call FAULT``, then ``mcs-host call ok``: one call per process."""
    argv = scene.mcs_host("call", fault, "--args", json.dumps(arguments(fault, marker)), "--json")
    watched, out, err = run_watched(argv, scene.env(), scene.root)
    left = left_behind(scene.home, marker)
    kill_all(scene.home, marker)
    response = response_of(out)
    if response is None:
        detail = f"no answer (exit {watched.code}): {err.strip()[-300:]}"
        failed = True
    else:
        failed = bool(response["call_failed"])
        detail = response["call_detail"] if failed else json.dumps(response["tool_call_result"])
    _, out, _ = run_watched(scene.mcs_host("call", "ok", "--json"), scene.env(), scene.root)
    kill_all(scene.home, marker)
    again = response_of(out)
    works = again is not None and ok_result(again["tool_call_result"])
    notes = exit_note(watched, 1 if FAULTS[fault] else 0)
    return Outcome(detail, judge(fault, failed, detail), works, "fresh host", left, watched, notes)


def via_run(scene: Scene, fault: str, marker: str) -> Outcome:
    """``mcs-host run`` of one LLM output with three calls: ``ok``, the fault, ``ok``."""
    output = json.dumps(three_calls(fault, marker))
    argv = scene.mcs_host("run", output, "--json")
    watched, out, err = run_watched(argv, scene.env(), scene.root)
    left = left_behind(scene.home, marker)
    kill_all(scene.home, marker)
    response = response_of(out)
    results = response["tool_call_result"] if response is not None else None
    if response is None or not isinstance(results, list) or len(results) != 3:
        detail = f"no three answers (exit {watched.code}): {(out or err).strip()[-300:]}"
        return Outcome(detail, False, False, "?", left, watched)
    failed = bool(response["call_failed"])
    detail = response["call_detail"] if failed else json.dumps(results[1])
    works = ok_result(results[0]) and ok_result(results[2])
    notes = exit_note(watched, 1 if FAULTS[fault] else 0)
    contained = judge(fault, failed, detail)
    return Outcome(detail, contained, works, where(results[0], results[2]), left, watched, notes)


def via_serve(scene: Scene, fault: str, marker: str) -> Outcome:
    """An MCP client of ``mcs-host serve --isolate`` (the SDK's stdio client) that calls
    ``ok``, the fault and ``ok`` on one session, then closes it."""
    record = scene.root / f"serve-{uuid.uuid4().hex}.json"
    server = StdioServerParameters(
        command=sys.executable,
        args=[
            *(str(Path(__file__).resolve()), "--supervise", str(record), "--"),
            *scene.mcs_host("serve"),
        ],
        env=scene.env(),
        cwd=str(scene.root),
    )
    seen: dict[str, Any] = {}

    async def calls(errlog: TextIO) -> None:
        async with (
            stdio_client(server, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            for index, call in enumerate(three_calls(fault, marker)):
                seen[str(index)] = await session.call_tool(
                    call["tool"], call["arguments"], read_timeout_seconds=120
                )
                if index == 1:  # the daemon, while the host runs
                    seen["daemons"] = processes_of(None, marker)

    with tempfile.TemporaryFile("w+") as errlog:
        try:
            anyio.run(calls, errlog)
        except Exception as exc:
            errlog.seek(0)
            said = errlog.read()[-2000:]
            raise RuntimeError(f"serve failed: {exc!r}; its stderr: {said}") from exc
    left = left_behind(scene.home, marker)
    kill_all(scene.home, marker)
    watched = Watched(**json.loads(record.read_text())) if record.exists() else None
    first, result, last = (seen[str(index)] for index in range(3))
    detail = text_of(result)
    contained = judge(fault, bool(result.is_error), detail)
    works = not last.is_error and ok_result(last.structured_content)
    notes = ["the client had to end the host"] if watched is None else exit_note(watched, 0)
    if "daemon" in fault:
        alive = "running" if seen["daemons"] else "already ended"
        notes.append(f"its daemon {alive} when the call returned")
    how = where(first.structured_content, last.structured_content)
    return Outcome(detail, contained, works, how, left, watched, notes)


def text_of(result: Any) -> str:
    """What a ``CallToolResult`` says: its error's text, or its structured content."""
    if result.is_error:
        return " ".join(getattr(part, "text", "") for part in result.content)
    return json.dumps(result.structured_content)


# -- the report --------------------------------------------------------------------------------


def row(fault: str, path: str, outcomes: list[Outcome]) -> str:
    """The table's row for ``fault`` through ``path``."""
    contained = all(o.contained for o in outcomes)
    said = outcomes[-1].detail.removeprefix(f"{fault} failed: ")
    said = said.replace("|", "\\|").replace("\n", " ")
    if len(said) > 170:
        said = said[:167] + "..."
    works = all(o.next_works for o in outcomes)
    hows = ", ".join(sorted({o.next_how for o in outcomes}))
    left = [line for o in outcomes for line in o.left]
    orphans = "none" if not left else "LEFT: " + "; ".join(left).replace("|", "\\|")
    watched = [o.watched for o in outcomes if o.watched is not None]
    if watched:
        own = max(w.own_kib for w in watched) / 1024
        maxrss = max(w.maxrss_kib for w in watched) / 1024
        wall = statistics.median(w.wall for w in watched)
        figures = f"{own:.0f} MB | {maxrss:.0f} MB | {wall:.1f} s"
    else:
        figures = "n/a | n/a | n/a"
    notes = "; ".join(sorted({note for o in outcomes for note in o.notes}))
    return (
        f"| {fault} | {path} | {'yes' if contained else 'NO'} | {said} "
        f"| {'yes' if works else 'NO'} ({hows}) | {orphans} | {figures} | {notes} |"
    )


def worst(results: dict[tuple[str, str], list[Outcome]], kib: str) -> tuple[float, str]:
    """The largest of the ``kib`` figure (MB) over every run, and where it was met."""
    figures = [
        (getattr(o.watched, kib) / 1024, f"{fault} through {path}")
        for (fault, path), outcomes in results.items()
        for o in outcomes
        if o.watched is not None
    ]
    return max(figures, key=lambda figure: figure[0], default=(0.0, "-"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs of each row")
    parser.add_argument("--faults", default=",".join(FAULTS), help="comma-separated")
    parser.add_argument("--paths", default=",".join(PATHS), help="comma-separated")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--supervise", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("command", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.supervise is not None:
        return supervise(args.supervise, args.command)
    faults, paths = args.faults.split(","), args.paths.split(",")
    unknown = sorted({*faults} - {*FAULTS} | {*paths} - {*PATHS})
    if unknown or args.command:
        parser.error(f"unknown: {', '.join(unknown or args.command)}")
    ways = {"call": via_call, "run": via_run, "serve": via_serve}
    script = str(Path(sys.executable).parent / "mcs-host")
    results: dict[tuple[str, str], list[Outcome]] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=PREFIX) as name:
        root = Path(name)
        (root / "home").mkdir()
        target, registry = install_driver(root)
        config = root / "mcs-host.toml"
        config.write_text(CONFIG)
        scene = Scene(root, target, registry, config, script)
        for fault in faults:
            for path in paths:
                outcomes = results.setdefault((fault, path), [])
                for _ in range(args.repeat):
                    marker = str(root / f"{PREFIX}daemon-{uuid.uuid4().hex}")
                    try:
                        outcome = ways[path](scene, fault, marker)
                    finally:
                        kill_all(scene.home, marker)
                    if "daemon" in fault and not Path(marker).exists():
                        outcome.contained = False
                        outcome.notes.append("its daemon never started")
                    outcomes.append(outcome)
                print(f"{fault} through {path}: done", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - started
    table = [
        "| fault | path | contained | what the fault's call said | next call (`ok`) "
        "| processes left after exit | host peak RSS | wait4 ru_maxrss | host wall | notes |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(row(fault, path, outcomes) for (fault, path), outcomes in results.items()),
    ]
    own, maxrss = worst(results, "own_kib"), worst(results, "maxrss_kib")
    table += [
        "",
        f"Limits: `memory_mb = {MEMORY_MB}`, `cpu_seconds = {CPU_SECONDS}`, "
        f"`open_files = {OPEN_FILES}`, `max_result_mb = {MAX_RESULT_MB}`, "
        f"`call_timeout = {CALL_TIMEOUT}`. `call` makes one call per process: its next call is "
        "a fresh host. `run` (one LLM output of three calls) and `serve` call `ok`, the fault "
        "and `ok` in one host: `same child` or `new child` says whether the driver's process "
        "went on. Host peak RSS is `VmHWM` of the `mcs-host` process; `ru_maxrss` of "
        "`os.wait4` also counts the descendants it reaped (the driver's process among them).",
        "",
        f"Worst host peak RSS: {own[0]:.0f} MB ({own[1]}); worst wait4 ru_maxrss: "
        f"{maxrss[0]:.0f} MB ({maxrss[1]}). {len(results)} rows, {args.repeat} run(s) each, "
        f"in {elapsed:.0f} s.",
    ]
    rows = len(results)
    contained = sum(all(o.contained for o in outcomes) for outcomes in results.values())
    orphaned = sum(any(o.left for o in outcomes) for outcomes in results.values())
    works = sum(all(o.next_works for o in outcomes) for outcomes in results.values())
    budgets = [
        Budget(
            "rows whose fault was contained, its cause named", contained, rows, "", at_least=True
        ),
        Budget("rows that left a process alive after the host exited", orphaned, 0, ""),
        Budget("rows whose next call works", works, rows, "", at_least=True),
    ]
    emit("Isolation: the faults of a driver in a process of its own", table, budgets, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
