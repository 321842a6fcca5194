"""The scanning the text formats share: balanced brackets, call objects, argument JSON,
pythonic call lists and typed parameter values.

Every family's detector (:mod:`.families`) and the JSON protocol (:mod:`.text`) read calls
with these, so a call means the same, and fails the same way, in every format.

One module: these readers are the one definition of what a call's text means, and they call
on each other (one reading of a quoted string serves mending a pythonic list and finding
where each of its calls ends).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

from .calls import TextCall
from .healing import Unhealable, heal

__all__: list[str] = []  # shared by the text formats; nothing public

NAME_KEYS = ("tool", "name", "tool_name", "function")
ARGUMENT_KEYS = ("arguments", "parameters", "args", "tool_input", "input")
_PLACEHOLDER = re.compile(
    r"<[^>]*>|\{\{?[^}]*\}\}?|\[[^\]]*\]|\.\.\.|…|(?:your_|the_)?(?:tool|function)_?name",
    re.IGNORECASE,
)


def matching(text: str, start: int) -> int | None:
    """The index of the bracket closing the one at ``start``, minding strings; or ``None``."""
    end = closing(text, start)
    return end if 0 <= end < len(text) else None


def closing(text: str, start: int, single_quotes: bool = True) -> int:
    """Where the bracket at ``start`` closes; ``-1`` when a wrong bracket closes it first,
    the length of ``text`` when it is still open at the end. Without ``single_quotes``, an
    apostrophe in prose does not open a string."""
    length = len(text)
    stack: list[str] = []
    for index in _brackets(text, start, length, single_quotes):
        char = text[index]
        if char in "{[":
            stack.append(_CLOSES[char])
        elif not stack or stack.pop() != char:
            return -1
        elif not stack:
            return index
    return length


def _brackets(text: str, start: int, length: int, single_quotes: bool) -> Iterator[int]:
    """The index of each bracket outside strings from ``start`` on: the reading that
    :func:`closing` and :class:`Brackets` share. It goes from one bracket, quote or backslash
    to the next at the regular expression engine's speed."""
    special = _SPECIAL if single_quotes else _SPECIAL_DOUBLE
    quote: str | None = None
    index = start
    while True:
        found = special.search(text, index, length)
        if found is None:
            return
        index = found.start()
        char = text[index]
        if quote is not None:
            if char == "\\":
                index += 2
                continue
            if char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char != "\\":
            yield index
        index += 1


_CLOSES = {"{": "}", "[": "]"}
_SPECIAL = re.compile(r"""[{}\[\]"'\\]""")
_SPECIAL_DOUBLE = re.compile(r"""[{}\[\]"\\]""")


class Brackets:
    """Where each bracket of one text closes, for many questions in linear time.

    :func:`closing` answers one bracket by reading on from it; asking it for every bracket
    of a long text reads the text again each time. A pass here reads the text once from its
    first bracket and records, for every bracket it meets outside a string, what
    :func:`closing` would answer for it (the same reading on from there). A bracket that a
    pass saw inside a string starts another pass; after :data:`PASSES` of them, such a
    bracket counts as text inside a string.
    """

    __slots__ = ("_answers", "_passes", "_single_quotes", "_text")

    PASSES = 8

    def __init__(self, text: str, single_quotes: bool = True) -> None:
        self._text = text
        self._single_quotes = single_quotes
        self._answers: dict[int, int] = {}
        self._passes = 0

    def closing(self, start: int) -> int | None:
        """What :func:`closing` answers for the bracket at ``start``; ``None`` when too many
        passes read it as inside a string."""
        answer = self._answers.get(start)
        if answer is None and self._passes < self.PASSES:
            self._pass(start)
            answer = self._answers.get(start)
        return answer

    def _pass(self, start: int) -> None:
        self._passes += 1
        text, answers = self._text, self._answers
        stack: list[int] = []
        for index in _brackets(text, start, len(text), self._single_quotes):
            if text[index] in "{[":
                stack.append(index)
            elif stack:
                opened = stack.pop()
                if _CLOSES[text[opened]] == text[index]:
                    answers[opened] = index
                else:  # the wrong bracket: every one still open fails here
                    answers[opened] = -1
                    for still_open in stack:
                        answers[still_open] = -1
                    stack.clear()
        for still_open in stack:
            answers[still_open] = len(text)


def protocol_call(item: Any, known: Collection[str], notes: tuple[str, ...]) -> TextCall | None:
    """A call in the JSON protocol (or the seed's ``action`` form), if ``item`` is one."""
    if not isinstance(item, dict):
        if not isinstance(item, Mapping):
            return None
        item = dict(item)
    action = item.get("action")
    if action is not None and isinstance(action, Mapping) and isinstance(action.get("tool"), str):
        item = action
    name = None
    named_by = ""
    for key in NAME_KEYS:
        value = item.get(key)
        if isinstance(value, str):
            name, named_by = value, key
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
    if raw is _NO_ARGUMENTS and not (named_by == "tool" and name in known):
        # a JSON answer with a "name" field is not a call; only the protocol's own
        # {"tool": "<an offered tool>"} may leave its arguments out
        return None
    if name not in known and _PLACEHOLDER.fullmatch(name.strip()):
        return None  # a template copied from the prompt
    arguments, problem, more = arguments_of({} if raw is _NO_ARGUMENTS else raw)
    return TextCall(name, arguments, problem, notes + more)


_NO_ARGUMENTS: Any = object()


def arguments_of(raw: Any) -> tuple[dict[str, Any] | None, str | None, tuple[str, ...]]:
    """Arguments given as an object or as a (possibly healable) JSON string of one."""
    notes: tuple[str, ...] = ()
    if raw is None or raw == "":
        return {}, None, ()
    if isinstance(raw, str):
        try:
            raw, notes = heal(raw)
        except Unhealable as exc:
            return None, f"arguments are not readable JSON: {problem_text(exc)}", ()
    if not isinstance(raw, dict) and not isinstance(raw, Mapping):
        return None, f"arguments must be an object, not {type(raw).__name__}", notes
    return dict(raw), None, notes


def call_with_arguments(name: str, fragment: str) -> TextCall:
    arguments, problem, notes = arguments_of(fragment)
    return TextCall(name, arguments, problem, notes)


def calls_from_fragment(fragment: str, where: str, bare_names: bool = True) -> list[TextCall]:
    """The calls a marker introduces: an object, an array of them, or several objects.

    With ``bare_names``, an object with a name and no argument key is a call without
    arguments (the family writes them so); without, it is no call at all.
    """
    if not fragment:
        return [TextCall("?", None, f"{where} holds no call")]
    try:
        value, notes = heal(first_value(fragment) if fragment[0] in "{[" else fragment)
    except Unhealable as exc:
        return [TextCall(guess_name(fragment), None, problem_text(exc))]
    items = value if isinstance(value, list) else [value]
    calls = []
    for item in items:
        call = protocol_call(item, (), notes) if isinstance(item, Mapping) else None
        if call is None and isinstance(item, Mapping):
            name = next((item[k] for k in NAME_KEYS if isinstance(item.get(k), str)), None)
            if name and not bare_names:
                continue  # {"name": "x"} alone: the family's parsers take it for no call
            call = TextCall(name, {}, None, notes) if name else None
        calls.append(call or TextCall("?", None, f"{where} holds something that is not a call"))
    rest = fragment[len(first_value(fragment)) :].strip() if fragment[0] in "{[" else ""
    if rest.startswith("{"):
        calls.extend(calls_from_fragment(rest, where, bare_names))
    return calls


def fences(text: str) -> Iterator[tuple[str, str]]:
    """The ``(language, body)`` of each Markdown code fence, in order; an unclosed one runs
    to the end. Substring searches from fence to fence: no expression tries every position."""
    start = text.find("```")
    while start != -1:
        head = _FENCE_HEAD.match(text, start)
        if head is None:  # not an opening fence: look from the next backtick on
            start = text.find("```", start + 1)
            continue
        end = text.find("```", head.end())
        if end == -1:
            yield head.group(1), text[head.end() :]
            return
        yield head.group(1), text[head.end() : end]
        start = text.find("```", end + 3)


_FENCE_HEAD = re.compile(r"```[ \t]*+([A-Za-z_]*+)[ \t]*+\n")  # possessive: spaces read once


def split_top_level(text: str, separator: str) -> list[str]:
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


def looks_like_call(fragment: str) -> bool:
    """Whether an unreadable fragment is clearly meant as a call (a quoted name and key)."""
    return bool(
        re.search(r"""["'](?:tool|name|tool_name|function)["']\s*:\s*["'][A-Za-z_]""", fragment)
    )


def guess_name(fragment: str) -> str:
    found = re.search(r"""["'](?:tool|name|tool_name|function)["']\s*:\s*["']([^"']+)""", fragment)
    return found.group(1) if found else "?"


def problem_text(exc: Unhealable) -> str:
    if exc.truncated:
        return f"the call was cut off ({exc.reason}); it was not run"
    return f"the call is not readable JSON ({exc.reason})"


def first_value(text: str) -> str:
    """The text of the first bracketed value at the start of ``text`` (to its end if open)."""
    end = matching(text, 0)
    return text if end is None else text[: end + 1]


def python_calls(source: str, siblings: bool = False) -> Iterator[TextCall]:
    """Calls in ``[f(a=1), g(b='x')]`` or ``f(a=1)``: keyword arguments of literal values.
    What Python does not read but has one meaning is mended first (:func:`_mended_python`),
    and a set is a list of its items in the order written (``{'urgent', 'bug'}``). With
    ``siblings``, a closed list that does not read as a whole gives the calls before the first
    unreadable one, each closing and reading alone, and that one, reported, for the rest."""
    source = source.strip()
    try:
        tree = _parsed_python(source)
    except SyntaxError as exc:
        readable = _readable_calls(source) if siblings and source.endswith("]") else []
        for call, _ in readable:
            yield from python_calls(call)
        rest = source[readable[-1][1] :] if readable else source
        named = _CALL_NAME.match(rest)
        name = named.group(1) if readable and named else "?"
        yield TextCall(name, None, f"not a readable call list: {exc.msg}")
        return
    except (ValueError, RecursionError, MemoryError):  # nesting too deep
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
            arguments = {
                kw.arg: ast.literal_eval(_SetsAsLists().visit(kw.value))
                for kw in node.keywords
                if kw.arg
            }
        except (ValueError, TypeError, RecursionError):  # {[1]: 2} is a literal, not hashable
            yield TextCall(name, None, "an argument is not a literal value")
            continue
        if not is_json_value(arguments):
            yield TextCall(name, None, "an argument is not a JSON value (bytes, a set, inf...)")
            continue
        yield TextCall(name, arguments)


def _readable_calls(source: str) -> list[tuple[str, int]]:
    """The text of each call at the start of the list ``source`` that closes and reads alone,
    up to the first that does not, with where the text after it (and its comma) starts."""
    found: list[tuple[str, int]] = []
    at = 1 if source[:1] == "[" else len(source)
    while at < len(source):
        named = _CALL_NAME.match(source, at)
        end = _call_end(source, named.end() - 1) if named else -1
        if named is None or end < 0:
            break
        text = source[named.start(1) : end]
        try:
            parsed = _parsed_python(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            break
        after = _AFTER_CALL.match(source, end)
        if not isinstance(parsed.body, ast.Call) or after is None:
            break
        at = after.end()
        found.append((text, at))
    return found


def _call_end(source: str, opening: int) -> int:
    """Where the call whose ``(`` is at ``opening`` ends (after its ``)``), strings minded;
    ``-1`` when it does not close."""
    depth, at, length = 0, opening, len(source)
    while at < length:
        char = source[at]
        if char in "'\"":
            quote = source[at : at + 3] if source.startswith(char * 3, at) else char
            at = _string_end(source, at + len(quote), quote) + len(quote)
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return at + 1 if char == ")" else -1
        at += 1
    return -1


_CALL_NAME = re.compile(r"\s*([A-Za-z_][\w.]*)\s*\(")
_AFTER_CALL = re.compile(r"\s*,\s*")


def _parsed_python(source: str) -> ast.Expression:
    """``source`` parsed as an expression: as written, or else mended; the error of the text
    as written when neither reads."""
    try:
        return ast.parse(source, mode="eval")
    except (SyntaxError, ValueError) as exc:
        mended = _mended_python(source)
        if mended == source:
            raise
        try:
            return ast.parse(mended, mode="eval")
        except (SyntaxError, ValueError):
            raise exc from None


def _mended_python(source: str) -> str:
    """``source`` with what a model writes and Python does not read put right where it has
    one meaning: a raw control character (a line break, a NUL) inside a quoted string
    escaped, and an integer's leading zeros dropped where it can only be a decimal
    (``month=07``, :func:`_decimal`). A quote inside a string of the same quote
    (``'sed -n '1,9p' f'``) is left, as is ``mode=0755``: either would be a guess."""
    parts: list[str] = []
    at, length = 0, len(source)
    while at < length:
        opening = _QUOTE.search(source, at)
        if opening is None:
            parts.append(_LEADING_ZEROS.sub(_decimal, source[at:]))
            break
        parts.append(_LEADING_ZEROS.sub(_decimal, source[at : opening.start()]))
        quote = opening.group()
        end = _string_end(source, opening.end(), quote)
        body = source[opening.end() : end]
        if len(quote) == 1:
            body = _CONTROL.sub(lambda c: f"\\x{ord(c.group()):02x}", body)
        else:  # a triple-quoted string holds line breaks; only NUL is not read
            body = body.replace("\0", "\\x00")
        parts.append(quote + body + source[end : end + len(quote)])
        at = end + len(quote)
    return "".join(parts)


def _string_end(source: str, start: int, quote: str) -> int:
    """Where the string opened before ``start`` by ``quote`` closes (or the length)."""
    at, length = start, len(source)
    while at < length:
        if source[at] == "\\":
            at += 2
        elif source.startswith(quote, at):
            return at
        else:
            at += 1
    return length


_QUOTE = re.compile(r"'''|\"\"\"|'|\"")
_CONTROL = re.compile(r"[\x00-\x1f]")
_LEADING_ZEROS = re.compile(r"(?<![\w.])0+(\d+)")


def _decimal(match: re.Match[str]) -> str:
    """An integer written with leading zeros, as the decimal it can only be: one digit
    (``07``), or digits with an 8 or a 9 (``089``); others (``0755``, a C-style octal file
    mode, or decimal 755?) are left, unread."""
    digits = match.group(1)
    return digits if len(digits) == 1 or "8" in digits or "9" in digits else match.group()


class _SetsAsLists(ast.NodeTransformer):
    """A set literal as a list of its items in the order written, each once: JSON has no
    sets, and a model writing ``{'urgent', 'bug'}`` means the items."""

    def visit_Set(self, node: ast.Set) -> ast.AST:
        items: list[ast.expr] = []
        seen: set[str] = set()
        for item in node.elts:
            key = ast.dump(item)
            if key not in seen:
                seen.add(key)
                items.append(self.visit(item))
        return ast.copy_location(ast.List(elts=items, ctx=ast.Load()), node)


def is_json_value(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is what JSON can hold: no bytes, sets, tuples of Python objects,
    infinities or non-string keys (a pythonic call's literals may be any of those)."""
    if depth > 64:
        return False
    if value is None or isinstance(value, bool | int | str):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list | tuple):
        return all(is_json_value(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_json_value(v, depth + 1) for k, v in value.items())
    return False


def cut_off(what: str) -> str:
    """The problem of a call whose closing delimiter never came."""
    return f"the call was cut off ({what} never came); it was not run"


def ended(calls: Iterable[TextCall], whole: bool, closing: str) -> list[TextCall]:
    """The calls of a body that runs to the end of the text, its ``closing`` tag or stop
    token never written, in a form that closes itself (JSON, a pythonic list, a fenced
    block): when the body is ``whole`` (complete as written) each call is as read, unless
    its arguments needed a repair; otherwise none runs. An XML invoke does not close itself
    (another parameter may follow the last one): without its closing tag it was cut off."""
    return [
        call
        if whole and (call.problem or not call.healed)
        else TextCall(call.name, None, cut_off(closing), id=call.id)
        for call in calls
    ]


def whole_json(text: str) -> bool:
    """Whether ``text`` is one JSON value as written: no repair, nothing after it."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def parameters_closed(body: str, *tags: tuple[str, str]) -> bool:
    """Whether the body of an XML invoke is parameters and nothing else, each closed: one at
    least, each an opening of ``tags`` read to its closing tag, whitespace between."""
    at, length, count = 0, len(body), 0
    while True:
        while at < length and body[at] in " \t\r\n":
            at += 1
        if at == length:
            return count > 0
        pair = next((pair for pair in tags if body.startswith(pair[0], at)), None)
        if pair is None:
            return False
        end = body.find(pair[1], at + len(pair[0]))
        if end == -1:
            return False
        at, count = end + len(pair[1]), count + 1


def xml_arguments(pairs: Iterable[tuple[str, str]]) -> tuple[dict[str, Any], dict[str, str]]:
    """Parameters written as text (``<parameter=k>v</parameter>`` and the like): each value
    read by :func:`xml_value`, and the text of each that was read as JSON kept, so that the
    tool's schema decides between them: a parameter it types as a string, or does not name,
    gets the text as written (``007``, ``1.50``, ``"foo"`` with its quotes)."""
    arguments: dict[str, Any] = {}
    texts: dict[str, str] = {}
    for key, raw in pairs:
        try:
            arguments[key] = json.loads(raw)
        except (ValueError, RecursionError):
            arguments[key] = raw
            texts.pop(key, None)
        else:
            texts[key] = raw
    return arguments, texts


def xml_value(raw: str) -> Any:
    """A parameter value: JSON when it reads as JSON (numbers, objects), else the text."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw
