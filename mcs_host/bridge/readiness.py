"""Readiness: what one replica of ``serve --http`` serves, as a fingerprint every replica of a
deployment shares, and the two endpoints a load balancer and an orchestrator probe.

The fingerprint is the SHA-256 of a canonical JSON of each mount (label, kind, distribution,
version, how it was verified, the digest of its verified files, its tools) and the tool names
offered. Replicas that verify the same drivers against the same registry serve the same
fingerprint; a replica whose configuration names the fingerprint it must serve and that serves
another is alive but never ready. ``GET /healthz`` answers 200 while the process serves;
``GET /readyz`` 200 with the fingerprint when the stack it serves is the expected one, else
503 with the reason. Neither needs the bearer token (probes carry none), and neither shows
more than the fingerprint's digest: which drivers and versions it stands for is on the
server's stderr when it starts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from mcs_host.loading.records import LoadRecord

__all__: list[str] = []  # for serve and its HTTP app

PROBES = ("/healthz", "/readyz")
"""The paths a probe reaches without the bearer token."""


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What a replica serves: ``digest`` (``sha256:`` and 64 hex digits) of ``mounts`` and
    ``tools``."""

    digest: str
    mounts: tuple[tuple[tuple[str, Any], ...], ...]
    """Per mount, its facts as ``(key, value)`` pairs, in label order."""
    tools: tuple[str, ...]
    """The tool names offered, sorted."""

    def lines(self) -> list[str]:
        """What the fingerprint stands for, a line per mount, for the server's stderr."""
        said = [f"fingerprint {self.digest}"]
        for facts in self.mounts:
            mount = dict(facts)
            shown = f"{mount['distribution'] or '-'} {mount['version'] or '-'}"
            digest = mount["digest"] or "no digest"
            said.append(
                f"  {mount['label']}: {shown} ({mount['verification']}, {digest}), "
                f"{len(mount['tools'])} tools"
            )
        return said


def fingerprint(records: Iterable[LoadRecord], tools: Iterable[str]) -> Fingerprint:
    """The fingerprint of the mounted ``records`` that offer ``tools``."""
    mounts = tuple(
        (
            ("label", r.label),
            ("kind", r.kind),
            ("distribution", r.distribution),
            ("version", r.version),
            ("verification", r.verification),
            ("digest", r.digest),
            ("tools", tuple(sorted(r.tools))),
        )
        for r in sorted(records, key=lambda r: r.label)
        if r.status == "mounted"
    )
    offered = tuple(sorted(tools))
    document = {"mounts": [dict(m) for m in mounts], "tools": offered}
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return Fingerprint(f"sha256:{hashlib.sha256(canonical.encode()).hexdigest()}", mounts, offered)


@dataclass(frozen=True, slots=True)
class Readiness:
    """A replica's fingerprint and the one its configuration expects (``None``: any)."""

    serves: Fingerprint
    expected: str | None = None

    @property
    def problem(self) -> str | None:
        """Why the replica is not ready, or ``None`` when it is."""
        if self.expected is None or self.expected == self.serves.digest:
            return None
        return (
            f"this replica serves {self.serves.digest}, and its configuration expects "
            f"{self.expected}: its drivers, versions, files or tools differ"
        )

    def routes(self) -> Sequence[Route]:
        """``/healthz`` and ``/readyz`` as Starlette routes."""
        from starlette.routing import Route  # noqa: PLC0415 - the mcp extra

        return [
            Route(PROBES[0], self._alive, methods=["GET"]),
            Route(PROBES[1], self._ready, methods=["GET"]),
        ]

    async def _alive(self, request: Request) -> Response:
        from starlette.responses import PlainTextResponse  # noqa: PLC0415 - the mcp extra

        return PlainTextResponse("ok\n")

    async def _ready(self, request: Request) -> Response:
        from starlette.responses import JSONResponse  # noqa: PLC0415 - the mcp extra

        problem = self.problem
        body: dict[str, Any] = {"ready": problem is None, "fingerprint": self.serves.digest}
        if problem is not None:
            body |= {"expected": self.expected, "reason": problem}
        return JSONResponse(body, status_code=200 if problem is None else 503)
