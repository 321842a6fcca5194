"""The processes a process started, found and ended together (POSIX; the tree on Linux).

A daemon that calls ``setsid`` and forks again leaves its process group, and its parent's
exit hands it to init: ending a child's process group does not end it. On Linux a process
that is a child subreaper (:func:`become_subreaper`) is handed its orphaned descendants
instead, so they stay in its tree, which :func:`descendants` reads from ``/proc`` and
:func:`end_tree` ends. A process that dies of SIGKILL hands its orphans on before anyone can
read its tree: what it started is found by a mark in the environment it passed on
(:data:`MARK`, :func:`end_marked`), unless a descendant replaced its environment. Elsewhere
only the process group is ended.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import NoReturn

__all__ = [
    "MARK",
    "become_subreaper",
    "descendants",
    "end_descendants",
    "end_marked",
    "end_tree",
    "exit_now",
    "show_as",
]

MARK = "MCS_HOST_TREE"
"""The environment variable that marks every process started under one child of the host."""
UNMARKED = "0" * 32
"""The value of :data:`MARK` a process that forks children begins with, for
:func:`show_as` to write a child's own mark over (a mark is as long: 32 hex digits)."""

_PR_SET_CHILD_SUBREAPER = 36
"""Linux's ``prctl`` option: orphaned descendants are reparented to this process."""
_ROUNDS = 5
"""Times the tree is read again while ending it (a process may fork as it is ended)."""


def become_subreaper() -> bool:
    """Make this process its orphaned descendants' parent (Linux); whether it is."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # noqa: PLC0415 - Linux only

    try:
        return bool(ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1) == 0)
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """pid -> parent pid of every live process ``/proc`` shows (zombies have ended)."""
    found: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                stat = file.read()
        except OSError:
            continue  # it ended meanwhile
        fields = stat.rpartition(b")")[2].split()  # state, parent, ...
        if len(fields) > 1 and fields[0] != b"Z" and fields[1].isdigit():  # not a zombie
            found[int(name)] = int(fields[1])
    return found


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (children first), as ``/proc`` shows them; empty
    where there is no ``/proc``."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found: list[int] = []
    queue = list(children.get(pid, ()))
    while queue:
        child = queue.pop(0)
        found.append(child)
        queue.extend(children.get(child, ()))
    return found


def end_tree(pid: int) -> None:
    """SIGKILL ``pid``, its process group and every descendant, until none is left (those it
    orphaned, if it is a subreaper, among them). ``pid`` is not waited for."""
    for _ in range(_ROUNDS):
        tree = descendants(pid)
        for number in (pid, *tree):
            _kill(number)
        with contextlib.suppress(OSError, AttributeError):  # no group, or no killpg
            os.killpg(pid, signal.SIGKILL)
        if not tree:
            return


def end_marked(mark: str) -> None:
    """SIGKILL every process (but this one) whose environment has ``MARK=mark``: what a
    child the host started left behind, wherever it was reparented (Linux; the processes of
    this user only)."""
    needle = f"{MARK}={mark}".encode()
    me = os.getpid()
    for _ in range(_ROUNDS):
        found = [pid for pid in _parents() if pid != me and needle in _environment(pid)]
        if not found:
            return
        for pid in found:
            _kill(pid)


def _environment(pid: int) -> list[bytes]:
    """The environment of ``pid`` as ``NAME=value`` entries; empty when it cannot be read."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            return file.read().split(b"\0")
    except OSError:
        return []


def end_descendants() -> None:
    """SIGKILL every descendant of this process (not itself), until none is left. The
    children that have ended are reaped (their exit statuses are taken: call it only when
    this process is ending, not while a ``subprocess`` of its own waits for one)."""
    me = os.getpid()
    for _ in range(_ROUNDS):
        tree = descendants(me)
        if not tree:
            return
        for number in tree:
            _kill(number)
        _reap()


def exit_now(status: int = 0) -> NoReturn:
    """End every descendant of this process, then the process with ``status``, at once: no
    thread, handler or ``atexit`` function is waited for (a call may be stuck in one)."""
    end_descendants()
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(status)


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):  # gone already, or not ours
        os.kill(pid, signal.SIGKILL)


def _reap() -> None:
    """Collect the exit status of every child that has ended (a subreaper's orphans are its
    children: unreaped, they stay in /proc as zombies)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except (ChildProcessError, OSError):
            return
        if pid == 0:
            return


def show_as(argv: list[str], mark: str) -> bool:
    """Make ``/proc`` show this process as running ``argv`` and carrying ``mark`` (Linux),
    for a process forked from one that began with ``MARK=UNMARKED`` in its environment and
    room in its command line: both are written in place, in the memory the kernel reads
    ``/proc/PID/cmdline`` and ``/proc/PID/environ`` from (what a process it forks inherits,
    too); ``argv`` is cut to the room there is. Whether the mark was written."""
    try:
        with open("/proc/self/stat", "rb") as file:
            fields = file.read().rpartition(b")")[2].split()
        arg_start, arg_end, env_start, env_end = (int(x) for x in fields[45:49])
    except (OSError, ValueError):
        return False
    import ctypes  # noqa: PLC0415 - Linux only

    placeholder = f"{MARK}={UNMARKED}".encode()
    environment = ctypes.string_at(env_start, env_end - env_start)
    at = (b"\0" + environment).find(b"\0" + placeholder + b"\0")  # where it begins in it
    if at < 0 or len(mark) != len(UNMARKED):
        return False
    ctypes.memmove(env_start + at + len(MARK) + 1, mark.encode(), len(mark))
    room = arg_end - arg_start
    line = b"\0".join(a.encode() for a in argv)[: room - 1]
    ctypes.memmove(arg_start, line.ljust(room, b"\0"), room)
    return True
