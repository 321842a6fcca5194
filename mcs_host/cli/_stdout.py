"""The command's own stdout: once claimed, the only way to the real descriptor 1.

A command that promises something on stdout (one JSON document with ``--json``, MCP protocol
with ``serve`` on stdio) must keep everything else off it, whatever a driver prints, from any
thread, flushed or buffered, until the process is gone. So the console script calls
:func:`claim` before it imports typer or any driver: descriptor 1 is duplicated onto a private
close-on-exec descriptor (3 or above) and then pointed at stderr for the rest of the process
(for ``serve``, descriptor 0 too: kept privately for the protocol, pointed at the null
device). ``print``, ``sys.stdout``, ``os.write(1, ...)``, an ``atexit`` handler and a child
process's inherited descriptor 1 all reach stderr; only :func:`write_document` and the
:func:`protocol_files` reach the real stdout. Unclaimed (the command line run in-process, by
a test's ``CliRunner`` or ``mcs_host.cli.app.main``), the document goes to ``sys.stdout``.

Only ``os`` and ``sys`` are imported here (not even ``typing``), so claiming runs nothing
from the environment: ``python -m mcs_host`` looks for modules in the working directory
first until the command line is locked down.
"""

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TextIO

__all__ = ["claim", "protocol_files", "write_document"]

_private_fds: "dict[int, int]" = {}
"""Descriptor 1 (and 0, for a protocol) -> its private duplicate, once claimed."""


def claim(*, stdin: bool = False) -> None:
    """Keep the real stdout (and with ``stdin``, the real stdin) on private descriptors and
    point descriptor 1 at stderr (and 0 at the null device). Without a stdout to keep
    (descriptor 1 closed), nothing changes."""
    if 1 in _private_fds:
        return
    try:
        out = _private(1)
    except OSError:
        return
    if stdin:
        try:
            _private_fds[0] = _private(0)
        except OSError:  # no protocol without both: nothing is claimed
            os.close(out)
            return
        _divert(0, lambda: os.open(os.devnull, os.O_RDONLY), os.O_RDONLY)
    _private_fds[1] = out
    _divert(1, lambda: os.dup(2), os.O_WRONLY)


def write_document(text: str) -> None:
    """Write ``text`` and a newline, the command's one document, on the real stdout."""
    out = _private_fds.get(1)
    if out is None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    data = memoryview((text + "\n").encode("utf-8"))
    while data:
        data = data[os.write(out, data) :]


def protocol_files() -> "tuple[TextIO, TextIO] | None":
    """The real stdin and stdout as UTF-8 text files for a protocol (never closing the
    private descriptors: a thread may still block reading), or ``None`` when unclaimed."""
    if 0 not in _private_fds or 1 not in _private_fds:
        return None
    import io  # loaded at start-up already; only serve needs it here

    reader = io.TextIOWrapper(
        os.fdopen(_private_fds[0], "rb", closefd=False), encoding="utf-8", errors="replace"
    )
    writer = io.TextIOWrapper(os.fdopen(_private_fds[1], "wb", closefd=False), encoding="utf-8")
    return reader, writer


def _private(fd: int) -> int:
    """A close-on-exec duplicate of ``fd`` numbered 3 or above (``os.dup`` makes it
    non-inheritable; a standard number it lands on, because that one was closed, is
    skipped)."""
    low: list[int] = []
    try:
        duplicate = os.dup(fd)
        while duplicate <= 2:
            low.append(duplicate)
            duplicate = os.dup(fd)
        return duplicate
    finally:
        for number in low:
            os.close(number)


def _divert(fd: int, source: "Callable[[], int]", fallback_mode: int) -> None:
    """Point ``fd`` at what ``source`` opens, or at the null device if that fails."""
    try:
        target = source()
    except OSError:
        target = os.open(os.devnull, fallback_mode)
    try:
        os.dup2(target, fd)
    finally:
        os.close(target)
