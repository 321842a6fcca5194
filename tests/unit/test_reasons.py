"""Reason codes have one home: every code the host can report is in the table of
``mcs_host/_reasons.py`` with a meaning and (when something is wrong) a fix, every entry of the
table is reported somewhere, and what makes a reason refuses a code the table lacks."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcs_host._reasons import REASONS, Reason
from mcs_host.loading.records import LoadRecord, Refused
from mcs_host.trust.registry import RegistryError

PACKAGE = Path(__file__).resolve().parents[2] / "mcs_host"
SOURCES = sorted(
    [
        PACKAGE / "discovery.py",
        *(PACKAGE / "trust").glob("*.py"),
        *(PACKAGE / "loading").glob("*.py"),
    ]
)
"""Where reasons are made: discovery, trust and loading (the command line only shows them)."""

CODE = re.compile(r"^[a-z]+(-[a-z]+)*$")
STATUSES = {"pinned", "signed", "unverified", "revoked", "rejected", "failed", "missing"}

# The position of the reason among the positional arguments of what makes one
POSITION = {
    "Refused": 1,
    "_RefusedError": 1,
    "Finding": 0,
    "Problem": 0,
    "Incompatibility": 0,
    "RegistryError": 0,
    "SignatureError": 0,
    "require_mcp_extra": 0,
    "LoadRecord": 2,
    "ServerCheck": 4,
    "DependencyCheck": 4,
    "_refused": 1,
}


def _strings(node: ast.AST | None) -> Iterator[str]:
    """The string constants ``node`` may be: itself, or either branch of a conditional."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.IfExp):
        yield from _strings(node.body)
        yield from _strings(node.orelse)


def _tuple_reason(node: ast.AST) -> Iterator[str]:
    """``(status, reason, message)`` or ``(reason, message)`` written as a literal."""
    if not isinstance(node, ast.Tuple):
        return
    firsts = list(_strings(node.elts[0])) if node.elts else []
    if len(node.elts) == 3 and firsts and set(firsts) <= STATUSES:
        yield from _strings(node.elts[1])
    elif len(node.elts) == 2 and firsts and all(CODE.match(f) for f in firsts):
        message = node.elts[1]
        if isinstance(message, ast.JoinedStr) or " " in next(_strings(message), ""):
            yield from firsts


def made_codes() -> dict[str, list[str]]:
    """Every reason code the source writes where a reason is made, with where."""
    found: dict[str, list[str]] = {}

    def add(code: str, path: Path, node: ast.AST) -> None:
        if not code:
            return  # a record made as a template, its reason given when it is decided
        found.setdefault(code, []).append(f"{path.relative_to(PACKAGE)}:{node.lineno}")  # type: ignore[attr-defined]

    for path in SOURCES:
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                index = POSITION.get(name)
                if name == "_with" and path.parent.name == "trust":
                    index = 2
                if index is not None and index < len(node.args):
                    for code in _strings(node.args[index]):
                        add(code, path, node)
                for keyword in node.keywords:
                    if keyword.arg in ("reason", "code"):
                        for code in _strings(keyword.value):
                            add(code, path, node)
                for argument in node.args:
                    for code in _tuple_reason(argument):
                        add(code, path, node)
            elif isinstance(node, ast.Return) and node.value is not None:
                for code in _tuple_reason(node.value):
                    add(code, path, node)
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in ("reason", "code", "_RAISED")
                for t in node.targets
            ):
                values = node.value.values if isinstance(node.value, ast.Dict) else [node.value]
                for value in values:
                    for code in _strings(value):
                        add(code, path, node)
    return found


def note_codes() -> set[str]:
    """The codes that start a warning note (``f"unverified-import: ..."``)."""
    codes = set()
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.JoinedStr) and node.values:
                head = node.values[0]
                if isinstance(head, ast.Constant) and isinstance(head.value, str):
                    matched = re.match(r"([a-z]+(?:-[a-z]+)+): ", head.value)
                    if matched:
                        codes.add(matched.group(1))
    return codes


def test_every_code_the_host_reports_is_in_the_table() -> None:
    made = made_codes()
    assert {"digest-mismatch", "not-in-registry", "constructor-error", "not-requested"} <= set(
        made
    ), "the source scan found too little: it no longer reads how reasons are made"
    unknown = {code: where for code, where in made.items() if code not in REASONS}
    assert unknown == {}


def test_every_code_in_the_table_is_reported_somewhere() -> None:
    reported = set(made_codes()) | note_codes()
    assert [code for code in REASONS if code not in reported] == []


def test_each_code_is_kebab_case_with_a_meaning_and_a_fix_when_something_is_wrong() -> None:
    fine = {"pinned", "signed", "registered", "mounted", "not-requested"}
    for code, reason in REASONS.items():
        assert reason.code == code
        assert CODE.match(code), code
        assert reason.meaning, code
        assert not reason.meaning.endswith("."), code
        assert bool(reason.fix) == (code not in fine), code


def test_a_fix_names_the_label_and_a_library_is_locked_by_its_distribution() -> None:
    digest = REASONS["digest-mismatch"]
    assert "`mcs-host lock csv --replace`" in digest.fix_for("csv", "mcs-host-csv")
    library = digest.fix_for("csv", "pandas", "library")
    assert "`mcs-host lock --distribution pandas --replace`" in library
    assert "LABEL" not in library
    # a driver's own allowance does not reach what it imports: a library's fix is the pin
    dependency = REASONS["not-in-registry"].fix_for("rest", "requests", "library")
    assert dependency.endswith("`mcs-host lock --distribution requests`")
    assert "allow" not in dependency
    assert REASONS["constructor-error"].fix_for("csv").count("csv.KEY=VALUE") == 1
    server = REASONS["not-in-registry"].fix_for("web", None, "server")
    assert "[mcp_servers.web]" in server
    assert "`mcs-host lock --server web`" in server  # as the configuration names it
    assert Reason("x", "y", "`mcs-host lock LABEL`").fix_for(None) == "`mcs-host lock LABEL`"


def test_a_reason_not_in_the_table_is_refused_where_it_is_made() -> None:
    with pytest.raises(ValueError, match="'invalid-tool' is not a reason code"):
        Refused("failed", "invalid-tool", "a typo of invalid-tools")
    with pytest.raises(ValueError, match="'oops' is not a reason code"):
        LoadRecord("csv", "failed", "oops", "")
    assert Refused("failed", "invalid-tools", "fine").reason == "invalid-tools"
    with pytest.raises(ValueError, match="'expird' is not a reason code"):
        RegistryError("expird", "a typo of expired")
    assert RegistryError("expired", "fine").reason == "expired"
