"""Measure detection against rows taken from other projects' tool-call parser tests.

    python scripts/bench_upstream.py --rows FILE [--json]

``FILE`` holds one JSON object a line, written down from the parser tests of vLLM, SGLang,
llama.cpp and Ollama (kept outside this repository): ``source`` (project, test file and
test), ``family``, ``text`` (the model output the test feeds its parser), ``tools`` (the
tool names it declares), ``expected`` (the calls it expects, ``{"name", "arguments"}`` in
order), ``must_not_run`` (the test says no call may come out) and ``note``; optionally
``schemas`` (a tool name's arguments schema, when the test declares one) and ``scored``
(``false`` when the test asserts nothing about the calls: such a row is listed, not counted).

Each text goes through ``Orchestrator.process_llm_response`` with one stub tool per name of
``tools`` and ``expected``, which takes any arguments (or the row's schema) and records the
calls that reach it. A row is correct when the calls that ran equal the expected ones, names
and arguments, in order: nothing else, nothing missing, no argument of another type. The same
text is then fed to ``Orchestrator.stream()`` at four chunkings (a character, three
characters, a word or mark at a time, random sizes of 1 to 12); each must run what the whole
text ran. The budgets: 97% of the scored rows correct, nothing run that a test says must not
run, and every chunking running what the whole text runs.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _bench import Budget, emit
from pydantic import PrivateAttr

from mcs_host import DriverMeta, MCSToolDriver, Orchestrator, Tool

Call = tuple[str, Any]
"""A call that ran: the tool's name and its arguments."""

_ANY_ARGUMENTS: dict[str, Any] = {"type": "object"}
_EXCERPT = 160


@dataclass(frozen=True)
class Row:
    """One upstream test's model output and the calls it expects."""

    source: str
    family: str
    text: str
    tools: tuple[str, ...]
    expected: tuple[Call, ...]
    must_not_run: bool
    note: str = ""
    schemas: Mapping[str, Any] = field(default_factory=dict)
    scored: bool = True

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> Row:
        """The row in ``data``, one line of the rows file."""
        expected = tuple((c["name"], c.get("arguments") or {}) for c in data["expected"])
        return cls(
            source=data["source"],
            family=data.get("family") or "unknown",
            text=data["text"],
            tools=tuple(data.get("tools") or ()),
            expected=expected,
            must_not_run=bool(data.get("must_not_run")),
            note=data.get("note") or "",
            schemas=data.get("schemas") or {},
            scored=data.get("scored", True) is not False,
        )

    @property
    def offered(self) -> tuple[str, ...]:
        """The tools offered: the declared ones, then any the test expects but did not
        declare (upstream parsers return a call of any name)."""
        names = dict.fromkeys(self.tools)
        names.update(dict.fromkeys(name for name, _ in self.expected))
        return tuple(names)


@dataclass(frozen=True)
class Outcome:
    """What the host ran for one row, whole and streamed."""

    row: Row
    ran: tuple[Call, ...]
    detail: str
    """How the whole text was read: the format, the calls and their problems, or the error."""
    streamed: Mapping[str, tuple[Call, ...]] = field(default_factory=dict)
    """Per chunking, the calls that ran."""

    @property
    def correct(self) -> bool:
        return same_calls(self.ran, self.row.expected)

    @property
    def ran_forbidden(self) -> bool:
        """A call ran that the test says must not run."""
        return self.row.must_not_run and bool(self.ran)

    @property
    def stream_differences(self) -> list[str]:
        """The chunkings that ran something else than the whole text."""
        return [name for name, ran in self.streamed.items() if not same_calls(ran, self.ran)]


def same_value(left: Any, right: Any) -> bool:
    """JSON equality: a boolean is no number, 3 and 3.0 are the same number, a key's order
    does not matter, a list's does."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(same_value(left[k], right[k]) for k in left)
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(map(same_value, left, right))
    return type(left) is type(right) and left == right


def same_calls(got: Sequence[Call], expected: Sequence[Call]) -> bool:
    """Whether ``got`` are the ``expected`` calls, names and arguments, in order."""
    return len(got) == len(expected) and all(
        g_name == e_name and same_value(g_args, e_args)
        for (g_name, g_args), (e_name, e_args) in zip(got, expected, strict=True)
    )


class _Offered(Tool):
    """A tool whose arguments' schema is given whole (a ``Tool`` builds it from parameters)."""

    _schema: dict[str, Any] = PrivateAttr(default_factory=lambda: dict(_ANY_ARGUMENTS))

    def input_schema(self) -> dict[str, Any]:
        return self._schema


class _Recorder(MCSToolDriver):
    """Offers a row's tools and records each call that reaches one."""

    meta = DriverMeta(id="bench-upstream", name="upstream", version="1.0.0")

    def __init__(self, schemas: Mapping[str, dict[str, Any]]) -> None:
        self.ran: list[Call] = []
        self._tools: list[Tool] = []
        for name, schema in schemas.items():
            tool = _Offered(name=name, description=f"The {name} tool.")
            tool._schema = schema  # set once, before it is offered
            self._tools.append(tool)

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        self.ran.append((tool_name, arguments))
        return "ok"


class _Host:
    """An orchestrator offering one row's tools; ``fresh()`` forgets what ran."""

    def __init__(self, row: Row) -> None:
        self.refused: list[str] = []
        schemas = {name: row.schemas.get(name, _ANY_ARGUMENTS) for name in row.offered}
        try:
            self._make(schemas)
        except ValueError as exc:  # a schema the host refuses: offer every tool untyped
            self.refused.append(str(exc))
            self._make(dict.fromkeys(row.offered, _ANY_ARGUMENTS))

    def _make(self, schemas: Mapping[str, dict[str, Any]]) -> None:
        self._schemas = dict(schemas)
        self.recorder = _Recorder(self._schemas)
        self.orchestrator = Orchestrator({"upstream": self.recorder})

    def fresh(self) -> _Host:
        self._make(self._schemas)
        return self


def chunkings(text: str, seed: int) -> dict[str, list[str]]:
    """The four ways a row's text is cut into chunks."""
    sizes = random.Random(seed)  # noqa: S311 - a reproducible cut, no secret
    cuts: list[str] = []
    start = 0
    while start < len(text):
        width = sizes.randint(1, 12)
        cuts.append(text[start : start + width])
        start += width
    return {
        "1 character": list(text),
        "3 characters": [text[i : i + 3] for i in range(0, len(text), 3)],
        "words and marks": re.findall(r"\w+|\s+|[^\w\s]", text),
        "random 1-12": cuts,
    }


def _describe(orchestrator: Orchestrator, text: str) -> str:
    """How the host reads ``text``: its format and each call with its problem."""
    try:
        found = orchestrator.detect(text)
    except Exception as exc:  # reported with the row
        return f"detection raised {type(exc).__name__}: {exc}"
    if not found.calls:
        return f"format {found.format or 'none'}, no call"
    parts = [
        f"{call.name}" + (f" ({call.problem[:90]})" if call.problem else "") for call in found.calls
    ]
    return f"format {found.format}: " + "; ".join(parts)


def _run(host: _Host, work: Callable[[Orchestrator], object]) -> tuple[tuple[Call, ...], str]:
    """The calls that ran while ``work`` used a fresh orchestrator, and what went wrong: the
    error it raised, or the ``call_detail`` of the response it returned."""
    host.fresh()
    try:
        response = work(host.orchestrator)
    except Exception as exc:  # a row that breaks the host is a wrong row
        return tuple(host.recorder.ran), f"raised {type(exc).__name__}: {exc}"
    said = getattr(response, "call_detail", None)
    return tuple(host.recorder.ran), f"the host said: {said[:200]}" if said else ""


def _streamed(chunks: list[str]) -> Callable[[Orchestrator], object]:
    def work(orchestrator: Orchestrator) -> object:
        stream = orchestrator.stream()
        for chunk in chunks:
            stream.feed(chunk)
        return stream.finish()

    return work


def measure(row: Row, seed: int = 0, streaming: bool = True) -> Outcome:
    """Run ``row``'s text whole, and (with ``streaming``) at each chunking."""
    host = _Host(row)
    ran, said = _run(host, lambda o: o.process_llm_response(row.text))
    detail = _describe(host.orchestrator, row.text) + (f"; {said}" if said else "")
    if host.refused:
        detail += f"; schema refused, offered untyped: {host.refused[0][:90]}"
    streamed = {}
    if streaming:
        for name, chunks in chunkings(row.text, seed).items():
            streamed[name], _ = _run(host, _streamed(chunks))
    return Outcome(row, ran, detail, streamed)


def load_rows(path: Path) -> list[Row]:
    """The rows of the file at ``path``, one JSON object a line (blank lines skipped)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [Row.parse(json.loads(line)) for line in lines if line.strip()]


def _excerpt(text: str) -> str:
    shown = json.dumps(text, ensure_ascii=False)
    return shown if len(shown) <= _EXCERPT else shown[: _EXCERPT - 1] + '…"'


def _calls(calls: Iterable[Call]) -> str:
    listed = [
        f"{name}({json.dumps(args, ensure_ascii=False, sort_keys=True)})" for name, args in calls
    ]
    return ", ".join(listed) or "nothing"


def _entry(outcome: Outcome) -> list[str]:
    row = outcome.row
    lines = [
        f"- `{row.source}`",
        f"  - expected: {_calls(row.expected)}" + (" (must not run)" if row.must_not_run else ""),
        f"  - ran: {_calls(outcome.ran)}",
        f"  - read as: {outcome.detail}",
        f"  - text: `{_excerpt(row.text)}`",
    ]
    if row.note:
        lines.append(f"  - note: {row.note}")
    return lines


def report(outcomes: Sequence[Outcome]) -> tuple[list[str], list[Budget]]:
    """The Markdown report of ``outcomes`` and its budgets."""
    scored = [o for o in outcomes if o.row.scored]
    correct = sum(o.correct for o in scored)
    percent = 100 * correct / len(scored) if scored else 0.0
    forbidden = [o for o in scored if o.ran_forbidden]
    must_not = sum(o.row.must_not_run for o in scored)
    streams = [(o, name) for o in outcomes for name in o.streamed]
    differing = [(o, name) for o in outcomes for name in o.stream_differences]
    lines = [
        "| rows | correct | percent | must not run | ran anyway | streamed runs as the whole |",
        "|---|---|---|---|---|---|",
        f"| {len(scored)} | {correct} | {percent:.1f}% | {must_not} | {len(forbidden)} | "
        f"{len(streams) - len(differing)} of {len(streams)} |",
        "",
        "| family | rows | correct | wrong | ran what must not run |",
        "|---|---|---|---|---|",
    ]
    by_family: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in scored:
        by_family[outcome.row.family].append(outcome)
    for family, group in sorted(by_family.items()):
        right = sum(o.correct for o in group)
        ran = sum(o.ran_forbidden for o in group)
        lines.append(f"| {family} | {len(group)} | {right} | {len(group) - right} | {ran} |")
    wrong = [o for o in scored if not o.correct]
    lines += ["", f"### Wrong rows ({len(wrong)}), by family"]
    for family, group in sorted(by_family.items()):
        missed = [o for o in group if not o.correct]
        if missed:
            lines += ["", f"#### {family} ({len(missed)} of {len(group)})", ""]
            for outcome in missed:
                lines += _entry(outcome)
    lines += ["", f"### Ran what must not run ({len(forbidden)})", ""]
    for outcome in forbidden:
        lines += _entry(outcome)
    lines += ["", f"### Streamed runs that differ from the whole text ({len(differing)})", ""]
    for outcome, name in differing:
        lines.append(
            f"- `{outcome.row.source}` at {name}: ran {_calls(outcome.streamed[name])}, "
            f"whole text ran {_calls(outcome.ran)}"
        )
    unscored = [o for o in outcomes if not o.row.scored]
    if unscored:
        lines += [
            "",
            f"### Not scored: the test asserts nothing about the calls ({len(unscored)})",
            "",
        ]
        for outcome in unscored:
            lines += _entry(outcome)
    budgets = [
        Budget("scored rows correct", percent, 97, unit="%", at_least=True),
        Budget("rows that ran what their test says must not run", len(forbidden), 0, unit=""),
        Budget("streamed runs that differ from the whole text", len(differing), 0, unit=""),
    ]
    return lines, budgets


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Path, required=True, help="the rows file (JSON lines)")
    parser.add_argument("--no-stream", action="store_true", help="skip the streamed runs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = load_rows(args.rows)
    outcomes = [measure(row, seed, not args.no_stream) for seed, row in enumerate(rows)]
    lines, budgets = report(outcomes)
    title = "Tool calls in the rows of other projects' parser tests"
    emit(title, lines, budgets, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
