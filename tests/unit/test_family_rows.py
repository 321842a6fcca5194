"""Text shapes from other projects' parser tests that a family now reads as they do, each case
our own and named after the upstream test it follows; and the shapes next to them that are
still not run, because reading them would be a guess."""

from __future__ import annotations

from typing import Any

import pytest

from mcs_host import detect

KNOWN = {
    "get_weather",
    "label",
    "set_date",
    "run",
    "bash",
    "chmod",
    "search",
    "a",
    "b",
    "f",
    "html",
}
LFM2, LFM2_END = "<|tool_call_start|>", "<|tool_call_end|>"


def found(text: str) -> list[tuple[str, Any]]:
    """``(name, arguments)`` per runnable call, ``(name, "problem: ...")`` per failed one."""
    return [
        (c.name, dict(c.arguments) if c.problem is None else f"problem: {c.problem}")
        for c in detect(text, KNOWN).calls
    ]


@pytest.mark.parametrize(
    ("body", "arguments"),
    [
        # vLLM test_lfm2_tool_parser.py::test_tool_call[multiline_string_arg]
        ("[run(cmd='cat > a.txt << END\nx = 1\nEND')]", {"cmd": "cat > a.txt << END\nx = 1\nEND"}),
        # [nul_byte_string_arg]
        ("[run(cmd='printf x\x00y')]", {"cmd": "printf x\x00y"}),
        # [leading_zero_int]: decimal, as a date means it (one digit, or an 8 or a 9)
        ("[set_date(month=07, day=09, year=0089)]", {"month": 7, "day": 9, "year": 89}),
        # [set_arg]: a set is its items in the order written, each once
        ("[label(tags={'ops', 'db', 'ops'})]", {"tags": ["ops", "db"]}),
    ],
)
def test_lfm2_mends_what_has_one_meaning(body: str, arguments: dict[str, Any]) -> None:
    assert found(f"{LFM2}{body}{LFM2_END}") == [(body[1 : body.index("(")], arguments)]


def test_mending_leaves_strings_hex_and_exponents_as_written() -> None:
    body = "[set_date(month='07', day=0x1f, year=2e03)]"  # a raw line break makes it mended
    assert found(f"{LFM2}{body[:-2]}, note='a\nb')]{LFM2_END}") == [
        ("set_date", {"month": "07", "day": 31, "year": 2000.0, "note": "a\nb"})
    ]


@pytest.mark.parametrize(
    "body",
    [
        # vLLM [nested_quote]: which quote closes the string is a guess
        "[bash(command='grep -n 'foo' x.py')]",
        # vLLM [nested_python_c]
        "[bash(command='python3 -c \"print('\\,')\"')]",
        # a C-style octal file mode (493) or decimal 755: a guess either way
        "[chmod(path='run.sh', mode=0755)]",
        "[set_date(month=07, day=010)]",
    ],
)
def test_lfm2_does_not_guess_a_closing_quote_or_an_octal_number(body: str) -> None:
    calls = detect(f"{LFM2}{body}{LFM2_END}", KNOWN).calls
    assert len(calls) == 1
    assert calls[0].problem is not None
    assert calls[0].problem.startswith("not a readable call list")


def test_a_good_pythonic_call_runs_beside_a_broken_sibling() -> None:
    # vLLM test_pythonic_tool_parser.py::test_good_call_survives_unparsable_sibling
    text = "[get_weather(city='Oslo', unit='c'), f(a='it 's', b='x')]"
    assert found(text) == [
        ("get_weather", {"city": "Oslo", "unit": "c"}),
        (
            "f",
            "problem: not a readable call list: unterminated string literal (detected at line 1)",
        ),
    ]
    # a broken call first: no call can be placed, and without a marker the list is prose
    assert found("[f(a='it 's'), get_weather(city='Oslo')]") == []


def test_a_good_lfm2_call_runs_beside_a_broken_sibling_only_in_a_closed_block() -> None:
    body = "[get_weather(city='Oslo'), f(a='it 's')]"
    assert [c.problem is None for c in detect(f"{LFM2}{body}{LFM2_END}", KNOWN).calls] == [
        True,
        False,
    ]
    cut = detect(f"{LFM2}{body}", KNOWN).calls  # at the end of the text, no end tag
    assert all(c.problem is not None for c in cut)


def test_every_pythonic_list_after_prose_runs() -> None:
    # SGLang TestPythonicDetector::test_parse_streaming_multiple_tool_calls
    text = "[get_weather(city='Oslo')] then [search(query='hotels')]"
    assert found(text) == [("get_weather", {"city": "Oslo"}), ("search", {"query": "hotels"})]
    # a list of a tool not on offer is prose
    assert found("[get_weather(city='Oslo')] not [book(x=1)]") == [
        ("get_weather", {"city": "Oslo"})
    ]


def test_functiongemma_reads_escaped_strings_without_commas() -> None:
    # vLLM test_functiongemma_tool_parser.py::test_streamed_arguments_form_valid_json_with_two_keys
    text = (
        "<start_function_call>call:get_weather{city:<escape>Oslo<escape>"
        "unit:<escape>c<escape>days:3}<end_function_call>"
    )
    assert found(text) == [("get_weather", {"city": "Oslo", "unit": "c", "days": 3})]


def test_functiongemma_an_escaped_number_stays_a_string() -> None:
    # vLLM ...::test_streamed_arguments_form_valid_json_with_three_keys reads 10; <escape>
    # marks a string, and a tool whose schema takes an integer has it coerced there
    text = (
        "<start_function_call>call:search{query:<escape>py<escape>"
        "limit:<escape>10<escape>}<end_function_call>"
    )
    assert found(text) == [("search", {"query": "py", "limit": "10"})]


COHERE = "<|START_ACTION|>{}<|END_ACTION|>"


def test_cohere_runs_the_well_formed_call_beside_a_malformed_one() -> None:
    # Ollama cohere_test.go::TestCohereParseMalformedActions[unquoted value]
    body = (
        '[{"tool_call_id": "0", "tool_name": "a", "parameters": {"at": 09:15}},'
        ' {"tool_call_id": "1", "tool_name": "get_weather", "parameters": {"city": "Oslo"}}]'
    )
    calls = detect(COHERE.format(body), KNOWN).calls
    assert [(c.name, c.problem is None, c.id) for c in calls] == [
        ("a", False, None),
        ("get_weather", True, "1"),
    ]
    assert calls[1].arguments == {"city": "Oslo"}


def test_cohere_reads_objects_without_a_comma_between_them() -> None:
    # Ollama cohere_test.go::TestCohereParseMalformedActions[missing comma]
    body = (
        '[{"tool_call_id": "0", "tool_name": "a", "parameters": {}}'
        '{"tool_call_id": "1", "tool_name": "b", "parameters": {"q": "[x}"}}]'
    )
    assert found(COHERE.format(body)) == [("a", {}), ("b", {"q": "[x}"})]


def test_cohere_array_of_more_than_objects_runs_nothing() -> None:
    body = '[{"tool_name": "a", "parameters": {"x": 1:2}}, oops]'
    calls = detect(COHERE.format(body), KNOWN).calls
    assert calls
    assert all(c.problem is not None for c in calls)


def test_minicpm5_cdata_may_hold_the_closing_tag() -> None:
    # llama.cpp test-chat.cpp MiniCPM5-1B "CDATA value"
    text = (
        '<function name="html"><param name="body"><![CDATA[<b>x</b> </param> & y]]></param>'
        '<param name="n">2</param></function>'
    )
    assert found(text) == [("html", {"body": "<b>x</b> </param> & y", "n": 2})]


def test_minicpm5_a_param_closed_early_is_still_more_than_params() -> None:
    text = '<function name="html"><param name="body">a </param> b</param></function>'
    assert found(text) == [("html", "problem: the function holds more than <param> tags")]
