"""The upstream-rows benchmark (scripts/bench_upstream.py) scores a row by what the host ran.

A row is correct only when the calls that ran are the expected ones, names and arguments of the
same JSON types, in order: an extra call, a missing one, or ``1`` for ``true`` is wrong. A row
whose test says nothing may run counts as running what must not run as soon as anything runs.
Every chunking of a text puts the whole text back together, and a schema the host refuses still
measures the row (its tools offered untyped). The rows here are written for this test.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

ADD = '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(SCRIPTS))  # the benchmarks import _bench by name
    return importlib.import_module("bench_upstream")


def row(bench: ModuleType, text: str, expected: list[tuple[str, Any]], **fields: Any) -> Any:
    data = {
        "source": "ours::" + text[:20],
        "family": fields.pop("family", "hermes"),
        "text": text,
        "tools": fields.pop("tools", ["add"]),
        "expected": [{"name": name, "arguments": args} for name, args in expected],
        "must_not_run": fields.pop("must_not_run", False),
        **fields,
    }
    return bench.Row.parse(data)


def test_json_types_count_but_key_order_does_not(bench: ModuleType) -> None:
    assert bench.same_value({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1.0})
    assert not bench.same_value({"a": True}, {"a": 1})
    assert not bench.same_value({"a": "1"}, {"a": 1})
    assert not bench.same_value([1, 2], [2, 1])
    assert not bench.same_value({"a": None}, {})


def test_the_expected_call_that_ran_is_correct(bench: ModuleType) -> None:
    outcome = bench.measure(row(bench, ADD, [("add", {"a": 1, "b": 2})]))
    assert outcome.ran == (("add", {"a": 1, "b": 2}),)
    assert outcome.correct
    assert not outcome.stream_differences
    assert len(outcome.streamed) == 4


def test_an_extra_call_or_another_value_is_wrong(bench: ModuleType) -> None:
    twice = bench.measure(row(bench, ADD + ADD, [("add", {"a": 1, "b": 2})]))
    assert len(twice.ran) == 2
    assert not twice.correct
    other = bench.measure(row(bench, ADD, [("add", {"a": 1, "b": 3})]))
    assert not other.correct


def test_a_call_that_must_not_run_and_ran_is_reported(bench: ModuleType) -> None:
    outcome = bench.measure(row(bench, ADD, [], must_not_run=True))
    assert outcome.ran_forbidden
    lines, budgets = bench.report([outcome])
    assert "| 1 | 0 | 0.0% | 1 | 1 |" in lines[2]
    assert [b.met for b in budgets] == [False, False, True]


def test_a_tool_the_row_does_not_offer_never_runs(bench: ModuleType) -> None:
    text = '<tool_call>{"name": "drop_table", "arguments": {}}</tool_call>'
    outcome = bench.measure(row(bench, text, [], must_not_run=True))
    assert outcome.ran == ()
    assert outcome.correct
    assert not outcome.ran_forbidden


def test_the_report_counts_scored_rows_and_lists_wrong_ones_by_family(bench: ModuleType) -> None:
    right = bench.measure(row(bench, ADD, [("add", {"a": 1, "b": 2})], family="hermes"))
    wrong = bench.measure(row(bench, "no call here", [("add", {"a": 1})], family="glm"))
    unscored = bench.measure(row(bench, ADD, [], scored=False))
    lines, budgets = bench.report([right, wrong, unscored])
    assert "| 2 | 1 | 50.0% | 0 | 0 |" in lines[2]
    assert "#### glm (1 of 1)" in lines
    assert "### Not scored: the test asserts nothing about the calls (1)" in lines
    assert budgets[0].measured == 50.0


def test_every_chunking_puts_the_text_back_together(bench: ModuleType) -> None:
    text = 'Sure: <tool_call>{"name": "add", "arguments": {"a": "x y"}}</tool_call>\n終わり'
    for chunks in bench.chunkings(text, seed=7).values():
        assert "".join(chunks) == text


def test_a_schema_the_host_refuses_is_offered_untyped(bench: ModuleType) -> None:
    schemas = {"add": {"type": "object", "properties": {"a": {"pattern": "("}}}}  # no regex
    outcome = bench.measure(row(bench, ADD, [("add", {"a": 1, "b": 2})], schemas=schemas))
    assert outcome.correct
    assert "schema refused" in outcome.detail
