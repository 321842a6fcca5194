"""The PEP 740 provenance of a distribution file, from the index it came from.

Each configured HTTP(S) index is asked in order (the indexes pip asked: see
:func:`~mcs_host.trust.downloading.pip_config`): the ``provenance`` URL its PEP 691 JSON page
gives for the file, else PyPI's Integrity API (``/integrity/<project>/<version>/<filename>/
provenance``) beside a ``.../simple/`` index, for an HTML-only index or a JSON page from before
PEP 740. An index whose page lists the file under another sha256 is not the one it came from;
``file://`` indexes and find-links directories serve no provenance.

Certificates are always checked (with pip's ``cert`` bundle when given); a link or redirect may
not leave ``https``, nor lead to any scheme but ``http`` and ``https``; credentials in an index
URL are sent to that URL's origin only, never after a redirect; every response is bounded: 4
MiB for a provenance, 64 MiB for an index page, ``timeout`` per read and four times that in
all. Nothing found here is believed: :func:`~mcs_host.trust.provenance.verify_provenance`
checks it. Imports only the standard library and ``packaging``; one request at a time.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urljoin, urlsplit, urlunsplit

from packaging.utils import canonicalize_name

from mcs_host._version import __version__

# used by mcs-host add: IndexResponseError, PackageIndexError, fetch_provenance
__all__: list[str] = []

PROVENANCE_LIMIT = 4 << 20
"""The most bytes a provenance may have (as :mod:`~mcs_host.trust.provenance` reads)."""

_PAGE_LIMIT = 64 << 20
_SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
_INTEGRITY_JSON = "application/vnd.pypi.integrity.v1+json"
_WEB = ("http", "https")


class PackageIndexError(Exception):
    """A wheel or its provenance could not be had from the user's index."""


class IndexResponseError(PackageIndexError):
    """An index answered a request for a page or a provenance with something other than it
    or a plain "not here" (404): ``url`` (credentials hidden) and ``status`` (``None`` when no
    answer came) say which."""

    def __init__(self, url: str, status: int | None, message: str) -> None:
        self.url = _redacted(url)
        self.status = status
        super().__init__(f"{self.url}: {message}")


def fetch_provenance(
    filename: str,
    project: str,
    version: str,
    indexes: Sequence[str],
    *,
    sha256: str | None = None,
    cert: str | None = None,
    timeout: float = 30,
) -> bytes | None:
    """The PEP 740 provenance that the first of ``indexes`` to have one serves for the file
    ``filename`` of ``project`` ``version`` (with ``sha256``, when given: an index listing the
    name with other bytes is skipped); ``None`` when each index answers that it has none.
    Raises :class:`IndexResponseError` when none has one and an index failed to answer."""
    client = _Client(indexes, cert, timeout)
    failures: list[IndexResponseError] = []
    for index in indexes:
        if urlsplit(index).scheme.lower() not in _WEB:
            continue  # a file:// index: a directory, which serves no provenance
        try:
            found = _from_index(client, _slashed(index), filename, project, version, sha256)
        except IndexResponseError as error:
            failures.append(error)
            continue
        if found is not None:
            return found
    if failures:
        raise failures[0]
    return None


def _from_index(
    client: _Client, index: str, filename: str, project: str, version: str, sha256: str | None
) -> bytes | None:
    """The provenance ``index`` serves for the file, ``None`` when it has none."""
    page = client.get(index + quote(canonicalize_name(project)) + "/", _SIMPLE_JSON, _PAGE_LIMIT)
    if page.status == 404:
        return None  # the project is not on this index
    if page.status == 200 and page.content_type == _SIMPLE_JSON:
        entry = _entry(page, filename)
        if entry is None:
            return None  # this index does not hold the file
        listed = entry.get("hashes")
        other = str(listed.get("sha256", sha256)) if isinstance(listed, dict) else sha256
        if sha256 is not None and str(other).lower() != sha256.lower():
            return None  # it holds other bytes under that name: not where the file came from
        if "provenance" in entry:
            link = entry["provenance"]
            if link is None:
                return None
            if not isinstance(link, str) or not link:
                raise IndexResponseError(page.url, 200, f"{filename}'s provenance is no URL")
            got = client.get(urljoin(page.url, link), _INTEGRITY_JSON, PROVENANCE_LIMIT, page.url)
            if got.status != 200:
                raise IndexResponseError(
                    got.url, got.status, f"answered {got.status}, for the provenance it lists"
                )
            return _json_body(got)
    # an HTML-only index, or JSON from before PEP 740: PyPI's Integrity API, beside /simple/
    base, tail = index.rstrip("/").rsplit("/", 1)
    if tail != "simple":
        return None
    parts = (canonicalize_name(project), version, filename)
    url = f"{base}/integrity/{'/'.join(quote(part, safe='') for part in parts)}/provenance"
    got = client.get(url, _INTEGRITY_JSON, PROVENANCE_LIMIT)
    if got.status == 404:
        return None
    if got.status != 200:
        raise IndexResponseError(url, got.status, f"its Integrity API answered {got.status}")
    return _json_body(got)


def _entry(page: _Response, filename: str) -> dict[str, Any] | None:
    """The file dictionary of ``filename`` on a PEP 691 project page, ``None`` if absent."""
    try:
        document = json.loads(page.body)
    except (ValueError, RecursionError) as error:
        raise IndexResponseError(page.url, 200, f"its JSON page is not JSON: {error}") from None
    files = document.get("files") if isinstance(document, dict) else None
    if not isinstance(files, list):
        raise IndexResponseError(page.url, 200, "its JSON page has no list of files")
    for entry in files:
        if isinstance(entry, dict) and filename in (entry.get("filename"), _basename(entry)):
            return entry
    return None


def _basename(entry: Mapping[str, Any]) -> str | None:
    """The last segment of a file dictionary's URL (pip names the file it saves so)."""
    url = entry.get("url")
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1]) if isinstance(url, str) else None


def _json_body(response: _Response) -> bytes:
    """The body of a provenance response, which must be JSON."""
    if not response.content_type.endswith(("/json", "+json")):
        raise IndexResponseError(
            response.url, response.status, f"a provenance must be JSON, not {response.content_type}"
        )
    return response.body


@dataclass(frozen=True, slots=True)
class _Response:
    """An answer: its final URL, status, content type (no parameters) and body."""

    url: str
    status: int
    content_type: str
    body: bytes


class _Client:
    """Bounded GET requests: certificates checked, no scheme change (but to ``https``),
    each index's credentials sent to its origin only."""

    def __init__(self, indexes: Sequence[str], cert: str | None, timeout: float) -> None:
        self._timeout = timeout
        self._credentials: dict[tuple[str, str, int | None], str] = {}
        for index in indexes:
            parts = urlsplit(index)
            if parts.username is not None:
                secret = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
                token = base64.b64encode(secret.encode()).decode()
                self._credentials.setdefault(_origin(index), f"Basic {token}")
        if cert is not None and Path(cert).is_dir():
            context = ssl.create_default_context(capath=cert)
        else:
            context = ssl.create_default_context(cafile=cert)
        self._opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=context), _Redirects()
        )

    def get(self, url: str, accept: str, limit: int, referrer: str | None = None) -> _Response:
        """GET ``url`` (credentials removed from it); a 404 or 406 is returned, any other
        failure raised."""
        _check_scheme(referrer, url)
        parts = urlsplit(url)
        bare = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
        request = urllib.request.Request(bare, headers={"Accept": accept})  # noqa: S310 - checked
        request.add_header("User-Agent", f"mcs-host/{__version__}")
        token = self._credentials.get(_origin(url))
        if token is not None:  # never copied to where a redirect leads
            request.add_unredirected_header("Authorization", token)
        try:
            with self._opener.open(request, timeout=self._timeout) as answer:
                return _Response(
                    answer.geturl(), answer.status, _content_type(answer), self._read(answer, limit)
                )
        except urllib.error.HTTPError as error:
            with error:
                if error.code in (404, 406):
                    return _Response(error.geturl(), error.code, _content_type(error), b"")
                raise IndexResponseError(
                    url, error.code, f"answered {error.code} {error.reason}"
                ) from None
        except IndexResponseError:
            raise
        except (OSError, ValueError) as error:  # URLError, TLS, timeouts, a malformed answer
            reason = getattr(error, "reason", error)
            raise IndexResponseError(url, None, f"no answer ({reason})") from None

    def _read(self, answer: Any, limit: int) -> bytes:
        """The body, refused past ``limit`` bytes or four timeouts in all."""
        length = answer.headers.get("Content-Length", "")
        if length.strip().isdigit() and int(length) > limit:
            raise IndexResponseError(answer.geturl(), answer.status, f"more than {limit} bytes")
        deadline = time.monotonic() + 4 * self._timeout
        chunks: list[bytes] = []
        size = 0
        while chunk := answer.read(min(1 << 16, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise IndexResponseError(answer.geturl(), answer.status, f"more than {limit} bytes")
            if time.monotonic() > deadline:
                raise IndexResponseError(answer.geturl(), answer.status, "answered too slowly")
        return b"".join(chunks)


class _Redirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirects, refused when they change the scheme (but from ``http`` to
    ``https``)."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        try:
            _check_scheme(req.full_url, newurl, code)
        except IndexResponseError:
            fp.close()  # the answer that redirected, never read
            raise
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _check_scheme(origin: str | None, url: str, status: int | None = None) -> None:
    """Refuse ``url`` unless it is HTTP(S) and, coming from ``origin``, keeps its scheme
    (or moves from ``http`` to ``https``)."""
    new = urlsplit(url).scheme.lower()
    old = urlsplit(origin).scheme.lower() if origin is not None else new
    if new not in _WEB or (new != old and (old, new) != ("http", "https")):
        where = origin if origin is not None else url
        raise IndexResponseError(where, status, f"refused: it leads to {_redacted(url)}")


def _origin(url: str) -> tuple[str, str, int | None]:
    """Scheme, host and port of ``url`` (the default port spelled out)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or ""), parts.port or {"http": 80, "https": 443}.get(scheme)


def _content_type(answer: Any) -> str:
    """The media type of an answer, lowercase, without parameters."""
    message = Message()
    message["Content-Type"] = answer.headers.get("Content-Type", "")
    return message.get_content_type()


def _slashed(index: str) -> str:
    """``index`` with the one trailing slash joining needs."""
    return index.rstrip("/") + "/"


def _redacted(url: str) -> str:
    """``url`` with its password (or a user name alone, often a token) as ``****``."""
    parts = urlsplit(url)
    if parts.username is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    secret = "****" if parts.password is None else f"{parts.username}:****"
    return urlunsplit(parts._replace(netloc=f"{secret}@{host}"))
