"""What operators watch of ``serve --http``: Prometheus metrics at ``/metrics`` (the
``prometheus-client`` library, a registry of the server's own) and a per-client rate limit.

The metrics: ``mcs_host_tool_calls_total`` by tool and outcome (``ok``, ``failed``), the
seconds each call took by tool (``mcs_host_tool_call_seconds``), and the fingerprint served
(``mcs_host_stack_info``, 1, with the fingerprint and whether it is the expected one). A tool
name no tool has counts as ``(unknown)``, so clients cannot grow the label set. ``/metrics``
needs the bearer token like ``/mcp`` (behind an identity provider, a token with the metrics
scope): the metrics name the tools.

:class:`RateLimit` lets each client (its bearer token, else its address) make ``count``
requests to ``/mcp`` per ``seconds``, as a token bucket that refills evenly; past that a
request is answered 429 with ``Retry-After``, the whole seconds until it may try again. A
client is its bearer token only where the server checks one: elsewhere any header can be
sent, so a client is its address. Behind an identity provider (:mod:`.oauth`), a client is
its token's subject, however many tokens it gets.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route
    from starlette.types import ASGIApp, Receive, Scope, Send

    from .readiness import Readiness

__all__: list[str] = []  # for serve and its HTTP app

_UNKNOWN = "(unknown)"
_CLIENTS = 10_000
"""The most clients a rate limit remembers; the one heard from least recently goes first."""


class Metrics:
    """The Prometheus metrics of one server offering ``tools``."""

    __slots__ = ("_calls", "_registry", "_seconds", "_tools")

    def __init__(self, tools: Collection[str], readiness: Readiness) -> None:
        from prometheus_client import (  # noqa: PLC0415 - the mcp extra
            CollectorRegistry,
            Counter,
            Gauge,
            Histogram,
        )

        self._tools = frozenset(tools)
        self._registry = CollectorRegistry()
        self._calls = Counter(
            "mcs_host_tool_calls",
            "Tool calls served, by tool and outcome.",
            ("tool", "outcome"),
            registry=self._registry,
        )
        self._seconds = Histogram(
            "mcs_host_tool_call_seconds",
            "Seconds a tool call took, by tool.",
            ("tool",),
            registry=self._registry,
        )
        stack = Gauge(
            "mcs_host_stack_info",
            "The fingerprint of the stack served, and whether it is the expected one.",
            ("fingerprint", "expected"),
            registry=self._registry,
        )
        expected = "yes" if readiness.problem is None else "no"
        stack.labels(readiness.serves.digest, expected).set(1)

    def observe(self, tool: str, failed: bool, seconds: float) -> None:
        """Count one call of ``tool`` that took ``seconds``."""
        name = tool if tool in self._tools else _UNKNOWN
        self._calls.labels(name, "failed" if failed else "ok").inc()
        self._seconds.labels(name).observe(seconds)

    def route(self) -> Route:
        """``GET /metrics`` in Prometheus' text format."""
        from starlette.routing import Route  # noqa: PLC0415 - the mcp extra

        return Route("/metrics", self._scrape, methods=["GET"])

    async def _scrape(self, request: Request) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest  # noqa: PLC0415
        from starlette.responses import Response  # noqa: PLC0415 - the mcp extra

        return Response(generate_latest(self._registry), media_type=CONTENT_TYPE_LATEST)


class RateLimit:
    """ASGI middleware: ``count`` requests to ``/mcp`` per ``seconds`` for each client, who
    is its bearer token when ``by_token`` (the server checks the token), else its address."""

    __slots__ = ("_app", "_buckets", "_by_token", "_count", "_rate")

    def __init__(self, app: ASGIApp, count: int, seconds: float, *, by_token: bool) -> None:
        if count < 1 or seconds <= 0:
            raise ValueError("a rate limit is at least one request per a positive time")
        self._app = app
        self._by_token = by_token
        self._count = float(count)
        self._rate = count / seconds  # requests a second
        self._buckets: OrderedDict[bytes, tuple[float, float]] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/mcp"):
            await self._app(scope, receive, send)
            return
        wait = self._take(_client(scope, self._by_token))
        if wait <= 0:
            await self._app(scope, receive, send)
            return
        body = b"too many requests: the rate limit of this server is reached\n"
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"retry-after", str(math.ceil(wait)).encode()),
        ]
        await send({"type": "http.response.start", "status": 429, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _take(self, client: bytes) -> float:
        """Take one request from ``client``'s bucket: 0 when there was one, else the seconds
        until there is."""
        now = time.monotonic()
        tokens, then = self._buckets.pop(client, (self._count, now))
        tokens = min(self._count, tokens + (now - then) * self._rate)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / self._rate
        self._buckets[client] = (tokens, now)
        while len(self._buckets) > _CLIENTS:
            self._buckets.popitem(last=False)
        return wait


def _client(scope: Scope, by_token: bool) -> bytes:
    """Who a request comes from: the subject of its identity provider's token, a digest of
    its (checked) bearer credentials, else its address."""
    token = getattr(scope.get("user"), "access_token", None)  # set by the SDK's authentication
    if token is not None:
        from .oauth import caller  # noqa: PLC0415

        return b"s" + caller(token).encode("utf-8", "surrogatepass")
    for name, value in scope.get("headers") or () if by_token else ():
        if name.lower() == b"authorization":
            return b"t" + hashlib.sha256(value).digest()
    address: Any = scope.get("client") or ("", 0)
    return b"a" + str(address[0]).encode()
