"""What the commands that load say when the stack is not what the user asked for: a label
that did not mount because the configuration does not name it (with what verifying it would
decide), a label nothing has (with the labels there are), a refusal said once, tool names
that clash and were changed, and a tool the stack does not have (with the names it may be).

Each function reads what a load left (its configuration, report and stack) and returns
lines or values; the commands print them. Nothing here imports a driver: verifying a label
reads files only (:func:`mcs_host.loading.verify.verify_installed`)."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcs_host.loading.config_schema import HostConfig
    from mcs_host.loading.records import LoadRecord, LoadReport
    from mcs_host.orchestration.orchestrator import Orchestrator

__all__: list[str] = []  # the commands' own

_NOTHING = ": no driver has this label (installed or configured)"
"""The end of the host's error for a label asked for that no mount has."""
_SUGGESTED = 5
"""The most names a suggestion offers."""


@dataclass(frozen=True, slots=True)
class Unplaced:
    """A label asked for that no mount has: why, and what verifying it would decide."""

    label: str
    error: str
    """Why no mount has it."""
    refusal: tuple[str, str] | None = None
    """``(reason, message)``: verifying the installed driver would refuse it too."""
    distribution: str | None = None

    @property
    def whole(self) -> str:
        """The error and the refusal, in one line (as ``--json`` gives it)."""
        if self.refusal is None:
            return self.error
        return f"{self.error}; {self.refused}"

    @property
    def refused(self) -> str:
        """What verifying it decided, when it refuses it."""
        if self.refusal is None:
            return ""
        return f"named there, it would still be refused: {self.refusal[0]}: {self.refusal[1]}"


def unplaced(
    config: HostConfig,
    labels: Sequence[str],
    report: LoadReport,
    search: Sequence[str] | None,
) -> tuple[Unplaced, ...]:
    """Each label of ``labels`` that no record of ``report`` has, explained: installed but
    not named by a configuration that mounts only what it names (and what verifying it
    decides), or had by nothing (and the labels there are)."""
    recorded = {r.label for r in (*report.records, *report.plugins)}
    missing = [label for label in dict.fromkeys(labels) if label not in recorded]
    if not missing:
        return ()
    from mcs_host.discovery import discover
    from mcs_host.loading.verify import verify_installed

    found = discover(search)
    verified = {r.label: r for r in verify_installed(config, search, missing).records}
    explained = []
    for label in missing:
        record = verified.get(label)
        candidates = found.get(label)
        if record is None and not candidates:
            known = {c.label for c in found.candidates} | set(config.drivers)
            known |= set(config.mcp_servers) | recorded
            explained.append(Unplaced(label, _unknown_label(label, known)))
            continue
        if config.autoload:  # every installed driver has a mount then: not this case
            explained.append(Unplaced(label, f"{label}{_NOTHING}"))
            continue
        candidate = record.verification.candidate if record is not None else candidates[0]
        what = f"{candidate.distribution} {candidate.version}"
        where = config.source or "the configuration"
        error = (
            f"{label}: installed ({what}), but not mounted: {where} names the drivers it "
            f"mounts (so autoload is off), and not {label}; add a [drivers.{label}] table to "
            "it, or autoload = true to mount every installed driver"
        )
        refusal = None
        if record is not None and not record.loadable:
            verification = record.verification
            refusal = record.refusal or (verification.reason, verification.message)
        explained.append(Unplaced(label, error, refusal, candidate.distribution))
    return tuple(explained)


def _unknown_label(label: str, known: Iterable[str]) -> str:
    """The error for ``label`` that nothing has, naming the ``known`` labels."""
    names = sorted(known)
    if not names:
        return (
            f"{label}: no driver or MCP server has this label, and none is installed or "
            "configured (`mcs-host list` shows what is installed)"
        )
    close = difflib.get_close_matches(label, names, _SUGGESTED, 0.6)
    guess = f"; did you mean {' or '.join(close)}?" if close else ""
    return (
        f"{label}: no driver or MCP server has this label (installed or configured); the "
        f"labels are {', '.join(names)}{guess}"
    )


def with_unplaced(errors: Sequence[str], explained: Sequence[Unplaced]) -> tuple[str, ...]:
    """``errors`` with the host's error for each label of ``explained`` replaced by its
    explanation (in its place; added when the host had none)."""
    by_error = {f"{u.label}{_NOTHING}": u.whole for u in explained}
    replaced = [by_error.pop(e, e) for e in errors]
    return (*replaced, *by_error.values())


def said_once(errors: Sequence[str], records: Iterable[LoadRecord]) -> list[str]:
    """``errors`` as printed under the records' lines: a refusal's message, printed once
    with its record, is not printed again in an error that repeats it."""
    messages = sorted(
        {r.message for r in records if r.status in ("rejected", "failed") and r.message},
        key=len,
        reverse=True,
    )
    shortened = []
    for error in errors:
        said = next((m for m in messages if error.endswith(f": {m}")), None)
        shortened.append(error if said is None else error[: -len(said)] + "as said above")
    return shortened


def clashes(stack: Orchestrator, config: HostConfig) -> list[str]:
    """One line per tool name that two or more mounts share, naming the mounts and the
    names the stack gives them instead (none with ``namespace = "always"``: every name is
    prefixed then, as asked)."""
    if config.namespace == "always":
        return []
    by_own: dict[str, list[tuple[str, str]]] = {}
    for tool in stack.list_tools():
        label, own = stack.route(tool.name)
        by_own.setdefault(own, []).append((label, tool.name))
    lines = []
    for own, named in sorted(by_own.items()):
        if len(named) < 2 or all(name == own for _, name in named):
            continue
        labels = " and ".join(label for label, _ in named)
        names = ", ".join(name for _, name in named)
        lines.append(
            f"note: the tool name {own} is offered by {labels}, so each is renamed: {names}"
        )
    return lines


def unknown_tool(name: str, stack: Orchestrator) -> str:
    """Why ``name`` cannot be called: the stack has no such tool; the names it may be (those
    that end with it, as a clash renamed them; else the closest), else every name it has."""
    names = [tool.name for tool in stack.list_tools()]
    if not names:
        return f"unknown tool {name!r}: the stack has no tools"
    ending = [n for n in names if n.endswith(f"__{name}")]
    if ending:
        return (
            f"unknown tool {name!r}; did you mean {' or '.join(ending)}? (renamed: two mounts "
            "offer a tool of that name)"
        )
    close = difflib.get_close_matches(name, names, _SUGGESTED, 0.6)
    if close:
        return f"unknown tool {name!r}; did you mean {' or '.join(close)}?"
    return f"unknown tool {name!r}; the tools are {', '.join(sorted(names))}"


def search_path(path: Sequence[os.PathLike[str]] | None) -> list[str] | None:
    """``--path`` directories as discovery takes them (``None``: ``sys.path``)."""
    return [os.fspath(p) for p in path] if path else None
