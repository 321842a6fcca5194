"""Routing: the final name of every mounted tool, and the table calls are routed by.

Tool names are never resolved first-wins: a name two drivers share becomes ``<label>__<name>``
for both (with ``namespace="always"``, every name does), a name providers would refuse is
namespaced and cleaned to ``[A-Za-z0-9_-]{1,64}``, and two final names that still meet both
get a hash of their label and name. :class:`Routing` keeps these names as drivers are mounted
one at a time and renames only the tools a new mount affects, so mounting n drivers takes
O(n) steps, not O(n²); :meth:`Routing.table` is an immutable snapshot of it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .validation import ArgumentValidator

if TYPE_CHECKING:
    from mcs_host.contract import Tool

__all__ = ["tool_name"]  # Route, Routing and Table are the orchestrator's

_VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_INVALID_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(name: str) -> str:
    """``name`` made valid for provider APIs: other characters become ``_``; past 64
    characters it is cut and ends with a hash of the whole, so it stays unique."""
    cleaned = _INVALID_CHARS.sub("_", name) or "_"
    if len(cleaned) <= 64:
        return cleaned
    return f"{cleaned[:55]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"


@dataclass(frozen=True, slots=True)
class Route:
    label: str
    driver: Any
    tool: Tool
    """The tool as its driver names it."""
    validator: ArgumentValidator
    """Its arguments' JSON Schema, compiled once when it is mounted."""


@dataclass(frozen=True, slots=True)
class Table:
    """An immutable snapshot of what is mounted; replaced whole when mounts change."""

    tools: tuple[Tool, ...]
    routes: Mapping[str, Route]
    chained: tuple[tuple[str, Any], ...]
    labels: tuple[str, ...]
    aliases: Mapping[str, str]
    """A driver's own tool name that providers would refuse (``weather.get``), held by one
    tool only, and the name it is offered under: a model told the tool's own name calls it
    by that name."""
    known: frozenset[str]
    """The names a call may give: the offered ones and the aliases."""


_Key = tuple[str, str]
"""A mounted tool: its driver's label and the name its driver gives it."""


class Routing:
    """The names and routes of mounted tools, kept as drivers are mounted (not thread-safe:
    the orchestrator changes it under its lock and publishes :meth:`table` snapshots)."""

    __slots__ = (
        "_bases",
        "_chained",
        "_entries",
        "_finals",
        "_groups",
        "_labels",
        "_owners",
        "_routes",
        "_tools",
        "always",
    )

    def __init__(self, always: bool) -> None:
        self.always = always
        """Whether every name is namespaced (``namespace="always"``)."""
        self._entries: dict[_Key, tuple[Any, Tool, ArgumentValidator]] = {}
        self._owners: dict[str, list[_Key]] = {}  # a driver's tool name -> who has it
        self._bases: dict[_Key, str] = {}  # the name before hashing clashes
        self._groups: dict[str, list[_Key]] = {}  # a base name -> who has it
        self._finals: dict[_Key, str] = {}
        self._tools: dict[_Key, Tool] = {}  # under its final name, in mount order
        self._routes: dict[str, Route] = {}
        self._chained: list[tuple[str, Any]] = []
        self._labels: list[str] = []

    def add(
        self,
        label: str,
        driver: object,
        tools: Sequence[tuple[Tool, ArgumentValidator]] | None,
    ) -> None:
        """Mount ``driver`` under ``label`` with its ``tools`` (``None``: a standalone
        MCSDriver, chained); the tools it shares a name with are renamed."""
        self._labels.append(label)
        if tools is None:
            self._chained.append((label, driver))
            return
        changed: dict[_Key, str | None] = {}
        for tool, validator in tools:
            key = (label, tool.name)
            self._entries[key] = (driver, tool, validator)
            owners = self._owners.setdefault(tool.name, [])
            owners.append(key)
            if len(owners) == 2:  # the first owner's name is shared now
                self._rebase(owners[0], changed)
            self._rebase(key, changed)
        for old in changed.values():
            if old is not None:
                del self._routes[old]
        for key in changed:
            final = self._finals[key]
            driver_of, tool, validator = self._entries[key]
            self._routes[final] = Route(key[0], driver_of, tool, validator)
            renamed = tool if final == tool.name else tool.model_copy(update={"name": final})
            self._tools[key] = renamed

    def table(self) -> Table:
        """What is mounted now, as an immutable snapshot."""
        aliases = {
            name: final
            for (_, name), final in self._finals.items()
            if not _VALID_NAME.match(name) and len(self._owners[name]) == 1
        }
        return Table(
            tuple(self._tools.values()),
            dict(self._routes),
            tuple(self._chained),
            tuple(self._labels),
            aliases,
            frozenset((*self._routes, *aliases)),
        )

    def _base(self, key: _Key) -> str:
        label, name = key
        if self.always or len(self._owners[name]) > 1 or not _VALID_NAME.match(name):
            return tool_name(f"{label}__{name}")
        return name

    def _rebase(self, key: _Key, changed: dict[_Key, str | None]) -> None:
        base = self._base(key)
        old = self._bases.get(key)
        if old == base:
            return
        if old is not None:
            group = self._groups[old]
            group.remove(key)
            if group:
                self._refinal(group[0], changed)
            else:
                del self._groups[old]
        self._bases[key] = base
        group = self._groups.setdefault(base, [])
        group.append(key)
        if len(group) == 2:
            self._refinal(group[0], changed)
        self._refinal(key, changed)

    def _refinal(self, key: _Key, changed: dict[_Key, str | None]) -> None:
        """Give ``key`` its base name, or (when another tool has that base too) the base
        with a hash of its label and name."""
        base = self._bases[key]
        if len(self._groups[base]) == 1:
            final = base
        else:
            label, name = key
            digest = hashlib.sha256(f"{label}\0{name}".encode()).hexdigest()[:8]
            final = f"{tool_name(f'{label}__{name}')[:55]}_{digest}"
        old = self._finals.get(key)
        if old != final:
            changed.setdefault(key, old)
            self._finals[key] = final
