"""What ``serve`` served at its last start, and what changed since: a client that cached the
tool list (and the user who approved it) is told on stderr when a tool was added, removed,
renamed (the same driver's tool under another name, as a new collision prefixes it) or given
other parameters.

The record is kept per configuration (its file and the labels asked for) in the host's state
directory, ``served/<key>.json``: the name of each tool served, its mount and own name, and a
digest of its parameters. A record that cannot be read is started again; one that cannot be
written is said in one line, and the server serves all the same.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence

from mcs_host._files import STATE_LIMIT, InputError, loads_json, read_bytes
from mcs_host._places import state_directory

__all__ = ["Served", "changes", "served_by", "write_served"]

Served = dict[str, tuple[str, str, str]]
"""Each tool's served name -> (mount label, the driver's own name, digest of its parameters)."""


def served_by(tools: Iterable[tuple[str, str, str, object]]) -> Served:
    """The record of ``tools``: (served name, label, own name, parameters as JSON data)."""
    return {name: (label, own, _digest(parameters)) for name, label, own, parameters in tools}


def record_path(source: str | None, labels: Sequence[str]) -> str:
    """The record of a server with the configuration ``source`` asked for ``labels``."""
    key = json.dumps([os.path.abspath(source) if source else None, sorted(labels)])
    name = hashlib.sha256(key.encode()).hexdigest()[:24]
    return os.path.join(state_directory(), "served", f"{name}.json")


def read_served(path: str) -> Served | None:
    """The record at ``path``; ``None`` when there is none or it cannot be read whole."""
    try:
        document = loads_json(read_bytes(path, "served tools", STATE_LIMIT), path)
    except (OSError, InputError, UnicodeDecodeError, ValueError):
        return None
    tools = document.get("tools") if isinstance(document, dict) else None
    if not isinstance(tools, dict):
        return None
    record: Served = {}
    for name, entry in tools.items():
        if not (
            isinstance(entry, list) and len(entry) == 3 and all(isinstance(e, str) for e in entry)
        ):
            return None
        record[str(name)] = (entry[0], entry[1], entry[2])
    return record


def write_served(path: str, record: Served) -> str | None:
    """Keep ``record`` at ``path``; why it could not be kept, or ``None``."""
    from mcs_host._files import write_atomic

    text = json.dumps({"tools": {k: list(v) for k, v in sorted(record.items())}}, indent=1)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        write_atomic(path, text + "\n")
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    return None


def changes(before: Mapping[str, tuple[str, str, str]], now: Served) -> list[str]:
    """What changed from ``before`` to ``now``, one phrase per kind: ``added a, b (label)``,
    ``removed ...``, ``renamed old -> new``, ``changed the parameters of ...``."""
    origin_before = {(label, own): name for name, (label, own, _) in before.items()}
    origin_now = {(label, own): name for name, (label, own, _) in now.items()}
    renamed = sorted(
        (old, origin_now[origin])
        for origin, old in origin_before.items()
        if origin in origin_now and origin_now[origin] != old
    )
    moved_from = {old for old, _ in renamed}
    moved_to = {new for _, new in renamed}
    added = [n for n in sorted(now) if n not in before and n not in moved_to]
    removed = [n for n in sorted(before) if n not in now and n not in moved_from]
    changed = [
        name
        for name in sorted(now)
        if name in before and before[name][:2] == now[name][:2] and before[name][2] != now[name][2]
    ]
    phrases = []
    if added:
        phrases.append("added " + _by_label(added, now))
    if removed:
        phrases.append("removed " + _by_label(removed, before))
    if renamed:
        phrases.append("renamed " + ", ".join(f"{old} -> {new}" for old, new in renamed))
    if changed:
        phrases.append("changed the parameters of " + ", ".join(changed))
    return phrases


def _by_label(names: Sequence[str], record: Mapping[str, tuple[str, str, str]]) -> str:
    """``names`` grouped by the mount they come from: ``a, b (csv), c (files)``."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(record[name][0], []).append(name)
    return ", ".join(f"{', '.join(group)} ({label})" for label, group in groups.items())


def _digest(parameters: object) -> str:
    text = json.dumps(parameters, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
