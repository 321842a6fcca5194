"""What a tool leaves behind, taken back once its call has run: the standard streams it closed
or replaced are put back, and what the frames of the error it raised hold is let go, so that a
failed call's objects and open files go when its response is built, not when the cyclic
garbage collector happens to run."""

from __future__ import annotations

import inspect
import os
import sys
from contextlib import suppress
from typing import Any

__all__: list[str] = []  # the orchestrator's; nothing public

_RESUMABLE = (
    inspect.CO_GENERATOR
    | inspect.CO_COROUTINE
    | inspect.CO_ITERABLE_COROUTINE
    | inspect.CO_ASYNC_GENERATOR
)


def release(error: BaseException) -> None:
    """Let go of what the frames in ``error``'s traceback hold (a failed tool's objects, the
    files it left open), and in those of the errors chained to it: a frame that ended keeps
    its locals for as long as the traceback lives, and a local that refers to the error (the
    tool's, or one of ours) makes a cycle that only the garbage collector would end. The
    traceback stays, and still says where the error came from. A frame still running is left
    alone, and so is a generator's or coroutine's (clearing a suspended one would close it)."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        exc = pending.pop()
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        tb = exc.__traceback__
        while tb is not None:
            if not tb.tb_frame.f_code.co_flags & _RESUMABLE:
                with suppress(RuntimeError):  # it is still running
                    tb.tb_frame.clear()
            tb = tb.tb_next
        pending += [e for e in (exc.__cause__, exc.__context__) if e is not None]
        if isinstance(exc, BaseExceptionGroup):
            pending += exc.exceptions


def restore_streams(saved: tuple[Any, Any]) -> str | None:
    """Put back ``sys.stdout`` and ``sys.stderr`` as they were before a tool ran (``saved``),
    reopened on their descriptors if the tool closed them; which ones had to be, or ``None``."""
    out, err = saved
    if (
        sys.stdout is out
        and sys.stderr is err
        and not getattr(out, "closed", False)
        and not getattr(err, "closed", False)
    ):
        return None
    broken = []
    for name, fd, original in (("sys.stdout", 1, out), ("sys.stderr", 2, err)):
        current = getattr(sys, name[4:])
        closed = _closed(original)
        if current is original and not closed:
            continue
        broken.append(name)
        setattr(sys, name[4:], _reopened(original, fd) if closed else original)
    return " and ".join(broken) or None


def _closed(stream: Any) -> bool:
    return stream is not None and bool(getattr(stream, "closed", False))


def _reopened(stream: Any, fd: int) -> Any:
    """A text stream like ``stream`` (closed) on descriptor ``fd``, or on the null device
    when that descriptor is closed too."""
    try:
        os.fstat(fd)
    except OSError:
        fd = os.open(os.devnull, os.O_WRONLY)
    return open(
        fd,
        "w",
        encoding=getattr(stream, "encoding", None) or "utf-8",
        errors=getattr(stream, "errors", None) or "strict",
        closefd=False,
        buffering=1,
    )
