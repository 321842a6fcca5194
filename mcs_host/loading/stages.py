"""The stages of one mount, each a function with one job.

A stage reads the load's :class:`Context` and the records it is given, and returns a value or
raises :class:`~mcs_host.loading.records.Refused`; none keeps state for another. In order:
:func:`verify`, :func:`check_compatibility`, :func:`admit_dependencies`,
:func:`import_verified`, :func:`instantiate`, :func:`check_meta`, :func:`autostart`,
:func:`probe_health`, :func:`list_tools`, and :func:`gate_findings` (what the import gate saw
while the driver's code ran). Driver code runs only in a worker thread bounded by the
driver's timeout (:func:`bounded`).

One module: the stages are one sequence that shares the context and the refusals, and each
reads best beside the stage before it.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from mcs_host import _bounded
from mcs_host._bounded import Hung, call_bounded
from mcs_host._version import __version__
from mcs_host.contract import DriverMeta, Tool
from mcs_host.discovery import Candidate, Discovery
from mcs_host.interfaces import (
    is_standalone_driver,
    is_tool_driver,
    supports_autostart,
    supports_healthcheck,
)
from mcs_host.trust._editable import editable_modules
from mcs_host.trust._gate import VerifiedImporter, gate
from mcs_host.trust.dependencies import DependencyCheck, check_dependencies, judge_dependencies
from mcs_host.trust.importer import (
    IntegrityError,
    check_runtime_meta,
    import_driver,
    refuse_imported_elsewhere,
)
from mcs_host.trust.registry import TrustIndex
from mcs_host.trust.verification import TrustPolicy, Verification, verify_candidate

from ._paths import resolved_settings
from .compat import (
    Incompatibility,
    capability_problems,
    host_requirement_problem,
    meta_of,
    version_problem,
)
from .config_schema import DriverSettings, HostConfig
from .records import MODULES, Plan, Refused
from .reference import ReferenceToolDriver, is_reference_driver

if TYPE_CHECKING:
    import pluggy

    from mcs_host.trust.digest import TreeScan

__all__: list[str] = []  # a stage of mcs_host.loading.host; nothing public


@dataclass(frozen=True, slots=True)
class Context:
    """What every stage of one load may read."""

    config: HostConfig
    index: TrustIndex
    policy: TrustPolicy
    refuse_unverified: bool
    """Strict, or ``dependencies = "refuse"`` (the default) for a mount not allowed
    unverified: unverified code refuses the driver."""
    search: tuple[str, ...]
    manager: pluggy.PluginManager
    scans: dict[str, TreeScan]
    """Tree scans of site directories, shared by every verification of the load (a memo)."""
    gate: VerifiedImporter
    paths: tuple[str, ...] | None = None
    """The search path the host was given (``None``: the interpreter's)."""


def context(
    config: HostConfig,
    index: TrustIndex,
    manager: pluggy.PluginManager,
    search: Sequence[str] | None,
) -> Context:
    """The context of one load under ``config`` and the trust ``index`` it built, searching
    ``search`` (default: ``sys.path``)."""
    return Context(
        config,
        index,
        TrustPolicy(
            allow_unverified=config.trust.allow_unverified,
            allow_extensions=config.trust.allow_extensions,
        ),
        config.trust.refuses_unverified(config.strict, config.trust.allow_unverified),
        tuple(search if search is not None else sys.path),
        manager,
        {},
        gate(),
        tuple(search) if search is not None else None,
    )


def verify(ctx: Context, candidate: Candidate, found: Discovery) -> Verification:
    """The candidate's verification; refused when it fails or a plugin's
    ``mcs_host_verify`` hook gives a reason."""
    verification = verify_candidate(candidate, found, ctx.index, ctx.policy, ctx.scans)
    if not verification.allowed:
        raise Refused(
            "rejected",
            verification.reason,
            verification.message,
            notes=tuple(verification.warnings),
            verification=verification,
        )
    for reason in ctx.manager.hook.mcs_host_verify(verification=verification):
        if reason:
            raise Refused("rejected", "plugin-refused", str(reason))
    return verification


def check_compatibility(ctx: Context, label: str, candidate: Candidate) -> None:
    """The distribution's ``Requires-Dist: mcs-host`` and the configured version specifier,
    from metadata, before import."""
    problem = host_requirement_problem(candidate.metadata_path, __version__)
    required = ctx.config.require.get(label)
    if problem is None and required:
        problem = version_problem(label, candidate.version, required)
    if problem is not None:
        raise Refused("rejected", problem.code, problem.message)


def admit_dependencies(
    ctx: Context, candidate: Candidate, verification: Verification
) -> tuple[str, ...]:
    """Judge what the distribution requires: register pinned dependencies with the import
    gate, allow the unverified ones the policy lets it import; return the notes."""
    entry = ctx.index.entries.get(verification.driver_id or "")
    checks = check_dependencies(
        candidate.distribution,
        candidate.metadata_path,
        ctx.index,
        list(ctx.search),
        entry.requires if entry else (),
        scans=ctx.scans,
    )
    judged = judge_dependencies(checks, ctx.policy, refuse_unverified=ctx.refuse_unverified)
    if judged.refusal is not None:
        status, reason, message = judged.refusal
        raise Refused(status, reason, message)
    admit_checked(ctx.gate, checks, judged.unverified, candidate.distribution, candidate.version)
    return tuple(judged.notes)


def admit_checked(
    gate: VerifiedImporter,
    checks: Iterable[DependencyCheck],
    unverified: Iterable[DependencyCheck],
    distribution: str,
    version: str | None,
) -> None:
    """Register the pinned ``checks`` with the import gate and allow the ``unverified`` ones
    the policy admits for the imports of ``distribution`` ``version`` (and of unverified
    code), never another verified distribution's; :class:`Refused` if one was imported
    elsewhere."""
    try:
        for check in checks:
            if check.status == "pinned" and check.location is not None:
                owner = f"{check.distribution} {check.version}"
                gate.register(
                    check.location, check.modules, check.extensions, owner, check.libraries
                )
                refuse_imported_elsewhere(gate, check.modules, check.extensions)
    except IntegrityError as exc:
        raise Refused("rejected", "integrity", str(exc)) from None
    for check in unverified:
        _allow_dependency(gate, check, distribution, f"{distribution} {version}")


def import_verified(verification: Verification) -> object:
    """The entry point's object, imported from the verified bytes; a meta declared as a class
    attribute is checked before anything is constructed."""
    try:
        obj = import_driver(verification)
    except IntegrityError as exc:
        raise Refused("rejected", "integrity", str(exc)) from None
    except (Exception, SystemExit) as exc:  # a module that exits ends only its mount
        raise Refused("failed", "import-error", summary(exc), trace(exc)) from None
    declared = getattr(obj, "meta", None)
    if declared is not None and not isinstance(declared, property):
        meta, problems = meta_of(obj, None)
        if meta is None:
            raise Refused("rejected", problems[0].code, problems[0].message)
    mismatch = check_runtime_meta(obj, verification)
    if mismatch is not None:
        raise Refused("rejected", "meta-mismatch", mismatch)
    return obj


def instantiate(obj: object, settings: DriverSettings, timeout: float) -> object:
    """The driver: ``obj`` called with its settings when it is a class or factory, else
    ``obj`` itself; a reference-SDK ToolDriver is wrapped to speak this contract."""
    if isinstance(obj, type) or (callable(obj) and not _looks_like_driver(obj)):
        driver = bounded(partial(obj, **resolved_settings(obj, settings)), timeout, "constructor")
    elif settings.settings:
        raise Refused(
            "failed",
            "invalid-settings",
            f"settings {sorted(settings.settings)} given, but the entry point is an "
            "instance, not a class or factory",
        )
    else:
        driver = obj
    if is_reference_driver(driver) and is_tool_driver(driver):
        return ReferenceToolDriver(driver)
    return driver


def check_meta(
    ctx: Context,
    plan: Plan,
    driver: object,
    version: str | None,
    verification: Verification | None,
) -> tuple[DriverMeta, tuple[str, ...]]:
    """The driver's valid meta, agreeing with its distribution and verified manifest, with the
    capabilities required of it; problems that only strict mode refuses become notes."""
    meta, problems = meta_of(driver, version)
    if meta is None:
        raise Refused("rejected", problems[0].code, problems[0].message)
    if verification is not None:
        mismatch = check_runtime_meta(driver, verification)
        if mismatch is not None:
            raise Refused("rejected", "meta-mismatch", mismatch)
    required = (*ctx.config.require_capabilities, *plan.settings.capabilities)
    problems += capability_problems(driver, meta, required)
    required_version = ctx.config.require.get(plan.label)
    if plan.obj is not None and required_version:
        problem = version_problem(plan.label, meta.version, required_version)
        problems += [problem] if problem else []
    return meta, _judge(ctx, problems)


def autostart(driver: object, settings: DriverSettings, timeout: float) -> None:
    """Run the driver's ``autostart`` with its autostart settings."""
    if not supports_autostart(driver):
        raise Refused(
            "failed",
            "autostart-unsupported",
            "autostart is configured but the driver has no autostart()",
        )
    bounded(partial(driver.autostart, dict(settings.autostart_settings)), timeout, "autostart")


def probe_health(driver: object, timeout: float) -> Mapping[str, Any] | Any:
    """The driver's healthcheck result; anything but status OK fails the mount."""
    if not supports_healthcheck(driver):  # check_meta refuses it first
        raise Refused(
            "rejected",
            "false-capability",
            "declares the capability 'healthcheck' but has no healthcheck()",
        )
    health = bounded(driver.healthcheck, timeout, "healthcheck")
    status = health.get("status") if isinstance(health, Mapping) else None
    if str(getattr(status, "value", status)).upper() != "OK":
        raise Refused("failed", "unhealthy", f"healthcheck returned {health!r}")
    return health


def list_tools(
    driver: object, meta: DriverMeta, timeout: float, health: Any
) -> tuple[Tool, ...] | None:
    """A ToolDriver's valid tools (at least one); ``None`` for a standalone driver."""
    if not is_tool_driver(driver):
        if is_standalone_driver(driver):
            return None
        raise Refused(
            "failed",
            "not-a-driver",
            f"{type(driver).__qualname__} has neither list_tools/execute_tool nor "
            "process_llm_response",
        )
    # listed in the worker too: a generator runs its code while it is read
    listed = bounded(lambda: _listed(driver.list_tools()), timeout, "list_tools")
    tools = valid_tools(listed)
    if not tools:
        raise Refused("failed", "no-tools", _no_tools(driver, meta, timeout, health))
    return tools


def gate_findings(ctx: Context, mark: int, own: str = "") -> tuple[tuple[str, ...], str | None]:
    """What the import gate allowed and refused since ``mark``, as notes (leaving out the
    modules of ``own``, the driver itself), and the first refusal's message. The modules
    imported unverified are one note per distribution (a module of none: per directory),
    naming them after :data:`~mcs_host.loading.records.MODULES`."""
    groups: dict[tuple[str, str], dict[str, None]] = {}
    for allowed in ctx.gate.allowed(mark):
        if allowed.distribution != own:
            where = allowed.distribution or f"no distribution ({os.path.dirname(allowed.origin)})"
            groups.setdefault((where, allowed.why), {})[allowed.module] = None
    notes = [
        f"unverified-import: {len(names)} module{'s' if len(names) > 1 else ''} of {where} "
        f"imported from unverified files ({why}){MODULES}{', '.join(names)}"
        for (where, why), names in groups.items()
    ]
    refused = ctx.gate.refusals(mark)
    notes += [f"import-refused: {refusal.message}" for refusal in refused]
    return tuple(dict.fromkeys(notes)), refused[0].message if refused else None


def bounded(func: Callable[[], Any], timeout: float, stage: str) -> Any:
    """``func()`` bounded by ``timeout`` (a hung call's thread is left behind); what it
    raises becomes a refusal naming the stage."""
    try:
        return call_bounded(func, timeout, stage)
    except Hung as hung:
        raise Refused("failed", "timeout", str(hung)) from None
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # SystemExit included: a driver never ends the host
        hint = (
            "; settings come from [drivers.<label>.settings] in the host config, "
            "or --set <label>.<key>=<value>"
            if stage == "constructor" and isinstance(error, TypeError)
            else ""
        )
        message = f"{stage} raised {summary(error)}{hint}"
        raise Refused("failed", _RAISED[stage], message, trace(error)) from None


_RAISED = {
    "constructor": "constructor-error",
    "autostart": "autostart-error",
    "healthcheck": "healthcheck-error",
    "list_tools": "list-tools-error",
}
"""The reason code of each stage of :func:`bounded` that raised."""


def summary(exc: BaseException) -> str:
    """``Type: message (at file:line in function)``, the place being the driver's, not ours."""
    ours = {__file__, _bounded.__file__}
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename not in ours]
    where = (
        f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name})"
        if frames
        else ""
    )
    return f"{type(exc).__name__}: {exc}{where}"


def trace(exc: BaseException) -> str:
    """The last frames of ``exc``'s traceback, for the record."""
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-6)
    return "".join(lines).rstrip()


def _judge(ctx: Context, problems: Sequence[Incompatibility]) -> tuple[str, ...]:
    notes = []
    for problem in problems:
        if problem.strict_only and not ctx.config.strict:
            notes.append(f"{problem.code}: {problem.message}")
        else:
            raise Refused("rejected", problem.code, problem.message)
    return tuple(notes)


def _no_tools(driver: object, meta: DriverMeta, timeout: float, health: Any) -> str:
    """Why a ToolDriver listed no tools, as far as its healthcheck (``health``, when it ran
    already) can tell."""
    message = f"{type(getattr(driver, 'inner', driver)).__qualname__} lists no tools"
    if "healthcheck" in meta.capabilities and supports_healthcheck(driver):
        if health is None:
            try:
                health = bounded(driver.healthcheck, timeout, "healthcheck")
            except Refused as refused:
                health = refused.message
        message += f"; its healthcheck says {health!r}"
    return message


def _allow_dependency(
    gate: VerifiedImporter, check: DependencyCheck, needed_by: str, owner: str
) -> None:
    """Tell the import gate the policy allows the unverified dependency ``check`` for the
    imports of ``needed_by`` (whose verified code the gate knows as ``owner``) and of
    unverified code."""
    if check.location is None or check.metadata_path is None:
        return
    files = [os.path.join(check.location, *path.split("/")) for path in check.files]
    trees, modules = editable_modules(check.metadata_path)
    files += modules
    why = f"an unverified dependency of {needed_by} the policy allows"
    gate.allow(files, check.distribution, why, trees, serves=owner)


def _listed(value: Any) -> Any:
    """What ``list_tools`` returned, read into a list when it is a sequence or iterator."""
    if isinstance(value, Iterable) and not isinstance(value, str | bytes | Mapping):
        return list(value)
    return value


def valid_tools(listed: Any) -> tuple[Tool, ...]:
    if not isinstance(listed, list):
        raise Refused(
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
            raise Refused(
                "failed", "invalid-tools", f"tool {index} ({name!r}) is invalid: {exc}"
            ) from None
    return tuple(tools)  # names listed twice and bad schemas: the orchestrator refuses them


def _looks_like_driver(obj: object) -> bool:
    return is_tool_driver(obj) or is_standalone_driver(obj)
