"""The host's side of its fork server (:mod:`mcs_host.cli._forkserver`): one per process,
started when a driver is first isolated, asked to fork each isolated driver's child host and,
once the child has exited, to reap it.

The fork server has imported what a child host needs before its driver (never a driver's
code), so a child starts without importing it again and shares those pages with the others.
Linux only: a pidfd tells the host when a process it did not fork exits. Elsewhere, with
``MCS_HOST_FORK_SERVER=0`` in the host's environment, or when the fork server cannot start
or answer, :func:`spawn` returns None and the child is started as a process of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading

from mcs_host._descendants import MARK, UNMARKED

__all__: list[str] = []  # the transport's; nothing public

VARIABLE = "MCS_HOST_FORK_SERVER"
"""Set to ``0`` in the host's environment to start each child as a process of its own."""
_WAIT = 30.0
"""Seconds to wait for the fork server to be ready, or to answer."""
_READY = b'{"ready": true}'
_ROOM = " " * 512
"""The fork server's last argument: room for a child's command line (``show_as``)."""
_SUPPORTED = (
    sys.platform.startswith("linux") and hasattr(os, "pidfd_open") and hasattr(socket, "send_fds")
)


class _ForkServer:
    """A fork server process and the host's end of its socket."""

    __slots__ = ("control", "errlog", "owner", "popen", "ready", "sending")

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.errlog = tempfile.TemporaryFile()  # noqa: SIM115 - kept while it runs
        try:
            fd = theirs.fileno()
            self.popen = subprocess.Popen(
                [sys.executable, "-I", "-m", "mcs_host", "fork-server", str(fd), _ROOM],
                pass_fds=(fd,),
                env=os.environ | {MARK: UNMARKED},  # each child writes its mark over it
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self.errlog,
                start_new_session=True,  # no terminal's SIGINT; it ends when the host goes
            )
        except BaseException:
            ours.close()
            self.errlog.close()
            raise
        finally:
            theirs.close()
        self.control = ours
        self.control.settimeout(_WAIT)
        self.owner = os.getpid()
        self.ready: bool | None = None
        """Whether it said it is ready (None: not asked yet)."""
        self.sending = threading.Lock()

    def usable(self) -> bool:
        """Whether it is ready (waiting for it the first time) and still runs."""
        if self.ready is None:
            try:
                self.ready = self.control.recv(64) == _READY
            except OSError:
                self.ready = False
        return self.ready and self.popen.poll() is None

    def close(self) -> None:
        """Close the host's end (it exits) and reap it if it has exited."""
        self.control.close()
        self.errlog.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(0.1)


_server: _ForkServer | None = None
_gave_up = False
"""Whether a fork server failed to start in this process (children are then started alone)."""
_lock = threading.Lock()


def warm() -> None:
    """Start the fork server now, if it will be used, without waiting for it."""
    if _wanted():
        with _lock:
            _current(wait=False)


def spawn(
    args: list[str], env: dict[str, str], cwd: str, stdio: tuple[int, int, int]
) -> tuple[int, socket.socket] | None:
    """Have the fork server start ``python -I -m mcs_host ARGS`` with ``env`` in ``cwd``, and
    ``stdio`` as its descriptors 0, 1 and 2: its pid and the socket to reap it with (see
    :func:`reap`); None when there is no fork server to ask."""
    if not _wanted():
        return None
    with _lock:
        server = _current(wait=True)
    if server is None:
        return None
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    request = json.dumps({"args": args, "env": env, "cwd": cwd}).encode()
    try:
        with server.sending:
            socket.send_fds(server.control, [request], [*stdio, theirs.fileno()])
        theirs.close()
        ours.settimeout(_WAIT)
        reply = json.loads(ours.recv(4096) or b"{}")
    except (OSError, ValueError):
        reply = {}
    finally:
        theirs.close()
    pid = reply.get("pid") if isinstance(reply, dict) else None
    if not isinstance(pid, int):
        ours.close()
        return None
    return pid, ours


def reap(channel: socket.socket) -> tuple[int, float] | None:
    """Have the fork server reap the child of ``channel`` (ending it first if it runs): its
    wait status and CPU seconds, or None when the fork server could not say."""
    try:
        channel.sendall(b"reap")
        reply = json.loads(channel.recv(4096) or b"{}")
        return int(reply["status"]), float(reply["cpu"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    finally:
        channel.close()


def _wanted() -> bool:
    return _SUPPORTED and not _gave_up and os.environ.get(VARIABLE, "1") != "0"


def _current(*, wait: bool) -> _ForkServer | None:
    """The running fork server, started if there is none (under ``_lock``); with ``wait``,
    only once it is ready."""
    global _server, _gave_up  # noqa: PLW0603 - one fork server per process
    server = _server
    if server is not None and (
        server.owner != os.getpid() or (server.ready is not None and not server.usable())
    ):
        if server.owner == os.getpid():
            server.close()
        server = _server = None
    if server is None:
        try:
            server = _server = _ForkServer()
        except OSError:
            _gave_up = True
            return None
    if wait and not server.usable():
        server.close()
        _server, _gave_up = None, True
        return None
    return server
