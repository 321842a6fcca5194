"""Host plugins: registered in-process, or verified and imported like drivers from the
``mcs.host_plugins`` entry point group; and the calls into their hooks during a load.

A plugin gets the same digest, policy, dependency checks and import gate as a driver. One
that is refused or fails gets a record and is left out; strict mode makes that an error.
A hook that raises never undoes a load; a consent hook that raises denies the call. While
the consent hooks judge a call that needs explicit approval, :func:`approval_needed` says so
(``--approve``'s plugin asks on the terminal for those calls only). When no plugin approves
such a call and it is served to an MCP client, the client's user is asked
(``elicitation/create``, once per call), or, when the client cannot ask, the denial says so.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

import pluggy

from mcs_host.discovery import PLUGIN_GROUP, Candidate, Discovery, discover
from mcs_host.orchestration.calls import TextFormat, ToolCall
from mcs_host.orchestration.text import TextFormats
from mcs_host.trust.importer import IntegrityError, import_driver
from mcs_host.trust.verification import verify_candidate

from . import stages
from .hooks import PluginError, register_plugin
from .records import LoadRecord, LoadReport, Refused

__all__: list[str] = []  # a stage of mcs_host.loading.host; nothing public


def load_plugins(
    ctx: stages.Context,
    in_process: Sequence[tuple[object, str]],
    search_path: Sequence[str] | None,
) -> tuple[LoadRecord, ...]:
    """Register the in-process plugins, then (when the configuration enables plugins) the
    installed ones; a record for each."""
    records = [_in_process(ctx.manager, plugin, name) for plugin, name in in_process]
    if not ctx.config.plugins:
        return tuple(records)
    found = discover(search_path, group=PLUGIN_GROUP, require_object=False)
    for candidate in found.candidates:
        try:
            records.append(_installed(ctx, candidate, found))
        except Exception as exc:  # anything unforeseen fails this plugin, never the load
            records.append(
                LoadRecord(
                    candidate.label,
                    "failed",
                    "host-error",
                    f"loading it raised {stages.summary(exc)}",
                    candidate.label,
                    candidate.distribution,
                    candidate.version,
                    kind="plugin",
                    traceback=stages.trace(exc),
                )
            )
    return tuple(records)


def plugin_errors(ctx: stages.Context, plugins: Sequence[LoadRecord]) -> list[str]:
    """In strict mode a host plugin that is refused or fails is an error, as a driver is."""
    if not ctx.config.strict:
        return []
    return [
        f"host plugin {r.label}: {r.reason}: {r.message}"
        for r in plugins
        if r.status in ("rejected", "failed")
    ]


def text_formats(
    manager: pluggy.PluginManager,
) -> tuple[tuple[TextFormat, ...], tuple[tuple[str, str], ...]]:
    """The text formats the plugins' ``mcs_host_codecs`` hooks add, and ``(plugin, problem)``
    for each plugin whose hook raised, returned something else or reused a format's name
    (that plugin adds nothing)."""
    added: list[TextFormat] = []
    problems: list[tuple[str, str]] = []
    for impl in manager.hook.mcs_host_codecs.get_hookimpls():
        name = impl.plugin_name
        try:
            result = impl.function()
        except Exception as exc:  # one plugin's hook never takes the load down
            problems.append((name, f"mcs_host_codecs raised {stages.summary(exc)}"))
            continue
        items: list[object] = list(result) if isinstance(result, list | tuple) else [result]
        given = [g for g in items if isinstance(g, TextFormat)]
        if len(given) != len(items):
            wrong = next(g for g in items if not isinstance(g, TextFormat))
            problems.append((name, f"mcs_host_codecs returned {wrong!r}, not a TextFormat"))
            continue
        try:
            TextFormats([*added, *given])
        except ValueError as exc:  # a name another format has
            problems.append((name, f"mcs_host_codecs: {exc}"))
            continue
        added.extend(given)
    return tuple(added), tuple(problems)


@dataclass(frozen=True, slots=True)
class Approval:
    """A call that needs a consent plugin's explicit approval."""

    label: str
    """The mount the call goes to."""
    needs: str
    """That it needs approval: ``each call to the MCP server 'gated' needs approval``."""
    how: str
    """Who may approve it and what would waive that (a configuration's table and key, or a
    registry entry's field)."""

    @property
    def reason(self) -> str:
        """What the call is denied with when no plugin approves it and no one is asked."""
        return f"{self.needs}: {self.how}"


_NEEDED: ContextVar[Approval | None] = ContextVar("mcs_host_approval_needed", default=None)


def approval_needed() -> Approval | None:
    """While the consent hooks judge a call: the :class:`Approval` it needs when only a
    plugin's explicit approval lets it run, else ``None`` (and outside the hooks)."""
    return _NEEDED.get()


def ask_consent(
    manager: pluggy.PluginManager,
    call: ToolCall,
    needs: Callable[[ToolCall], Approval | None] | None = None,
) -> bool | str | ToolCall | Awaitable[bool | str]:
    """Ask the plugins: any ``False`` or reason denies; an edited call replaces it. When
    ``needs`` says ``call`` needs approval, only a ``True`` or an edited call lets it run;
    silence asks the user of the MCP client the call is served to (:func:`ask_user`), and
    denies it with its reason outside ``serve``."""
    required = needs(call) if needs is not None else None
    token = _NEEDED.set(required)
    try:
        answers = manager.hook.mcs_host_consent(call=call)
    except Exception as exc:  # a consent check that breaks denies: fail closed
        warnings.warn(
            f"consent hook raised {exc!r}; the call is denied", RuntimeWarning, stacklevel=2
        )
        return False
    finally:
        _NEEDED.reset(token)
    for answer in answers:
        if answer is False or isinstance(answer, str):
            return answer
    edited: list[ToolCall] = [answer for answer in answers if isinstance(answer, ToolCall)]
    if edited:
        return edited[-1]
    if required is not None and True not in answers:
        return ask_user(call, required)
    return True


def ask_user(call: ToolCall, required: Approval) -> bool | str | Awaitable[bool | str]:
    """The verdict on ``call`` of the user of the MCP client it is served to: an awaitable
    of it on the serving event loop (the orchestrator's async path awaits it), the verdict
    itself in any other thread; the denial when there is no one to ask."""
    import asyncio  # noqa: PLC0415 - gated calls only: a load without MCP never imports it

    from mcs_host.bridge.elicitation import client_user  # noqa: PLC0415 - gated calls only

    user = client_user()
    if user is None:
        return required.reason
    if user.ask is None and user.loop is None:  # an agent framework that asks no one
        return f"{required.needs}: {required.how}, or {user.unasked}"
    if user.ask is None:
        return (
            f"{required.needs}, and this MCP client cannot ask its user for it (it does not "
            f"support MCP elicitation): {required.how}"
        )
    if user.loop is None:  # an agent framework's approval, in the call's own thread
        try:
            answer = user.ask(_question(call, required))
        except Exception as exc:  # asking failed: no approval
            return f"{required.needs}, and asking for it in {user.where} failed ({exc})"
        return _verdict(answer, required, user.where)  # type: ignore[arg-type]
    asked = _asked(user.ask, call, required, user.where)  # type: ignore[arg-type]
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is user.loop:
        return asked
    return asyncio.run_coroutine_threadsafe(asked, user.loop).result()


async def _asked(
    ask: Callable[[str], Awaitable[str | None]], call: ToolCall, required: Approval, where: str
) -> bool | str:
    """``True`` when the user accepts running ``call``, else why it is denied."""
    try:
        answer = await ask(_question(call, required))
    except Exception as exc:  # the client failed to ask: no approval
        return f"{required.needs}, and asking the user of {where} failed ({exc}): {required.how}"
    return _verdict(answer, required, where)


def _question(call: ToolCall, required: Approval) -> str:
    """What the user is asked about ``call``."""
    # as JSON, ASCII only: a name or argument cannot pass for other text in the client
    arguments = json.dumps(dict(call.arguments), ensure_ascii=True, default=str)
    return (
        f"Run the tool {json.dumps(call.name)} of {required.label} with the arguments "
        f"{arguments}? ({required.needs})"
    )


def _verdict(answer: str | None, required: Approval, where: str) -> bool | str:
    """The verdict of the user's ``answer`` in ``where`` to the question of a call that
    needs approval."""
    if answer is None:  # the client's retry of the call brings the answer
        return f"the user of {where} is asked first"
    if answer == "accept":
        return True
    if answer == "decline":
        return f"the user declined it in {where}"
    return f"the user cancelled the request for approval in {where}"


def audit_call(
    manager: pluggy.PluginManager, call: ToolCall, result: Any, error: BaseException | None
) -> None:
    """Tell the plugins about a call that ran. A hook that raises is warned of; its
    exception's traceback is let go first: pluggy's frame in it holds that exception and the
    hook's arguments, the call's ``error`` among them, a cycle that would keep the failed
    call's objects until the garbage collector ran."""
    try:
        manager.hook.mcs_host_after_tool_call(call=call, result=result, error=error)
    except Exception as exc:
        problem = repr(exc)
        exc.__traceback__ = None
    else:
        return
    warnings.warn(f"audit hook raised {problem}", RuntimeWarning, stacklevel=2)


def report_loaded(manager: pluggy.PluginManager, report: LoadReport) -> None:
    """Give the plugins the load report."""
    try:
        manager.hook.mcs_host_loaded(report=report)
    except Exception as exc:  # a plugin's report hook never undoes the load
        warnings.warn(f"mcs_host_loaded hook raised {exc!r}", RuntimeWarning, stacklevel=3)


def _in_process(manager: pluggy.PluginManager, plugin: object, name: str) -> LoadRecord:
    try:
        register_plugin(manager, plugin, name)
    except PluginError as exc:
        return LoadRecord(name, "failed", "invalid-plugin", str(exc), kind="plugin")
    return LoadRecord(
        name, "mounted", "mounted", "added in-process", verification="in-process", kind="plugin"
    )


def _installed(ctx: stages.Context, candidate: Candidate, found: Discovery) -> LoadRecord:
    """Verify, check the dependencies of, import and register one installed plugin."""
    base = LoadRecord(
        candidate.label,
        "failed",
        "",
        "",
        candidate.label,
        candidate.distribution,
        candidate.version,
        kind="plugin",
    )
    verification = verify_candidate(candidate, found, ctx.index, ctx.policy, ctx.scans)
    base = replace(base, verification=verification.status, trust=verification.trust)
    if not verification.allowed:
        return replace(
            base, status="rejected", reason=verification.reason, message=verification.message
        )
    notes = list(verification.warnings)
    mark = ctx.gate.mark()
    try:
        notes += stages.admit_dependencies(ctx, candidate, verification)
        plugin = import_driver(verification)
        if isinstance(plugin, type):
            plugin = plugin()
        found_notes, refused = stages.gate_findings(ctx, mark, candidate.distribution)
        notes += found_notes
        if refused is not None and ctx.config.strict:  # else a note: nothing unverified ran
            raise Refused("rejected", "import-refused", refused)
        register_plugin(ctx.manager, plugin, candidate.label)
    except Refused as refusal:
        return replace(
            base,
            status=refusal.status,
            reason=refusal.reason,
            message=refusal.message,
            warnings=tuple(dict.fromkeys(notes)),
        )
    except PluginError as exc:
        return replace(base, reason="invalid-plugin", message=str(exc))
    except IntegrityError as exc:
        return replace(base, status="rejected", reason="integrity", message=str(exc))
    except (Exception, SystemExit) as exc:
        notes += stages.gate_findings(ctx, mark, candidate.distribution)[0]
        return replace(
            base,
            reason="import-error",
            message=stages.summary(exc),
            traceback=stages.trace(exc),
            warnings=tuple(dict.fromkeys(notes)),
        )
    return replace(
        base,
        status="mounted",
        reason="mounted",
        message=verification.message,
        warnings=tuple(dict.fromkeys(notes)),
    )
