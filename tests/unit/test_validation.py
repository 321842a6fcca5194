"""Arguments are checked against the tool's JSON Schema before the tool runs."""

from __future__ import annotations

import re
from typing import Any

import pytest

from mcs_host.orchestration.validation import compile_schema, validate_arguments

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 2},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "unit": {"type": "string", "enum": ["C", "F"]},
        "ratio": {"type": "number", "exclusiveMinimum": 0},
        "verbose": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2, "uniqueItems": True},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "where": {"$ref": "#/$defs/Place"},
    },
    "required": ["city"],
    "additionalProperties": False,
    "$defs": {
        "Place": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]}
    },
}


def problems(arguments: dict[str, Any]) -> list[str]:
    return [str(p) for p in validate_arguments(SCHEMA, arguments).problems]


def test_valid_arguments_pass_unchanged() -> None:
    arguments = {
        "city": "Oslo",
        "days": 3,
        "unit": "C",
        "ratio": 0.5,
        "verbose": False,
        "tags": ["a", "b"],
        "note": None,
        "code": "OSL",
        "where": {"lat": 59.9},
    }
    checked = validate_arguments(SCHEMA, arguments)
    assert checked.ok
    assert checked.arguments == arguments
    assert checked.coerced == ()


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, ["argument 'city': required argument is missing (rule: required)"]),
        (
            {"city": "Oslo", "color": "red"},
            [
                "argument 'color': unexpected argument; known: city, days, unit, ratio, verbose, "
                "tags, note, code, where (rule: additionalProperties)"
            ],
        ),
        ({"city": 7}, ["argument 'city': expected string, got integer 7 (rule: type)"]),
        ({"city": None}, ["argument 'city': expected string, got null (rule: type)"]),
        ({"city": "O"}, ["argument 'city': needs at least 2 characters (rule: minLength)"]),
        (
            {"city": "Oslo", "days": 9},
            ["argument 'days': 9 is above the maximum 7 (rule: maximum)"],
        ),
        (
            {"city": "Oslo", "days": 2.5},
            ["argument 'days': expected integer, got number 2.5 (rule: type)"],
        ),
        (
            {"city": "Oslo", "days": True},
            ["argument 'days': expected integer, got boolean true (rule: type)"],
        ),
        (
            {"city": "Oslo", "unit": "K"},
            ["argument 'unit': 'K' is not one of 'C', 'F' (rule: enum)"],
        ),
        (
            {"city": "Oslo", "ratio": 0},
            ["argument 'ratio': 0 must be greater than 0 (rule: exclusiveMinimum)"],
        ),
        (
            {"city": "Oslo", "tags": ["a", "a"]},
            ["argument 'tags': items must be unique (rule: uniqueItems)"],
        ),
        (
            {"city": "Oslo", "tags": ["a", 2]},
            ["argument 'tags.1': expected string, got integer 2 (rule: type)"],
        ),
        (
            {"city": "Oslo", "note": 5},
            ["argument 'note': integer 5 matches none of the allowed forms (rule: anyOf)"],
        ),
        (
            {"city": "Oslo", "code": "osl"},
            ["argument 'code': 'osl' does not match '^[A-Z]{3}$' (rule: pattern)"],
        ),
        (
            {"city": "Oslo", "where": {}},
            ["argument 'where.lat': required argument is missing (rule: required)"],
        ),
    ],
    ids=[
        "required",
        "additional",
        "type",
        "null",
        "minLength",
        "maximum",
        "integer",
        "bool-is-not-int",
        "enum",
        "exclusive",
        "unique",
        "items",
        "anyOf",
        "pattern",
        "ref",
    ],
)
def test_each_broken_rule_names_the_argument_and_the_rule(
    arguments: dict[str, Any], expected: list[str]
) -> None:
    assert problems(arguments) == expected


@pytest.mark.parametrize(
    ("items", "unique"),
    [
        ([1, 1.0], False),
        ([True, 1], True),
        ([0, False, None, ""], True),
        ([{"a": 1, "b": 2}, {"b": 2, "a": 1}], False),
        ([[1, 2], [2, 1]], True),
        ([10**20, float(10**20)], False),
        ([10**400, 10**400 + 1], True),
        ([{"a": [1]}, {"a": [1.0]}], False),
    ],
)
def test_unique_items_compares_as_json_does(items: list[Any], unique: bool) -> None:
    schema = {"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}}
    assert validate_arguments(schema, {"xs": items}).ok is unique


def test_enum_problems_carry_the_allowed_values() -> None:
    (problem,) = validate_arguments(SCHEMA, {"city": "Oslo", "unit": "K"}).problems
    assert problem.allowed == ("C", "F")


def test_only_numeric_boolean_and_json_object_or_array_strings_are_coerced() -> None:
    checked = validate_arguments(
        SCHEMA, {"city": "Oslo", "days": "3", "ratio": "0.25", "verbose": "true"}
    )
    assert checked.ok
    assert checked.arguments == {"city": "Oslo", "days": 3, "ratio": 0.25, "verbose": True}
    assert checked.coerced == (
        "read argument 'days' '3' as 3",
        "read argument 'ratio' '0.25' as 0.25",
        "read argument 'verbose' 'true' as True",
    )
    assert problems({"city": "Oslo", "days": "three"}) == [
        "argument 'days': expected integer, got string 'three' (rule: type)"
    ]
    assert problems({"city": "Oslo", "verbose": "yes"}) == [
        "argument 'verbose': expected boolean, got string 'yes' (rule: type)"
    ]
    # a string stays a string where a string is allowed
    assert validate_arguments(
        {"type": "object", "properties": {"v": {"type": ["string", "integer"]}}}, {"v": "7"}
    ).arguments == {"v": "7"}


def test_a_string_that_spells_an_object_or_array_is_read_where_the_schema_takes_no_string() -> None:
    # vLLM test_deepseekv32_tool_parser.py, test_string_attr_true_coerced_by_composed_schema:
    # the model wrote the object as a string where every form of the schema takes an object
    wait = {
        "anyOf": [
            {
                "type": "object",
                "properties": {"type": {"type": "string"}, "minutes": {"type": "integer"}},
                "required": ["type", "minutes"],
            },
            {"type": "null"},
        ]
    }
    schema = {
        "type": "object",
        "properties": {"wait": wait, "tags": {"type": "array"}, "note": {"type": "string"}},
    }
    checked = validate_arguments(
        schema, {"wait": '{"type": "for", "minutes": "2880"}', "tags": '["a"]', "note": "[1]"}
    )
    assert checked.ok, checked.problems
    assert checked.arguments == {
        "wait": {"type": "for", "minutes": 2880},
        "tags": ["a"],
        "note": "[1]",  # a string where a string is allowed
    }
    assert checked.coerced[0] == (
        'read argument \'wait\' \'{"type": "for", "minutes": "2880"}\' as '
        "{'type': 'for', 'minutes': '2880'}"
    )
    # an array where an object is due, or JSON that does not read, stays a string and fails
    for wrong in ('["for", 2880]', '{"type": "for",'):
        assert not validate_arguments(schema, {"wait": wrong}).ok


def test_a_recursive_schema_is_compiled_once_and_checked_at_every_depth() -> None:
    tree = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {
            "Node": {
                "type": "object",
                "required": ["label"],
                "properties": {
                    "label": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
            }
        },
    }
    validator = compile_schema(tree)
    deep = {"label": "a", "children": [{"label": "b", "children": [{"children": []}]}]}
    (problem,) = validator.validate({"root": deep}).problems
    assert str(problem) == (
        "argument 'root.children.0.children.0.label': required argument is missing (rule: required)"
    )
    fine = {"label": "a", "children": [{"label": "b", "children": []}]}
    assert validator.validate({"root": fine}).ok
    # the same validator serves many calls, each with its own problems
    assert validator.validate({"root": {"label": 3}}).problems[0].rule == "type"
    assert validator.validate({"root": fine}).ok


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (float("nan"), "nan is not a finite number (rule: type)"),
        (float("inf"), "inf is not a finite number (rule: type)"),
        (10**400, "is not a multiple of 7"),
    ],
    ids=["nan", "inf", "huge integer"],
)
def test_numbers_json_allows_but_no_tool_can_take_are_refused(value: Any, message: str) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "number", "multipleOf": 7}}}
    (problem,) = validate_arguments(schema, {"n": value}).problems
    assert message in str(problem)
    assert validate_arguments(schema, {"n": 7 * 10**400}).ok


def test_one_of_takes_exactly_one_form_and_any_of_the_first() -> None:
    forms = [{"type": "integer"}, {"type": "number", "minimum": 0}]
    one = {"type": "object", "properties": {"n": {"oneOf": forms}}}
    any_ = {"type": "object", "properties": {"n": {"anyOf": forms}}}
    (problem,) = validate_arguments(one, {"n": 3}).problems
    assert str(problem) == (
        "argument 'n': integer 3 matches more than one of the allowed forms (rule: oneOf)"
    )
    assert validate_arguments(one, {"n": -3}).ok  # an integer, and not >= 0
    assert validate_arguments(one, {"n": 2.5}).ok  # a number >= 0, not an integer
    assert validate_arguments(any_, {"n": 3}).ok


@pytest.mark.parametrize(
    ("keyword", "message"),
    [
        ({"pattern": "["}, "pattern '[' is not a regular expression"),
        ({"minLength": "3"}, "minLength must be a non-negative integer, not '3'"),
        ({"maxItems": -1}, "maxItems must be a non-negative integer, not -1"),
        ({"enum": "C"}, "enum must be a list, not 'C'"),
        ({"properties": [1]}, "properties must be an object, not [1]"),
        ({"required": "ab"}, "required must be a list, not 'ab'"),
        (
            {"$ref": "#/properties/y"},
            "refers back to itself through ['#/properties/x', '#/properties/y']",
        ),
    ],
)
def test_a_schema_that_cannot_be_checked_is_refused_when_compiled(
    keyword: dict[str, Any], message: str
) -> None:
    loop = {"$ref": "#/properties/x"}  # y refers to x: with x -> y, a cycle
    with pytest.raises(ValueError, match=re.escape(message)):
        compile_schema({"type": "object", "properties": {"x": keyword, "y": loop}})


@pytest.mark.parametrize(
    ("schema", "value", "ok"),
    [
        ({"enum": [1, "a"]}, True, False),
        ({"enum": [True]}, 1, False),
        ({"enum": [0]}, False, False),
        ({"enum": [1, "a"]}, 1.0, True),
        ({"enum": [{"k": [1]}]}, {"k": [True]}, False),
        ({"const": True}, 1, False),
        ({"const": 0}, False, False),
        ({"const": "1"}, 1, False),
        ({"const": {"a": 1, "b": 2}}, {"b": 2, "a": 1}, True),
        ({"type": "array", "uniqueItems": True}, [1, True], True),
        ({"type": "array", "uniqueItems": True}, [0, False, None], True),
        ({"type": "array", "uniqueItems": True}, [1, 1.0], False),
    ],
)
def test_enum_const_and_unique_items_use_json_equality_not_pythons(
    schema: dict[str, Any], value: Any, ok: bool
) -> None:
    """Python's ``==`` makes ``True == 1`` and ``False == 0``; JSON does not. (JSON Schema
    counts ``1`` and ``1.0`` as one number.)"""
    full = {"type": "object", "properties": {"v": schema}}
    assert validate_arguments(full, {"v": value}).ok is ok


@pytest.mark.parametrize(
    "arguments",
    [
        {"city": "Oslo"},
        {"city": "Oslo", "days": 3, "unit": "C", "tags": ["a"], "note": None},
        {"city": "Oslo", "days": 3, "unit": "C", "tags": ["a"], "code": "OSL"},
        {"city": "Oslo", "days": "3"},
        {"city": "Oslo", "days": 3.0},
        {"city": "Oslo", "ratio": float("inf")},
        {"city": "Oslo", "verbose": "true"},
        {"city": "Oslo", "tags": ["a", "a"]},
        {"city": "Oslo", "note": "x"},
        {"city": "Oslo", "note": 5},
        {"city": "Oslo", "where": {"lat": 1}},
        {"city": "Oslo", "where": {"lat": "1"}},
        {"city": "Oslo", "code": "OSL", "extra": 1},
        {"city": "O"},
        {},
    ],
)
def test_the_fast_acceptance_agrees_with_the_full_check(arguments: dict[str, Any]) -> None:
    validator = compile_schema(SCHEMA)
    full = validator._node.check(dict(arguments), "", _context())
    checked = validator.validate(arguments)
    if validator.accepts(arguments):
        # passing as they are: the full check finds nothing to report or coerce
        assert full == arguments
        assert checked.ok
        assert checked.coerced == ()
    # "not sure" sends the call to the full check; the common clean shapes never need it
    clean = [{"city": "Oslo"}, {"city": "Oslo", "note": "x"}, {"city": "Oslo", "where": {"lat": 1}}]
    if arguments in clean or ("code" in arguments and "extra" not in arguments):
        assert validator.accepts(arguments)


def _context() -> Any:
    from mcs_host.orchestration.validation import _Context

    return _Context()
