"""``mcs-host serve``: load the stack as ``load`` does, then serve it to MCP clients over
stdio or streamable HTTP (the ``mcs-host[mcp]`` extra)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .options import (
    AllowExtensionsOption,
    AllowUnverifiedOption,
    ConfigOption,
    HealthcheckOption,
    LabelsArgument,
    RegistryKeyOption,
    RegistryOption,
    SearchPathOption,
    SetOption,
    StrictOption,
    ThresholdOption,
    config_from_options,
    fail,
)

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

_EXTRA = "serve needs the MCP extra: pip install 'mcs-host[mcp]'"
_GRACE = 3.0
"""Seconds a signalled stdio server has to close in order before it exits anyway."""


def _exit_quietly(number: int, frame: object) -> None:
    raise SystemExit(0)


def serve_command(
    labels: LabelsArgument = None,
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            help="Serve streamable HTTP on HOST:PORT (HOST defaults to 127.0.0.1) instead of "
            "stdio.",
            metavar="HOST:PORT",
        ),
    ] = None,
    config: ConfigOption = None,
    registry: RegistryOption = None,
    registry_key: RegistryKeyOption = None,
    threshold: ThresholdOption = None,
    allow_unverified: AllowUnverifiedOption = None,
    allow_extensions: AllowExtensionsOption = None,
    strict: StrictOption = None,
    healthcheck: HealthcheckOption = None,
    sets: SetOption = None,
    path: SearchPathOption = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="The model the instructions are written for.", metavar="NAME"),
    ] = None,
) -> None:
    """Verify and load the drivers as load does, then serve their tools to MCP clients:
    over stdio (the default, for a client that starts this command) or streamable HTTP.

    The load report goes to stderr; on stdio nothing but protocol goes to stdout.
    """
    try:
        import mcp  # noqa: F401 - the optional extra
    except ImportError:
        fail(_EXTRA)
    address = _address(http) if http is not None else None
    settings = config_from_options(
        config,
        registry,
        registry_key,
        threshold,
        allow_unverified,
        allow_extensions,
        strict=strict,
        healthcheck=healthcheck,
        sets=sets,
        path=path,
    )
    from mcs_host.bridge.server import mcp_server

    from .drivers import loaded_or_exit

    with _stdout_to_stderr():  # what a driver prints while it loads must not reach the wire
        loaded = loaded_or_exit(settings, path, labels or ())
    server = mcp_server(loaded.driver, loaded.report.records, model=model)
    if address is None:
        _serve_stdio(server)
    else:
        _serve_http(server, *address)


def _address(value: str) -> tuple[str, int]:
    host, colon, port = value.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise typer.BadParameter(
            f"{value!r}: give HOST:PORT or :PORT, e.g. 127.0.0.1:8765", param_hint="--http"
        )
    return host.strip("[]") or "127.0.0.1", int(port)


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Descriptor 1 pointed at stderr for the duration, then put back."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _serve_stdio(server: Server[Any]) -> None:
    """Serve until the client closes stdin, or SIGINT or SIGTERM ends it: exit 0 in all
    three, the connection closed in order."""
    import signal

    import anyio
    from mcp.server.stdio import stdio_server

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    def stop(number: int, frame: object) -> None:
        # unwind as Ctrl-C does; the thread that reads stdin cannot be interrupted, so the
        # process ends after a grace period even if it is still blocked there
        threading.Timer(_GRACE, os._exit, (0,)).start()
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with suppress(KeyboardInterrupt):
        anyio.run(serve)


def _serve_http(server: Server[Any], host: str, port: int) -> None:
    """Serve until SIGINT or SIGTERM: uvicorn shuts down in order, then the signal it passes
    on ends the process with status 0."""
    import signal

    import uvicorn

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, _exit_quietly)
    app = server.streamable_http_app(host=host)
    typer.echo(f"serving MCP on http://{host}:{port}/mcp", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
