"""The records the load pipeline hands on and reports: all frozen, built once.

A :class:`Plan` says what to mount under a label; each stage of
:mod:`mcs_host.loading.stages` takes records and returns one or raises :class:`Refused`;
:class:`LoadRecord` says what happened to one mount, :class:`Mounted` carries it with the
driver to the orchestrator, and :class:`LoadReport` says what happened to the whole load.
:class:`VerifyRecord` and :class:`VerifyReport` are what ``verify`` decides without importing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from mcs_host._reasons import known_reason

if TYPE_CHECKING:
    from mcs_host.bridge.client import MCPToolDriver
    from mcs_host.contract import Tool
    from mcs_host.discovery import Problem
    from mcs_host.orchestration.orchestrator import Orchestrator
    from mcs_host.trust.dependencies import DependencyCheck
    from mcs_host.trust.verification import Verification

    from .config_schema import DriverSettings

__all__ = [
    "LiveCheck",
    "LoadError",
    "LoadRecord",
    "LoadReport",
    "Loaded",
    "Progress",
    "ServerCheck",
    "VerifyRecord",
    "VerifyReport",
]

Progress = Callable[[int, int, str], None]
"""Told ``(done, total, what)`` before each step of a long operation (the command line
shows it on a terminal)."""

MODULES = "; modules: "
"""Where an ``unverified-import`` note (one per distribution) starts naming its modules: the
command line shows them only with ``--verbose``."""

Status = Literal["mounted", "skipped", "rejected", "failed"]
Kind = Literal["driver", "plugin"]


@dataclass(frozen=True, slots=True)
class Plan:
    """One mount to attempt: a label, the installed driver or in-process object behind it,
    and its settings."""

    label: str
    driver: str | None
    """The installed driver's label; ``None`` for an in-process object."""
    settings: DriverSettings
    obj: object | None = None


class Refused(Exception):  # noqa: N818 - a stage's verdict, turned into a LoadRecord
    """A stage's decision that a mount does not go ahead: status, reason code (one of
    :data:`~mcs_host._reasons.REASONS`, or :class:`ValueError`) and message."""

    def __init__(
        self,
        status: Status,
        reason: str,
        message: str,
        trace: str | None = None,
        notes: tuple[str, ...] = (),
        verification: Verification | None = None,
    ) -> None:
        super().__init__(message)
        self.status: Status = status
        self.reason = known_reason(reason)
        self.message = message
        self.trace = trace
        self.notes = notes
        """Warnings the stage gathered before it refused."""
        self.verification = verification
        """The verification that refused (its status and trust label go on the record)."""


@dataclass(frozen=True, slots=True)
class LoadRecord:
    """What happened to one mount (or host plugin)."""

    label: str
    """The label it is mounted under."""
    status: Status
    reason: str
    """A code of :data:`~mcs_host._reasons.REASONS`: ``mounted``, ``not-requested``,
    ``denied``, ``file-modified``, ``constructor-error``, ``timeout``, ``invalid-tools``..."""
    message: str
    driver: str | None = None
    """The installed driver's label it comes from; ``None`` for an in-process driver."""
    distribution: str | None = None
    version: str | None = None
    verification: str | None = None
    """How its bytes were proven: ``pinned``, ``signed``, ``unverified`` (allowed by the
    policy), ``revoked`` or ``rejected``; ``in-process`` for an object added by the app."""
    trust: str | None = None
    """The registry's trust label for it (``verified``, ``reference``, ``community``);
    ``None`` when no registry entry vouches for it."""
    digest: str | None = None
    """The digest of its installed files that verification computed (``sha256:...``);
    ``None`` when none was (an in-process driver, an MCP server)."""
    kind: Literal["driver", "plugin", "mcp"] = "driver"
    """``mcp``: an MCP server mounted as a driver."""
    tools: tuple[str, ...] = ()
    """The tools as this driver names them (the orchestrator may prefix them)."""
    timings: Mapping[str, float] = field(default_factory=dict)
    """Seconds per stage, each under its own key: ``verify``, ``compatibility`` (versions,
    capabilities), ``dependencies``, ``import``, ``instantiate``, ``meta`` (the driver's meta
    against its manifest), ``autostart``, ``healthcheck``, ``list_tools``; ``start`` for an
    isolated driver (its child's whole start) or an MCP server. Only the stages it reached."""
    traceback: str | None = None
    warnings: tuple[str, ...] = ()
    health: Mapping[str, Any] | None = None
    isolation: Literal["process", "remote"] | None = None
    """``process``: it runs in a child process of its own, served over MCP; ``remote``: an
    MCP server reached over HTTP, whose code this host never sees."""

    def __post_init__(self) -> None:
        if self.reason:  # empty only while the host is still deciding
            known_reason(self.reason)


@dataclass(frozen=True, slots=True)
class Mounted:
    """One mount as its stages left it, before the orchestrator takes it (every kind: in
    process, isolated, MCP server). Internal to the host: the report keeps only the record."""

    record: LoadRecord
    driver: object = None
    """The driver, when the record says ``mounted``."""
    tools: tuple[Tool, ...] | None = None
    """Its valid tools; ``None`` for a standalone driver."""
    process: MCPToolDriver | None = None
    """The driver again when the host started its process (an isolated driver, an MCP
    server): the host ends it when it does not mount or the load fails."""
    waiver: str | None = None
    """Each call to it needs a consent plugin's approval; this says what would waive that."""


@dataclass(frozen=True, slots=True)
class LoadReport:
    """The outcome of one load: a record per mount and per host plugin, and the errors."""

    records: tuple[LoadRecord, ...]
    plugins: tuple[LoadRecord, ...] = ()
    errors: tuple[str, ...] = ()
    """Fatal problems: strict failures, required drivers, requested labels not found."""
    registry_errors: tuple[str, ...] = ()
    timings: Mapping[str, float] = field(default_factory=dict)
    """Seconds for the shared stages: ``registries``, ``plugins``, ``discover``, and
    ``total``."""
    environment: tuple[str, ...] = ()
    """What the host ignored about its own installation (a second or fake mcs-host
    distribution, a requirement installed twice): it grants nothing."""

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def mounted(self) -> tuple[LoadRecord, ...]:
        return tuple(r for r in self.records if r.status == "mounted")

    def get(self, label: str) -> LoadRecord | None:
        return next((r for r in self.records if r.label == label), None)


class LoadError(Exception):
    """Loading met an error the configuration makes fatal; ``report`` says everything."""

    def __init__(self, report: LoadReport) -> None:
        self.report = report
        super().__init__("; ".join(report.errors))


@dataclass(frozen=True, slots=True)
class Loaded:
    """The stacked orchestrator and the load report; unpacks as ``driver, report``."""

    driver: Orchestrator
    report: LoadReport
    owned: tuple[Any, ...] = ()
    """The drivers the host started and ends: isolated drivers' processes, MCP servers."""
    gated: tuple[str, ...] = ()
    """The labels each of whose calls needs a consent plugin's approval (MCP servers that
    require consent): with none, the user is asked where someone can be, else it is denied."""

    def __iter__(self) -> Iterator[Any]:
        return iter((self.driver, self.report))

    def current_report(self) -> LoadReport:
        """The report as it stands now: an isolated driver or MCP server that failed more
        times in a row than it may be restarted is ``failed`` (``restarts-exhausted``)."""
        gave_up = {d.meta.name: d.failures for d in self.owned if d.failed}
        if not gave_up:
            return self.report
        records = tuple(
            replace(
                r,
                status="failed",
                reason="restarts-exhausted",
                message=f"it failed {gave_up[r.label]} times in a row; it is not started or "
                "connected again (load again to retry)",
            )
            if r.label in gave_up and r.status == "mounted"
            else r
            for r in self.report.records
        )
        return replace(self.report, records=records)

    def close(self) -> None:
        """End what the host started for this load, all at once (also done at interpreter
        exit)."""
        if self.owned:  # MCP drivers: the bridge is imported already
            from mcs_host.bridge.client import close_together  # noqa: PLC0415

            close_together(self.owned)

    def __enter__(self) -> Loaded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True, slots=True)
class ServerCheck:
    """How far an MCP server mounted as a driver is vouched for, decided before it starts."""

    label: str
    transport: Literal["stdio", "http"]
    target: str
    """Its URL, its command line, or ``distribution:script``."""
    status: Literal["pinned", "registered", "unverified", "rejected", "missing"]
    """``pinned``: its distribution's files match the registry's pins; ``registered``: a
    registry entry says exactly this URL or command (nothing of a remote server is seen)."""
    reason: str
    message: str
    allowed: bool
    """Whether the policy lets it start."""
    consent: bool
    """Whether each call needs a consent plugin's approval."""
    trust: str | None = None
    distribution: str | None = None
    version: str | None = None
    command: tuple[str, ...] = ()
    """What starts a stdio server."""
    dependencies: tuple[DependencyCheck, ...] = ()
    unverified: tuple[str, ...] = ()
    """The unverified code starting it would run."""
    release: DependencyCheck | None = None
    """A server from a distribution: its files as checked."""
    script: str | None = None
    """A server from a distribution: the console script that serves it."""
    entry_point: str | None = None
    """A server from a distribution: the ``module:attribute`` its console script runs."""

    def __post_init__(self) -> None:
        known_reason(self.reason)


@dataclass(frozen=True, slots=True)
class LiveCheck:
    """A driver started for real, in a child process of its own (``verify --live``)."""

    ok: bool
    message: str
    tools: tuple[str, ...] = ()
    seconds: float = 0.0
    """From starting the child to its tools listed."""
    health: Mapping[str, Any] | None = None
    """Its healthcheck result, when it declares one."""


@dataclass(frozen=True, slots=True)
class VerifyRecord:
    """What ``load`` would do with one installed driver or host plugin, decided before
    import."""

    verification: Verification
    kind: Kind = "driver"
    dependencies: tuple[DependencyCheck, ...] = ()
    refusal: tuple[str, str] | None = None
    """``(reason, message)`` when it passed verification but load would still refuse it (a
    dependency missing, refused or not allowed)."""
    unverified: tuple[str, ...] = ()
    """The unverified code load would run for it: the driver itself when the policy allows
    it unverified, and its unverified dependencies."""
    live: LiveCheck | None = None
    """How starting it in a process of its own went (``verify --live``)."""

    def __post_init__(self) -> None:
        if self.refusal is not None:
            known_reason(self.refusal[0])

    @property
    def label(self) -> str:
        return self.verification.label

    @property
    def loadable(self) -> bool:
        """Whether load would import it."""
        return self.verification.allowed and self.refusal is None

    @property
    def verified(self) -> bool:
        """Whether load would import it and run only verified code (and the host's)."""
        return self.loadable and not self.unverified


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """The outcome of :meth:`~mcs_host.Host.verify`."""

    records: tuple[VerifyRecord, ...]
    missing: tuple[str, ...] = ()
    """Labels asked for that no installed driver or plugin has."""
    registries: tuple[str, ...] = ()
    registry_errors: tuple[tuple[str, str], ...] = ()
    """``(reason, message)`` of each registry left out."""
    environment: tuple[str, ...] = ()
    """What the host ignored about its own installation; it grants nothing."""
    startup: tuple[tuple[str, str], ...] = ()
    """``(path, what)``: code the interpreter runs at start-up, before any host can act."""
    servers: tuple[ServerCheck, ...] = ()
    """The configured MCP servers, checked as a load would check them (none is started)."""
    problems: tuple[Problem, ...] = ()
    """What makes a label mean two things across the entry point groups: a host plugin with
    an installed driver's label (``plugin-shadows-driver``). A note: ``ok`` does not read it."""

    @property
    def ok(self) -> bool:
        """Whether every driver asked for exists, may be loaded, and would run only verified
        code (started, with ``--live``), and every MCP server may start and is vouched for."""
        return (
            not self.missing
            and all(r.verified and (r.live is None or r.live.ok) for r in self.records)
            and all(s.allowed and not s.unverified for s in self.servers)
        )
