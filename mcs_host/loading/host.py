"""The host: discover, verify, check, import and mount drivers, recording every step.

:meth:`Host.load` runs the pipeline: registries -> host plugins -> discovery -> plan -> for
each mount the stages of :mod:`mcs_host.loading.stages` -> the orchestrator -> the report.
Each planned mount gets a :class:`LoadRecord` (mounted, skipped, rejected or failed, with a
reason code, a message and per-stage timings). A driver that fails to import, raises or hangs
in its constructor or ``list_tools``, or returns invalid tools is recorded and left out; every
other driver still mounts. Strict mode turns any rejection or failure into an error, as does a
required driver that does not mount. Drivers not asked for are never verified nor imported.
Isolated drivers' children start side by side (at most :data:`_STARTS` at once), and every
mount enters the orchestrator in the planned order.

One module: the order of the pipeline, and each mount's record as its stages end, read best
in one place.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcs_host.contract import Tool
from mcs_host.discovery import LABEL_RULE, Candidate, Discovery, is_valid_label
from mcs_host.orchestration.orchestrator import Orchestrator
from mcs_host.trust import _origins
from mcs_host.trust.verification import Verification

from . import isolating, servers, stages
from .config import DriverSettings, HostConfig, load_config, override_config
from .hooks import plugin_manager
from .planning import plan_mounts, skip_reason
from .plugins import (
    ask_consent,
    audit_call,
    load_plugins,
    plugin_errors,
    report_loaded,
    text_formats,
)
from .records import (
    Loaded,
    LoadError,
    LoadRecord,
    LoadReport,
    Plan,
    Progress,
    Refused,
    VerifyReport,
)
from .verify import installed_drivers, verify_installed

if TYPE_CHECKING:
    from mcs_host.bridge.isolation import IsolatedDriver

__all__ = ["Host", "load_drivers"]


class Host:
    """Loads drivers as its configuration says; add in-process drivers and plugins first."""

    __slots__ = ("_in_process", "_plugins", "config", "search_path")

    def __init__(
        self, config: HostConfig | None = None, *, search_path: Sequence[str] | None = None
    ) -> None:
        self.config = config if config is not None else HostConfig()
        self.search_path = search_path
        self._in_process: dict[str, tuple[object, DriverSettings]] = {}
        self._plugins: list[tuple[object, str]] = []

    def add_driver(
        self,
        label: str,
        driver: object,
        settings: Mapping[str, Any] | DriverSettings | None = None,
    ) -> None:
        """Mount ``driver`` (an instance, a class or a factory) under ``label``, unverified:
        the application vouches for its own objects. ``settings`` are the constructor's
        keywords, or a whole :class:`DriverSettings` (autostart, capabilities, timeout)."""
        if label in self._in_process:
            raise ValueError(f"a driver is already added as {label!r}")
        if not is_valid_label(label):
            raise ValueError(f"the label {label!r} is not {LABEL_RULE}")
        if not isinstance(settings, DriverSettings):
            settings = DriverSettings(settings=dict(settings or {}))
        self._in_process[label] = (driver, settings)

    def add_plugin(self, plugin: object, name: str | None = None) -> None:
        """Register a host plugin object (a module or an instance with hook functions)."""
        self._plugins.append(
            (plugin, str(name or getattr(plugin, "__name__", type(plugin).__name__)))
        )

    def load(self, labels: Sequence[str] = (), *, progress: Progress | None = None) -> Loaded:
        """Run the pipeline for every planned mount, or only for ``labels``; ``progress`` is
        told before each mount.

        Raises :class:`LoadError` when the report has errors (strict mode, required drivers,
        requested labels that do not exist).
        """
        return _load(self, tuple(labels), progress)

    def verify(
        self, labels: Sequence[str] = (), *, progress: Progress | None = None, live: bool = False
    ) -> VerifyReport:
        """Decide, without importing anything, what :meth:`load` would run for the installed
        drivers and host plugins (or only ``labels``): each one's verification, and its
        dependencies judged by the same policy. ``progress`` is told before each one.
        ``live``: also start each loadable driver in a child process of its own, with its
        healthcheck, and report how that went (needs the mcp extra)."""
        return verify_installed(self.config, self.search_path, tuple(labels), progress, live)


def load_drivers(
    config: HostConfig | str | Path | None = None,
    labels: Sequence[str] = (),
    *,
    search_path: Sequence[str] | None = None,
    **options: Any,
) -> Loaded:
    """Load the drivers and return ``Loaded(driver, report)``, where ``driver`` is the stacked
    orchestrator, one ``MCSDriver``.

    ``config`` is a :class:`HostConfig` or a config file path (default: found as
    :func:`~mcs_host.config.load_config` says); ``options`` override its settings by name.
    """
    if isinstance(config, HostConfig):
        host_config = override_config(config, **options) if options else config
    else:
        host_config = load_config(config, **options)
    return Host(host_config, search_path=search_path).load(labels)


def _load(host: Host, labels: tuple[str, ...], progress: Progress | None) -> Loaded:
    """One run of the pipeline."""
    config = host.config
    started = time.perf_counter()
    timings: dict[str, float] = {}
    with _timed(timings, "registries"):
        index, registry_errors, _ = config.trust_index()
    ctx = stages.context(config, index, plugin_manager(), host.search_path)
    with _timed(timings, "plugins"):
        plugins = load_plugins(ctx, host._plugins, host.search_path)
    with _timed(timings, "discover"):
        found = installed_drivers(config, index, host.search_path)
    plans, records = plan_mounts(config, found, host._in_process)
    formats, format_problems = text_formats(ctx.manager)
    orchestrator = Orchestrator(
        namespace=config.namespace,
        on_unknown="fail",
        consent=partial(ask_consent, ctx.manager),
        audit=partial(audit_call, ctx.manager),
        call_timeout=config.call_timeout,
        prompts=config.prompts,
        text_formats=formats,
    )
    owned: list[Any] = []  # MCPToolDrivers: isolated drivers, MCP servers
    mounts: list[_Mounted | _Starting] = []
    with ThreadPoolExecutor(_STARTS, thread_name_prefix="mcs-host start") as starts:
        for done, plan in enumerate(plans):
            if progress is not None:
                progress(done, len(plans), f"loading {plan.label}")
            mounts.append(_mount(ctx, plan, found, labels, starts))
        # isolated drivers start side by side; all are mounted in the planned order
        for mount in mounts:
            record, driver, tools = mount if isinstance(mount, tuple) else _started(mount)
            if record.status == "mounted":
                record = servers.attach(orchestrator, record, driver, tools)
            if isolating.is_isolated(driver):
                if record.status == "mounted":
                    owned.append(driver)
                else:
                    driver.close()
            records.append(record)
    servers.mount_servers(ctx, orchestrator, labels, records, owned, progress)
    errors = _errors(config, labels, records) + plugin_errors(ctx, plugins)
    if config.strict:
        errors += [f"host plugin {name}: {problem}" for name, problem in format_problems]
    plugins = tuple(
        replace(r, warnings=(*r.warnings, *(p for n, p in format_problems if n == r.label)))
        for r in plugins
    )
    timings["total"] = time.perf_counter() - started
    report = LoadReport(
        tuple(records),
        plugins,
        tuple(errors),
        tuple(str(e) for e in registry_errors),
        timings,
        _origins.host_install().findings,
    )
    report_loaded(ctx.manager, report)
    if report.errors:
        for driver in owned:
            driver.close()
        raise LoadError(report)
    return Loaded(orchestrator, report, tuple(owned))


_STARTS = 16
"""Isolated drivers started at once, at most (each start waits on its child's process)."""

_Mounted = tuple[LoadRecord, object, "tuple[Tool, ...] | None"]
"""A mount's record, and its driver and tools when it mounted."""


@dataclass(slots=True)
class _Starting:
    """An isolated driver whose child is starting: what its record needs once it has."""

    record: LoadRecord
    driver: IsolatedDriver
    tools: Future[tuple[Tool, ...]]
    began: float
    timings: dict[str, float]
    notes: list[str]


def _mount(
    ctx: stages.Context,
    plan: Plan,
    found: Discovery,
    labels: tuple[str, ...],
    starts: Executor,
) -> _Mounted | _Starting:
    """Run the stages for one mount: its record, and the driver and tools when mounted; an
    isolated driver's child is started on ``starts``, and :func:`_started` waits for it."""
    candidates = found.get(plan.driver) if plan.driver is not None else ()
    candidate = candidates[0] if len(candidates) == 1 else None
    record = LoadRecord(
        plan.label,
        "failed",
        "",
        "",
        plan.driver,
        candidate.distribution if candidate else None,
        candidate.version if candidate else None,
        verification="in-process" if plan.obj is not None else None,
    )
    if not is_valid_label(plan.label):
        message = f"the label {plan.label!r} is not {LABEL_RULE}"
        return replace(record, reason="invalid-label", message=message), None, None
    skipped = skip_reason(ctx.config, labels, plan, candidate)
    if skipped is not None:
        skip = replace(record, status="skipped", reason=skipped[0], message=skipped[1])
        return skip, None, None
    timings: dict[str, float] = {}
    notes: list[str] = []
    mark = ctx.gate.mark()
    own = candidate.distribution if candidate is not None else ""
    try:
        obj, verification = _obtain(ctx, plan, candidates, found, timings, notes)
        if verification is not None:
            record = replace(record, verification=verification.status, trust=verification.trust)
        if isolating.is_isolated(obj):
            notes += stages.gate_findings(ctx, mark, own)[0]
            began = time.perf_counter()
            starting = starts.submit(isolating.start_isolated, obj)
            return _Starting(record, obj, starting, began, timings, notes)
        driver, tools, health = _activate(
            ctx, plan, obj, record.version, verification, timings, notes
        )
        if verification is not None:
            gate_notes, refused = stages.gate_findings(ctx, mark, own)
            notes += gate_notes
            if refused is not None and ctx.refuse_unverified:
                raise Refused("rejected", "import-refused", refused)
    except Refused as refusal:
        if refusal.reason != "import-refused":
            notes += stages.gate_findings(ctx, mark, own)[0]
        return _refused(record, refusal, timings, notes)
    except (Exception, SystemExit) as exc:  # the unforeseen fails this mount, never the load
        return _failed(record, exc, timings, notes)
    return _mounted(record, driver, tools, timings, notes, health)


def _started(starting: _Starting) -> _Mounted:
    """Wait for the isolated driver's child to start and list its tools: the mount."""
    record, timings, notes = starting.record, starting.timings, starting.notes
    try:
        tools = starting.tools.result()
    except Refused as refusal:
        return _refused(record, refusal, timings, notes)
    except (Exception, SystemExit) as exc:  # the unforeseen fails this mount, never the load
        starting.driver.close()
        return _failed(record, exc, timings, notes)
    finally:
        timings["start"] = time.perf_counter() - starting.began
    return _mounted(record, starting.driver, tools, timings, notes, starting.driver.health)


def _mounted(
    record: LoadRecord,
    driver: object,
    tools: tuple[Tool, ...] | None,
    timings: dict[str, float],
    notes: list[str],
    health: Any,
) -> _Mounted:
    message = f"{len(tools)} tools" if tools is not None else "chained as a standalone driver"
    mounted = replace(
        record,
        status="mounted",
        reason="mounted",
        message=message,
        tools=tuple(t.name for t in tools or ()),
        timings=timings,
        warnings=tuple(dict.fromkeys(notes)),
        health=health,
        isolation="process" if isolating.is_isolated(driver) else None,
    )
    return mounted, driver, tools


def _refused(
    record: LoadRecord, refusal: Refused, timings: dict[str, float], notes: list[str]
) -> _Mounted:
    notes = [*notes, *refusal.notes]
    if refusal.verification is not None:
        verified = refusal.verification
        record = replace(record, verification=verified.status, trust=verified.trust)
    refused = replace(
        record,
        status=refusal.status,
        reason=refusal.reason,
        message=refusal.message,
        timings=timings,
        traceback=refusal.trace,
        warnings=tuple(dict.fromkeys(notes)),
    )
    return refused, None, None


def _failed(
    record: LoadRecord, exc: BaseException, timings: dict[str, float], notes: list[str]
) -> _Mounted:
    failed = replace(
        record,
        reason="host-error",
        message=f"loading it raised {stages.summary(exc)}",
        traceback=stages.trace(exc),
        timings=timings,
        warnings=tuple(dict.fromkeys(notes)),
    )
    return failed, None, None


def _obtain(
    ctx: stages.Context,
    plan: Plan,
    candidates: tuple[Candidate, ...],
    found: Discovery,
    timings: dict[str, float],
    notes: list[str],
) -> tuple[object, Verification | None]:
    """The object to mount: the in-process one, or the installed driver's entry point object
    once it is verified, compatible, its dependencies admitted, and imported."""
    if plan.obj is not None:
        return plan.obj, None
    candidate = _only_candidate(plan, candidates)
    with _timed(timings, "verify"):
        verification = stages.verify(_for_mount(ctx, plan), candidate, found)
    notes += verification.warnings
    try:
        with _timed(timings, "compatibility"):
            stages.check_compatibility(ctx, plan.label, candidate)
        with _timed(timings, "dependencies"):
            notes += stages.admit_dependencies(ctx, candidate, verification)
        if isolating.isolated(ctx, plan, verification):
            return isolating.isolate(ctx.config, ctx.paths, plan, verification), verification
        with _timed(timings, "import"):
            return stages.import_verified(verification), verification
    except Refused as refusal:
        refusal.verification = verification
        raise


def _for_mount(ctx: stages.Context, plan: Plan) -> stages.Context:
    """``ctx`` for verifying one mount: its policy allows it unverified when the mount's own
    settings say ``allow_unverified`` (that mount alone; the load's policy stays as it is)."""
    if not plan.settings.allow_unverified:
        return ctx
    return replace(ctx, policy=replace(ctx.policy, allow_unverified=True))


def _activate(
    ctx: stages.Context,
    plan: Plan,
    obj: object,
    version: str | None,
    verification: Verification | None,
    timings: dict[str, float],
    notes: list[str],
) -> tuple[object, tuple[Tool, ...] | None, Any]:
    """The driver made from ``obj`` in this process, checked, started, healthy, and its
    tools."""
    timeout = plan.settings.timeout or ctx.config.timeout
    with _timed(timings, "instantiate"):
        driver = stages.instantiate(obj, plan.settings, timeout)
    with _timed(timings, "meta"):
        meta, meta_notes = stages.check_meta(ctx, plan, driver, version, verification)
    notes += meta_notes
    if plan.settings.autostart:
        with _timed(timings, "autostart"):
            stages.autostart(driver, plan.settings, timeout)
    health = None
    if ctx.config.healthcheck and "healthcheck" in meta.capabilities:
        with _timed(timings, "healthcheck"):
            health = stages.probe_health(driver, timeout)
    with _timed(timings, "list_tools"):
        tools = stages.list_tools(driver, meta, timeout, health)
    return driver, tools, health


def _only_candidate(plan: Plan, candidates: tuple[Candidate, ...]) -> Candidate:
    if not candidates:
        raise Refused(
            "failed", "not-installed", f"no installed driver has the label {plan.driver!r}"
        )
    if len(candidates) > 1:
        names = " and ".join(c.distribution for c in candidates)
        raise Refused("rejected", "label-conflict", f"label {plan.driver!r} is claimed by {names}")
    return candidates[0]


def _errors(config: HostConfig, labels: Sequence[str], records: Sequence[LoadRecord]) -> list[str]:
    """The load's fatal errors: labels asked for that no driver has, required drivers that
    did not mount, and (in strict mode) every rejection and failure."""
    errors: list[str] = []
    by_label = {r.label: r for r in records}
    for label in labels:
        if label not in by_label:
            errors.append(f"{label}: no driver has this label (installed or configured)")
    for label, specifier in config.require.items():
        record = by_label.get(label)
        wanted = f" {specifier}" if specifier else ""
        if record is None:
            errors.append(f"required driver {label}{wanted} is not installed")
        elif record.status != "mounted" and record.reason not in ("not-requested",):
            errors.append(
                f"required driver {label}{wanted} did not mount: {record.reason}: {record.message}"
            )
    for record in records:
        if config.strict and record.status in ("rejected", "failed"):
            errors.append(f"{record.label}: {record.reason}: {record.message}")
    return list(dict.fromkeys(errors))


@contextmanager
def _timed(timings: dict[str, float], stage: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - started
