"""An MCP server as a ToolDriver: its tools mounted in the orchestrator like any driver's.

The SDK's ``Client`` talks to the server (a command started over stdio, or a streamable
HTTP URL) from an event loop of the driver's own, in a thread, so the driver serves both the
sync path (``execute_tool`` waits for the answer) and the async one (``aexecute_tool``
awaits it without blocking the caller's loop; cancelling the caller cancels the request).
A call is bounded by ``call_timeout``; a result the server marks ``isError``, a timeout and a
server that dies mid-call each fail that call with a :class:`ToolError`, and the next call
connects again (at most ``restarts`` times in a row before the driver says it is broken).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from mcs_host.contract import DriverMeta, Tool, ToolParameter
from mcs_host.interfaces import MCSToolDriver, ToolError

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
        self._failures = 0

    # -- MCSToolDriver ---------------------------------------------------------------------------

    def list_tools(self) -> list[Tool]:
        return [_tool(t) for t in self._connected().tools]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        future = self._submit(tool_name, arguments)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise ToolError(f"the call of {tool_name!r} was cancelled") from None

    async def aexecute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        """:meth:`execute_tool` awaited: the request runs on the driver's loop, and
        cancelling the caller cancels it."""
        return await asyncio.wrap_future(self._submit(tool_name, arguments))

    def close(self) -> None:
        """Disconnect (a stdio server's process ends) and stop the driver's loop."""
        with self._lock:
            session, loop = self._session, self._loop
            self._session = self._loop = None
        if loop is None:
            return
        if session is not None:
            asyncio.run_coroutine_threadsafe(session.close(), loop).result(self.connect_timeout)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(self.connect_timeout)
            self._thread = None
        if not loop.is_running():
            loop.close()

    # -- the connection --------------------------------------------------------------------------

    def _submit(self, tool_name: str, arguments: dict[str, Any]) -> concurrent.futures.Future[Any]:
        session = self._connected()
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(
            self._call(session, tool_name, arguments), self._loop
        )

    async def _call(self, session: _Session, tool_name: str, arguments: dict[str, Any]) -> Any:
        try:
            async with asyncio.timeout(self.call_timeout):
                result = await session.call(tool_name, arguments, self.call_timeout)
        except TimeoutError:
            session.broken = True  # the server may still be at it: start again next time
            raise ToolError(
                f"the MCP server {self._where!r} did not answer {tool_name!r} within "
                f"{self.call_timeout:g} s"
            ) from None
        except (asyncio.CancelledError, ToolError):
            raise
        except Exception as exc:
            session.broken = True
            raise ToolError(
                f"the MCP server {self._where!r} failed during {tool_name!r}: "
                f"{type(exc).__name__}: {exc}"
            ) from None
        self._failures = 0
        return _result(tool_name, result)

    def _connected(self) -> _Session:
        with self._lock:
            if self._session is not None and not self._session.broken:
                return self._session
            if self._failures > self.restarts:
                raise ToolError(
                    f"the MCP server {self._where!r} failed {self._failures} times in a row; "
                    "it is not started again (mount it again to retry)"
                )
            if self._session is not None:
                self._failures += 1
                assert self._loop is not None
                stale = self._session
                asyncio.run_coroutine_threadsafe(stale.close(), self._loop)
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name=f"mcp {self._where}", daemon=True
                )
                self._thread.start()
            session = _Session(self._target())
            opened = asyncio.run_coroutine_threadsafe(session.open(), self._loop)
            try:
                opened.result(self.connect_timeout)
            except Exception as exc:
                self._failures += 1
                raise ToolError(
                    f"cannot connect to the MCP server {self._where!r}: {type(exc).__name__}: {exc}"
                ) from None
            self._session = session
            return session

    def _target(self) -> Any:
        if isinstance(self.server, str):
            return self.server
        from mcp import StdioServerParameters  # noqa: PLC0415 - the mcp extra

        command, *args = self.server
        return StdioServerParameters(command=command, args=args, env=self._env, cwd=self._cwd)


class _Session:
    """One connection: its owner task enters the SDK's client and leaves it, as anyio wants
    (the same task); calls run as other tasks on the same loop."""

    __slots__ = ("_closing", "_owner", "_ready", "broken", "client", "target", "tools")

    def __init__(self, target: Any) -> None:
        self.target = target
        self.client: Any = None
        self.tools: list[Any] = []
        self.broken = False
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
        try:
            async with Client(self.target) as client:
                self.client = client
                self.tools = list((await client.list_tools()).tools)
                self._ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:  # the connection ends: calls in flight fail
            self.broken = True
            if not self._ready.done():
                self._ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def call(self, name: str, arguments: dict[str, Any], timeout: float | None) -> Any:
        if self.broken or self.client is None:
            raise ConnectionError("the connection to the server is closed")
        return await self.client.call_tool(name, arguments, read_timeout_seconds=timeout)

    async def close(self) -> None:
        if self._closing is not None:
            self._closing.set()
        if self._owner is not None:
            try:
                await asyncio.wait_for(self._owner, 10)
            except Exception:  # it did not end in time, or ended badly: stop it
                self._owner.cancel()


def _tool(tool: Any) -> Tool:
    """An MCP tool as the contract's ``Tool``: each property a parameter with its schema
    (local ``$ref``s written out)."""
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    definitions = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    required = set(schema.get("required") or ())
    parameters = [
        ToolParameter(
            name=key,
            description=str(value.get("description") or key) if isinstance(value, dict) else key,
            required=key in required,
            schema=_inlined(value, definitions) if isinstance(value, dict) else None,
        )
        for key, value in (schema.get("properties") or {}).items()
    ]
    return Tool(
        name=tool.name,
        title=getattr(tool, "title", None) or None,
        description=tool.description or tool.name,
        parameters=parameters,
    )


def _inlined(schema: Any, definitions: Mapping[str, Any], depth: int = 0) -> Any:
    """``schema`` with ``{"$ref": "#/$defs/X"}`` replaced by ``X`` (not past depth 32)."""
    if depth > 32:
        return {}
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
            target = definitions.get(ref.rsplit("/", 1)[1], {})
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return _inlined({**target, **rest}, definitions, depth + 1)
        return {k: _inlined(v, definitions, depth + 1) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_inlined(item, definitions, depth + 1) for item in schema]
    return schema


def _result(tool_name: str, result: Any) -> Any:
    """A tool result as the orchestrator hands it on: structured content when there is
    some, else the text; a result the server marks as an error raises."""
    texts = [getattr(block, "text", None) for block in result.content]
    text = "\n".join(t for t in texts if isinstance(t, str))
    if result.is_error:
        raise ToolError(text or f"the MCP server reported an error for {tool_name!r}")
    if result.structured_content is not None:
        return result.structured_content
    if all(isinstance(t, str) for t in texts):
        return text
    return [
        block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content
    ]
