"""The orchestrator: mounted drivers behind one ``MCSDriver`` that is also an ``MCSToolDriver``.

ToolDrivers (and other orchestrators, and hybrid drivers) contribute tools; standalone
MCSDrivers are chained after them in the spec's pass-through manner. Tool names are never
resolved first-wins: a name two drivers share becomes ``<label>__<name>`` for both (or every
name is namespaced, with ``namespace="always"``), cut to the ``[A-Za-z0-9_-]{1,64}`` that
provider APIs accept. A model that names a tool as its driver does (``weather.get``, offered
as ``<label>__weather_get``) calls it when no other tool has that name. Routing a call is one
dictionary lookup.

Each call is validated against its tool's JSON Schema before it runs.
:meth:`Orchestrator.detect` finds calls without running them and
:meth:`Orchestrator.execute` runs them, so a client (or the ``consent`` callback) can
approve, edit or deny each one in between; :meth:`Orchestrator.process_llm_response` does
both. :meth:`Orchestrator.aprocess_llm_response` and :meth:`Orchestrator.aexecute` are the
same steps on an event loop. Running the calls is :mod:`.execution`'s: this module mounts,
routes, and describes the tools to the model.

Consent and audit belong to the orchestrator that mounts the tool.
:meth:`Orchestrator.execute_tool` and :meth:`Orchestrator.aexecute_tool`, what an orchestrator
stacked in another is called with, take the same steps for one call (admit, consent, run,
audit) and raise where :meth:`Orchestrator.execute` answers: a denial as a
:class:`~mcs_host.interfaces.ToolError` the stacking orchestrator answers as its own denial,
the tool's exception as it was raised. So a call reaches a tool only through the consent and
the audit of every orchestrator on its way, however deep the stack and whichever entry point.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from mcs_host._version import __version__
from mcs_host.interfaces import (
    MCSDriver,
    MCSToolDriver,
    SupportsDriverContext,
    ToolCallSignaling,
    UnknownToolError,
    implemented_capabilities,
    is_standalone_driver,
    is_tool_driver,
)

if TYPE_CHECKING:
    from mcs_host.contract import Binding, DriverContext, DriverMeta, DriverResponse, Tool

    from .calls import Detection, TextFormat
    from .detection import detect
    from .execution import AsyncExecution, Audit, Consent, Execution
    from .messages import Provider, native_tools
    from .prompting import Prompts, render_tools
    from .response_schema import ResponseSchema, response_schema
    from .routing import Routing
    from .streaming import TextStream, is_complete_tool_call, might_be_tool_call
    from .text import TextFormats
    from .validation import ArgumentValidator, compile_schema

__all__ = ["Orchestrator"]

_LABEL_REFUSED = re.compile(r"[^A-Za-z0-9_-]")


def _import_runtime() -> None:
    """Bind here what an orchestrator runs with: the contract's data types (pydantic) and
    the modules that detect, check, run and answer calls (with the text formats and their
    patterns). Called by the first orchestrator made, so that importing this module
    (``mcs_host.Orchestrator``) imports none of them. ``Tool`` comes last: an orchestrator
    made after a failed call tries again."""
    global Binding, DriverContext, DriverMeta, Tool  # noqa: PLW0603
    global detect, AsyncExecution, Execution, native_tools, Prompts, render_tools  # noqa: PLW0603
    global response_schema, Routing, TextStream, TextFormats, compile_schema  # noqa: PLW0603
    global is_complete_tool_call, might_be_tool_call  # noqa: PLW0603
    from .detection import detect  # noqa: PLC0415
    from .execution import AsyncExecution, Execution, import_contract  # noqa: PLC0415
    from .messages import native_tools  # noqa: PLC0415
    from .prompting import Prompts, render_tools  # noqa: PLC0415
    from .response_schema import response_schema  # noqa: PLC0415
    from .routing import Routing  # noqa: PLC0415
    from .streaming import TextStream, is_complete_tool_call, might_be_tool_call  # noqa: PLC0415
    from .text import TextFormats  # noqa: PLC0415
    from .validation import compile_schema  # noqa: PLC0415

    import_contract()
    from mcs_host.contract import Binding, DriverContext, DriverMeta, Tool  # noqa: PLC0415


class _Mount(NamedTuple):  # a named tuple, not a dataclass: importing this module stays cheap
    driver: Any
    tools: tuple[tuple[Tool, ArgumentValidator], ...] | None
    """Each tool with its compiled schema; ``None`` for a standalone MCSDriver, which is
    chained rather than routed to."""


def _mount(label: str, driver: object, tools: Sequence[Any] | None = None) -> _Mount:
    """``driver`` with its validated tools and their compiled schemas (once per mount)."""
    if is_tool_driver(driver):
        listed = driver.list_tools() if tools is None else tools
        coerced = tuple(Tool.coerce(t) for t in listed)
        twice = [name for name, n in Counter(t.name for t in coerced).items() if n > 1]
        if twice:
            raise ValueError(f"driver {label!r} lists the tool {twice[0]!r} twice")
        compiled = []
        for tool in coerced:
            try:
                compiled.append((tool, compile_schema(tool.input_schema())))
            except ValueError as exc:
                raise ValueError(f"driver {label!r}, tool {tool.name!r}: {exc}") from None
        return _Mount(driver, tuple(compiled))
    if is_standalone_driver(driver):
        return _Mount(driver, None)
    raise TypeError(
        f"driver {label!r} ({type(driver).__qualname__}) is neither a ToolDriver "
        "(list_tools, execute_tool) nor an MCSDriver (process_llm_response)"
    )


class Orchestrator(MCSDriver, MCSToolDriver, SupportsDriverContext, ToolCallSignaling):
    """Mounted drivers as one driver. ``drivers`` is a mapping label -> driver, or a sequence
    whose labels come from each driver's ``meta.name``.

    ``on_unknown``: a call for a tool nobody offers fails with a retry prompt listing the
    tools (``"fail"``, right for the orchestrator a client talks to), or passes through with
    an empty response (``"pass"``, for one placed in a chain of drivers). ``call_timeout``
    bounds each tool call in seconds. ``consent`` approves each call and ``audit`` is told of
    each call that ran, whichever method it came in by (:meth:`execute_tool` too, what an
    orchestrator stacking this one calls). ``prompts`` is a prompts file overriding the defaults.
    ``text_formats`` adds formats to the built-in ones (a name used twice is a
    ``ValueError``).
    """

    def __init__(
        self,
        drivers: Mapping[str, object] | Sequence[object] = (),
        *,
        name: str = "mcs-host orchestrator",
        namespace: Literal["on-collision", "always"] = "on-collision",
        on_unknown: Literal["pass", "fail"] = "fail",
        consent: Consent | None = None,
        audit: Audit | None = None,
        call_timeout: float | None = None,
        prompts: Prompts | str | None = None,
        text_formats: Iterable[TextFormat] = (),
    ) -> None:
        if "Tool" not in globals():
            _import_runtime()
        self.name = name
        self.namespace = namespace
        self.on_unknown = on_unknown
        self.consent = consent
        self.audit = audit
        self.call_timeout = call_timeout
        self.prompts = prompts if isinstance(prompts, Prompts) else Prompts.load(prompts)
        self.text_formats = TextFormats(text_formats)
        """The text formats tried, built-in and ``text_formats``, in order."""
        self._lock = threading.Lock()
        self._mounted: dict[str, _Mount] = {}
        items = drivers.items() if isinstance(drivers, Mapping) else _labelled(drivers)
        for label, driver in items:
            self._mounted[_check_label(label, self._mounted)] = _mount(label, driver)
        self._routing = self._route(self._mounted)
        self._table = self._routing.table()

    # -- mounting ------------------------------------------------------------------------------

    def mount(self, label: str, driver: object, tools: Sequence[Tool] | None = None) -> None:
        """Add ``driver`` under ``label``; tool names are worked out again.

        ``tools`` are the driver's tools when the caller already listed them (the host does,
        with a timeout); otherwise ``list_tools`` is called here.
        """
        with self._lock:
            mounted = dict(self._mounted)
            label = _check_label(label, mounted)
            mounted[label] = new = _mount(label, driver, tools)
            if self._routing.always != (self.namespace == "always"):
                self._routing = self._route(mounted)  # the policy changed: name every tool again
            else:
                self._routing.add(label, new.driver, new.tools)
            self._table = self._routing.table()
            self._mounted = mounted

    def unmount(self, label: str) -> None:
        """Remove the driver mounted under ``label``."""
        with self._lock:
            if label not in self._mounted:
                raise KeyError(f"no driver is mounted as {label!r}")
            mounted = {k: v for k, v in self._mounted.items() if k != label}
            self._routing = self._route(mounted)
            self._table = self._routing.table()
            self._mounted = mounted

    def refresh(self) -> None:
        """Ask every mounted driver for its tools again."""
        with self._lock:
            mounted = {label: _mount(label, m.driver) for label, m in self._mounted.items()}
            self._routing = self._route(mounted)
            self._table = self._routing.table()
            self._mounted = mounted

    @property
    def labels(self) -> tuple[str, ...]:
        return self._table.labels

    def driver(self, label: str) -> object:
        return self._mounted[label].driver

    def route(self, name: str) -> tuple[str, str]:
        """``(label, the driver's own tool name)`` for a tool name this orchestrator offers."""
        route = self._table.routes.get(name)
        if route is None:
            raise UnknownToolError(name, self._table.routes)
        return route.label, route.tool.name

    def _route(self, mounted: Mapping[str, _Mount]) -> Routing:
        """The names and routes of ``mounted``, worked out from the start."""
        routing = Routing(self.namespace == "always")
        for label, mount in mounted.items():
            routing.add(label, mount.driver, mount.tools)
        return routing

    # -- MCSToolDriver ---------------------------------------------------------------------------

    @property
    def meta(self) -> DriverMeta:  # type: ignore[override]
        bindings: dict[Binding, None] = {}
        for mount in self._mounted.values():
            meta = getattr(mount.driver, "meta", None)
            for binding in getattr(meta, "bindings", None) or ():
                bindings.setdefault(Binding.coerce(binding), None)
        return DriverMeta(
            id="mcs-host.orchestrator",
            name=self.name,
            version=__version__,
            bindings=tuple(bindings),
            target_llms=("*",),
            capabilities=tuple(sorted(implemented_capabilities(self))),
        )

    def list_tools(self) -> list[Tool]:
        return list(self._table.tools)

    def execute_tool(
        self,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        consent: Consent | None = None,
        caller: str | None = None,
        with_text: bool = False,
    ) -> Any:
        """Run one call as :meth:`execute` runs it (routed, validated, ``consent`` then this
        orchestrator's consent asked, the audit told) and give its result; raise what stopped
        it: arguments the tool's schema refuses (a
        :class:`~mcs_host.interfaces.ToolArgumentError` listing why), a denial (a
        :class:`~mcs_host.interfaces.ToolError` saying why), or the tool's own exception as
        it was raised. ``caller`` is who asked for it (:attr:`~mcs_host.ToolCall.caller`);
        ``with_text`` gives ``(result, its text as the model reads it)``, the text the call
        made once (JSON for what is not a string)."""
        execution = Execution(self, self._table)
        return execution.execute_tool(tool_name, arguments, consent, caller, with_text)

    # -- MCSDriver -------------------------------------------------------------------------------

    def get_function_description(self, model_name: str | None = None) -> str:
        """The tools as JSON, XML or compact text, as the prompts file says for the model."""
        return render_tools(self._table.tools, self.prompts.rendering_for(model_name))

    def get_driver_system_message(self, model_name: str | None = None) -> str:
        parts = []
        if self._table.tools:
            rendering = self.prompts.rendering_for(model_name)
            tools = self.get_function_description(model_name)
            parts.append(self.prompts.text(self.prompts.system, rendering, tools=tools))
        for _, driver in self._table.chained:
            parts.append(driver.get_driver_system_message(model_name))
        return "\n\n".join(parts)

    def get_driver_context(self, model_name: str | None = None) -> DriverContext:
        """A system message without the tools, and the tools in the model's native format."""
        parts = [self.prompts.system["context"]] if self._table.tools else []
        parts += [d.get_driver_system_message(model_name) for _, d in self._table.chained]
        provider = self.prompts.provider_for(model_name)
        return DriverContext(system_message="\n\n".join(parts), tools=self.native_tools(provider))

    def native_tools(self, provider: Provider) -> list[dict[str, Any]]:
        """The tools in a provider's native tool-list shape (openai, openai-responses,
        anthropic, gemini, ollama)."""
        described = [(t.name, t.description or "", t.input_schema()) for t in self._table.tools]
        return native_tools(described, provider)

    def response_schema(self) -> ResponseSchema:
        """The JSON Schema of the answers the JSON protocol reads from a model whose output
        is constrained to it: a call of one of these tools, several calls, or the final
        answer (:mod:`.response_schema`). Standalone drivers' own formats are not in it."""
        return response_schema(self._table.tools)

    def might_be_tool_call(self, partial: str) -> bool:
        return might_be_tool_call(partial, self.text_formats, self._table.known)

    def stream(self) -> TextStream:
        """A :class:`~mcs_host.orchestration.streaming.TextStream` for one response streamed
        as text: ``feed`` each chunk and show what it returns; ``finish`` returns what
        :meth:`process_llm_response` returns for the whole text."""
        return TextStream(self)

    def is_complete_tool_call(self, text: str) -> bool:
        return is_complete_tool_call(text, self._table.known, self.text_formats)

    def process_llm_response(
        self, llm_response: str | Mapping[str, Any] | Any, streaming: bool = False
    ) -> DriverResponse:
        return Execution(self, self._table).process(llm_response, streaming)

    async def aprocess_llm_response(
        self, llm_response: str | Mapping[str, Any] | Any, streaming: bool = False
    ) -> DriverResponse:
        """:meth:`process_llm_response` for an event loop: the same detection, consent and
        messages; async tools are awaited, sync ones run in a worker thread, so the loop
        goes on while a tool works. A consent callback may be async too."""
        return await AsyncExecution(self, self._table).process(llm_response, streaming)

    # -- the consent seam ----------------------------------------------------------------------

    def detect(self, llm_response: str | Mapping[str, Any] | Any) -> Detection:
        """The calls in ``llm_response`` (text, a native mapping or an SDK object); nothing
        is executed."""
        return detect(llm_response, self._table.known, self.text_formats)

    def execute(self, detection: Detection, consent: Consent | None = None) -> DriverResponse:
        """Run the detected calls in order and answer every one of them.

        ``consent`` sees each runnable call first, then the orchestrator's own consent: a
        call runs only when both approve it.
        """
        return Execution(self, self._table).execute(detection, consent)

    async def aexecute(
        self, detection: Detection, consent: Consent | None = None
    ) -> DriverResponse:
        """:meth:`execute` for an event loop: calls in order, each awaited (a sync tool in
        a worker thread); ``consent`` may be a coroutine function."""
        return await AsyncExecution(self, self._table).execute(detection, consent)

    async def aexecute_tool(
        self,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        consent: Consent | None = None,
        caller: str | None = None,
        with_text: bool = False,
    ) -> Any:
        """:meth:`execute_tool` for an event loop (an async tool awaited, a sync one in a
        worker thread): what an orchestrator stacked in another one is called with;
        ``consent`` may be a coroutine function."""
        execution = AsyncExecution(self, self._table)
        return await execution.execute_tool(tool_name, arguments, consent, caller, with_text)


def _labelled(drivers: Iterable[object]) -> Iterator[tuple[str, object]]:
    used: set[str] = set()
    for driver in drivers:
        meta = getattr(driver, "meta", None)
        base = re.sub(r"[^a-z0-9]+", "-", str(getattr(meta, "name", "driver")).lower()).strip("-")
        label, number = base or "driver", 2
        while label in used:
            label, number = f"{base}-{number}", number + 1
        used.add(label)
        yield label, driver


def _check_label(label: str, mounted: Mapping[str, object]) -> str:
    if not label or "__" in label or _LABEL_REFUSED.search(label):
        raise ValueError(
            f"label {label!r}: use letters, digits, '-' and single '_' (labels prefix tool names)"
        )
    if label in mounted:
        raise ValueError(f"label {label!r} is already mounted")
    return label
