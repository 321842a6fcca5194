"""Argument validation against a tool's JSON Schema, before the tool runs.

The keywords tool schemas use are checked: ``type``, ``enum``, ``const``, ``required``,
``properties``, ``additionalProperties``, ``items``, ``minItems``/``maxItems``,
``uniqueItems``, ``minLength``/``maxLength``, ``pattern``, ``minimum``/``maximum`` and their
exclusive forms, ``multipleOf``, ``anyOf``/``oneOf``/``allOf`` and local ``$ref``s; other
keywords (``format``, ``default``, descriptions) are not checked. Only strings that spell a
number or a boolean are coerced, where the schema asks for one and does not also accept a
string; every coercion is reported.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ArgumentProblem", "Validation", "validate_arguments"]

_BOUNDS = {
    "minimum": "is below the minimum",
    "maximum": "is above the maximum",
    "exclusiveMinimum": "must be greater than",
    "exclusiveMaximum": "must be less than",
}
_INTEGER = re.compile(r"^-?\d+$")
_NUMBER = re.compile(r"^-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")


@dataclass(frozen=True, slots=True)
class ArgumentProblem:
    """One broken rule: the argument (a dotted path), the schema keyword, and the values
    the schema allows when it lists them."""

    argument: str
    rule: str
    message: str
    allowed: tuple[Any, ...] = ()

    def __str__(self) -> str:
        return f"argument {self.argument!r}: {self.message} (rule: {self.rule})"


@dataclass(frozen=True, slots=True)
class Validation:
    arguments: dict[str, Any]
    """The arguments after coercion."""
    problems: tuple[ArgumentProblem, ...]
    coerced: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def validate_arguments(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> Validation:
    """Check ``arguments`` against ``schema`` (an object schema)."""
    checker = _Checker(schema)
    value = checker.check(dict(arguments), schema, "")
    return Validation(value, tuple(checker.problems), tuple(checker.coerced))


class _Checker:
    __slots__ = ("coerced", "problems", "root")

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.problems: list[ArgumentProblem] = []
        self.coerced: list[str] = []

    def fail(self, path: str, rule: str, message: str, allowed: Sequence[Any] = ()) -> None:
        self.problems.append(ArgumentProblem(path or "*", rule, message, tuple(allowed)))

    def resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        ref = schema.get("$ref")
        while isinstance(ref, str) and ref.startswith("#/"):
            target: Any = self.root
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, Mapping) else {}
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **rest}
            ref = schema.get("$ref") if schema.get("$ref") != ref else None
        return schema

    def check(self, value: Any, schema: Any, path: str) -> Any:
        if not isinstance(schema, Mapping):
            return value  # true, or an empty schema: anything goes
        schema = self.resolve(schema)
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list):
                value = self.one_of(value, schema[key], path, key)
        for branch in schema.get("allOf") or ():
            value = self.check(value, branch, path)
        types = schema.get("type")
        if types is not None:
            allowed = [types] if isinstance(types, str) else list(types)
            value = self.coerce(value, allowed, path)
            if not any(_is(value, kind) for kind in allowed):
                self.fail(path, "type", f"expected {' or '.join(allowed)}, got {_describe(value)}")
                return value
        if "enum" in schema and value not in schema["enum"]:
            options = ", ".join(repr(v) for v in schema["enum"])
            self.fail(path, "enum", f"{value!r} is not one of {options}", schema["enum"])
        if "const" in schema and value != schema["const"]:
            self.fail(path, "const", f"must be {schema['const']!r}", [schema["const"]])
        if isinstance(value, dict):
            value = self.object(value, schema, path)
        elif isinstance(value, list):
            value = self.array(value, schema, path)
        elif isinstance(value, str):
            self.string(value, schema, path)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            self.number(value, schema, path)
        return value

    def one_of(self, value: Any, branches: list[Any], path: str, key: str) -> Any:
        for branch in branches:
            trial = _Checker(self.root)
            result = trial.check(value, branch, path)
            if not trial.problems:
                self.coerced.extend(trial.coerced)
                return result
        self.fail(path, key, f"{_describe(value)} matches none of the allowed forms")
        return value

    def coerce(self, value: Any, allowed: list[str], path: str) -> Any:
        if not isinstance(value, str) or "string" in allowed:
            return value
        text = value.strip()
        result: Any = value
        if "integer" in allowed and _INTEGER.match(text):
            result = int(text)
        elif "number" in allowed and _NUMBER.match(text):
            number = float(text)
            result = (
                int(number)
                if number.is_integer() and "." not in text and "e" not in text.lower()
                else number
            )
        elif "boolean" in allowed and text.lower() in ("true", "false"):
            result = text.lower() == "true"
        if result is not value:
            self.coerced.append(f"read argument {path or '*'!r} {value!r} as {result!r}")
        return result

    def object(self, value: dict[str, Any], schema: Mapping[str, Any], path: str) -> dict[str, Any]:
        properties = schema.get("properties") or {}
        for name in schema.get("required") or ():
            if name not in value:
                self.fail(_join(path, name), "required", "required argument is missing")
        extra = schema.get("additionalProperties", True)
        out = {}
        for name, item in value.items():
            where = _join(path, name)
            if name in properties:
                out[name] = self.check(item, properties[name], where)
            elif extra is False:
                names = ", ".join(properties) or "none"
                self.fail(
                    where,
                    "additionalProperties",
                    f"unexpected argument; known: {names}",
                    list(properties),
                )
                out[name] = item
            else:
                out[name] = self.check(item, extra, where) if isinstance(extra, Mapping) else item
        return out

    def array(self, value: list[Any], schema: Mapping[str, Any], path: str) -> list[Any]:
        if "minItems" in schema and len(value) < schema["minItems"]:
            self.fail(
                path, "minItems", f"needs at least {schema['minItems']} items, has {len(value)}"
            )
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            self.fail(
                path, "maxItems", f"takes at most {schema['maxItems']} items, has {len(value)}"
            )
        if schema.get("uniqueItems") and len({repr(v) for v in value}) != len(value):
            self.fail(path, "uniqueItems", "items must be unique")
        items = schema.get("items")
        if isinstance(items, Mapping):
            return [
                self.check(item, items, f"{path}.{i}" if path else str(i))
                for i, item in enumerate(value)
            ]
        return value

    def string(self, value: str, schema: Mapping[str, Any], path: str) -> None:
        if "minLength" in schema and len(value) < schema["minLength"]:
            self.fail(path, "minLength", f"needs at least {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            self.fail(path, "maxLength", f"takes at most {schema['maxLength']} characters")
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and re.search(pattern, value) is None:
            self.fail(path, "pattern", f"{value!r} does not match {pattern!r}")

    def number(self, value: float, schema: Mapping[str, Any], path: str) -> None:
        for keyword, what in _BOUNDS.items():
            bound = schema.get(keyword)
            if isinstance(bound, int | float) and not isinstance(bound, bool):
                broken = {
                    "minimum": value < bound,
                    "maximum": value > bound,
                    "exclusiveMinimum": value <= bound,
                    "exclusiveMaximum": value >= bound,
                }[keyword]
                if broken:
                    self.fail(path, keyword, f"{value} {what} {bound}")
        step = schema.get("multipleOf")
        if (
            isinstance(step, int | float)
            and step
            and not math.isclose(value / step, round(value / step))
        ):
            self.fail(path, "multipleOf", f"{value} is not a multiple of {step}")


def _is(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "null":
        return value is None
    return True


def _describe(value: Any) -> str:
    kinds = {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
    }
    kind = "null" if value is None else kinds.get(type(value), type(value).__name__)
    shown = repr(value)
    return f"{kind} {shown if len(shown) <= 40 else shown[:37] + '...'}"


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
