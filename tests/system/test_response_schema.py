"""The response schema: what a model constrained to it writes is what the orchestrator runs.

Instances are generated from the schema (every branch: each tool, several calls, the final
answer; strings that hold other formats' markers) and run through a real orchestrator with
real tool drivers; calls the orchestrator runs are generated from the tools' own schemas and
the response schema must accept them; the schema keeps OpenAI's strict rules, checked as the
Structured Outputs guide states them and by the ``openai`` SDK's own strict-schema pass.
"""

from __future__ import annotations

import copy
import json
import random
import re
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from ollama import ChatResponse, Message
from openai.lib._pydantic import _ensure_strict_json_schema
from pydantic import BaseModel, ConfigDict, Field
from sample_drivers import Calculator, Echo, Speaker

from mcs_host import (
    DriverMeta,
    MCSToolDriver,
    Orchestrator,
    ResponseSchema,
    Runner,
    Tool,
    ToolParameter,
    response_schema,
    validate_arguments,
)
from mcs_host.kit import tool_from_model

# -- tools -------------------------------------------------------------------------------------


class Place(BaseModel):  # no extra="forbid": its schema leaves additionalProperties out
    city: str = Field(description="City name.")
    country: str | None = Field(None, description="ISO country code.")
    zoom: int = Field(3, ge=1, le=18)


class PlanArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str
    stops: list[Place] = Field(description="Where to stop.", min_length=1, max_length=3)
    start: Place | None = None
    mode: str = Field("car", json_schema_extra={"enum": ["car", "bike", "foot"]})
    budget: float = Field(100.0, gt=0, le=10_000)
    nights: int = Field(1, ge=0, le=30, multiple_of=1)
    contact: str = Field("", json_schema_extra={"format": "email"})
    tags: list[str] = Field(default_factory=list, max_length=4)
    priority: int | str = 1


def _parameter(name: str, schema: dict[str, Any], required: bool = True) -> ToolParameter:
    return ToolParameter(name=name, description=f"The {name}.", required=required, schema=schema)


STRICT_TOOLS = [
    tool_from_model("plan_trip", PlanArgs, description="Plan a trip."),
    Tool(name="ping", description="Answer pong."),
    Tool(
        name="set_level",
        description="Set a level.",
        parameters=(
            _parameter("level", {"enum": [1, 2, 3]}),
            _parameter("unit", {"const": "percent"}, required=False),
            _parameter("when", {"type": "string", "format": "date-time"}, required=False),
        ),
    ),
]
"""Tools whose schemas OpenAI's strict mode can express once rewritten."""

LOOSE_TOOLS = [
    Tool(
        name="post_json",
        description="Post a free-form body.",
        parameters=(
            _parameter("url", {"type": "string", "minLength": 8}),
            _parameter("body", {"type": "object"}),
            _parameter("headers", {"type": "object", "additionalProperties": {"type": "string"}}),
        ),
    ),
    Tool(
        name="tag",
        description="Tag unique words.",
        parameters=(
            _parameter(
                "words", {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
            ),
            _parameter("id", {"oneOf": [{"type": "string"}, {"type": "integer"}]}, required=False),
        ),
    ),
]
"""Tools with what strict mode cannot express: the schema keeps their own schemas."""


def _plugin_tools() -> list[Tool]:
    """The bundled CSV and files drivers' tools, as they list them."""
    from mcs_host_csv import CsvToolDriver
    from mcs_host_files import FilesToolDriver

    root = tempfile.mkdtemp()
    return [*CsvToolDriver(root=root).list_tools(), *FilesToolDriver(root=root).list_tools()]


class Recorder(MCSToolDriver):
    """Offers the tools it is given and records every call that reaches it."""

    meta = DriverMeta(id="record-0001", name="Recorder", version="1.0.0")

    def __init__(self, tools: list[Tool]) -> None:
        self.tools = tools
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def list_tools(self) -> list[Tool]:
        return list(self.tools)

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        self.calls.append((tool_name, arguments))
        return {"ran": tool_name}


def stack(tools: list[Tool]) -> tuple[Orchestrator, Recorder]:
    recorder = Recorder(tools)
    return Orchestrator({"rec": recorder}), recorder


# -- instances generated from a schema ---------------------------------------------------------

STRINGS = (
    "",
    "plain words",
    "ünïcødé ✓",
    'line\nbreak and "quotes" and \\backslash',
    "<think>",
    "</think> done",
    '<tool_call>{"name": "ping", "arguments": {}}</tool_call>',
    '[TOOL_CALLS] [{"name": "ping", "arguments": {}}]',
    '{"tool": "ping", "arguments": {}}',
    '{"response": {"final": "inner"}}',
    '```json\n{"tool": "ping", "arguments": {}}\n```',
    "@tool ping {}",
    "<|python_tag|>ping()",
    "[ping()]",
    "{{placeholder}}",
)
"""Strings a model may write anywhere: plain, and holding other formats' markers."""
PLAIN = STRINGS[:4]
"""Strings no text format reads as its own."""


class Generator:
    """Random instances of a JSON Schema (the keywords tool schemas use), with strings
    from ``strings``; an object that says it takes other keys may get one."""

    def __init__(
        self, root: Mapping[str, Any], seed: int, strings: tuple[str, ...] = STRINGS
    ) -> None:
        self.root = root
        self.rng = random.Random(seed)  # noqa: S311 - reproducible test data
        self.strings = strings

    def __call__(self, schema: Any = None, depth: int = 0) -> Any:
        rng = self.rng
        schema = self.root if schema is None else schema
        if not isinstance(schema, Mapping) or depth > 12:
            return rng.choice(self.strings)
        ref = schema.get("$ref")
        if isinstance(ref, str):
            target: Any = self.root
            for part in ref[2:].split("/"):
                target = target[part]
            return self(target, depth)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self(rng.choice(schema[key]), depth)
        if "const" in schema:
            return copy.deepcopy(schema["const"])
        if "enum" in schema:
            return copy.deepcopy(rng.choice(schema["enum"]))
        kinds = schema.get("type", ["string", "integer", "boolean", "null", "object"])
        kind = rng.choice([kinds] if isinstance(kinds, str) else kinds)
        return getattr(self, f"_{kind}")(schema, depth)

    def _null(self, schema: Mapping[str, Any], depth: int) -> None:
        return None

    def _boolean(self, schema: Mapping[str, Any], depth: int) -> bool:
        return self.rng.random() < 0.5

    def _integer(self, schema: Mapping[str, Any], depth: int) -> int:
        low = schema.get("minimum", schema.get("exclusiveMinimum", -1001) + 1)
        high = schema.get("maximum", schema.get("exclusiveMaximum", 1001) - 1)
        return self.rng.randint(int(low), int(high))

    def _number(self, schema: Mapping[str, Any], depth: int) -> float:
        low = schema.get("minimum", schema.get("exclusiveMinimum", -1000.0))
        high = schema.get("maximum", schema.get("exclusiveMaximum", 1000.0))
        value = self.rng.uniform(low, high)
        return value if value > low or "exclusiveMinimum" not in schema else high

    def _string(self, schema: Mapping[str, Any], depth: int) -> str:
        if schema.get("format") == "date-time":
            return "2025-05-01T12:00:00Z"
        if schema.get("format") == "email":
            return "a@example.com"
        text = self.rng.choice(self.strings)
        return text.ljust(schema.get("minLength", 0), "x")[: schema.get("maxLength")]

    def _array(self, schema: Mapping[str, Any], depth: int) -> list[Any]:
        low = schema.get("minItems", 0)
        size = self.rng.randint(low, schema.get("maxItems", low + 3))
        items = [self(schema.get("items", {}), depth + 1) for _ in range(size)]
        if schema.get("uniqueItems"):
            items = list({json.dumps(i, sort_keys=True): i for i in items}.values())
        return items

    def _object(self, schema: Mapping[str, Any], depth: int) -> dict[str, Any]:
        required = set(schema.get("required", ()))
        out = {
            name: self(sub, depth + 1)
            for name, sub in (schema.get("properties") or {}).items()
            if name in required or self.rng.random() < 0.5
        }
        extra = schema.get("additionalProperties")
        if extra is not None and extra is not False and self.rng.random() < 0.5:
            out["extra_key"] = self(extra if isinstance(extra, Mapping) else None, depth + 1)
        return out


def accepted(schema: Mapping[str, Any], instance: Any) -> list[str]:
    return [e.message for e in Draft202012Validator(schema).iter_errors(instance)]


# -- what a call should reach the tool as ------------------------------------------------------


def reaching(arguments: Any, schema: Mapping[str, Any]) -> Any:
    """``arguments`` as the tool with ``schema`` gets them: ``null`` for an optional
    property whose schema does not take it is not given."""
    if isinstance(arguments, list):
        items = schema.get("items")
        return [reaching(a, items) if isinstance(items, Mapping) else a for a in arguments]
    if not isinstance(arguments, dict):
        return arguments
    for branch in schema.get("anyOf", ()):
        if isinstance(branch, Mapping) and branch.get("type") == "object":
            return reaching(arguments, branch)
    properties = schema.get("properties") or {}
    required = set(schema.get("required", ()))
    out = {}
    for name, value in arguments.items():
        sub = properties.get(name)
        if sub is None:
            out[name] = value
        elif (
            value is None and name not in required and not Draft202012Validator(sub).is_valid(None)
        ):
            continue
        else:
            out[name] = reaching(value, sub)
    return out


def written(arguments: Any, schema: Mapping[str, Any], root: Mapping[str, Any]) -> Any:
    """``arguments`` as the response schema writes them: a property it requires and the
    call leaves out is ``null``."""
    if "$ref" in schema:
        return written(arguments, _at(root, schema["$ref"]), root)
    if isinstance(arguments, list):
        items = schema.get("items") or {}
        return [written(a, items, root) for a in arguments]
    if not isinstance(arguments, dict):
        return arguments
    for branch in schema.get("anyOf", ()):
        if isinstance(branch, Mapping) and branch.get("type") == "object":
            return written(arguments, branch, root)
    properties = schema.get("properties") or {}
    out = {k: written(v, properties.get(k, {}), root) for k, v in arguments.items()}
    for name in schema.get("required", ()):
        out.setdefault(name, None)
    return out


def _at(root: Mapping[str, Any], ref: str) -> Any:
    target: Any = root
    for part in ref[2:].split("/"):
        target = target[part]
    return target


def tools_of(orchestrator: Orchestrator) -> dict[str, Tool]:
    return {t.name: t for t in orchestrator.list_tools()}


# -- every instance runs -----------------------------------------------------------------------

ALL_TOOLS = STRICT_TOOLS + LOOSE_TOOLS


@pytest.mark.parametrize("seed", range(4))
def test_every_instance_the_schema_accepts_runs_as_the_calls_or_the_answer_it_names(
    seed: int,
) -> None:
    orchestrator, recorder = stack(ALL_TOOLS + _plugin_tools())
    schema = orchestrator.response_schema().schema
    tools = tools_of(orchestrator)
    generate = Generator(schema, seed)
    seen: set[str] = set()
    for _ in range(150):
        instance = generate()
        assert accepted(schema, instance) == [], instance  # the generator keeps to the schema
        text = json.dumps(instance, ensure_ascii=bool(seed % 2), indent=2 if seed > 1 else None)
        text = f"\n {text}\n" if seed % 2 else text  # as a grammar may space it
        recorder.calls.clear()
        answer = instance["response"]
        if isinstance(answer, dict) and "final" in answer:
            seen.add("final")
            response = orchestrator.process_llm_response(text)
            assert response.is_empty, text  # a final answer: no call, no failed call
            found = orchestrator.detect(text)
            assert (found.calls, found.has_final, found.final) == ((), True, answer["final"])
            assert recorder.calls == []
            continue
        calls = answer if isinstance(answer, list) else [answer]
        seen.update(["several"] if isinstance(answer, list) else [c["tool"] for c in calls])
        response = orchestrator.process_llm_response(text)
        assert (response.call_executed, response.call_failed) == (True, False), (
            text,
            response.call_detail,
        )
        expected = [
            (c["tool"], reaching(c["arguments"], tools[c["tool"]].input_schema())) for c in calls
        ]
        assert recorder.calls == expected
        for name, arguments in recorder.calls:
            assert accepted(tools[name].input_schema(), arguments) == []
    assert seen >= {"final", "several", "ping", "plan_trip", "post_json"}


def test_an_instance_runs_the_same_in_a_provider_s_message_and_through_the_runner() -> None:
    orchestrator, recorder = stack(STRICT_TOOLS)
    call = {"response": {"tool": "ping", "arguments": {}}}
    final = {"response": {"final": 'Done: <tool_call>{"name": "ping"}</tool_call>'}}
    message = {"role": "assistant", "content": json.dumps(call)}
    completion = {"choices": [{"message": message, "finish_reason": "stop", "index": 0}]}
    assert orchestrator.process_llm_response(completion).call_executed
    reply = ChatResponse(
        model="qwen3", message=Message(role="assistant", content=message["content"])
    )
    assert orchestrator.process_llm_response(reply).call_executed  # an Ollama SDK object
    assert recorder.calls == [("ping", {}), ("ping", {})]
    recorder.calls.clear()
    replies = iter([json.dumps(call), json.dumps(final)])
    result = Runner(orchestrator, lambda messages: next(replies)).run("Ping, then say so.")
    assert (result.stopped, result.turns) == ("final", 2)
    assert result.output == final["response"]["final"]
    assert recorder.calls == [("ping", {})]


def test_real_drivers_run_every_instance_with_the_defaults_for_what_it_leaves_out() -> None:
    """Speaker parses its arguments with pydantic (extra keys forbidden): a null for
    ``loud`` would fail there; it arrives as not given, and the default applies."""
    orchestrator = Orchestrator({"calc": Calculator(), "speak": Speaker()})
    schema = orchestrator.response_schema()
    assert schema.strict
    generate = Generator(schema.schema, 7)
    ran = 0
    for _ in range(60):
        instance = generate()
        response = orchestrator.process_llm_response(json.dumps(instance))
        if "final" in instance["response"]:
            assert response.is_empty
            continue
        assert (response.call_executed, response.call_failed) == (True, False), response
        ran += 1
    assert ran
    said = {"response": {"tool": "echo", "arguments": {"text": "hi", "loud": None, "to": None}}}
    assert orchestrator.process_llm_response(json.dumps(said)).tool_call_result == "hi"


# -- every call the orchestrator runs, the schema accepts --------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_every_call_the_orchestrator_runs_the_schema_accepts_in_its_own_shape(seed: int) -> None:
    """Arguments generated from each tool's own schema (declared keys only where an object
    does not say it takes others; strings no format reads as its markers) run as the
    prompt's ``{"tool", "arguments"}``; the same call, a list of calls and a final answer
    are instances of the response schema, and run the same."""
    orchestrator, recorder = stack(ALL_TOOLS + _plugin_tools())
    schema = orchestrator.response_schema().schema
    branches = schema["$defs"]
    rng = random.Random(seed)  # noqa: S311 - reproducible test data
    for name, tool in tools_of(orchestrator).items():
        generate = Generator(tool.input_schema(), rng.randrange(1 << 30), PLAIN)
        for _ in range(15):
            arguments = generate()
            assert accepted(tool.input_schema(), arguments) == []
            recorder.calls.clear()
            direct = orchestrator.process_llm_response(
                json.dumps({"tool": name, "arguments": arguments})
            )
            assert (direct.call_executed, direct.call_failed) == (True, False), direct.call_detail
            assert recorder.calls == [(name, arguments)]
            shaped = written(arguments, branches[name]["properties"]["arguments"], schema)
            instance = {"response": {"tool": name, "arguments": shaped}}
            assert accepted(schema, instance) == [], (name, arguments)
            several = {"response": [instance["response"], {"tool": "ping", "arguments": {}}]}
            assert accepted(schema, several) == []
            recorder.calls.clear()
            assert orchestrator.process_llm_response(json.dumps(several)).call_executed
            assert recorder.calls == [(name, reaching(shaped, tool.input_schema())), ("ping", {})]
    for text in PLAIN:  # the seed's final answer, which the orchestrator reads
        assert orchestrator.detect(json.dumps({"final": text})).final == text
        assert accepted(schema, {"response": {"final": text}}) == []


def test_the_schema_accepts_nothing_the_orchestrator_would_not_run() -> None:
    orchestrator, _ = stack(STRICT_TOOLS)
    schema = orchestrator.response_schema().schema
    refused = [
        {"response": {"tool": "nope", "arguments": {}}},  # a tool nobody offers
        {"response": {"tool": "set_level", "arguments": {"level": 4, "unit": None, "when": None}}},
        {"response": {"tool": "set_level", "arguments": {"level": 1}}},  # unit: null, or given
        {"response": {"tool": "ping", "arguments": {"x": 1}}},  # an argument it does not take
        {"response": {"tool": "ping"}},
        {"response": []},  # no call and no answer
        {"response": {"final": None}},
        {"response": {"final": "x", "tool": "ping"}},
        {"tool": "ping", "arguments": {}},  # the prompt's shape: not the constrained one
        {"response": {"tool": "ping", "arguments": {}}, "note": "x"},
    ]
    for instance in refused:
        assert accepted(schema, instance), instance


# -- OpenAI's strict rules ---------------------------------------------------------------------

_STRICT_KEYS = {
    "type", "description", "title", "enum", "const", "anyOf", "properties", "required",
    "additionalProperties", "items", "minItems", "maxItems", "pattern", "format", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "$ref",
}  # fmt: skip
_STRICT_FORMATS = {
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
}


def strict_violations(schema: Mapping[str, Any]) -> list[str]:  # noqa: PLR0915
    """What breaks the rules of OpenAI's Structured Outputs guide (supported schemas): the
    root an object, not ``anyOf``; each object closed with every property required; only
    the supported keywords; a ``$ref`` alone; the nesting and size limits."""
    problems: list[str] = []
    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("the root is not an object")
    defs = schema.get("$defs", {})
    totals = {"properties": 0, "enum": 0, "text": sum(map(len, defs))}

    def walk(node: Any, where: str, depth: int) -> int:
        if not isinstance(node, Mapping):
            problems.append(f"{where}: not a schema")
            return depth
        keys = set(node) - ({"$defs"} if where == "#" else set())
        if keys - _STRICT_KEYS:
            problems.append(f"{where}: {sorted(keys - _STRICT_KEYS)} not supported")
        if "$ref" in node:
            if len(node) > 1:
                problems.append(f"{where}: $ref with other keywords")
            return walk(_at(schema, node["$ref"]), node["$ref"], depth)
        if not ({"type", "anyOf"} & keys):
            problems.append(f"{where}: no type")
        if "format" in node and node["format"] not in _STRICT_FORMATS:
            problems.append(f"{where}: format {node['format']}")
        kinds = node.get("type")
        kinds = [kinds] if isinstance(kinds, str) else list(kinds or ())
        deepest = depth + ("object" in kinds or "array" in kinds)
        if "object" in kinds:
            properties = node.get("properties")
            if not isinstance(properties, Mapping):
                problems.append(f"{where}: an object without properties")
                properties = {}
            if node.get("additionalProperties") is not False:
                problems.append(f"{where}: additionalProperties is not false")
            if sorted(node.get("required", [])) != sorted(properties):
                problems.append(f"{where}: not every property is required")
            totals["properties"] += len(properties)
            totals["text"] += sum(map(len, properties))
            for name, sub in properties.items():
                deepest = max(deepest, walk(sub, f"{where}/{name}", depth + 1))
        if "array" in kinds:
            if not isinstance(node.get("items"), Mapping):
                problems.append(f"{where}: an array without items")
            else:
                deepest = max(deepest, walk(node["items"], f"{where}[]", depth + 1))
        if "enum" in node:
            totals["enum"] += len(node["enum"])
            totals["text"] += sum(len(str(v)) for v in node["enum"])
        if "const" in node:
            totals["text"] += len(str(node["const"]))
        branches = node.get("anyOf", [])
        firsts: dict[str, list[Any]] = {}
        for i, branch in enumerate(branches):
            deepest = max(deepest, walk(branch, f"{where}|{i}", depth))
            resolved = _at(schema, branch["$ref"]) if "$ref" in branch else branch
            first = next(iter(resolved.get("properties") or {}), None)
            if first is not None:
                firsts.setdefault(first, []).append(resolved["properties"][first].get("const"))
        for first, consts in firsts.items():  # objects sharing a first key need a discriminator
            if len(consts) > 1 and (None in consts or len(set(consts)) < len(consts)):
                problems.append(f"{where}: anyOf objects share the first key {first!r}")
        return deepest

    depth = walk(schema, "#", 1)
    if depth > 10:
        problems.append(f"nested {depth} levels")
    if totals["properties"] > 5000 or totals["enum"] > 1000 or totals["text"] > 120_000:
        problems.append(f"over a size limit: {totals}")
    return problems


def test_the_schema_keeps_openai_s_strict_rules_and_the_sdk_would_change_nothing() -> None:
    orchestrator, _ = stack(STRICT_TOOLS + _plugin_tools())
    answers = orchestrator.response_schema()
    assert (answers.strict, answers.problems) == (True, ())
    assert strict_violations(answers.schema) == []
    schema = copy.deepcopy(dict(answers.schema))
    assert _ensure_strict_json_schema(schema, path=(), root=schema) == answers.schema
    Draft202012Validator.check_schema(answers.schema)


def test_the_strict_rules_check_finds_what_strict_mode_refuses() -> None:
    """The control of the test above: the same checks and the SDK's pass object to the
    schema of tools strict mode cannot express, which says it is not strict."""
    orchestrator, _ = stack(LOOSE_TOOLS)
    answers = orchestrator.response_schema()
    assert answers.strict is False
    found = "\n".join(strict_violations(answers.schema))
    assert "additionalProperties is not false" in found
    assert "['minLength'] not supported" in found
    assert "['oneOf'] not supported" in found
    schema = copy.deepcopy(dict(answers.schema))
    assert _ensure_strict_json_schema(schema, path=(), root=schema) != answers.schema
    response = answers.schema["properties"]["response"]
    rooted = strict_violations({"anyOf": [response], "$defs": answers.schema["$defs"]})
    assert "the root is not an object" in rooted


def test_a_tool_strict_mode_cannot_express_keeps_its_schema_and_the_reason_is_given() -> None:
    orchestrator, _ = stack(STRICT_TOOLS + LOOSE_TOOLS)
    answers = orchestrator.response_schema()
    assert answers.strict is False
    assert answers.problems == (
        "tool 'post_json': argument 'url': minLength is not supported in strict mode",
        "tool 'tag': argument 'words': uniqueItems is not supported in strict mode",
    )
    branches = answers.schema["$defs"]
    post = orchestrator.list_tools()[3]
    assert branches["post_json"]["properties"]["arguments"] == post.input_schema()
    assert answers.json_schema()["strict"] is False
    plan = branches["plan_trip"]["properties"]["arguments"]  # the others are rewritten still
    assert plan["required"] == list(plan["properties"])


def test_an_optional_argument_takes_null_and_its_description_says_what_null_means() -> None:
    arguments = response_schema(STRICT_TOOLS).schema["$defs"]["plan_trip"]["properties"][
        "arguments"
    ]
    mode = arguments["properties"]["mode"]
    assert mode["anyOf"][-1] == {"type": "null"}
    assert mode["description"] == 'Null for the default ("car").'
    stop = arguments["properties"]["stops"]["items"]
    assert stop["additionalProperties"] is False
    assert stop["properties"]["zoom"]["type"] == ["integer", "null"]
    assert stop["properties"]["country"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    level = response_schema(STRICT_TOOLS).schema["$defs"]["set_level"]
    assert level["properties"]["arguments"]["properties"]["level"]["type"] == "integer"


def test_a_tool_whose_schema_refers_back_to_itself_is_left_out_and_named() -> None:
    node = {"type": "object", "properties": {"child": {"$ref": "#/properties/node"}}}
    tree = Tool(name="tree", description="A tree.", parameters=(_parameter("node", node),))
    orchestrator, _ = stack([tree, STRICT_TOOLS[1]])
    answers = orchestrator.response_schema()
    assert answers.problems == (
        "tool 'tree' is left out: $ref '#/properties/node' refers back to itself",
    )
    assert answers.strict is True  # what it holds keeps the rules
    assert list(answers.schema["$defs"]) == ["ping"]


def test_the_schema_follows_the_orchestrator_s_tools_under_their_final_names() -> None:
    orchestrator = Orchestrator({"calc": Calculator(), "echo": Echo()})
    names = list(orchestrator.response_schema().schema["$defs"])
    assert names == ["calc__add", "echo", "echo__add"]
    assert all(
        orchestrator.response_schema().schema["$defs"][n]["properties"]["tool"]["const"] == n
        for n in names
    )
    text = json.dumps({"response": {"tool": "calc__add", "arguments": {"a": 1, "b": 2}}})
    assert orchestrator.process_llm_response(text).tool_call_result == 3
    orchestrator.unmount("calc")
    assert list(orchestrator.response_schema().schema["$defs"]) == ["echo", "add"]
    empty = Orchestrator({})
    only = empty.response_schema()
    assert "$defs" not in only.schema
    assert accepted(only.schema, {"response": {"final": "hi"}}) == []
    assert empty.detect(json.dumps({"response": {"final": "hi"}})).final == "hi"


def test_it_is_what_openai_and_ollama_take() -> None:
    from ollama._types import ChatRequest
    from openai.types.responses import ResponseFormatTextJSONSchemaConfigParam
    from openai.types.shared_params import ResponseFormatJSONSchema
    from pydantic import TypeAdapter

    answers = Orchestrator({"calc": Calculator()}).response_schema()
    assert isinstance(answers, ResponseSchema)
    chat = TypeAdapter(ResponseFormatJSONSchema).validate_python(answers.response_format())
    assert chat["json_schema"] == {"name": "mcs_response", "schema": answers.schema, "strict": True}
    responses = {"type": "json_schema", **answers.json_schema()}
    TypeAdapter(ResponseFormatTextJSONSchemaConfigParam).validate_python(responses)
    request = ChatRequest(model="qwen3", messages=[], format=dict(answers.schema))
    assert request.model_dump(exclude_none=True)["format"] == answers.schema


# -- every engine takes it ---------------------------------------------------------------------
# The engines a server constrains decoding with, as their Python packages: outlines-core
# (vLLM's ``outlines`` backend) and llguidance (vLLM's ``guidance`` backend, llama.cpp built
# with it). Each is given a vocabulary of the 256 bytes, so a text it takes is one a model
# may write one byte at a time. Not here: xgrammar (its wheel needs torch) and llama.cpp's
# own converter (no wheel: llama-cpp-python builds llama.cpp from source).


class _Bytes:
    """A tokenizer of one token per byte; token 256 ends the text."""

    eos_token_id = 256
    bos_token_id = None
    tokens = [bytes([byte]) for byte in range(256)] + [b""]
    special_token_ids = (256,)

    def __call__(self, text: bytes | str) -> list[int]:
        return list(text if isinstance(text, bytes) else text.encode())


def _outlines(schema: Mapping[str, Any]) -> Callable[[str], bool]:
    """Compile ``schema`` as vLLM's ``outlines`` backend does (the regex, which vLLM parses
    with Python's ``re`` first, then an index over the vocabulary); what takes a text."""
    import outlines_core  # type: ignore[import-untyped]
    from outlines_core.json_schema import build_regex_from_schema  # type: ignore[import-untyped]

    regex = build_regex_from_schema(json.dumps(schema))
    re.compile(regex)
    vocabulary = outlines_core.Vocabulary(256, {bytes([byte]): [byte] for byte in range(256)})
    index = outlines_core.Index(regex, vocabulary)

    def takes(text: str) -> bool:
        guide = outlines_core.Guide(index)
        for byte in text.encode():
            try:
                guide.advance(byte, return_tokens=False)
            except ValueError:  # no state follows: the byte is masked out
                return False
        return bool(guide.is_finished())

    return takes


def _llguidance(schema: Mapping[str, Any]) -> Callable[[str], bool]:
    """Compile ``schema`` as vLLM's ``guidance`` backend does (flexible whitespace); what
    takes a text."""
    from llguidance import LLMatcher, LLTokenizer, TokenizerWrapper

    tokenizer = LLTokenizer(TokenizerWrapper(_Bytes()), slices=[])
    grammar = LLMatcher.grammar_from_json_schema(
        dict(schema), defaults={"whitespace_flexible": True}
    )
    error = LLMatcher.validate_grammar(grammar, tokenizer)
    if error:
        raise ValueError(error)

    def takes(text: str) -> bool:
        matcher = LLMatcher(tokenizer, grammar, log_level=0)
        data = list(text.encode())
        return matcher.try_consume_tokens(data) == len(data) and matcher.is_accepting()

    return takes


ENGINES = {"outlines-core": _outlines, "llguidance": _llguidance}

SHAPES: dict[str, list[Tool]] = {
    "untyped": [
        Tool(
            name="note",
            description="Keep a note.",
            parameters=(
                ToolParameter(name="text", description="Any value.", required=True),
                ToolParameter(name="extra", description="Anything else."),
                _parameter("raw", {}, required=False),
                _parameter("meta", {"title": "Meta", "examples": [1]}, required=False),
            ),
        )
    ],
    "nullable": [
        Tool(
            name="find",
            description="Find things.",
            parameters=(
                _parameter("query", {"type": ["string", "null"]}),
                _parameter("limit", {"anyOf": [{"type": "integer"}, {"type": "null"}]}, False),
                _parameter("page", {"type": "integer", "minimum": 1}, required=False),
            ),
        )
    ],
    "enum": [
        Tool(
            name="paint",
            description="Paint.",
            parameters=(
                _parameter("color", {"type": "string", "enum": ["red", "green"]}),
                _parameter("size", {"enum": [1, 2, 3]}, required=False),
                _parameter("mode", {"enum": ["a", 1, None, True]}, required=False),
            ),
        )
    ],
    "nested": [
        Tool(
            name="ship",
            description="Ship a parcel.",
            parameters=(
                _parameter(
                    "to",
                    {
                        "type": "object",
                        "properties": {
                            "street": {"type": "string"},
                            "at": {
                                "type": "object",
                                "properties": {
                                    "lat": {"type": "number"},
                                    "lon": {"type": "number"},
                                },
                                "required": ["lat", "lon"],
                            },
                        },
                        "required": ["street"],
                    },
                ),
                _parameter(
                    "options",
                    {"type": "object", "properties": {"fast": {"type": "boolean"}}},
                    required=False,
                ),
            ),
        )
    ],
    "array": [
        Tool(
            name="batch",
            description="Run a batch.",
            parameters=(
                _parameter("ids", {"type": "array", "items": {"type": "integer"}, "minItems": 1}),
                _parameter(
                    "rows",
                    {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"key": {"type": "string"}, "value": True},
                            "required": ["key"],
                        },
                    },
                    required=False,
                ),
                _parameter("anything", {"type": "array"}, required=False),
                _parameter(
                    "grid",
                    {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
                    required=False,
                ),
            ),
        )
    ],
    "no parameters": [Tool(name="ping", description="Answer pong.")],
    "formats": [
        Tool(
            name="fetch",
            description="Fetch a page.",
            parameters=(
                _parameter("url", {"type": "string", "format": "uri-reference"}),
                _parameter("host", {"type": "string", "format": "hostname"}, required=False),
                _parameter("since", {"type": "string", "format": "date-time"}, required=False),
            ),
        )
    ],
    "pydantic": STRICT_TOOLS,
    "free-form": LOOSE_TOOLS[:1],
}
"""Tool sets of each shape a tool's arguments take; with the bundled drivers' tools, the
sets every engine is given."""

_WRONG = {
    "string": 12,
    "integer": "12",
    "number": "1.5",
    "boolean": "yes",
    "array": {},
    "object": [],
}
"""A value of another type, for a schema of each type."""


def _wrong_type(arguments: dict[str, Any], schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """``arguments`` with the first argument of one named type given a value of another."""
    for name, sub in (schema.get("properties") or {}).items():
        kind = sub.get("type")
        if isinstance(kind, str) and kind in _WRONG and "enum" not in sub:
            return {**arguments, name: _WRONG[kind]}
    return None


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("shape", ["bundled", *SHAPES])
def test_every_engine_compiles_the_schema_and_takes_each_call_byte_by_byte(
    engine: str, shape: str
) -> None:
    """Each engine compiles the schema of each tool set; every instance of the schema
    (calls of each tool, several calls, the final answer), written as ``json.dumps`` writes
    it, passes one byte at a time and runs; a call of a tool nobody offers, or with an
    argument of another type, is refused."""
    tools = _plugin_tools() if shape == "bundled" else SHAPES[shape]
    orchestrator, _ = stack(tools)
    schema = orchestrator.response_schema().schema
    takes = ENGINES[engine](schema)
    generate = Generator(schema, len(shape))
    seen = set()
    for _ in range(30):
        instance = generate()
        text = json.dumps(instance, ensure_ascii=False)  # outlines-core writes no \u escape
        assert takes(text), text
        answer = instance["response"]
        seen.add(
            "final" if "final" in answer else "several" if isinstance(answer, list) else "call"
        )
        response = orchestrator.process_llm_response(text)
        assert response.is_empty if "final" in answer else response.call_executed, text
    assert seen == {"final", "several", "call"}
    assert not takes(json.dumps({"response": {"tool": "nope", "arguments": {}}}))
    for name, branch in schema["$defs"].items():
        arguments = Generator(schema, 0)(branch)["arguments"]
        wrong = _wrong_type(arguments, branch["properties"]["arguments"])
        if wrong is None:
            wrong = {**arguments, "not_an_argument": 1}  # ping takes none
        instance = {"response": {"tool": name, "arguments": wrong}}
        assert accepted(schema, instance), instance  # wrong indeed
        assert not takes(json.dumps(instance, ensure_ascii=False)), instance


def test_a_value_of_any_type_lists_every_json_type_and_takes_what_it_took() -> None:
    """outlines-core refuses a schema with a description and no type, which a parameter
    without a schema is; the response schema lists every JSON type there instead, and takes
    the same values."""
    from outlines_core.json_schema import build_regex_from_schema

    (note,) = SHAPES["untyped"]
    own = note.input_schema()
    with pytest.raises(ValueError, match="Unsupported JSON Schema structure"):
        build_regex_from_schema(json.dumps(own))
    answers = response_schema([note])
    assert answers.problems == ("tool 'note': argument 'text': takes a value of any type",)
    written = answers.schema["$defs"]["note"]["properties"]["arguments"]
    assert written["required"] == ["text"]
    for name, sub in own["properties"].items():
        rewritten = written["properties"][name]
        assert rewritten == {
            **sub,
            "type": ["string", "number", "boolean", "object", "array", "null"],
        }
        for value in (None, True, 0, 1.5, "x", [], [1, {"a": None}], {"a": [1]}):
            assert accepted(rewritten, value) == accepted(sub, value) == [], value
    (batch,) = SHAPES["array"]
    rows = response_schema([batch]).schema["$defs"]["batch"]["properties"]["arguments"]
    value = rows["properties"]["rows"]["items"]["properties"]["value"]  # true, as a schema
    assert value == {"type": ["string", "number", "boolean", "object", "array", "null"]}


def test_a_format_an_engine_does_not_know_is_dropped_and_the_others_are_kept() -> None:
    """Validation does not check formats, so dropping one runs the same calls; outlines-core
    refuses ``hostname`` and ``uri-reference``, llguidance the latter."""
    (fetch,) = SHAPES["formats"]
    loose = Tool(
        name="resolve",
        description="Resolve a host.",
        parameters=(_parameter("host", {"type": "string", "format": "ipv4", "minLength": 7}),),
    )
    answers = response_schema([fetch, loose])
    assert answers.problems == (
        "tool 'resolve': argument 'host': minLength is not supported in strict mode",
    )
    strict = answers.schema["$defs"]["fetch"]["properties"]["arguments"]["properties"]
    assert [strict[name].get("format") for name in ("url", "host", "since")] == [
        None,
        None,
        "date-time",
    ]
    kept = answers.schema["$defs"]["resolve"]["properties"]["arguments"]["properties"]["host"]
    assert kept == {"type": "string", "minLength": 7, "description": "The host."}


# -- validation: null for an optional argument -------------------------------------------------


def test_null_for_an_optional_argument_is_read_as_not_given_and_said() -> None:
    schema = STRICT_TOOLS[0].input_schema()
    stops = [{"city": "Oslo", "country": None, "zoom": None}]
    checked = validate_arguments(schema, {"title": "t", "stops": stops, "mode": None})
    assert checked.ok
    assert checked.arguments == {"title": "t", "stops": [{"city": "Oslo", "country": None}]}
    assert checked.coerced == (
        "read argument 'stops.0.zoom' null as not given",
        "read argument 'mode' null as not given",
    )
    refused = validate_arguments(schema, {"title": None, "stops": stops})
    assert [str(p) for p in refused.problems] == [
        "argument 'title': expected string, got null (rule: type)"
    ]


# -- the command line --------------------------------------------------------------------------


@pytest.mark.venv
def test_load_prompt_json_gives_the_stack_s_response_schema(
    tmp_path: Path, wheelhouse: Path, uv_cache: Path
) -> None:
    from distbuild import ROOT, Venv

    venv = Venv.create(tmp_path / "venv")
    venv.uv_install("mcs-host", "mcs-host-csv", wheelhouse=wheelhouse, cache=uv_cache)
    config = tmp_path / "mcs-host.toml"
    config.write_text(
        f'registries = ["{ROOT / "registry.json"}"]\n'
        f'[drivers.csv]\nsettings = {{ root = "{tmp_path}" }}\n'
    )
    done = venv.run("mcs-host", "load", "--json", "--prompt", "--config", config)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    published = venv.site_packages / "mcs_host" / "schemas" / "cli-load.schema.json"
    assert accepted(json.loads(published.read_text()), document) == []
    answers = document["response_schema"]
    assert (answers["name"], answers["strict"], answers["problems"]) == ("mcs_response", True, [])
    assert list(answers["schema"]["$defs"]) == [t["name"] for t in document["tools"]]
    assert strict_violations(answers["schema"]) == []
    without = json.loads(venv.run("mcs-host", "load", "--json", "--config", config).stdout)
    assert "response_schema" not in without
