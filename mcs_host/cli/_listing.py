"""What ``mcs-host list`` prints, kept free of typer and pydantic so the command starts fast."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mcs_host.discovery import Candidate, Discovery

__all__ = ["render_listing", "table"]


def render_listing(found: Discovery, as_json: bool, plugins: Discovery | None = None) -> str:
    """The ``list`` output for the drivers ``found`` and the host ``plugins``: JSON, or
    tables with the problems below them."""
    if as_json:
        return json.dumps(_listing_json(found, plugins), indent=2)
    text = _listing_text(found)
    if plugins is not None and (plugins.candidates or plugins.problems):
        text += "\n\nHost plugins (verified and loaded like drivers):\n" + _listing_text(
            plugins, "plugin"
        )
    return text


def _listing_json(found: Discovery, plugins: Discovery | None) -> dict[str, Any]:
    return {
        "group": found.group,
        "path": list(found.path),
        "drivers": [_candidate_json(found, c) for c in found.candidates],
        "problems": _problems_json(found),
        "plugins": [_candidate_json(plugins, c) for c in plugins.candidates] if plugins else [],
        "plugin_problems": _problems_json(plugins) if plugins else [],
    }


def _problems_json(found: Discovery) -> list[dict[str, Any]]:
    return [
        {
            "code": p.code,
            "message": p.message,
            "labels": list(p.labels),
            "distributions": list(p.distributions),
        }
        for p in found.problems
    ]


def _candidate_json(found: Discovery, candidate: Candidate) -> dict[str, Any]:
    return {
        "label": candidate.label,
        "distribution": candidate.distribution,
        "version": candidate.version,
        "entry_point": candidate.value,
        "location": candidate.location,
        "metadata_path": candidate.metadata_path,
        "problems": [p.code for p in found.problems_for(candidate)],
    }


def _listing_text(found: Discovery, noun: str = "driver") -> str:
    if not found.candidates:
        lines = [
            f"No {noun}s in entry point group {found.group!r} "
            f"({len(found.path)} search path entries)."
        ]
    else:
        rows = [
            [
                c.label,
                c.distribution,
                c.version,
                c.value,
                ", ".join(p.code for p in found.problems_for(c)) or "ok",
            ]
            for c in found.candidates
        ]
        lines = table(["LABEL", "DISTRIBUTION", "VERSION", "ENTRY POINT", "STATUS"], rows)
        counted = noun if len(found.candidates) == 1 else f"{noun}s"
        lines.append("")
        lines.append(f"{len(found.candidates)} {counted}, {len(found.problems)} problems.")
    for problem in found.problems:
        lines.append(f"  {problem.code}: {problem.message}")
    return "\n".join(lines)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in (headers, *rows)) for i in range(len(headers))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (headers, *rows)
    ]
