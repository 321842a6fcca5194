"""Healing: read almost-JSON the way a model writes it, and say what was mended.

Strict JSON is always tried first and kept byte-exact. Otherwise a tolerant reader accepts
trailing commas, ``//``, ``/* */`` and ``#`` comments, Python literals (``True``, ``False``,
``None``), single-quoted strings, unquoted keys, raw newlines inside strings, and one missing
closing brace at the very end. It refuses what it cannot read for sure: a string that never
ends or a value cut off before its end means the output was truncated, and such a call must
not run.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MISSING_BRACE", "Unhealable", "heal"]

MISSING_BRACE = "added a missing closing brace"
"""The note of the one repair that may also mean the text is not finished yet."""

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_LITERALS = {"true": True, "false": False, "null": None}
_PYTHON_LITERALS = {"True": True, "False": False, "None": None}
_ESCAPES = {
    '"': '"',
    "'": "'",
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}


class Unhealable(ValueError):  # noqa: N818 - reads as a verdict: "unhealable: why"
    """The text cannot be read as JSON for sure; ``truncated`` when it was cut off, else
    ``at`` is the index in the text where reading broke off (``None`` when unknown)."""

    def __init__(self, reason: str, *, truncated: bool = False, at: int | None = None) -> None:
        self.reason = reason
        self.truncated = truncated
        self.at = at
        super().__init__(reason)


def heal(text: str) -> tuple[Any, tuple[str, ...]]:
    """The JSON value in ``text`` and the repairs it needed (none for valid JSON).

    Raises :class:`Unhealable` when the text cannot be read, or was cut off.
    """
    try:
        return json.loads(text), ()
    except ValueError:
        pass
    except RecursionError:
        raise Unhealable("nested too deeply to read") from None
    reader = _Reader(text)
    try:
        value = reader.value()
    except RecursionError:
        raise Unhealable("nested too deeply to read") from None
    reader.skip_space()
    if reader.position < len(text):
        raise reader.refuse(f"unexpected text after the value at character {reader.position}")
    return value, tuple(dict.fromkeys(reader.notes))


@dataclass(slots=True)
class _Reader:
    text: str
    position: int = 0
    depth: int = 0
    notes: list[str] = field(default_factory=list)
    closed_at_end: int = 0

    def note(self, what: str) -> None:
        self.notes.append(what)

    def refuse(self, reason: str) -> Unhealable:
        """The text cannot be read from here on (not cut off): broken off at this position."""
        return Unhealable(reason, at=self.position)

    def at_end(self) -> bool:
        return self.position >= len(self.text)

    def skip_space(self) -> None:
        text = self.text
        while self.position < len(text):
            char = text[self.position]
            if char in " \t\r\n":
                self.position += 1
            elif text.startswith("//", self.position) or char == "#":
                end = text.find("\n", self.position)
                self.position = len(text) if end == -1 else end + 1
                self.note("removed a comment")
            elif text.startswith("/*", self.position):
                end = text.find("*/", self.position + 2)
                if end == -1:
                    raise Unhealable("a comment never ends", truncated=True)
                self.position = end + 2
                self.note("removed a comment")
            else:
                return

    def value(self) -> Any:
        self.skip_space()
        if self.at_end():
            raise Unhealable("the text ends where a value should start", truncated=True)
        char = self.text[self.position]
        if char == "{":
            return self.container("{", "}")
        if char == "[":
            return self.container("[", "]")
        if char in "\"'":
            return self.string(char)
        number = _NUMBER.match(self.text, self.position)
        if number:
            self.position = number.end()
            try:
                return json.loads(number.group())
            except ValueError:  # an integer past Python's digit limit
                raise self.refuse("a number too long to read") from None
        word = _IDENTIFIER.match(self.text, self.position)
        if word:
            name = word.group()
            if name in _LITERALS:
                self.position = word.end()
                return _LITERALS[name]
            if name in _PYTHON_LITERALS:
                self.position = word.end()
                self.note("read a Python literal")
                return _PYTHON_LITERALS[name]
        raise self.refuse(f"no value can start with {char!r} at character {self.position}")

    def container(self, opening: str, closing: str) -> Any:
        self.position += 1
        self.depth += 1
        items: list[Any] = []
        entries: dict[str, Any] = {}
        while True:
            self.skip_space()
            if self.at_end():
                return self.unclosed(opening, closing, entries if opening == "{" else items)
            if self.text[self.position] == closing:
                self.position += 1
                self.depth -= 1
                return entries if opening == "{" else items
            if opening == "{":
                key = self.key()
                self.skip_space()
                if self.at_end():
                    raise Unhealable("the text ends after a key", truncated=True)
                if self.text[self.position] != ":":
                    raise self.refuse(
                        f"expected ':' after key {key!r} at character {self.position}"
                    )
                self.position += 1
                entries[key] = self.value()
            else:
                items.append(self.value())
            self.skip_space()
            if self.at_end():
                return self.unclosed(opening, closing, entries if opening == "{" else items)
            char = self.text[self.position]
            if char == ",":
                self.position += 1
                self.skip_space()
                if not self.at_end() and self.text[self.position] == closing:
                    self.note("removed a trailing comma")
            elif char != closing:
                raise self.refuse(f"expected ',' or {closing!r} at character {self.position}")

    def unclosed(self, opening: str, closing: str, value: Any) -> Any:
        """End of text inside a container: mend one outermost ``}``, refuse anything else."""
        if opening == "{" and self.depth == 1 and self.closed_at_end == 0:
            self.closed_at_end += 1
            self.depth -= 1
            self.note(MISSING_BRACE)
            return value
        raise Unhealable(
            f"the text ends inside {opening}...{closing}: it was cut off", truncated=True
        )

    def key(self) -> str:
        char = self.text[self.position]
        if char in "\"'":
            return self.string(char)
        word = _IDENTIFIER.match(self.text, self.position)
        if not word:
            raise self.refuse(f"expected a key at character {self.position}")
        self.position = word.end()
        self.note("quoted an unquoted key")
        return word.group()

    def string(self, quote: str) -> str:
        if quote == "'":
            self.note("read a single-quoted string")
        text = self.text
        start = self.position
        self.position += 1
        parts: list[str] = []
        while True:
            end = len(text)
            for stop in (quote, "\\", "\n"):
                found = text.find(stop, self.position)
                if found != -1 and found < end:
                    end = found
            if end == len(text):
                raise Unhealable(
                    f"the string starting at character {start} never ends: the text was cut off",
                    truncated=True,
                )
            parts.append(text[self.position : end])
            char = text[end]
            if char == quote:
                self.position = end + 1
                return "".join(parts)
            if char == "\n":
                self.note("kept a raw newline inside a string")
                parts.append("\n")
                self.position = end + 1
                continue
            if end + 1 >= len(text):
                raise Unhealable("the text ends inside an escape", truncated=True)
            escaped = text[end + 1]
            if escaped == "u":
                digits = text[end + 2 : end + 6]
                if len(digits) < 4:
                    raise Unhealable("the text ends inside an escape", truncated=True)
                try:
                    parts.append(chr(int(digits, 16)))
                except ValueError:
                    raise Unhealable(f"bad escape \\u{digits} at character {end}", at=end) from None
                self.position = end + 6
            else:
                parts.append(_ESCAPES.get(escaped, "\\" + escaped))
                self.position = end + 2
