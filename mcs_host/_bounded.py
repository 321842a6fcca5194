"""Calls bounded in time, shared by the load pipeline and the orchestrator.

A call runs in a worker thread; if it has not returned after ``timeout`` seconds it is left
behind (Python cannot stop a thread) and :class:`Hung` is raised. What the call raises is
raised again in the caller's thread, except a ``KeyboardInterrupt``: a signal is never
delivered to a worker thread, so one raised there is the call's own doing and comes back as
:class:`Interrupted`, an ordinary exception. Nothing here keeps what the call raised once it
is raised again (no cycle through this module's frames holds it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Hung", "Interrupted", "call_bounded"]


class Hung(Exception):  # noqa: N818 - reads as what happened: the call hung
    """The call did not return within its time."""


class Interrupted(Exception):  # noqa: N818 - reads as what happened
    """The call raised ``KeyboardInterrupt`` in its worker thread (no real interrupt)."""


def call_bounded(func: Callable[..., Any], timeout: float | None, name: str, *args: Any) -> Any:
    """``func(*args)``, or :class:`Hung` after ``timeout`` seconds (``None``: no limit, no
    thread)."""
    if timeout is None:
        return func(*args)
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["value"] = func(*args)
        except BaseException as exc:  # handed to the caller below
            outcome["error"] = exc

    worker = threading.Thread(target=work, name=name, daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise Hung(f"{name} did not return within {timeout:g} s")
    if "error" not in outcome:
        return outcome.pop("value", None)
    error = outcome.pop("error")  # the worker's frame, in its traceback, still sees outcome
    try:
        if isinstance(error, KeyboardInterrupt):
            raise Interrupted(f"{name} raised KeyboardInterrupt") from error
        raise error
    finally:
        del error  # this frame joins the error's traceback: holding it would make a cycle
