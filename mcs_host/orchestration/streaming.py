"""Streaming text: show a streamed response as it comes, and signal a call early.

:class:`TextStream` (``Orchestrator.stream()``) is the incremental detector a chat UI feeds
text chunks: each ``feed`` returns what is safe to show, and ``finish`` what
``process_llm_response`` returns for the whole text. Its openers come from the text formats in
use (each format's markers and reasoning blocks, the ``<think>`` tags, the JSON protocol's
brackets and fences), so a family added later or a host plugin's format streams as well.
:func:`might_be_tool_call` is the same detector run on the tail of what a client has
buffered; :func:`is_complete_tool_call` says when the buffer holds a whole call. A provider's
native stream events are added up by :mod:`.native_streams` instead.

One module: it is one incremental detector, deciding what of a streamed text may be shown;
it is long because its parts (the automaton over the formats' openers, the scanner of tags,
brackets, fences and reasoning, and the stream's end answered once across threads and event
loops) serve that detector alone.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from .calls import Detection
from .detection import detect
from .healing import MISSING_BRACE
from .text import DEFAULT_FORMATS, Reasoning, TextFormats

if TYPE_CHECKING:
    import asyncio
    from types import TracebackType

    from mcs_host.contract import DriverResponse

__all__ = [
    "TextStream",
    "is_complete",
    "is_complete_tool_call",
    "might_be_tool_call",
]

_WINDOW = 64


def might_be_tool_call(
    partial: str, formats: TextFormats | None = None, known: Collection[str] = ()
) -> bool:
    """Whether the end of ``partial`` could be (the start of) a tool call: whether a
    :class:`TextStream` fed its last 64 characters (as the start of a response when they are
    all of it) would hold any of them back (an opener of ``formats`` or the start of one, a
    bracket or fence still open or holding a call of ``known`` tools, a tag still open), other
    than the letters of a word that may begin a marker (``f`` of ``functools[``): those are
    most often prose."""
    tail = partial[-_WINDOW:]
    scanner = _Scanner(
        _table(formats), lambda text: detect(text, known, formats).found, len(partial) <= _WINDOW
    )
    scanner.feed(tail)
    return scanner.holding and _WORD.fullmatch(tail, scanner._start) is None


_WORD = re.compile(r"\w+")


def is_complete_tool_call(
    text: str, known: Collection[str] = (), formats: TextFormats | None = None
) -> bool:
    """Whether ``text`` holds at least one whole tool call and nothing cut off (a call whose
    closing brace had to be added is not whole yet while the stream goes on)."""
    return is_complete(detect(text, known, formats))


def is_complete(detection: Detection) -> bool:
    """Whether every call in ``detection`` is whole: mid-stream, a call whose closing brace
    had to be added may still get more, so it is not."""
    return detection.found and all(
        call.problem is None and MISSING_BRACE not in call.healed for call in detection.calls
    )


# -- text streamed to a chat UI ----------------------------------------------------------------

_CALL, _THINK, _STRAY, _FENCE = range(4)
"""What an opener starts, in the order a tie is decided: a call's marker (held to the end),
a reasoning block (never shown), a stray ``</think>`` (dropped), a code fence (held until it
closes, then shown unless it holds a call)."""
_SCAN, _REASON, _HOLD, _DONE, _LEAD = range(5)
"""What the scanner does: scan for openers, read a reasoning block to its closing, hold
everything to the end, take no more chunks, or hold the start of the response while it may be
the rest of a role header the prompt began."""
_FENCE_MARK = "```"
_IN_PLACE = "<think></think>"
"""Read before a closed bracket or fence that a reasoning tag came before: detection then
reads it as in its place, where a ``</think>`` no longer ends reasoning the prompt opened."""
_BRACKETS = {"{": "}", "[": "]"}
_ROLE_HEADER = re.compile(r"<\|\w+\|>\w+(?= )")
"""A marker's opening role header, up to the space after the role: ``<|start|>assistant``."""


@dataclass(frozen=True, slots=True)
class _Pattern:
    text: str
    """Lower case when ``folded``."""
    kind: int
    folded: bool = False
    closing: str = ""
    """A reasoning opener's closing."""


class _Automaton:
    """Aho-Corasick over a few short patterns: a state is the set of partial matches the text
    ends with, built the first time the text reaches it, so a character costs one lookup."""

    __slots__ = (
        "_alphabet",
        "_ids",
        "_patterns",
        "_states",
        "ends",
        "firsts",
        "held",
        "moves",
        "reach",
    )

    def __init__(self, patterns: tuple[_Pattern, ...]) -> None:
        self._patterns = patterns
        spellings = [p.text + p.text.upper() if p.folded else p.text for p in patterns]
        self._alphabet = frozenset("".join(spellings))
        firsts = {p.text[0] for p in patterns} | {p.text[0].upper() for p in patterns if p.folded}
        self.firsts = "".join(sorted(firsts))
        """The characters a match starts with."""
        empty: tuple[tuple[int, int], ...] = ()
        self._states: list[tuple[tuple[tuple[int, int], ...], tuple[int, ...]]] = [(empty, ())]
        self._ids: dict[tuple[Any, ...], int] = {(empty, ()): 0}
        self.moves: list[dict[str, int]] = [{}]
        self.held: list[int] = [0]
        """Per state, how many of the last characters may be the start of a match."""
        self.ends: list[tuple[int, ...]] = [()]
        """Per state, the patterns (indexes) a match of which ends on entering it."""
        self.reach: list[int] = [0]
        """Per state, the length of the longest match or partial match the text ends with:
        one longer than a match that ends there began before it."""

    @property
    def patterns(self) -> tuple[_Pattern, ...]:
        return self._patterns

    def move(self, state: int, char: str) -> int:
        """The state after ``char``; remembered, for characters the patterns hold."""
        found = self.moves[state].get(char)
        if found is not None:
            return found
        if char not in self._alphabet:
            return 0
        lower = char.lower()
        advanced: set[tuple[int, int]] = set()
        ended: list[int] = []
        starts = ((index, 0) for index in range(len(self._patterns)))
        for index, matched in (*self._states[state][0], *starts):
            pattern = self._patterns[index]
            if pattern.text[matched] == (lower if pattern.folded else char):
                if matched + 1 == len(pattern.text):
                    ended.append(index)
                else:
                    advanced.add((index, matched + 1))
        key = (tuple(sorted(advanced)), tuple(sorted(ended)))
        target = self._ids.get(key)
        if target is None:
            target = self._ids[key] = len(self._states)
            self._states.append(key)
            self.moves.append({})
            self.held.append(max((matched for _, matched in key[0]), default=0))
            self.ends.append(key[1])
            lengths = (len(self._patterns[index].text) for index in key[1])
            self.reach.append(max((self.held[-1], *lengths)))
        self.moves[state][char] = target
        return target


@dataclass(frozen=True, slots=True)
class _Openers:
    """What the formats in use start their calls and reasoning with, as one automaton."""

    automaton: _Automaton
    triggers: re.Pattern[str]
    """A character that may start an opener, a bracket or a tag."""
    starts: str
    """Those characters."""
    inside: str
    """What may matter inside a bracket or fence: a character starting an opener, a bracket,
    a quote, a backslash."""
    within: re.Pattern[str]
    """One of those."""
    closers: dict[int, tuple[_Automaton, re.Pattern[str]]]
    """Per reasoning opener (its pattern index), its closing's automaton and first characters."""
    reader: Reasoning
    """The reader of reasoning detection uses: what it leaves of the text held to the end is
    shown then."""
    unmarked: bool
    """A format declares no marker: it may read a call anywhere, so nothing is shown early."""
    tag_limit: int
    leads: tuple[str, ...]
    """What follows the role in each marker that opens with a role header, with and without
    its space (`` to=`` and ``to=`` of gpt-oss's ``<|start|>assistant to=``): the prompt ends
    with the role's header and the model may go on writing it, so a response that begins
    with one of them is held as the marker is."""


def _table(formats: TextFormats | None = None) -> _Openers:
    """The openers of ``formats`` (default: the built-in ones): each format's markers, its
    reasoning blocks, the ``<think>`` tags and the JSON protocol's fences (its brackets are
    read apart); built once per set of formats."""
    formats = formats or DEFAULT_FORMATS
    return _openers(tuple(f.markers for f in formats.formats), formats.reasoning)


@lru_cache(maxsize=32)
def _openers(declared: tuple[tuple[str, ...], ...], reader: Reasoning) -> _Openers:
    patterns: dict[tuple[str, bool], _Pattern] = {}

    def add(pattern: _Pattern) -> None:
        key = (pattern.text, pattern.folded)
        if key not in patterns or pattern.kind < patterns[key].kind:
            patterns[key] = pattern

    add(_Pattern(_FENCE_MARK, _FENCE))
    for block in reader.blocks:
        add(_Pattern(block.opening, _THINK, block.folded, block.closing))
    for closing in reader.strays:
        add(_Pattern(closing, _STRAY, True))
    for markers in declared:
        for marker in markers:
            if marker == _FENCE_MARK or marker in _BRACKETS or not marker:
                continue  # the JSON protocol's own: fences and brackets are read apart
            add(_Pattern(marker, _CALL))
    ordered = tuple(patterns.values())
    automaton = _Automaton(ordered)
    closers = {}
    for index, pattern in enumerate(ordered):
        if pattern.kind == _THINK:
            closer = _Automaton((_Pattern(pattern.closing, _STRAY, pattern.folded),))
            closers[index] = (closer, re.compile(f"[{re.escape(closer.firsts)}]"))
    starts = "".join(sorted(set(automaton.firsts + "{[<")))
    headed = (_ROLE_HEADER.match(marker) for markers in declared for marker in markers)
    leads = {
        rest
        for header in headed
        if header is not None and header.end() < len(header.string)
        for rest in (header.string[header.end() :], header.string[header.end() + 1 :])
    }
    inside = "".join(sorted(set(automaton.firsts + "{}[]\"'\\")))
    return _Openers(
        automaton,
        re.compile(f"[{re.escape(starts)}]"),
        starts,
        inside,
        re.compile(f"[{re.escape(inside)}]"),
        closers,
        reader,
        any(not any(markers) for markers in declared),
        max(64, 2 * max(len(p.text) for p in ordered)),
        tuple(sorted(leads)),
    )


class _Scanner:
    """The incremental detector: which part of the text fed so far is safe to show.

    Held back: the last characters while they may start an opener (the automaton says how
    many); a tag (``<`` up to ``>`` or a space, at most ``tag_limit`` characters) while a
    marker may appear inside it; a bracket (``{``, ``[``) until it closes and a fence until it
    closes, then shown unless ``check`` finds a call in it; everything from a call's marker on.
    A reasoning block is dropped when it closes. At the start of the response (when ``lead``),
    text that may be the rest of a marker the prompt began (a role header the model goes on
    writing) is held too, and as the marker is once it is whole. Each character is looked at
    once, and each closed bracket or fence is checked once: linear in the text however it is
    chunked.
    """

    __slots__ = (
        "_blocks",
        "_check",
        "_closer",
        "_escape",
        "_fence",
        "_first",
        "_found",
        "_held",
        "_idle",
        "_long",
        "_mode",
        "_parts",
        "_plain",
        "_pos",
        "_quote",
        "_reasoning",
        "_span",
        "_stack",
        "_start",
        "_starts",
        "_state",
        "_tag",
    )

    def __init__(self, found: _Openers, check: Callable[[str], bool], lead: bool = True) -> None:
        self._found = found
        self._starts = found.starts
        self._check = check
        self._mode = _HOLD if found.unmarked else _LEAD if lead and found.leads else _SCAN
        self._idle = self._mode == _SCAN
        """Nothing is held: a character that starts no opener is shown at once."""
        self._plain = False
        """Inside a bracket or fence, no opener begun: a character that starts none, and no
        bracket, quote or backslash, is only kept."""
        self._blocks: list[str] = []
        self._parts: list[str] = []
        """The text fed: blocks of parts joined, and the parts since."""
        self._pos = 0
        self._start = 0
        """Where the text not yet shown starts."""
        self._state = 0
        self._held = ""
        """The text held from ``_start``, up to the bracket or fence being read."""
        self._long: list[str] = []
        """The bracket or fence being read, as fed."""
        self._span = -1
        self._fence = -1
        self._tag = -1
        self._stack: list[str] = []
        self._quote = ""
        self._escape = False
        self._closer: tuple[_Automaton, re.Pattern[str]] | None = None
        self._reasoning = 0
        self._first = -1
        """Where the first reasoning opening or ``</think>`` began (-1: none yet)."""

    @property
    def holding(self) -> bool:
        """Whether text is held back now that may be, or is, a tool call."""
        return self._mode == _HOLD or (self._mode in (_SCAN, _LEAD) and self._start < self._pos)

    @property
    def text(self) -> str:
        """The response fed so far."""
        return "".join([*self._blocks, *self._parts])

    def feed(self, chunk: str) -> str:
        """Take the next chunk of the response: the text safe to show now."""
        parts = self._parts
        if self._idle:  # nothing held: show up to the first character that may open something
            if len(chunk) == 1:
                if chunk not in self._starts:
                    parts.append(chunk)
                    if len(parts) >= 1024:
                        self._block()
                    self._start = self._pos = self._pos + 1
                    return chunk
            elif self._found.triggers.search(chunk) is None:
                parts.append(chunk)
                if len(parts) >= 1024:
                    self._block()
                self._start = self._pos = self._pos + len(chunk)
                return chunk
        elif self._plain and len(chunk) == 1 and chunk not in self._found.inside:
            parts.append(chunk)
            if len(parts) >= 1024:
                self._block()
            self._long.append(chunk)
            self._pos += 1
            return ""
        if self._mode == _DONE:
            raise ValueError("this stream has finished")
        parts.append(chunk)
        if len(parts) >= 1024:
            self._block()
        if self._mode == _HOLD:
            self._pos += len(chunk)
            return ""
        if self._mode == _LEAD:
            return self._lead(chunk)
        if len(chunk) == 1 and self._mode == _SCAN:
            shown: list[str] = []
            self._step(chunk, self._pos, shown)
            self._pos += 1
            return "".join(shown)
        return self._scan(chunk)

    def _lead(self, chunk: str) -> str:
        """The start of the response, ``chunk`` kept already: held while it may be the rest
        of a marker the prompt began, held to the end once it is, else scanned from its start."""
        read = self._held + chunk
        self._pos += len(chunk)
        leads = self._found.leads
        if any(read.startswith(lead) for lead in leads):
            self._hold()
            return ""
        if any(lead.startswith(read) for lead in leads):
            self._held = read
            return ""
        self._mode = _SCAN
        self._idle = True
        self._held = ""
        self._pos = self._start
        return self._scan(read)

    def _block(self) -> None:
        """Join the parts kept so far: a stream of single characters keeps few objects."""
        self._blocks.append("".join(self._parts))
        self._parts.clear()

    def _scan(self, chunk: str) -> str:
        shown: list[str] = []
        size = len(chunk)
        base = self._pos
        index = 0
        while index < size and self._mode != _HOLD:
            if self._mode == _REASON:
                index = self._reason(chunk, index, base)
                continue
            if self._idle:
                found = self._found.triggers.search(chunk, index)
                stop = size if found is None else found.start()
                if stop > index:
                    shown.append(chunk[index:stop])
                    self._start = base + stop
                index = stop
                if index == size:
                    break
            elif self._plain:  # inside a bracket or fence: keep up to what may matter
                found = self._found.within.search(chunk, index)
                stop = size if found is None else found.start()
                if stop > index:
                    self._long.append(chunk[index:stop])
                index = stop
                if index == size:
                    break
            self._step(chunk[index], base + index, shown)
            index += 1
        self._pos = base + size
        return "".join(shown)

    def _step(self, char: str, at: int, shown: list[str]) -> None:
        found = self._found
        automaton = found.automaton
        state = automaton.moves[self._state].get(char)
        if state is None:
            state = automaton.move(self._state, char)
        self._state = state
        closed = False
        if self._span >= 0:
            self._long.append(char)
            closed = self._bracket(char)
        elif self._fence >= 0:
            self._long.append(char)
        elif char in _BRACKETS:
            self._span = at
            self._stack = [_BRACKETS[char]]
            self._quote = ""
            self._long = [char]
        else:
            self._held += char
            if char == "<" and self._tag < 0:
                self._tag = at
        ends = automaton.ends[state]
        if ends:
            opened = self._opener(min(ends, key=lambda i: automaton.patterns[i].kind), at, shown)
            if opened is None:
                return
            closed = closed or opened
        if closed:
            whole = "".join(self._long)
            began = max(self._span, self._fence)
            self._long = []
            self._span = self._fence = -1
            if self._check(_IN_PLACE + whole if 0 <= self._first < began else whole):
                self._hold()
                return
            self._held += whole
        if self._tag >= 0 and (char == ">" or char.isspace() or at - self._tag >= found.tag_limit):
            self._tag = -1
        release = at + 1 - automaton.held[self._state]
        for start in (self._span, self._fence, self._tag):
            if 0 <= start < release:
                release = start
        self._show(release, shown)
        if self._span < 0 and self._fence < 0:
            self._idle = self._start > at and self._tag < 0
            self._plain = False
            if self._idle:
                self._state = 0  # nothing partial is left: the fast path keeps no automaton
        else:
            self._idle = False
            self._plain = self._state == 0 and self._tag < 0 and not self._escape

    def _opener(self, index: int, at: int, shown: list[str]) -> bool | None:
        """Act on the match of pattern ``index`` ending at ``at``: ``None`` when reading
        changed course (a call, a reasoning block, a dropped closing), else whether a fence
        closed."""
        automaton = self._found.automaton
        pattern = automaton.patterns[index]
        begins = at - len(pattern.text) + 1
        if pattern.kind in (_THINK, _STRAY) and self._first < 0:
            self._first = begins
        if pattern.kind == _CALL:
            self._hold()
            return None
        if pattern.kind in (_THINK, _STRAY) and automaton.reach[self._state] > len(pattern.text):
            self._hold()  # an opener begun before it may be what the reader meets first
            return None
        if pattern.kind == _THINK:
            if self._fence >= 0 or 0 <= self._span < begins:
                self._hold()  # inside a bracket or fence: what it is, is not known here
                return None
            self._show(begins, shown)
            self._mode = _REASON
            self._closer = self._found.closers[index]
            self._reasoning = 0
            self._reset(begins)
            return None
        if self._span >= 0:
            return False  # a stray closing or a fence inside a bracket: the bracket decides
        if pattern.kind == _STRAY:
            if self._fence >= 0:
                return False
            self._show(begins, shown)
            self._reset(at + 1)
            return None
        self._state = 0  # a fence: its backticks are read
        if self._fence >= 0:
            return True
        self._fence = begins
        self._long = [self._held[-3:]]
        self._held = self._held[:-3]
        return False

    def _hold(self) -> None:
        """Hold everything from here on until the end: it is, or may be, a call."""
        self._mode = _HOLD
        self._idle = self._plain = False

    def _bracket(self, char: str) -> bool:
        """Read ``char`` inside the bracket being read: whether it closes it. A wrong closing
        bracket holds the rest back (what is read then is not known here)."""
        if self._quote:
            if self._escape:
                self._escape = False
            elif char == "\\":
                self._escape = True
            elif char == self._quote:
                self._quote = ""
        elif char == '"' or (char == "'" and not self._long[-2][-1].isalnum()):
            self._quote = char  # an apostrophe after a letter opens no string
        elif char in _BRACKETS:
            self._stack.append(_BRACKETS[char])
        elif char in "}]":
            if self._stack.pop() != char:
                self._hold()
                return False
            return not self._stack
        return False

    def _show(self, end: int, shown: list[str]) -> None:
        """Show the held text up to ``end``: a closed bracket or fence may hold a stray
        ``</think>``, which the reader of reasoning drops (no opening is ever shown)."""
        cut = end - self._start
        if cut > 0:
            piece = self._held[:cut]
            shown.append(self._found.reader.shown(piece) if "</" in piece else piece)
            self._held = self._held[cut:]
            self._start = end

    def _reset(self, start: int) -> None:
        """Hold nothing before ``start`` (a reasoning block begins, or a closing was dropped)."""
        self._start = start
        self._held = ""
        self._long = []
        self._span = self._fence = self._tag = -1
        self._state = 0
        self._idle = self._mode == _SCAN
        self._plain = False

    def _reason(self, chunk: str, index: int, base: int) -> int:
        """Read a reasoning block on to its closing: where reading goes on."""
        assert self._closer is not None
        automaton, firsts = self._closer
        state = self._reasoning
        size = len(chunk)
        while index < size:
            if state == 0:
                found = firsts.search(chunk, index)
                if found is None:
                    break
                index = found.start()
            state = automaton.move(state, chunk[index])
            index += 1
            if automaton.ends[state]:
                self._mode = _SCAN
                self._reset(base + index)
                return index
        self._reasoning = state
        return size


class TextStream(_Scanner):
    """One response streamed as text, for a chat UI: :meth:`feed` each chunk and show what it
    returns, then :meth:`finish`. Made by :meth:`Orchestrator.stream
    <mcs_host.Orchestrator.stream>`.

    ``feed`` returns the text that is safe to show now, never a fragment of call markup: it
    holds back a tail while it may be the start of one of the openers of the orchestrator's
    text formats, a bracket or a fence until it closes (then shows it unless it holds a call),
    everything from a call's marker on, and at the start of the response the rest of a role
    header the prompt began (gpt-oss's `` to=functions.NAME``). Reasoning blocks, read by the
    one reader detection reads them with, are not shown. ``finish`` returns what
    ``process_llm_response`` of the whole text returns (it runs the calls once, however often
    it is called), and :attr:`rest` the held text that turned out not to be a call. Cost is
    linear in the length of the text however it is chunked.
    """

    __slots__ = ("_driver", "_end", "_rest")

    def __init__(self, driver: _Driver) -> None:
        super().__init__(_table(driver.text_formats), lambda text: driver.detect(text).found)
        self._driver = driver
        self._end = _Once()
        self._rest = ""

    @property
    def rest(self) -> str:
        """After :meth:`finish`: the held text left to show (without reasoning blocks), when
        the orchestrator did not act on the response; else empty."""
        return self._rest

    def finish(self) -> DriverResponse:
        """The end of the response: what ``process_llm_response`` returns for the whole
        text; :attr:`rest` is then the text left to show. The first caller runs the calls;
        any other, at the same time (another thread, :meth:`afinish` on an event loop) or
        later, waits for that answer and gets the same response, or the same exception."""
        if self._end.claim(sync=True):
            text = self._close()
            try:
                response = self._driver.process_llm_response(text)
                self._rest = self._left(text, response)
            except BaseException as exc:
                self._end.settle(None, exc)
                raise
            self._end.settle(response, None)
        return self._end.wait()

    async def afinish(self) -> DriverResponse:
        """:meth:`finish` on an event loop (``aprocess_llm_response``); waiting for another
        caller's answer, the loop goes on."""
        if self._end.claim(sync=False):
            text = self._close()
            try:
                response = await self._driver.aprocess_llm_response(text)
                self._rest = self._left(text, response)
            except BaseException as exc:  # a cancelled first caller too: nothing runs again
                self._end.settle(None, exc)
                raise
            self._end.settle(response, None)
        return await self._end.answer()

    def _close(self) -> str:
        """Take no more chunks: the whole text."""
        self._mode = _DONE
        self._idle = self._plain = False
        return self.text

    def _left(self, text: str, response: DriverResponse) -> str:
        """What is left to show: the held text as the reader of reasoning shows it, when the
        orchestrator did not act on the response."""
        return self._found.reader.shown(text[self._start :]) if response.is_empty else ""


class _Once:
    """The answer to a stream's end, which its first caller computes: every other caller, a
    thread blocked in :meth:`wait` or a task awaiting :meth:`answer` (its loop goes on), gets
    the same response or the same exception. The lock is held only to read and set state."""

    __slots__ = ("_claimed", "_done", "_error", "_lock", "_response", "_runner", "_waiters")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._claimed = False
        self._runner: tuple[int, bool] = (0, False)
        """The first caller's thread, and whether it is :meth:`TextStream.finish`."""
        self._response: DriverResponse | None = None
        self._error: tuple[BaseException, TracebackType | None] | None = None
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        """The tasks waiting, each with its loop, woken from the thread that settles."""

    def claim(self, sync: bool) -> bool:
        """Whether the caller is the first: then it computes the answer and settles it."""
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
            self._runner = (threading.get_ident(), sync)
            return True

    def settle(self, response: DriverResponse | None, error: BaseException | None) -> None:
        """The first caller's ``response``, or the ``error`` it raised: wake every waiter."""
        with self._lock:
            self._response = response
            self._error = None if error is None else (error, error.__traceback__)
            waiters, self._waiters = self._waiters, []
            self._done.set()
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # its loop has closed: no one waits there
                loop.call_soon_threadsafe(_wake, future)

    def wait(self) -> DriverResponse:
        """The answer, this thread blocked until the first caller has it."""
        if not self._done.is_set():
            if self._runner[0] == threading.get_ident():
                raise RuntimeError(_SAME_THREAD)
            self._done.wait()
        return self._answer()

    async def answer(self) -> DriverResponse:
        """The answer, awaited until the first caller has it."""
        import asyncio  # noqa: PLC0415 - asyncio costs 20 ms to import: only for async users

        future: asyncio.Future[None] | None = None
        with self._lock:
            if not self._done.is_set():
                if self._runner == (threading.get_ident(), True):
                    raise RuntimeError(_SAME_THREAD)
                loop = asyncio.get_running_loop()
                future = loop.create_future()
                self._waiters.append((loop, future))
        if future is not None:
            await future
        return self._answer()

    def _answer(self) -> DriverResponse:
        if self._error is not None:
            error, traceback = self._error
            raise error.with_traceback(traceback)
        assert self._response is not None
        return self._response


_SAME_THREAD = (
    "this stream is being finished on this thread (by afinish() on this thread's event loop, "
    "or by a finish() that has not returned), so waiting for it here would never end: await "
    "afinish() on that loop, or call finish() from another thread"
)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():  # a waiter cancelled meanwhile has its answer already
        future.set_result(None)


class _Driver(Protocol):
    """What a text stream needs of its orchestrator."""

    @property
    def text_formats(self) -> TextFormats: ...

    def detect(self, llm_response: Any) -> Detection: ...

    def process_llm_response(
        self, llm_response: Any, streaming: bool = False
    ) -> DriverResponse: ...

    async def aprocess_llm_response(
        self, llm_response: Any, streaming: bool = False
    ) -> DriverResponse: ...
