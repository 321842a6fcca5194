"""A package index on 127.0.0.1 for tests, with no network: the PEP 503 HTML and PEP 691 JSON
simple API, the files with their core metadata (PEP 658/714), their PEP 740 provenance, and
PyPI's Integrity API, served from one directory by a threaded ``http.server``.

A file ``NAME.whl`` (or an sdist) is served with the provenance in ``NAME.whl.provenance``
beside it, when there is one (as ``tests/data/provenance`` holds them). The directory is read
on every request, so a test may add, change or remove files while the index runs. Every
request is recorded (:attr:`LocalIndex.seen`). Options make it behave as other real indexes
do: HTML only, a mirror from before PEP 740 (no ``provenance`` keys), no Integrity API, an
answer or a redirect on chosen paths, provenance URLs on another host name, TLS with a
certificate authority of its own::

    with LocalIndex(directory) as index:
        pip("download", "--index-url", index.url, ...)

URLs: ``/simple/`` and ``/simple/<project>/`` (content negotiated by ``Accept``, or
``?format=``), ``/files/<filename>`` (and ``.metadata``, ``.provenance``), and
``/integrity/<project>/<version>/<filename>/provenance``. In the pages, a file's PEP 740
provenance URL is its Integrity API URL, as PyPI gives it, or ``/files/<filename>.provenance``
when the Integrity API is off.
"""

from __future__ import annotations

import hashlib
import html
import ipaddress
import json
import os
import shutil
import ssl
import tempfile
import threading
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.parser import BytesHeaderParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
SIMPLE_HTML = "application/vnd.pypi.simple.v1+html"
INTEGRITY_JSON = "application/vnd.pypi.integrity.v1+json"
_NEGOTIATED = {
    SIMPLE_JSON: SIMPLE_JSON,
    "application/vnd.pypi.simple.latest+json": SIMPLE_JSON,
    SIMPLE_HTML: SIMPLE_HTML,
    "application/vnd.pypi.simple.latest+html": SIMPLE_HTML,
    "text/html": "text/html",
    "text/*": "text/html",
    "application/*": SIMPLE_JSON,
    "*/*": "text/html",
}


@dataclass(frozen=True)
class Seen:
    """One request the index answered."""

    method: str
    host: str
    """The ``Host`` header: the name the client used."""
    path: str
    accept: str | None
    authorization: str | None


@dataclass(frozen=True)
class _Dist:
    """A distribution file in the directory."""

    path: Path
    project: str
    """Its normalized project name."""
    version: str

    @property
    def provenance(self) -> Path | None:
        beside = self.path.with_name(self.path.name + ".provenance")
        return beside if beside.is_file() else None

    def metadata(self) -> bytes | None:
        """A wheel's METADATA file, ``None`` for an sdist."""
        if self.path.suffix != ".whl":
            return None
        with zipfile.ZipFile(self.path) as wheel:
            (member,) = [
                n
                for n in wheel.namelist()
                if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
            ]
            return wheel.read(member)


def _dists(directory: Path) -> list[_Dist]:
    """The distribution files of ``directory``, by name."""
    found = []
    for path in sorted(directory.iterdir()):
        try:
            if path.name.endswith(".whl"):
                name, version, _, _ = parse_wheel_filename(path.name)
            elif path.name.endswith((".tar.gz", ".zip")):
                name, version = parse_sdist_filename(path.name)
            else:
                continue
        except (InvalidWheelFilename, InvalidSdistFilename):
            continue
        found.append(_Dist(path, name, str(version)))
    return found


@dataclass
class LocalIndex:
    """A package index serving ``directory`` on 127.0.0.1 while the context is open."""

    directory: Path
    json_api: bool = True
    """Answer PEP 691 JSON when asked (off: an HTML-only index)."""
    provenance_keys: bool = True
    """Give each file's provenance URL (or null) in the pages, API version 1.3 (off: a mirror
    from before PEP 740, version 1.1, whose Integrity API may still answer)."""
    integrity_api: bool = True
    """Serve ``/integrity/...`` (off: 404, and pages link ``/files/NAME.provenance``)."""
    metadata: bool = True
    """Serve wheels' core metadata (PEP 658/714)."""
    provenance_host: str | None = None
    """The host name of provenance URLs in pages (``localhost``: another origin, same server)."""
    answers: Mapping[str, int] = field(default_factory=dict)
    """Path prefix -> the status every request under it gets (an empty body)."""
    redirects: Mapping[str, str] = field(default_factory=dict)
    """Path -> where a 302 sends a request for it."""
    tls: bool = False
    """Serve HTTPS with a certificate for 127.0.0.1 and localhost from :attr:`ca_file`'s CA."""
    _server: ThreadingHTTPServer | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _seen: list[Seen] = field(default_factory=list, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _certs: Path | None = field(default=None, init=False, repr=False)

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def port(self) -> int:
        assert self._server is not None, "the index is not running"
        port: int = self._server.server_address[1]
        return port

    @property
    def root(self) -> str:
        """``http://127.0.0.1:PORT`` (``https`` with TLS)."""
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The simple API's base URL, to give pip as ``--index-url``."""
        return f"{self.root}/simple/"

    @property
    def ca_file(self) -> Path:
        """The certificate authority of the TLS certificate (for ``cert`` and ``PIP_CERT``)."""
        assert self._certs is not None, "the index serves no TLS"
        return self._certs / "ca.pem"

    @property
    def seen(self) -> tuple[Seen, ...]:
        """The requests answered so far, in order."""
        with self._lock:
            return tuple(self._seen)

    def __enter__(self) -> LocalIndex:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.index = self  # type: ignore[attr-defined]
        if self.tls:
            self._certs = Path(tempfile.mkdtemp(prefix="pypi-index-tls-"))
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*_certificates(self._certs))
            server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        assert self._server is not None
        assert self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        if self._certs is not None:
            shutil.rmtree(self._certs, ignore_errors=True)

    def provenance_url(self, dist: _Dist) -> str:
        host = self.provenance_host or "127.0.0.1"
        if self.integrity_api:
            path = "/".join(
                quote(part, safe="") for part in (dist.project, dist.version, dist.path.name)
            )
            return f"{self.scheme}://{host}:{self.port}/integrity/{path}/provenance"
        return f"{self.scheme}://{host}:{self.port}/files/{quote(dist.path.name)}.provenance"

    def record(self, seen: Seen) -> None:
        with self._lock:
            self._seen.append(seen)


def pip_env(
    index_url: str, *extra_index_urls: str, cert: Path | None = None, **more: str
) -> dict[str, str]:
    """The environment of a pip child that asks only the given indexes: no configuration
    file (this machine's find-links, extra indexes and constraints left out), no cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(name, None)
    env.update(
        {
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_INDEX_URL": index_url,
            "PIP_NO_CACHE_DIR": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
    )
    if extra_index_urls:
        env["PIP_EXTRA_INDEX_URL"] = " ".join(extra_index_urls)
    if cert is not None:
        env["PIP_CERT"] = str(cert)
    env.update(more)
    return env


class _Handler(BaseHTTPRequestHandler):
    server_version = "mcs-host-test-index/1"

    @property
    def index(self) -> LocalIndex:
        index: LocalIndex = self.server.index  # type: ignore[attr-defined]
        return index

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: :attr:`LocalIndex.seen` records what was asked."""

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, *, body: bool) -> None:
        index = self.index
        split = urlsplit(self.path)
        path = unquote(split.path)
        index.record(
            Seen(
                self.command,
                self.headers.get("Host", ""),
                path,
                self.headers.get("Accept"),
                self.headers.get("Authorization"),
            )
        )
        status, headers, content = self._route(index, path, parse_qs(split.query))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        if body:
            self.wfile.write(content)

    def _route(
        self, index: LocalIndex, path: str, query: Mapping[str, list[str]]
    ) -> tuple[int, dict[str, str], bytes]:
        for prefix, status in index.answers.items():
            if path.startswith(prefix):
                return status, {}, b""
        if path in index.redirects:
            return 302, {"Location": index.redirects[path]}, b""
        dists = _dists(index.directory)
        if path == "/simple":
            return 301, {"Location": "/simple/"}, b""
        if path.startswith("/simple/"):
            kind = _negotiate(query.get("format", [self.headers.get("Accept") or "*/*"])[0], index)
            if kind is None:
                return 406, {"Content-Type": "text/plain"}, b"not acceptable"
            name = path.removeprefix("/simple/")
            if not name:
                return _project_list(index, dists, kind)
            if "/" in name.rstrip("/"):
                return 404, {}, b""
            if not name.endswith("/") or canonicalize_name(name.rstrip("/")) != name.rstrip("/"):
                return 301, {"Location": f"/simple/{canonicalize_name(name.rstrip('/'))}/"}, b""
            files = [d for d in dists if d.project == name.rstrip("/")]
            if not files:
                return 404, {}, b""
            return _project_page(index, name.rstrip("/"), files, kind)
        if path.startswith("/files/"):
            return _file(index, dists, path.removeprefix("/files/"))
        if path.startswith("/integrity/") and index.integrity_api:
            return _integrity(dists, path.removeprefix("/integrity/"))
        return 404, {}, b""


def _negotiate(accept: str, index: LocalIndex) -> str | None:
    """The content type to answer ``accept`` with (``None``: 406), preferring JSON on ties."""
    offers: list[tuple[float, bool, str]] = []
    for item in accept.split(","):
        kind, *params = (part.strip() for part in item.split(";"))
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        answer = _NEGOTIATED.get(kind.lower())
        if answer == SIMPLE_JSON and not index.json_api:
            answer = SIMPLE_HTML if kind.lower() == "application/*" else None
        if answer is not None and quality > 0:
            offers.append((quality, answer == SIMPLE_JSON, answer))
    return max(offers)[2] if offers else None


def _api_version(index: LocalIndex) -> str:
    return "1.3" if index.provenance_keys else "1.1"


def _project_list(
    index: LocalIndex, dists: Sequence[_Dist], kind: str
) -> tuple[int, dict[str, str], bytes]:
    projects = sorted({d.project for d in dists})
    if kind == SIMPLE_JSON:
        document = {
            "meta": {"api-version": _api_version(index)},
            "projects": [{"name": p} for p in projects],
        }
        return 200, {"Content-Type": SIMPLE_JSON}, _json(document)
    links = "".join(f'<a href="/simple/{p}/">{html.escape(p)}</a><br/>\n' for p in projects)
    return 200, {"Content-Type": kind}, _page(index, "Simple index", links)


def _project_page(
    index: LocalIndex, project: str, dists: Sequence[_Dist], kind: str
) -> tuple[int, dict[str, str], bytes]:
    entries = []
    for dist in dists:
        data = dist.path.read_bytes()
        entry: dict[str, Any] = {
            "filename": dist.path.name,
            "url": f"/files/{quote(dist.path.name)}",
            "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
            "size": len(data),
            "yanked": False,
        }
        metadata = dist.metadata()
        if metadata is not None:
            requires = BytesHeaderParser().parsebytes(metadata).get("Requires-Python")
            if requires:
                entry["requires-python"] = str(requires)
            if index.metadata:
                digest = {"sha256": hashlib.sha256(metadata).hexdigest()}
                entry["core-metadata"] = entry["data-dist-info-metadata"] = digest
        if index.provenance_keys:
            entry["provenance"] = index.provenance_url(dist) if dist.provenance else None
        entries.append(entry)
    if kind == SIMPLE_JSON:
        document = {
            "meta": {"api-version": _api_version(index)},
            "name": project,
            "versions": sorted({d.version for d in dists}, key=Version),
            "files": entries,
        }
        return 200, {"Content-Type": SIMPLE_JSON}, _json(document)
    links = []
    for entry in entries:
        attributes = [f'href="{html.escape(entry["url"])}#sha256={entry["hashes"]["sha256"]}"']
        if "requires-python" in entry:
            attributes.append(f'data-requires-python="{html.escape(entry["requires-python"])}"')
        if "core-metadata" in entry:
            value = f"sha256={entry['core-metadata']['sha256']}"
            attributes += [f'data-dist-info-metadata="{value}"', f'data-core-metadata="{value}"']
        if entry.get("provenance"):
            attributes.append(f'data-provenance="{html.escape(entry["provenance"])}"')
        links.append(f"<a {' '.join(attributes)}>{html.escape(entry['filename'])}</a><br/>\n")
    return 200, {"Content-Type": kind}, _page(index, f"Links for {project}", "".join(links))


def _page(index: LocalIndex, title: str, body: str) -> bytes:
    return (
        "<!DOCTYPE html>\n<html>\n<head>\n"
        f'<meta name="pypi:repository-version" content="{_api_version(index)}">\n'
        f"<title>{html.escape(title)}</title>\n</head>\n<body>\n<h1>{html.escape(title)}</h1>\n"
        f"{body}</body>\n</html>\n"
    ).encode()


def _file(
    index: LocalIndex, dists: Sequence[_Dist], name: str
) -> tuple[int, dict[str, str], bytes]:
    by_name = {d.path.name: d for d in dists}
    if name in by_name:
        return 200, {"Content-Type": "application/octet-stream"}, by_name[name].path.read_bytes()
    dist = by_name.get(name.removesuffix(".metadata"))
    if name.endswith(".metadata") and dist is not None and index.metadata:
        metadata = dist.metadata()
        if metadata is not None:
            return 200, {"Content-Type": "application/octet-stream"}, metadata
    dist = by_name.get(name.removesuffix(".provenance"))
    if name.endswith(".provenance") and dist is not None and dist.provenance is not None:
        return 200, {"Content-Type": INTEGRITY_JSON}, dist.provenance.read_bytes()
    return 404, {}, b""


def _integrity(dists: Sequence[_Dist], rest: str) -> tuple[int, dict[str, str], bytes]:
    """``<project>/<version>/<filename>/provenance``, as PyPI's Integrity API serves it."""
    parts = rest.split("/")
    if len(parts) != 4 or parts[3] != "provenance":
        return 404, {}, b""
    project, version, filename, _ = parts
    try:
        asked = Version(version)
    except InvalidVersion:
        return 404, {}, b""
    for dist in dists:
        if (
            dist.path.name == filename
            and dist.project == canonicalize_name(project)
            and Version(dist.version) == asked
            and dist.provenance is not None
        ):
            return 200, {"Content-Type": INTEGRITY_JSON}, dist.provenance.read_bytes()
    return 404, {"Content-Type": "application/json"}, b'{"message": "Not Found"}'


def _json(document: object) -> bytes:
    return json.dumps(document, indent=1).encode()


def _certificates(directory: Path) -> tuple[Path, Path]:
    """Write a CA and, signed by it, a server certificate for 127.0.0.1 and localhost into
    ``directory``; the server's certificate and key files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.now(UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    server_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mcs-host test index CA")])
    usage = dict.fromkeys(
        (
            "digital_signature",
            "content_commitment",
            "key_encipherment",
            "data_encipherment",
            "key_agreement",
            "key_cert_sign",
            "crl_sign",
            "encipher_only",
            "decipher_only",
        ),
        False,
    )
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(**{**usage, "key_cert_sign": True, "crl_sign": True}), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.DNSName("localhost"),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(**{**usage, "digital_signature": True}), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (directory / "ca.pem").write_bytes(ca.public_bytes(pem))
    (directory / "server.pem").write_bytes(server.public_bytes(pem))
    (directory / "server.key").write_bytes(
        server_key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return directory / "server.pem", directory / "server.key"
