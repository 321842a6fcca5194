"""The host: discover, verify, check, import and mount drivers, recording every step.

Each planned mount gets a :class:`LoadRecord` (mounted, skipped, rejected or failed, with a
reason code, a message and per-stage timings). A driver that fails to import, raises or hangs
in its constructor or ``list_tools``, or returns invalid tools is recorded and left out; every
other driver still mounts. Strict mode turns any rejection or failure into an error, as does a
required driver that does not mount. Drivers not asked for are never verified nor imported.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from . import __version__, _bounded, _origins
from ._bounded import Hung, call_bounded
from ._gate import gate
from .calls import ToolCall
from .compat import (
    Incompatibility,
    capability_problems,
    host_requirement_problem,
    meta_of,
    version_problem,
)
from .config import DriverSettings, HostConfig, load_config, override_config
from .contract import Tool, implemented_capabilities
from .dependencies import DependencyCheck, check_dependencies, judge_dependencies
from .discovery import (
    ENTRY_POINT_GROUP,
    LABEL_RULE,
    PLUGIN_GROUP,
    Candidate,
    Discovery,
    declare,
    discover,
    is_valid_label,
    normalize_name,
)
from .hooks import PluginError, plugin_manager, register_plugin
from .importer import (
    IntegrityError,
    check_runtime_meta,
    import_driver,
    refuse_imported_elsewhere,
)
from .integrity import TreeScan
from .orchestrator import Orchestrator, is_standalone_driver, is_tool_driver
from .reference import ReferenceToolDriver, is_reference_driver
from .registry import TrustIndex
from .verification import TrustPolicy, Verification, verify_candidate

__all__ = [
    "Host",
    "LoadError",
    "LoadRecord",
    "LoadReport",
    "Loaded",
    "VerifyRecord",
    "VerifyReport",
    "load_drivers",
    "settle_conflicts",
]

Status = Literal["mounted", "skipped", "rejected", "failed"]


@dataclass(frozen=True, slots=True)
class LoadRecord:
    """What happened to one mount (or host plugin)."""

    label: str
    """The label it is mounted under."""
    status: Status
    reason: str
    """A code: ``mounted``, ``not-requested``, ``denied``, ``file-modified``,
    ``incompatible-host``, ``constructor-error``, ``timeout``, ``invalid-tools``..."""
    message: str
    driver: str | None = None
    """The installed driver's label it comes from; ``None`` for an in-process driver."""
    distribution: str | None = None
    version: str | None = None
    trust: str | None = None
    """``pinned``, ``signed``, ``unverified`` or ``in-process``, once verified."""
    kind: Literal["driver", "plugin"] = "driver"
    tools: tuple[str, ...] = ()
    """The tools as this driver names them (the orchestrator may prefix them)."""
    timings: Mapping[str, float] = field(default_factory=dict)
    """Seconds per stage: verify, check, import, instantiate, healthcheck, list_tools."""
    traceback: str | None = None
    warnings: tuple[str, ...] = ()
    health: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class LoadReport:
    """The outcome of one load: a record per mount and per host plugin, and the errors."""

    records: tuple[LoadRecord, ...]
    plugins: tuple[LoadRecord, ...] = ()
    errors: tuple[str, ...] = ()
    """Fatal problems: strict failures, required drivers, requested labels not found."""
    registry_errors: tuple[str, ...] = ()
    timings: Mapping[str, float] = field(default_factory=dict)
    """Seconds for the shared stages: plugins, registries, discover, and the total."""
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

    def __iter__(self) -> Iterator[Any]:
        return iter((self.driver, self.report))


@dataclass(frozen=True, slots=True)
class _Plan:
    label: str
    driver: str | None
    settings: DriverSettings
    obj: object | None = None


class _Refused(Exception):  # noqa: N818 - a control-flow signal, not an error to report
    def __init__(self, status: Status, reason: str, message: str, trace: str | None = None):
        self.status = status
        self.reason = reason
        self.message = message
        self.trace = trace


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

    def load(self, labels: Sequence[str] = ()) -> Loaded:
        """Run the pipeline for every planned mount, or only for ``labels``.

        Raises :class:`LoadError` when the report has errors (strict mode, required drivers,
        requested labels that do not exist).
        """
        return _Load(self, tuple(labels)).run()

    def verify(self, labels: Sequence[str] = ()) -> VerifyReport:
        """Decide, without importing anything, what :meth:`load` would run for the installed
        drivers and host plugins (or only ``labels``): each one's verification, and its
        dependencies judged by the same policy."""
        return _verify(self, tuple(labels))


@dataclass(frozen=True, slots=True)
class VerifyRecord:
    """What ``load`` would do with one installed driver or host plugin, decided before
    import."""

    verification: Verification
    kind: Literal["driver", "plugin"] = "driver"
    dependencies: tuple[DependencyCheck, ...] = ()
    refusal: tuple[str, str] | None = None
    """``(reason, message)`` when it passed verification but load would still refuse it (a
    dependency missing, refused or not allowed)."""
    unverified: tuple[str, ...] = ()
    """The unverified code load would run for it: the driver itself when the policy allows
    it unverified, and its unverified dependencies."""

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
    """The outcome of :meth:`Host.verify`."""

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

    @property
    def ok(self) -> bool:
        """Whether every driver asked for exists, may be loaded, and would run only verified
        code."""
        return not self.missing and all(r.verified for r in self.records)


def _verify(host: Host, labels: tuple[str, ...]) -> VerifyReport:
    config = host.config
    index, errors, paths = config.trust_index()
    policy = TrustPolicy(
        allow_unverified=config.trust.allow_unverified,
        allow_extensions=config.trust.allow_extensions,
    )
    refuse = config.strict or config.trust.dependencies == "refuse"
    search = list(host.search_path or sys.path)
    found = declare(
        discover(host.search_path),
        (
            (e.label, e.distribution, e.object)
            for e in index.entries.values()
            if e.group == ENTRY_POINT_GROUP
        ),
    )
    found = settle_conflicts(found, config)
    groups: list[tuple[Literal["driver", "plugin"], Discovery]] = [("driver", found)]
    if config.plugins:
        plugins = discover(host.search_path, group=PLUGIN_GROUP, require_object=False)
        groups.append(("plugin", plugins))
    scans: dict[str, TreeScan] = {}
    records: list[VerifyRecord] = []
    for kind, discovery in groups:
        for candidate in discovery.candidates:
            if labels and candidate.label not in labels:
                continue
            if not _admitted(config, candidate.label, candidate.project):
                continue  # load skips it: denied, or not allowed
            verification = verify_candidate(candidate, discovery, index, policy, scans)
            records.append(_verify_record(kind, verification, index, policy, refuse, search, scans))
    known = {r.label for r in records}
    return VerifyReport(
        tuple(records),
        tuple(label for label in labels if label not in known),
        tuple(paths),
        tuple((e.reason, str(e)) for e in errors),
        _origins.host_install().findings,
        _origins.startup_findings(search),
    )


def _ruled_out(config: HostConfig, names: set[str]) -> tuple[str, str] | None:
    """``(reason, message)`` when the configuration's ``deny`` or ``allow`` keeps a driver
    known by ``names`` (labels, distribution) from loading; deny wins over allow."""
    deny = {normalize_name(d) for d in config.deny} | set(config.deny)
    if names & deny:
        return "denied", f"denied by the configuration ({', '.join(sorted(names & deny))})"
    allow = {normalize_name(a) for a in config.allow} | set(config.allow)
    if allow and not names & allow:
        return "not-allowed", "not in the configuration's allow list"
    return None


def _admitted(config: HostConfig, label: str, project: str) -> bool:
    return _ruled_out(config, {label, project}) is None


def settle_conflicts(found: Discovery, config: HostConfig) -> Discovery:
    """``found`` without the candidates for a contested label that ``deny`` or ``allow``
    rule out: a conflict the configuration settles is no longer one."""
    contested = {c.label for c in found.candidates if len(found.get(c.label)) > 1}
    return found.without(
        c
        for c in found.candidates
        if c.label in contested and not _admitted(config, c.label, c.project)
    )


def _verify_record(
    kind: Literal["driver", "plugin"],
    verification: Verification,
    index: TrustIndex,
    policy: TrustPolicy,
    refuse: bool,
    search: list[str],
    scans: dict[str, TreeScan],
) -> VerifyRecord:
    if not verification.allowed:
        return VerifyRecord(verification, kind)
    candidate = verification.candidate
    entry = index.entries.get(verification.driver_id or "")
    checks = check_dependencies(
        candidate.distribution,
        candidate.metadata_path,
        index,
        search,
        entry.requires if entry else (),
        scans=scans,
    )
    judged = judge_dependencies(checks, policy, refuse_unverified=refuse)
    refusal = judged.refusal[1:] if judged.refusal is not None else None
    unverified = [
        f"dependency {c.distribution} {c.version} ({c.reason}: {c.message})"
        for c in judged.unverified
    ]
    if verification.status not in ("pinned", "signed"):
        unverified.insert(0, f"the {kind} itself ({verification.reason}: {verification.message})")
    return VerifyRecord(verification, kind, checks, refusal, tuple(unverified))


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


class _Load:
    """One run of the pipeline."""

    def __init__(self, host: Host, labels: tuple[str, ...]) -> None:
        self.host = host
        self.config = host.config
        self.labels = labels
        self.manager = plugin_manager()
        self.policy = TrustPolicy(
            allow_unverified=self.config.trust.allow_unverified,
            allow_extensions=self.config.trust.allow_extensions,
        )
        self.refuse_unverified_code = (
            self.config.strict or self.config.trust.dependencies == "refuse"
        )
        self.scans: dict[str, TreeScan] = {}
        self.index = TrustIndex()
        self.gate = gate()

    def run(self) -> Loaded:
        started = time.perf_counter()
        timings: dict[str, float] = {}
        with _timed(timings, "registries"):
            registry_errors = self._load_registries()
        with _timed(timings, "plugins"):
            plugins = self._load_plugins()
        with _timed(timings, "discover"):
            found = declare(
                discover(self.host.search_path),
                (
                    (e.label, e.distribution, e.object)
                    for e in self.index.entries.values()
                    if e.group == ENTRY_POINT_GROUP
                ),
            )
            found = settle_conflicts(found, self.config)
        plans, records = self._plan(found)
        orchestrator = Orchestrator(
            namespace=self.config.namespace,
            on_unknown="fail",
            consent=self._consent,
            audit=self._audit,
            call_timeout=self.config.call_timeout,
            prompts=self.config.prompts,
        )
        for plan in plans:
            record, driver, tools = self._mount(plan, found)
            if record.status == "mounted":
                try:  # tools listed twice, a schema that cannot be checked
                    orchestrator.mount(plan.label, driver, tools)
                except (ValueError, TypeError) as exc:
                    record = replace(
                        record, status="failed", reason="invalid-tools", message=str(exc)
                    )
            records.append(record)
        errors = self._errors(records, found)
        timings["total"] = time.perf_counter() - started
        errors += self._plugin_errors(plugins)
        report = LoadReport(
            tuple(records),
            tuple(plugins),
            tuple(errors),
            tuple(registry_errors),
            timings,
            _origins.host_install().findings,
        )
        try:
            self.manager.hook.mcs_host_loaded(report=report)
        except Exception as exc:  # a plugin's report hook never undoes the load
            warnings.warn(f"mcs_host_loaded hook raised {exc!r}", RuntimeWarning, stacklevel=2)
        if report.errors:
            raise LoadError(report)
        return Loaded(orchestrator, report)

    # -- shared stages ---------------------------------------------------------------------

    def _load_registries(self) -> list[str]:
        self.index, errors, _ = self.config.trust_index()
        return [str(e) for e in errors]

    def _load_plugins(self) -> list[LoadRecord]:
        records = []
        for plugin, name in self.host._plugins:
            try:
                register_plugin(self.manager, plugin, name)
            except PluginError as exc:
                records.append(
                    LoadRecord(name, "failed", "invalid-plugin", str(exc), kind="plugin")
                )
            else:
                records.append(
                    LoadRecord(
                        name,
                        "mounted",
                        "mounted",
                        "added in-process",
                        trust="in-process",
                        kind="plugin",
                    )
                )
        if not self.config.plugins:
            return records
        found = discover(self.host.search_path, group=PLUGIN_GROUP, require_object=False)
        for candidate in found.candidates:
            try:
                records.append(self._plugin(candidate, found))
            except Exception as exc:  # anything unforeseen fails this plugin, never the load
                records.append(
                    LoadRecord(
                        candidate.label,
                        "failed",
                        "host-error",
                        f"loading it raised {_summary(exc)}",
                        candidate.label,
                        candidate.distribution,
                        candidate.version,
                        kind="plugin",
                        traceback=_trace(exc),
                    )
                )
        return records

    def _plugin(self, candidate: Candidate, found: Discovery) -> LoadRecord:
        base = LoadRecord(
            candidate.label,
            "failed",
            "",
            "",
            candidate.label,
            candidate.distribution,
            candidate.version,
            kind="plugin",
        )
        verification = verify_candidate(candidate, found, self.index, self.policy, self.scans)
        base = replace(base, trust=verification.status)
        if not verification.allowed:
            return replace(
                base, status="rejected", reason=verification.reason, message=verification.message
            )
        notes = list(verification.warnings)
        mark = self.gate.mark()
        try:
            self._dependencies(candidate, verification, notes)
            plugin = import_driver(verification)
            if isinstance(plugin, type):
                plugin = plugin()
            self._gate_notes(mark, notes, candidate.distribution)
            register_plugin(self.manager, plugin, candidate.label)
        except _Refused as refused:
            return replace(
                base,
                status=refused.status,
                reason=refused.reason,
                message=refused.message,
                warnings=tuple(notes),
            )
        except PluginError as exc:
            return replace(base, reason="invalid-plugin", message=str(exc))
        except IntegrityError as exc:
            return replace(base, status="rejected", reason="integrity", message=str(exc))
        except (Exception, SystemExit) as exc:
            self._gate_notes(mark, notes, candidate.distribution, judge=False)
            return replace(
                base,
                reason="import-error",
                message=_summary(exc),
                traceback=_trace(exc),
                warnings=tuple(notes),
            )
        return replace(
            base,
            status="mounted",
            reason="mounted",
            message=verification.message,
            warnings=tuple(notes),
        )

    def _consent(self, call: ToolCall) -> bool | str | ToolCall:
        """Ask the plugins: any ``False`` or reason denies; an edited call replaces it."""
        try:
            answers = self.manager.hook.mcs_host_consent(call=call)
        except Exception as exc:  # a consent check that breaks denies: fail closed
            warnings.warn(
                f"consent hook raised {exc!r}; the call is denied", RuntimeWarning, stacklevel=2
            )
            return False
        for answer in answers:
            if answer is False or isinstance(answer, str):
                return answer
        edited = [answer for answer in answers if isinstance(answer, ToolCall)]
        return edited[-1] if edited else True

    def _audit(self, call: ToolCall, result: Any, error: BaseException | None) -> None:
        try:
            self.manager.hook.mcs_host_after_tool_call(call=call, result=result, error=error)
        except Exception as exc:
            warnings.warn(f"audit hook raised {exc!r}", RuntimeWarning, stacklevel=2)

    # -- planning --------------------------------------------------------------------------

    def _plan(self, found: Discovery) -> tuple[list[_Plan], list[LoadRecord]]:
        """Every mount, sorted by label: configured ones, installed drivers (autoload) and
        in-process ones; and a record for each in-process label that is already taken."""
        plans: dict[str, _Plan] = {}
        taken: list[LoadRecord] = []
        used = {s.driver for s in self.config.drivers.values() if s.driver}
        for label, settings in self.config.drivers.items():
            plans[label] = _Plan(label, settings.driver or label, settings)
        if self.config.autoload:
            for candidate in found.candidates:
                if candidate.label not in plans and candidate.label not in used:
                    plans[candidate.label] = _Plan(
                        candidate.label, candidate.label, DriverSettings()
                    )
        for label, (obj, settings) in self.host._in_process.items():
            if label in plans:
                message = (
                    f"the label {label!r} is already used by an installed or configured driver"
                )
                taken.append(
                    LoadRecord(label, "failed", "label-taken", message, trust="in-process")
                )
            else:
                plans[label] = _Plan(label, None, settings, obj)
        return [plans[label] for label in sorted(plans)], taken

    def _selected(self, plan: _Plan, candidate: Candidate | None) -> tuple[str, str] | None:
        """Why ``plan`` is skipped, or ``None``. Deny beats allow."""
        if self.labels and plan.label not in self.labels:
            return "not-requested", "not among the labels asked for"
        if not plan.settings.enabled:
            return "disabled", "enabled = false in its configuration"
        names = {plan.label, plan.driver or plan.label}
        if candidate is not None:
            names.add(candidate.project)
        return _ruled_out(self.config, names)

    # -- one mount ---------------------------------------------------------------------------

    def _mount(
        self, plan: _Plan, found: Discovery
    ) -> tuple[LoadRecord, object, tuple[Tool, ...] | None]:
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
            trust="in-process" if plan.obj is not None else None,
        )
        if not is_valid_label(plan.label):
            message = f"the label {plan.label!r} is not {LABEL_RULE}"
            return replace(record, reason="invalid-label", message=message), None, None
        skipped = self._selected(plan, candidate)
        if skipped is not None:
            return (
                replace(record, status="skipped", reason=skipped[0], message=skipped[1]),
                None,
                None,
            )
        timings: dict[str, float] = {}
        notes: list[str] = []
        mark = self.gate.mark()
        try:
            if plan.obj is not None:
                obj: object = plan.obj
                verification = None
            else:
                obj, verification = self._import(plan, candidates, found, timings, notes)
                record = replace(record, trust=verification.status)
            driver, tools, health = self._activate(
                plan, obj, record.version, verification, timings, notes
            )
            if verification is not None:
                self._gate_notes(mark, notes, verification.candidate.distribution)
        except _Refused as refused:
            if refused.reason != "import-refused":
                own = candidate.distribution if candidate is not None else ""
                self._gate_notes(mark, notes, own, judge=False)
            return (
                replace(
                    record,
                    status=refused.status,
                    reason=refused.reason,
                    message=refused.message,
                    timings=timings,
                    traceback=refused.trace,
                    warnings=tuple(notes),
                ),
                None,
                None,
            )
        except (Exception, SystemExit) as exc:  # the unforeseen fails this mount, never the load
            message = f"loading it raised {_summary(exc)}"
            failed = replace(record, reason="host-error", message=message, traceback=_trace(exc))
            return replace(failed, timings=timings, warnings=tuple(notes)), None, None
        message = f"{len(tools)} tools" if tools is not None else "chained as a standalone driver"
        mounted = replace(
            record,
            status="mounted",
            reason="mounted",
            message=message,
            tools=tuple(t.name for t in tools or ()),
            timings=timings,
            warnings=tuple(notes),
            health=health,
        )
        return mounted, driver, tools

    def _import(
        self,
        plan: _Plan,
        candidates: tuple[Candidate, ...],
        found: Discovery,
        timings: dict[str, float],
        notes: list[str],
    ) -> tuple[object, Verification]:
        """Verify, check and import the driver: the object and its verification."""
        if not candidates:
            raise _Refused(
                "failed", "not-installed", f"no installed driver has the label {plan.driver!r}"
            )
        if len(candidates) > 1:
            names = " and ".join(c.distribution for c in candidates)
            raise _Refused(
                "rejected", "label-conflict", f"label {plan.driver!r} is claimed by {names}"
            )
        candidate = candidates[0]
        with _timed(timings, "verify"):
            verification = verify_candidate(candidate, found, self.index, self.policy, self.scans)
            if verification.allowed:
                for reason in self.manager.hook.mcs_host_verify(verification=verification):
                    if reason:
                        raise _Refused("rejected", "plugin-refused", str(reason))
        notes.extend(verification.warnings)
        if not verification.allowed:
            raise _Refused("rejected", verification.reason, verification.message)
        with _timed(timings, "check"):
            problem = host_requirement_problem(candidate.metadata_path, __version__)
            required = self.config.require.get(plan.label)
            if problem is None and required:
                problem = version_problem(plan.label, candidate.version, required)
            if problem is not None:
                raise _Refused("rejected", problem.code, problem.message)
        with _timed(timings, "dependencies"):
            self._dependencies(candidate, verification, notes)
        with _timed(timings, "import"):
            try:
                obj = import_driver(verification)
            except IntegrityError as exc:
                raise _Refused("rejected", "integrity", str(exc)) from None
            except (Exception, SystemExit) as exc:  # a module that exits ends only its mount
                raise _Refused("failed", "import-error", _summary(exc), _trace(exc)) from None
        declared = getattr(obj, "meta", None)
        if declared is not None and not isinstance(declared, property):
            meta, problems = meta_of(obj, None)  # a class attribute: checked before construction
            if meta is None:
                raise _Refused("rejected", problems[0].code, problems[0].message)
        mismatch = check_runtime_meta(obj, verification)
        if mismatch is not None:
            raise _Refused("rejected", "meta-mismatch", mismatch)
        return obj, verification

    def _activate(
        self,
        plan: _Plan,
        obj: object,
        version: str | None,
        verification: Verification | None,
        timings: dict[str, float],
        notes: list[str],
    ) -> tuple[object, tuple[Tool, ...] | None, Mapping[str, Any] | None]:
        settings = plan.settings
        timeout = settings.timeout or self.config.timeout
        with _timed(timings, "instantiate"):
            driver = self._instantiate(obj, settings, timeout)
        if is_reference_driver(driver) and is_tool_driver(driver):
            driver = ReferenceToolDriver(driver)
        with _timed(timings, "check"):
            meta, problems = meta_of(driver, version)
            if meta is None:
                raise _Refused("rejected", problems[0].code, problems[0].message)
            if verification is not None:
                mismatch = check_runtime_meta(driver, verification)
                if mismatch is not None:
                    raise _Refused("rejected", "meta-mismatch", mismatch)
            required = (*self.config.require_capabilities, *settings.capabilities)
            problems += capability_problems(driver, meta, required)
            required_version = self.config.require.get(plan.label)
            if plan.obj is not None and required_version:
                problem = version_problem(plan.label, meta.version, required_version)
                problems += [problem] if problem else []
            self._judge(problems, notes)
        if settings.autostart:
            if "autostart" not in implemented_capabilities(driver):
                raise _Refused(
                    "failed",
                    "autostart-unsupported",
                    "autostart is configured but the driver has no autostart()",
                )
            autostart = driver.autostart  # type: ignore[attr-defined]
            with _timed(timings, "autostart"):
                self._call(
                    partial(autostart, dict(settings.autostart_settings)), timeout, "autostart"
                )
        health = None
        if self.config.healthcheck and "healthcheck" in meta.capabilities:
            with _timed(timings, "healthcheck"):
                health = self._call(driver.healthcheck, timeout, "healthcheck")  # type: ignore[attr-defined]
            status = health.get("status") if isinstance(health, Mapping) else None
            if str(getattr(status, "value", status)).upper() != "OK":
                raise _Refused("failed", "unhealthy", f"healthcheck returned {health!r}")
        tools = None
        if is_tool_driver(driver):
            with _timed(timings, "list_tools"):
                # listed in the worker too: a generator runs its code while it is read
                listed = self._call(
                    lambda: _listed(driver.list_tools()),  # type: ignore[attr-defined]
                    timeout,
                    "list_tools",
                )
                tools = _valid_tools(listed)
            if not tools:
                raise _Refused("failed", "no-tools", self._no_tools(driver, meta, timeout, health))
        elif not is_standalone_driver(driver):
            raise _Refused(
                "failed",
                "not-a-driver",
                f"{type(driver).__qualname__} has neither list_tools/execute_tool nor "
                "process_llm_response",
            )
        return driver, tools, health

    def _no_tools(self, driver: object, meta: Any, timeout: float, health: Any) -> str:
        """Why a ToolDriver listed no tools, as far as its healthcheck (``health``, when it
        ran already) can tell."""
        message = f"{type(getattr(driver, 'inner', driver)).__qualname__} lists no tools"
        if "healthcheck" in meta.capabilities:
            if health is not None:
                return message + f"; its healthcheck says {health!r}"
            try:
                health = self._call(driver.healthcheck, timeout, "healthcheck")  # type: ignore[attr-defined]
            except _Refused as refused:
                health = refused.message
            message += f"; its healthcheck says {health!r}"
        return message

    def _dependencies(
        self, candidate: Candidate, verification: Verification, notes: list[str]
    ) -> None:
        """Verify what the driver needs: register pinned dependencies for verified import and
        tell the import gate which unverified ones the policy lets it import."""
        entry = self.index.entries.get(verification.driver_id or "")
        checks = check_dependencies(
            candidate.distribution,
            candidate.metadata_path,
            self.index,
            list(self.host.search_path or sys.path),
            entry.requires if entry else (),
            scans=self.scans,
        )
        judged = judge_dependencies(
            checks, self.policy, refuse_unverified=self.refuse_unverified_code
        )
        if judged.refusal is not None:
            status, reason, message = judged.refusal
            raise _Refused(status, reason, message)  # type: ignore[arg-type]
        notes.extend(judged.notes)
        try:
            for check in checks:
                if check.status == "pinned" and check.location is not None:
                    owner = f"{check.distribution} {check.version}"
                    self.gate.register(check.location, check.modules, check.extensions, owner)
                    refuse_imported_elsewhere(self.gate, check.modules, check.extensions)
        except IntegrityError as exc:
            raise _Refused("rejected", "integrity", str(exc)) from None
        for check in judged.unverified:
            _allow_dependency(check, candidate)

    def _gate_notes(
        self, mark: int, notes: list[str], own: str = "", *, judge: bool = True
    ) -> None:
        """Note what the import gate refused and allowed since ``mark`` (except the modules
        of ``own``, the driver itself); a refusal rejects the driver where unverified code is
        refused (``judge``), else it is a warning."""
        for allowed in self.gate.allowed(mark):
            if allowed.distribution == own:
                continue
            note = (
                f"unverified-import: imported {allowed.module} from {allowed.distribution} "
                f"({allowed.why}), which is not verified"
            )
            if note not in notes:
                notes.append(note)
        refused = self.gate.refusals(mark)
        for refusal in refused:
            note = f"import-refused: {refusal.message}"
            if note not in notes:
                notes.append(note)
        if judge and refused and self.refuse_unverified_code:
            raise _Refused("rejected", "import-refused", refused[0].message)

    def _instantiate(self, obj: object, settings: DriverSettings, timeout: float) -> object:
        if isinstance(obj, type) or (callable(obj) and not _looks_like_driver(obj)):
            return self._call(partial(obj, **settings.settings), timeout, "constructor")
        if settings.settings:
            raise _Refused(
                "failed",
                "invalid-settings",
                f"settings {sorted(settings.settings)} given, but the entry point is an "
                "instance, not a class or factory",
            )
        return obj

    def _judge(self, problems: Sequence[Incompatibility], notes: list[str]) -> None:
        for problem in problems:
            if problem.strict_only and not self.config.strict:
                notes.append(f"{problem.code}: {problem.message}")
            else:
                raise _Refused("rejected", problem.code, problem.message)

    def _call(self, func: Callable[[], Any], timeout: float, stage: str) -> Any:
        """``func()`` bounded by ``timeout`` (a hung call's thread is left behind); what it
        raises becomes a refusal naming the stage."""
        try:
            return call_bounded(func, timeout, stage)
        except Hung as hung:
            raise _Refused("failed", "timeout", str(hung)) from None
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # SystemExit included: a driver never ends the host
            hint = (
                "; settings come from [drivers.<label>.settings] in the host config, "
                "or --set <label>.<key>=<value>"
                if stage == "constructor" and isinstance(error, TypeError)
                else ""
            )
            code = (
                "constructor-error"
                if stage == "constructor"
                else f"{stage.replace('_', '-')}-error"
            )
            raise _Refused(
                "failed", code, f"{stage} raised {_summary(error)}{hint}", _trace(error)
            ) from None

    # -- errors --------------------------------------------------------------------------------

    def _plugin_errors(self, plugins: Sequence[LoadRecord]) -> list[str]:
        """In strict mode a host plugin that is refused or fails is an error, as a driver is."""
        if not self.config.strict:
            return []
        return [
            f"host plugin {r.label}: {r.reason}: {r.message}"
            for r in plugins
            if r.status in ("rejected", "failed")
        ]

    def _errors(self, records: Sequence[LoadRecord], found: Discovery) -> list[str]:
        errors: list[str] = []
        by_label = {r.label: r for r in records}
        for label in self.labels:
            if label not in by_label:
                errors.append(f"{label}: no driver has this label (installed or configured)")
        for label, specifier in self.config.require.items():
            record = by_label.get(label)
            wanted = f" {specifier}" if specifier else ""
            if record is None:
                errors.append(f"required driver {label}{wanted} is not installed")
            elif record.status != "mounted" and record.reason not in ("not-requested",):
                errors.append(
                    f"required driver {label}{wanted} did not mount: {record.reason}: "
                    f"{record.message}"
                )
        for record in records:
            if self.config.strict and record.status in ("rejected", "failed"):
                errors.append(f"{record.label}: {record.reason}: {record.message}")
        return list(dict.fromkeys(errors))


def _allow_dependency(check: DependencyCheck, candidate: Candidate) -> None:
    """Tell the import gate the policy allows the unverified dependency ``check``."""
    if check.location is None or check.metadata_path is None:
        return
    files = [os.path.join(check.location, *path.split("/")) for path in check.files]
    tree = _origins.editable_tree(check.metadata_path)
    why = f"an unverified dependency of {candidate.distribution} the policy allows"
    gate().allow(files, check.distribution, why, [tree] if tree else [])


def _listed(value: Any) -> Any:
    """What ``list_tools`` returned, read into a list when it is a sequence or iterator."""
    if isinstance(value, Iterable) and not isinstance(value, str | bytes | Mapping):
        return list(value)
    return value


def _valid_tools(listed: Any) -> tuple[Tool, ...]:
    if not isinstance(listed, list):
        raise _Refused(
            "failed", "invalid-tools", f"list_tools returned {type(listed).__name__}, not a list"
        )
    tools = []
    for index, item in enumerate(listed):
        try:
            tools.append(Tool.coerce(item))
        except (ValueError, ValidationError) as exc:
            name = getattr(item, "name", None) or (
                item.get("name") if isinstance(item, Mapping) else None
            )
            raise _Refused(
                "failed", "invalid-tools", f"tool {index} ({name!r}) is invalid: {exc}"
            ) from None
    return tuple(tools)  # names listed twice and bad schemas: the orchestrator refuses them


def _looks_like_driver(obj: object) -> bool:
    return is_tool_driver(obj) or is_standalone_driver(obj)


@contextmanager
def _timed(timings: dict[str, float], stage: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - started


def _summary(exc: BaseException) -> str:
    """``Type: message (at file:line in function)``, the place being the driver's, not ours."""
    ours = {__file__, _bounded.__file__}
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename not in ours]
    where = (
        f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name})"
        if frames
        else ""
    )
    return f"{type(exc).__name__}: {exc}{where}"


def _trace(exc: BaseException) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-6)
    return "".join(lines).rstrip()
