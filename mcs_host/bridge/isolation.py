"""One installed driver in a process of its own, mounted as an MCP server; and an MCP
server's distribution run by a child host that verifies it first (:class:`ServerProcess`).

The parent has verified the driver and checked it from its metadata; it then starts
``python -I -m mcs_host serve --isolated LABEL``: the console script's locked-down start, with
no ``PYTHON*`` variables, no user site and no current directory on the path. The child reads
the one-mount configuration the parent wrote for it (:data:`CONFIG_VARIABLE`), applies the
mount's resource limits, verifies the driver again, imports it and serves it over stdio. The
parent talks to it as an :class:`~mcs_host.bridge.client.MCPToolDriver` does.

A call that crashes the child, makes it exit, or outlasts the call timeout fails with a
:class:`ToolError` that names the driver and repeats why the child said it failed (its
``error:`` lines, a traceback's last line); the
child is ended (its whole process group) and the next call starts another, at most
``restarts`` times in a row. A cancelled call ends the child too: a driver's call cannot be
stopped inside its process.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from mcs_host.contract import DriverMeta

from .client import MCPToolDriver, _Session
from .server import META_KEY

__all__ = ["IsolatedDriver"]  # ServerProcess: mounted by the host only

CONFIG_VARIABLE = "MCS_HOST_ISOLATED_CONFIG"
"""The environment variable that carries a child host's configuration (JSON)."""
SERVING = "mcs-host: serving\n"
"""What a child writes on stderr once it has loaded its driver (or verified and imported
its server) and begins to serve."""
_TAIL = 4096
"""Bytes of the child's stderr read to say why it failed."""


class _Child(MCPToolDriver):
    """A server run by a child ``mcs-host``, whose stderr is kept to say why it failed."""

    _cannot = "cannot start"

    def _errlog(self) -> Any:
        return tempfile.TemporaryFile()

    def _why(self, session: _Session, cause: str) -> str:
        said = _said(session.errlog)
        return f"its process said: {said}" if said else f"its process ended ({cause})"

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
    last line of a traceback since it began to serve; what a driver prints is not that."""
    if errlog is None or errlog.closed:
        return ""
    try:
        fd = errlog.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, _TAIL, max(0, size - _TAIL))  # the child's offset stays
    except OSError:
        return ""
    text = data.decode("utf-8", "replace").rpartition(SERVING)[2]
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    errors = [line.removeprefix("error: ") for line in lines if line.startswith("error: ")]
    if not errors and "Traceback (most recent call last):" in lines:
        errors = lines[-1:]  # the exception that ended it
    return "; ".join(errors)[:1000]
