"""The isolation stage: a verified driver run by a child host in a process of its own.

:func:`runs_isolated` decides whether a mount is isolated (its registry entry requires it,
or its settings or the host's say so); :func:`isolated_driver` makes the
:class:`IsolatedDriver` in place of importing the driver; :func:`start_isolated` starts the
child and lists its tools. The child gets a configuration with only that mount, the
parent's registries and policy, strict, and no host plugins: the parent consents and audits
each call itself. The bridge (and asyncio, which it imports) is imported only when a mount
is isolated: a load without isolation does not pay for it.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TypeGuard

from pydantic import ValidationError

from mcs_host._install_hint import extra_command
from mcs_host.contract import DriverMeta, Tool
from mcs_host.interfaces import ToolError
from mcs_host.trust import _origins
from mcs_host.trust.registry import default_registry_paths
from mcs_host.trust.verification import Verification

from .config_schema import DriverSettings, HostConfig
from .records import LiveCheck, Plan, Refused
from .stages import Context, valid_tools

if TYPE_CHECKING:
    from mcs_host.bridge.isolation import IsolatedDriver

__all__: list[str] = []  # a stage of mcs_host.loading.host; nothing public

_CHILD = False
"""Whether this process is an isolated driver's (:func:`become_child`)."""


def become_child() -> None:
    """Mark this process as an isolated driver's: it mounts that driver itself, whatever its
    registry entry says (isolating it again would start processes without end)."""
    global _CHILD  # noqa: PLW0603 - one process, one role
    _CHILD = True


def is_isolated(obj: object) -> TypeGuard[IsolatedDriver]:
    """Whether ``obj`` is an isolated driver (none exists before the bridge is imported)."""
    bridge = sys.modules.get("mcs_host.bridge.isolation")
    return bridge is not None and isinstance(obj, bridge.IsolatedDriver)


def runs_isolated(ctx: Context, plan: Plan, verification: Verification) -> bool:
    """Whether the mount runs in a process of its own: its registry entry requires it, or its
    settings (else the host's) say so."""
    if _CHILD:
        return False  # this process is the isolation
    entry = ctx.index.entries.get(verification.driver_id or "")
    if entry is not None and getattr(entry, "isolation", None) == "process":
        return True
    return (plan.settings.isolation or ctx.config.isolation) == "process"


def isolated_driver(
    config: HostConfig, paths: tuple[str, ...] | None, plan: Plan, verification: Verification
) -> IsolatedDriver:
    """The verified driver as an :class:`IsolatedDriver`: a child host, with a configuration
    that mounts only it under the same registries and policy, strictly and without host
    plugins (the parent consents and audits); started when its tools are listed. ``paths``
    is the search path the host was given."""
    require_mcp_extra("isolation-unavailable", "it is to run isolated, which needs")
    from mcs_host.bridge.isolation import IsolatedDriver  # noqa: PLC0415 - only when isolating

    registries = config.registries
    if registries is None:
        registries = tuple(default_registry_paths())
    child = config.model_copy(
        update={
            "registries": registries,
            "drivers": {plan.label: plan.settings.model_copy(update={"isolation": "none"})},
            "mcp_servers": {},  # the parent mounts those
            "autoload": False,
            "plugins": False,
            "isolation": "none",
            "namespace": "on-collision",  # one driver: its tools keep their names
            "require": {plan.label: config.require.get(plan.label, "")},
        }
    )
    candidate = verification.candidate
    try:
        meta = DriverMeta(
            id=verification.driver_id or f"isolated-{plan.label}",
            name=plan.label,
            version=candidate.version,
        )
    except ValidationError:
        meta = DriverMeta(id=f"isolated-{plan.label}", name=plan.label, version="0.0.0")
    timeout = plan.settings.timeout or config.timeout
    return IsolatedDriver(
        plan.label,
        child.model_dump_json(),
        meta=meta,
        search_path=paths,
        call_timeout=config.call_timeout or 60.0,
        connect_timeout=max(timeout, 30.0),
        restarts=plan.settings.restarts,
    )


def start_isolated(driver: IsolatedDriver) -> tuple[Tool, ...]:
    """Start the isolated driver's child and list its tools; a child that cannot start, or
    refuses the driver, fails the mount with what it said."""
    try:
        tools = valid_tools(driver.list_tools())
    except ToolError as exc:
        driver.close()
        raise Refused("failed", "isolated-start", str(exc)) from None
    except Refused:
        driver.close()
        raise
    if not tools:
        driver.close()
        raise Refused("failed", "no-tools", "its process serves no tools")
    return tools


def require_mcp_extra(reason: str, why: str) -> None:
    """Make ready to speak MCP in this process (its SDK counts as the host's from now on), or
    refuse with ``reason``: ``why`` the MCP extra is needed."""
    _origins.grant_extras(("mcp",))
    try:
        import mcp  # noqa: F401, PLC0415 - the mcp extra
    except ImportError:
        install = extra_command("mcp")
        raise Refused("failed", reason, f"{why} the MCP extra: {install}") from None


def live_check(
    config: HostConfig, paths: tuple[str, ...] | None, verification: Verification
) -> LiveCheck:
    """Start the verified driver in a child process of its own, with its healthcheck, list
    its tools and end it: whether it would load, found without importing it here."""
    label = verification.label
    settings = config.drivers.get(label) or DriverSettings()
    plan = Plan(label, label, settings)
    started = time.perf_counter()
    try:
        checking = config.model_copy(update={"healthcheck": True})
        driver = isolated_driver(checking, paths, plan, verification)
        try:
            tools = start_isolated(driver)
            health = driver.health
        finally:
            driver.close()
    except Refused as refusal:
        return LiveCheck(False, f"{refusal.reason}: {refusal.message}", (), _since(started))
    return LiveCheck(
        True,
        f"started and listed {len(tools)} tools in a process of its own",
        tuple(t.name for t in tools),
        _since(started),
        health,
    )


def _since(started: float) -> float:
    return time.perf_counter() - started
