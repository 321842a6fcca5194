"""The access-token checks of ``serve --http`` behind an identity provider: tokens signed here
with real keys, the key set read through the same seam a provider's URL is read through."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from mcs_host.bridge import oauth
from mcs_host.bridge.oauth import Grants, JWTVerifier, KeySet, OAuth, discover, url_problem
from mcs_host.loading.config_schema import OAuthSettings

ISSUER = "https://id.example"
RESOURCE = "https://mcp.example/mcp"


class Provider:
    """An identity provider's documents, as a fetch function reads them, and its keys."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}
        self.published: list[str] = []
        self.reads: list[str] = []

    def add_key(self, kid: str, kind: str = "RSA") -> None:
        if kind == "RSA":
            self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        else:
            self.keys[kid] = ec.generate_private_key(ec.SECP256R1())
        self.published.append(kid)

    def fetch(self, url: str) -> Mapping[str, Any]:
        self.reads.append(url)
        if url == f"{ISSUER}/.well-known/openid-configuration":
            return {"issuer": ISSUER, "jwks_uri": f"{ISSUER}/jwks"}
        if url == f"{ISSUER}/jwks":
            return {"keys": [self.public(kid) for kid in self.published]}
        raise ValueError(f"{url}: answered 404")

    def public(self, kid: str) -> dict[str, Any]:
        key = self.keys[kid]
        if isinstance(key, rsa.RSAPrivateKey):
            jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
            jwk["alg"] = "RS256"
        else:
            jwk = json.loads(ECAlgorithm.to_jwk(key.public_key()))
            jwk["alg"] = "ES256"
        return {**jwk, "kid": kid, "use": "sig"}

    def token(self, kid: str = "k1", *, alg: str | None = None, **claims: Any) -> str:
        now = int(time.time())
        body = {
            "iss": ISSUER,
            "aud": RESOURCE,
            "sub": "ada",
            "client_id": "agent",
            "scope": "csv:read mcs:call",
            "iat": now,
            "exp": now + 300,
            **claims,
        }
        body = {name: value for name, value in body.items() if value is not None}
        key = self.keys[kid]
        default = "RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256"
        headers = {"kid": kid, "typ": "at+jwt"}
        return jwt.encode(body, key, algorithm=alg or default, headers=headers)


@pytest.fixture
def provider() -> Provider:
    made = Provider()
    made.add_key("k1")
    return made


def _verifier(provider: Provider, refused: list[str], leeway: int = 0) -> JWTVerifier:
    keys = KeySet(f"{ISSUER}/jwks", provider.fetch)
    return JWTVerifier(ISSUER, RESOURCE, keys, leeway=leeway, refused=refused.append)


def _verify(verifier: JWTVerifier, token: str) -> Any:
    return asyncio.run(verifier.verify_token(token))


def test_a_valid_token_gives_its_subject_scopes_and_expiry(provider: Provider) -> None:
    refused: list[str] = []
    access = _verify(_verifier(provider, refused), provider.token(scope="csv:read files:read"))
    assert access is not None, refused
    assert (access.subject, access.client_id) == ("ada", "agent")
    assert access.scopes == ["csv:read", "files:read"]
    assert access.resource == RESOURCE
    assert access.expires_at > time.time()
    assert oauth.caller(access) == "ada"


def test_scopes_are_read_from_scp_too(provider: Provider) -> None:
    access = _verify(_verifier(provider, []), provider.token(scope=None, scp=["a", "b"]))
    assert access.scopes == ["a", "b"]


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"exp": int(time.time()) - 5}, "ExpiredSignatureError"),
        ({"aud": "https://other.example/mcp"}, "InvalidAudienceError"),
        ({"iss": "https://evil.example"}, "InvalidIssuerError"),
        ({"exp": None}, 'MissingRequiredClaimError: Token is missing the "exp" claim'),
        ({"aud": None}, "MissingRequiredClaimError"),
        ({"nbf": int(time.time()) + 600}, "ImmatureSignatureError"),
    ],
)
def test_a_token_whose_claims_do_not_hold_is_refused_saying_why(
    provider: Provider, claims: dict[str, Any], reason: str
) -> None:
    refused: list[str] = []
    assert _verify(_verifier(provider, refused), provider.token(**claims)) is None
    assert len(refused) == 1
    assert refused[0].startswith(reason)


def test_the_leeway_admits_a_token_just_expired_and_no_later_one(provider: Provider) -> None:
    """Through the ``mcp`` SDK's bearer authentication, which the server runs the verifier in
    and which checks the expiry again by its own clock."""
    from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend

    now = int(time.time())
    lenient = BearerAuthBackend(_verifier(provider, [], leeway=60))
    assert admitted_by(lenient, provider.token(exp=now - 10))
    assert not admitted_by(lenient, provider.token(exp=now - 120))
    strict = BearerAuthBackend(_verifier(provider, [], leeway=0))
    assert not admitted_by(strict, provider.token(exp=now - 10))


def admitted_by(backend: Any, token: str) -> bool:
    """Whether the SDK's authentication ``backend`` admits a request bearing ``token``."""
    from starlette.requests import HTTPConnection

    headers = [(b"authorization", f"Bearer {token}".encode())]
    connection = HTTPConnection({"type": "http", "headers": headers})
    return asyncio.run(backend.authenticate(connection)) is not None


def test_a_token_signed_by_another_key_with_a_published_kid_is_refused(
    provider: Provider,
) -> None:
    forger = Provider()
    forger.add_key("k1")  # the same key id, another key
    refused: list[str] = []
    assert _verify(_verifier(provider, refused), forger.token()) is None
    assert refused == ["InvalidSignatureError: Signature verification failed"]


def test_no_signature_and_a_shared_secret_are_refused(provider: Provider) -> None:
    """``alg: none`` and HS256 keyed with the provider's public key (the algorithm confusion
    attack) are refused before any key is used."""
    refused: list[str] = []
    verifier = _verifier(provider, refused)
    body = {"iss": ISSUER, "aud": RESOURCE, "sub": "eve", "exp": int(time.time()) + 60}
    unsigned = jwt.encode(body, "", algorithm="none", headers={"kid": "k1"})
    public_pem = (
        provider.keys["k1"]
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    hmac_token = _hs256(body, public_pem, {"kid": "k1", "alg": "HS256", "typ": "JWT"})
    assert _verify(verifier, unsigned) is None
    assert _verify(verifier, hmac_token) is None
    assert refused == [
        "InvalidAlgorithmError: algorithm 'none' is not taken",
        "InvalidAlgorithmError: algorithm 'HS256' is not taken",
    ]


def _hs256(body: dict[str, Any], secret: bytes, header: dict[str, Any]) -> str:
    """A token signed with HMAC-SHA256 by hand (PyJWT will not key HMAC with a public key)."""

    def part(value: dict[str, Any]) -> bytes:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=")

    signed = part(header) + b"." + part(body)
    mac = hmac.new(secret, signed, hashlib.sha256).digest()
    return (signed + b"." + base64.urlsafe_b64encode(mac).rstrip(b"=")).decode()


def test_an_algorithm_other_than_the_keys_is_refused(provider: Provider) -> None:
    refused: list[str] = []
    token = provider.token(alg="RS512")  # an RSA key published for RS256 signs RS512
    assert _verify(_verifier(provider, refused), token) is None
    assert refused == ["InvalidAlgorithmError: algorithm 'RS512' is not key 'k1''s (RS256)"]


def test_a_token_without_a_key_id_or_with_garbage_is_refused(provider: Provider) -> None:
    refused: list[str] = []
    verifier = _verifier(provider, refused)
    body = {"iss": ISSUER, "aud": RESOURCE, "exp": int(time.time()) + 60}
    no_kid = jwt.encode(body, provider.keys["k1"], algorithm="RS256")
    assert _verify(verifier, no_kid) is None
    assert _verify(verifier, "not.a.token") is None
    assert refused[0] == "InvalidKeyError: the token names no key id (kid)"
    assert refused[1].startswith("DecodeError")


def test_a_rotated_key_is_read_when_a_token_names_it(provider: Provider) -> None:
    verifier = _verifier(provider, [])
    assert _verify(verifier, provider.token()) is not None
    provider.add_key("k2", "EC")  # the provider rotates in an EC key
    provider.published.remove("k1")
    oauth_reads = len(provider.reads)
    time.sleep(oauth._AGAIN)  # the key set is read again at most once per _AGAIN seconds
    assert _verify(verifier, provider.token("k2")) is not None
    assert len(provider.reads) == oauth_reads + 1
    refused: list[str] = []
    verifier._refused = refused.append
    assert _verify(verifier, provider.token("k1")) is None  # gone from the key set
    assert refused == ["InvalidKeyError: key id 'k1' is not among the issuer's keys"]


def test_made_up_key_ids_read_the_key_set_at_most_once_a_second(provider: Provider) -> None:
    verifier = _verifier(provider, [])

    async def flood() -> list[Any]:
        tokens = [provider.token("k1", sub=str(n)) for n in range(3)]
        forged = [
            jwt.encode({"a": 1}, provider.keys["k1"], "RS256", {"kid": f"x{n}"}) for n in range(50)
        ]
        return await asyncio.gather(*(verifier.verify_token(t) for t in [*forged, *tokens]))

    results = asyncio.run(flood())
    assert results[:50] == [None] * 50
    assert all(result is not None for result in results[50:])
    assert len(provider.reads) == 1


def test_a_failed_reading_keeps_the_keys_read_before(provider: Provider) -> None:
    verifier = _verifier(provider, [])
    assert _verify(verifier, provider.token()) is not None
    provider.published.clear()  # a provider that answers with no keys
    time.sleep(oauth._AGAIN)
    assert _verify(verifier, provider.token(sub="again")) is not None


def test_discovery_must_name_the_issuer_configured(provider: Provider) -> None:
    assert discover(ISSUER, provider.fetch) == f"{ISSUER}/jwks"

    def lying(url: str) -> Mapping[str, Any]:
        return {"issuer": "https://evil.example", "jwks_uri": "https://evil.example/jwks"}

    with pytest.raises(ValueError, match=r"names the issuer 'https://evil\.example', not"):
        discover(ISSUER, lying)


def test_oauth_start_reads_the_keys_or_names_why_not(provider: Provider) -> None:
    settings = OAuthSettings(issuer=ISSUER, resource=RESOURCE, grants={"csv:read": ("csv",)})
    started = OAuth.start(settings, fetch=provider.fetch)
    assert started.scopes == ["csv:read", "mcs-host:metrics"]
    provider.published.clear()
    with pytest.raises(ValueError, match=r"https://id.example/jwks: no signing key with a key id"):
        OAuth.start(settings, fetch=provider.fetch)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://id.example", None),
        ("http://127.0.0.1:8080/realms/x", None),
        ("http://localhost:1", None),
        ("http://id.example", "give an https:// URL (http only on a loopback address)"),
        ("ftp://id.example", "give an https:// URL"),
        ("https://user:pw@id.example", "a URL with credentials in it is not taken"),
        ("https://id.example/#x", "a URL with a fragment"),
    ],
)
def test_urls_are_https_or_loopback_http(url: str, problem: str | None) -> None:
    found = url_problem(url)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_settings_refuse_a_plain_http_issuer() -> None:
    with pytest.raises(ValueError, match="http only on a loopback address"):
        OAuthSettings(issuer="http://id.example", resource=RESOURCE)


def test_grants_map_scopes_to_labels_and_tools() -> None:
    grants = Grants.of({"csv:read": ["csv"], "files:read": ["files__read"], "admin": ["*"]})
    assert grants.permits(["csv:read"], "csv", "csv__search")
    assert not grants.permits(["csv:read"], "files", "files__read")
    assert grants.permits(["files:read"], "files", "files__read")
    assert not grants.permits(["files:read"], "files", "files__write")
    assert grants.permits(["admin"], "files", "files__write")
    assert not grants.permits([], "csv", "csv__search")
    assert grants.needed("files", "files__read") == ["admin", "files:read"]
    assert grants.unknown({"csv", "files"}, {"files__read"}) == []
    assert Grants.of({"x": ["nope"]}).unknown({"csv"}, set()) == ["x -> nope"]
    assert Grants.of({}).permits([], "csv", "csv__search")  # no grants: every tool


def test_the_caller_reaches_consent_and_the_audit_and_an_edit_keeps_it() -> None:
    """A call served to a token's subject carries it as ``caller``: consent and the audit see
    it, and a consent step that edits the call (even into a new ``ToolCall``) cannot change
    who asked."""
    from sample_drivers import Calculator

    from mcs_host import Orchestrator, ToolCall
    from mcs_host.orchestration.calls import Detection

    seen: list[tuple[str, str | None]] = []
    audited: list[tuple[str, str | None, Any]] = []

    def consent(call: ToolCall) -> ToolCall:
        seen.append((call.name, call.caller))
        return ToolCall(call.name, {"a": 40, "b": 2}, caller="mallory")

    driver = Calculator()
    stack = Orchestrator(
        [driver],
        consent=consent,
        audit=lambda call, result, error: audited.append((call.name, call.caller, result)),
    )
    detection = Detection((ToolCall("add", {"a": 1, "b": 1}, caller="ada"),), "text", "mcp")
    response = asyncio.run(stack.aexecute(detection))
    assert response.tool_call_result == 42
    assert seen == [("add", "ada")]
    assert audited == [("add", "ada", 42)]
    assert ToolCall("x", {}, caller="ada").with_arguments({"y": 1}).caller == "ada"
