"""The user of the MCP client a served call came from, as consent may ask them to approve it.

A client that declared form elicitation (an ``elicitation`` capability that is not URL mode
alone) is asked with a form of no fields: its user accepts, declines or cancels. On a session
of the initialize handshake that is an ``elicitation/create`` request sent while the call
waits; a 2026-07-28 session has no server-initiated requests, so the question is kept as an
input request that the server answers the call with (``InputRequiredResult``, nothing run),
and the client's retry of the call carries the user's answer under the same key (a digest of
the question, so an answer approves only the question it was given for).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

__all__: list[str] = []  # for mcs_host.bridge.server and the host's consent

Answer = Literal["accept", "decline", "cancel"]
"""What a client's user answered an elicitation with."""
APPROVAL_FORM: dict[str, Any] = {"type": "object", "properties": {}}
"""The form an approval is asked with: no fields, so the user's answer is the action alone."""


@dataclass(frozen=True, slots=True)
class ClientUser:
    """The user of the MCP client a served call came from."""

    ask: Callable[[str], Awaitable[Answer | None]] | Callable[[str], Answer | None] | None
    """Show the user a message and give their answer, or ``None`` when the answer comes
    with the client's retry of the call (the call is answered with the question); ``None``
    when the client cannot ask (it declared no form elicitation). A coroutine function, or,
    when ``loop`` is ``None``, a plain function the call's own thread waits on."""
    loop: asyncio.AbstractEventLoop | None
    """The event loop the served call and ``ask`` run on; ``None`` for a plain ``ask``."""
    where: str = "the MCP client"
    """Where the user answers, as a denial names it."""
    unasked: str = ""
    """With no ``ask``, outside an MCP client: what would have the user asked, which the
    denial names (``pass approve= to langchain_tools()``)."""


_USER: ContextVar[ClientUser | None] = ContextVar("mcs_host_client_user", default=None)


def client_user() -> ClientUser | None:
    """While a call is served to an MCP client: that client's user; else ``None``."""
    return _USER.get()


@contextmanager
def asking(
    asker: Callable[[str], Awaitable[Answer | None]] | Callable[[str], Answer | None] | None,
    loop: asyncio.AbstractEventLoop | None,
    where: str = "the MCP client",
    unasked: str = "",
) -> Iterator[None]:
    """Serve a call: :func:`client_user` gives its client's user, asked by ``asker`` (a plain
    function when ``loop`` is ``None``: an agent framework's approval) in ``where``; with no
    ``asker`` there, a denial names ``unasked``, what would have the user asked."""
    token = _USER.set(ClientUser(asker, loop, where, unasked))
    try:
        yield
    finally:
        _USER.reset(token)


class Asker:
    """How one served call asks its client's user (one per call: it keeps what it asked)."""

    def __init__(self, context: Any, responses: Mapping[str, Any]) -> None:
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS  # noqa: PLC0415 - the extra

        self._context = context
        self._responses = responses
        self._modern = context.protocol_version in MODERN_PROTOCOL_VERSIONS
        self.asked: dict[str, Any] = {}
        """The input requests the call is to be answered with, by key (2026-07-28)."""

    @classmethod
    def of(cls, context: Any, responses: Mapping[str, Any] | None) -> Asker | None:
        """The asker of the call whose request's context is ``context`` and whose retry
        carries ``responses``; ``None`` when its client declared no form elicitation."""
        capabilities = context.session.client_capabilities
        offered = None if capabilities is None else capabilities.elicitation
        if offered is None or (offered.form is None and offered.url is not None):
            return None
        return cls(context, responses or {})

    async def __call__(self, message: str) -> Answer | None:
        """The user's answer to ``message``; ``None`` when it is asked as an input request
        (a 2026-07-28 session whose request does not carry the answer yet)."""
        import mcp_types as types  # noqa: PLC0415 - the mcp extra

        if not self._modern:
            result = await self._context.session.elicit_form(
                message, APPROVAL_FORM, related_request_id=self._context.request_id
            )
            answer: Answer = result.action
            return answer
        key = "mcs-host/approval/" + hashlib.sha256(message.encode()).hexdigest()[:16]
        given = getattr(self._responses.get(key), "action", None)
        if given in ("accept", "decline", "cancel"):
            answered: Answer = given
            return answered
        self.asked[key] = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=APPROVAL_FORM)
        )
        return None
