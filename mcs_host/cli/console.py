"""Colour and progress on a terminal, and nothing of either anywhere else.

Colour follows https://no-color.org: ``NO_COLOR`` (any value but empty) turns it off,
``FORCE_COLOR`` turns it on, otherwise a stream gets colour when it is a terminal whose
``TERM`` is not ``dumb``. Progress goes to stderr only when stderr is such a terminal, on one
line rewritten in place and erased when the work is done, so piped output and ``--json``
documents never hold it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import TracebackType
from typing import TextIO

__all__ = ["Progress", "Ticker", "paint", "paint_word", "use_colour"]

_CODES = {"good": "32", "bad": "31", "warn": "33", "dim": "2"}
_WORDS = {
    "pinned": "good",
    "signed": "good",
    "mounted": "good",
    "passes": "good",
    "unverified": "warn",
    "skipped": "dim",
    "rejected": "bad",
    "revoked": "bad",
    "failed": "bad",
}
"""The status words the tables colour, by what they mean for the user."""


def _terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def use_colour(stream: TextIO | None = None) -> bool:
    """Whether to colour what goes to ``stream`` (default: stdout)."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return _terminal(stream if stream is not None else sys.stdout)


def paint(text: str, style: str, on: bool) -> str:
    """``text`` in ``style`` (``good``, ``bad``, ``warn``, ``dim``) when ``on``."""
    return f"\x1b[{_CODES[style]}m{text}\x1b[0m" if on and text else text


def paint_word(cell: str, on: bool) -> str:
    """A table cell whose first word is a status word, coloured by its meaning."""
    style = _WORDS.get(cell.split(" ", 1)[0].strip())
    return paint(cell, style, on) if style else cell


class Progress:
    """Counts steps on stderr while it is a terminal: call it with ``(done, total, what)``
    before each step; leaving the ``with`` block erases the line."""

    __slots__ = ("_on", "_shown", "_stream")

    def __init__(self, enabled: bool = True, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._on = enabled and _terminal(self._stream)
        self._shown = False

    def __call__(self, done: int, total: int, what: str) -> None:
        if self._on:
            self._stream.write(f"\r\x1b[K[{done + 1}/{total}] {what}")
            self._stream.flush()
            self._shown = True

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()


class Ticker:
    """While one long step runs, shows ``what: N.N s`` on stderr when it is a terminal, from
    ``after`` seconds on, updated every ``every`` seconds; erased when the step ends."""

    __slots__ = ("_after", "_done", "_every", "_on", "_stream", "_thread", "_what")

    def __init__(
        self,
        what: str,
        *,
        enabled: bool = True,
        after: float = 1.0,
        every: float = 0.5,
        stream: TextIO | None = None,
    ) -> None:
        self._what = what
        self._stream = stream if stream is not None else sys.stderr
        self._on = enabled and _terminal(self._stream)
        self._after, self._every = after, every
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        started = time.monotonic()
        if self._done.wait(self._after):
            return
        while True:
            self._stream.write(f"\r\x1b[K{self._what}: {time.monotonic() - started:.1f} s")
            self._stream.flush()
            if self._done.wait(self._every):
                self._stream.write("\r\x1b[K")
                self._stream.flush()
                return

    def __enter__(self) -> Ticker:
        if self._on:
            self._thread = threading.Thread(target=self._run, name="mcs-host-ticker", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
