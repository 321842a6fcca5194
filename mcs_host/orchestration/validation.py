"""Argument validation against a tool's JSON Schema, before the tool runs.

One module: a small JSON Schema compiler whose keywords compile each other recursively; it
is long because each keyword is compiled twice, into the full check that coerces and names
each problem and into the fast acceptance test tried first.

The keywords tool schemas use are checked: ``type``, ``enum``, ``const``, ``required``,
``properties``, ``additionalProperties``, ``items``, ``minItems``/``maxItems``,
``uniqueItems``, ``minLength``/``maxLength``, ``pattern``, ``minimum``/``maximum`` and their
exclusive forms, ``multipleOf``, ``anyOf``/``oneOf``/``allOf`` and local ``$ref``s; other
keywords (``format``, ``default``, descriptions) are not checked. Only strings that spell a
number, a boolean, or as JSON an object or array are coerced, where the schema asks for one
and does not also accept a string, and ``null`` for an optional property whose schema does
not take it is read as not given (strict schemas, OpenAI's and the response schema's, write
an optional property so); every coercion is reported. A schema whose keywords cannot be
checked (a ``pattern`` that is no regular expression, a length that is no count, an ``enum``
that is no list) is refused when it is compiled, that is when its tool is mounted.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ArgumentProblem",
    "ArgumentValidator",
    "Validation",
    "compile_schema",
    "validate_arguments",
]

_BOUNDS = {
    "minimum": "is below the minimum",
    "maximum": "is above the maximum",
    "exclusiveMinimum": "must be greater than",
    "exclusiveMaximum": "must be less than",
}
_BROKEN: dict[str, Callable[[Any, Any], bool]] = {
    "minimum": operator.lt,
    "maximum": operator.gt,
    "exclusiveMinimum": operator.le,
    "exclusiveMaximum": operator.ge,
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
    return compile_schema(schema).validate(arguments)


def compile_schema(schema: Mapping[str, Any]) -> ArgumentValidator:
    """``schema`` turned once into checks, for validating many calls of one tool."""
    return ArgumentValidator(schema)


class ArgumentValidator:
    """A tool's argument schema, compiled: every keyword looked up once, ``$ref`` resolved."""

    __slots__ = ("_node", "schema")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        self._node = _compile(schema, schema, {})

    def wants_text(self, name: str, value: Any) -> bool:
        """Whether the model's text for the argument ``name``, as written, is what the tool
        wants rather than ``value``, the text read as JSON: the argument may be a string and
        ``value`` is a string decoded from quotes or of none of its types."""
        node = self._node.properties.get(name)
        return (
            node is not None
            and node.types is not None
            and "string" in node.types
            and (isinstance(value, str) or not node.typed(value))
        )

    def accepts(self, arguments: Mapping[str, Any]) -> bool:
        """Whether ``arguments`` pass as they are (``False`` may also mean: ask
        :meth:`validate`); the fast test for the common case, compiled with the schema."""
        return self._node.quick(arguments)

    def validate(self, arguments: Mapping[str, Any]) -> Validation:
        """Check ``arguments``; coerce what the schema allows."""
        if self._node.quick(arguments):  # valid as they are: nothing to report or coerce
            return Validation(dict(arguments), (), ())
        context = _Context()
        value = self._node.check(dict(arguments), "", context)
        return Validation(value, tuple(context.problems), tuple(context.coerced))


class _Context:
    __slots__ = ("coerced", "problems")

    def __init__(self) -> None:
        self.problems: list[ArgumentProblem] = []
        self.coerced: list[str] = []

    def fail(self, path: str, rule: str, message: str, allowed: Sequence[Any] = ()) -> None:
        self.problems.append(ArgumentProblem(path or "*", rule, message, tuple(allowed)))


_MISSING: Any = object()


def _always(value: Any) -> bool:
    return True


_EXACT: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "object": dict,
    "array": list,
    "boolean": bool,
    "null": type(None),
}


def _type_check(types: list[str]) -> Callable[[Any], bool]:
    """A check for ``types``: one ``isinstance`` where the types allow it."""
    if all(kind in _EXACT for kind in types):
        classes = tuple(_EXACT[kind] for kind in types)
        return lambda value: isinstance(value, classes)
    return lambda value: any(_is(value, kind) for kind in types)


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` with its local ``$ref`` replaced by the target (sibling keywords win)."""
    ref = schema.get("$ref")
    seen: set[str] = set()
    while isinstance(ref, str) and ref.startswith("#/"):
        if ref in seen:
            raise ValueError(f"$ref {ref!r} refers back to itself through {sorted(seen)}")
        seen.add(ref)
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, Mapping) else {}
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**target, **rest}
        ref = schema.get("$ref") if schema.get("$ref") != ref else None
    return schema


def _compile(schema: Any, root: Mapping[str, Any], memo: dict[int, _Node]) -> _Node:
    """The node for ``schema``; ``memo`` (by the id of schemas inside ``root``) ends the
    recursion of recursive ``$ref``s."""
    if not isinstance(schema, Mapping):
        return _ANYTHING  # true, or an empty schema: anything goes
    known = memo.get(id(schema))
    if known is not None:
        return known
    node = _Node()
    memo[id(schema)] = node
    node.fill(_resolve(schema, root), root, memo)
    node.quick = _quick(node)
    return node


class _Node:
    """One schema, its keywords read once."""

    __slots__ = (
        "all_of",
        "any_of",
        "bounds",
        "const",
        "enum",
        "enum_keys",
        "extra",
        "items",
        "max_items",
        "max_length",
        "min_items",
        "min_length",
        "multiple_of",
        "pattern",
        "properties",
        "quick",
        "required",
        "typed",
        "types",
        "unique",
    )

    def __init__(self) -> None:
        self.any_of: tuple[tuple[str, tuple[_Node, ...]], ...] = ()
        self.all_of: tuple[_Node, ...] = ()
        self.types: list[str] | None = None
        self.typed: Callable[[Any], bool] = _always
        """Whether a value has one of ``types``."""
        self.enum: Any = _MISSING
        self.enum_keys: frozenset[Any] = frozenset()
        self.const: Any = _MISSING
        self.properties: dict[str, _Node] = {}
        self.required: tuple[str, ...] = ()
        self.extra: bool | _Node = True
        self.items: _Node | None = None
        self.min_items: Any = _MISSING
        self.max_items: Any = _MISSING
        self.unique = False
        self.min_length: Any = _MISSING
        self.max_length: Any = _MISSING
        self.pattern: str | None = None
        self.bounds: tuple[tuple[str, float, str], ...] = ()
        self.multiple_of: float | None = None
        self.quick: Callable[[Any], bool] = _always
        """Whether a value passes as it is: no problem, nothing to coerce. ``False`` may
        also mean "not sure": :meth:`check` then decides."""

    def fill(
        self, schema: Mapping[str, Any], root: Mapping[str, Any], memo: dict[int, _Node]
    ) -> None:
        def sub(value: Any) -> _Node:
            return _compile(value, root, memo)

        self.any_of = tuple(
            (key, tuple(sub(b) for b in schema[key]))
            for key in ("anyOf", "oneOf")
            if isinstance(schema.get(key), list)
        )
        self.all_of = tuple(sub(b) for b in schema.get("allOf") or ())
        types = schema.get("type")
        if types is not None:
            self.types = [types] if isinstance(types, str) else list(types)
            self.typed = _type_check(self.types)
        self.enum = schema.get("enum", _MISSING)
        if self.enum is not _MISSING and not isinstance(self.enum, list):
            raise ValueError(f"enum must be a list, not {self.enum!r}")
        if self.enum is not _MISSING:
            # JSON equality, not Python's: true is not 1 (1 and 1.0 are one JSON number)
            self.enum_keys = frozenset(_json_key(v) for v in self.enum)
        self.const = schema.get("const", _MISSING)
        properties = schema.get("properties") or {}
        if not isinstance(properties, Mapping):
            raise ValueError(f"properties must be an object, not {properties!r}")
        self.properties = {name: sub(s) for name, s in properties.items()}
        required = schema.get("required") or ()
        if not isinstance(required, list | tuple):
            raise ValueError(f"required must be a list, not {required!r}")
        self.required = tuple(required)
        extra = schema.get("additionalProperties", True)
        self.extra = False if extra is False else sub(extra) if isinstance(extra, Mapping) else True
        items = schema.get("items")
        self.items = sub(items) if isinstance(items, Mapping) else None
        self.min_items = _count(schema, "minItems")
        self.max_items = _count(schema, "maxItems")
        self.unique = bool(schema.get("uniqueItems"))
        self.min_length = _count(schema, "minLength")
        self.max_length = _count(schema, "maxLength")
        pattern = schema.get("pattern")
        self.pattern = pattern if isinstance(pattern, str) else None
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                message = f"pattern {self.pattern!r} is not a regular expression: {exc}"
                raise ValueError(message) from None
        self.bounds = tuple(
            (keyword, bound, what)
            for keyword, what in _BOUNDS.items()
            if isinstance(bound := schema.get(keyword), int | float) and not isinstance(bound, bool)
        )
        step = schema.get("multipleOf")
        self.multiple_of = step if isinstance(step, int | float) and step else None

    def check(self, value: Any, path: str, context: _Context) -> Any:
        if self is _ANYTHING:
            return value
        for key, branches in self.any_of:
            value = _one_of(value, branches, path, key, context)
        for branch in self.all_of:
            value = branch.check(value, path, context)
        if self.types is not None:
            if isinstance(value, str):
                value = _coerce(value, self.types, path, context)
            if not self.typed(value):
                context.fail(
                    path, "type", f"expected {' or '.join(self.types)}, got {_describe(value)}"
                )
                return value
        if self.enum is not _MISSING and _json_key(value) not in self.enum_keys:
            options = ", ".join(repr(v) for v in self.enum)
            context.fail(path, "enum", f"{value!r} is not one of {options}", self.enum)
        if self.const is not _MISSING and _json_key(value) != _json_key(self.const):
            context.fail(path, "const", f"must be {self.const!r}", [self.const])
        if isinstance(value, dict):
            value = self.object(value, path, context)
        elif isinstance(value, list):
            value = self.array(value, path, context)
        elif isinstance(value, str):
            self.string(value, path, context)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            self.number(value, path, context)
        return value

    def takes(self, value: Any) -> bool:
        """Whether ``value`` passes as it is."""
        if self.quick(value):
            return True
        context = _Context()
        self.check(value, "", context)
        return not context.problems and not context.coerced

    def object(self, value: dict[str, Any], path: str, context: _Context) -> dict[str, Any]:
        properties = self.properties
        for name in self.required:
            if name not in value:
                context.fail(_join(path, name), "required", "required argument is missing")
        extra = self.extra
        out = {}
        for name, item in value.items():
            node = properties.get(name)
            if node is not None:
                if item is None and name not in self.required and not node.takes(None):
                    # strict schemas (OpenAI's, the response schema's) write "not given" so
                    context.coerced.append(f"read argument {_join(path, name)!r} null as not given")
                    continue
                out[name] = node.check(item, _join(path, name), context)
            elif extra is False:
                names = ", ".join(properties) or "none"
                context.fail(
                    _join(path, name),
                    "additionalProperties",
                    f"unexpected argument; known: {names}",
                    list(properties),
                )
                out[name] = item
            else:
                out[name] = (
                    extra.check(item, _join(path, name), context) if extra is not True else item
                )
        return out

    def array(self, value: list[Any], path: str, context: _Context) -> list[Any]:
        if self.min_items is not _MISSING and len(value) < self.min_items:
            context.fail(
                path, "minItems", f"needs at least {self.min_items} items, has {len(value)}"
            )
        if self.max_items is not _MISSING and len(value) > self.max_items:
            context.fail(
                path, "maxItems", f"takes at most {self.max_items} items, has {len(value)}"
            )
        if self.unique and len({_json_key(v) for v in value}) != len(value):
            context.fail(path, "uniqueItems", "items must be unique")
        if self.items is not None:
            items = self.items
            return [
                items.check(item, f"{path}.{i}" if path else str(i), context)
                for i, item in enumerate(value)
            ]
        return value

    def string(self, value: str, path: str, context: _Context) -> None:
        if self.min_length is not _MISSING and len(value) < self.min_length:
            context.fail(path, "minLength", f"needs at least {self.min_length} characters")
        if self.max_length is not _MISSING and len(value) > self.max_length:
            context.fail(path, "maxLength", f"takes at most {self.max_length} characters")
        if self.pattern is not None and re.search(self.pattern, value) is None:
            context.fail(path, "pattern", f"{value!r} does not match {self.pattern!r}")

    def number(self, value: float, path: str, context: _Context) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            context.fail(path, "type", f"{value} is not a finite number")
            return
        for keyword, bound, what in self.bounds:
            if _BROKEN[keyword](value, bound):
                context.fail(path, keyword, f"{value} {what} {bound}")
        step = self.multiple_of
        if step is not None and not _multiple(value, step):
            context.fail(path, "multipleOf", f"{value} is not a multiple of {step}")


_ANYTHING = _Node()


def _quick(node: _Node) -> Callable[[Any], bool]:
    """The fast acceptance test of ``node``: only the keywords it has, no paths, no copies.

    Children are reached through their own ``quick`` when called, so recursive schemas
    compile. ``oneOf``, and an ``anyOf`` whose first form does not fit, go to :meth:`_Node.check`.
    """
    checks: list[Callable[[Any], bool]] = []
    if node.any_of:
        if any(key == "oneOf" for key, _ in node.any_of):
            return _never
        firsts = [branches[0] for _, branches in node.any_of if branches]
        checks.append(lambda value: all(first.quick(value) for first in firsts))
    if node.all_of:
        parts = node.all_of
        checks.append(lambda value: all(part.quick(value) for part in parts))
    if node.types is not None:
        checks.append(node.typed)  # a string where another type is due: coerce in check
    if node.enum is not _MISSING:
        keys = node.enum_keys
        checks.append(lambda value: _json_key(value) in keys)
    if node.const is not _MISSING:
        const = _json_key(node.const)
        checks.append(lambda value: _json_key(value) == const)
    kinds = set(node.types) if node.types is not None else None  # None: any type

    def may_be(*names: str) -> bool:
        return kinds is None or not kinds.isdisjoint(names)

    if may_be("object") and (node.properties or node.required or node.extra is not True):
        checks.append(_quick_object(node))
    lengths = (node.min_items, node.max_items, node.min_length, node.max_length)
    if may_be("array") and (node.items is not None or node.unique or lengths[:2] != _UNSET):
        checks.append(_quick_array(node))
    if may_be("string") and (node.pattern is not None or lengths[2:] != _UNSET):
        checks.append(_quick_string(node))
    # a float may be infinite (JSON readers take Infinity); a value of type integer is no float
    # unless integral, and an integral float is finite
    if may_be("number") or (may_be("integer") and (node.bounds or node.multiple_of)):
        checks.append(_quick_number(node))
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]

    def every(value: Any) -> bool:
        for check in checks:  # noqa: SIM110 - a loop calls no generator: this runs per call
            if not check(value):
                return False
        return True

    return every


_UNSET = (_MISSING, _MISSING)


def _never(value: Any) -> bool:
    return False


def _quick_object(node: _Node) -> Callable[[Any], bool]:
    properties, required, extra = node.properties, node.required, node.extra

    def test(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        for name in required:
            if name not in value:
                return False
        for name, item in value.items():
            child = properties.get(name)
            if child is not None:
                if not child.quick(item):
                    return False
            elif extra is False or (extra is not True and not extra.quick(item)):
                return False
        return True

    return test


def _quick_array(node: _Node) -> Callable[[Any], bool]:
    def test(value: Any) -> bool:
        if not isinstance(value, list):
            return True
        if node.min_items is not _MISSING and len(value) < node.min_items:
            return False
        if node.max_items is not _MISSING and len(value) > node.max_items:
            return False
        if node.unique and len({_json_key(v) for v in value}) != len(value):
            return False
        items = node.items
        return items is None or all(items.quick(item) for item in value)

    return test


def _quick_string(node: _Node) -> Callable[[Any], bool]:
    pattern = re.compile(node.pattern) if node.pattern is not None else None

    def test(value: Any) -> bool:
        if not isinstance(value, str):
            return True
        if node.min_length is not _MISSING and len(value) < node.min_length:
            return False
        if node.max_length is not _MISSING and len(value) > node.max_length:
            return False
        return pattern is None or pattern.search(value) is not None

    return test


def _quick_number(node: _Node) -> Callable[[Any], bool]:
    bounds = tuple((_BROKEN[keyword], bound) for keyword, bound, _ in node.bounds)
    step = node.multiple_of

    def test(value: Any) -> bool:
        if isinstance(value, float):
            if not math.isfinite(value):
                return False
        elif not isinstance(value, int) or isinstance(value, bool):
            return True
        for broken, bound in bounds:
            if broken(value, bound):
                return False
        return step is None or _multiple(value, step)

    return test


def _one_of(value: Any, branches: tuple[_Node, ...], path: str, key: str, context: _Context) -> Any:
    """The first form ``value`` fits; for ``oneOf``, the only one."""
    fits: list[tuple[Any, _Context]] = []
    for branch in branches:
        trial = _Context()
        result = branch.check(value, path, trial)
        if not trial.problems:
            fits.append((result, trial))
            if key == "anyOf":
                break
    if not fits:
        context.fail(path, key, f"{_describe(value)} matches none of the allowed forms")
        return value
    if len(fits) > 1:
        context.fail(path, key, f"{_describe(value)} matches more than one of the allowed forms")
        return value
    result, trial = fits[0]
    context.coerced.extend(trial.coerced)
    return result


def _count(schema: Mapping[str, Any], keyword: str) -> Any:
    """A length keyword's value (``_MISSING`` when absent): a non-negative integer."""
    value = schema.get(keyword, _MISSING)
    if value is not _MISSING and (
        not isinstance(value, int) or isinstance(value, bool) or value < 0
    ):
        raise ValueError(f"{keyword} must be a non-negative integer, not {value!r}")
    return value


def _multiple(value: float, step: float) -> bool:
    if isinstance(value, int) and isinstance(step, int):
        return value % step == 0
    try:
        quotient = value / step
    except OverflowError:  # an integer too large for a float
        return False
    return math.isfinite(quotient) and math.isclose(quotient, round(quotient))


def _coerce(value: Any, allowed: list[str], path: str, context: _Context) -> Any:
    if not isinstance(value, str) or "string" in allowed:
        return value
    text = value.strip()
    result: Any = value
    if "integer" in allowed and _INTEGER.match(text):
        try:
            result = int(text)
        except ValueError:  # past Python's digit limit: left a string, the type check fails it
            return value
    elif "number" in allowed and _NUMBER.match(text):
        number = float(text)
        result = (
            int(number)
            if number.is_integer() and "." not in text and "e" not in text.lower()
            else number
        )
    elif "boolean" in allowed and text.lower() in ("true", "false"):
        result = text.lower() == "true"
    elif ("object" in allowed and text[:1] == "{") or ("array" in allowed and text[:1] == "["):
        result = _container(value, allowed)
    if result is not value:
        context.coerced.append(f"read argument {path or '*'!r} {value!r} as {result!r}")
    return result


def _container(value: str, allowed: list[str]) -> Any:
    """The object or array ``value`` spells as JSON, where ``allowed`` takes it; else
    ``value``."""
    try:
        read = json.loads(value)
    except (ValueError, RecursionError):
        return value
    if isinstance(read, dict) and "object" in allowed:
        return read
    return read if isinstance(read, list) and "array" in allowed else value


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
    if value is None or isinstance(value, bool):  # the kind says it all: null, true, false
        return "null" if value is None else f"boolean {'true' if value else 'false'}"
    kind = kinds.get(type(value), type(value).__name__)
    shown = repr(value)
    return f"{kind} {shown if len(shown) <= 40 else shown[:37] + '...'}"


def _json_key(value: Any) -> Any:
    """A hashable key equal for values JSON counts equal: ``1 == 1.0``, ``true != 1``, and
    objects whatever the order of their keys."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, int):
        return ("number", value)
    if isinstance(value, float):
        return ("number", int(value) if value.is_integer() else value)
    if isinstance(value, list | tuple):
        return ("array", tuple(_json_key(v) for v in value))
    if isinstance(value, Mapping):
        return ("object", frozenset((k, _json_key(v)) for k, v in value.items()))
    return ("other", repr(value))


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
