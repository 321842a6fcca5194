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

Behind an identity provider (:mod:`.oauth`), a client lists only the tools its token's scopes
grant, and a call of any other is denied before consent is asked, saying which scopes would
grant it; each call carries the token's subject as its ``caller``, which consent and the audit
see.

Served over streamable HTTP by :mod:`.http`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from mcs_host._version import __version__
from mcs_host.interfaces import progress_to
from mcs_host.orchestration.messages import result_text

from ._shapes import LINK_KEY, META_KEY, RESULT_KEY, megabytes
from .elicitation import Asker, asking

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken
    from mcp.server.lowlevel import Server

    from mcs_host.contract import Tool
    from mcs_host.orchestration.calls import ToolCall
    from mcs_host.orchestration.orchestrator import Orchestrator

    from .oauth import Grants

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


INSTRUCTIONS = ("native", "text", "none")
"""What a server's instructions may be (:func:`mcp_server`)."""


def mcp_server(
    stack: Orchestrator,
    records: Iterable[MountFacts] = (),
    *,
    name: str = "mcs-host",
    model: str | None = None,
    instructions: str = "native",
    observe: Callable[[str, bool, float, str | None], None] | None = None,
    grants: Grants | None = None,
) -> Server[Any]:
    """An MCP server (the SDK's low-level ``Server``) offering the tools of ``stack``;
    ``observe`` is told of each call: the tool's name, whether it failed, its seconds, who
    called it. With ``grants``, a request's access token (the SDK's authentication's) lists
    and calls only the tools its scopes grant.

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
        scopes = _scopes(_token(context))
        for tool in stack.list_tools():
            label, own_name = stack.route(tool.name)
            if grants is not None and not grants.permits(scopes, label, tool.name):
                continue
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
        token = _token(context)
        caller = _caller(token)
        granted = _granted(stack, grants, token, caller) if grants is not None else None
        started = time.perf_counter()
        with asking(asker, loop), progress_to(report):
            detection = _detection(params.name, params.arguments or {}, caller)
            response = await stack.aexecute(detection, granted)
        if observe is not None:
            observe(params.name, response.call_failed, time.perf_counter() - started, caller)
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


def _detection(name: str, arguments: Mapping[str, Any], caller: str | None) -> Any:
    """One call as the orchestrator's consent seam takes it."""
    from mcs_host.orchestration.calls import Detection, ToolCall  # noqa: PLC0415

    return Detection((ToolCall(name, dict(arguments), caller=caller),), "text", "mcp")


def _token(context: Any) -> AccessToken | None:
    """The access token the request being answered came with, once the SDK checked it."""
    scope = getattr(getattr(context, "request", None), "scope", None)
    user = scope.get("user") if isinstance(scope, Mapping) else None
    token: AccessToken | None = getattr(user, "access_token", None)
    return token


def _scopes(token: AccessToken | None) -> tuple[str, ...]:
    return tuple(token.scopes) if token is not None else ()


def _caller(token: AccessToken | None) -> str | None:
    from .oauth import caller  # noqa: PLC0415

    return caller(token) if token is not None else None


def _granted(
    stack: Orchestrator, grants: Grants, token: AccessToken | None, caller: str | None
) -> Callable[[ToolCall], bool | str]:
    """Consent that denies a call of a tool ``token``'s scopes do not grant; it sees the
    call under the name its tool is offered as (a tool's own name already resolved)."""
    scopes = _scopes(token)
    who = f"the token of {caller!r}" if caller is not None else "a request without a token"

    def granted(call: ToolCall) -> bool | str:
        label, _ = stack.route(call.name)
        if grants.permits(scopes, label, call.name):
            return True
        needed = grants.needed(label, call.name)
        grant = f"it needs scope {' or '.join(needed)}" if needed else "no scope grants it"
        return f"{who} is not granted {call.name!r}: {grant}"

    return granted


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
