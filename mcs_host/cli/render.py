"""The load and verify reports as text tables and as JSON documents.

Under each refusal the text says what to do (``fix:``) and the JSON gives the same as
``"fix"``, from the table of :mod:`mcs_host._reasons`, with the label filled in, and each
``mcs-host lock`` command given the options (``again``) that make it pin into a registry the
command that printed it reads, from the same configuration and search path.

One module: each report's text and its JSON side by side, so what one says the other says.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mcs_host._install_hint import extra_command, source_of, wheel_name
from mcs_host._reasons import REASONS, Subject
from mcs_host.loading.records import MODULES

from ._listing import table
from ._schema import schema_urn

if TYPE_CHECKING:
    from mcs_host.discovery import Problem
    from mcs_host.loading.records import (
        Loaded,
        LoadRecord,
        LoadReport,
        ServerCheck,
        VerifyRecord,
        VerifyReport,
    )
    from mcs_host.trust.dependencies import DependencyCheck

    from .documents import (
        LoadDocument,
        Mount,
        MountedTool,
        Server,
        VerifiedDriver,
        VerifyDocument,
    )


_AGAIN = re.compile(r"`(mcs-host (?:lock|verify)\b[^`]*)`")
"""A ``mcs-host lock`` or ``verify`` command quoted in a fix: each reads the registries, the
configuration and the search path the command that printed it read."""

_EDITABLE = (
    "build a wheel of its project and install that in place of the editable install (pip "
    "wheel, then pip install of the wheel), then pin it; `--allow-unverified` runs it "
    "unpinned, for development"
)
"""The fix of an editable install whose project directory is not known."""


def fix(
    code: str,
    label: str | None = None,
    distribution: str | None = None,
    subject: Subject = "driver",
    again: str = "",
) -> str | None:
    """What to do about ``code`` for ``label`` (of ``distribution``); ``None`` when there is
    nothing to do or the code is not a reason code. ``again`` (words, each after a space)
    ends each ``mcs-host lock`` and ``verify`` command of it (its ``--path`` words say where
    ``distribution`` is installed)."""
    reason = REASONS.get(code)
    if reason is None or not reason.fix:
        return None
    if reason.extra:
        return (
            f"install the {reason.extra} extra into the environment mcs-host runs in, from "
            f"where it was installed: `{extra_command(reason.extra)}`"
        )
    values = {}
    if code == "editable-install" and distribution:
        project = _editable_project(distribution, again)
        if project is None:
            return _EDITABLE
        values = {"PROJECT": project, "WHEEL": wheel_name(distribution)}
    found = reason.fix_for(label, distribution, subject, values)
    if found and again:
        found = _AGAIN.sub(lambda m: f"`{m.group(1)}{again}`", found)
    return found or None


def _editable_project(distribution: str, again: str) -> str | None:
    """The project directory the editable install of ``distribution`` (found where the
    ``--path`` words of ``again`` say, else on ``sys.path``) was made from."""
    from mcs_host.discovery import installed_distribution

    words = shlex.split(again)
    paths = [words[n + 1] for n, word in enumerate(words[:-1]) if word == "--path"]
    found = installed_distribution(distribution, paths or sys.path)
    if found is None:
        return None
    try:
        with open(os.path.join(found[2], "direct_url.json"), encoding="utf-8") as file:
            source = source_of(file.read(64 * 1024))
    except OSError:
        return None
    return source.location if source.kind == "directory" else None


def fix_lines(
    code: str,
    label: str | None = None,
    distribution: str | None = None,
    subject: Subject = "driver",
    indent: str = "  ",
    again: str = "",
) -> list[str]:
    """The ``fix:`` line printed under a refusal with ``code``, or none."""
    found = fix(code, label, distribution, subject, again)
    return [f"{indent}fix: {found}"] if found else []


def brief(note: str, verbose: bool = False) -> str:
    """A warning as the text shows it: an ``unverified-import`` note names its modules only
    when ``verbose``."""
    return note if verbose else note.partition(MODULES)[0]


def record_subject(record: LoadRecord) -> Subject:
    """What a load record is about, for its fix."""
    if record.kind != "mcp":
        return "plugin" if record.kind == "plugin" else "driver"
    return _mcp_subject(record.reason, record.distribution)


def _verified_subject(r: VerifyRecord) -> Subject:
    """What a verify record is about, for its fix."""
    return "plugin" if r.kind == "plugin" else "driver"


def _server_subject(s: ServerCheck) -> Subject:
    return _mcp_subject(s.reason, s.distribution)


def _mcp_subject(reason: str, distribution: str | None) -> Subject:
    """An MCP server given by URL or command is described in a registry; one from a
    distribution too (``lock --server`` pins its files and describes it), but what is wrong
    with its installed files is a library's to fix (reinstall it)."""
    if distribution is None:
        return "server"
    known = REASONS.get(reason)
    return "server" if known is not None and known.server_fix else "library"


_PINNABLE = ("not-in-registry", "no-pin")
"""Why a dependency is unverified when pinning it as installed verifies it."""


def _dependency_fix(r: VerifyRecord, d: DependencyCheck, again: str) -> str | None:
    """What to do about the dependency ``d`` of ``r``: an unpinned one is pinned with the
    driver or host plugin that needs it (``lock`` pins a label's whole closure); anything
    else, the dependency's own fix."""
    if d.status == "unverified" and d.reason in _PINNABLE:
        distribution = r.verification.candidate.distribution
        return fix("unverified-dependency", r.label, distribution, _verified_subject(r), again)
    return fix(d.reason, r.label, d.distribution, "library", again)


def _refusal_fix(r: VerifyRecord, again: str) -> str | None:
    """The fix for why load would refuse ``r`` after verification: for a dependency refused,
    unverified or missing, the fix of that dependency."""
    assert r.refusal is not None
    wanted = {
        "dependency-rejected": ("rejected", "revoked"),
        "unverified-dependency": ("unverified",),
        "missing-dependency": ("missing",),
    }
    statuses = wanted.get(r.refusal[0], ())
    culprit = next((d for d in r.dependencies if d.status in statuses), None)
    if culprit is not None:
        return _dependency_fix(r, culprit, again)
    distribution = r.verification.candidate.distribution
    return fix(r.refusal[0], r.label, distribution, _verified_subject(r), again)


def verify_json(
    report: VerifyReport, notes: tuple[str, ...] = (), again: str = ""
) -> VerifyDocument:
    """The verify report as its JSON document; ``again`` as :func:`fix` takes it."""

    def record(r: VerifyRecord) -> VerifiedDriver:
        v = r.verification
        return {
            "label": r.label,
            "kind": r.kind,
            "distribution": v.candidate.distribution,
            "version": v.candidate.version,
            "verification": v.status,
            "trust": v.trust,
            "allowed": v.allowed,
            "loadable": r.loadable,
            "verified": r.verified,
            "reason": v.reason,
            "message": v.message,
            "fix": fix(v.reason, r.label, v.candidate.distribution, _verified_subject(r), again),
            "refusal": {
                "reason": r.refusal[0],
                "message": r.refusal[1],
                "fix": _refusal_fix(r, again),
            }
            if r.refusal
            else None,
            "unverified": list(r.unverified),
            "driver_id": v.driver_id,
            "digest": v.digest,
            "files": v.scan.digest.files if v.scan and v.scan.digest else None,
            "bytes": v.scan.digest.bytes if v.scan and v.scan.digest else None,
            "signers": list(v.signers),
            "findings": [
                {"code": f.code, "path": f.path, "message": f.message}
                for f in (v.scan.findings if v.scan else ())
            ],
            "extensions": list(v.scan.extensions) if v.scan else [],
            "dependencies": [
                {
                    "distribution": d.distribution,
                    "version": d.version,
                    "required_by": d.required_by,
                    "declared": d.declared,
                    "status": d.status,
                    "reason": d.reason,
                    "message": d.message,
                    "fix": _dependency_fix(r, d, again),
                    "provenance": d.provenance,
                }
                for d in r.dependencies
            ],
            "warnings": list(v.warnings),
            "live": {
                "ok": r.live.ok,
                "message": r.live.message,
                "tools": list(r.live.tools),
                "seconds": round(r.live.seconds, 3),
                "health": dict(r.live.health) if r.live.health is not None else None,
            }
            if r.live is not None
            else None,
            "provenance": v.provenance,
        }

    return {
        "schema": schema_urn("verify"),
        "ok": report.ok,
        "registries": list(report.registries),
        "registry_errors": [
            {"reason": reason, "message": message, "fix": fix(reason)}
            for reason, message in report.registry_errors
        ],
        "missing": list(report.missing),
        "drivers": [record(r) for r in report.records if r.kind == "driver"],
        "plugins": [record(r) for r in report.records if r.kind == "plugin"],
        "environment": list(report.environment),
        "startup": [{"path": path, "what": what} for path, what in report.startup],
        "servers": [server_json(s, again) for s in report.servers],
        "config_notes": list(notes),
        "problems": [
            {
                "code": p.code,
                "message": p.message,
                "fix": _problem_fix(p),
                "labels": list(p.labels),
                "distributions": list(p.distributions),
            }
            for p in report.problems
        ],
    }


def _problem_fix(problem: Problem) -> str | None:
    """What to do about a discovery ``problem``, with its label when it names one."""
    return fix(problem.code, problem.labels[0] if len(problem.labels) == 1 else None)


def server_json(s: ServerCheck, again: str = "") -> Server:
    return {
        "label": s.label,
        "transport": s.transport,
        "target": s.target,
        "verification": s.status,
        "trust": s.trust,
        "allowed": s.allowed,
        "consent": s.consent,
        "reason": s.reason,
        "message": s.message,
        "fix": fix(s.reason, s.label, s.distribution, _server_subject(s), again),
        "distribution": s.distribution,
        "version": s.version,
        "unverified": list(s.unverified),
    }


def servers_text(
    servers: Sequence[ServerCheck], colour: bool = False, again: str = ""
) -> list[str]:
    """The configured MCP servers: a table, then what was and was not verified."""
    if not servers:
        return []
    rows = [
        [
            s.label,
            s.transport,
            s.target if len(s.target) <= 60 else s.target[:57] + "...",
            s.status,
            s.trust or "-",
            "yes" if s.consent else "no",
            "yes" if s.allowed else "no",
        ]
        for s in servers
    ]
    headers = ["MCP SERVER", "TRANSPORT", "TARGET", "VERIFICATION", "TRUST", "CONSENT", "STARTS"]
    lines = ["", *table(headers, rows, colour), ""]
    for s in servers:
        seen = "its code is never seen here" if s.transport == "http" else ""
        lines.append(f"{s.label}: {s.reason}: {s.message}" + (f" ({seen})" if seen else ""))
        lines += fix_lines(s.reason, s.label, s.distribution, _server_subject(s), again=again)
        lines += [f"{s.label}: UNVERIFIED CODE would run: {u}" for u in s.unverified]
    return lines


def verify_text(report: VerifyReport, colour: bool = False, again: str = "") -> str:
    """The verify report as text; ``again`` as :func:`fix` takes it."""
    lines = [f"Registries: {', '.join(report.registries) if report.registries else 'none'}"]
    for reason, message in report.registry_errors:
        lines += [f"  refused: {message}", *fix_lines(reason, indent="    ")]
    lines.append("")
    rows = []
    for r in report.records:
        v = r.verification
        trust = v.trust or "-"
        rows.append(
            [
                r.label,
                r.kind,
                v.candidate.distribution,
                v.candidate.version,
                str(v.status),
                trust,
                "yes" if r.loadable else "no",
                (v.digest or "-")[:19],
                v.provenance or ("none" if v.status in ("pinned", "signed") else "-"),
            ]
        )
    if rows:
        headers = [
            "LABEL",
            "KIND",
            "DISTRIBUTION",
            "VERSION",
            "VERIFICATION",
            "TRUST",
            "LOADABLE",
            "DIGEST",
            "PROVENANCE",
        ]
        lines += table(headers, rows, colour)
        lines.append("")
    for r in report.records:
        v = r.verification
        lines.append(f"{r.label}: {v.reason}: {v.message}")
        lines += fix_lines(
            v.reason, r.label, v.candidate.distribution, _verified_subject(r), again=again
        )
        lines += [f"{r.label}: WARNING: {w}" for w in v.warnings]
        if r.refusal is not None:
            lines.append(f"{r.label}: refused at load: {r.refusal[0]}: {r.refusal[1]}")
            found = _refusal_fix(r, again)
            lines += [f"  fix: {found}"] if found else []
        elif r.loadable:
            lines += _unverified_lines(r, again)
        if r.live is not None:
            lines.append(f"{r.label}: live: {_live(r)}")
    lines += [f"{label}: no driver or plugin has this label" for label in report.missing]
    for problem in report.problems:
        lines.append(f"{', '.join(problem.labels)}: {problem.code}: {problem.message}")
        found = _problem_fix(problem)
        lines += [f"  fix: {found}"] if found else []
    if report.environment:
        lines.append("Host installation (ignored, grants nothing):")
        lines += [f"  {finding}" for finding in report.environment]
    if report.startup:
        lines.append("Start-up code (the interpreter runs it before any host can act):")
        lines += [f"  {path} {what}" for path, what in report.startup]
    for kind, noun in (("driver", "drivers"), ("plugin", "host plugins")):
        records = [r for r in report.records if r.kind == kind]
        total = len(records) + (len(report.missing) if kind == "driver" else 0)
        if kind == "plugin" and not records:
            continue
        loadable = sum(r.loadable for r in records)
        verified = sum(r.verified for r in records)
        lines.append(
            f"{loadable} of {total} {noun} may be loaded; {verified} would run only verified code."
        )
    servers = servers_text(report.servers, colour, again)
    if servers:
        lines += servers
        allowed = sum(s.allowed for s in report.servers)
        lines.append(f"{allowed} of {len(report.servers)} MCP servers may start.")
    checked = [r for r in report.records if r.live is not None]
    if checked:
        started = sum(r.live.ok for r in checked if r.live is not None)
        lines.append(f"{started} of {len(checked)} started in a process of their own (--live).")
    return "\n".join(lines)


def _unverified_lines(r: VerifyRecord, again: str) -> list[str]:
    """The unverified code load would run for ``r``, each dependency with its fix (the
    driver's own is under its reason already)."""
    dependencies = [d for d in r.dependencies if d.status == "unverified"]
    own = len(r.unverified) - len(dependencies)  # 1: the driver itself is unverified
    lines = []
    for n, what in enumerate(r.unverified):
        lines.append(f"{r.label}: UNVERIFIED CODE would run: {what}")
        if own >= 0 and n >= own:
            found = _dependency_fix(r, dependencies[n - own], again)
            lines += [f"  fix: {found}"] if found else []
    return lines


def _live(r: VerifyRecord) -> str:
    live = r.live
    assert live is not None
    if not live.ok:
        return f"FAILED: {live.message}"
    health = live.health.get("status") if live.health is not None else None
    checked = f", healthcheck {health}" if health is not None else ""
    return f"{live.message} ({live.seconds * 1000:.0f} ms{checked})"


def report_json(
    report: LoadReport, loaded: Loaded | None, notes: tuple[str, ...] = (), again: str = ""
) -> LoadDocument:
    """The load report as its JSON document; ``again`` as :func:`fix` takes it."""

    def record(r: LoadRecord) -> Mount:
        return {
            "label": r.label,
            "kind": r.kind,
            "driver": r.driver,
            "distribution": r.distribution,
            "version": r.version,
            "status": r.status,
            "reason": r.reason,
            "message": r.message,
            "fix": fix(r.reason, r.label, r.distribution, record_subject(r), again),
            "verification": r.verification,
            "trust": r.trust,
            "tools": list(r.tools),
            "timings_ms": {k: round(v * 1000, 3) for k, v in r.timings.items()},
            "warnings": list(r.warnings),
            "traceback": r.traceback,
            "health": dict(r.health) if r.health is not None else None,
            "isolation": r.isolation,
        }

    tools: list[MountedTool] = []
    if loaded is not None:
        for tool in loaded.driver.list_tools():
            label, own = loaded.driver.route(tool.name)
            tools.append({"name": tool.name, "label": label, "tool": own})
    return {
        "schema": schema_urn("load"),
        "ok": report.ok,
        "errors": list(report.errors),
        "registry_errors": list(report.registry_errors),
        "drivers": [record(r) for r in report.records],
        "plugins": [record(r) for r in report.plugins],
        "tools": tools,
        "timings_ms": {k: round(v * 1000, 3) for k, v in report.timings.items()},
        "environment": list(report.environment),
        "config_notes": list(notes),
    }


def report_text(
    report: LoadReport,
    loaded: Loaded | None,
    colour: bool = False,
    verbose: bool = False,
    again: str = "",
) -> str:
    """The load report as a table and its notes, a ``fix:`` line under each mount that did not
    mount; mounts left out because other labels were asked for are counted in one line, not
    listed (``--json`` lists them); the modules imported unverified are counted per
    distribution, and named only when ``verbose``; ``again`` as :func:`fix` takes it."""
    lines = [f"  registry refused: {e}" for e in report.registry_errors]
    shown = [r for r in report.records if r.reason != "not-requested"]
    others = len(report.records) - len(shown)
    rows = [
        [
            r.label,
            r.driver or "-",
            r.distribution or "-",
            r.version or "-",
            r.status,
            r.verification or "-",
            r.trust or "-",
            str(len(r.tools)) if r.status == "mounted" else "-",
            f"{sum(r.timings.values()) * 1000:.1f} ms" if r.timings else "-",
        ]
        for r in (*shown, *report.plugins)
    ]
    if rows:
        headers = [
            "LABEL",
            "DRIVER",
            "DISTRIBUTION",
            "VERSION",
            "STATUS",
            "VERIFICATION",
            "TRUST",
            "TOOLS",
            "TIME",
        ]
        lines += table(headers, rows, colour)
        lines.append("")
    if others:
        lines.append(f"{others} other installed drivers not requested (--json lists them)")
    for r in (*shown, *report.plugins):
        if r.status != "mounted":
            lines.append(f"{r.label}: {r.reason}: {r.message}")
            lines += fix_lines(r.reason, r.label, r.distribution, record_subject(r), again=again)
        elif r.isolation == "process":
            lines.append(f"{r.label}: isolated: runs in a process of its own")
        lines += [f"{r.label}: WARNING: {brief(w, verbose)}" for w in r.warnings]
    tools = loaded.driver.list_tools() if loaded is not None else []
    if loaded is not None and tools:
        lines.append("Tools:")
        for tool in tools:
            label, own = loaded.driver.route(tool.name)
            lines.append(f"  {tool.name}  ({label}: {own})")
    lines += [f"host installation (ignored, grants nothing): {e}" for e in report.environment]
    lines += [f"error: {e}" for e in report.errors]
    mounted = len(report.mounted)
    total = report.timings.get("total", 0.0) * 1000
    lines.append(f"{mounted} of {len(report.records)} drivers mounted in {total:.0f} ms.")
    return "\n".join(lines)
