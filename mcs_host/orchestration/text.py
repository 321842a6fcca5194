"""Detection, step two: tool calls written as text, in every format models use.

``<think>`` blocks are set aside first. Then the first format found wins, in this order:
``<tool_call>`` tags (JSON, or Qwen3-Coder XML inside; an unclosed last tag too),
``<function=name>`` tags (JSON body, or ``<parameter=..>`` children), ``<|python_tag|>``,
Mistral's ``[TOOL_CALLS]`` (a JSON array, or ``name[ARGS]{...}``), ``functools[...]``,
``@tool name {json}`` lines, a pythonic list ``[f(a=1), g(b='x')]`` of known tools, and last
the JSON protocol: the whole text, fenced blocks, or objects in prose (several objects, an
array or JSON lines are several calls). The seed protocol ``{"thought", "action": {"tool",
"args"}}`` is a call and ``{"final": ...}`` a final answer.

A JSON-like fragment that does not parse is healed when it clearly is a call (see
:mod:`.healing`); a call cut off mid-way is reported, never run. Prose, a JSON answer
(an object with a ``name`` but no arguments), LaTeX and template placeholders are not calls.

One module: the text protocols share one scanner (balanced brackets, prose guards) and the
order in which they are tried is itself the detection rule.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .healing import Unhealable, heal

__all__ = ["TextCall", "TextDetection", "detect_text"]

NAME_KEYS = ("tool", "name", "tool_name", "function")
ARGUMENT_KEYS = ("arguments", "parameters", "args", "tool_input", "input")

_THINK = re.compile(r"<(think|thinking)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<(think|thinking)>", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([A-Za-z_]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_TOOL_CALL_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_FUNCTION_TAG = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|\Z)", re.DOTALL)
_PARAMETER_TAG = re.compile(r"<parameter=([^>\s]+)>\n?(.*?)\n?</parameter>", re.DOTALL)
_PYTHON_TAG = "<|python_tag|>"
_LLAMA_END = re.compile(r"<\|eom_id\|>|<\|eot_id\|>|<\|end_of_text\|>")
_MISTRAL_NAMED = re.compile(
    r"\[TOOL_CALLS\]\s*([A-Za-z0-9_.\-]+)\s*(?:\[CALL_ID\]\s*([A-Za-z0-9]+)\s*)?\[ARGS\]"
)
_DSL = re.compile(r"^[ \t]*@tool[ \t]+([^\s{]+)[ \t]*(.*)$", re.MULTILINE)
_PYTHONIC = re.compile(r"^\[\s*[A-Za-z_][\w.]*\s*\(.*\)\s*\]$", re.DOTALL)
_PLACEHOLDER = re.compile(
    r"<[^>]*>|\{\{?[^}]*\}\}?|\[[^\]]*\]|\.\.\.|…|(?:your_|the_)?(?:tool|function)_?name",
    re.IGNORECASE,
)
_LATEX_BEFORE = re.compile(r"(?:\\[A-Za-z]+|[\^_])\s*$")


@dataclass(frozen=True, slots=True)
class TextCall:
    """A call found in text: its arguments, or why it cannot run."""

    name: str
    arguments: dict[str, Any] | None
    problem: str | None = None
    healed: tuple[str, ...] = ()
    id: str | None = None


@dataclass(frozen=True, slots=True)
class TextDetection:
    calls: tuple[TextCall, ...] = ()
    format: str = "none"
    """``tool_call-tag``, ``function-tag``, ``python-tag``, ``mistral``, ``functools``,
    ``dsl``, ``pythonic``, ``json`` or ``none``."""
    final: Any = None
    """The content of a seed-protocol ``{"final": ...}`` answer."""
    has_final: bool = False
    unfinished_thought: bool = False
    notes: tuple[str, ...] = field(default=())


def detect_text(text: str, known: Collection[str] = ()) -> TextDetection:
    """The calls in ``text``; ``known`` tool names make ambiguous forms count as calls."""
    visible = text
    if "<" in text:  # the regular expressions below only for text that may hold a tag
        visible = _THINK.sub("", text)
        if _THINK_OPEN.search(visible):
            return TextDetection(format="none", unfinished_thought=True)
    for marker, finders in _MARKED:
        if marker in visible:  # one character found at memchr speed rules out whole formats
            for finder in finders:
                found = finder(visible)
                if found is not None:
                    return found
    pythonic = _pythonic(visible, known)
    if pythonic is not None:
        return pythonic
    return _json_protocol(visible, known)


# -- formats with markers --------------------------------------------------------------------


def _tool_call_tags(text: str) -> TextDetection | None:
    if "<tool_call>" not in text:
        return None
    calls: list[TextCall] = []
    for body in _TOOL_CALL_TAG.findall(text):
        if "<function=" in body:
            calls.extend(_xml_functions(body))
        else:
            calls.extend(_calls_from_fragment(body.strip(), "<tool_call>", strict_names=False))
    return TextDetection(tuple(calls), "tool_call-tag")


def _function_tags(text: str) -> TextDetection | None:
    if "<function=" not in text:
        return None
    return TextDetection(tuple(_xml_functions(text)), "function-tag")


def _xml_functions(text: str) -> Iterator[TextCall]:
    """``<function=name>`` with a JSON body (Llama) or ``<parameter=..>`` children (Qwen)."""
    for match in _FUNCTION_TAG.finditer(text):
        name, body = match.group(1), match.group(2)
        closed = match.group(0).endswith("</function>")
        if "<parameter=" in body:
            if not closed:
                yield TextCall(name, None, "the <function> tag was cut off before it closed")
                continue
            arguments = {key: _xml_value(value) for key, value in _PARAMETER_TAG.findall(body)}
            yield TextCall(name, arguments)
            continue
        stripped = body.strip()
        if not stripped:
            yield TextCall(name, {} if closed else None, None if closed else "cut off")
            continue
        yield _with_arguments(name, stripped)


def _xml_value(raw: str) -> Any:
    """A parameter value: JSON when it reads as JSON (numbers, objects), else the text."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


def _python_tag(text: str) -> TextDetection | None:
    if _PYTHON_TAG not in text:
        return None
    body = _LLAMA_END.split(text.split(_PYTHON_TAG, 1)[1])[0].strip()
    calls: list[TextCall] = []
    for piece in _split_top_level(body, ";"):
        part = piece.strip()
        if not part:
            continue
        if part.startswith("{"):
            calls.extend(_calls_from_fragment(part, "<|python_tag|>", strict_names=False))
        else:
            calls.extend(_python_calls(part))
    return TextDetection(tuple(calls), "python-tag")


def _mistral(text: str) -> TextDetection | None:
    if "[TOOL_CALLS]" not in text:
        return None
    calls: list[TextCall] = []
    named = list(_MISTRAL_NAMED.finditer(text))
    if named:
        for index, match in enumerate(named):
            end = named[index + 1].start() if index + 1 < len(named) else len(text)
            body = text[match.end() : end].strip()
            call = _with_arguments(match.group(1), body)
            calls.append(
                TextCall(call.name, call.arguments, call.problem, call.healed, match.group(2))
            )
        return TextDetection(tuple(calls), "mistral")
    for chunk in text.split("[TOOL_CALLS]")[1:]:
        calls.extend(_calls_from_fragment(chunk.strip(), "[TOOL_CALLS]", strict_names=False))
    return TextDetection(tuple(calls), "mistral")


def _functools(text: str) -> TextDetection | None:
    start = text.find("functools[")
    if start == -1:
        return None
    fragment = text[start + len("functools") :].strip()
    return TextDetection(
        tuple(_calls_from_fragment(fragment, "functools", strict_names=False)), "functools"
    )


def _dsl(text: str) -> TextDetection | None:
    if "@tool" not in text:
        return None
    calls = []
    for match in _DSL.finditer(text):
        rest = match.group(2).strip()
        if not rest:
            calls.append(TextCall(match.group(1), {}))
            continue
        # the JSON may run over the following lines
        rest = text[match.start(2) :].strip()
        calls.append(_with_arguments(match.group(1), _first_value(rest)))
    return TextDetection(tuple(calls), "dsl") if calls else None


def _first_value(text: str) -> str:
    """The text of the first bracketed value at the start of ``text`` (to its end if open)."""
    end = _matching(text, 0)
    return text if end is None else text[: end + 1]


def _pythonic(text: str, known: Collection[str]) -> TextDetection | None:
    candidates = [text.strip()]
    if "```" in text:
        candidates += [
            body.strip() for lang, body in _FENCE.findall(text) if lang in ("", "python", "py")
        ]
    for candidate in candidates:
        if candidate[:1] == "[" and _PYTHONIC.match(candidate):
            calls = list(_python_calls(candidate))
            if calls and all(c.name in known for c in calls):
                return TextDetection(tuple(calls), "pythonic")
    return None


def _python_calls(source: str) -> Iterator[TextCall]:
    """Calls in ``[f(a=1), g(b='x')]`` or ``f(a=1)``: keyword arguments of literal values."""
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        yield TextCall("?", None, f"not a readable call list: {exc.msg}")
        return
    except (ValueError, RecursionError, MemoryError):  # a NUL byte, nesting too deep
        yield TextCall("?", None, "not a readable call list")
        return
    nodes = tree.body.elts if isinstance(tree.body, ast.List | ast.Tuple) else [tree.body]
    for node in nodes:
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        if node.args:
            yield TextCall(name, None, "positional arguments: give each argument by name")
            continue
        try:
            arguments = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
        except (ValueError, TypeError, RecursionError):  # {[1]: 2} is a literal, not hashable
            yield TextCall(name, None, "an argument is not a literal value")
            continue
        yield TextCall(name, arguments)


_MARKED = (
    ("<", (_tool_call_tags, _function_tags, _python_tag)),
    ("[", (_mistral, _functools)),
    ("@", (_dsl,)),
)
"""The formats with markers, in the order they are tried, under a character their marker
holds."""


# -- the JSON protocol -----------------------------------------------------------------------


def _json_protocol(text: str, known: Collection[str]) -> TextDetection:
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        whole = _calls_or_final(stripped, known)
        if whole is not None:
            return whole
    for lang, body in _FENCE.findall(text) if "```" in text else ():
        if lang.lower() in ("", "json", "tool_call", "tool_code", "javascript"):
            fenced = _calls_or_final(body.strip(), known)
            if fenced is not None:
                return fenced
    return _in_prose(text, known)


def _calls_or_final(fragment: str, known: Collection[str]) -> TextDetection | None:
    """The calls if all of ``fragment`` is one JSON value; else ``None`` (prose decides)."""
    try:
        value, notes = heal(fragment)
    except Unhealable:
        return None
    return _from_value(value, notes, known)


def _from_value(value: Any, notes: tuple[str, ...], known: Collection[str]) -> TextDetection | None:
    items = value if isinstance(value, list) else [value]
    if isinstance(value, Mapping) and "final" in value and "action" not in value:
        return TextDetection(format="json", final=value["final"], has_final=True)
    calls = [c for c in (_protocol_call(item, known, notes) for item in items) if c is not None]
    return TextDetection(tuple(calls), "json", notes=notes) if calls else None


def _in_prose(text: str, known: Collection[str]) -> TextDetection:
    """Objects embedded in prose, JSON lines, concatenated objects, arrays of objects.

    Only objects holding a name key (``tool``, ``name``, ``action``, ``final``...) can be
    calls, so the scan goes from key to key (a regular expression over the whole text) and
    parses just the object around each: linear in the length of prose full of braces.
    """
    if not _may_hold_call(text, known):
        return TextDetection(format="json")
    calls: list[TextCall] = []
    notes: list[str] = []
    final: Any = None
    has_final = False
    done = 0
    for key in _KEY.finditer(text):
        start = key.start()
        if start < done or (start and (text[start - 1].isalnum() or text[start - 1] == "_")):
            continue  # inside an object already read, or the end of a longer word
        opening, end = _enclosing_open(text, start, done)
        if opening is None:
            continue
        found, after = _at(text, opening, known, end)
        if found is None:
            continue
        calls.extend(found.calls)
        notes.extend(found.notes)
        if found.has_final:
            final, has_final = found.final, True
        done = after
    return TextDetection(tuple(calls), "json", final, has_final, notes=tuple(dict.fromkeys(notes)))


def _may_hold_call(text: str, known: Collection[str]) -> bool:
    """Whether prose can hold a call of the JSON protocol or a final answer at all.

    An object is one only with an argument key, as a ``final`` answer, or with a name key
    whose value is an offered tool. Substring searches and one expression per name key (each
    starting with a literal, so the engine skips ahead) tell that at a few hundred MB/s; reading
    every JSON-like object in prose full of data runs ten times slower.
    """
    if any(word in text for word in _CALL_WORDS) or _ARGS_WORD.search(text):
        return True
    return any(
        (quoted or single or bare) in known
        for pattern in _NAME_VALUES
        for quoted, single, bare in pattern.findall(text)
    )


_CALL_WORDS = ("parameters", "input", "final")
_ARGS_WORD = re.compile("arg(?:ument|s)")
_NAME_VALUES = tuple(
    re.compile(key + r"""["']?\s*:\s*(?:"([^"]*)"|'([^']*)'|([^\s,}\]]+))""")
    for key in ("tool", "name", "function")
)

_KEY = re.compile(r"""(?:tool|name|tool_name|function|action|final)["']?\s*:""")
"""A name key; starting with the words themselves lets the regex engine scan fast."""


def _enclosing_open(text: str, position: int, floor: int) -> tuple[int | None, int | None]:
    """The ``{`` of the innermost object around ``position`` (not before ``floor``), and the
    index of its ``}`` (``None`` when it never closes)."""
    index = text.rfind("{", floor, position)
    for _ in range(16):
        if index == -1:
            return None, None
        quotes = text[index + 1 : index + 3].lstrip()[:1] == "'"
        end = _matching(text, index, single_quotes=quotes)
        if end is None or end > position:
            return index, end
        index = text.rfind("{", floor, index)
    return None, None


def _at(
    text: str, index: int, known: Collection[str], end: int | None
) -> tuple[TextDetection | None, int]:
    """The calls in the object starting at ``index`` and closing at ``end``, and where the
    span ends."""
    if not _could_open(text, index) or _LATEX_BEFORE.search(text, max(0, index - 40), index):
        return None, index
    if end is None:
        if len(text) - index > _LONGEST_OPEN_CALL:
            return None, index
        fragment = text[index:]  # open to the end: a call cut off, or a missing brace
    else:
        fragment = text[index : end + 1]
    after = index + len(fragment)
    try:
        return _from_value(json.loads(fragment), (), known), after
    except (ValueError, RecursionError):
        pass
    if not _KEY.search(fragment):
        return None, index
    try:
        value, healed = heal(fragment)
    except Unhealable as exc:
        if _looks_like_call(fragment):
            broken = TextCall(_guess_name(fragment), None, _problem(exc))
            return TextDetection((broken,), "json"), after
        return None, index
    return _from_value(value, healed, known), after


_LONGEST_OPEN_CALL = 20_000
"""An unclosed bracket farther than this from the end of the text is prose, not a call."""


def _could_open(text: str, index: int) -> bool:
    """Whether a JSON-ish value can start at ``index``: ``{`` then a key or ``}``, ``[`` then
    a value. Rules out ``{1, 2}``, ``{{user}}``, ``[x](url)`` and most prose at once."""
    following = text[index + 1 : index + 40].lstrip()[:1]
    if not following:
        return text[index] == "{" and index == len(text) - 1
    if text[index] == "{":
        return following in "\"'}" or following.isalpha() or following == "_"
    return following in "{[\"'-]" or following.isdigit() or following in "tfnTFN"


def _matching(text: str, start: int, single_quotes: bool = True) -> int | None:
    """The index of the bracket closing the one at ``start``, minding strings; or ``None``.

    Without ``single_quotes``, an apostrophe in prose does not open a string.
    """
    pairs = {"{": "}", "[": "]"}
    quotes = "\"'" if single_quotes else '"'
    stack: list[str] = []
    quote: str | None = None
    index = start
    length = len(text)
    while index < length:
        char = text[index]
        if quote is not None:
            if char == "\\":
                index += 2
                continue
            if char == quote:
                quote = None
        elif char in quotes:
            quote = char
        elif char in pairs:
            stack.append(pairs[char])
        elif char in "}]":
            if not stack or stack.pop() != char:
                return None
            if not stack:
                return index
        index += 1
    return None


def _protocol_call(item: Any, known: Collection[str], notes: tuple[str, ...]) -> TextCall | None:
    """A call in the JSON protocol (or the seed's ``action`` form), if ``item`` is one."""
    if not isinstance(item, dict):
        if not isinstance(item, Mapping):
            return None
        item = dict(item)
    action = item.get("action")
    if isinstance(action, Mapping) and isinstance(action.get("tool"), str):
        item = action
    name = None
    for key in NAME_KEYS:
        value = item.get(key)
        if isinstance(value, str):
            name = value
            break
    if name is None:
        function = item.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            item, name = function, function["name"]  # {"function": {"name", "arguments"}}
        else:
            return None
    raw: Any = _NO_ARGUMENTS
    for key in ARGUMENT_KEYS:
        if key in item:
            raw = item[key]
            break
    if name not in known:
        if raw is _NO_ARGUMENTS:
            return None  # a JSON answer with a "name" field, not a call
        if _PLACEHOLDER.fullmatch(name.strip()):
            return None  # a template copied from the prompt
    arguments, problem, more = _arguments({} if raw is _NO_ARGUMENTS else raw)
    return TextCall(name, arguments, problem, notes + more)


_NO_ARGUMENTS: Any = object()


def _arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None, tuple[str, ...]]:
    """Arguments given as an object or as a (possibly healable) JSON string of one."""
    notes: tuple[str, ...] = ()
    if raw is None or raw == "":
        return {}, None, ()
    if isinstance(raw, str):
        try:
            raw, notes = heal(raw)
        except Unhealable as exc:
            return None, f"arguments are not readable JSON: {_problem(exc)}", ()
    if not isinstance(raw, Mapping):
        return None, f"arguments must be an object, not {type(raw).__name__}", notes
    return dict(raw), None, notes


def _with_arguments(name: str, fragment: str) -> TextCall:
    arguments, problem, notes = _arguments(fragment)
    return TextCall(name, arguments, problem, notes)


def _calls_from_fragment(fragment: str, where: str, strict_names: bool) -> list[TextCall]:
    """The calls a marker introduces: an object, an array of them, or several objects."""
    if not fragment:
        return [TextCall("?", None, f"{where} holds no call")]
    try:
        value, notes = heal(_first_value(fragment) if fragment[0] in "{[" else fragment)
    except Unhealable as exc:
        return [TextCall(_guess_name(fragment), None, _problem(exc))]
    items = value if isinstance(value, list) else [value]
    calls = []
    for item in items:
        call = _protocol_call(item, (), notes) if isinstance(item, Mapping) else None
        if call is None and isinstance(item, Mapping):
            name = next((item[k] for k in NAME_KEYS if isinstance(item.get(k), str)), None)
            call = TextCall(name, {}, None, notes) if name else None
        calls.append(call or TextCall("?", None, f"{where} holds something that is not a call"))
    rest = fragment[len(_first_value(fragment)) :].strip() if fragment[0] in "{[" else ""
    if rest.startswith("{"):
        calls.extend(_calls_from_fragment(rest, where, strict_names))
    return calls


def _split_top_level(text: str, separator: str) -> list[str]:
    parts, depth, quote, start = [], 0, None, 0
    for index, char in enumerate(text):
        if quote:
            if char == quote and text[index - 1] != "\\":
                quote = None
        elif char in "\"'":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts


def _looks_like_call(fragment: str) -> bool:
    """Whether an unreadable fragment is clearly meant as a call (a quoted name and key)."""
    return bool(
        re.search(r"""["'](?:tool|name|tool_name|function)["']\s*:\s*["'][A-Za-z_]""", fragment)
    )


def _guess_name(fragment: str) -> str:
    found = re.search(r"""["'](?:tool|name|tool_name|function)["']\s*:\s*["']([^"']+)""", fragment)
    return found.group(1) if found else "?"


def _problem(exc: Unhealable) -> str:
    if exc.truncated:
        return f"the call was cut off ({exc.reason}); it was not run"
    return f"the call is not readable JSON ({exc.reason})"
