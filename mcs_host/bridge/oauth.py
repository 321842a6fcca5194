"""``serve --http`` as an OAuth 2.1 resource server, as the MCP authorization spec asks: each
request carries a JWT access token of the user's identity provider, checked here against the
provider's published keys, and the token's scopes say which tools it lists and calls.

A token is admitted when its header names an asymmetric algorithm (:data:`ALGORITHMS`; never
``none`` nor a shared secret) and a key id the provider publishes, its signature verifies with
that key, its ``iss`` is the configured issuer, its ``aud`` names this server's resource URL
(RFC 8707), and ``exp`` (required), ``nbf`` and ``iat`` hold within the configured leeway.
Anything else is refused with the reason told to ``refused`` (the server's log), and the
client gets the SDK's 401 with ``WWW-Authenticate`` naming this server's RFC 9728 metadata.

The keys (:class:`KeySet`) are read from the provider's ``jwks_uri`` (its discovery document
names it), kept for five minutes, and read again at once for a key id they lack, at most once
a second: a key the provider rotated in is picked up by the first token signed with it, and a
stream of made-up key ids costs the provider one request a second. Only https URLs are read,
or http ones on a loopback address, and no redirect is followed.

:class:`Grants` maps scopes to the labels and tool names they grant; with none, a valid token
may call every tool. The scopes come from the token's ``scope`` (RFC 9068) or ``scp`` claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import math
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import jwt
    from mcp.server.auth.provider import AccessToken
    from mcp.server.auth.settings import AuthSettings

    from mcs_host.loading.config_schema import OAuthSettings

__all__ = ["Grants"]  # the rest: for serve and its HTTP app

ALGORITHMS = (
    *("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"),
    *("ES256", "ES384", "ES512", "EdDSA"),
)
"""The signature algorithms a token may use: public-key ones only."""
_FRESH = 300.0
"""Seconds the provider's keys are used before they are read again."""
_AGAIN = 1.0
"""The fewest seconds between two readings of the keys for a key id they lack."""
_LARGEST = 1024 * 1024
"""The most bytes read of a discovery document or a key set."""
_TIMEOUT = 10.0
"""Seconds a reading of the provider's documents may take."""

Fetch = Callable[[str], Mapping[str, Any]]
"""Reads a JSON object from a URL; raises ``ValueError`` naming it when it cannot."""


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot name an issuer, a resource or a key set: not https (http only on a
    loopback address), credentials or a fragment in it; ``None`` when it can."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return f"{url!r} is not a URL"
    if parts.scheme not in ("https", "http") or not host:
        return f"{url!r}: give an https:// URL"
    if parts.scheme == "http" and not is_loopback(host):
        return f"{url!r}: give an https:// URL (http only on a loopback address)"
    if parts.username is not None or parts.password is not None:
        return f"{url!r}: a URL with credentials in it is not taken"
    if parts.fragment:
        return f"{url!r}: a URL with a fragment (#...) is not taken"
    return None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (one to bind, or a URL's) is this machine alone (``0.0.0.0`` and ``::``
    are not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Grants:
    """Which tools a token's scopes let it list and call: ``by_scope`` maps a scope to the
    labels and served tool names it grants (``*``: every tool). Empty: every tool."""

    by_scope: Mapping[str, frozenset[str]]

    @classmethod
    def of(cls, grants: Mapping[str, Iterable[str]]) -> Grants:
        """The grants of ``[serve.oauth.grants]``: scope -> labels and tool names."""
        return cls({scope: frozenset(names) for scope, names in grants.items()})

    def permits(self, scopes: Collection[str], label: str, name: str) -> bool:
        """Whether a token with ``scopes`` may call the tool ``name`` of ``label``."""
        if not self.by_scope:
            return True
        return any(self._grants(scope, label, name) for scope in scopes)

    def needed(self, label: str, name: str) -> list[str]:
        """The scopes that grant the tool ``name`` of ``label``."""
        return sorted(scope for scope in self.by_scope if self._grants(scope, label, name))

    def unknown(self, labels: Collection[str], names: Collection[str]) -> list[str]:
        """Each grant naming neither a label nor a tool served, as ``scope -> name``."""
        served = {"*", *labels, *names}
        return [
            f"{scope} -> {name}"
            for scope, granted in sorted(self.by_scope.items())
            for name in sorted(granted - served)
        ]

    def _grants(self, scope: str, label: str, name: str) -> bool:
        granted = self.by_scope.get(scope, frozenset())
        return "*" in granted or label in granted or name in granted


class KeySet:
    """The public keys at ``uri``, read with ``fetch`` when first needed, again after
    :data:`_FRESH` seconds, and at once for a key id they lack (at most once per
    :data:`_AGAIN` seconds). A reading that fails keeps the keys read before."""

    __slots__ = ("_fetch", "_keys", "_lock", "_read_at", "_tried_at", "uri")

    def __init__(self, uri: str, fetch: Fetch | None = None) -> None:
        self.uri = uri
        self._fetch = fetch or fetch_json
        self._keys: dict[str, jwt.PyJWK] = {}
        self._read_at = self._tried_at = -math.inf
        self._lock = asyncio.Lock()

    def read(self) -> None:
        """Read the keys now; ``ValueError`` naming the URL and why when there are none."""
        self._tried_at = time.monotonic()
        self._keys = _usable(self._fetch(self.uri), self.uri)
        self._read_at = self._tried_at

    async def key(self, kid: str) -> jwt.PyJWK | None:
        """The key ``kid``, the keys read again first when stale or when they lack it."""
        now = time.monotonic()
        wanted = kid not in self._keys or now - self._read_at >= _FRESH
        if wanted and now - self._tried_at >= _AGAIN:
            async with self._lock:  # one reading at a time; the others use what it read
                if self._tried_at < now:  # the keys read before stay if this fails
                    with contextlib.suppress(ValueError):
                        await asyncio.to_thread(self.read)
        return self._keys.get(kid)


def _usable(document: Mapping[str, Any], uri: str) -> dict[str, jwt.PyJWK]:
    """The signing keys of a JWK set, by key id: each with a ``kid``, for signing, of an
    algorithm of :data:`ALGORITHMS` (its ``alg``, else its type's default)."""
    import jwt  # noqa: PLC0415 - the mcp extra

    entries = document.get("keys")
    if not isinstance(entries, list):
        raise ValueError(f"{uri}: not a JWK set (no list of keys)")
    keys: dict[str, jwt.PyJWK] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("kid"), str):
            continue
        if entry.get("use", "sig") != "sig" or entry.get("alg", "RS256") not in ALGORITHMS:
            continue
        try:
            keys[entry["kid"]] = jwt.PyJWK(entry)
        except jwt.PyJWTError:
            continue  # a key of a kind this machine cannot use
    if not keys:
        raise ValueError(f"{uri}: no signing key with a key id (kid) that can be used")
    return keys


class JWTVerifier:
    """The ``mcp`` SDK's ``TokenVerifier`` for JWT access tokens of one identity provider;
    each refusal's reason goes to ``refused``."""

    __slots__ = ("_issuer", "_keys", "_leeway", "_refused", "_resource")

    def __init__(
        self,
        issuer: str,
        resource: str,
        keys: KeySet,
        *,
        leeway: int = 30,
        refused: Callable[[str], None] | None = None,
    ) -> None:
        self._issuer, self._resource, self._keys = issuer, resource, keys
        self._leeway = leeway
        self._refused = refused

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's access as the SDK takes it, or ``None`` when it is refused."""
        import jwt  # noqa: PLC0415 - the mcp extra
        from mcp.server.auth.provider import AccessToken  # noqa: PLC0415

        try:
            header = jwt.get_unverified_header(token)
            algorithm, kid = header.get("alg"), header.get("kid")
            if algorithm not in ALGORITHMS:
                raise jwt.InvalidAlgorithmError(f"algorithm {algorithm!r} is not taken")
            if not isinstance(kid, str):
                raise jwt.InvalidKeyError("the token names no key id (kid)")
            key = await self._keys.key(kid)
            if key is None:
                raise jwt.InvalidKeyError(f"key id {kid!r} is not among the issuer's keys")
            if key.algorithm_name != algorithm:
                raise jwt.InvalidAlgorithmError(
                    f"algorithm {algorithm!r} is not key {kid!r}'s ({key.algorithm_name})"
                )
            claims = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=self._resource,
                issuer=self._issuer,
                leeway=self._leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            self._refuse(f"{type(exc).__name__}: {exc}")
            return None
        subject = claims.get("sub")
        client = claims.get("client_id") or claims.get("azp") or subject
        return AccessToken(
            token=token,
            client_id=str(client or ""),
            scopes=_scopes(claims),
            # the SDK refuses a token past expires_at by its own clock, with no leeway
            expires_at=int(claims["exp"]) + self._leeway,
            resource=self._resource,
            subject=str(subject) if subject is not None else None,
            claims={"iss": claims["iss"]},
        )

    def _refuse(self, reason: str) -> None:
        if self._refused is not None:
            self._refused(reason)


def _scopes(claims: Mapping[str, Any]) -> list[str]:
    """A token's scopes: its ``scope`` string (RFC 9068), else its ``scp`` list."""
    scope = claims.get("scope")
    if isinstance(scope, str):
        return scope.split()
    listed = claims.get("scp")
    if isinstance(listed, list):
        return [str(item) for item in listed]
    return listed.split() if isinstance(listed, str) else []


def caller(token: AccessToken) -> str:
    """Who a token speaks for, as the audit and the log name them: its subject, else its
    client."""
    return token.subject or token.client_id


@dataclass(frozen=True, slots=True)
class OAuth:
    """What the HTTP server needs to admit an identity provider's tokens."""

    settings: OAuthSettings
    verifier: JWTVerifier
    grants: Grants

    @classmethod
    def start(
        cls,
        settings: OAuthSettings,
        *,
        fetch: Fetch | None = None,
        refused: Callable[[str], None] | None = None,
    ) -> OAuth:
        """Find the provider's keys (``jwks_uri``, else its discovery document) and read them;
        ``ValueError`` naming the URL and why when that fails."""
        reader = fetch or fetch_json
        uri = settings.jwks_uri or discover(settings.issuer, reader)
        keys = KeySet(uri, reader)
        keys.read()
        verifier = JWTVerifier(
            settings.issuer, settings.resource, keys, leeway=settings.leeway, refused=refused
        )
        return cls(settings, verifier, Grants.of(settings.grants))

    @property
    def scopes(self) -> list[str]:
        """Every scope this server reads, as its metadata lists them."""
        named = {*self.settings.scopes, *self.grants.by_scope, self.settings.metrics_scope}
        return sorted(named)

    def auth_settings(self) -> AuthSettings:
        """The SDK's settings: this resource, its issuer, the scopes every token needs."""
        from mcp.server.auth.settings import AuthSettings  # noqa: PLC0415 - the mcp extra

        return AuthSettings(
            issuer_url=self.settings.issuer,  # pydantic reads the URL
            resource_server_url=self.settings.resource,
            required_scopes=list(self.settings.scopes) or None,
            validate_token_resource=False,  # the verifier checks the audience itself
        )


def discover(issuer: str, fetch: Fetch) -> str:
    """The ``jwks_uri`` of ``issuer``'s discovery document (OpenID Connect's, else RFC 8414's),
    which must name the same issuer; ``ValueError`` naming the URL and why."""
    base = issuer.rstrip("/")
    parts = urlsplit(base)
    origin = f"{parts.scheme}://{parts.netloc}"
    tried = []
    for url in (
        f"{base}/.well-known/openid-configuration",
        f"{origin}/.well-known/oauth-authorization-server{parts.path}",
    ):
        try:
            document = fetch(url)
        except ValueError as exc:
            tried.append(str(exc))
            continue
        named = document.get("issuer")
        if named != issuer:
            raise ValueError(f"{url}: names the issuer {named!r}, not {issuer!r}")
        uri = document.get("jwks_uri")
        if not isinstance(uri, str) or url_problem(uri) is not None:
            raise ValueError(f"{url}: no jwks_uri to read (https, or http on loopback)")
        return uri
    raise ValueError("; ".join(tried))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def fetch_json(url: str) -> Mapping[str, Any]:
    """The JSON object at ``url`` (https, or http on loopback; no redirect followed; at most
    :data:`_LARGEST` bytes); ``ValueError`` naming the URL and why."""
    problem = url_problem(url)
    if problem is not None:
        raise ValueError(problem)
    opener = urllib.request.build_opener(_NoRedirect)
    request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310
    try:
        with opener.open(request, timeout=_TIMEOUT) as response:
            data = response.read(_LARGEST + 1)
    except urllib.error.HTTPError as exc:
        raise ValueError(f"{url}: answered {exc.code}") from None
    except (OSError, urllib.error.URLError) as exc:
        raise ValueError(f"{url}: cannot be read ({exc})") from None
    if len(data) > _LARGEST:
        raise ValueError(f"{url}: more than {_LARGEST} bytes")
    try:
        document = json.loads(data)
    except ValueError:
        raise ValueError(f"{url}: not JSON") from None
    if not isinstance(document, dict):
        raise ValueError(f"{url}: not a JSON object")
    return document
