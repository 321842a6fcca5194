"""Tool calls written as text: every format, careful healing, and what must not become a call."""

from __future__ import annotations

from typing import Any

import pytest
from sample_drivers import Calculator, Speaker

from mcs_host import Orchestrator, detect
from mcs_host.orchestration.healing import Unhealable, heal

KNOWN = {"add", "echo", "get_weather", "search"}


def calls(text: str, known: set[str] = KNOWN) -> list[tuple[str, Any]]:
    return [
        (c.name, dict(c.arguments) if c.problem is None else c.problem)
        for c in detect(text, known).calls
    ]


FORMATS = [
    ("plain", '{"tool": "add", "arguments": {"a": 1, "b": 2}}', [("add", {"a": 1, "b": 2})]),
    ("name/parameters", '{"name": "add", "parameters": {"a": 1}}', [("add", {"a": 1})]),
    ("tool_name/args", '{"tool_name": "search", "args": {"q": "x"}}', [("search", {"q": "x"})]),
    ("function/input", '{"function": "search", "input": {"q": "x"}}', [("search", {"q": "x"})]),
    ("tool_input", '{"tool": "search", "tool_input": {"q": "x"}}', [("search", {"q": "x"})]),
    ("string arguments", '{"name": "add", "arguments": "{\\"a\\": 2}"}', [("add", {"a": 2})]),
    (
        "nested function",
        '{"function": {"name": "add", "arguments": "{\\"a\\": 3}"}}',
        [("add", {"a": 3})],
    ),
    (
        "fenced",
        'Sure:\n```json\n{"tool": "search", "arguments": {"q": "mcs"}}\n```\nDone.',
        [("search", {"q": "mcs"})],
    ),
    (
        "prose around",
        'I will add. {"tool": "add", "arguments": {"a": 5}} That is all.',
        [("add", {"a": 5})],
    ),
    (
        "think block",
        '<think>maybe {"tool": "search"} first</think>\n{"tool": "add", "arguments": {"a": 1}}',
        [("add", {"a": 1})],
    ),
    (
        "array",
        '[{"tool": "add", "arguments": {"a": 1}}, {"tool": "echo", "arguments": {"text": "x"}}]',
        [("add", {"a": 1}), ("echo", {"text": "x"})],
    ),
    (
        "json lines",
        '{"tool": "add", "arguments": {"a": 1}}\n{"tool": "add", "arguments": {"a": 2}}',
        [("add", {"a": 1}), ("add", {"a": 2})],
    ),
    (
        "concatenated",
        '{"tool": "add", "arguments": {"a": 1}}{"tool": "echo", "arguments": {"text": "y"}}',
        [("add", {"a": 1}), ("echo", {"text": "y"})],
    ),
    (  # SGLang's Llama 3.2 test_invalid_then_valid_json: the first call breaks off where the
        # second begins; the second runs, the first is reported
        "invalid then valid",
        '{"name": "get_weather", "parameters": {{"name": "get_weather", "parameters": {}}',
        [
            ("get_weather", "the call is not readable JSON (expected a key at character 39)"),
            ("get_weather", {}),
        ],
    ),
    (
        "tool_call tags",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>',
        [("get_weather", {"city": "Oslo"}), ("add", {"a": 1})],
    ),
    (  # the server took the stop token off: the call is whole as written
        "tool_call tag at the end of the text",
        'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}',
        [("get_weather", {"city": "Oslo"})],
    ),
    (  # one brace short: mended in a closed tag, but at the end of the text it was cut off
        "unclosed tool_call tag",
        'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}',
        [("get_weather", "the call was cut off (</tool_call> never came); it was not run")],
    ),
    (
        "python_tag json",
        '<|python_tag|>{"name": "search", "parameters": {"q": "llama"}}<|eom_id|>',
        [("search", {"q": "llama"})],
    ),
    (
        "python_tag several",
        '<|python_tag|>{"name": "add", "parameters": {"a": 1}}; '
        '{"name": "add", "parameters": {"a": 2}}',
        [("add", {"a": 1}), ("add", {"a": 2})],
    ),
    (
        "python_tag pythonic",
        '<|python_tag|>search.call(q="llama 3")',
        [("search.call", {"q": "llama 3"})],
    ),
    (
        "function tag",
        '<function=get_weather>{"city": "Rome"}</function>',
        [("get_weather", {"city": "Rome"})],
    ),
    (
        "qwen3-coder xml",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco\n</parameter>\n"
        "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>",
        [("get_weather", {"city": "San Francisco", "days": 2})],
    ),
    (
        "mistral array",
        '[TOOL_CALLS] [{"name": "add", "arguments": {"a": 1, "b": 2}}, '
        '{"name": "echo", "arguments": {"text": "z"}}]',
        [("add", {"a": 1, "b": 2}), ("echo", {"text": "z"})],
    ),
    (
        "mistral named",
        '[TOOL_CALLS]add[ARGS]{"a": 1}[TOOL_CALLS]search[CALL_ID]a1b2c3d4e[ARGS]{"q": "x"}',
        [("add", {"a": 1}), ("search", {"q": "x"})],
    ),
    ("functools", 'functools[{"name": "add", "arguments": {"a": 4}}]', [("add", {"a": 4})]),
    (
        "pythonic",
        "[add(a=1, b=2), echo(text='hi')]",
        [("add", {"a": 1, "b": 2}), ("echo", {"text": "hi"})],
    ),
    ("pythonic fenced", "```python\n[search(q='x')]\n```", [("search", {"q": "x"})]),
    (
        "seed action",
        '{"thought": "need data", "action": {"tool": "search", "args": {"q": "embedding model"}}}',
        [("search", {"q": "embedding model"})],
    ),
    (
        "dsl",
        '@tool search {"namespace": "project:metal", "query": {"text": "embedding"}}',
        [("search", {"namespace": "project:metal", "query": {"text": "embedding"}})],
    ),
    (
        "dsl lines",
        '@tool add {"a": 1}\n@tool echo {"text": "x"}',
        [("add", {"a": 1}), ("echo", {"text": "x"})],
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [(t, e) for _, t, e in FORMATS], ids=[i for i, _, _ in FORMATS]
)
def test_every_text_format_is_detected(text: str, expected: list[tuple[str, Any]]) -> None:
    assert calls(text) == expected


def test_the_mistral_call_id_is_kept() -> None:
    (_, second) = detect(
        '[TOOL_CALLS]add[ARGS]{"a": 1}[TOOL_CALLS]search[CALL_ID]a1b2c3d4e[ARGS]{"q": "x"}'
    ).calls
    assert second.id == "a1b2c3d4e"


def test_the_seed_final_answer_is_an_answer_not_a_call() -> None:
    found = detect('{"final": {"content": {"status": "ok", "upserted": 1}}}')
    assert found.calls == ()
    assert found.has_final
    assert found.final == {"content": {"status": "ok", "upserted": 1}}


HEALED = [
    (
        "trailing comma",
        '{"tool": "add", "arguments": {"a": 1, "b": 2,},}',
        "removed a trailing comma",
    ),
    (
        "comments",
        '{"tool": "add", // adding\n "arguments": {"a": 1, "b": 2 /* two */}}',
        "removed a comment",
    ),
    (
        "python literals",
        "{'tool': 'echo', 'arguments': {'text': 'x', 'loud': True, 'to': None}}",
        "read a Python literal",
    ),
    (
        "single quotes",
        "{'tool': 'add', 'arguments': {'a': 1, 'b': 2}}",
        "read a single-quoted string",
    ),
    ("unquoted keys", '{tool: "add", arguments: {a: 1, b: 2}}', "quoted an unquoted key"),
    (
        "raw newline",
        '{"tool": "echo", "arguments": {"text": "two\nlines"}}',
        "kept a raw newline inside a string",
    ),
    (
        "missing brace",
        '{"tool": "add", "arguments": {"a": 1, "b": 2}',
        "added a missing closing brace",
    ),
]


@pytest.mark.parametrize(
    ("text", "note"), [(t, n) for _, t, n in HEALED], ids=[i for i, _, _ in HEALED]
)
def test_almost_json_is_healed_and_says_so(text: str, note: str) -> None:
    (call,) = detect(text, KNOWN).calls
    assert call.problem is None
    assert note in call.healed
    stack = Orchestrator({"calc": Calculator(), "speaker": Speaker()})
    response = stack.process_llm_response(text)
    assert response.call_executed, response.call_detail
    assert response.call_detail is not None
    assert f"healed ({', '.join(call.healed)})" in response.call_detail


@pytest.mark.parametrize(
    "text",
    [
        '{"tool": "echo", "arguments": {"text": "rm -rf /home/user/impor',
        '{"tool": "add", "arguments": {"a": 1, "b": ',
        '{"tool": "add", "arguments": {"a": {"deep": 1}',
        '<tool_call>\n{"name": "echo", "arguments": {"text": "cut',
        '[TOOL_CALLS]echo[ARGS]{"text": "cut',
        '{"tool": "echo", "arguments": "{\\"text\\": \\"cut off',
    ],
    ids=["string", "value", "two braces", "tool_call", "mistral", "string arguments"],
)
def test_a_call_cut_off_is_reported_and_never_run(text: str) -> None:
    (call,) = detect(text, KNOWN).calls
    assert call.problem is not None
    assert "cut off" in call.problem
    calc = Calculator()
    response = Orchestrator({"speaker": Speaker(), "calc": calc}).process_llm_response(text)
    assert (response.call_executed, response.call_failed) == (False, True)
    assert response.retry_prompt is not None
    assert "cut off" in (response.call_detail or "")
    assert calc.calls == []


@pytest.mark.parametrize(
    "text",
    [
        "The total is 42 and nothing needs a tool.",
        '{"name": "Ann", "age": 31, "city": "Oslo"}',
        'Here is the record: {"name": "Bob", "role": "admin"}.',
        r"Euler: $e^{i\pi} + 1 = 0$ and $\frac{a}{b}$, also \text{name: value}.",
        'Answer in this form: {"tool": "<tool name>", "arguments": {"x": 1}}',
        '{"tool": "{{tool}}", "arguments": {}}',
        "Use {braces}, [brackets] and (parens) freely: {a: b}.",
        'Lists like [1, 2, 3] and maps like {"k": [1]} are data.',
        "[see(note)] is a citation, not a call.",
    ],
    ids=[
        "prose",
        "json answer",
        "record in prose",
        "latex",
        "placeholder",
        "jinja",
        "braces",
        "data",
        "unknown pythonic",
    ],
)
def test_prose_answers_latex_and_placeholders_are_not_calls(text: str) -> None:
    assert detect(text, KNOWN).calls == ()
    assert Orchestrator({"calc": Calculator()}).process_llm_response(text).is_empty


def test_an_unfinished_thought_holds_no_call_yet() -> None:
    assert detect('<think>I could call {"tool": "add", "arguments": {"a": 1}}', KNOWN).calls == ()


def test_several_calls_are_never_dropped_even_when_one_is_broken() -> None:
    text = (
        '{"tool": "add", "arguments": {"a": 1, "b": 1}}\n'
        '{"tool": "add", "arguments": {"a": "x", "b": 1}}\n'
        '{"tool": "echo", "arguments": {"text": "last"}}'
    )
    stack = Orchestrator({"calc": Calculator(), "speaker": Speaker()})
    response = stack.process_llm_response(text)
    assert response.tool_call_result == [2, None, "last"]
    assert (response.call_executed, response.call_failed) == (True, True)
    assert response.call_detail == "add: argument 'a': expected number, got string 'x' (rule: type)"
    assert response.messages is not None
    content = response.messages[1]["content"]
    assert content.count("Result of") == 2
    assert content.count("Error from") == 1


BROKEN_ADD = '{"name": "add", "parameters": {'
"""A call that breaks off where another object begins (a key should come)."""
BROKE_OFF = "the call is not readable JSON (expected a key at character 31)"
CUT_OFF = "the call was cut off (the text ends inside {...}: it was cut off); it was not run"


@pytest.mark.parametrize(
    ("text", "expected", "ran"),
    [
        (  # the model began again: the call after the break runs, once
            BROKEN_ADD + '{"name": "add", "parameters": {"a": 2, "b": 3}}',
            [("add", BROKE_OFF), ("add", {"a": 2, "b": 3})],
            [{"a": 2, "b": 3}],
        ),
        (  # in prose, an object where a comma should be
            'Adding. {"name": "add", "parameters": {"a": 1 {"name": "add", "parameters": '
            '{"a": 2, "b": 3}}',
            [
                ("add", "the call is not readable JSON (expected ',' or '}' at character 38)"),
                ("add", {"a": 2, "b": 3}),
            ],
            [{"a": 2, "b": 3}],
        ),
        (  # the second is cut off at the end of the text: neither runs
            BROKEN_ADD + '{"name": "add", "parameters": {"a": 2, "b": 3',
            [("add", BROKE_OFF), ("add", CUT_OFF)],
            [],
        ),
        (  # the second lacks only its brace, but the first never closes either: cut off
            BROKEN_ADD + '{"name": "add", "parameters": {"a": 2, "b": 3}',
            [
                ("add", BROKE_OFF),
                ("add", "the call was cut off (the object around it never closes); it was not run"),
            ],
            [],
        ),
        (  # the first breaks off at a word, not where an object begins: what follows is its
            # own, and the object in it an argument, never a call
            '{"name": "add", "parameters": {"a": oops, "b": {"name": "add", "parameters": '
            '{"a": 2, "b": 3}}',
            [
                (
                    "add",
                    "the call is not readable JSON (no value can start with 'o' at character 36)",
                )
            ],
            [],
        ),
        (  # an object where a value may stand is a value: an argument of a call cut off
            '{"name": "add", "parameters": {"a": 1, "b": {"name": "add", "parameters": '
            '{"a": 2, "b": 3}}',
            [("add", CUT_OFF)],
            [],
        ),
    ],
    ids=[
        "begun again",
        "in prose",
        "second cut off",
        "second one brace short",
        "broken at a word",
        "an argument",
    ],
)
def test_a_call_that_breaks_off_where_another_begins_runs_only_the_whole_one(
    text: str, expected: list[tuple[str, Any]], ran: list[dict[str, Any]]
) -> None:
    assert calls(text) == expected
    calc = Calculator()
    response = Orchestrator({"calc": calc}).process_llm_response(text)
    assert [arguments for _, arguments in calc.calls] == ran
    assert response.call_failed  # the broken call is answered, never run
    assert response.retry_prompt is not None


def test_valid_json_stays_byte_exact() -> None:
    text = '{"tool": "echo", "arguments": {"text": "C:\\\\path\\\\new \\u00e9 \\"q\\" 1.0"}}'
    (call,) = detect(text, KNOWN).calls
    assert call.healed == ()
    assert call.arguments == {"text": 'C:\\path\\new é "q" 1.0'}
    response = Orchestrator({"speaker": Speaker()}).process_llm_response(text)
    assert response.messages is not None
    assert response.messages[0]["content"] == text
    assert heal('{"n": 1.50, "s": "a\\\\d"}') == ({"n": 1.5, "s": "a\\d"}, ())


def test_healing_keeps_backslashes_it_does_not_understand() -> None:
    value, notes = heal(r"{'pattern': '\d+\.\w'}")
    assert value == {"pattern": r"\d+\.\w"}
    assert notes == ("read a single-quoted string",)


def test_healing_refuses_what_it_cannot_read_for_sure() -> None:
    with pytest.raises(Unhealable) as cut:
        heal('{"a": "never ends')
    assert cut.value.truncated
    with pytest.raises(Unhealable) as garbage:
        heal('{"a": nope}')
    assert not garbage.value.truncated


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('Running it now: {"tool": "search"} and then we see.', [("search", {})]),
        ("Running it now: {'tool': 'get_weather'}, wait.", [("get_weather", {})]),
        ('Then {"tool": "look up"} runs.', [("look up", {})]),
        ('A record {"name": "Ann"}, then {"tool": "add", "args": {"a": 1}}.', [("add", {"a": 1})]),
        ('Notes: {"k": 1}. {"final": "done"}', []),
        ('The tool {"name": "get_weather"} exists.', []),
    ],
    ids=[
        "known name",
        "single quotes",
        "name with a space",
        "arguments",
        "final answer",
        "a name alone",
    ],
)
def test_objects_in_prose_are_calls_by_an_argument_key_or_an_offered_tool(
    text: str, expected: list[tuple[str, Any]]
) -> None:
    assert calls(text, {*KNOWN, "look up"}) == expected


def test_an_unreadable_object_in_prose_with_no_call_in_it_is_prose() -> None:
    # a record cut off in the middle, with a name that is no tool and no arguments
    text = 'The last record was {"name": "Ann", "bio": "she wrote that'
    assert detect(text, KNOWN).calls == ()
    # the same with an argument key is a call cut off, reported and not run
    (call,) = detect(text.replace('"bio"', '"arguments"'), KNOWN).calls
    assert call.problem is not None


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("[" * 100_000 + "]" * 100_000, None),
        (
            '{"tool": "add", "arguments": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}",
            "nested too deeply",
        ),
        ("<|python_tag|>add(a={[1]: 2})", "an argument is not a literal value"),
        ("<|python_tag|>add(a=1)\x00", "not a readable call list"),
        ({"role": "assistant", "content": None, "tool_calls": 5}, "tool_calls is not a list"),
        ({"object": "response", "output": [], "incomplete_details": "x"}, None),
        ({"candidates": [{"content": ["x"]}]}, None),
        ("[1, " + "9" * 5000 + "]", None),
        ('{"tool": "add", "arguments": {"a": ' + "9" * 5000 + "}}", "a number too long to read"),
        ({"object": "response", "output": 5}, None),
        ({"object": "response", "output": [{"type": "message", "content": 5}]}, None),
    ],
    ids=[
        "deep array",
        "deep arguments",
        "unhashable key",
        "nul byte",
        "tool_calls",
        "details",
        "gemini",
        "long integer in prose",
        "long integer argument",
        "output not a list",
        "content not a list",
    ],
)
def test_no_model_output_raises_out_of_the_orchestrator(output: Any, expected: str | None) -> None:
    calc = Calculator()
    response = Orchestrator({"calc": calc}).process_llm_response(output)
    assert calc.calls == []
    if expected is None:
        assert not response.call_executed
    else:
        assert response.call_failed
        assert expected in (response.call_detail or "")


# -- linear time: inputs built to make a scanner read the text again from every opening ------

ADVERSARIAL = {
    "think openers": "<think>" * 30_000,
    "thinking openers, mixed case": "<THINKING>" * 20_000,
    # every family's reasoning opening inside another's: one block, read to its own closing
    "reasoning openings of every family, nested, never closed": (
        "[THINK]<think><seed:think><mm:think><|channel><|START_THINKING|><|inner_prefix|>"
        "<|open|>think<|sep|><|channel|>analysis<|message|>" * 2_500
    ),
    "blocks closed, other families' tags and quoted closings inside": (
        "[THINK]<think></think><seed:think>[/THINK]<|channel></think>[THINK]<channel|>"
        '</think>{"tool": "add", "arguments": {' * 4_000
    ),
    "pythonic openers of an offered tool": "[get_weather(" * 15_000,
    "line-protocol calls never closed": "@tool add {\n" * 20_000,
    "unclosed calls of an offered tool": '{"tool": "add", "arguments": {' * 6_000,
    "nested objects with a name key": '{"name": "add", "arguments": ' * 6_000,
    "objects nested to the end": '{"a":' * 40_000 + "}" * 40_000,
    "quotes flipping between braces": 'x"{"tool": "add", "arguments": {' * 6_000,
    "apostrophes and braces": "it's {'a': [" * 15_000,
    "tag openers": "<tool_call>" * 20_000,
    "mistral names never closed": "[TOOL_CALLS]add{" * 15_000,
    "fences never closed": "```json\n{\n" * 20_000,
    "harmony calls never ended": (
        "<|start|>assistant<|channel|>commentary to=functions.add <|constrain|>json"
        '<|message|>{"a": ' * 6_000
    ),
    "invokes never closed, each parameter closed": (
        '<minimax:tool_call><invoke name="add"><parameter name="a">1</parameter>' * 6_000
    ),
    "functions never closed, each parameter closed": (
        "<tool_call><function=add><parameter=a>1</parameter>" * 8_000
    ),
    "GLM calls never closed, each value closed": (
        "<tool_call>add<arg_key>a</arg_key><arg_value>1</arg_value>" * 8_000
    ),
    "GLM keys never closed": "<tool_call>add" + "<arg_key>a" * 20_000,
    "Step-3 calls without a section, never closed": (
        '<\uff5ctool_call_begin\uff5c>function<\uff5ctool_sep\uff5c><steptml:invoke name="add">'
        '<steptml:parameter name="a">1' * 6_000
    ),
    "Kimi calls with a bare counter, never closed": (
        "<|tool_calls_section_begin|>"
        + '<|tool_call_begin|>0<|tool_call_argument_begin|>{"a": ' * 10_000
    ),
    "Kimi K3 calls never closed": (
        "<|open|>tools<|sep|>"
        + '<|open|>call tool="add" index="1"<|sep|><|open|>argument key="a" type="string"<|sep|>1'
        * 8_000
    ),
    "Gemma 4 calls never closed": '<|tool_call>call:add{a:<|"|>1' * 15_000,
    "Apertus blocks never closed": '<|tools_prefix|>[{"add": {"a": ' * 10_000,
    "MiniMax-M3 tags never closed": "]<]minimax[>[<tool_call>"
    + '\n]<]minimax[>[<invoke name="add">' * 5_000
    + "]<]minimax[>[<a>]<]minimax[>[<b>1" * 10_000,
    "MiniCPM-5 functions never closed": '<function name="add"><param name="a">1' * 10_000,
    "Functionary headers, JSON never closed": '>>>add\n{"a": ' * 15_000,
    # a run of whitespace where a format allows some: read once, not once per character
    "whitespace before a harmony channel": " " * 100_000 + "<|channel|>x",
    "whitespace in a harmony header": "<|channel|>commentary" + " " * 100_000 + "x",
    "whitespace in a Kimi call id": (
        "<|tool_calls_section_begin|><|tool_call_begin|>" + " " * 100_000 + "x"
    ),
    "whitespace around a DeepSeek fence": (
        "<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>function"
        "<\uff5ctool\u2581sep\uff5c>add"
        + " " * 50_000
        + "```json"
        + " " * 50_000
        + "{}"
        + " " * 50_000
    ),
    "whitespace after a fence": "```" + " " * 100_000 + "```",
}


@pytest.mark.parametrize("text", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_adversarial_responses_run_nothing_and_end(text: str) -> None:
    # each of these took minutes to hours before detection became linear (the benchmark
    # scripts/bench_detection.py measures them at 1 and 10 MB); here they must end and run
    # nothing, whatever they are reported as
    calc = Calculator()
    response = Orchestrator({"calc": calc}).process_llm_response(text)
    assert calc.calls == []
    assert not response.call_executed


def test_the_bracket_map_answers_as_reading_on_from_each_bracket_does() -> None:
    import random

    from mcs_host.orchestration.scanning import Brackets, closing

    generator = random.Random(14)  # noqa: S311 - reproducible inputs, not secrets
    for _ in range(400):
        text = "".join(generator.choice("{}[]\"'\\ab ") for _ in range(generator.randrange(60)))
        for quotes in (False, True):
            brackets = Brackets(text, quotes)
            answered = 0
            for index, char in enumerate(text):
                if char in "{[":
                    answer = brackets.closing(index)
                    if answer is not None:
                        answered += 1
                        assert answer == closing(text, index, quotes), (text, index, quotes)
            assert answered or not any(c in "{[" for c in text) or brackets._passes == 8


@pytest.mark.parametrize(
    ("text", "fast"),
    [
        ('{"tool": "add", "arguments": {"a": 1, "b": 2}}', True),
        ('  {"name": "search", "parameters": {"q": "x"}}\n', True),
        ('{"name": "search", "arguments": {}}', True),
        ('{"tool": "add", "arguments": {"a": "<think>"}}', False),  # a tag: the formats decide
        ('{"tool": "add", "arguments": {"a": [1, 2]}}', False),  # "[" opens pythonic lists
        ('{"tool": "nope", "arguments": {"a": 1}}', False),  # not an offered tool
        ('{"tool": "add", "arguments": {"a": 1}, "id": "x"}', False),  # another key
        ('{"tool": "add", "arguments": "{\\"a\\": 1}"}', False),  # arguments as a string
        ('{"tool": "add", "arguments": {"q": "@tool add {}"}}', False),  # a marker
        ('{"tool": "add", "arguments": {"q": "[TOOL_CALLS]"}}', False),
        ('{"final": "done", "tool": "add"}', False),
    ],
)
def test_the_fast_path_reads_a_clean_call_as_the_detector_does(text: str, fast: bool) -> None:
    from mcs_host.orchestration import detection

    full = detection._from_text(text, KNOWN, None)
    found = detection._clean(text, KNOWN, None)
    if fast:
        assert found == full
    else:
        assert found is None


def test_code_fences_are_read_as_the_markdown_expression_reads_them() -> None:
    import random
    import re

    from mcs_host.orchestration.scanning import fences

    expression = re.compile(r"```[ \t]*([A-Za-z_]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
    pieces = ["```", "`", "json", " ", "\n", "a", "py", "\t", "x`"]
    generator = random.Random(7)  # noqa: S311 - reproducible inputs, not secrets
    for _ in range(5000):
        text = "".join(generator.choice(pieces) for _ in range(generator.randrange(25)))
        assert list(fences(text)) == expression.findall(text), text


def test_a_text_format_that_raises_is_skipped_with_a_warning_and_the_response_is_still_read() -> (
    None
):
    # a host plugin's format (mcs_host_codecs) is code the host does not control: its bug
    # must not take down every response, nor hide the calls other formats read
    from mcs_host import TextFormat

    def broken(text: str, known: Any) -> None:
        raise KeyError("oops")

    stack = Orchestrator(
        {"calc": Calculator()}, text_formats=[TextFormat("acme", broken, ("ACME>>",), 10)]
    )
    with pytest.warns(RuntimeWarning, match=r"text format 'acme' raised KeyError\('oops'\)"):
        response = stack.process_llm_response(
            'ACME>> add\n{"tool": "add", "arguments": {"a": 2, "b": 3}}'
        )
    assert (response.call_executed, response.tool_call_result) == (True, 5)


def test_a_text_call_that_failed_alone_is_answered_by_the_retry_prompt_once() -> None:
    response = Orchestrator({"calc": Calculator()}).process_llm_response(
        '{"tool": "add", "arguments": {"a": "x", "b": 1}}'
    )
    assert response.call_failed
    assert response.messages is not None
    (answer,) = [m["content"] for m in response.messages if m["role"] == "user"]
    assert answer == response.retry_prompt
    assert answer.count("expected number, got string 'x'") == 1
