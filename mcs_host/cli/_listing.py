"""What ``mcs-host list`` prints, kept free of typer and pydantic so ``list --no-verify``
starts fast."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from mcs_host._reasons import REASONS
from mcs_host.discovery import Candidate, Discovery, shadowing

from ._schema import schema_urn

if TYPE_CHECKING:
    from mcs_host import discovery

    from .documents import ListDocument, ListedDriver, Problem, Server

__all__ = ["Trust", "render_listing", "table"]

Trust = Mapping[tuple[str, str, str], tuple[str | None, str | None]]
"""``(kind, label, distribution) -> (verification, trust label)`` from ``verify``."""


def render_listing(
    found: Discovery,
    as_json: bool,
    plugins: Discovery,
    trust: Trust | None = None,
    registries: Sequence[str] = (),
    colour: bool = False,
    servers: Sequence[Server] = (),
) -> str:
    """The ``list`` output for the drivers ``found`` and the host ``plugins``, with what
    verification decided for each when ``trust`` is given: JSON, or one table with the
    problems below it. ``servers`` are the configured MCP servers, for the JSON. A host plugin
    with a driver's label is a problem of the plugin's (``plugin-shadows-driver``)."""
    shadowed = shadowing(found, plugins)
    if shadowed:
        plugins = replace(plugins, problems=(*plugins.problems, *shadowed))
    if as_json:
        document = _listing_json(found, plugins, trust, registries)
        document["servers"] = list(servers)
        return json.dumps(document, indent=2)
    return _listing_text(found, plugins, trust, registries, colour)


def _listing_json(
    found: Discovery, plugins: Discovery, trust: Trust | None, registries: Sequence[str]
) -> ListDocument:
    return {
        "schema": schema_urn("list"),
        "group": found.group,
        "path": list(found.path),
        "verified": trust is not None,
        "registries": list(registries),
        "drivers": [_candidate_json(found, c, "driver", trust) for c in found.candidates],
        "problems": _problems_json(found),
        "plugins": [_candidate_json(plugins, c, "plugin", trust) for c in plugins.candidates],
        "plugin_problems": _problems_json(plugins),
        "servers": [],
    }


def _problems_json(found: Discovery) -> list[Problem]:
    return [
        {
            "code": p.code,
            "message": p.message,
            "fix": _fix(p),
            "labels": list(p.labels),
            "distributions": list(p.distributions),
        }
        for p in found.problems
    ]


def _fix(problem: discovery.Problem) -> str | None:
    """What to do about ``problem``, with its label and distribution when it names one."""
    reason = REASONS.get(problem.code)
    if reason is None:
        return None
    label = problem.labels[0] if len(problem.labels) == 1 else None
    distribution = problem.distributions[0] if len(problem.distributions) == 1 else None
    return reason.fix_for(label, distribution) or None


def _decided(candidate: Candidate, kind: str, trust: Trust | None) -> tuple[str | None, str | None]:
    if trust is None:
        return None, None
    return trust.get((kind, candidate.label, candidate.distribution), (None, None))


def _candidate_json(
    found: Discovery, candidate: Candidate, kind: str, trust: Trust | None
) -> ListedDriver:
    verification, label = _decided(candidate, kind, trust)
    return {
        "label": candidate.label,
        "kind": "plugin" if kind == "plugin" else "driver",
        "distribution": candidate.distribution,
        "version": candidate.version,
        "entry_point": candidate.value,
        "declared": candidate.declared,
        "location": candidate.location,
        "metadata_path": candidate.metadata_path,
        "problems": [p.code for p in found.problems_for(candidate)],
        "verification": verification,
        "trust": label,
    }


def _listing_text(
    found: Discovery,
    plugins: Discovery,
    trust: Trust | None,
    registries: Sequence[str],
    colour: bool,
) -> str:
    listed = [(found, c, "driver") for c in found.candidates]
    listed += [(plugins, c, "plugin") for c in plugins.candidates]
    if not listed:
        lines = [
            f"No drivers in entry point group {found.group!r} and no host plugins in "
            f"{plugins.group!r} ({len(found.path)} search path entries)."
        ]
    else:
        headers = ["LABEL", "KIND", "DISTRIBUTION", "VERSION", "ENTRY POINT", "PROBLEMS"]
        if trust is not None:
            headers += ["VERIFICATION", "TRUST"]
        rows = []
        for where, c, kind in listed:
            row = [
                c.label,
                kind,
                c.distribution,
                c.version,
                f"{c.value} (registry)" if c.declared else c.value,
                ", ".join(p.code for p in where.problems_for(c)) or "-",
            ]
            if trust is not None:
                verification, label = _decided(c, kind, trust)
                row += [verification or "-", label or "-"]
            rows.append(row)
        lines = table(headers, rows, colour)
        lines.append("")
    drivers, hosted = len(found.candidates), len(plugins.candidates)
    problems = (*found.problems, *plugins.problems)
    for problem in problems:
        fix = _fix(problem)
        lines += [f"  {problem.code}: {problem.message}", *([f"    fix: {fix}"] if fix else [])]
    summary = (
        f"{drivers} driver{'' if drivers == 1 else 's'}, {hosted} host "
        f"plugin{'' if hosted == 1 else 's'}, {len(problems)} "
        f"problem{'' if len(problems) == 1 else 's'}."
    )
    if trust is None:
        summary += " Not verified (--no-verify): `mcs-host verify` says what a load would run."
    else:
        summary += f" Registries: {', '.join(registries) if registries else 'none'}."
    lines.append(summary)
    return "\n".join(lines)


COLOURED = frozenset({"STATUS", "VERIFICATION"})
"""The columns whose words :func:`~mcs_host.cli.console.paint_word` colours."""


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], colour: bool = False) -> list[str]:
    """Left-aligned columns two spaces apart, without trailing blanks; with ``colour``, the
    status words of the :data:`COLOURED` columns in their colours."""
    widths = [max(len(r[i]) for r in (headers, *rows)) for i in range(len(headers))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (headers, *rows)
    ]
    if not colour:
        return lines
    from .console import paint_word

    painted = {i for i, header in enumerate(headers) if header in COLOURED}
    for n, row in enumerate(rows, start=1):
        cells = [
            paint_word(cell, True) + " " * (width - len(cell))
            if i in painted
            else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines[n] = "  ".join(cells).rstrip()
    return lines
