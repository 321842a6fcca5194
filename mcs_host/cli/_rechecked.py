"""What ``mcs-host verify --provenance`` adds: every provenance the registries store, verified
again offline, as text and as the ``provenance`` list of the verify document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._listing import table

if TYPE_CHECKING:
    from mcs_host.trust.attested import Rechecked

    from .documents import RecheckedProvenance

__all__: list[str] = []


def rechecked_json(checked: Sequence[Rechecked]) -> list[RecheckedProvenance]:
    """Each stored provenance verified again, as the verify document lists it."""
    return [
        {
            "distribution": c.distribution,
            "version": c.version,
            "filename": c.filename,
            "publisher": c.publisher,
            "path": c.path,
            "ok": c.ok,
            "problem": c.problem,
            "message": c.message,
            "fix": c.fix,
        }
        for c in checked
    ]


def rechecked_text(checked: Sequence[Rechecked]) -> str:
    """A table of each stored provenance verified again, then what failed with its fix."""
    lines = ["", "Provenance stored with the registries, verified again offline:"]
    if not checked:
        return "\n".join([*lines, "  no pin carries provenance."])
    rows = [
        [c.distribution, c.version, c.filename, c.publisher, c.problem or "verified"]
        for c in checked
    ]
    lines += table(["DISTRIBUTION", "VERSION", "FILE", "PUBLISHER", "RESULT"], rows)
    lines.append("")
    for c in checked:
        lines.append(f"{c.distribution} {c.version}: {c.problem or 'verified'}: {c.message}")
        lines += [f"  fix: {c.fix}"] if c.fix else []
    good = sum(c.ok for c in checked)
    lines.append(f"{good} of {len(checked)} stored provenances verified again.")
    return "\n".join(lines)
