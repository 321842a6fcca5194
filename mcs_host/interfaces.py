"""The MCS driver contract's interfaces: the driver classes, the capability mixins, the errors
a tool raises, and the constants; no data types, so importing it imports no pydantic.

The data types a driver returns (``DriverMeta``, ``Tool``, ``DriverResponse``...) are the
pydantic models of :mod:`mcs_host.contract`; they are named here in annotations only.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeGuard

if TYPE_CHECKING:
    from mcs_host.contract import DriverContext, DriverMeta, DriverResponse, Tool

__all__ = [
    "CAPABILITY_MIXINS",
    "CONTRACT_VERSION",
    "MANIFEST_FILE",
    "SEMVER_PATTERN",
    "ContractError",
    "MCSDriver",
    "MCSToolDriver",
    "StandaloneDriverLike",
    "SupportsAutostart",
    "SupportsDriverContext",
    "SupportsHealthcheck",
    "ToolArgumentError",
    "ToolCallSignaling",
    "ToolDriverLike",
    "ToolError",
    "UnknownToolError",
    "implemented_capabilities",
    "is_semver",
    "is_standalone_driver",
    "is_tool_driver",
    "progress_to",
    "report_progress",
    "supports_autostart",
    "supports_healthcheck",
]

CONTRACT_VERSION = "0.6"
"""The version of the MCS driver contract these types implement."""

MANIFEST_FILE = "mcs-driver.json"
"""The static manifest a driver package ships beside its entry point module."""

# SemVer 2.0.0, https://semver.org/#is-there-a-suggested-regular-expression-regex-to-check-a-semver-string
SEMVER_PATTERN = (
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
"""The regular expression of a SemVer 2.0.0 version, from semver.org."""
_SEMVER = re.compile(SEMVER_PATTERN)


def is_semver(version: str) -> bool:
    """Return whether ``version`` is a SemVer 2.0.0 version string such as ``1.2.0``."""
    return _SEMVER.match(version) is not None


class ContractError(ValueError):
    """An object does not satisfy the MCS contract; the message names the type and field."""


class ToolError(Exception):
    """Raised by ``execute_tool`` for a call it cannot carry out."""


class UnknownToolError(ToolError, LookupError):
    """``execute_tool`` was asked for a tool the driver does not provide."""

    def __init__(self, tool_name: str, known: Iterable[str] = ()) -> None:
        self.tool_name = tool_name
        self.known = tuple(sorted(known))
        hint = f"; known tools: {', '.join(self.known)}" if self.known else ""
        super().__init__(f"unknown tool {tool_name!r}{hint}")


class ToolArgumentError(ToolError, ValueError):
    """``execute_tool`` got arguments that do not fit the tool; names tool and argument."""

    def __init__(self, tool_name: str, argument: str, problem: str) -> None:
        self.tool_name = tool_name
        self.argument = argument
        self.problem = problem
        super().__init__(f"tool {tool_name!r}, argument {argument!r}: {problem}")


class MCSDriver(ABC):
    """A driver the client talks to directly: prompts for an LLM and executes its calls."""

    meta: DriverMeta

    @abstractmethod
    def get_function_description(self, model_name: str | None = None) -> str:
        """Return the LLM-readable description of the callable functions."""

    @abstractmethod
    def get_driver_system_message(self, model_name: str | None = None) -> str:
        """Return the complete system message for the model family ``model_name``."""

    @abstractmethod
    def process_llm_response(
        self, llm_response: str | dict[str, Any], streaming: bool = False
    ) -> DriverResponse:
        """Detect and execute a tool call in the model's output.

        A call for a tool this driver does not know returns an empty ``DriverResponse``.
        """


class MCSToolDriver(ABC):
    """A driver for orchestrators: structured tools and their execution, no LLM knowledge.

    Its ``meta.target_llms`` is ``None``.
    """

    meta: DriverMeta

    @abstractmethod
    def list_tools(self) -> Sequence[Tool]:
        """Return the tools this driver provides."""

    @abstractmethod
    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        """Execute ``tool_name`` with ``arguments`` and return the raw result.

        Raises :class:`UnknownToolError` or :class:`ToolArgumentError` for calls it
        cannot carry out.
        """


class SupportsHealthcheck(ABC):
    """Capability ``healthcheck``: the driver can report whether its backend is usable."""

    CAPABILITY: ClassVar[str] = "healthcheck"

    @abstractmethod
    def healthcheck(self) -> dict[str, Any]:
        """Return a status mapping such as ``{"status": "OK"}``."""


class SupportsAutostart(ABC):
    """Capability ``autostart``: the driver can launch its backend (a container, a server)."""

    CAPABILITY: ClassVar[str] = "autostart"

    @abstractmethod
    def autostart(self, kwargs: dict[str, Any]) -> None:
        """Start the backend with the given settings."""


class SupportsDriverContext(ABC):
    """Capability ``driver_context``: system message and native tools, separately."""

    CAPABILITY: ClassVar[str] = "driver_context"

    @abstractmethod
    def get_driver_context(self, model_name: str | None = None) -> DriverContext:
        """Return the system message and the tools in the model's native format."""


class ToolCallSignaling(ABC):
    """Capability ``tcs``: pure checks a streaming client asks while it buffers output."""

    CAPABILITY: ClassVar[str] = "tcs"

    @abstractmethod
    def might_be_tool_call(self, partial: str) -> bool:
        """Cheap check: could ``partial`` be the start of a tool call?"""

    @abstractmethod
    def is_complete_tool_call(self, text: str) -> bool:
        """Whether ``text`` holds a complete, parseable tool call."""


CAPABILITY_MIXINS: Mapping[str, type] = {
    mixin.CAPABILITY: mixin
    for mixin in (SupportsHealthcheck, SupportsAutostart, SupportsDriverContext, ToolCallSignaling)
}
"""Capability name -> the mixin a driver declaring it must implement."""


_CAPABILITY_METHODS: Mapping[str, tuple[str, ...]] = {
    name: tuple(
        sorted(
            attr
            for attr, value in vars(mixin).items()
            if getattr(value, "__isabstractmethod__", False)
        )
    )
    for name, mixin in CAPABILITY_MIXINS.items()
}


def implemented_capabilities(driver: object) -> frozenset[str]:
    """The capability names whose mixin ``driver`` implements (by subclass or by methods)."""
    return frozenset(
        name
        for name, mixin in CAPABILITY_MIXINS.items()
        if isinstance(driver, mixin)
        or all(callable(getattr(driver, method, None)) for method in _CAPABILITY_METHODS[name])
    )


def supports_autostart(driver: object) -> TypeGuard[SupportsAutostart]:
    """Whether ``driver`` implements :class:`SupportsAutostart`, by subclass or by its
    methods: then ``autostart`` may be called as the mixin declares it."""
    return "autostart" in implemented_capabilities(driver)


def supports_healthcheck(driver: object) -> TypeGuard[SupportsHealthcheck]:
    """Whether ``driver`` implements :class:`SupportsHealthcheck`, by subclass or by its
    methods: then ``healthcheck`` may be called as the mixin declares it."""
    return "healthcheck" in implemented_capabilities(driver)


# -- progress: what a long call says while it works ------------------------------------------

_Sink = Callable[[float, "float | None", "str | None"], None]
_PROGRESS: ContextVar[_Sink | None] = ContextVar("mcs_host_progress", default=None)


def report_progress(
    progress: float, total: float | None = None, message: str | None = None
) -> None:
    """Say how far the tool call under way has got (``progress`` of ``total``, and what it is
    doing). Served over MCP, the client that asked for progress hears it; elsewhere nothing
    happens. Call it from ``execute_tool`` (in its thread) or ``aexecute_tool``."""
    sink = _PROGRESS.get()
    if sink is not None:
        sink(progress, total, message)


@contextmanager
def progress_to(sink: _Sink | None) -> Iterator[None]:
    """Send what :func:`report_progress` says in this context to ``sink`` (which may be
    called from any thread), for the duration."""
    token = _PROGRESS.set(sink)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


class ToolDriverLike(Protocol):
    """What the host calls on a driver that offers tools, whatever its class: an
    :class:`MCSToolDriver`, an orchestrator, a reference-SDK driver behind its adapter."""

    def list_tools(self) -> list[Tool]: ...

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any: ...


class StandaloneDriverLike(Protocol):
    """What the host calls on an MCSDriver without tools, which it chains."""

    def process_llm_response(self, llm_response: Any, streaming: bool = False) -> Any: ...


def is_tool_driver(driver: object) -> TypeGuard[ToolDriverLike]:
    """Whether ``driver`` offers tools: ``list_tools`` and ``execute_tool``."""
    return callable(getattr(driver, "list_tools", None)) and callable(
        getattr(driver, "execute_tool", None)
    )


def is_standalone_driver(driver: object) -> TypeGuard[StandaloneDriverLike]:
    """Whether ``driver`` is an MCSDriver without tools, to be chained."""
    return callable(getattr(driver, "process_llm_response", None)) and not is_tool_driver(driver)
