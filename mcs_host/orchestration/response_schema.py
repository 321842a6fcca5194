"""The response schema: every answer the JSON protocol reads, as one JSON Schema.

For constrained decoding (OpenAI's ``response_format`` with ``strict``, llama.cpp's and
vLLM's ``json_schema`` or guided JSON, Ollama's ``format``), where a model without native
tool calling can write only what a schema accepts. The schema is an object, as OpenAI wants
its root, with one key ``response`` holding one of:

- a call of one offered tool, one branch per tool: ``{"tool": NAME, "arguments": {...}}``,
  the name a constant and the tool's argument schema inlined;
- several calls: a non-empty array of such calls;
- the final answer: ``{"final": "..."}``.

Detection reads a response that is exactly such an object by its structure, before any text
format (:func:`.detection.detect`), so each instance is the calls it names, or the final
answer (``Detection.final``). For OpenAI's strict mode each tool's schema is rewritten where
the rewrite accepts only arguments the tool accepts: every object closed (one that does not
say whether it takes other keys takes only those it lists), every property required, an
optional one also taking ``null`` (which validation reads as not given), annotations such as
``default`` dropped. A tool whose schema has what strict mode cannot express (a free-form
object, ``oneOf``, ``minLength``...) keeps its own schema: the schema still holds for other
consumers, and :attr:`ResponseSchema.strict` is false with the reasons. A tool whose
``$ref`` refers back to itself is left out, and named.

Every schema it holds is in a form the constrained-decoding engines all compile (outlines-core,
vLLM's ``outlines`` backend; llguidance, its ``guidance`` backend; llama.cpp's converter), with
what it accepts unchanged: a value of any type (``{}``, ``true``, or a schema with only a
``description``, which outlines-core refuses) lists every JSON type, and a string ``format``
outside :data:`_FORMATS` is dropped (validation does not check formats; the engines refuse
the ones they do not know). What a tool's own schema says that an engine does not implement
(``uniqueItems``, ``not``... in llguidance) stays: that engine refuses the schema.

One module: the schema and each rewrite of a tool's schema in it (``$ref`` written out,
strict, portable, within the size limits) read the same keywords and change together.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcs_host.contract import Tool

__all__ = ["ResponseSchema", "response_schema"]

NAME = "mcs_response"
"""The schema's name where a provider asks for one (OpenAI: ``[A-Za-z0-9_-]{1,64}``)."""


@dataclass(frozen=True, slots=True)
class ResponseSchema:
    """The response schema of a set of tools, and whether OpenAI's strict mode takes it."""

    schema: Mapping[str, Any]
    """The JSON Schema: Ollama's ``format``, llama.cpp's and vLLM's ``json_schema``."""
    strict: bool
    """It meets OpenAI's strict rules: pass ``strict: true`` with it."""
    problems: tuple[str, ...] = ()
    """Why it is not strict, and each tool it leaves out, one line each."""
    name: str = NAME
    """The schema's name where a provider asks for one (OpenAI's ``json_schema.name``)."""

    def json_schema(self) -> dict[str, Any]:
        """OpenAI's ``json_schema`` object: ``name``, ``schema`` (a copy) and ``strict``."""
        return {
            "name": self.name,
            "schema": copy.deepcopy(dict(self.schema)),
            "strict": self.strict,
        }

    def response_format(self) -> dict[str, Any]:
        """OpenAI Chat Completions' ``response_format`` (the Responses API takes
        ``text={"format": {"type": "json_schema", **json_schema()}}``)."""
        return {"type": "json_schema", "json_schema": self.json_schema()}


def response_schema(tools: Sequence[Tool]) -> ResponseSchema:
    """The response schema of ``tools`` (an orchestrator's tools, under their final names)."""
    left_out: list[str] = []
    unstrict: list[str] = []
    calls: dict[str, Any] = {}
    for tool in tools:
        try:
            arguments = _inlined(tool.input_schema())
        except _UnwritableError as exc:
            left_out.append(f"tool {tool.name!r} is left out: {exc}")
            continue
        try:
            arguments = _strict(arguments, "")
        except _NotStrictError as exc:
            unstrict.append(f"tool {tool.name!r}: {exc}")
            arguments = _portable(arguments)
        calls[tool.name] = {
            "type": "object",
            "properties": {"tool": {"type": "string", "const": tool.name}, "arguments": arguments},
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        }
    branches: list[dict[str, Any]] = [{"$ref": f"#/$defs/{name}"} for name in calls]
    if branches:
        several = {
            "type": "array",
            "description": "Several calls, run in order.",
            "items": {"anyOf": [dict(b) for b in branches]},
            "minItems": 1,
        }
        response: dict[str, Any] = {"anyOf": [*branches, several, _FINAL]}
    else:
        response = dict(_FINAL)
    response["description"] = _RESPONSE
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"response": response},
        "required": ["response"],
        "additionalProperties": False,
    }
    if calls:
        schema["$defs"] = calls
    unstrict += _over_limits(schema)
    return ResponseSchema(copy.deepcopy(schema), not unstrict, (*left_out, *unstrict))


def strict_arguments(schema: Mapping[str, Any]) -> dict[str, Any] | str:
    """A tool's argument ``schema`` rewritten for OpenAI's strict mode, accepting only what
    ``schema`` accepts (as in the response schema); or why strict mode cannot express it."""
    try:
        return _strict(_inlined(schema), "")
    except (_UnwritableError, _NotStrictError) as exc:
        return str(exc)


_RESPONSE = "A call of one tool, several calls, or the final answer when no tool is needed."
_FINAL: dict[str, Any] = {
    "type": "object",
    "properties": {"final": {"type": "string", "description": "The answer for the user."}},
    "required": ["final"],
    "additionalProperties": False,
}


# -- $ref written out ----------------------------------------------------------------------


class _UnwritableError(Exception):
    """A tool schema that cannot be written out whole (a ``$ref`` that refers back)."""


_VALUES = frozenset({"const", "enum", "default", "examples"})
"""Keywords whose value is data, not a schema."""
_NODES = 20_000
"""Most schema nodes a tool's schema may grow to once its ``$ref``s are written out."""


def _inlined(root: Mapping[str, Any]) -> dict[str, Any]:
    """``root`` with each local ``$ref`` replaced by its target, resolved as validation
    resolves it (against ``root``, sibling keywords winning, a missing target empty)."""
    budget = [_NODES]

    def walk(node: Any, trail: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [walk(item, trail) for item in node]
        if not isinstance(node, Mapping):
            return node
        budget[0] -= 1
        if budget[0] < 0:
            raise _UnwritableError(
                f"its schema grows past {_NODES} nodes once its $refs are written out"
            )
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            if ref in trail:
                raise _UnwritableError(f"$ref {ref!r} refers back to itself")
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return walk({**_target(root, ref), **rest}, (*trail, ref))
        return {
            key: value if key in _VALUES else walk(value, trail)
            for key, value in node.items()
            if key not in ("$defs", "definitions")
        }

    return walk(root, ())  # type: ignore[no-any-return]


def _target(root: Mapping[str, Any], ref: str) -> Mapping[str, Any]:
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part, {}) if isinstance(target, Mapping) else {}
    return target if isinstance(target, Mapping) else {}


# -- OpenAI's strict mode ------------------------------------------------------------------


class _NotStrictError(Exception):
    """What in a tool's schema OpenAI's strict mode cannot express exactly."""


_KEPT = frozenset(
    {
        "type", "description", "title", "enum", "const", "anyOf", "properties", "required",
        "additionalProperties", "items", "minItems", "maxItems", "pattern", "minimum",
        "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    }
)  # fmt: skip
"""What strict mode takes (OpenAI's Structured Outputs, supported schemas)."""
_DROPPED = frozenset(
    {
        "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly", "$schema",
        "$id", "$anchor", "contentMediaType", "contentEncoding", "format",
    }
)  # fmt: skip
"""Annotations: no constraint validation checks, so leaving them out accepts no more."""
_FORMATS = frozenset({"date-time", "time", "date", "email", "uuid"})
"""The string formats kept: those strict mode takes that outlines-core and llguidance take too
(strict mode also takes ``duration``, ``hostname``, ``ipv4`` and ``ipv6``, which
outlines-core refuses). Others are dropped."""
_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"))
_TYPE_NAMES = frozenset({"null", "boolean", "integer", "number", "string", "array", "object"})


def _strict(schema: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``schema`` as strict mode wants it, accepting only what ``schema`` accepts; or
    :class:`_NotStrictError` saying what stops that."""
    at = f"argument {where!r}" if where else "its arguments"
    if not isinstance(schema, Mapping):
        raise _NotStrictError(f"{at}: its schema is not an object")
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _KEPT or (key == "format" and value in _FORMATS):
            out[key] = value
        elif key not in _DROPPED:
            raise _NotStrictError(f"{at}: {key} is not supported in strict mode")
    if "anyOf" in out:
        if not isinstance(out["anyOf"], list) or not out["anyOf"]:
            raise _NotStrictError(f"{at}: anyOf is not a list of schemas")
        out["anyOf"] = [_strict(branch, where) for branch in out["anyOf"]]
    if "type" not in out and "anyOf" not in out:
        kinds = _kinds([out["const"]] if "const" in out else out.get("enum", []))
        if kinds is None:
            raise _NotStrictError(f"{at}: takes a value of any type")
        out["type"] = kinds[0] if len(kinds) == 1 else kinds
    kinds = out.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if not isinstance(kinds, list) or not set(kinds) <= _TYPE_NAMES:
        raise _NotStrictError(f"{at}: type {out['type']!r} is not a list of JSON types")
    if "object" in kinds:
        out.update(_strict_object(out, where, at))
    if "array" in kinds:
        items = out.get("items")
        if not isinstance(items, Mapping):
            raise _NotStrictError(f"{at}: an array without one schema for its items")
        out["items"] = _strict(items, f"{where}[]" if where else "[]")
    return out


def _strict_object(schema: Mapping[str, Any], where: str, at: str) -> dict[str, Any]:
    extra = schema.get("additionalProperties")
    properties = schema.get("properties", {} if extra is False else None)
    if not isinstance(properties, Mapping) or (not properties and extra is not False):
        raise _NotStrictError(f"{at}: an object whose keys are not listed")
    if extra not in (None, False):
        raise _NotStrictError(f"{at}: additionalProperties other than false")
    required = set(schema.get("required") or ())
    unknown = sorted(str(name) for name in required - properties.keys())
    if unknown:
        raise _NotStrictError(f"{at}: requires {', '.join(unknown)}, which it does not describe")
    written: dict[str, Any] = {}
    for name, sub in properties.items():
        if not isinstance(sub, Mapping):
            raise _NotStrictError(f"{at}: the schema of {name!r} is not an object")
        inner = f"{where}.{name}" if where else name
        converted = _strict(sub, inner)
        written[name] = converted if name in required else _optional(converted, sub)
    return {"properties": written, "required": list(written), "additionalProperties": False}


def _optional(schema: dict[str, Any], original: Mapping[str, Any]) -> dict[str, Any]:
    """An optional property's schema, required in strict mode: ``null`` stands for not
    given, and its description says so (with the default, if the tool names one). One
    that takes ``null`` already is left as it is: its ``null`` reaches the tool."""
    if _takes_null(schema):
        return schema
    if "default" in original:
        note = f"Null for the default ({json.dumps(original['default'], ensure_ascii=False)})."
    else:
        note = "Null to leave it out."
    description = str(schema.get("description") or "").rstrip()
    described = f"{description} {note}" if description else note
    kind = schema.get("type")
    if (
        isinstance(kind, str)
        and kind not in ("object", "array")
        and not (schema.keys() & {"enum", "const", "anyOf"})
    ):
        return {**schema, "type": [kind, "null"], "description": described}
    inner = {k: v for k, v in schema.items() if k != "description"}
    if "anyOf" in inner and inner.keys() <= {"anyOf", "title"}:
        return {**inner, "anyOf": [*inner["anyOf"], _NULL], "description": described}
    return {"anyOf": [inner, _NULL], "description": described}


_NULL = {"type": "null"}


def _takes_null(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return "enum" not in schema or None in schema["enum"]
    if "const" in schema:
        return schema["const"] is None
    return any(_takes_null(b) for b in schema.get("anyOf") or () if isinstance(b, Mapping))


def _kinds(values: Sequence[Any]) -> list[str] | None:
    """The JSON types of an ``enum``'s or ``const``'s values; ``None`` for none or a
    container (no type strict mode can name)."""
    kinds: list[str] = []
    for value in values:
        if value is None:
            kind = "null"
        else:
            kind = next((name for cls, name in _JSON_TYPES if isinstance(value, cls)), "")
            if not kind:
                return None
        if kind not in kinds:
            kinds.append(kind)
    if "integer" in kinds and "number" in kinds:
        kinds.remove("integer")
    return kinds or None


# -- the form every engine takes -----------------------------------------------------------

_ANY = ("string", "number", "boolean", "object", "array", "null")
"""Every JSON type (``number`` holds ``integer``): the type of a value of any type, written out."""
_TYPED = frozenset({"type", "anyOf", "oneOf", "allOf", "enum", "const", "$ref"})
"""Keywords that say which values a schema takes; a schema with none of them takes any value."""
_SCHEMA = frozenset(
    {
        "items", "additionalItems", "unevaluatedItems", "contains", "propertyNames", "not",
        "if", "then", "else", "contentSchema",
    }
)  # fmt: skip
"""Keywords whose value is one schema."""
_SCHEMAS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
"""Keywords whose value is a list of schemas (``items`` as a list: a tuple, before 2020-12)."""
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "dependentSchemas"})
"""Keywords whose value maps names to schemas."""
_EXTRA = frozenset({"additionalProperties", "unevaluatedProperties"})
"""Keywords whose value is a schema, or a boolean that every engine reads as it is."""


def _portable(schema: Any) -> Any:
    """``schema`` in the form every engine takes, accepting exactly the same values: a
    schema that takes a value of any type lists every JSON type, and a ``format`` outside
    :data:`_FORMATS` is dropped."""
    if schema is True:
        return {"type": list(_ANY)}
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "format" and value not in _FORMATS:
            continue
        if key in _NAMED_SCHEMAS and isinstance(value, Mapping):
            out[key] = {name: _portable(sub) for name, sub in value.items()}
        elif key in _SCHEMAS and isinstance(value, list):
            out[key] = [_portable(sub) for sub in value]
        elif key in _SCHEMA or (key in _EXTRA and not isinstance(value, bool)):
            out[key] = _portable(value)
        else:
            out[key] = value
    if not out.keys() & _TYPED:
        out["type"] = list(_ANY)
    return out


# -- limits ----------------------------------------------------------------------------------

_DEPTH = 10
_PROPERTIES = 5_000
_ENUM_VALUES = 1_000
_TEXT = 120_000
_LONG_ENUM = 250
_LONG_ENUM_TEXT = 15_000


def _over_limits(schema: Mapping[str, Any]) -> list[str]:
    """The size limits of strict mode ``schema`` breaks: nesting depth, properties in all,
    enum values in all, and the text of names, enum and const values."""
    counts = {"properties": 0, "enum": 0, "text": 0, "depth": 0, "long": 0}
    defs = schema.get("$defs") or {}
    counts["text"] += sum(len(name) for name in defs)

    def walk(node: Any, depth: int, refs: tuple[str, ...]) -> None:
        if not isinstance(node, Mapping):
            return
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref not in refs:
            walk(defs.get(ref.removeprefix("#/$defs/")), depth, (*refs, ref))
            return
        kinds = node.get("type")
        kinds = [kinds] if isinstance(kinds, str) else kinds if isinstance(kinds, list) else []
        if "object" in kinds or "array" in kinds:
            depth += 1
            counts["depth"] = max(counts["depth"], depth)
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            counts["properties"] += len(properties)
            counts["text"] += sum(len(name) for name in properties)
            for sub in properties.values():
                walk(sub, depth, refs)
        values = node.get("enum")
        if isinstance(values, list):
            counts["enum"] += len(values)
            size = sum(len(str(v)) for v in values)
            counts["text"] += size
            if len(values) > _LONG_ENUM and size > _LONG_ENUM_TEXT:
                counts["long"] += 1
        if "const" in node:
            counts["text"] += len(str(node["const"]))
        walk(node.get("items"), depth, refs)
        branches = node.get("anyOf")
        for branch in branches if isinstance(branches, list) else ():
            walk(branch, depth, refs)

    walk(schema, 0, ())
    over = []
    if counts["depth"] > _DEPTH:
        over.append(f"nested {counts['depth']} levels deep; strict mode takes {_DEPTH}")
    if counts["properties"] > _PROPERTIES:
        over.append(f"{counts['properties']} properties; strict mode takes {_PROPERTIES}")
    if counts["enum"] > _ENUM_VALUES:
        over.append(f"{counts['enum']} enum values; strict mode takes {_ENUM_VALUES}")
    if counts["text"] > _TEXT:
        over.append(
            f"{counts['text']} characters of names and enum and const values; "
            f"strict mode takes {_TEXT}"
        )
    if counts["long"]:
        over.append(
            f"{counts['long']} enums of over {_LONG_ENUM} values hold over {_LONG_ENUM_TEXT} "
            "characters; strict mode takes none"
        )
    return over
