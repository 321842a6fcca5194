"""Secrets handed to the host in its environment, taken out of it before anything else runs.

``MCS_HOST_SERVE_TOKEN`` admits requests to ``serve --http``. Removing it from ``os.environ``
keeps it from the environment a child is started with, but not from the process's initial
environment block: the memory the kernel shows as ``/proc/PID/environ`` to every process of
the user (an MCP server or a driver's child among them) and that a process forked without
``exec`` inherits. So the console script takes it out at once (:func:`withhold`): from
``os.environ`` and the C ``environ`` (``unsetenv``), from the interpreter's copy
(``posix.environ``), and on Linux out of that block, its bytes written over with zeros in
place through ``/proc/self/mem`` (the block's bounds are fields 50 and 51 of
``/proc/self/stat``); nothing is imported for it, so nothing can be planted on the unsafe
first ``sys.path`` entry that is still there. Then ``serve`` collects it (:func:`withheld`).
A child the host starts collects its configuration (``MCS_HOST_ISOLATED_CONFIG``, which may
hold an MCP server's ``env``) the same way, before any driver code runs.

Cost: nothing when the variable is not set; when it is, two reads of ``/proc`` and one
write, under a millisecond, where starting the interpreter again without the variable (the
token handed over a pipe) costs 13 ms or more.
What still holds the token is this process's own memory: a driver mounted in it can read it
(an isolated driver cannot), and so can a process allowed to trace this one.

Only the standard library is imported.
"""

import os
import sys

__all__ = ["TOKEN_VARIABLE", "withheld", "withhold"]

TOKEN_VARIABLE = "MCS_HOST_SERVE_TOKEN"  # noqa: S105 - the variable's name, not a token
"""The environment variable that may give ``serve --http`` its bearer token."""

_kept: dict[str, str] = {}
"""The values taken, until they are collected."""


def withhold(name: str) -> None:
    """Take ``name`` out of this process's environment, everywhere it can be read from, and
    keep its value for :func:`withheld`; a warning on stderr when ``/proc`` would still show
    it."""
    value = os.environ.pop(name, None)  # unsetenv too: the C environ no longer has it
    if value is None:
        return
    _kept[name] = value
    if os.name == "posix":
        import posix

        posix.environ.pop(os.fsencode(name), None)
    if sys.platform.startswith("linux"):
        problem = _blank(os.fsencode(name))
        if problem is not None:
            sys.stderr.write(
                f"warning: {name}: other processes of yours can still read it in "
                f"/proc/{os.getpid()}/environ ({problem}); give it in a file instead\n"
            )


def withheld(name: str) -> str | None:
    """The value of ``name`` the console script withheld, or taken out of the environment
    now (a command run in process); collected once."""
    withhold(name)
    return _kept.pop(name, None)


def _blank(name: bytes) -> str | None:
    """Write zeros over every ``NAME=value`` of this process's initial environment block,
    through ``/proc/self/mem`` (Linux: ``/proc/PID/environ`` reads that block); why it could
    not, or None."""
    try:
        with open("/proc/self/stat", "rb") as file:
            fields = file.read().rpartition(b")")[2].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end
        with open("/proc/self/mem", "r+b", buffering=0) as memory:
            memory.seek(start)
            block = memory.read(end - start)
            prefix = b"\0" + name + b"="
            at = (b"\0" + block).find(prefix)  # where an entry begins in the block
            while at >= 0:
                stop = block.find(b"\0", at)
                stop = len(block) if stop < 0 else stop
                memory.seek(start + at)
                memory.write(bytes(stop - at))
                at = (b"\0" + block).find(prefix, stop)
    except (OSError, ValueError, IndexError) as exc:
        return str(exc)
    return None
