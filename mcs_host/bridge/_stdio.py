"""The stdio link to a process the host starts: our own transport in place of the SDK's
stdio client, so the host holds the process itself.

:class:`Child` spawns the command in a session of its own (its own process group), its stdin
and stdout pipes, its stderr to the file given; :meth:`Child.link` is the transport the SDK's
``Client`` takes: two memory streams of ``SessionMessage``. Each line of stdout is parsed
as the SDK parses it, found by a search from where the last one stopped (linear in the
bytes, however the pipe cuts them) and bounded: a line longer than ``max_line`` ends the
process and the link (:attr:`Child.overrun`), never an allocation without end. Messages
are written as the SDK's writer writes them, one JSON line each.

The host learns of the exit as it happens (a pidfd on Linux, polling elsewhere), ends what
the process left in its group and its tree (:func:`~mcs_host._descendants.end_tree`, while
its pid still holds) and what carries its mark in the environment wherever it was reparented
(:func:`~mcs_host._descendants.end_marked`: a process killed by SIGKILL hands its orphans on
before its tree can be read), and reaps it with its resource use: :meth:`Child.how` says how
it ended (``killed by SIGSEGV``, ``exited with status 0``) and :attr:`Child.cpu` what CPU
time it used. :meth:`Child.end` ends it at once (SIGKILL to it, its group and its descendants);
leaving the link closes its stdin and gives it :data:`GRACE` seconds to exit by itself
first, unless it was ended already. A child with ``fork`` arguments is forked by the host's
fork server where there is one (:mod:`._forks`), which reaps it when the host asks.

One module: the process and its link share one state (its pid, its exit, the event loop
that reaps it), which a split would pass back and forth.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import IO, Any

from mcs_host._descendants import MARK, end_marked, end_tree

from . import _forks

__all__: list[str] = []  # the client's transport; nothing public

GRACE = 1.0
"""Seconds a process gets to exit by itself once its stdin is closed, before it is ended."""
_FLUSH = 0.5
"""Seconds the writer gets to send what it accepted before stdin is closed."""
_DRAIN = 0.5
"""Seconds the output of an exited process is still read (a descendant may hold the pipe)."""
REAP = 5.0
"""Seconds to wait for the exit of a process that was sent SIGKILL."""
SETTLE = 2.0
"""Seconds to wait for the exit of a process whose output ended, to say how it ended."""
_POLL = 0.05
"""Seconds between looks at a process's state where there is no pidfd."""
_UNKNOWN = -1
"""The status of a process its fork server did not report (it has gone)."""


class Child:
    """The process ``argv`` (started by :meth:`link`), with ``env`` over the SDK's default
    environment, in ``cwd``, its stderr to ``errlog`` (default: this process's stderr); a
    line of its stdout may hold at most ``max_line`` bytes."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        errlog: IO[Any] | None = None,
        max_line: int,
        fork: Sequence[str] | None = None,
    ) -> None:
        self.argv = tuple(argv)
        self.fork = tuple(fork) if fork is not None else None
        """The arguments of ``python -I -m mcs_host`` that ``argv`` runs, to have the fork
        server start it (:mod:`._forks`); None: ``argv`` is started as it is."""
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.errlog = errlog
        self.max_line = max_line
        self.pid: int | None = None
        self.status: int | None = None
        """The wait status once the process is reaped."""
        self.cpu = 0.0
        """Seconds of CPU the process used (user and system), once it is reaped."""
        self.overrun = False
        """Whether it sent a line longer than ``max_line`` (it was ended for it)."""
        self.ended = False
        """Whether the host ended it (:meth:`end`)."""
        self.output_ended = False
        """Whether its stdout ended (or a line too long ended the link)."""
        self.mark = secrets.token_hex(16)
        """The value of :data:`~mcs_host._descendants.MARK` its processes inherit."""
        self._popen: subprocess.Popen[bytes] | None = None
        self._channel: socket.socket | None = None
        """The socket to have the fork server reap it, when the fork server started it."""
        self._exited: asyncio.Event | None = None
        self._pidfd: int | None = None
        self._poller: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- the process -----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether it was started and has not been reaped."""
        return self.pid is not None and self.status is None

    def how(self, during: bool = False) -> str | None:
        """How it ended (``killed by SIGSEGV``, ``exited with status 0``, ``... during the
        call`` when it exited ``during`` one); ``None`` while it runs or before it starts."""
        if self.status is None:
            return None
        if self.status == _UNKNOWN:
            return "ended; how is not known (its fork server did not say)"
        code = os.waitstatus_to_exitcode(self.status)
        if self.ended and code == -signal.SIGKILL:
            return "ended by the host, with SIGKILL"  # for another call, or to close it
        if code < 0:
            return f"killed by {signal_name(-code)}"
        return f"exited with status {code}" + (" during the call" if during else "")

    @property
    def killed_by(self) -> int | None:
        """The signal that killed it, once reaped."""
        if self.status is None or self.status == _UNKNOWN:
            return None
        code = os.waitstatus_to_exitcode(self.status)
        return -code if code < 0 else None

    def end(self) -> None:
        """End it at once: SIGKILL to it, its process group and every descendant (on the
        link's event loop, where it is reaped, so its pid cannot be another's meanwhile)."""
        if self.running:
            self.ended = True
            assert self.pid is not None
            end_tree(self.pid)
            end_marked(self.mark)

    async def wait(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for it to be reaped; whether it was."""
        if self._exited is None:
            return self.pid is None or self.status is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._exited.wait(), timeout)
        return self._exited.is_set()

    def _spawn(self) -> tuple[IO[bytes], IO[bytes]]:
        """Start it, by the fork server if it has ``fork`` arguments and there is one, else
        as a process of its own: its stdin and stdout."""
        from mcp.client.stdio import get_default_environment  # noqa: PLC0415 - the mcp extra

        env = get_default_environment() | (self.env or {}) | {MARK: self.mark}
        if self.fork is not None:
            started = self._fork(env)
            if started is not None:
                return started
        popen = self._popen = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errlog if self.errlog is not None else _stderr(),
            env=env,
            cwd=self.cwd,
            start_new_session=True,  # a process group of its own, which end_tree ends
        )
        self.pid = popen.pid
        assert popen.stdin is not None
        assert popen.stdout is not None
        return popen.stdin, popen.stdout

    def _fork(self, env: dict[str, str]) -> tuple[IO[bytes], IO[bytes]] | None:
        """Have the fork server start it (in a session of its own): its stdin and stdout,
        or None when there is no fork server to ask."""
        assert self.fork is not None
        errlog = self.errlog if self.errlog is not None else _stderr()
        err = errlog.fileno() if errlog is not None else 2
        stdin, into = os.pipe()
        out, stdout = os.pipe()
        try:
            stdio = (stdin, stdout, err)
            started = _forks.spawn(list(self.fork), env, self.cwd or os.getcwd(), stdio)
        finally:
            os.close(stdin)
            os.close(stdout)
        if started is None:
            os.close(into)
            os.close(out)
            return None
        self.pid, self._channel = started
        return open(into, "wb", buffering=0), open(out, "rb", buffering=0)

    def _watch(self) -> None:
        """Learn of the exit when it happens: a pidfd on Linux, else a poll."""
        assert self._loop is not None
        assert self.pid is not None
        self._exited = asyncio.Event()
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # not Linux, or an old kernel
            self._poller = self._loop.create_task(self._poll())  # held while it runs
            return
        self._loop.add_reader(self._pidfd, self._reap)

    async def _poll(self) -> None:
        while not self._reap(peek=True):
            await asyncio.sleep(_POLL)

    def _reap(self, peek: bool = False) -> bool:
        """If it has exited: end what it left in its group and tree (while its pid still
        holds), reap it and note its status and CPU time; whether it had exited."""
        if self.status is not None:
            return True
        assert self.pid is not None
        if peek and not _has_exited(self.pid, self._popen):
            return False
        if self._pidfd is not None and self._loop is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        if not self.ended:  # else end() has ended them already
            end_tree(self.pid)
            end_marked(self.mark)  # what it orphaned when it died, wherever it went
        if self._channel is not None:  # the fork server's child: it reaps it
            reaped = _forks.reap(self._channel)
            self._channel = None
            status, self.cpu = reaped if reaped is not None else (_UNKNOWN, 0.0)
        else:
            try:
                _, status, usage = os.wait4(self.pid, 0)
                self.cpu = usage.ru_utime + usage.ru_stime
            except (ChildProcessError, AttributeError):  # reaped elsewhere, or no wait4
                assert self._popen is not None
                code = self._popen.wait()
                status = (-code & 0x7F) if code < 0 else (code & 0xFF) << 8
        self.status = status
        if self._popen is not None:  # Popen must not wait for it again
            self._popen.returncode = os.waitstatus_to_exitcode(status)
        assert self._exited is not None
        self._exited.set()
        return True

    # -- the link --------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def link(self) -> AsyncIterator[tuple[Any, Any]]:
        """Start the process and hand over its stdio as the SDK's two streams; leaving
        ends it (gracefully, unless it was ended already)."""
        import anyio  # noqa: PLC0415 - the mcp extra's
        from mcp.shared.message import SessionMessage  # noqa: PLC0415

        self._loop = asyncio.get_running_loop()
        stdin, stdout = self._spawn()
        self._watch()
        out: asyncio.BaseTransport | None = None
        try:
            reader = asyncio.StreamReader(limit=self.max_line)
            out, _ = await self._loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), stdout
            )
            pipe = _Pipe()
            into, _ = await self._loop.connect_write_pipe(lambda: pipe, stdin)
        except BaseException:
            if out is not None:
                out.close()  # its stdout's descriptor with it
            self.end()
            raise
        read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
        wrote = anyio.Event()
        read = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(self._read, reader, read_send, read)
            group.start_soon(self._write, into, pipe, write_receive, wrote)
            try:
                yield read_receive, write_send
            finally:
                with anyio.CancelScope(shield=True):
                    read_receive.close()  # the reader discards what still comes
                    write_send.close()  # the writer sends what it took, then stops
                    with anyio.move_on_after(_FLUSH):
                        await wrote.wait()
                    if wrote.is_set():
                        into.close()  # its stdin ends: a server exits
                    else:
                        into.abort()  # what it did not read is dropped
                    if not await self.wait(0 if self.ended else GRACE):
                        self.end()
                        await self.wait(REAP)
                    with anyio.move_on_after(_DRAIN):
                        await read.wait()
                    out.close()
                group.cancel_scope.cancel()

    async def _read(self, reader: asyncio.StreamReader, send: Any, done: Any) -> None:
        """Each line of stdout as a message; at its end (or a line too long) the stream
        closes, and the session fails what waits for an answer."""
        import anyio  # noqa: PLC0415 - the mcp extra's

        try:
            async with send:
                while True:
                    try:
                        line = await reader.readuntil(b"\n")
                    except asyncio.IncompleteReadError:
                        self.output_ended = True  # (a last line without a newline is none)
                        return
                    except asyncio.LimitOverrunError:
                        self.overrun = self.output_ended = True
                        self.end()
                        return
                    except (OSError, ValueError):  # the pipe broke
                        self.output_ended = True
                        return
                    try:
                        await send.send(_parse(line))
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        break  # nobody listens any more
            with contextlib.suppress(Exception):  # keep it from blocking on a full pipe
                while await reader.read(1 << 16):
                    pass
        finally:
            self.output_ended = True
            done.set()

    async def _write(
        self, transport: asyncio.WriteTransport, pipe: _Pipe, receive: Any, done: Any
    ) -> None:
        """Each message the session sends, as one JSON line on stdin; a process that cannot
        be written to is ended (its output ends with it, and the session sees that)."""
        import anyio  # noqa: PLC0415 - the mcp extra's

        try:
            async with receive:
                async for message in receive:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    if pipe.lost or transport.is_closing():
                        raise BrokenPipeError("its stdin is closed")
                    transport.write(text.encode() + b"\n")
                    await pipe.drained()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            self.end()
        finally:
            done.set()


class _Pipe(asyncio.Protocol):
    """The write end of a pipe, with the transport's flow control as :meth:`drained`."""

    def __init__(self) -> None:
        self.lost = False
        self._paused: asyncio.Future[None] | None = None

    def pause_writing(self) -> None:
        self._paused = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._paused is not None and not self._paused.done():
            self._paused.set_result(None)
        self._paused = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.resume_writing()

    async def drained(self) -> None:
        if self._paused is not None:
            await self._paused


def _parse(line: bytes) -> Any:
    """One line as the SDK's stdio client reads it: a ``SessionMessage``, or the error that
    says why it is none (the session passes it on)."""
    import mcp_types as types  # noqa: PLC0415 - the mcp extra's
    from mcp.shared.message import SessionMessage  # noqa: PLC0415

    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        return exc
    return SessionMessage(message)


def _has_exited(pid: int, popen: subprocess.Popen[bytes] | None) -> bool:
    """Whether ``pid`` has exited, without reaping it where the platform can tell."""
    if hasattr(os, "waitid"):
        try:
            return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True
    return popen is not None and popen.poll() is not None


def _stderr() -> Any:
    """This process's stderr for a child, or ``None`` (descriptor 2) when it has no file."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    return sys.stderr


def signal_name(number: int) -> str:
    """``SIGSEGV`` for 11; ``signal 64`` for a number without a name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
