"""The orchestrator: naming, routing, nesting, chaining, consent, several calls, native formats."""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from typing import Any

import pytest
from sample_drivers import Calculator, Echo, Greeter

from mcs_host import DriverResponse, MCSDriver, MCSToolDriver, Orchestrator, ToolCall, tool_name


def names(orchestrator: Orchestrator) -> list[str]:
    return [t.name for t in orchestrator.list_tools()]


def test_unique_names_stay_and_shared_ones_get_their_label() -> None:
    stack = Orchestrator({"calc": Calculator(), "echo": Echo()})
    assert names(stack) == ["calc__add", "echo", "echo__add"]
    assert stack.route("calc__add") == ("calc", "add")
    assert stack.route("echo") == ("echo", "echo")
    always = Orchestrator({"calc": Calculator()}, namespace="always")
    assert names(always) == ["calc__add"]


def test_names_are_valid_for_provider_apis_and_stay_unique() -> None:
    assert tool_name("files.read file") == "files_read_file"
    long = "x" * 100
    assert len(tool_name(long)) == 64
    assert tool_name(long) != tool_name(long + "y")

    class Dotted(Calculator):
        def list_tools(self) -> list[Any]:
            return [
                {"name": "math.add", "description": "a"},
                {"name": "math_add", "description": "b"},
            ]

    stack = Orchestrator({"m": Dotted()})
    # the name providers refuse gets the label and is cleaned; the valid one stays as it is
    assert names(stack) == ["m__math_add", "math_add"]
    assert stack.route("m__math_add") == ("m", "math.add")
    assert stack.route("math_add") == ("m", "math_add")

    class Clashing(Calculator):
        def list_tools(self) -> list[Any]:
            return [
                {"name": "math.add", "description": "a"},
                {"name": "m__math_add", "description": "b"},
            ]

    clashed = Orchestrator({"m": Clashing()})
    first, second = names(clashed)
    assert first != second
    assert all(
        len(n) <= 64 and re.fullmatch(r"[A-Za-z0-9_-]+_[0-9a-f]{8}", n) for n in (first, second)
    )
    assert {clashed.route(first)[1], clashed.route(second)[1]} == {"math.add", "m__math_add"}


class DottedWeather(Calculator):
    """One tool, ``weather.get``, a name providers refuse; records what reaches it."""

    def list_tools(self) -> list[Any]:
        city = {"name": "city", "description": "A city.", "schema": {"type": "string"}}
        return [{"name": "weather.get", "description": "The weather.", "parameters": [city]}]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        self.calls.append((tool_name, arguments))
        return f"sunny in {arguments['city']}"


@pytest.mark.parametrize(
    "text",
    [
        '{"tool": "weather.get", "arguments": {"city": "Oslo"}}',  # the JSON protocol
        '<|tool_call>call:weather.get{city:<|"|>Oslo<|"|>}<tool_call|>',  # Gemma 4
        "<|tool_call_start|>[weather.get(city='Oslo')]<|tool_call_end|>",  # LFM2
    ],
)
def test_a_call_by_the_tools_own_name_runs_the_one_tool_that_has_it(text: str) -> None:
    # vLLM's Gemma 4 and LFM2 tests: the model was told the tool's own name, weather.get,
    # which is offered as m__weather_get; consent and the driver see whom it is
    weather = DottedWeather()
    seen: list[str] = []

    def consent(call: ToolCall) -> bool:
        seen.append(call.name)
        return True

    stack = Orchestrator({"m": weather}, consent=consent)
    assert names(stack) == ["m__weather_get"]
    response = stack.process_llm_response(text)
    assert (response.call_executed, response.tool_call_result) == (True, "sunny in Oslo")
    assert seen == ["m__weather_get"]
    assert weather.calls == [("weather.get", {"city": "Oslo"})]
    # two drivers with a tool of that name: the name is neither's, and nothing runs
    other = DottedWeather()
    shared = Orchestrator({"m": DottedWeather(), "n": other})
    response = shared.process_llm_response(text)
    assert not response.call_executed
    assert "unknown tool 'weather.get'" in (response.call_detail or "")
    assert other.calls == []
    # a valid name renamed only because two drivers share it is not taken either
    calc = Calculator()
    clash = Orchestrator({"calc": calc, "echo": Echo()})
    response = clash.process_llm_response('{"tool": "add", "arguments": {"a": 1, "b": 2}}')
    assert not response.call_executed
    assert calc.calls == []


def test_an_orchestrator_is_both_driver_kinds_and_nests() -> None:
    inner = Orchestrator({"calc": Calculator(), "echo": Echo()})
    assert isinstance(inner, MCSDriver)
    assert isinstance(inner, MCSToolDriver)
    outer = Orchestrator({"inner": inner, "calc": Calculator()})
    # the inner names are already unique; the outer calculator's "add" clashes with none
    assert names(outer) == ["calc__add", "echo", "echo__add", "add"]
    assert outer.route("calc__add") == ("inner", "calc__add")
    assert outer.execute_tool("calc__add", {"a": 1, "b": 2}) == 3
    assert outer.execute_tool("add", {"a": 1, "b": 5}) == 6
    deeper = Orchestrator({"outer": outer, "again": Orchestrator({"calc": Calculator()})})
    assert names(deeper) == ["calc__add", "echo", "echo__add", "outer__add", "again__add"]
    response = outer.process_llm_response('{"tool": "echo", "arguments": {"text": "hi"}}')
    assert (response.call_executed, response.tool_call_result) == (True, "hi")


def test_labels_come_from_meta_names_when_a_list_is_given() -> None:
    stack = Orchestrator([Calculator(), Calculator(), Echo()])
    assert stack.labels == ("calculator", "calculator-2", "echo")


def test_tools_can_be_mounted_and_unmounted_at_run_time() -> None:
    stack = Orchestrator({"calc": Calculator()})
    assert names(stack) == ["add"]
    stack.mount("echo", Echo())
    assert names(stack) == ["calc__add", "echo", "echo__add"]
    stack.unmount("calc")
    assert names(stack) == ["echo", "add"]
    with pytest.raises(KeyError, match="no driver is mounted as 'calc'"):
        stack.unmount("calc")
    with pytest.raises(ValueError, match="label 'echo' is already mounted"):
        stack.mount("echo", Echo())
    with pytest.raises(ValueError, match="use letters, digits"):
        stack.mount("a__b", Echo())


class Named(MCSToolDriver):
    """A ToolDriver whose tools are only names."""

    def __init__(self, *tools: str) -> None:
        self.tools = tools

    def list_tools(self) -> list[Any]:
        return [{"name": name, "description": "A tool."} for name in self.tools]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return tool_name


def _expected_names(drivers: dict[str, Named], always: bool) -> list[str]:
    """The naming rule, all at once: a shared, invalid or (always) any name gets its label;
    two final names that still meet get a hash of label and name as well."""
    owned = [(label, name) for label, driver in drivers.items() for name in driver.tools]
    counts = Counter(name for _, name in owned)
    finals = [
        tool_name(f"{label}__{name}")
        if always or counts[name] > 1 or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name)
        else name
        for label, name in owned
    ]
    clashes = {name for name, count in Counter(finals).items() if count > 1}
    for index, (label, name) in enumerate(owned):
        if finals[index] in clashes:
            digest = hashlib.sha256(f"{label}\0{name}".encode()).hexdigest()[:8]
            finals[index] = f"{tool_name(f'{label}__{name}')[:55]}_{digest}"
    return finals


@pytest.mark.parametrize("always", [False, True], ids=["on-collision", "always"])
def test_mounting_one_at_a_time_names_every_tool_as_mounting_all_at_once(always: bool) -> None:
    pool = ["add", "echo", "math.add", "m__math_add", "a__add", "x" * 70, "b__echo", "ping"]
    chooser = random.Random(7)  # noqa: S311 - a fixed sequence of test cases
    drivers: dict[str, Named] = {}
    namespace: Any = "always" if always else "on-collision"
    stack = Orchestrator(namespace=namespace)
    for number in range(40):
        label = chooser.choice(["a", "b", "m", "x" * 60, "d"]) + str(number % 7) * (number > 4)
        if label in drivers:
            continue
        drivers[label] = Named(*chooser.sample(pool, chooser.randint(1, 4)))
        stack.mount(label, drivers[label])
        expected = _expected_names(drivers, always)
        assert names(stack) == expected
        assert names(Orchestrator(drivers, namespace=namespace)) == expected
        for final in expected:  # each name routes to the tool it names
            assert stack.route(final)[1] == stack.execute_tool(final, {})
    assert len(drivers) > 10


def test_a_text_call_runs_and_answers_in_the_history() -> None:
    calc = Calculator()
    stack = Orchestrator({"calc": calc})
    text = 'Sure, let me add.\n```json\n{"tool": "add", "arguments": {"a": 2, "b": 3}}\n```'
    response = stack.process_llm_response(text)
    assert (response.call_executed, response.call_failed, response.tool_call_result) == (
        True,
        False,
        5,
    )
    assert response.messages == [
        {"role": "assistant", "content": text},
        {"role": "user", "content": "Result of add:\n5.0"},
    ]
    assert calc.calls == [("add", {"a": 2, "b": 3})]


def test_several_calls_all_run_in_order() -> None:
    stack = Orchestrator({"calc": Calculator(), "echo": Echo()})
    text = json.dumps(
        [
            {"tool": "calc__add", "arguments": {"a": 1, "b": 1}},
            {"tool": "echo", "arguments": {"text": "done"}},
        ]
    )
    response = stack.process_llm_response(text)
    assert response.tool_call_result == [2, "done"]
    assert response.messages is not None
    assert response.messages[1]["content"] == "Result of calc__add:\n2.0\n\nResult of echo:\ndone"


def test_openai_native_calls_get_an_answer_per_id() -> None:
    stack = Orchestrator({"calc": Calculator()})
    completion = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                        },
                        {
                            "id": "call_2",
                            "type": "function",
                            "function": {"name": "sub", "arguments": "{}"},
                        },
                    ],
                }
            }
        ]
    }
    response = stack.process_llm_response(completion)
    assert (response.call_executed, response.call_failed) == (True, True)
    assert response.tool_call_result == [3, None]
    assert response.messages is not None
    assert [m.get("tool_call_id") for m in response.messages[1:]] == ["call_1", "call_2"]
    assert response.messages[2]["content"] == "error: unknown tool 'sub'"
    assert response.retry_prompt is not None
    assert "Available tools: add" in response.retry_prompt


def test_anthropic_tool_use_blocks_are_answered_with_tool_results() -> None:
    stack = Orchestrator({"echo": Echo()})
    message = {
        "role": "assistant",
        "type": "message",
        "content": [
            {"type": "text", "text": "Echoing."},
            {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"text": "x"}},
        ],
    }
    response = stack.process_llm_response(message)
    assert response.tool_call_result == "x"
    assert response.messages is not None
    assert response.messages[1] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}],
    }


def test_bad_arguments_fail_with_a_retry_prompt() -> None:
    stack = Orchestrator({"calc": Calculator()})
    response = stack.process_llm_response('{"tool": "add", "arguments": {"a": 1}}')
    assert (response.call_executed, response.call_failed) == (False, True)
    assert response.call_detail == (
        "add: argument 'b': required argument is missing (rule: required)"
    )
    assert response.retry_prompt is not None
    assert response.retry_prompt.startswith(
        "The tool call could not be carried out:\n- add: argument 'b'"
    )
    assert response.retry_prompt.endswith("Available tools: add.")


def test_a_driver_exception_becomes_a_failed_call_not_a_crash() -> None:
    class Crashing(Calculator):
        def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
            raise KeyError("secret")

    response = Orchestrator({"c": Crashing()}).process_llm_response(
        '{"tool": "add", "arguments": {"a": 1, "b": 2}}'
    )
    assert response.call_failed
    assert response.call_detail == "add failed: KeyError: 'secret'"


def test_unknown_tools_fail_with_the_tool_list_or_pass_through_in_a_chain() -> None:
    text = '{"tool": "weather", "arguments": {}}'
    failing = Orchestrator({"calc": Calculator()}).process_llm_response(text)
    assert failing.call_failed
    assert failing.call_detail == "unknown tool 'weather'"
    assert failing.retry_prompt is not None
    assert "Available tools: add." in failing.retry_prompt
    chained = Orchestrator({"calc": Calculator()}, on_unknown="pass")
    assert chained.process_llm_response(text) == DriverResponse()
    # a native call id always gets an answer, even for an unknown tool
    native = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
        ],
    }
    answered = Orchestrator({"calc": Calculator()}).process_llm_response(native)
    assert answered.messages is not None
    assert answered.messages[-1] == {
        "role": "tool",
        "tool_call_id": "call_9",
        "content": "error: unknown tool 'weather'",
    }


def test_answers_and_prose_are_not_calls() -> None:
    stack = Orchestrator({"calc": Calculator()}, on_unknown="fail")
    for text in ("The sum is 5.", '{"name": "Ann", "age": 3}', "Use {braces} freely."):
        assert stack.process_llm_response(text).is_empty, text


def test_standalone_drivers_are_chained_after_the_tools() -> None:
    stack = Orchestrator({"calc": Calculator(), "greet": Greeter()})
    assert names(stack) == ["add"]
    assert stack.process_llm_response("greet:Ann").tool_call_result == "hello Ann"
    assert (
        stack.process_llm_response(
            '{"tool": "add", "arguments": {"a": 1, "b": 1}}'
        ).tool_call_result
        == 2
    )
    assert stack.process_llm_response("nothing to do").is_empty
    assert "To greet, answer greet:<name>." in stack.get_driver_system_message()


def test_consent_approves_edits_or_denies_each_call_before_it_runs() -> None:
    calc = Calculator()
    seen: list[ToolCall] = []

    def consent(call: ToolCall) -> bool | str | ToolCall:
        seen.append(call)
        if call.arguments["a"] == 666:
            return False
        if call.arguments["a"] == 13:
            return "13 is unlucky"
        if call.arguments["a"] < 0:
            return call.with_arguments({**call.arguments, "a": 0})
        return True

    stack = Orchestrator({"calc": calc}, consent=consent)
    denied = stack.process_llm_response('{"tool": "add", "arguments": {"a": 666, "b": 1}}')
    assert denied.call_failed
    assert denied.call_detail == "the call of 'add' was not approved"
    assert denied.retry_prompt == (
        "The call of add was not approved. Do not call it again unless asked."
    )
    reasoned = stack.process_llm_response('{"tool": "add", "arguments": {"a": 13, "b": 1}}')
    assert reasoned.call_detail == "the call of 'add' was not approved: 13 is unlucky"
    assert reasoned.retry_prompt == (
        "The call of add was not approved: 13 is unlucky. Do not call it again unless asked."
    )
    assert calc.calls == []
    edited = stack.process_llm_response('{"tool": "add", "arguments": {"a": -5, "b": 1}}')
    assert edited.tool_call_result == 1
    assert calc.calls == [("add", {"a": 0, "b": 1})]
    assert [c.arguments["a"] for c in seen] == [666, 13, -5]


def test_detect_and_execute_split_the_call_for_the_client() -> None:
    calc = Calculator()
    stack = Orchestrator({"calc": calc})
    detection = stack.detect('{"tool": "add", "arguments": {"a": 4, "b": 4}}')
    assert [(c.name, dict(c.arguments)) for c in detection.calls] == [("add", {"a": 4, "b": 4})]
    assert calc.calls == []  # nothing ran yet
    assert stack.execute(detection).tool_call_result == 8


def test_the_prompt_lists_every_tool_with_its_schema() -> None:
    stack = Orchestrator({"calc": Calculator()})
    described = json.loads(stack.get_function_description())
    assert described == [
        {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {
                "type": "object",
                "properties": {
                    "a": {"type": "number", "description": "First addend."},
                    "b": {"type": "number", "description": "Second addend."},
                },
                "required": ["a", "b"],
                "additionalProperties": False,
            },
        }
    ]
    assert '{"tool": "<tool name>", "arguments"' in stack.get_driver_system_message()


def test_a_tool_call_that_hangs_times_out_as_a_failed_call() -> None:
    import threading

    release = threading.Event()

    class Slow(Calculator):
        def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
            release.wait(30)
            return "late"

    try:
        response = Orchestrator({"slow": Slow()}, call_timeout=0.2).process_llm_response(
            '{"tool": "add", "arguments": {"a": 1, "b": 1}}'
        )
    finally:
        release.set()
    assert (response.call_executed, response.call_failed) == (False, True)
    assert response.call_detail == "add did not finish within 0.2 s"


def test_while_streaming_a_call_that_may_go_on_is_not_run_yet() -> None:
    calc = Calculator()
    stack = Orchestrator({"calc": calc})
    partial = '{"tool": "add", "arguments": {"a": 1, "b": 2}'  # its closing brace may be coming
    assert stack.process_llm_response(partial, streaming=True).is_empty
    assert calc.calls == []
    final = stack.process_llm_response(partial)  # the stream ended here: heal and run
    assert final.tool_call_result == 3
    assert final.call_detail == "add: healed (added a missing closing brace)"


class _Odd(Calculator):
    """Results a model cannot be given, and errors that look like the orchestrator's own."""

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        if arguments["a"] == 1:
            return {(1, 2): "a tuple key"}
        raise TimeoutError("the backend's socket timed out")


def test_a_result_json_cannot_carry_and_a_tools_own_timeout_are_failed_calls() -> None:
    stack = Orchestrator({"odd": _Odd()})
    unserializable = stack.process_llm_response('{"tool": "add", "arguments": {"a": 1, "b": 1}}')
    assert (unserializable.call_executed, unserializable.call_failed) == (False, True)
    assert (
        unserializable.call_detail
        == "add failed: TypeError: keys must be str, int, float, bool or None, not tuple"
    )
    timed_out = stack.process_llm_response('{"tool": "add", "arguments": {"a": 2, "b": 1}}')
    assert timed_out.call_detail == "add failed: TimeoutError: the backend's socket timed out"


class _Crashing(Greeter):
    def process_llm_response(
        self, llm_response: str | dict[str, Any], streaming: bool = False
    ) -> DriverResponse:
        raise KeyError("state")


def test_a_chained_driver_that_raises_is_a_failed_response() -> None:
    response = Orchestrator({"calc": Calculator(), "crash": _Crashing()}).process_llm_response(
        "greet:Ann"
    )
    assert (response.call_failed, response.call_detail) == (
        True,
        "driver 'crash' failed: KeyError: 'state'",
    )


def test_a_call_edited_by_consent_is_checked_and_routed_again() -> None:
    calc, echo = Calculator(), Echo()

    def consent(call: ToolCall) -> ToolCall:
        if call.name == "calc__add":
            return call.with_arguments({"a": "not a number", "b": 1})
        return ToolCall("calc__add", {"a": 2, "b": 3})

    stack = Orchestrator({"calc": calc, "echo": echo}, consent=consent)
    invalid = stack.process_llm_response('{"tool": "calc__add", "arguments": {"a": 1, "b": 1}}')
    assert invalid.call_failed
    assert invalid.call_detail is not None
    assert "argument 'a': expected number, got string 'not a number'" in invalid.call_detail
    assert calc.calls == []
    rerouted = stack.process_llm_response('{"tool": "echo", "arguments": {"text": "x"}}')
    assert rerouted.tool_call_result == 5
    assert calc.calls == [("add", {"a": 2, "b": 3})]


def test_executing_a_detection_without_calls_is_the_empty_response() -> None:
    stack = Orchestrator({"calc": Calculator()})
    assert stack.execute(stack.detect("No call here.")).is_empty


def test_importing_the_orchestrator_imports_nothing_it_runs_calls_with() -> None:
    # `import mcs_host; mcs_host.Orchestrator` costs less than the reference SDK's import
    # (scripts/bench_import.py) because the module imports at its top only the driver
    # interfaces and the standard library (no dataclasses either: inspect and ast come with
    # it); the contract, detection with its families' patterns, validation, routing and
    # running come with the first orchestrator made
    import ast
    from pathlib import Path

    from mcs_host.orchestration import orchestrator

    tree = ast.parse(Path(orchestrator.__file__).read_text("utf-8"))
    imported = set()
    for node in tree.body:  # the module's top level: not under `if TYPE_CHECKING:`
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
    assert imported == {
        "__future__",
        "collections",
        "collections.abc",
        "mcs_host._version",
        "mcs_host.interfaces",
        "re",
        "threading",
        "typing",
    }
