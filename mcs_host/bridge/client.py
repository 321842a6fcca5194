"""An MCP server as a ToolDriver: its tools mounted in the orchestrator like any driver's.

The SDK's ``Client`` talks to the server (a command started over stdio by the host's own
transport, ``_stdio``, or a streamable HTTP URL) from an event loop of the driver's own, in a
thread: ``execute_tool`` waits for the answer, ``aexecute_tool`` awaits it without blocking
the caller's loop (cancelling the caller cancels the request). A call is bounded by
``call_timeout``; a result the server marks ``isError``, a timeout and a server that dies
mid-call fail that call with a :class:`ToolError` (naming how its process ended). A
connection that timed out or failed is closed at once (a stdio server's process, its group
and its descendants get SIGKILL) and the next call connects again, at most ``restarts``
times in a row. :meth:`MCPToolDriver.close` (at interpreter exit too, for every driver at
once) closes a stdio server's stdin, and ends it if it has not exited a second later.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import hashlib
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mcs_host.contract import DriverMeta, Tool
from mcs_host.interfaces import MCSToolDriver, ToolError, report_progress

from . import _stdio
from ._shapes import as_result, as_tool, megabytes, summary, wraps

__all__ = ["MCPToolDriver"]


class MCPToolDriver(MCSToolDriver):
    """The tools of the MCP server at ``server``: a URL (``http://``, ``https://``:
    streamable HTTP) or a command line (a sequence: started over stdio with ``env`` and
    ``cwd``). ``name`` is the driver's name in the stack."""

    def __init__(
        self,
        server: str | Sequence[str],
        *,
        name: str = "mcp",
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        call_timeout: float | None = 60.0,
        connect_timeout: float = 30.0,
        restarts: int = 3,
    ) -> None:
        if isinstance(server, str) and not server.startswith(("http://", "https://")):
            raise ValueError(f"{server!r}: give an http(s) URL, or the command as a list")
        if not isinstance(server, str) and not server:
            raise ValueError("the server command is empty")
        self.server = server if isinstance(server, str) else tuple(server)
        self.call_timeout = call_timeout
        self.connect_timeout = connect_timeout
        self.restarts = restarts
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        where = self.server if isinstance(self.server, str) else " ".join(self.server)
        self.meta = DriverMeta(
            id=f"mcp-{hashlib.sha256(where.encode()).hexdigest()[:16]}",
            name=name,
            version="0.0.0",
        )
        self._where = where
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._session: _Session | None = None
        self._closings: set[asyncio.Task[None]] = set()
        self._failures = 0

    # -- MCSToolDriver ---------------------------------------------------------------------------

    def list_tools(self) -> list[Tool]:
        return [as_tool(t) for t in self._connected().tools]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        future = self._submit(tool_name, arguments, contextvars.copy_context())
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise ToolError(f"the call of {tool_name!r} was cancelled") from None

    async def aexecute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        """:meth:`execute_tool` awaited: the request runs on the driver's loop, and
        cancelling the caller cancels it."""
        future = self._submit(tool_name, arguments, contextvars.copy_context())
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Disconnect (a stdio server's process ends) and stop the driver's loop."""
        self._finish_close(self._begin_close())

    def _begin_close(self) -> tuple[asyncio.AbstractEventLoop, Any] | None:
        """Start closing every connection, on the driver's loop: (the loop, the future)."""
        with self._lock:
            session, loop = self._session, self._loop
            self._session = self._loop = None
        _OPEN.discard(self)
        if loop is None:
            return None
        return loop, asyncio.run_coroutine_threadsafe(self._close_all(session), loop)

    def _finish_close(self, closing: tuple[asyncio.AbstractEventLoop, Any] | None) -> None:
        """Wait for what :meth:`_begin_close` started, then stop the driver's loop."""
        if closing is None:
            return
        loop, closed = closing
        with contextlib.suppress(Exception):
            closed.result(self.connect_timeout * 2)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(self.connect_timeout)
            self._thread = None
        if not loop.is_running():
            loop.close()

    @property
    def failures(self) -> int:
        """How many times in a row the connection failed (0 after a call that worked)."""
        return self._failures

    @property
    def failed(self) -> bool:
        """Whether it failed more times in a row than it may restart (then it never will)."""
        return self._failures > self.restarts

    # -- the connection --------------------------------------------------------------------------

    def _submit(
        self, tool_name: str, arguments: dict[str, Any], caller: contextvars.Context
    ) -> concurrent.futures.Future[Any]:
        session = self._connected()
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(
            self._call(session, tool_name, arguments, caller), self._loop
        )

    async def _call(
        self,
        session: _Session,
        tool_name: str,
        arguments: dict[str, Any],
        caller: contextvars.Context,
    ) -> Any:
        async def progress(done: float, total: float | None, message: str | None) -> None:
            caller.run(report_progress, done, total, message)  # to whoever called the tool

        meta = self._request_meta()
        try:
            async with asyncio.timeout(self.call_timeout):
                result = await session.call(tool_name, arguments, self.call_timeout, progress, meta)
        except TimeoutError:
            session.kill()  # it may still be at it: ended now, started again next time
            await session.settle(ended=True)
            self._drop(session)
            raise ToolError(
                f"{self._describe()} did not answer {tool_name!r} within "
                f"{self.call_timeout:g} s{self._ended(session)}"
            ) from None
        except asyncio.CancelledError:
            if self._end_on_cancel:
                session.kill()
                self._drop(session)
            raise
        except ToolError:
            raise
        except Exception as exc:
            await session.settle()  # its output ended: its exit says why
            cause = self._why(session, summary(exc), during=True)
            self._drop(session)
            raise ToolError(f"{self._describe()} failed during {tool_name!r}: {cause}") from None
        self._failures = 0
        return as_result(tool_name, result, wraps(session.schema(tool_name)))

    _end_on_cancel = False
    """Whether a cancelled call ends the connection (and its process)."""

    def _describe(self) -> str:
        """The server, as messages name it."""
        return f"the MCP server {self._where!r}"

    def _why(self, session: _Session, cause: str, during: bool = False) -> str:
        """Why ``session`` failed (``during`` a call, or starting): how its process ended
        when it did, else ``cause``."""
        if session.child is not None and session.child.overrun:
            return self._overrun(session.child)
        ended = self._ending(session, during)
        return f"its process ended ({ended})" if ended else cause

    def _ending(self, session: _Session, during: bool) -> str | None:
        """How ``session``'s process ended (``None``: it has not, or there is none)."""
        return session.child.how(during) if session.child is not None else None

    def _overrun(self, child: _stdio.Child) -> str:
        """Why a call failed whose server sent a line longer than the host reads."""
        return (
            f"it sent a message of more than {megabytes(child.max_line)} MB, more than the "
            "host reads from a server; its process is ended"
        )

    _max_line = 64 * 2**20  # the longest message of a stdio server (it is ended past it)

    def _request_meta(self) -> dict[str, Any] | None:
        return None  # what each call's ``_meta`` carries

    def _ended(self, session: _Session) -> str:
        return ""  # what a timeout's message adds about the end of the server

    def _drop(self, session: _Session) -> None:
        """Mark ``session`` broken, end its process at once and close it in the background
        (on the driver's loop)."""
        if session.broken and session.closing:
            return
        session.broken = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._close_later, session)

    def _close_later(self, session: _Session) -> None:
        """End ``session``'s process and close it in a task of the driver's loop, which
        :meth:`close` waits for."""
        session.kill()
        task = asyncio.get_running_loop().create_task(session.close())
        self._closings.add(task)
        task.add_done_callback(self._closings.discard)

    async def _close_all(self, session: _Session | None) -> None:
        """Close ``session`` and wait for the connections being closed already."""
        if session is not None:
            await session.close()
        if self._closings:
            await asyncio.wait(set(self._closings), timeout=self.connect_timeout)

    def _connected(self) -> _Session:
        with self._lock:
            if self._session is not None and not self._session.broken:
                return self._session
            if self._session is not None:  # broken: it counts as a failure once
                self._failures += 1
                self._drop(self._session)
                self._session = None
            if self._failures > self.restarts:
                raise ToolError(
                    f"{self._describe()} failed {self._failures} times in a row; it is not "
                    f"started again (mount it again to retry){self._last}"
                )
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name=f"mcp {self._where}", daemon=True
                )
                self._thread.start()
                _OPEN.add(self)
            session = _Session(self._target())
            opened = asyncio.run_coroutine_threadsafe(session.open(), self._loop)
            try:
                opened.result(self.connect_timeout)
            except Exception as exc:
                self._failures += 1
                opened.cancel()
                settled = asyncio.run_coroutine_threadsafe(session.settle(), self._loop)
                with contextlib.suppress(Exception):  # how it ended, if it did
                    settled.result(_stdio.SETTLE * 2)
                cause = self._why(session, summary(exc))
                self._drop(session)
                self._last = f"; the last time: {cause}"
                raise ToolError(f"{self._cannot} {self._describe()}: {cause}") from None
            self._session = session
            return session

    _cannot = "cannot connect to"  # how a failed connection's message begins
    _last = ""  # the last failure to connect, as the broken driver's message repeats it

    def _errlog(self) -> Any:
        return None  # where a stdio server's stderr goes (None: this process's stderr)

    def _target(self) -> str | _stdio.Child:
        """The URL, or the process to start (not started yet)."""
        if isinstance(self.server, str):
            return self.server
        command, env, errlog = self.server, self._env, self._errlog()
        return _stdio.Child(command, env=env, cwd=self._cwd, errlog=errlog, max_line=self._max_line)


_OPEN: set[MCPToolDriver] = set()  # the drivers with a loop running, closed at exit


def close_together(drivers: Iterable[MCPToolDriver]) -> None:
    """Close ``drivers`` at once: each server's grace to exit runs beside the others'."""
    closing = [(driver, driver._begin_close()) for driver in drivers]
    for driver, started in closing:
        driver._finish_close(started)


atexit.register(lambda: close_together(list(_OPEN)))  # at exit, every driver still open


class _Session:
    """One connection: its owner task enters the SDK's client and leaves it, as anyio wants
    (the same task); calls run as other tasks on the same loop. ``target`` is a URL or the
    process to start (:class:`_stdio.Child`)."""

    __slots__ = (
        "_closing",
        "_owner",
        "_ready",
        "broken",
        "child",
        "client",
        "closing",
        "instructions",
        "target",
        "tools",
    )

    def __init__(self, target: str | _stdio.Child) -> None:
        self.target = target
        self.child = target if isinstance(target, _stdio.Child) else None
        """The server's process, when the host starts it."""
        self.client: Any = None
        self.tools: list[Any] = []
        self.instructions: str | None = None
        self.broken = False
        self.closing = False
        self._closing: asyncio.Event | None = None
        self._ready: asyncio.Future[None] | None = None
        self._owner: asyncio.Task[None] | None = None

    async def open(self) -> None:
        self._closing = asyncio.Event()
        self._ready = asyncio.get_running_loop().create_future()
        self._owner = asyncio.create_task(self._own())
        await self._ready

    async def _own(self) -> None:
        from mcp import Client  # noqa: PLC0415 - the mcp extra

        assert self._ready is not None
        assert self._closing is not None
        target: Any = self.target if self.child is None else self.child.link()
        try:
            async with Client(target) as client:
                self.client = client
                self.instructions = client.instructions
                self.tools = list((await client.list_tools()).tools)
                self._ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:  # the connection ends: calls in flight fail
            self.broken = True
            if not self._ready.done():
                self._ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            if isinstance(exc, asyncio.CancelledError):
                self.kill()  # its link could not close in order
                raise

    def schema(self, name: str) -> Any:
        """The output schema of the tool ``name``, as the server listed it."""
        return next((getattr(t, "output_schema", None) for t in self.tools if t.name == name), None)

    async def call(
        self, name: str, arguments: dict[str, Any], timeout: float | None, progress: Any, meta: Any
    ) -> Any:
        if self.broken or self.client is None:
            raise ConnectionError("the connection to the server is closed")
        return await self.client.call_tool(
            name, arguments, read_timeout_seconds=timeout, progress_callback=progress, meta=meta
        )

    def kill(self) -> None:
        """End the server's process at once, if the host started one (on the loop)."""
        if self.child is not None:
            self.child.end()

    async def settle(self, ended: bool = False) -> None:
        """Wait (bounded) for the process to be reaped once it was ``ended``, or once its
        output ended: then its exit says what ended the connection."""
        if self.child is not None and (ended or self.child.output_ended):
            await self.child.wait(_stdio.REAP if ended else _stdio.SETTLE)

    async def close(self) -> None:
        """End the connection: a stdio server's stdin is closed, and its process ended if it
        has not exited within :data:`_stdio.GRACE` seconds (at once if it was ended)."""
        self.closing = True
        if self._closing is not None:
            self._closing.set()
        if self._owner is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._owner), 10)
            except Exception:  # it did not end in time, or ended badly: stop it
                self.kill()
                self._owner.cancel()
        if self.child is not None and self.child.errlog is not None:
            self.child.errlog.close()
