"""Planning: which mounts a load attempts, and which it skips and why, before any import.

A mount comes from the configuration's ``[drivers.<label>]`` tables, from installed drivers
(``autoload``) or from an object the application added in-process. ``deny`` and ``allow``
rule drivers out by label or distribution name; deny wins over allow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mcs_host.discovery import Candidate, Discovery, normalize_name

from .config_schema import DriverSettings, HostConfig
from .records import LoadRecord, Plan

__all__ = ["settle_conflicts"]


def plan_mounts(
    config: HostConfig,
    found: Discovery,
    in_process: Mapping[str, tuple[object, DriverSettings]],
) -> tuple[list[Plan], list[LoadRecord]]:
    """Every mount, sorted by label: configured ones, installed drivers (autoload) and
    in-process ones; and a record for each in-process label that is already taken."""
    plans: dict[str, Plan] = {}
    taken: list[LoadRecord] = []
    used = {s.driver for s in config.drivers.values() if s.driver}
    for label, settings in config.drivers.items():
        plans[label] = Plan(label, settings.driver or label, settings)
    if config.autoload:
        for candidate in found.candidates:
            if candidate.label not in plans and candidate.label not in used:
                plans[candidate.label] = Plan(candidate.label, candidate.label, DriverSettings())
    for label, (obj, settings) in in_process.items():
        if label in plans:
            message = f"the label {label!r} is already used by an installed or configured driver"
            taken.append(
                LoadRecord(label, "failed", "label-taken", message, verification="in-process")
            )
        else:
            plans[label] = Plan(label, None, settings, obj)
    return [plans[label] for label in sorted(plans)], taken


def skip_reason(
    config: HostConfig, labels: Sequence[str], plan: Plan, candidate: Candidate | None
) -> tuple[str, str] | None:
    """``(reason, message)`` when ``plan`` is skipped: not asked for, disabled, denied or not
    allowed; ``None`` when it goes ahead."""
    if labels and plan.label not in labels:
        return "not-requested", "not among the labels asked for"
    if not plan.settings.enabled:
        return "disabled", "enabled = false in its configuration"
    names = {plan.label, plan.driver or plan.label}
    if candidate is not None:
        names.add(candidate.project)
    return ruled_out(config, names)


def ruled_out(config: HostConfig, names: set[str]) -> tuple[str, str] | None:
    """``(reason, message)`` when the configuration's ``deny`` or ``allow`` keeps a driver
    known by ``names`` (labels, distribution) from loading; deny wins over allow."""
    deny = {normalize_name(d) for d in config.deny} | set(config.deny)
    if names & deny:
        return "denied", f"denied by the configuration ({', '.join(sorted(names & deny))})"
    allow = {normalize_name(a) for a in config.allow} | set(config.allow)
    if allow and not names & allow:
        return "not-allowed", "not in the configuration's allow list"
    return None


def admitted(config: HostConfig, label: str, project: str) -> bool:
    """Whether ``deny`` and ``allow`` let the driver ``label`` of ``project`` load."""
    return ruled_out(config, {label, project}) is None


def settle_conflicts(found: Discovery, config: HostConfig) -> Discovery:
    """``found`` without the candidates for a contested label that ``deny`` or ``allow``
    rule out: a conflict the configuration settles is no longer one."""
    contested = {c.label for c in found.candidates if len(found.get(c.label)) > 1}
    return found.without(
        c
        for c in found.candidates
        if c.label in contested and not admitted(config, c.label, c.project)
    )
