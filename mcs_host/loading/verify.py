"""``Host.verify``: what a load would run, decided from files alone, importing nothing.

Each installed driver and host plugin that ``deny``/``allow`` admit is verified against the
trust index, and its dependencies are judged by the same policy a load applies.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from mcs_host.discovery import (
    ENTRY_POINT_GROUP,
    PLUGIN_GROUP,
    Discovery,
    declare,
    discover,
    shadowing,
)
from mcs_host.trust import _origins
from mcs_host.trust._startup import startup_findings
from mcs_host.trust.dependencies import check_dependencies, judge_dependencies
from mcs_host.trust.digest import TreeScan
from mcs_host.trust.registry import TrustIndex
from mcs_host.trust.verification import TrustPolicy, Verification, verify_candidate

from .config_schema import HostConfig
from .planning import admitted, settle_conflicts
from .records import Progress, ServerCheck, VerifyRecord, VerifyReport

__all__: list[str] = []  # a stage of mcs_host.loading.host; nothing public


def installed_drivers(
    config: HostConfig, index: TrustIndex, search_path: Sequence[str] | None
) -> Discovery:
    """The installed drivers, with the registry's declared entry points, and label conflicts
    that ``deny``/``allow`` settle left out."""
    found = declare(
        discover(search_path),
        (
            (e.label, e.distribution, e.object)
            for e in index.entries.values()
            if e.group == ENTRY_POINT_GROUP
        ),
    )
    return settle_conflicts(found, config)


def verify_installed(
    config: HostConfig,
    search_path: Sequence[str] | None,
    labels: Sequence[str],
    progress: Progress | None = None,
    live: bool = False,
) -> VerifyReport:
    """The verification of every installed driver and host plugin (or only ``labels``);
    ``progress`` is told before each one. ``live``: each loadable driver is also started in
    a child process of its own."""
    index, errors, paths = config.trust_index()
    policy = TrustPolicy(
        allow_unverified=config.trust.allow_unverified,
        allow_extensions=config.trust.allow_extensions,
    )
    search = list(search_path or sys.path)
    groups: list[tuple[Literal["driver", "plugin"], Discovery]] = [
        ("driver", installed_drivers(config, index, search_path))
    ]
    if config.plugins:
        groups.append(("plugin", discover(search_path, group=PLUGIN_GROUP, require_object=False)))
    scans: dict[str, TreeScan] = {}
    records: list[VerifyRecord] = []
    wanted = [
        (kind, discovery, candidate)
        for kind, discovery in groups
        for candidate in discovery.candidates
        if (not labels or candidate.label in labels)
        # load skips the others: denied, or not allowed
        and admitted(config, candidate.label, candidate.project)
    ]
    for done, (kind, discovery, candidate) in enumerate(wanted):
        if progress is not None:
            progress(done, len(wanted), f"verifying {kind} {candidate.label}")
        allowed = kind == "driver" and _allowed_unverified(config, candidate.label)
        mount = replace(policy, allow_unverified=True) if allowed else policy
        verification = verify_candidate(candidate, discovery, index, mount, scans)
        refuse = config.trust.refuses_unverified(config.strict, mount.allow_unverified)
        record = _record(kind, verification, index, mount, refuse, search, scans)
        if live and kind == "driver" and record.loadable:
            from .isolating import live_check  # noqa: PLC0415 - only with --live

            if progress is not None:
                progress(done, len(wanted), f"starting driver {candidate.label}")
            given = tuple(search_path) if search_path is not None else None
            record = replace(record, live=live_check(config, given, verification))
        records.append(record)
    known = {r.label for r in records}
    servers: tuple[ServerCheck, ...] = ()
    if config.mcp_servers:  # what checks them imports the MCP side of loading: not otherwise
        from .servers import check_server, skip_reason  # noqa: PLC0415

        servers = tuple(
            check_server(config, index, label, settings, search)
            for label, settings in sorted(config.mcp_servers.items())
            if skip_reason(config, label, settings, labels) is None
        )
    known |= {s.label for s in servers}
    found = dict(groups)
    shadowed = shadowing(found["driver"], found["plugin"]) if "plugin" in found else ()
    return VerifyReport(
        tuple(records),
        tuple(label for label in labels if label not in known),
        tuple(paths),
        tuple((e.reason, str(e)) for e in errors),
        _origins.host_install().findings,
        startup_findings(search),
        servers,
        tuple(p for p in shadowed if not labels or set(p.labels) & set(labels)),
    )


def _allowed_unverified(config: HostConfig, label: str) -> bool:
    """Whether a ``[drivers.<label>]`` table that mounts the installed driver ``label`` says
    ``allow_unverified`` (a load allows that mount, and only it, unverified)."""
    return any(
        settings.allow_unverified and settings.enabled and (settings.driver or mount) == label
        for mount, settings in config.drivers.items()
    )


def _record(
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
