"""One installed driver in a process of its own, mounted as an MCP server; and an MCP
server's distribution run by a child host that verifies it first (:class:`ServerProcess`).

The parent has verified the driver and checked it from its metadata; it then starts
``python -I -m mcs_host serve --isolated LABEL``: the console script's locked-down start, with
no ``PYTHON*`` variables, no user site and no current directory on the path. The child reads
the one-mount configuration the parent wrote for it (:data:`CONFIG_VARIABLE`), applies the
mount's resource limits, verifies the driver again, imports it and serves it over stdio. The
parent talks to it as an :class:`~mcs_host.bridge.client.MCPToolDriver` does.

A call that crashes the child, makes it exit, or outlasts the call timeout fails with a
:class:`ToolError` that names the driver, how its process ended (``killed by SIGSEGV``,
``exited with status 0 during the call``, the CPU or memory limit it met) and what the child
said of it (its ``error:`` lines, a traceback's last line, a fatal error or a failed
allocation); the child is ended at once (SIGKILL to it, its process group and its
descendants) and the next call starts another, at most ``restarts`` times in a row. A
cancelled call ends the child too: a driver's call cannot be stopped inside its process.

Each call asks the child for its result once and bounded (``_meta`` under
:data:`~mcs_host.bridge.server.LINK_KEY`): a result bigger than the mount's
``max_result_mb`` fails in the child, naming the setting, and a line the parent reads may
not be longer than that bound with room for the envelope (an eighth more, and 1 MiB).
"""

from __future__ import annotations

import contextvars
import json
import os
import signal
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from mcs_host.contract import DriverMeta
from mcs_host.interfaces import ToolError

from . import _forks, _stdio
from ._shapes import LINK_KEY, META_KEY, megabytes
from .client import MCPToolDriver, _Session

__all__ = ["IsolatedDriver"]  # ServerProcess: mounted by the host only

CONFIG_VARIABLE = "MCS_HOST_ISOLATED_CONFIG"
"""The environment variable that carries a child host's configuration (JSON)."""
SERVING = "mcs-host: serving\n"
"""What a child writes on stderr once it has loaded its driver (or verified and imported
its server) and begins to serve."""
_TAIL = 4096
"""Bytes of the child's stderr read to say why it failed."""
_LAST = 5
"""The last lines of the child's stderr searched for what explains its end."""
_EXPLAINS = (
    "Fatal Python error",
    "memory allocation of",
    "MemoryError",
    "Cannot allocate memory",
    "out of memory",
)
"""What, on one of those lines, says why a process ended: printed by the interpreter, the
C library or Rust, not by a driver's code."""
_MEMORY = _EXPLAINS[1:]
"""Of those, what says that memory ran out."""
MAX_RESULT_MB = 16.0
"""A driver's ``max_result_mb`` when its configuration has none."""


class _Child(MCPToolDriver):
    """A server run by a child ``mcs-host``, whose stderr is kept to say why it failed."""

    _cannot = "cannot start"

    def _errlog(self) -> Any:
        return tempfile.TemporaryFile()

    def _why(self, session: _Session, cause: str, during: bool = False) -> str:
        child = session.child
        if child is None or child.overrun:
            return super()._why(session, cause, during)
        said = _said(child.errlog)
        ended = self._ending(session, during)
        if ended is None or (said and not during and child.killed_by is None):
            # alive, or it said why it would not start
            return f"its process said: {said}" if said else f"its process ended ({ended or cause})"
        return f"its process ended ({ended})" + (f"; it said: {said}" if said else "")

    def _ending(self, session: _Session, during: bool) -> str | None:
        """How its process ended, and the limit that ended it, if one did: the CPU limit
        (SIGXCPU, or SIGKILL with its CPU time spent), the memory limit (its last words say
        an allocation failed)."""
        how = super()._ending(session, during)
        child = session.child
        if how is None or child is None or child.ended:
            return how
        cpu, memory = self._limits.get("cpu_seconds"), self._limits.get("memory_mb")
        killed = child.killed_by
        if isinstance(cpu, int | float) and (
            killed == getattr(signal, "SIGXCPU", None)
            or (killed == signal.SIGKILL and child.cpu >= cpu - 0.1)
        ):
            return f"the CPU limit, cpu_seconds = {cpu:g}: {how}"
        if any(word in line for line in _lines(child.errlog)[-_LAST:] for word in _MEMORY):
            if isinstance(memory, int | float):
                return f"the memory limit, memory_mb = {memory:g}: {how}"
            return f"out of memory: {how}"
        return how

    _limits: Mapping[str, Any] = {}
    """The resource limits of its process, as its configuration says them."""

    def _ended(self, session: _Session) -> str:
        return "; its process is ended, and the next call starts a new one"


class ServerProcess(_Child):
    """The MCP server ``[mcp_servers.<label>]`` of an installed distribution, run by a
    child ``mcs-host run-server LABEL`` that checks the distribution again on every start
    (a restart after a crash too) and runs its console script from the verified bytes.

    ``config`` is the child's host configuration (a ``HostConfig`` as JSON): the one server,
    the registries and the policy; ``env`` the server's environment variables.
    """

    def __init__(
        self,
        label: str,
        config: str,
        *,
        search_path: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        call_timeout: float = 60.0,
        connect_timeout: float = 30.0,
        restarts: int = 3,
    ) -> None:
        command = [sys.executable, "-I", "-m", "mcs_host", "run-server", label]
        for entry in search_path or ():
            command += ["--path", entry]
        super().__init__(
            command,
            name=label,
            env={**(env or {}), CONFIG_VARIABLE: config},
            call_timeout=call_timeout,
            connect_timeout=connect_timeout,
            restarts=restarts,
        )
        self.label = label

    def _describe(self) -> str:
        return f"the MCP server {self.label!r}"


class IsolatedDriver(_Child):
    """The driver mounted as ``label``, run by a child ``mcs-host`` that serves only it.

    ``config`` is the child's whole host configuration (a ``HostConfig`` as JSON): the one
    mount, the registries and the policy. ``meta`` is what the parent knows of the driver.
    """

    _end_on_cancel = True

    def __init__(
        self,
        label: str,
        config: str,
        *,
        meta: DriverMeta,
        search_path: Sequence[str] | None = None,
        call_timeout: float = 60.0,
        connect_timeout: float = 30.0,
        restarts: int = 3,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        command = [sys.executable, "-I", "-m", "mcs_host", "serve", "--isolated", label]
        for entry in search_path or ():
            command += ["--path", entry]
        super().__init__(
            command,
            name=label,
            env={**(os.environ if environ is None else environ), CONFIG_VARIABLE: config},
            call_timeout=call_timeout,
            connect_timeout=connect_timeout,
            restarts=restarts,
        )
        self.label = label
        self.meta = meta
        self._args = command[4:]  # what follows ``python -I -m mcs_host``
        _forks.warm()
        settings = _mount(config, label)
        bound = settings.get("max_result_mb", MAX_RESULT_MB)
        self.max_result_mb = float(bound) if isinstance(bound, int | float) else MAX_RESULT_MB
        """The largest result the child may send, in MiB of JSON."""
        limits = settings.get("limits")
        self._limits = dict(limits) if isinstance(limits, dict) else {}
        size = int(self.max_result_mb * 2**20)
        self._max_line = size + size // 8 + 2**20  # room for the envelope and escapes

    def _target(self) -> str | _stdio.Child:
        """Its process, to be started by the host's fork server where there is one."""
        child = super()._target()
        if isinstance(child, _stdio.Child):
            child.fork = tuple(self._args)
        return child

    def _request_meta(self) -> dict[str, Any]:
        return {LINK_KEY: {"max_result_mb": self.max_result_mb, "label": self.label}}

    async def _call(
        self,
        session: _Session,
        tool_name: str,
        arguments: dict[str, Any],
        caller: contextvars.Context,
    ) -> Any:
        """The call; a ``MemoryError`` in a process with a memory limit names the limit."""
        try:
            return await super()._call(session, tool_name, arguments, caller)
        except ToolError as exc:
            memory = self._limits.get("memory_mb")
            said = str(exc)
            if isinstance(memory, int | float) and "MemoryError" in said:
                limit = f"its process is limited to memory_mb = {memory:g}"
                raise ToolError(f"{said} ({limit})") from None
            raise

    def _overrun(self, child: _stdio.Child) -> str:
        return (
            f"its process sent a message of more than {megabytes(child.max_line)} MB, past "
            f"max_result_mb = {self.max_result_mb:g} of driver {self.label!r} and the room "
            "for its envelope; its process is ended"
        )

    @property
    def health(self) -> dict[str, Any] | None:
        """The healthcheck result the child reported when it loaded the driver (``None``:
        not run, or not started)."""
        session = self._session
        for tool in session.tools if session is not None else ():
            facts = (tool.meta or {}).get(META_KEY)
            if isinstance(facts, dict) and facts.get("label") == self.label:
                health = facts.get("health")
                return dict(health) if isinstance(health, dict) else None
        return None

    def _describe(self) -> str:
        return f"the isolated driver {self.label!r}"


def _said(errlog: Any) -> str:
    """What a child wrote on stderr that says why it failed: its ``error:`` lines, else the
    last line of a traceback since it began to serve, else what explains an end among its
    last lines (a fatal error, a failed allocation); what a driver prints is not that."""
    lines = _lines(errlog)
    errors = [line.removeprefix("error: ") for line in lines if line.startswith("error: ")]
    if not errors and "Traceback (most recent call last):" in lines:
        errors = lines[-1:]  # the exception that ended it
    if not errors:
        errors = [x for x in lines[-_LAST:] if any(word in x for word in _EXPLAINS)]
    return "; ".join(errors)[:1000]


def _lines(errlog: Any) -> list[str]:
    """The lines, stripped and not empty, a child wrote on stderr since it began to serve
    (of its last :data:`_TAIL` bytes)."""
    if errlog is None or errlog.closed:
        return []
    try:
        fd = errlog.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, _TAIL, max(0, size - _TAIL))  # the child's offset stays
    except OSError:
        return []
    text = data.decode("utf-8", "replace").rpartition(SERVING)[2]
    return [line.strip() for line in text.splitlines() if line.strip()]


def _mount(config: str, label: str) -> dict[str, Any]:
    """The settings of the mount ``label`` in a child's configuration (JSON), as JSON."""
    try:
        settings = json.loads(config)["drivers"][label]
    except (ValueError, KeyError, TypeError):
        return {}
    return settings if isinstance(settings, dict) else {}
