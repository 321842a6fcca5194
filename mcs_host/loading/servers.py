"""MCP servers mounted as drivers: how far each is vouched for, decided before it starts.

A server is a remote ``url``, a stdio ``command``, or the console script of an installed
``distribution``. :func:`check_server` decides without starting anything: a distribution is
verified as a dependency is (its installed files against the registry's pins in
``libraries``), and what it requires is judged by the policy; a url or command is
``registered`` when a registry entry under the same label says exactly that. Anything else
is ``unverified`` and starts only when the policy allows unverified code. A remote server's
code is never seen, which its record says (``isolation = "remote"``); nor is what a command
runs, which its record counts as unverified code. Each call to a server needs a consent
plugin's approval (or, served, the MCP client's user's) unless its registry entry, or the
configuration, says otherwise.
:func:`server_driver` makes the :class:`MCPToolDriver`; a distribution's console script is
never looked up on ``PATH``: a child ``mcs-host run-server`` checks the distribution again
on every start and runs the script from its verified bytes
(:mod:`mcs_host.loading.server_process`). The bridge (and asyncio) is imported only to
mount one.

One module: how a server is vouched for decides how it starts (the check's release, script
and command are what the start runs, in this process and in the server's), so the check and
the start stay together.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from mcs_host.discovery import normalize_name, parse_entry_points
from mcs_host.interfaces import ToolError
from mcs_host.trust import _origins
from mcs_host.trust.dependencies import (
    DependencyCheck,
    check_dependencies,
    check_distribution,
    judge_dependencies,
)
from mcs_host.trust.registry import MCPServerEntry, TrustIndex, default_registry_paths
from mcs_host.trust.verification import TrustPolicy

from .config_schema import HostConfig, MCPServerSettings
from .isolating import require_mcp_extra
from .planning import ruled_out
from .plugins import Approval
from .records import LoadRecord, Mounted, Progress, Refused, ServerCheck
from .stages import Context, valid_tools

if TYPE_CHECKING:
    from mcs_host.bridge.client import MCPToolDriver
    from mcs_host.orchestration.calls import ToolCall
    from mcs_host.orchestration.orchestrator import Orchestrator

__all__: list[str] = []  # a stage of mcs_host.loading.host; nothing public


def check_server(
    config: HostConfig,
    index: TrustIndex,
    label: str,
    settings: MCPServerSettings,
    search: Sequence[str],
) -> ServerCheck:
    """How far the MCP server ``[mcp_servers.<label>]`` is vouched for, and whether the
    policy lets it start."""
    entry = index.servers.get(label)
    conflict = index.conflicts.get(f"mcp:{label}")
    given = settings.url, settings.argv if settings.command else None, settings.distribution
    if given == (None, None, None):
        if entry is None:
            reason = "registry-conflict" if conflict else "not-in-registry"
            why = "; ".join(conflict) if conflict else "no registry describes one under it"
            return _refused(label, reason, f"[mcp_servers.{label}] names no server, and {why}")
        url, distribution = entry.url, entry.distribution
        command = entry.argv if entry.command else None
        script = settings.script or entry.script
    else:
        url, command, distribution = given
        script = settings.script
    registered = entry is not None and _same(entry, url, command, distribution, script)
    if registered and entry is not None:  # the configuration may only ask for consent
        consent = entry.consent or settings.consent is True
    else:
        consent = settings.consent is not False
    trust = entry.trust if registered and entry is not None else None
    policy = TrustPolicy(  # the server's own allow_unverified allows it alone
        allow_unverified=config.trust.allow_unverified or settings.allow_unverified,
        allow_extensions=config.trust.allow_extensions,
    )
    if distribution is not None:
        return _check_distribution(
            config, index, label, settings, search, policy, distribution, script, consent, trust
        )
    transport: Literal["stdio", "http"] = "http" if url is not None else "stdio"
    target = url if url is not None else " ".join(command or ())
    if registered:
        how = f"registry entry {label!r} vouches for this {'URL' if url else 'command'}"
        runs = () if command is None else (
            f"the command {target!r} (a registry names it; what it runs is not checked)",
        )  # fmt: skip
        return ServerCheck(
            label, transport, target, "registered", "registered", how, True, consent, trust,
            command=tuple(command or ()), unverified=runs,
        )  # fmt: skip
    why = f"no registry vouches for {target!r} under the label {label!r}" + (
        f" ({'; '.join(conflict)})" if conflict else ""
    )
    if not policy.allow_unverified:
        return ServerCheck(
            label, transport, target, "unverified", "not-in-registry",
            f"{why}; {_fix(label)}",
            False, consent, command=tuple(command or ()),
        )  # fmt: skip
    allowed_by = (
        "the policy allows unverified code"
        if config.trust.allow_unverified
        else f"[mcp_servers.{label}] says allow_unverified = true"
    )
    return ServerCheck(
        label, transport, target, "unverified", "not-in-registry",
        f"{why}; started because {allowed_by}", True, consent,
        command=tuple(command or ()), unverified=(f"the MCP server {target!r}",),
    )  # fmt: skip


def mount_servers(
    ctx: Context, labels: tuple[str, ...], taken: Sequence[str], progress: Progress | None
) -> tuple[Mounted, ...]:
    """Check, start and list each configured MCP server, none of whose labels may be
    ``taken`` already (by the drivers' mounts): one :class:`Mounted` each."""
    mounts: list[Mounted] = []
    for label, server in sorted(ctx.config.mcp_servers.items()):
        done = len(taken) + len(mounts)
        if progress is not None:
            progress(done, done + 1, f"connecting to the MCP server {label}")
        used = {*taken, *(m.record.label for m in mounts)}
        mounts.append(mount_server(ctx, label, server, labels, used))
    return tuple(mounts)


def attach(stack: Orchestrator, mount: Mounted) -> LoadRecord:
    """Put a mount whose stages succeeded on ``stack``: its record as it is, or failed with
    ``invalid-tools`` when the stack refuses the tools (a name listed twice, a schema that
    cannot be checked). Drivers and MCP servers all mount through it."""
    try:
        stack.mount(mount.record.label, mount.driver, mount.tools)
    except (ValueError, TypeError) as exc:
        return replace(mount.record, status="failed", reason="invalid-tools", message=str(exc))
    return mount.record


def mount_server(
    ctx: Context,
    label: str,
    settings: MCPServerSettings,
    labels: Sequence[str],
    taken: Iterable[str],
) -> Mounted:
    """Check the server, start it (connect) and list its tools: its record, and when it
    mounted the driver, its tools and, when each call needs consent, what would waive it."""
    record = LoadRecord(label, "failed", "", "", kind="mcp")
    skipped = skip_reason(ctx.config, label, settings, labels)
    if skipped is not None:
        return Mounted(replace(record, status="skipped", reason=skipped[0], message=skipped[1]))
    if label in taken:
        message = f"the label {label!r} is already used by a driver"
        return Mounted(replace(record, reason="label-taken", message=message))
    started = time.perf_counter()
    check = check_server(ctx.config, ctx.index, label, settings, ctx.search)
    checked = time.perf_counter() - started
    record = replace(
        record,
        distribution=check.distribution,
        version=check.version,
        verification=check.status,
        trust=check.trust,
        isolation="remote" if check.transport == "http" else "process",
        timings={"verify": checked},
        warnings=tuple(f"UNVERIFIED CODE runs: {u}" for u in check.unverified),
    )
    if not check.allowed:
        missing = check.status == "missing"
        status: Literal["failed", "rejected"] = "failed" if missing else "rejected"
        return Mounted(replace(record, status=status, reason=check.reason, message=check.message))
    try:
        driver = server_driver(check, settings, ctx.config, ctx.paths)
    except Refused as refusal:
        return Mounted(replace(record, reason=refusal.reason, message=refusal.message))
    started = time.perf_counter()
    try:
        tools = valid_tools(driver.list_tools())
    except (ToolError, Refused) as exc:
        driver.close()
        reason = exc.reason if isinstance(exc, Refused) else "server-start"
        record = replace(record, reason=reason, message=str(exc))
        return Mounted(_timed_start(record, started))
    record = _timed_start(record, started)
    if not tools:
        driver.close()
        return Mounted(replace(record, reason="no-tools", message="it serves no tools"))
    consent = "each call needs consent" if check.consent else "calls need no consent"
    mounted = replace(
        record,
        status="mounted",
        reason="mounted",
        message=f"{len(tools)} tools from {check.target} ({consent})",
        tools=tuple(t.name for t in tools),
    )
    waiver = None
    if check.consent and check.trust is not None:  # a registry entry alone may waive it
        waiver = 'unless its registry entry says "consent": false'
    elif check.consent:
        waiver = f"or set consent = false in [mcp_servers.{label}]"
    return Mounted(mounted, driver, tools, driver, waiver)


def needs_consent(
    route: Callable[[str], str], waivers: Mapping[str, str]
) -> Callable[[ToolCall], Approval | None]:
    """For a call: the approval it needs from a consent plugin (``route`` names the label
    its tool is mounted under, one of ``waivers``, which says for each what would waive
    it), or ``None``."""

    def needs(call: ToolCall) -> Approval | None:
        try:
            label = route(call.name)
        except LookupError:
            return None
        if label not in waivers:
            return None
        return Approval(
            label,
            f"each call to the MCP server {label!r} needs approval",
            f"a host plugin's mcs_host_consent hook must approve it ({waivers[label]})",
        )

    return needs


def skip_reason(
    config: HostConfig, label: str, settings: MCPServerSettings, labels: Sequence[str]
) -> tuple[str, str] | None:
    """``(reason, message)`` when the server is left out: not asked for, disabled, denied or
    not allowed; ``None`` when it goes ahead."""
    if labels and label not in labels:
        return "not-requested", "not among the labels asked for"
    if not settings.enabled:
        return "disabled", "enabled = false in its configuration"
    return ruled_out(config, {label})


def server_driver(
    check: ServerCheck,
    settings: MCPServerSettings,
    config: HostConfig,
    paths: Sequence[str] | None = None,
) -> MCPToolDriver:
    """The :class:`MCPToolDriver` for an allowed server (not connected yet); ``paths`` is the
    search path the host was given (``None``: the interpreter's)."""
    require_mcp_extra("mcp-unavailable", "mounting an MCP server needs")
    from mcs_host.bridge.client import MCPToolDriver  # noqa: PLC0415 - only when mounting one

    timeout = settings.call_timeout or config.call_timeout or 60.0
    connect = max(config.timeout, 30.0)
    if check.transport == "http":
        return MCPToolDriver(
            check.target, name=check.label, call_timeout=timeout, connect_timeout=connect
        )
    if check.release is not None:
        from mcs_host.bridge.isolation import ServerProcess  # noqa: PLC0415 - only then

        return ServerProcess(
            check.label,
            child_config(config, check.label, settings).model_dump_json(),
            search_path=paths,
            env=_placed(settings.env),
            call_timeout=timeout,
            connect_timeout=connect,
        )
    return MCPToolDriver(
        list(check.command),
        name=check.label,
        env=dict(settings.env),
        call_timeout=timeout,
        connect_timeout=connect,
    )


def child_config(config: HostConfig, label: str, settings: MCPServerSettings) -> HostConfig:
    """The configuration a server's own process checks it under: the parent's registries
    (the default ones named) and policy, that one server, no drivers and no plugins."""
    registries = config.registries
    if registries is None:
        registries = tuple(default_registry_paths())
    return config.model_copy(
        update={
            "registries": registries,
            "drivers": {},
            "mcp_servers": {label: settings},
            "autoload": False,
            "plugins": False,
            "require": {},
        }
    )


_PLACES = ("MCS_HOST_STATE_DIR", "MCS_HOST_CACHE_DIR", "XDG_STATE_HOME", "XDG_CACHE_HOME")
"""The variables that say where the host keeps its state and cache: a server's process
checks it against the same registry state."""


def _placed(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the variables saying where the host's state and cache are."""
    return {**{k: os.environ[k] for k in _PLACES if k in os.environ}, **env}


def _check_distribution(
    config: HostConfig,
    index: TrustIndex,
    label: str,
    settings: MCPServerSettings,
    search: Sequence[str],
    policy: TrustPolicy,
    distribution: str,
    script: str | None,
    consent: bool,
    trust: str | None,
) -> ServerCheck:
    """A stdio server from an installed distribution: its files, its console script, what
    it requires."""
    own = check_distribution(distribution, f"the MCP server {label!r}", index, search)
    target = f"{distribution}:{script}" if script else distribution
    base = ServerCheck(
        label, "stdio", target, own.status if own.status != "revoked" else "rejected",
        own.reason, own.message, False, consent, trust, own.distribution, own.version,
    )  # fmt: skip
    if own.status in ("missing", "rejected", "revoked"):
        return base
    if own.status == "unverified" and not policy.allow_unverified:
        return _with(base, message=f"{own.message}; {_fix(label)}")
    if own.extensions and not policy.allow_extensions:
        names = ", ".join(m.path for m in own.extensions)
        return _with(
            base,
            status="rejected",
            reason="extension-module",
            message=f"{distribution} ships extension modules ({names}), and the policy "
            "refuses native code",
        )
    assert own.metadata_path is not None
    named, runs, problem = _console_script(own, script)
    if problem is not None:
        return _with(base, status="rejected", reason="console-script", message=problem)
    # its process speaks MCP through the host's SDK, which counts as the host's there
    _origins.grant_extras(("mcp",))
    checks = check_dependencies(distribution, own.metadata_path, index, search)
    refuse = config.trust.refuses_unverified(config.strict, policy.allow_unverified)
    judged = judge_dependencies(checks, policy, refuse_unverified=refuse)
    if judged.refusal is not None:
        return _with(base, reason=judged.refusal[1], message=judged.refusal[2], dependencies=checks)
    unverified = tuple(
        f"dependency {c.distribution} {c.version} ({c.reason}: {c.message})"
        for c in judged.unverified
    )
    if own.status == "unverified":
        unverified = (f"the MCP server {distribution} itself ({own.message})", *unverified)
    command = (sys.executable, "-I", "-m", "mcs_host", "run-server", label)
    return _with(
        base, allowed=True, command=command, dependencies=checks, unverified=unverified,
        release=own, script=named, entry_point=runs,
    )  # fmt: skip


def _console_script(
    own: DependencyCheck, script: str | None
) -> tuple[str, str, None] | tuple[None, None, str]:
    """The console script ``script`` of the distribution (default: its only one) and the
    ``module:attribute`` it runs, one of its own modules; or why there is none."""
    assert own.metadata_path is not None
    try:
        with open(os.path.join(own.metadata_path, "entry_points.txt"), encoding="utf-8") as file:
            scripts = dict(parse_entry_points(file.read(), "console_scripts")[0])
    except (OSError, UnicodeDecodeError):
        scripts = {}
    name = own.distribution
    if script is None:
        if len(scripts) != 1:
            have = ", ".join(sorted(scripts)) or "none"
            return (
                None,
                None,
                f"{name} has {len(scripts)} console scripts ({have}): name one as script",
            )
        script = next(iter(scripts))
    target = scripts.get(script)
    if target is None:
        return None, None, f"{name} has no console script {script!r}"
    top = target.partition(":")[0].strip().split(".")[0]
    modules = {m.name.split(".")[0] for m in own.modules}
    if top not in modules:
        return (
            None,
            None,
            (
                f"console script {script!r} of {name} runs {target!r}, which is not one of "
                f"{name}'s own modules"
            ),
        )
    return script, target, None


def _same(
    entry: MCPServerEntry,
    url: str | None,
    command: tuple[str, ...] | None,
    distribution: str | None,
    script: str | None,
) -> bool:
    argv = entry.argv if entry.command else None
    named = normalize_name(distribution) if distribution is not None else None
    if (entry.url, argv, entry.distribution) != (url, command, named):
        return False
    return script is None or entry.script is None or script == entry.script


def _fix(label: str) -> str:
    """What makes the server ``label`` start when no registry vouches for it."""
    return (
        f"pin it with `mcs-host lock --server {label}`, or allow it alone unverified "
        f"(allow_unverified = true in [mcp_servers.{label}])"
    )


def _refused(label: str, reason: str, message: str) -> ServerCheck:
    return ServerCheck(label, "stdio", "", "rejected", reason, message, False, True)


def _timed_start(record: LoadRecord, started: float) -> LoadRecord:
    """``record`` with the seconds since ``started`` as its ``start`` timing."""
    return replace(record, timings={**record.timings, "start": time.perf_counter() - started})


def _with(base: ServerCheck, **changes: Any) -> ServerCheck:
    return replace(base, **changes)
