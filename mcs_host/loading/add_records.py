"""What ``mcs-host add`` is asked, what it asks the user, what it did, and why it refused.

Frozen records only: :class:`AddRequest` (what to add, and where to write), :class:`Confirmation`
(an identity for the user to confirm), :class:`AddedDistribution` and :class:`Added` (what was
verified, installed and written), and :class:`AddError`, which names the distribution, the
step and the fix. The stages of :mod:`.adding` pass them on; none imports Sigstore or pip.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from mcs_host.trust.publishers import PublisherIdentity
    from mcs_host.trust.registry import DriverEntry, TrustLabel

# used by mcs-host add: AddError, AddRequest, Added, AddedDistribution, Confirmation, Step,
# WrittenTable
__all__: list[str] = []

Step = Literal[
    "registry",
    "configuration",
    "download",
    "provenance",
    "identity",
    "resolve",
    "pin",
    "install",
    "digest",
    "write",
]
"""Where ``add`` stopped: reading the registry or the configuration, downloading a wheel,
fetching or verifying its provenance, confirming the identity it proves, resolving what it
needs, pinning it, installing, confirming what was installed, writing the files."""

How = Literal["attested", "no-provenance", "installed", "host"]
"""How a distribution of what ``add`` added was verified: by its publisher's provenance, pinned
from the downloaded wheel's bytes (no provenance), pinned as it was installed already, or not
at all because it is part of mcs-host's own installation."""


class AddError(Exception):
    """``add`` refused or failed, and changed nothing (or put back what it changed): the
    message names the distribution and the step, :attr:`fix` says what to do."""

    def __init__(
        self,
        distribution: str,
        step: Step,
        message: str,
        fix: str,
        reason: str | None = None,
    ) -> None:
        self.distribution = distribution
        self.step: Step = step
        self.fix = fix
        self.reason = reason
        """A reason code of :data:`mcs_host._reasons.REASONS` (``publisher-changed``,
        ``provenance-missing``) or of a provenance check, when one names the refusal."""
        self.undone: tuple[str, ...] = ()
        """What was put back after a change failed (each a sentence)."""
        super().__init__(message)

    def with_undone(self, undone: tuple[str, ...]) -> AddError:
        """This error, saying what was put back."""
        self.undone = undone
        return self


@dataclass(frozen=True, slots=True)
class Confirmation:
    """A publisher identity for the user to confirm before ``add`` trusts it."""

    distribution: str
    version: str
    proven: str
    """The identity the provenance's certificate proves."""
    recorded: str | None
    """The publisher the registry records, when the proven one replaces it; ``None`` when
    the distribution has none yet (trust on first use of an identity)."""


@dataclass(frozen=True, slots=True)
class AddRequest:
    """What to add, and where to write it."""

    requirement: str
    """``NAME`` or ``NAME==VERSION``, as the index names it."""
    registry: str
    """The plain registry file to write (it need not exist)."""
    config: str
    """The configuration file to add the table to (it need not exist)."""
    publisher: PublisherIdentity | None = None
    """The identity the user states (``--publisher``)."""
    label: str | None = None
    """The table's label, when not the driver's (or the server's) own."""
    settings: Mapping[str, Any] | None = None
    """The driver's constructor settings (``--settings``); ``None``: commented in the table."""
    server: bool = False
    """An MCP server distribution (its console script) rather than a driver."""
    provenance: Path | None = None
    """The provenance file to use instead of the index's."""
    yes: bool = False
    """Confirm the identity the provenance proves without asking (``--yes``)."""
    ask: Callable[[Confirmation], bool] | None = None
    """Asks the user to confirm an identity; ``None`` when no one can be asked (no
    terminal): an identity only a confirmation admits is then refused."""
    declared: Mapping[str, DriverEntry] = field(default_factory=dict)
    """The driver entries of the registries the configuration reads (by id): a distribution
    that ships no entry point is added as the driver one of them declares for it."""
    python: str = sys.executable
    """The interpreter whose pip downloads and installs (the host's own)."""
    env: Mapping[str, str] | None = None
    """pip's environment (default: this process's)."""


@dataclass(frozen=True, slots=True)
class AddedDistribution:
    """One distribution of what was added, and how it was verified."""

    distribution: str
    version: str
    how: How
    publisher: str | None
    """The publisher its provenance proved (``attested``), else ``None``."""
    log_index: int | None
    """Its publish attestation's Rekor log index (``attested``), else ``None``."""
    needed_by: str | None
    """The distribution that needs it; ``None`` for the one added."""
    digest: str | None
    """Its pin (``installed-tree-v2``); ``None`` for mcs-host's own."""
    installed: bool
    """Whether this add installed it (else it was installed already)."""
    replaced: str | None = None
    """The version it replaced, when it was installed at another one."""
    shipped: TrustLabel | None = None
    """The trust label of the pin mcs-host ships (its catalog) that its files match
    (``reference``); ``None`` when the catalog pins no release of its version."""


@dataclass(frozen=True, slots=True)
class WrittenTable:
    """A table of the configuration that names what was added."""

    table: str
    """``drivers.LABEL`` or ``mcp_servers.LABEL``."""
    names: str
    """The driver's label (``driver``) or the server's distribution it names."""
    written: bool
    """Whether this add wrote it (else the configuration had it already, and it was kept)."""


@dataclass(frozen=True, slots=True)
class Added:
    """What ``add`` verified, installed and wrote."""

    distributions: tuple[AddedDistribution, ...]
    """The one added first, then what it needs."""
    registry: str
    provenance: tuple[str, ...]
    """The provenance files stored beside the registry."""
    config: str
    tables: tuple[WrittenTable, ...]
    notes: tuple[str, ...] = ()
    """What the user should know (a host plugin left unpinned, a configuration that now
    names drivers)."""
