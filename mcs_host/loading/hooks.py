"""Host plugins: pluggy hook specifications and their registration.

Host plugins come from the entry point group ``mcs.host_plugins`` and are verified exactly like
drivers before they are imported; a plugin can also be added in-process. A plugin that
implements a hook this host does not specify is refused with an error naming the plugin and
the hook (pluggy's ``check_pending`` rule, applied per plugin so one bad plugin does not
block the others).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from mcs_host.orchestration.calls import TextFormat, ToolCall
    from mcs_host.trust.verification import Verification

    from .records import LoadReport

__all__ = [
    "HostHooks",
    "PluginError",
    "hookimpl",
    "hookspec",
    "plugin_manager",
    "register_plugin",
]

PROJECT = "mcs_host"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
"""Decorate a host plugin's hook functions with this."""


class PluginError(Exception):
    """A host plugin cannot be registered; the message names the plugin and the hook."""


class HostHooks:
    """The hooks a host plugin may implement."""

    @hookspec
    def mcs_host_verify(self, verification: Verification) -> str | None:
        """Check a driver that passed verification, before it is imported.

        Return a reason to refuse it, or ``None``. Any reason refuses it.
        """

    @hookspec
    def mcs_host_consent(self, call: ToolCall) -> bool | str | ToolCall | None:
        """Approve (``True``), deny (``False``, or a string saying why), approve an edited
        call (a :class:`~mcs_host.orchestration.calls.ToolCall`), or abstain (``None``) before
        a call runs.

        Any denial wins; the model is told the call was not approved, and why.
        """

    @hookspec
    def mcs_host_after_tool_call(
        self, call: ToolCall, result: Any, error: BaseException | None
    ) -> None:
        """Called after every tool call the host runs, with its result or its error (audit)."""

    @hookspec
    def mcs_host_codecs(self) -> list[TextFormat]:  # type: ignore[empty-body]
        """Text formats this plugin adds to the built-in ones: how some model writes tool
        calls (:class:`~mcs_host.TextFormat`); tried in their ``order``, then by name."""

    @hookspec
    def mcs_host_loaded(self, report: LoadReport) -> None:
        """Called once loading is done, with the load report."""


def plugin_manager() -> pluggy.PluginManager:
    """A plugin manager that knows the host's hook specifications."""
    manager = pluggy.PluginManager(PROJECT)
    manager.add_hookspecs(HostHooks)
    return manager


def register_plugin(manager: pluggy.PluginManager, plugin: object, name: str) -> None:
    """Register ``plugin``; refuse it, leaving the manager as it was, if a hook is unknown or
    does not match its specification."""
    try:
        manager.register(plugin, name=name)
    except (pluggy.PluginValidationError, ValueError) as exc:
        if manager.is_registered(plugin):  # pluggy < 1.7 keeps the hooks checked before
            manager.unregister(plugin)
        raise PluginError(f"host plugin {name!r}: {exc}") from None
    for caller in manager.get_hookcallers(plugin) or ():
        if caller.has_spec():
            continue
        optional = all(
            impl.optionalhook for impl in caller.get_hookimpls() if impl.plugin is plugin
        )
        if not optional:
            manager.unregister(plugin)
            raise PluginError(
                f"host plugin {name!r} implements unknown hook {caller.name!r}; "
                f"known hooks: {', '.join(sorted(_hook_names()))}"
            )


def _hook_names() -> list[str]:
    return [name for name in vars(HostHooks) if name.startswith("mcs_host_")]
