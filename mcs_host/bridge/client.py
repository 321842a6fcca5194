"""An MCP server as a ToolDriver: its tools mounted in the orchestrator like any driver's.

The SDK's ``Client`` talks to the server (a command started over stdio, or a streamable
HTTP URL) from an event loop of the driver's own, in a thread, so the driver serves both the
sync path (``execute_tool`` waits for the answer) and the async one (``aexecute_tool``
awaits it without blocking the caller's loop; cancelling the caller cancels the request).
A call is bounded by ``call_timeout``; a result the server marks ``isError``, a timeout and a
server that dies mid-call each fail that call with a :class:`ToolError`. A connection that
timed out or failed is closed at once (a stdio server's process is ended, its whole process
group killed if it does not exit), and the next call connects again: at most ``restarts``
times in a row, then the driver says it is broken. :meth:`MCPToolDriver.close` (also run at
interpreter exit) disconnects.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import hashlib
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from mcs_host.contract import DriverMeta, Tool
from mcs_host.interfaces import MCSToolDriver, ToolError, report_progress

from ._shapes import as_result, as_tool, wraps

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
        with self._lock:
            session, loop = self._session, self._loop
            self._session = self._loop = None
        if loop is None:
            return
        atexit.unregister(self.close)
        closed = asyncio.run_coroutine_threadsafe(self._close_all(session), loop)
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
        """Whether it failed more times in a row than it may be restarted: it is not
        connected again."""
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

        try:
            async with asyncio.timeout(self.call_timeout):
                result = await session.call(tool_name, arguments, self.call_timeout, progress)
        except TimeoutError:
            self._drop(session)  # the server may still be at it: end it, start again next time
            raise ToolError(
                f"{self._describe()} did not answer {tool_name!r} within "
                f"{self.call_timeout:g} s{self._ended(session)}"
            ) from None
        except asyncio.CancelledError:
            if self._end_on_cancel:
                self._drop(session)
            raise
        except ToolError:
            raise
        except Exception as exc:
            cause = self._why(session, _summary(exc))
            self._drop(session)
            raise ToolError(f"{self._describe()} failed during {tool_name!r}: {cause}") from None
        self._failures = 0
        return as_result(tool_name, result, wraps(session.schema(tool_name)))

    _end_on_cancel = False
    """Whether a cancelled call ends the connection (a process that cannot stop a call
    itself is ended instead)."""

    def _describe(self) -> str:
        """The server, as messages name it."""
        return f"the MCP server {self._where!r}"

    def _why(self, session: _Session, cause: str) -> str:
        """Why ``session`` failed, as a message says it."""
        return cause

    def _ended(self, session: _Session) -> str:
        """What a message adds about the end of ``session``'s server."""
        return ""

    def _drop(self, session: _Session) -> None:
        """Mark ``session`` broken and close it in the background (on the driver's loop)."""
        if session.broken and session.closing:
            return
        session.broken = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._close_later, session)

    def _close_later(self, session: _Session) -> None:
        """Close ``session`` in a task of the driver's loop, which :meth:`close` waits for."""
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
                atexit.register(self.close)
            session = _Session(self._target(), self._errlog())
            opened = asyncio.run_coroutine_threadsafe(session.open(), self._loop)
            try:
                opened.result(self.connect_timeout)
            except Exception as exc:
                self._failures += 1
                opened.cancel()
                cause = self._why(session, _summary(exc))
                self._drop(session)
                self._last = f"; the last time: {cause}"
                raise ToolError(f"{self._cannot} {self._describe()}: {cause}") from None
            self._session = session
            return session

    _cannot = "cannot connect to"
    """How a failed connection's message begins."""
    _last = ""
    """The last failure to connect, as the broken driver's message repeats it."""

    def _errlog(self) -> Any:
        """Where a stdio server's stderr goes (default: this process's stderr)."""
        return None

    def _target(self) -> Any:
        if isinstance(self.server, str):
            return self.server
        from mcp import StdioServerParameters  # noqa: PLC0415 - the mcp extra

        command, *args = self.server
        return StdioServerParameters(command=command, args=args, env=self._env, cwd=self._cwd)


class _Session:
    """One connection: its owner task enters the SDK's client and leaves it, as anyio wants
    (the same task); calls run as other tasks on the same loop."""

    __slots__ = (
        "_closing",
        "_owner",
        "_ready",
        "broken",
        "client",
        "closing",
        "errlog",
        "instructions",
        "target",
        "tools",
    )

    def __init__(self, target: Any, errlog: Any = None) -> None:
        self.target = target
        self.errlog = errlog
        """The file a stdio server's stderr goes to, when it is kept."""
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
        target = self.target
        if self.errlog is not None:
            from mcp.client.stdio import stdio_client  # noqa: PLC0415 - the mcp extra

            target = stdio_client(target, errlog=self.errlog)
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
                raise

    def schema(self, name: str) -> Any:
        """The output schema of the tool ``name``, as the server listed it."""
        return next((getattr(t, "output_schema", None) for t in self.tools if t.name == name), None)

    async def call(
        self, name: str, arguments: dict[str, Any], timeout: float | None, progress: Any
    ) -> Any:
        if self.broken or self.client is None:
            raise ConnectionError("the connection to the server is closed")
        return await self.client.call_tool(
            name, arguments, read_timeout_seconds=timeout, progress_callback=progress
        )

    async def close(self) -> None:
        """End the connection: the SDK closes a stdio server's stdin, then ends its process
        group if it has not exited within a few seconds."""
        self.closing = True
        if self._closing is not None:
            self._closing.set()
        if self._owner is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._owner), 10)
            except Exception:  # it did not end in time, or ended badly: stop it
                self._owner.cancel()
        if self.errlog is not None:
            self.errlog.close()


def _summary(exc: BaseException) -> str:
    """``Type: message`` of ``exc``, or of the first error inside an exception group (the
    SDK's task groups wrap what went wrong)."""
    depth = 0
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions and depth < 8:
        exc, depth = exc.exceptions[0], depth + 1
    return f"{type(exc).__name__}: {exc}"
