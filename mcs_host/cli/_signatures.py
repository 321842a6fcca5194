"""A tool's schema as a person reads and writes it: its signature
(``read_csv_head(file: str, rows: int = 5)``), and ``KEY=VALUE`` words as its
arguments, each value read as the schema says."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcs_host.contract import Tool

__all__ = ["arguments_from_words", "signature"]

_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
    "null": "None",
}
"""JSON Schema types as a Python reader names them."""


def signature(tool: Tool) -> str:
    """``name(a: str, b: int = 5, c: list | None = None)``: the required parameters first."""
    schema = tool.input_schema()
    properties: Mapping[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    ordered = sorted(properties, key=lambda name: name not in required)
    parts = []
    for name in ordered:
        prop = properties[name] if isinstance(properties[name], Mapping) else {}
        kind = _type_name(prop)
        if name in required:
            parts.append(f"{name}: {kind}")
        elif "default" in prop:
            parts.append(f"{name}: {kind} = {prop['default']!r}")
        else:
            parts.append(f"{name}: {kind} | None = None")
    return f"{tool.name}({', '.join(parts)})"


def _type_name(prop: Mapping[str, Any]) -> str:
    """A property's type as a Python reader names it (``str``, ``int | None``, ``any``)."""
    kind = prop.get("type")
    if isinstance(kind, str):
        return _TYPES.get(kind, kind)
    if isinstance(kind, list):
        return " | ".join(_TYPES.get(str(k), str(k)) for k in kind) or "any"
    if "enum" in prop and isinstance(prop["enum"], list):
        return " | ".join(json.dumps(v) for v in prop["enum"]) or "any"
    for key in ("anyOf", "oneOf"):
        options = prop.get(key)
        if isinstance(options, list) and options:
            names = [_type_name(o) for o in options if isinstance(o, Mapping)]
            return " | ".join(dict.fromkeys(names)) or "any"
    return "any"


def arguments_from_words(words: Sequence[str], schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """``KEY=VALUE`` words as a call's arguments, each value read as the tool's schema says:
    a string property takes the text as it is, any other (or a key the schema does not
    know) takes it as JSON when it is JSON, else as text. Raises ``ValueError`` naming the
    word at fault."""
    properties: Mapping[str, Any] = (schema or {}).get("properties") or {}
    arguments: dict[str, Any] = {}
    for word in words:
        key, sep, raw = word.partition("=")
        if not sep or not key:
            raise ValueError(f"{word!r}: give KEY=VALUE")
        prop = properties.get(key)
        kind = prop.get("type") if isinstance(prop, Mapping) else None
        if kind == "string":
            arguments[key] = raw
            continue
        try:
            arguments[key] = json.loads(raw)
        except ValueError:
            if kind in ("integer", "number", "boolean", "array", "object"):
                raise ValueError(f"{word!r}: {key} takes {_TYPES[kind]}, not {raw!r}") from None
            arguments[key] = raw
    return arguments
