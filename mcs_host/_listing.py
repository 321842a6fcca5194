"""What ``mcs-host list`` prints, kept free of typer and pydantic so the command starts fast."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .discovery import Candidate, Discovery

__all__ = ["render_listing", "table"]


def render_listing(found: Discovery, as_json: bool) -> str:
    """The ``list`` output for ``found``: JSON, or a table with the problems below it."""
    return json.dumps(_listing_json(found), indent=2) if as_json else _listing_text(found)


def _listing_json(found: Discovery) -> dict[str, Any]:
    return {
        "group": found.group,
        "path": list(found.path),
        "drivers": [_candidate_json(found, c) for c in found.candidates],
        "problems": [
            {
                "code": p.code,
                "message": p.message,
                "labels": list(p.labels),
                "distributions": list(p.distributions),
            }
            for p in found.problems
        ],
    }


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


def _listing_text(found: Discovery) -> str:
    if not found.candidates:
        lines = [
            f"No drivers in entry point group {found.group!r} "
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
        noun = "driver" if len(found.candidates) == 1 else "drivers"
        lines.append("")
        lines.append(f"{len(found.candidates)} {noun}, {len(found.problems)} problems.")
    for problem in found.problems:
        lines.append(f"  {problem.code}: {problem.message}")
    return "\n".join(lines)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in (headers, *rows)) for i in range(len(headers))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (headers, *rows)
    ]
