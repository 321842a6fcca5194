"""A loaded stack as an MCP server: every mounted tool, under its final name, for any MCP
client, each call going through the orchestrator's validation, consent and audit.

Every protocol byte is the ``mcp`` SDK's (2.x, the ``mcs-host[mcp]`` extra). A tool that
fails, arguments that do not validate and a refused consent become a tool result with
``isError``, never a dead server; a cancelled request cancels the call, and what a driver
says with :func:`~mcs_host.kit.report_progress` reaches a client that asked for progress.
Keeping a driver's prints off a stdio wire is the command line's: ``mcs-host serve`` points
descriptor 1 at stderr for its whole life and hands the SDK the real stdin and stdout
(``mcs_host.cli._stdout``), so the instructions may be built and the tools run here as they are.
The trust facts of each tool's driver (label, distribution, version, verification, trust)
travel in the tool's ``_meta`` under ``io.mcs-host/driver``, the hints its driver declared
(:class:`~mcs_host.contract.ToolAnnotations`) as its ``annotations`` (none when it declared
none); the server's instructions are the stack's short system message for a client that calls
tools natively (or the whole text protocol, or none). A result that is a JSON object is the
structured content; any other JSON value is wrapped as ``{"result": value}``, marked in the
result's ``_meta``. A client gets it twice, as the spec asks: that JSON in a text block too. A
parent host says so in a call's ``_meta`` (:data:`LINK_KEY`, with its ``max_result_mb``): it
reads structured content, so it gets each result once (structured content alone, or a string
as its text), and a result bigger than its bound is not sent; the call fails, naming the bound.
While a call is served, consent may ask the client's user (:mod:`.elicitation`).

:func:`http_app` is the server as streamable HTTP: Host and Origin checked against allow-lists
(DNS rebinding), bodies bounded, and with a token, :class:`BearerGate` in front of it all.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from mcs_host._version import __version__
from mcs_host.interfaces import progress_to
from mcs_host.orchestration.messages import result_text

from ._shapes import LINK_KEY, META_KEY, RESULT_KEY, megabytes
from .elicitation import Asker, asking

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from starlette.types import ASGIApp, Receive, Scope, Send

    from mcs_host.contract import Tool
    from mcs_host.orchestration.orchestrator import Orchestrator

__all__ = ["mcp_server"]  # http_app and its checks: for serve


class MountFacts(Protocol):
    """What the server reads of a mount's :class:`~mcs_host.loading.records.LoadRecord`."""

    @property
    def label(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def distribution(self) -> str | None: ...
    @property
    def version(self) -> str | None: ...
    @property
    def verification(self) -> str | None: ...
    @property
    def trust(self) -> str | None: ...
    @property
    def health(self) -> Mapping[str, Any] | None: ...


MAX_BODY = 4 * 1024 * 1024
"""The largest request body the HTTP server reads, in bytes; a larger one is answered 413."""
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
"""The Host values a server on a loopback address admits (any port)."""
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
"""The Origin values a server on a loopback address admits (any port)."""
INSTRUCTIONS = ("native", "text", "none")
"""What a server's instructions may be (:func:`mcp_server`)."""
_TOKEN_LIMIT = 4096
"""The most bytes a token file may hold."""


def mcp_server(
    stack: Orchestrator,
    records: Iterable[MountFacts] = (),
    *,
    name: str = "mcs-host",
    model: str | None = None,
    instructions: str = "native",
) -> Server[Any]:
    """An MCP server (the SDK's low-level ``Server``) offering the tools of ``stack``.

    ``records`` are the load report's mounts: their trust facts go into each tool's
    ``_meta``. ``instructions`` says what the server's instructions are: ``native`` (the
    default) the short system message of a client that calls tools natively, as MCP clients
    do (:meth:`~mcs_host.Orchestrator.get_driver_context`); ``text`` the whole text
    protocol, every tool's schema in it, rendered for ``model``
    (:meth:`~mcs_host.Orchestrator.get_driver_system_message`); ``none`` nothing.
    """
    if instructions not in INSTRUCTIONS:
        raise ValueError(f"instructions {instructions!r}: give one of {', '.join(INSTRUCTIONS)}")
    import mcp_types as types  # noqa: PLC0415 - the mcp extra, imported only to serve
    from mcp.server.lowlevel import Server  # noqa: PLC0415

    facts = {record.label: _facts(record) for record in records if record.status == "mounted"}

    async def list_tools(context: Any, params: Any) -> types.ListToolsResult:
        tools = []
        for tool in stack.list_tools():
            label, own_name = stack.route(tool.name)
            meta = {"label": label, "tool": own_name, **facts.get(label, {})}
            tools.append(
                types.Tool(
                    name=tool.name,
                    title=tool.title or None,
                    description=tool.description or None,
                    input_schema=tool.input_schema(),
                    annotations=_annotations(types, tool),
                    _meta={META_KEY: meta},
                )
            )
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        context: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        loop = asyncio.get_running_loop()
        sent: set[asyncio.Task[None]] = set()

        def report(done: float, total: float | None, message: str | None) -> None:
            def send() -> None:
                task = loop.create_task(context.session.report_progress(done, total, message))
                sent.add(task)
                task.add_done_callback(sent.discard)

            loop.call_soon_threadsafe(send)  # a driver reports from its worker thread too

        asker = Asker.of(context, params.input_responses)
        with asking(asker, loop), progress_to(report):
            response = await stack.aexecute(_detection(params.name, params.arguments or {}))
        if asker is not None and asker.asked:  # nothing ran: the retry brings the answer
            return types.InputRequiredResult(input_requests=dict(asker.asked))
        if response.call_failed:
            detail = response.call_detail or "the call failed"
            return types.CallToolResult(content=[types.TextContent(text=detail)], is_error=True)
        result = response.tool_call_result
        link = (params.meta or {}).get(LINK_KEY)
        if isinstance(link, dict):
            linked: types.CallToolResult = _linked(types, params.name, result, link)
            return linked
        text = result_text(result)
        if isinstance(result, Mapping):
            return types.CallToolResult(
                content=[types.TextContent(text=text)], structured_content=result
            )
        if isinstance(result, str) or _json_size(result, strict=True) is None:  # not JSON
            return types.CallToolResult(content=[types.TextContent(text=text)])
        # a number, list, true or null: structured content is an object, so it is wrapped
        return types.CallToolResult(
            content=[types.TextContent(text=text)],
            structured_content={"result": result},
            _meta={RESULT_KEY: "wrapped"},
        )

    return Server(
        name,
        version=__version__,
        instructions=_instructions(stack, instructions, model) or None,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _annotations(types: Any, tool: Tool) -> Any:
    """The MCP annotations of ``tool``: the hints its driver declared, or ``None`` when it
    declared none (no defaults are claimed for it)."""
    claimed = tool.annotations.claimed if tool.annotations is not None else {}
    return types.ToolAnnotations.model_validate(claimed) if claimed else None


def _instructions(stack: Orchestrator, kind: str, model: str | None) -> str:
    """The server's instructions of ``kind`` (:data:`INSTRUCTIONS`)."""
    if kind == "native":
        return stack.get_driver_context(model).system_message
    if kind == "text":
        return stack.get_driver_system_message(model)
    return ""


def _linked(types: Any, name: str, result: Any, link: Mapping[str, Any]) -> Any:
    """``result`` for a parent host: sent once (structured content, or a string as its text;
    the parent reads structured content) and only if its JSON is within the parent's
    ``max_result_mb``, else the call fails saying so."""
    size: int | None = None
    if isinstance(result, str | Mapping):
        payload: Any = result
    else:  # a number, list, true or null is wrapped; what JSON cannot hold goes as text
        size = _json_size(result, strict=True)
        payload = {"result": result} if size is not None else result_text(result)
        size = None if size is None else size + len('{"result":}')
    bound = link.get("max_result_mb")
    if isinstance(bound, int | float) and not isinstance(bound, bool) and bound > 0:
        size = _json_size(payload) if size is None else size
        if size is None or size > bound * 2**20:
            label = link.get("label")
            shown = "too big to measure" if size is None else f"{megabytes(size)} MB"
            driver = f" of driver {label!r}" if isinstance(label, str) else ""
            text = f"the result of {name!r} is {shown}, more than max_result_mb = {bound:g}{driver}"
            return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
    if isinstance(payload, str):
        return types.CallToolResult(content=[types.TextContent(text=payload)])
    if isinstance(result, Mapping):
        return types.CallToolResult(content=[], structured_content=payload)
    return types.CallToolResult(
        content=[], structured_content=payload, _meta={RESULT_KEY: "wrapped"}
    )


def _json_size(value: Any, strict: bool = False) -> int | None:
    """The bytes of ``value`` as JSON (UTF-8, a string's escapes counted); ``None`` when
    there is no memory to tell or, ``strict``, when it is no JSON value as it is."""
    try:
        text = (_STRICT if strict else _COMPACT).encode(value)
    except MemoryError:
        return None
    except (TypeError, ValueError, RecursionError):
        if strict:
            return None
        raise
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
_STRICT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _detection(name: str, arguments: Mapping[str, Any]) -> Any:
    """One call as the orchestrator's consent seam takes it."""
    from mcs_host.orchestration.calls import Detection, ToolCall  # noqa: PLC0415

    return Detection((ToolCall(name, dict(arguments)),), "text", "mcp")


def _facts(record: MountFacts) -> dict[str, Any]:
    """What a client may want to know about the driver behind a tool (its healthcheck
    result when the load ran one, as JSON values)."""
    facts: dict[str, Any] = {
        "distribution": record.distribution,
        "version": record.version,
        "verification": record.verification,
        "trust": record.trust,
    }
    if record.health is not None:
        facts["health"] = json.loads(json.dumps(dict(record.health), default=str))
    return facts


def http_app(
    server: Server[Any],
    *,
    allowed_hosts: Sequence[str],
    allowed_origins: Sequence[str],
    token: bytes | None = None,
) -> ASGIApp:
    """``server`` as a streamable HTTP application (at ``/mcp``): a request whose Host is not
    in ``allowed_hosts`` is answered 421, one with an Origin not in ``allowed_origins`` 403
    (``host:*``, ``origin:*``: any port), a body over :data:`MAX_BODY` 413; with ``token``,
    a request without that bearer token 401 before any of that is read."""
    from mcp.server.transport_security import (  # noqa: PLC0415 - the mcp extra
        TransportSecuritySettings,
    )

    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(allowed_hosts),
        allowed_origins=list(allowed_origins),
    )
    app = server.streamable_http_app(transport_security=security, max_request_body_size=MAX_BODY)
    return app if token is None else BearerGate(app, token)


class BearerGate:
    """ASGI middleware: a request reaches ``app`` only with ``Authorization: Bearer TOKEN``;
    any other is answered 401 with ``WWW-Authenticate: Bearer`` and reaches nothing behind
    it. The token is compared in constant time (as SHA-256 digests, so its length does not
    show either) and never logged or echoed."""

    def __init__(self, app: ASGIApp, token: bytes) -> None:
        self._app = app
        self._digest = hashlib.sha256(token).digest()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._app(scope, receive, send)
            return
        presented = _bearer(scope.get("headers") or ())
        if presented is not None and hmac.compare_digest(
            hashlib.sha256(presented).digest(), self._digest
        ):
            await self._app(scope, receive, send)
            return
        if scope["type"] != "http":  # a websocket (nothing is served on one): policy violation
            await send({"type": "websocket.close", "code": 1008})
            return
        challenge = b'Bearer realm="mcs-host"'
        body = b"a bearer token is required\n"
        if presented is not None:
            challenge += b', error="invalid_token"'
            body = b"the bearer token is not valid\n"
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", challenge),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _bearer(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The credentials of the first ``Authorization`` header if its scheme is Bearer."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, credentials = value.strip().partition(b" ")
            return credentials.strip() if scheme.lower() == b"bearer" else None
    return None


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves this machine alone (``0.0.0.0`` and ``::`` do not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_allowed(hosts: Iterable[str], origins: Iterable[str]) -> None:
    """Raise ``ValueError`` naming the first value that cannot be a Host header value
    (``HOST:PORT``, ``HOST:*``) or an origin (``SCHEME://HOST[:PORT]``, ``:*``)."""
    for value in hosts:
        if not value or any(c.isspace() or c in "/@" for c in value):
            raise ValueError(f"--allowed-host {value!r}: give HOST:PORT or HOST:*")
    for value in origins:
        scheme, sep, rest = value.partition("://")
        if not (sep and scheme in ("http", "https") and rest) or any(
            c.isspace() or c in "/@?#" for c in rest
        ):
            raise ValueError(
                f"--allowed-origin {value!r}: give SCHEME://HOST[:PORT] (or :* for any port), "
                "with no path"
            )


def read_token(path: str, sha256: str | None = None) -> bytes:
    """The bearer token in the file ``path`` (a regular file, at most 4 KiB, surrounding
    whitespace dropped); ``ValueError`` naming the file, never showing any of its bytes. On
    POSIX the file must be the user's alone: owned by them, with no permission for group or
    others (the message says ``chmod 600 FILE``), as the bytecode cache's key must be. With
    ``sha256`` (an approval's), other bytes are refused as a file that changed."""
    from mcs_host._files import (  # noqa: PLC0415 - serving over HTTP only
        InputError,
        Opened,
        private_problem,
        read_opened,
    )

    try:
        with Opened.open(path, "token file") as opened:
            problem = private_problem(opened.status, path)
            if problem is not None:
                raise ValueError(f"{path}: the token file is not yours alone: {problem}")
            data = read_opened(opened, "token file", _TOKEN_LIMIT)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such token file") from None
    except InputError as exc:
        raise ValueError(str(exc)) from None
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError(
            f"{path}: changed since its directory's approval was checked: these are not the "
            "bytes approved; run the command again"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: the token file is not UTF-8 text") from None
    return checked_token(text, path)


def checked_token(text: str, source: str) -> bytes:
    """The token in ``text`` without surrounding whitespace; ``ValueError`` naming
    ``source`` (never the text) when it is empty or more than one word."""
    token = text.strip()
    if not token:
        raise ValueError(f"{source}: the token is empty")
    if any(c.isspace() or not c.isprintable() for c in token):
        raise ValueError(f"{source}: the token must be one word of printable characters")
    return token.encode("utf-8")
