"""The MCP server over streamable HTTP, and who it admits: Host and Origin checked against
allow-lists (DNS rebinding), bodies bounded, and with a token, :class:`BearerGate` in front of
it all but the health probes, or with an identity provider, the ``mcp`` SDK's bearer
authentication with :mod:`.oauth`'s verifier; a stateless app any replica of a deployment
answers alike (:mod:`.readiness` for the probes)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .logs import AccessLog
from .metrics import RateLimit
from .readiness import PROBES

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from starlette.types import ASGIApp, Receive, Scope, Send

    from .logs import JSONLog
    from .metrics import Metrics
    from .oauth import OAuth
    from .readiness import Readiness

__all__: list[str] = []  # for serve

MAX_BODY = 4 * 1024 * 1024
"""The largest request body the HTTP server reads, in bytes; a larger one is answered 413."""
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
"""The Host values a server on a loopback address admits (any port)."""
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
"""The Origin values a server on a loopback address admits (any port)."""
_TOKEN_LIMIT = 4096
"""The most bytes a token file may hold."""


def http_app(
    server: Server[Any],
    *,
    allowed_hosts: Sequence[str],
    allowed_origins: Sequence[str],
    token: bytes | None = None,
    stateless: bool = False,
    readiness: Readiness | None = None,
    metrics: Metrics | None = None,
    rate_limit: tuple[int, float] | None = None,
    log: JSONLog | None = None,
    oauth: OAuth | None = None,
) -> ASGIApp:
    """``server`` as a streamable HTTP application (at ``/mcp``): a request whose Host is not
    in ``allowed_hosts`` is answered 421, one with an Origin not in ``allowed_origins`` 403
    (``host:*``, ``origin:*``: any port), a body over :data:`MAX_BODY` 413; with ``token``,
    a request without that bearer token 401 before any of that is read. ``stateless``: no
    session, each request answered by itself in JSON, so any replica answers any request.
    With ``readiness``, ``/healthz`` and ``/readyz`` answer probes, token or not; with
    ``metrics``, ``/metrics`` answers with the token; with ``rate_limit`` (count, seconds),
    each client's requests to ``/mcp`` past it are answered 429 (:mod:`.metrics`); with
    ``log``, each request gets an id and a JSON line, refused ones too (:mod:`.logs`). With
    ``oauth`` instead of ``token``, ``/mcp`` needs a token of its identity provider (401 with
    ``WWW-Authenticate`` naming the RFC 9728 metadata, which this app serves; 403 without the
    scopes every token needs), ``/metrics`` one with its metrics scope, and a client of the
    rate limit is the token's subject."""
    from mcp.server.transport_security import (  # noqa: PLC0415 - the mcp extra
        TransportSecuritySettings,
    )

    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(allowed_hosts),
        allowed_origins=list(allowed_origins),
    )
    if oauth is not None and token is not None:
        raise ValueError("a server admits one bearer token or an identity provider's, not both")
    metrics_route = metrics.route() if metrics is not None else None
    if metrics_route is not None and oauth is not None:
        metrics_route = _guarded(metrics_route, oauth.settings.metrics_scope, oauth)
    app = server.streamable_http_app(
        transport_security=security,
        max_request_body_size=MAX_BODY,
        stateless_http=stateless,
        json_response=stateless,
        auth=oauth.auth_settings() if oauth is not None else None,
        token_verifier=oauth.verifier if oauth is not None else None,
        custom_starlette_routes=[
            *(readiness.routes() if readiness is not None else ()),
            *((metrics_route,) if metrics_route is not None else ()),
        ],
    )
    served: ASGIApp = app
    if oauth is not None:
        _list_scopes(app, oauth)
        if rate_limit is not None:  # inside the SDK's authentication: it knows the subject
            from starlette.middleware import Middleware  # noqa: PLC0415 - the mcp extra

            app.user_middleware.append(Middleware(RateLimit, *rate_limit, by_token=False))
    elif rate_limit is not None:
        served = RateLimit(app, *rate_limit, by_token=token is not None)
    if token is not None:
        served = BearerGate(served, token, open_paths=PROBES if readiness is not None else ())
    return served if log is None else AccessLog(served, log)


def _guarded(route: Any, scope: str, oauth: OAuth) -> Any:
    """``route`` answered only with a valid token that carries ``scope``."""
    from mcp.server.auth.middleware.bearer_auth import (  # noqa: PLC0415 - the mcp extra
        RequireAuthMiddleware,
    )
    from mcp.server.auth.routes import build_resource_metadata_url  # noqa: PLC0415
    from starlette.routing import Route  # noqa: PLC0415

    metadata = build_resource_metadata_url(oauth.auth_settings().resource_server_url)  # type: ignore[arg-type]
    guarded = RequireAuthMiddleware(route.app, [scope], metadata)
    return Route(route.path, endpoint=guarded, methods=["GET"])


def _list_scopes(app: Any, oauth: OAuth) -> None:
    """Make the RFC 9728 metadata ``app`` serves list every scope the server reads (the
    SDK's lists those every token needs only), so a client knows what to ask for."""
    from mcp.server.auth.routes import create_protected_resource_routes  # noqa: PLC0415

    settings = oauth.auth_settings()
    own = create_protected_resource_routes(
        settings.resource_server_url,  # type: ignore[arg-type]
        [settings.issuer_url],
        scopes_supported=oauth.scopes,
        resource_name="mcs-host",
    )
    paths = {route.path for route in own}
    routes = app.router.routes
    routes[:] = [*own, *(route for route in routes if getattr(route, "path", None) not in paths)]


class BearerGate:
    """ASGI middleware: a request reaches ``app`` only with ``Authorization: Bearer TOKEN``;
    any other is answered 401 with ``WWW-Authenticate: Bearer`` and reaches nothing behind
    it, but a ``GET`` of one of ``open_paths`` (the health probes). The token is compared in
    constant time (as SHA-256 digests, so its length does not show either) and never logged
    or echoed."""

    def __init__(self, app: ASGIApp, token: bytes, open_paths: Sequence[str] = ()) -> None:
        self._app = app
        self._digest = hashlib.sha256(token).digest()
        self._open = frozenset(open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or (
            scope["type"] == "http" and scope["method"] == "GET" and scope["path"] in self._open
        ):
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
