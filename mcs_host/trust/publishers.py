"""Trusted Publisher identities: the syntax a user states one in, what a Fulcio certificate
proves, and whether the two match.

An identity is ``github:OWNER/REPO[:WORKFLOW][@ENVIRONMENT]`` or
``gitlab:NAMESPACE/PROJECT[:WORKFLOW_FILEPATH][@ENVIRONMENT]``; a part left out matches any.
What a certificate proves is read from its Fulcio extensions (sigstore/fulcio's
``docs/oid-info.md``): the issuer, the source repository URI, the build config URI (the
workflow file, at the ref or commit the certificate names) and the deployment environment
(named only by certificates issued since Fulcio added it). Kept apart from the Sigstore
verification (``provenance``) so that a registry can compare identities without it; imports
only the standard library (``cryptography`` when a certificate is read).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from cryptography.x509 import Certificate

# exported once mcs_host/__init__.pyi names them: Certified, Forge, IdentityMismatch,
# PublisherIdentity, identity_mismatch
__all__: list[str] = []

Forge = Literal["github", "gitlab"]
"""Where a Trusted Publisher's workflow runs: GitHub Actions or GitLab CI/CD."""

Mismatch = Literal["repository", "workflow", "environment"]
"""The part of a stated identity that a certificate does not prove."""

_SYNTAX: Mapping[Forge, str] = MappingProxyType(
    {
        "github": "github:OWNER/REPO[:WORKFLOW][@ENVIRONMENT]",
        "gitlab": "gitlab:NAMESPACE/PROJECT[:WORKFLOW_FILEPATH][@ENVIRONMENT]",
    }
)
_SEGMENT = r"(?!\.+(?:/|$))[A-Za-z0-9_.][A-Za-z0-9_.-]*"  # not "." or ".."
_REPOSITORY: Mapping[Forge, re.Pattern[str]] = MappingProxyType(
    {
        "github": re.compile(r"[A-Za-z0-9-]{1,39}/(?!\.+$)[A-Za-z0-9._-]{1,100}"),
        "gitlab": re.compile(rf"(?:{_SEGMENT}/)+{_SEGMENT}"),
    }
)
_WORKFLOW: Mapping[Forge, re.Pattern[str]] = MappingProxyType(
    {
        "github": re.compile(r"[^/\s:@]+\.ya?ml"),
        "gitlab": re.compile(r"(?:(?!\.{1,2}/)[^/\s:@]+/)*(?!\.{1,2}$)[^/\s:@]+"),
    }
)
_ENVIRONMENT = re.compile(r"[^\x00-\x1f\x7f\s](?:[^\x00-\x1f\x7f]{0,253}[^\x00-\x1f\x7f\s])?")
_ISSUERS: Mapping[Forge, str] = MappingProxyType(
    {"github": "https://token.actions.githubusercontent.com", "gitlab": "https://gitlab.com"}
)
_HOSTS: Mapping[Forge, str] = MappingProxyType(
    {"github": "https://github.com/", "gitlab": "https://gitlab.com/"}
)
_WORKFLOW_DIRS: Mapping[Forge, str] = MappingProxyType(
    {"github": "/.github/workflows/", "gitlab": "//"}
)
# Fulcio's extensions under this arc, each a DER UTF8String
_FULCIO = "1.3.6.1.4.1.57264.1."
_ISSUER, _REPOSITORY_URI, _COMMIT, _REF, _REPOSITORY_ID, _OWNER_ID = 8, 12, 13, 14, 15, 17
_BUILD_CONFIG, _DEPLOYMENT = 18, 23


@dataclass(frozen=True, slots=True)
class PublisherIdentity:
    """A Trusted Publisher: a repository's workflow that may publish a project."""

    forge: Forge
    repository: str
    """``OWNER/REPO`` on GitHub, ``NAMESPACE/PROJECT`` (with subgroups) on GitLab."""
    workflow: str | None = None
    """The workflow's file name in ``.github/workflows``, or the GitLab CI/CD file's path;
    ``None`` when any workflow of the repository may publish."""
    environment: str | None = None
    """The deployment environment the workflow ran in; ``None`` when any (or none) may."""

    @classmethod
    def parse(cls, text: str) -> PublisherIdentity:
        """The identity ``text`` states; a :class:`ValueError` naming the part at fault."""
        forge, colon, rest = text.partition(":")
        if not colon or forge not in _SYNTAX:
            raise ValueError(
                f"publisher {text!r} does not start with github: or gitlab: "
                f"(write {_SYNTAX['github']} or {_SYNTAX['gitlab']})"
            )
        kind: Forge = "github" if forge == "github" else "gitlab"
        rest, at, environment = rest.partition("@")
        repository, colon, workflow = rest.partition(":")
        where, syntax = f"publisher {text!r}: the", f"(write {_SYNTAX[kind]})"
        if not _REPOSITORY[kind].fullmatch(repository):
            shape = "OWNER/REPO" if kind == "github" else "NAMESPACE/PROJECT"
            raise ValueError(f"{where} repository {repository!r} is not {shape} {syntax}")
        if colon and not _WORKFLOW[kind].fullmatch(workflow):
            shape = (
                "a file name ending in .yml or .yaml (the file in .github/workflows)"
                if kind == "github"
                else "a relative path to the CI/CD file"
            )
            raise ValueError(f"{where} workflow {workflow!r} is not {shape} {syntax}")
        if at and not _ENVIRONMENT.fullmatch(environment):
            raise ValueError(
                f"{where} environment {environment!r} after '@' is empty, longer than 255 "
                f"characters, or has control characters or spaces at its ends {syntax}"
            )
        return cls(kind, repository, workflow if colon else None, environment if at else None)

    def __str__(self) -> str:
        workflow = f":{self.workflow}" if self.workflow is not None else ""
        environment = f"@{self.environment}" if self.environment is not None else ""
        return f"{self.forge}:{self.repository}{workflow}{environment}"


@dataclass(frozen=True, slots=True)
class Certified:
    """What a Fulcio certificate proves about the workflow it was issued to."""

    identity: PublisherIdentity
    """The publisher, its workflow always named."""
    ref: str | None
    """The git ref the workflow ran on (``refs/tags/v1.0``), when the certificate names it."""
    commit: str | None
    """The commit the workflow ran on, hex, when the certificate names it."""
    repository_id: str | None
    """The forge's number for the repository: it stays when the repository is renamed or
    transferred, and differs for a new repository given a deleted one's name."""
    owner_id: str | None
    """The forge's number for the repository's owner (user, organization or group)."""

    @classmethod
    def read(cls, certificate: Certificate) -> Certified:
        """What ``certificate`` proves; a :class:`ValueError` when it was not issued to a
        GitHub or GitLab workflow. It must have been verified first: this only reads it."""
        issuer = _extension(certificate, _ISSUER)
        forge = next((f for f, url in _ISSUERS.items() if url == issuer), None)
        if forge is None:
            raise ValueError(
                f"its certificate was issued for {issuer or 'no named issuer'}, "
                "not for a GitHub or GitLab workflow"
            )
        repository_uri = _extension(certificate, _REPOSITORY_URI) or ""
        ref, commit = _extension(certificate, _REF), _extension(certificate, _COMMIT)
        config = _extension(certificate, _BUILD_CONFIG) or ""
        prefix = repository_uri + _WORKFLOW_DIRS[forge]
        workflow = next(
            (
                config[len(prefix) : -len(at) - 1]
                for at in (ref, commit)
                if at and config.startswith(prefix) and config.endswith(f"@{at}")
            ),
            None,
        )
        environment = _extension(certificate, _DEPLOYMENT)
        text = f"{forge}:{repository_uri.removeprefix(_HOSTS[forge])}:{workflow}"
        text += f"@{environment}" if environment else ""
        identity = None
        if workflow is not None and repository_uri.startswith(_HOSTS[forge]):
            with contextlib.suppress(ValueError):  # a name no one could state: refused below
                identity = PublisherIdentity.parse(text)
        if identity is None:
            raise ValueError(
                f"its certificate names no workflow of a {forge} repository (source "
                f"{repository_uri!r}, build config {config!r})"
            )
        return cls(
            identity,
            ref,
            commit,
            _extension(certificate, _REPOSITORY_ID),
            _extension(certificate, _OWNER_ID),
        )


@dataclass(frozen=True, slots=True)
class IdentityMismatch:
    """The part of a stated identity that a certificate does not prove."""

    part: Mismatch
    sentence: str
    """Who published it and what was stated instead (``published by ..., not ...``)."""


def identity_mismatch(
    stated: PublisherIdentity, proven: PublisherIdentity
) -> IdentityMismatch | None:
    """What of ``stated`` the certificate's ``proven`` is not; ``None`` when it matches. GitHub's
    repository and environment names are matched without case, as GitHub does; GitLab's, and
    workflow files, exactly."""

    def same(a: str, b: str) -> bool:
        return a.casefold() == b.casefold() if stated.forge == "github" else a == b

    by = f"published by {proven}, not"
    if stated.forge != proven.forge or not same(stated.repository, proven.repository):
        return IdentityMismatch("repository", f"{by} {stated.forge}:{stated.repository}")
    if stated.workflow is not None and stated.workflow != proven.workflow:
        return IdentityMismatch("workflow", f"{by} by workflow {stated.workflow}")
    if stated.environment is None:
        return None
    if proven.environment is None:
        return IdentityMismatch(
            "environment",
            f"published by {proven}, whose certificate names no environment, so it cannot "
            f"prove environment {stated.environment} (older certificates name none): state "
            "the identity without @ENVIRONMENT to accept it",
        )
    if not same(stated.environment, proven.environment):
        return IdentityMismatch("environment", f"{by} from environment {stated.environment}")
    return None


def _extension(certificate: Certificate, number: int) -> str | None:
    """The text of Fulcio extension ``number``; ``None`` when absent or not a UTF8String."""
    from cryptography import x509

    oid = x509.ObjectIdentifier(f"{_FULCIO}{number}")
    try:
        value = certificate.extensions.get_extension_for_oid(oid).value
    except x509.ExtensionNotFound:
        return None
    if not isinstance(value, x509.UnrecognizedExtension):
        return None
    der = value.value
    if len(der) < 2 or der[0] != 0x0C:  # the UTF8String tag
        return None
    length, start = der[1], 2
    if length & 0x80:  # the long form: the next (length & 0x7f) bytes are the length
        start += length & 0x7F
        length = int.from_bytes(der[2:start], "big")
    if len(der) != start + length:
        return None
    try:
        return der[start:].decode("utf-8")
    except UnicodeDecodeError:
        return None
