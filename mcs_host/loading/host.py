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

import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Unpack

from mcs_host.contract import Tool
from mcs_host.discovery import (
    LABEL_RULE,
    Candidate,
    Discovery,
    is_valid_label,
    labels_argument,
)
from mcs_host.orchestration.orchestrator import Orchestrator
from mcs_host.orchestration.prompting import Prompts
from mcs_host.trust import _origins
from mcs_host.trust.verification import Verification

from . import isolating, servers, stages
from .arguments import LoadOptions, checked_options
from .config import load_config, override_config
from .config_schema import DriverSettings, HostConfig
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
    Mounted,
    Plan,
    Progress,
    Refused,
    VerifyReport,
)
from .verify import installed_drivers, verify_installed

if TYPE_CHECKING:
    from mcs_host.bridge.client import MCPToolDriver
    from mcs_host.bridge.isolation import IsolatedDriver
    from mcs_host.orchestration.calls import TextFormat

__all__ = ["Host", "load_drivers"]


class Host:
    """Loads drivers as its configuration says; add in-process drivers and plugins first."""

    __slots__ = ("_in_process", "_plugins", "config", "search_path")

    def __init__(
        self,
        config: HostConfig | None = None,
        *,
        search_path: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None = None,
    ) -> None:
        """``config`` (default: every default setting); ``search_path``: the directories
        drivers are found in (default ``sys.path``; a ``str`` or path is one directory)."""
        if config is not None and not isinstance(config, HostConfig):
            raise TypeError(
                f"Host() argument 'config' must be a HostConfig (load_config() reads a file), "
                f"not {type(config).__name__}"
            )
        self.config = config if config is not None else HostConfig()
        self.search_path = _directories(search_path, "Host() argument 'search_path'")
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

    def load(self, labels: str | Iterable[str] = (), *, progress: Progress | None = None) -> Loaded:
        """Run the pipeline for every planned mount, or only for ``labels`` (a ``str`` is one
        label); ``progress`` is told before each mount.

        Raises :class:`LoadError` when the report has errors (strict mode, required drivers,
        requested labels that do not exist).
        """
        return _load(self, labels_argument(labels, "Host.load() argument 'labels'"), progress)

    def verify(
        self,
        labels: str | Iterable[str] = (),
        *,
        progress: Progress | None = None,
        live: bool = False,
    ) -> VerifyReport:
        """Decide, without importing anything, what :meth:`load` would run for the installed
        drivers and host plugins (or only ``labels``): each one's verification, and its
        dependencies judged by the same policy. ``progress`` is told before each one.
        ``live``: also start each loadable driver in a child process of its own, with its
        healthcheck, and report how that went (needs the mcp extra)."""
        wanted = labels_argument(labels, "Host.verify() argument 'labels'")
        return verify_installed(self.config, self.search_path, wanted, progress, live)


def load_drivers(
    config: HostConfig | str | os.PathLike[str] | None = None,
    labels: str | Iterable[str] = (),
    *,
    search_path: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None = None,
    **options: Unpack[LoadOptions],
) -> Loaded:
    """Load the drivers and return ``Loaded(driver, report)``, where ``driver`` is the stacked
    orchestrator, one ``MCSDriver``: ``config`` is a :class:`HostConfig` or a config file path
    (default: found as :func:`~mcs_host.loading.config.load_config` says), ``labels`` the
    drivers to load (a ``str`` is one label; default: all the configuration plans),
    ``search_path`` the directories drivers are found in (default ``sys.path``; a ``str`` is
    one), and ``options`` the settings over the configuration's, each a key of
    :class:`LoadOptions` (``strict=True``, ``allow_extensions=False``...).

    Raises :class:`TypeError` for an argument of the wrong type or an unknown keyword (naming
    the keywords it takes), :class:`~mcs_host.loading.config_schema.ConfigError` for a setting
    refused (naming the argument, or the file and key that gave it), :class:`LoadError` when
    the report has errors.
    """
    if config is not None and not isinstance(config, (HostConfig, str, os.PathLike)):
        raise TypeError(
            "load_drivers() argument 'config' must be a HostConfig or a path, "
            f"not {type(config).__name__}"
        )
    wanted = labels_argument(labels, "load_drivers() argument 'labels'")
    directories = _directories(search_path, "load_drivers() argument 'search_path'")
    overrides = checked_options("load_drivers", options)
    if isinstance(config, HostConfig):
        host_config = override_config(config, **overrides) if overrides else config
    else:
        host_config = load_config(config, **overrides)
    return Host(host_config, search_path=directories).load(wanted)


def _directories(value: object, argument: str) -> tuple[str, ...] | None:
    """``value`` as directories: ``None`` stays, a ``str`` or path is one directory."""
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)):
        return (os.fspath(value),)
    if not isinstance(value, Iterable) or isinstance(value, (bytes, bytearray)):
        raise TypeError(
            f"{argument} must be a path or an iterable of paths, not {type(value).__name__}"
        )
    directories: list[str] = []
    for directory in value:
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"{argument} must hold paths, not {type(directory).__name__}")
        directories.append(os.fspath(directory))
    return tuple(directories)


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
    plans, planned = plan_mounts(config, found, host._in_process)
    formats, format_problems = text_formats(ctx.manager)
    # read before any driver runs: it may fail, or be other bytes than its approval's
    approved = config.approved_digests.get(config.prompts) if config.prompts else None
    prompts = Prompts.load(config.prompts, approved)
    with ThreadPoolExecutor(_STARTS, thread_name_prefix="mcs-host start") as starts:
        mounting: list[Mounted | _Starting] = []
        for done, plan in enumerate(plans):
            if progress is not None:
                progress(done, len(plans), f"loading {plan.label}")
            mounting.append(_mount(ctx, plan, found, labels, starts))
        # isolated drivers start side by side; all are mounted in the planned order
        mounts = [m if isinstance(m, Mounted) else _started(m) for m in mounting]
    taken = [*(r.label for r in planned), *(m.record.label for m in mounts)]
    mounts += servers.mount_servers(ctx, labels, taken, progress)
    orchestrator = _stack(ctx, prompts, formats, mounts)
    records = list(planned)
    owned: list[MCPToolDriver] = []
    for mount in mounts:
        record = mount.record
        if record.status == "mounted":
            record = servers.attach(orchestrator, mount)
        if mount.process is not None:
            if record.status == "mounted":
                owned.append(mount.process)
            else:
                mount.process.close()
        records.append(record)
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
    waived = {m.record.label for m in mounts if m.waiver is not None}
    gated = tuple(r.label for r in records if r.status == "mounted" and r.label in waived)
    return Loaded(orchestrator, report, tuple(owned), gated)


def _stack(
    ctx: stages.Context,
    prompts: Prompts,
    formats: Sequence[TextFormat],
    mounts: Sequence[Mounted],
) -> Orchestrator:
    """The orchestrator the mounts go on, its consent asking the plugins about each call,
    and requiring their approval for calls to the mounts that need it."""
    waivers = {m.record.label: m.waiver for m in mounts if m.waiver is not None}

    def label_of(tool: str) -> str:  # read at call time: the stack is built below
        return stack.route(tool)[0]

    needs = servers.needs_consent(label_of, waivers) if waivers else None
    stack = Orchestrator(
        namespace=ctx.config.namespace,
        on_unknown="fail",
        consent=partial(ask_consent, ctx.manager, needs=needs),
        audit=partial(audit_call, ctx.manager),
        call_timeout=ctx.config.call_timeout,
        prompts=prompts,
        text_formats=formats,
    )
    return stack


_STARTS = 16
"""Isolated drivers started at once, at most (each start waits on its child's process)."""


@dataclass(frozen=True, slots=True)
class _Starting:
    """An isolated driver whose child is starting: what its record needs once it has."""

    record: LoadRecord
    driver: IsolatedDriver
    tools: Future[tuple[Tool, ...]]
    began: float
    timings: Mapping[str, float]
    notes: tuple[str, ...]


def _mount(
    ctx: stages.Context,
    plan: Plan,
    found: Discovery,
    labels: tuple[str, ...],
    starts: Executor,
) -> Mounted | _Starting:
    """One mount: left out (an invalid label, skipped), or through its stages."""
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
        return Mounted(replace(record, reason="invalid-label", message=message))
    skipped = skip_reason(ctx.config, labels, plan, candidate)
    if skipped is not None:
        return Mounted(replace(record, status="skipped", reason=skipped[0], message=skipped[1]))
    return _staged(ctx, plan, record, candidates, found, starts)


def _staged(
    ctx: stages.Context,
    plan: Plan,
    record: LoadRecord,
    candidates: tuple[Candidate, ...],
    found: Discovery,
    starts: Executor,
) -> Mounted | _Starting:
    """Run the stages of one mount in order, timing each: verified, compatible, its
    dependencies admitted, imported (or its isolated child started on ``starts``, which
    :func:`_started` waits for), made, checked, started, healthy and listed. Its record, and
    the driver and tools when it mounts; a refusal or error ends it there, never the load."""
    timings: dict[str, float] = {}
    notes: list[str] = []
    mark = ctx.gate.mark()
    own = candidates[0].distribution if len(candidates) == 1 else ""
    mount = _for_mount(ctx, plan)
    try:
        obj: object = plan.obj
        verification: Verification | None = None
        if obj is None:
            candidate = _only_candidate(plan, candidates)
            with _timed(timings, "verify"):
                verification = stages.verify(mount, candidate, found)
            record = replace(
                record,
                verification=verification.status,
                trust=verification.trust,
                digest=verification.digest,
            )
            notes += verification.warnings
            with _timed(timings, "compatibility"):
                stages.check_compatibility(ctx, plan.label, candidate)
            with _timed(timings, "dependencies"):
                notes += stages.admit_dependencies(mount, candidate, verification)
            if isolating.runs_isolated(ctx, plan, verification):
                driver = isolating.isolated_driver(ctx.config, ctx.paths, plan, verification)
                notes += stages.gate_findings(ctx, mark, own)[0]
                starting = starts.submit(isolating.start_isolated, driver)
                return _Starting(
                    record, driver, starting, time.perf_counter(), timings, tuple(notes)
                )
            with _timed(timings, "import"):
                obj = stages.import_verified(verification)
        timeout = plan.settings.timeout or ctx.config.timeout
        with _timed(timings, "instantiate"):
            made = stages.instantiate(obj, plan.settings, timeout)
        with _timed(timings, "meta"):
            meta, meta_notes = stages.check_meta(ctx, plan, made, record.version, verification)
        notes += meta_notes
        if plan.settings.autostart:
            with _timed(timings, "autostart"):
                stages.autostart(made, plan.settings, timeout)
        health = None
        if ctx.config.healthcheck and "healthcheck" in meta.capabilities:
            with _timed(timings, "healthcheck"):
                health = stages.probe_health(made, timeout)
        with _timed(timings, "list_tools"):
            tools = stages.list_tools(made, meta, timeout, health)
        if verification is not None:
            gate_notes, refused = stages.gate_findings(ctx, mark, own)
            notes += gate_notes
            if refused is not None and ctx.config.strict:  # else a note: nothing unverified ran
                raise Refused("rejected", "import-refused", refused)
    except Refused as refusal:
        if refusal.reason != "import-refused":
            notes += stages.gate_findings(ctx, mark, own)[0]
        return _refused(record, refusal, timings, notes)
    except (Exception, SystemExit) as exc:  # the unforeseen fails this mount, never the load
        return _failed(record, exc, timings, notes)
    return _mounted(record, made, tools, timings, notes, health)


def _started(starting: _Starting) -> Mounted:
    """Wait for the isolated driver's child to start and list its tools: the mount."""
    record, notes, driver = starting.record, starting.notes, starting.driver
    try:
        tools = starting.tools.result()
    except Refused as refusal:
        return _refused(record, refusal, _timings_with_start(starting), notes)
    except (Exception, SystemExit) as exc:  # the unforeseen fails this mount, never the load
        driver.close()
        return _failed(record, exc, _timings_with_start(starting), notes)
    mounted = _mounted(record, driver, tools, _timings_with_start(starting), notes, driver.health)
    return replace(mounted, process=driver)


def _timings_with_start(starting: _Starting) -> dict[str, float]:
    """The isolated driver's timings, with its child's whole start as ``start``."""
    return {**starting.timings, "start": time.perf_counter() - starting.began}


def _mounted(
    record: LoadRecord,
    driver: object,
    tools: tuple[Tool, ...] | None,
    timings: Mapping[str, float],
    notes: Sequence[str],
    health: Any,
) -> Mounted:
    message = f"{len(tools)} tools" if tools is not None else "chained as a standalone driver"
    mounted = replace(
        record,
        status="mounted",
        reason="mounted",
        message=message,
        tools=tuple(t.name for t in tools or ()),
        timings=dict(timings),
        warnings=tuple(dict.fromkeys(notes)),
        health=health,
        isolation="process" if isolating.is_isolated(driver) else None,
    )
    return Mounted(mounted, driver, tools)


def _refused(
    record: LoadRecord, refusal: Refused, timings: Mapping[str, float], notes: Sequence[str]
) -> Mounted:
    if refusal.verification is not None:
        verified = refusal.verification
        record = replace(record, verification=verified.status, trust=verified.trust)
    refused = replace(
        record,
        status=refusal.status,
        reason=refusal.reason,
        message=refusal.message,
        timings=dict(timings),
        traceback=refusal.trace,
        warnings=tuple(dict.fromkeys([*notes, *refusal.notes])),
    )
    return Mounted(refused)


def _failed(
    record: LoadRecord, exc: BaseException, timings: Mapping[str, float], notes: Sequence[str]
) -> Mounted:
    failed = replace(
        record,
        reason="host-error",
        message=f"loading it raised {stages.summary(exc)}",
        traceback=stages.trace(exc),
        timings=dict(timings),
        warnings=tuple(dict.fromkeys(notes)),
    )
    return Mounted(failed)


def _for_mount(ctx: stages.Context, plan: Plan) -> stages.Context:
    """``ctx`` for one mount: its policy allows it unverified, and its own unverified
    dependencies unless in strict mode, when the mount's own settings say
    ``allow_unverified`` (that mount alone; the load's policy stays as it is)."""
    if not plan.settings.allow_unverified:
        return ctx
    policy = replace(ctx.policy, allow_unverified=True)
    refuse = ctx.config.trust.refuses_unverified(ctx.config.strict, waived=True)
    return replace(ctx, policy=policy, refuse_unverified=refuse)


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
