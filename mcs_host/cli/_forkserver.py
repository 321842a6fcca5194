"""``python -I -m mcs_host fork-server FD``: the fork server of one host, the parent of its
isolated drivers' child hosts (Linux).

It locks itself down as a child host does, imports what a child host imports before it
loads its driver (the command line, the loading pipeline, the MCP server and the SDK; never
a driver's code), resolves the host's installation, freezes what it made for the garbage
collector, and says it is ready. Then it waits on the socket ``FD`` (the host holds the other
end) for requests, each one a child to start: its command line (``serve --isolated LABEL``),
environment and directory, with its stdin, stdout and stderr and a socket of its own
(:mod:`mcs_host.bridge._forks` sends them). For each it forks: the child starts a session of
its own, takes those descriptors as 0, 1 and 2, closes every other, and runs the command line
as ``python -I -m mcs_host`` would (:func:`serve` returns its arguments there). The pages
imported here are shared by all children until one writes them, and none imports them again.

The child's socket carries its pid to the host, and later the host's request to reap it: the
fork server reaps a child only then (so its pid cannot be another process's while the host
may still end its tree) and answers with its wait status and CPU time. A socket the host
closes first ends its child. When the host's end of ``FD`` closes (the host exited, or was
killed), the fork server sends SIGTERM to every child it has not reaped (a child host ends
what its driver started on SIGTERM) and exits; they get SIGTERM from their parent's death too.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import selectors
import signal
import socket
import sys
from typing import Any, NoReturn

from mcs_host._descendants import MARK, show_as

__all__: list[str] = []  # run by mcs_host.cli._launch; nothing public

_PRELOAD = (
    "mcs_host.cli.app",
    "mcs_host.cli.options",
    "mcs_host.cli.serve",
    "mcs_host.cli.drivers",
    "mcs_host.cli.render",
    "mcs_host.kit",
    "mcs_host.loading.host",
    "mcs_host.loading.isolating",
    "mcs_host.bridge.isolation",
    "mcs_host.bridge.server",
    "mcs_host.bridge.http",
    "mcs_host._descendants",
    "mcp.server.lowlevel",
    "mcp.server.stdio",
    "anyio._backends._asyncio",
    "pydantic._internal._serializers",
    "typer._click.decorators",
    "typer._adapters",
    "importlib.resources.readers",
    "ctypes",
)
"""What a child host imports before its driver: imported once, here."""
_REQUEST = 1 << 22
"""The largest request, in bytes (a child's command line, environment and directory)."""
_DESCRIPTORS = 4
"""Descriptors a request carries: the child's stdin, stdout, stderr and its socket."""


def serve(fd: int) -> list[str]:
    """Prepare, then start a child for each request on the socket ``fd`` until the host
    goes (then exit); in each child, return the command line it is to run."""
    try:
        control = socket.socket(fileno=fd)
    except OSError as exc:
        said = f"error: fork-server: descriptor {fd} is not a host's socket ({exc})"
        raise SystemExit(said) from None
    _prepare()
    control.sendall(b'{"ready": true}')
    children: dict[socket.socket, int] = {}
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select():
            sock: socket.socket = key.fileobj  # type: ignore[assignment]
            if sock is not control:
                _reap(sock, children, selector)
                continue
            message: bytes = b""
            fds: list[int] = []
            with contextlib.suppress(OSError):
                message, fds, _flags, _address = socket.recv_fds(control, _REQUEST, _DESCRIPTORS)
            if not message:  # the host has gone
                _leave(children)
            args = _start(message, fds, control, children, selector)
            if args is not None:
                return args  # in the child


def _prepare() -> None:
    """Import what every child needs, resolve the host's installation, and freeze it all;
    exit 2 unless this process began with the placeholder mark its children overwrite."""
    from mcs_host._descendants import UNMARKED
    from mcs_host.trust import _origins

    if os.environ.get(MARK) != UNMARKED:
        raise SystemExit(f"error: fork-server: {MARK} is not the placeholder a host sets")
    for name in _PRELOAD:
        with contextlib.suppress(ModuleNotFoundError):  # a library version without it
            importlib.import_module(name)
    _origins.host_install()
    gc.collect()
    gc.freeze()  # a child's collections leave these pages shared


def _start(
    message: bytes,
    fds: list[int],
    control: socket.socket,
    children: dict[socket.socket, int],
    selector: selectors.BaseSelector,
) -> list[str] | None:
    """Fork the child a request asks for; in the child, its command line (None here)."""
    if len(fds) != _DESCRIPTORS:
        for fd in fds:
            os.close(fd)
        return None
    stdin, stdout, stderr, channel_fd = fds
    channel = socket.socket(fileno=channel_fd)
    try:
        request = json.loads(message)
        args = [str(a) for a in request["args"]]
        env = {str(k): str(v) for k, v in request["env"].items()}
        cwd = str(request["cwd"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        _answer(channel, {"error": f"a request it cannot read: {exc}"})
        for fd in (stdin, stdout, stderr):
            os.close(fd)
        channel.close()
        return None
    pid = os.fork()
    if pid == 0:
        _become(args, stdin, stdout, stderr, cwd, env, [control, channel, *children], selector)
        return args
    for fd in (stdin, stdout, stderr):
        os.close(fd)
    if not _answer(channel, {"pid": pid}):
        _end(pid)
        channel.close()
        return None
    children[channel] = pid
    selector.register(channel, selectors.EVENT_READ)
    return None


def _become(
    args: list[str],
    stdin: int,
    stdout: int,
    stderr: int,
    cwd: str,
    env: dict[str, str],
    sockets: list[socket.socket],
    selector: selectors.BaseSelector,
) -> None:
    """In the child: a session of its own, shown in ``/proc`` as running ``args`` with its
    own mark, the three descriptors as 0, 1 and 2 and no other, the directory and
    environment asked for; exit 127 when any of it fails."""
    try:
        os.setsid()
        if not show_as([sys.executable, "-I", "-m", "mcs_host", *args], env.get(MARK, "")):
            os._exit(127)  # its descendants could not be found by its mark
        for target, fd in ((0, stdin), (1, stdout), (2, stderr)):
            os.dup2(fd, target)
        selector.close()
        for sock in sockets:
            sock.close()
        os.closerange(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1 << 16)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv[1:] = args
    except BaseException:  # nothing may run in a child half made
        os._exit(127)


def _reap(
    channel: socket.socket, children: dict[socket.socket, int], selector: selectors.BaseSelector
) -> None:
    """The host asks to reap a child (or closed its socket): end it if it still runs, reap
    it, and answer with its wait status and CPU seconds."""
    pid = children.pop(channel)
    selector.unregister(channel)
    try:
        asked = channel.recv(64)
    except OSError:
        asked = b""
    status, cpu = _end(pid)
    if asked:
        _answer(channel, {"status": status, "cpu": cpu})
    channel.close()


def _end(pid: int) -> tuple[int, float]:
    """Reap ``pid``, ending it and its tree first if it has not exited: its wait status and
    CPU seconds."""
    from mcs_host._descendants import end_tree

    done, status, usage = os.wait4(pid, os.WNOHANG)
    if done == 0:
        end_tree(pid)
        done, status, usage = os.wait4(pid, 0)
    return status, usage.ru_utime + usage.ru_stime


def _answer(channel: socket.socket, reply: dict[str, Any]) -> bool:
    """Send ``reply`` on a child's socket; whether the host could be told."""
    try:
        channel.sendall(json.dumps(reply).encode())
    except OSError:
        return False
    return True


def _leave(children: dict[socket.socket, int]) -> NoReturn:
    """The host has gone: SIGTERM to every child (each ends what its driver started), and
    exit."""
    for pid in children.values():
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    os._exit(0)
