"""Detection, step two: tool calls written as text, in every format models use.

Reasoning blocks (``<think>``, and those the formats declare) are set aside first: nothing in
them is a call. :class:`Reasoning` reads them in one pass from left to right, as the model
wrote them: the earliest opening skips to its own closing, and another family's tags inside
are plain text; the stream (:mod:`.streaming`) shows what the same reader leaves. Then the
formats are tried in their order (:mod:`.families` holds the built-in ones, one module per
model family; a host plugin may add more), and the first that finds its markers and returns
a detection wins. Last comes the JSON protocol: the whole text, fenced blocks, or objects in
prose (several objects, an array or JSON lines are several calls). The seed protocol
``{"thought", "action": {"tool", "args"}}`` is a call and ``{"final": ...}`` a final answer.

A JSON-like fragment that does not parse is healed when it clearly is a call (see
:mod:`.healing`); a call cut off mid-way is reported, never run. Prose, a JSON answer
(an object with a ``name`` but no arguments), LaTeX and template placeholders are not calls.

One module: the reasoning reader, the formats in their order and the JSON protocol after
them are the three parts of one reading of the text, in the order they run.
"""

from __future__ import annotations

import bisect
import json
import re
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .calls import TextCall, TextDetection, TextFormat
from .families import BUILTIN
from .healing import Unhealable, heal
from .scanning import (
    Brackets,
    fences,
    guess_name,
    looks_like_call,
    problem_text,
    protocol_call,
)

__all__ = ["TextFormats", "detect_text"]

_LATEX_BEFORE = re.compile(r"(?:\\[A-Za-z]+|[\^_])\s*$")
_RARE = "<|[@>]"
"""Characters prose seldom holds, rarest first: a marker is looked for only in a response
holding the first of them the marker has."""


class TextFormats:
    """The text formats in use, in the order they are tried: the built-in ones and
    ``extra`` (a host plugin's). Two formats with one name are a ``ValueError``."""

    __slots__ = ("_always", "_formats", "_marked", "_markers", "_reasoning")

    def __init__(self, extra: Iterable[TextFormat] = ()) -> None:
        formats = [*BUILTIN, *extra]
        names = [f.name for f in formats]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"two text formats are named {', '.join(twice)}")
        for f in formats:
            if not isinstance(f, TextFormat):
                raise TypeError(f"{f!r} is not a TextFormat")
        self._formats = tuple(sorted(formats, key=lambda f: (f.order, f.name)))
        # each marker once, with the positions (in order) of the formats it calls for
        markers: dict[str, list[int]] = {}
        for position, f in enumerate(self._formats):
            for marker in f.markers:
                markers.setdefault(marker, []).append(position)
        # markers grouped by a character rare in prose that each holds: a response without
        # that character holds none of its markers
        keyed: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
        for marker, positions in markers.items():
            if marker:
                key = next((c for c in _RARE if c in marker), marker[0])
                keyed.setdefault(key, []).append((marker, tuple(positions)))
        self._markers = tuple((key, tuple(group)) for key, group in keyed.items())
        self._always = tuple(p for p, f in enumerate(self._formats) if not any(f.markers))
        self._reasoning = _reasoning(tuple(pair for f in self._formats for pair in f.reasoning))
        # a tag, a marker's key character, or a reasoning block's: the text needs the formats
        starts = {"<", *keyed, *(block.opening for block in self._reasoning.blocks)}
        self._marked = re.compile("|".join(re.escape(s) for s in sorted(starts)))

    @property
    def formats(self) -> tuple[TextFormat, ...]:
        return self._formats

    @property
    def reasoning(self) -> Reasoning:
        """The reader of the reasoning blocks of these formats and the ``<think>`` tags."""
        return self._reasoning

    def unmarked(self, text: str) -> bool:
        """Whether ``text`` holds no tag, no format's marker and no reasoning block: then
        only the JSON protocol can read it."""
        return not self._always and self._marked.search(text) is None

    def detect(self, text: str, known: Collection[str] = ()) -> TextDetection:
        """The calls in ``text``; ``known`` tool names make ambiguous forms count as calls."""
        visible, open_left = self._reasoning.set_aside(text)
        if open_left:
            return TextDetection(format="none", unfinished_thought=True)
        # one substring search per marker: most responses hold none, and go to JSON at once
        due: set[int] = set(self._always)
        for key, group in self._markers:
            if key in visible:
                due.update(p for marker, positions in group if marker in visible for p in positions)
        for position in sorted(due):
            text_format = self._formats[position]
            try:
                found = text_format.detect(visible, known)
            except Exception as exc:  # a plugin's format: the response is read without it
                warnings.warn(
                    f"text format {text_format.name!r} raised {exc!r}; the response was read "
                    "without it",
                    RuntimeWarning,
                    stacklevel=2,
                )
                continue
            if found is not None:
                return found
        return _json_protocol(visible, known)


THOUGHTS = (("<think>", "</think>"), ("<thinking>", "</thinking>"))
"""The reasoning tags set aside whatever the formats, in any letter case."""


@dataclass(frozen=True, slots=True)
class Block:
    """One kind of reasoning block."""

    opening: str
    closing: str
    folded: bool = False
    """Read in any letter case (the ``<think>`` tags)."""


class Reasoning:
    """The reasoning blocks of the formats in use, read in one pass from left to right.

    The earliest opening, of any family, starts a block that runs to its own closing (one
    never closed runs to the end): another family's tags inside it, a quoted ``</think>``
    among them, are plain text. A ``</think>`` (or ``</thinking>``) before any opening ends
    reasoning the prompt opened (templates that put ``<think>`` in the prompt); anywhere else
    it opens nothing. An opening that begins with a role header (``<|start|>assistant
    to=self<|message|>``) also opens a block at the very start of the text without it: the
    prompt ends with that header, and the model goes on writing it. An opening right after a
    role header that addresses the message to a function (harmony's `` to=functions.NAME``,
    at the start of the text or after ``<|start|>assistant``) opens no block: a message to a
    tool is a call whatever its channel. Detection reads what :meth:`set_aside` leaves and
    the stream shows what :meth:`shown` leaves, so what runs and what is shown come from one
    reading. Linear: the openings are found by searches that go on from the last block's
    end, each closing by one search after its opening.
    """

    __slots__ = ("_exact", "_folded", "_leads", "_searches", "blocks")

    strays: tuple[str, ...] = tuple(closing for _, closing in THOUGHTS)
    """The closings that may come with no opening (any letter case): ``</think>``..."""

    def __init__(self, declared: Iterable[tuple[str, str]] = ()) -> None:
        thoughts = {tag for pair in THOUGHTS for tag in pair}
        blocks = [Block(opening, closing, folded=True) for opening, closing in THOUGHTS]
        for opening, closing in declared:  # an opening two formats declare: the first's closing
            taken = opening.lower() in thoughts or any(b.opening == opening for b in blocks)
            if opening and closing and not taken:
                blocks.append(Block(opening, closing))
        self.blocks: tuple[Block, ...] = tuple(blocks)
        """The ``<think>`` tags, then each opening the formats declare, in their order."""
        self._exact: dict[str, re.Pattern[str]] = {}
        """Per opening, its closing."""
        self._folded: dict[str, re.Pattern[str] | None] = dict.fromkeys(self.strays)
        """Per opening read in any case (in lower case), its closing; ``None`` for a stray."""
        groups: dict[str, list[tuple[str, bool]]] = {}
        for block in self.blocks:
            ends = re.compile(re.escape(block.closing), re.IGNORECASE if block.folded else 0)
            (self._folded if block.folded else self._exact)[block.opening] = ends
        for token in (*(b.opening for b in self.blocks), *self.strays):
            groups.setdefault(token[0], []).append((token, token in self._folded))
        self._searches = tuple((first, _search(tokens)) for first, tokens in groups.items())
        headed = ((b, _ROLE_HEADER.match(b.opening)) for b in self.blocks if not b.folded)
        self._leads = tuple(
            (lead, self._exact[block.opening])
            for block, header in headed
            if header is not None
            for lead in (block.opening[header.end() :], block.opening[header.end() + 1 :])
        )
        """Per opening that begins with a role header, what follows the role, with and
        without its space, and the closing: such a block at the start of the text."""

    def set_aside(self, text: str) -> tuple[str, bool]:
        """``text`` as detection reads it: without its reasoning blocks, nor what comes
        before a ``</think>`` that precedes every opening; and whether a block never closes."""
        return self._read(text, detecting=True)

    def shown(self, text: str) -> str:
        """``text`` as it is shown: without its reasoning blocks (one never closed runs to
        the end) and without a ``</think>`` outside them."""
        return self._read(text, detecting=False)[0]

    def _read(self, text: str, detecting: bool) -> tuple[str, bool]:
        searches = [search for first, search in self._searches if first in text]
        ahead = [search(text) for search in searches]  # each group's next opening or closing
        kept: list[str] = []
        at = 0
        lead = next(((n, ends) for n, ends in self._leads if text.startswith(n)), None)
        if lead is not None:  # a block whose role header the prompt wrote
            end = lead[1].search(text, len(lead[0]))
            if end is None:
                return "", True
            at = end.end()
        while True:
            found = None
            for index, next_one in enumerate(ahead):
                match = next_one
                if match is not None and match.start() < at:  # inside the block just read
                    match = ahead[index] = searches[index](text, at)
                if match is not None and (found is None or match.start() < found.start()):
                    found = match
            if found is None:
                kept.append(text[at:])
                return "".join(kept), False
            token = found.group()
            if token in self._exact:
                closing: re.Pattern[str] | None = self._exact[token]
            else:
                closing = self._folded[token.lower()]
            if closing is None:  # a stray: first of all, it ends reasoning the prompt opened
                if not detecting:
                    kept.append(text[at : found.start()])
                elif at:
                    kept.append(text[at : found.end()])
                at = found.end()
                continue
            if token in self._exact and _addressed(text, at, found.start()):
                kept.append(text[at : found.end()])  # a message to a tool: no reasoning
                at = found.end()
                continue
            kept.append(text[at : found.start()])
            end = closing.search(text, found.end())
            if end is None:
                return "".join(kept), True
            at = end.end()


_ROLE_HEADER = re.compile(r"<\|\w+\|>\w+(?= )")
"""An opening's role header, up to the space after the role: ``<|start|>assistant``."""
_ADDRESSED = re.compile(r"(?:<\|start\|>\s*+assistant)?+\s*+to=functions\.[\w.\-]++\s*+")
"""A role header naming a function as the recipient: ``<|start|>assistant to=functions.NAME``,
its start left off at the start of the text (the prompt wrote it). Harmony writes a content
type (``<|constrain|>json``) after the channel's name, so none stands before an opening."""
_HEADER_REACH = 256
"""How far before an opening its role header is looked for."""


def _addressed(text: str, floor: int, opening: int) -> bool:
    """Whether the role header right before ``opening``, not before ``floor`` (the last
    block's end), addresses the message to a function: at the start of the text, or from a
    ``<|start|>`` on."""
    to = text.rfind("to=", max(floor, opening - _HEADER_REACH), opening)
    if to == -1:
        return False
    start = text.rfind("<|start|>", max(floor, to - _HEADER_REACH), to)
    if start != -1 and _ADDRESSED.fullmatch(text, start, opening):
        return True
    return floor == 0 and _ADDRESSED.fullmatch(text, 0, opening) is not None


def _search(tokens: list[tuple[str, bool]]) -> Callable[..., re.Match[str] | None]:
    """One search for ``tokens`` (``(token, folded)``, sharing their first character, which
    is ``<`` for the folded ones): the shortest first, as the stream meets them, and that
    character outside any group, so the engine skips ahead to it."""
    spelled = [
        re.escape(token[0]) + (f"(?i:{re.escape(token[1:])})" if folded else re.escape(token[1:]))
        for token, folded in sorted(tokens, key=lambda pair: len(pair[0]))
    ]
    return re.compile("|".join(spelled)).search


@lru_cache(maxsize=32)
def _reasoning(declared: tuple[tuple[str, str], ...]) -> Reasoning:
    """The reader of ``declared`` blocks; one per set, so the stream's tables are shared."""
    return Reasoning(declared)


DEFAULT_FORMATS = TextFormats()


def detect_text(
    text: str, known: Collection[str] = (), formats: TextFormats | None = None
) -> TextDetection:
    """The calls in ``text`` under ``formats`` (default: the built-in ones); ``known`` tool
    names make ambiguous forms count as calls."""
    return (formats or DEFAULT_FORMATS).detect(text, known)


# -- the JSON protocol -----------------------------------------------------------------------


def _json_protocol(text: str, known: Collection[str]) -> TextDetection:
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        whole = _calls_or_final(stripped, known)
        if whole is not None:
            return whole
    fenced: list[TextDetection] = []
    for lang, body in fences(text):
        if lang.lower() in ("", "json", "tool_call", "tool_code", "javascript"):
            found = _calls_or_final(body.strip(), known)
            if found is not None:
                fenced.append(found)
    if fenced:  # every fenced call, in order; a final answer only when no block holds a call
        calls = tuple(call for found in fenced for call in found.calls)
        if calls:
            notes = tuple(dict.fromkeys(note for found in fenced for note in found.notes))
            return TextDetection(calls, "json", notes=notes)
        return fenced[0]
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
    if isinstance(value, dict | Mapping) and "final" in value and "action" not in value:
        return TextDetection(format="json", final=value["final"], has_final=True)
    calls = [c for c in (protocol_call(item, known, notes) for item in items) if c is not None]
    return TextDetection(tuple(calls), "json", notes=notes) if calls else None


def _in_prose(text: str, known: Collection[str]) -> TextDetection:
    """Objects embedded in prose, JSON lines, concatenated objects, arrays of objects.

    Only objects holding a name key (``tool``, ``name``, ``action``, ``final``...) can be
    calls, so the scan goes from key to key (a regular expression over the whole text) and
    parses just the object around each: linear in the length of prose full of braces.
    """
    if not any(word in text for word in _KEY_WORDS) or not _may_hold_call(text, known):
        return _NO_CALL
    calls: list[TextCall] = []
    notes: list[str] = []
    final: Any = None
    has_final = False
    done = 0
    enclosed = False  # read on inside a broken object that never closes
    objects = _Objects(text)
    for key in _KEY.finditer(text):
        start = key.start()
        if start < done or (start and (text[start - 1].isalnum() or text[start - 1] == "_")):
            continue  # inside an object already read, or the end of a longer word
        opening, end = objects.around(start, done)
        if opening is None:
            continue
        found, after = _at(text, opening, known, end, objects, enclosed)
        if found is None:
            continue
        calls.extend(found.calls)
        notes.extend(found.notes)
        if found.has_final:
            final, has_final = found.final, True
        enclosed = enclosed or (end is None and after < len(text))
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

_KEY_WORDS = ("tool", "name", "function", "action", "final")
"""What every name key holds: a text without them holds no call of the JSON protocol."""
_NO_CALL = TextDetection(format="json")

_KEY = re.compile(r"""(?:tool|name|tool_name|function|action|final)["']?\s*:""")
"""A name key; starting with the words themselves lets the regex engine scan fast."""


class _Objects:
    """The ``{`` of the innermost object around a position, over one text: the openings are
    found once and each bracket's closing is answered by :class:`.scanning.Brackets`, so a
    text full of keys and open braces is still read in linear time."""

    __slots__ = ("_arrays", "_brackets", "_openings", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._openings = [m.start() for m in _OPENING.finditer(text)]
        self._brackets = {quotes: Brackets(text, quotes) for quotes in (False, True)}
        self._arrays: list[int] | None = None

    def in_open_array(self, index: int) -> bool:
        """Whether the nearest ``[`` before ``index`` is still open at the end of the text."""
        if self._arrays is None:
            self._arrays = [m.start() for m in _ARRAY.finditer(self._text)]
        at = bisect.bisect_left(self._arrays, index) - 1
        if at < 0:
            return False
        return self._brackets[False].closing(self._arrays[at]) == len(self._text)

    def around(self, position: int, floor: int) -> tuple[int | None, int | None]:
        """The ``{`` of the innermost object around ``position`` (not before ``floor``), and
        the index of its ``}`` (``None`` when it never closes)."""
        text = self._text
        at = bisect.bisect_left(self._openings, position) - 1
        for _ in range(16):
            if at < 0 or self._openings[at] < floor:
                return None, None
            index = self._openings[at]
            quotes = text[index + 1 : index + 3].lstrip()[:1] == "'"
            end = self._brackets[quotes].closing(index)
            if end is not None:
                if end < 0 or end >= len(text):
                    return index, None
                if end > position:
                    return index, end
            at -= 1
        return None, None


_OPENING = re.compile(r"\{")
_ARRAY = re.compile(r"\[")


def _at(
    text: str,
    index: int,
    known: Collection[str],
    end: int | None,
    objects: _Objects,
    enclosed: bool = False,
) -> tuple[TextDetection | None, int]:
    """The calls in the object starting at ``index`` and closing at ``end``, and where the
    span ends. An object open to the end of the text inside an array also open to the end,
    or inside a broken object that never closes (``enclosed``), was cut off: more than its
    own brace is missing. A broken object that never closes and breaks off where another
    object begins (a ``{`` its JSON cannot hold there) spans only up to that ``{``: the
    model began again, and what follows is read on its own."""
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
        if end is None and objects.in_open_array(index):
            raise Unhealable("the list of calls never closes", truncated=True)
        if end is None and enclosed:
            raise Unhealable("the object around it never closes", truncated=True)
    except Unhealable as exc:
        if end is None and exc.at and fragment.startswith("{", exc.at):
            fragment = fragment[: exc.at]  # the rest is another object, read on its own
            after = index + exc.at
        if looks_like_call(fragment):
            broken = TextCall(guess_name(fragment), None, problem_text(exc))
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
