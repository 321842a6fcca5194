"""``mcs-host serve``: load the stack as ``load`` does, then serve it to MCP clients over
stdio or streamable HTTP (the ``mcs-host[mcp]`` extra).

On stdio the console script has claimed stdin and stdout before anything ran
(:mod:`._stdout`): the SDK is handed the real ones, and descriptors 0 and 1 are the null
device and stderr for everything else in the process. Over HTTP on an address other than
loopback, the Host header must be one the user allowed and every request must carry the
bearer token (or the user said ``--no-auth``); elsewhere only local clients reach it.

One module: the command, its transports and their shutdown share the serving process's
state (its claimed stdio, its signal handlers, the child's limits).
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO, cast

import typer

from mcs_host._descendants import end_descendants, exit_now

from ._secrets import TOKEN_VARIABLE, withheld
from ._stdout import protocol_files
from .options import (
    LOAD_OPTIONS,
    HostOptions,
    LabelsArgument,
    config_from_parent,
    fail,
    host_options,
)

if TYPE_CHECKING:
    from types import FrameType

    from mcp.server.lowlevel import Server

    from mcs_host.bridge.logs import JSONLog
    from mcs_host.bridge.metrics import Metrics
    from mcs_host.bridge.oauth import OAuth
    from mcs_host.bridge.readiness import Readiness
    from mcs_host.loading.config_schema import HostConfig, OAuthSettings, ProcessLimits
    from mcs_host.loading.records import LoadReport
    from mcs_host.orchestration.orchestrator import Orchestrator

_EXTRA = "serve needs the MCP extra, installed from where mcs-host was installed"
_GRACE = 3.0
"""Seconds a signalled stdio server has to close in order before it exits anyway."""
_DRAIN = 30.0
"""Seconds the calls in flight have after SIGTERM when ``--drain`` is not given."""


def _exit_quietly(number: int, frame: object) -> None:
    raise SystemExit(0)


@host_options(*LOAD_OPTIONS)
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
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="A Host header value --http serves (HOST:PORT, or HOST:* for any port), "
            "besides loopback ones on a loopback address; needed on any other (repeatable; "
            "replaces [serve] allowed_hosts).",
            metavar="HOST",
        ),
    ] = None,
    allowed_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-origin",
            help="An Origin header value --http serves (https://app.example, :* for any "
            "port); a browser's request from any other origin is refused (repeatable; "
            "replaces [serve] allowed_origins).",
            metavar="ORIGIN",
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            help="A file holding the bearer token every --http request must carry (else "
            f"${TOKEN_VARIABLE}, else [serve] token_file); required on an address other "
            "than loopback.",
            metavar="FILE",
            dir_okay=False,
        ),
    ] = None,
    no_auth: Annotated[
        bool,
        typer.Option(
            "--no-auth",
            help="Serve --http on an address other than loopback without a token (a warning "
            "says so).",
        ),
    ] = False,
    stateless: Annotated[
        bool,
        typer.Option(
            "--stateless",
            help="Serve --http without sessions, each request answered by itself in JSON: any "
            "replica behind a load balancer answers any request (no server-initiated "
            "requests, such as asking the user for consent, and no progress notifications).",
        ),
    ] = False,
    drain: Annotated[
        float | None,
        typer.Option(
            "--drain",
            help="Seconds the calls in flight have to finish after SIGTERM, once --http has "
            "stopped accepting; then the rest are cut and the server exits (default 30).",
            metavar="SECONDS",
            min=0,
        ),
    ] = None,
    rate_limit: Annotated[
        str | None,
        typer.Option(
            "--rate-limit",
            help="COUNT/SECONDS: each client (its access token's subject behind [serve.oauth], "
            "its bearer token where one is required, else its address) may make COUNT requests "
            "to --http's /mcp per SECONDS; past that it is answered 429 with Retry-After.",
            metavar="COUNT/SECONDS",
        ),
    ] = None,
    log_json: Annotated[
        bool,
        typer.Option(
            "--log-json",
            help="Log each --http request and each tool call as a JSON line on stderr, with "
            "the request's id (its X-Request-Id, else a new one).",
        ),
    ] = False,
    expect_fingerprint: Annotated[
        str | None,
        typer.Option(
            "--expect-fingerprint",
            help="The fingerprint (sha256:...) every replica must serve: one that serves "
            "another stays alive but not ready, /readyz answering 503 (replaces [serve] "
            "fingerprint).",
            metavar="SHA256",
        ),
    ] = None,
    *,
    options: HostOptions,
    model: Annotated[
        str | None,
        typer.Option("--model", help="The model the instructions are written for.", metavar="NAME"),
    ] = None,
    instructions: Annotated[
        str,
        typer.Option(
            "--instructions",
            help="The server's instructions: native (a short system message; MCP clients call "
            "tools natively), text (the text protocol, every tool's schema in it) or none.",
            metavar="native|text|none",
        ),
    ] = "native",
    isolated: Annotated[
        bool,
        typer.Option(
            "--isolated",
            hidden=True,
            help="Serve one driver for a parent host that isolates it; the configuration "
            "comes from the parent.",
        ),
    ] = False,
) -> None:
    """Verify and load the drivers as load does, then serve their tools to MCP clients:
    over stdio (the default, for a client that starts this command) or streamable HTTP.

    The load report goes to stderr; on stdio nothing but protocol goes to stdout. When
    something asked for did not mount, it serves what did, says what did not on stderr and
    tells each client (an MCP log message); with --strict it exits 1 without serving, as it
    does when nothing mounted.
    """
    try:
        import mcp  # noqa: F401 - the optional extra
    except ImportError:
        from mcs_host._install_hint import extra_command

        fail(f"{_EXTRA}: {extra_command('mcp')}")
    from mcs_host.bridge.server import INSTRUCTIONS, mcp_server

    if instructions not in INSTRUCTIONS:
        raise typer.BadParameter(
            f"{instructions!r}: give native, text or none", param_hint="--instructions"
        )
    address = _address(http) if http is not None else None
    admitting = (allowed_host, allowed_origin, token_file, no_auth)
    replica_options = (
        stateless,
        expect_fingerprint is not None,
        rate_limit is not None,
        log_json,
        drain is not None,
    )
    if address is None and (any(admitting) or any(replica_options)):
        fail(
            "--allowed-host, --allowed-origin, --token-file, --no-auth, --stateless, "
            "--rate-limit, --log-json, --expect-fingerprint and --drain go with --http"
        )
    limit = _rate(rate_limit) if rate_limit is not None else None
    environ_token = withheld(TOKEN_VARIABLE)  # gone from the environment and /proc
    settings = _isolated_config(labels or ()) if isolated else options.host_config()
    oauth: OAuth | None = None
    if address is not None:
        admission = _admission(address, settings, admitting, environ_token)
        expected = _expected(expect_fingerprint, settings)
        oauth = _oauth(admission, log_json)
    from .drivers import loaded_or_exit

    # the console script has pointed descriptor 1 at stderr for good already; in-process
    # (a test's runner), this keeps what a driver prints while it loads off stdout
    with _stdout_to_stderr():
        again = options.lock_again(settings)
        loaded, report = loaded_or_exit(
            settings, options.path, labels or (), again=again, whole=isolated
        )
        if not report.mounted:  # nothing to serve
            loaded.close()
            fail("not serving: no driver or MCP server mounted", code=1)
        watched = (
            _watched(loaded.driver, report, expected, log_json) if address is not None else None
        )
        server = mcp_server(
            loaded.driver,
            loaded.report.records,
            model=model,
            instructions=instructions,
            observe=watched.observe if watched is not None else None,
            grants=oauth.grants if oauth is not None else None,
        )
        unserved = _unserved(report, again) if not report.ok else []
        if unserved:  # the client gets what mounted, and is told what did not
            _say_unserved(server, unserved, len(loaded.driver.list_tools()))
    if isolated:
        from mcs_host.bridge.isolation import SERVING

        sys.stderr.write(SERVING)
        sys.stderr.flush()
    else:
        _note_changes(settings.source, labels or (), loaded.driver)
    if address is None:
        count = len(loaded.driver.list_tools())
        _serve_stdio(server, child=isolated, tools=count)
    else:
        assert watched is not None
        if oauth is not None:
            _say_ungranted(oauth, loaded.driver)
        replica = _Replica(stateless, _DRAIN if drain is None else drain, watched, limit)
        _serve_http(server, *address, admission, replica, oauth)


def _unserved(report: LoadReport, again: str) -> list[str]:
    """One message per mount that did not mount: its label, reason, message and fix."""
    from .render import fix, record_subject

    said = []
    for record in report.records:
        if record.status not in ("rejected", "failed"):
            continue
        subject = record_subject(record)
        found = fix(record.reason, record.label, record.distribution, subject, again)
        said.append(
            f"{record.label} is not served: {record.reason}: {record.message}"
            + (f" (fix: {found})" if found else "")
        )
    return said


def _say_unserved(server: Server[Any], unserved: Sequence[str], tools: int) -> None:
    """Say on stderr that ``tools`` tools are served without the mounts ``unserved`` names,
    and tell each client the same with an MCP log message (``notifications/message``, level
    ``error``) per mount: once it has initialized (the handshake), or with each tool list it
    asks for with a log level (a 2026-07-28 client, whose log messages ride a request)."""
    import warnings

    import mcp_types as types
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    labels = ", ".join(line.partition(" ")[0] for line in unserved)
    typer.echo(
        f"warning: serving the {tools} tools of what mounted, without {labels} (said above; "
        "each MCP client is told too); --strict refuses to serve then",
        err=True,
    )

    async def tell(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if (ctx.method == "notifications/initialized" and not modern) or (
            ctx.method == "tools/list" and modern
        ):
            with warnings.catch_warnings():  # the SDK marks logging deprecated at 2026-07-28
                warnings.simplefilter("ignore")
                for line in unserved:
                    await ctx.session.send_log_message(
                        "error", f"mcs-host: {line}", logger="mcs-host"
                    )
        return result

    async def set_level(context: Any, params: Any) -> types.EmptyResult:
        return types.EmptyResult()  # the messages sent are errors: each level takes them

    server.middleware.append(tell)
    if server.get_request_handler("logging/setLevel") is None:  # declares logging
        server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)


def _note_changes(source: str | None, labels: Sequence[str], stack: Orchestrator) -> None:
    """Say on stderr how the tools served differ from the last start of this configuration,
    and keep what is served now for the next."""
    from ._served import changes, read_served, record_path, served_by, write_served

    tools = stack.list_tools()
    now = served_by(
        (tool.name, *stack.route(tool.name), tool.model_dump(mode="json")["parameters"])
        for tool in tools
    )
    path = record_path(source, labels)
    before = read_served(path)
    if before is not None and (phrases := changes(before, now)):
        typer.echo(
            "note: the tools differ from this server's last start: "
            + "; ".join(phrases)
            + " (a client that kept the old list may call tools that are gone)",
            err=True,
        )
    problem = write_served(path, now)
    if problem is not None:
        typer.echo(
            f"note: cannot keep the tools served, to compare at the next start: {problem}", err=True
        )


def _isolated_config(labels: list[str] | tuple[str, ...]) -> HostConfig:
    """The configuration a parent host wrote for this child (one mount), with the mount's
    resource limits applied to this process before anything of the driver runs."""
    from mcs_host.loading.isolating import become_child

    settings = config_from_parent("--isolated", "an isolated driver")
    if len(labels) != 1 or labels[0] not in settings.drivers:
        fail("--isolated: give the one label the configuration mounts")
    _limit(settings.drivers[labels[0]].limits)
    become_child()
    return settings


def _limit(limits: ProcessLimits) -> None:
    """Lower this process's resource limits as ``limits`` says (POSIX)."""
    wanted = {
        "RLIMIT_AS": limits.memory_mb * 1024 * 1024 if limits.memory_mb else None,
        "RLIMIT_CPU": limits.cpu_seconds,
        "RLIMIT_NOFILE": limits.open_files,
    }
    if not any(wanted.values()):
        return
    try:
        import resource
    except ImportError:
        fail("resource limits are set, but this platform has none (they need POSIX)")
    for name, value in wanted.items():
        if value is None:
            continue
        kind = getattr(resource, name)
        _, hard = resource.getrlimit(kind)
        limit = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(kind, (limit, limit))


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


def _serve_stdio(server: Server[Any], *, child: bool = False, tools: int = 0) -> None:
    """Serve until the client closes stdin, or SIGINT or SIGTERM ends it: exit 0 in all
    three, the connection closed in order, within the grace period even while a call hangs.
    An isolated driver's ``child`` ends all its driver started as it stops, on a signal at
    once (:mod:`mcs_host._descendants`). Started on a terminal (a person, not a client),
    it says on stderr that it serves its ``tools``, whom for, and how to stop it."""
    import signal

    import anyio
    from mcp.server.stdio import stdio_server

    files = protocol_files()  # the real stdin and stdout, claimed by the console script

    async def serve() -> None:
        if not child and _on_terminal(files):  # said once Ctrl-C is handled as it says
            sys.stderr.write(
                f"serving {tools} tools over stdio MCP: an MCP client starts this command "
                "and speaks on its stdin (`mcs-host install CLIENT` sets one up); Ctrl-C or "
                "Ctrl-D stops it\n"
            )
            sys.stderr.flush()
        if files is None:  # in-process: the SDK diverts descriptors 0 and 1 while it serves
            transport = stdio_server()
        else:
            stdin = anyio.wrap_file(cast("TextIO", _Ending(files[0], _exit_after_grace)))
            transport = stdio_server(stdin=stdin, stdout=anyio.wrap_file(files[1]))
        async with transport as (read, write):
            await server.run(read, write, server.create_initialization_options())

    def stop(number: int, frame: object) -> None:
        if child:  # this handler runs on the main thread, whatever a driver's thread does
            exit_now()
        # unwind as Ctrl-C does; the thread that reads stdin cannot be interrupted, so the
        # process ends after a grace period even if it is still blocked there
        _exit_after_grace()
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with suppress(KeyboardInterrupt):
        anyio.run(serve)
    if child:  # the session is over: so is everything its driver started
        end_descendants()
    # a driver's call that never returns holds a worker thread the interpreter would wait for
    _exit_after_grace()


def _on_terminal(files: tuple[TextIO, TextIO] | None) -> bool:
    """Whether the stdin served is a terminal."""
    try:
        return os.isatty(files[0].fileno() if files is not None else 0)
    except (OSError, ValueError, AttributeError):
        return False


class _Ending:
    """Stdin that calls ``ended`` at its end (a call that hangs keeps the session open)."""

    def __init__(self, file: TextIO, ended: Callable[[], object]) -> None:
        self._file, self._ended = file, ended

    def readline(self, size: int = -1) -> str:
        line = self._file.readline(size)
        if not line:
            self._ended()
        return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)


def _exit_after_grace() -> None:
    """End the process (and all below it) after the grace period, if it has not ended."""
    timer = threading.Timer(_GRACE, exit_now)
    timer.daemon = True
    timer.start()


@dataclass(frozen=True)
class _Watched:
    """What operators see of a replica: its readiness, its metrics, and its JSON log."""

    readiness: Readiness
    metrics: Metrics
    log: JSONLog | None

    def observe(self, tool: str, failed: bool, seconds: float, caller: str | None) -> None:
        """Count a tool call, and log it."""
        self.metrics.observe(tool, failed, seconds)
        if self.log is not None:
            self.log.call(tool, failed, seconds, caller)


@dataclass(frozen=True)
class _Replica:
    """How ``serve --http`` runs as one replica of a deployment."""

    stateless: bool
    drain: float
    watched: _Watched
    rate_limit: tuple[int, float] | None


def _watched(
    stack: Orchestrator, report: LoadReport, expected: str | None, log_json: bool
) -> _Watched:
    """The readiness of the stack served, the metrics its calls go into, and the log."""
    from mcs_host.bridge.logs import JSONLog
    from mcs_host.bridge.metrics import Metrics
    from mcs_host.bridge.readiness import Readiness, fingerprint

    tools = [tool.name for tool in stack.list_tools()]
    readiness = Readiness(fingerprint(report.records, tools), expected)
    return _Watched(readiness, Metrics(tools, readiness), JSONLog() if log_json else None)


def _rate(value: str) -> tuple[int, float]:
    """``COUNT/SECONDS`` read: each a positive number, the count a whole one."""
    count, _, seconds = value.partition("/")
    try:
        pair = (int(count), float(seconds))
    except ValueError:
        pair = (0, 0.0)
    if pair[0] < 1 or not 0 < pair[1] < math.inf:
        raise typer.BadParameter(
            f"{value!r}: give COUNT/SECONDS, a whole count and a number of seconds above 0, "
            "e.g. 120/60",
            param_hint="--rate-limit",
        )
    return pair


def _serve_http(
    server: Server[Any],
    host: str,
    port: int,
    admission: Admission,
    replica: _Replica,
    oauth: OAuth | None,
) -> None:
    """Serve until SIGINT or SIGTERM: uvicorn stops accepting, lets the calls in flight
    finish for ``replica.drain`` seconds, and the signal it passes on then ends the process
    with status 0."""
    import signal

    import uvicorn

    from mcs_host.bridge.http import http_app

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, _exit_quietly)
    app = http_app(
        server,
        allowed_hosts=admission.hosts,
        allowed_origins=admission.origins,
        token=admission.token,
        stateless=replica.stateless,
        readiness=replica.watched.readiness,
        metrics=replica.watched.metrics,
        rate_limit=replica.rate_limit,
        log=replica.watched.log,
        oauth=oauth,
    )
    shown = f"[{host}]" if ":" in host else host
    how = "a bearer token required" if admission.token is not None else "no token"
    if oauth is not None:
        how = f"access tokens of {oauth.settings.issuer} for {oauth.settings.resource} required"
    mode = ", stateless" if replica.stateless else ""
    for line in replica.watched.readiness.serves.lines():
        typer.echo(line, err=True)
    problem = replica.watched.readiness.problem
    if problem is not None:
        typer.echo(f"not ready: {problem}", err=True)
    typer.echo(f"serving MCP on http://{shown}:{port}/mcp ({how}{mode})", err=True)
    drain = math.ceil(replica.drain)
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=drain
    )

    class Draining(uvicorn.Server):
        """Past the drain bound (and a grace after it), ends the process even while a tool
        call is stuck in a thread, which nothing can cancel."""

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if not self.should_exit:
                timer = threading.Timer(drain + _GRACE, exit_now)
                timer.daemon = True
                timer.start()
            super().handle_exit(sig, frame)

    Draining(config).run()


def _expected(option: str | None, settings: HostConfig) -> str | None:
    """The fingerprint the replica must serve: ``--expect-fingerprint``, else ``[serve]
    fingerprint``."""
    if option is None:
        return settings.serve.fingerprint
    from pydantic import ValidationError

    try:  # the rule [serve] fingerprint has
        settings.serve.model_validate({"fingerprint": option})
    except ValidationError:
        raise typer.BadParameter(
            f"{option!r}: give sha256: and 64 hex digits, as /readyz shows it",
            param_hint="--expect-fingerprint",
        ) from None
    return option


@dataclass(frozen=True)
class Admission:
    """Who ``serve --http`` admits: the Host and Origin values, and the bearer token or the
    identity provider whose tokens it takes."""

    hosts: tuple[str, ...]
    origins: tuple[str, ...]
    token: bytes | None
    oauth: OAuthSettings | None = None


def _oauth(admission: Admission, log_json: bool) -> OAuth | None:
    """The identity provider's keys read, when ``[serve.oauth]`` names one; or exit 2 saying
    why they cannot be. A refused token's reason goes to stderr (a JSON line with
    ``--log-json``)."""
    if admission.oauth is None:
        return None
    from mcs_host.bridge.logs import JSONLog
    from mcs_host.bridge.oauth import OAuth

    log = JSONLog() if log_json else None

    def refused(reason: str) -> None:
        if log is not None:
            log.write("token_refused", reason=reason)
        else:
            typer.echo(f"mcs-host: a bearer token was refused: {reason}", err=True)

    try:
        return OAuth.start(admission.oauth, refused=refused)
    except ValueError as exc:
        fail(f"[serve.oauth] cannot read the identity provider's keys: {exc}")


def _say_ungranted(oauth: OAuth, stack: Orchestrator) -> None:
    """Warn of each ``[serve.oauth] grants`` entry that names nothing served."""
    tools = stack.list_tools()
    labels = {stack.route(tool.name)[0] for tool in tools}
    for entry in oauth.grants.unknown(labels, [tool.name for tool in tools]):
        typer.echo(
            f"warning: [serve.oauth] grants {entry}: no label or tool served has that name",
            err=True,
        )


def _admission(
    address: tuple[str, int],
    settings: HostConfig,
    options: tuple[Sequence[str] | None, Sequence[str] | None, Path | None, bool],
    environ_token: str | None,
) -> Admission:
    """Who ``serve --http HOST:PORT`` admits, from the options (``--allowed-host``,
    ``--allowed-origin``, ``--token-file``, ``--no-auth``), the environment's token and
    ``[serve]``; or exit 2 naming the option that is missing. On an address other than
    loopback: the Host values the user allowed, and a token unless ``--no-auth``; on
    loopback, loopback Host and Origin values besides, and the token if one is given."""
    from mcs_host.bridge import http as bridge
    from mcs_host.bridge.oauth import is_loopback

    configured = settings.serve
    (host, port), (some_hosts, some_origins, token_file, no_auth) = address, options
    hosts = tuple(some_hosts) if some_hosts else configured.allowed_hosts
    origins = tuple(some_origins) if some_origins else configured.allowed_origins
    if no_auth and token_file is not None:
        fail("--no-auth and --token-file contradict each other: give one of them")
    oauth = configured.oauth
    tokens = {
        "--no-auth": no_auth,
        "--token-file": token_file is not None,
        f"${TOKEN_VARIABLE}": environ_token is not None,
        "[serve] token_file": configured.token_file is not None,
    }
    other = next((name for name, given in tokens.items() if given), None)
    if oauth is not None and other is not None:
        fail(
            f"[serve.oauth] and {other} contradict each other: a server takes its identity "
            "provider's tokens or one token; remove one of them"
        )
    try:
        bridge.check_allowed(hosts, origins)
        if no_auth:  # a token the environment or [serve] gives is not read, nor used
            token = None
        elif token_file is not None:
            token = bridge.read_token(os.fspath(token_file))
        elif environ_token is not None:
            token = bridge.checked_token(environ_token, f"${TOKEN_VARIABLE}")
        elif configured.token_file is not None:
            approved = settings.approved_digests.get(configured.token_file)
            token = bridge.read_token(configured.token_file, approved)
        else:
            token = None
    except ValueError as exc:
        fail(str(exc))
    where = f"--http {host}:{port}"
    if is_loopback(host):
        hosts, origins = (*bridge.LOOPBACK_HOSTS, *hosts), (*bridge.LOOPBACK_ORIGINS, *origins)
    elif token is None and oauth is None and not no_auth:
        fail(
            f"{where} is not a loopback address: give the bearer token every request must "
            f"carry with --token-file FILE (or ${TOKEN_VARIABLE}, or [serve] token_file), or "
            "serve without one with --no-auth"
        )
    elif not hosts:
        fail(
            f"{where} is not a loopback address: name the Host header clients send with "
            f"--allowed-host (e.g. --allowed-host {_example(host)}:{port}) or [serve] "
            "allowed_hosts"
        )
    if no_auth:
        typer.echo(
            f"warning: --no-auth: {where} serves without a token; whoever reaches it can call "
            "every tool",
            err=True,
        )
    return Admission(hosts, origins, token, oauth)


def _example(host: str) -> str:
    """A Host value to suggest for a bind address (a wildcard one has no single name)."""
    if host in ("0.0.0.0", "::"):  # noqa: S104 - naming the wildcard addresses, not binding
        return "HOST"
    return f"[{host}]" if ":" in host else host
