"""Structured logs of ``serve --http --log-json``: one JSON object a line on stderr for each
HTTP request and each tool call, joined by a request id.

A request's id is the ``X-Request-Id`` its load balancer or client sent (up to 128 printable
characters), else a new one (32 hex digits); the response carries it back in the same header.
A tool call served while a request is answered names that request's id. Behind an identity
provider, both lines name the subject of the request's token.
"""

from __future__ import annotations

import contextvars
import json
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any, TextIO

from .oauth import caller

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__: list[str] = []  # for serve and its HTTP app

_REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "mcs_host_request_id", default=None
)
_HEADER = b"x-request-id"
_LONGEST = 128


class JSONLog:
    """Writes one JSON object a line to ``stream`` (default: stderr)."""

    __slots__ = ("_stream",)

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream

    def write(self, event: str, **fields: Any) -> None:
        """One line: the time, ``event``, the current request's id and ``fields``."""
        line = {"time": round(time.time(), 3), "event": event, "request_id": _REQUEST_ID.get()}
        stream = self._stream or sys.stderr
        stream.write(json.dumps({**line, **fields}, default=str) + "\n")
        stream.flush()

    def call(self, tool: str, failed: bool, seconds: float, caller: str | None = None) -> None:
        """A tool call's line; ``caller``: the subject of the token it came with."""
        outcome = "failed" if failed else "ok"
        who = {"subject": caller} if caller is not None else {}
        self.write("tool_call", tool=tool, outcome=outcome, seconds=round(seconds, 6), **who)


class AccessLog:
    """ASGI middleware: each HTTP request gets an id and a line in ``log`` when answered."""

    __slots__ = ("_app", "_log")

    def __init__(self, app: ASGIApp, log: JSONLog) -> None:
        self._app = app
        self._log = log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        request_id = _given(scope) or uuid.uuid4().hex
        token = _REQUEST_ID.set(request_id)
        started = time.perf_counter()
        status = 500

        async def tagged(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {
                    **message,
                    "headers": [*message.get("headers", ()), (_HEADER, request_id.encode())],
                }
            await send(message)

        try:
            await self._app(scope, receive, tagged)
        finally:
            client: Any = scope.get("client") or ("", 0)
            access = getattr(scope.get("user"), "access_token", None)  # the SDK's, once checked
            self._log.write(
                "http_request",
                method=scope["method"],
                path=scope["path"],
                status=status,
                seconds=round(time.perf_counter() - started, 6),
                client=client[0],
                **({"subject": caller(access)} if access is not None else {}),
            )
            _REQUEST_ID.reset(token)


def _given(scope: Scope) -> str | None:
    """The request id the request carries, when it is one we may log as it is."""
    for name, value in scope.get("headers") or ():
        if name.lower() == _HEADER:
            text: str = bytes(value).decode("latin-1")
            if 0 < len(text) <= _LONGEST and text.isprintable():
                return text
            return None
    return None
