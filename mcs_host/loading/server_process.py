"""An MCP server's own process: its distribution checked again, then its console script run
from the verified bytes.

``mcs-host run-server LABEL`` is started by a host that mounts a server from an installed
distribution, never by hand. It reads the one-server configuration the parent wrote, checks
the server as the parent did (the distribution's files against their pins, what it requires
by the policy), registers what was verified with the import gate the command line has
locked down, allows the unverified code the policy admits, and calls the console script's
entry point. Every start verifies again, a restart after a crash too: a file changed in
between refuses the start, with its reason code on stderr for the parent to repeat.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

from mcs_host.trust.dependencies import judge_dependencies
from mcs_host.trust.importer import is_verified_module, verified_importer
from mcs_host.trust.verification import TrustPolicy

from .config_schema import HostConfig
from .records import Refused
from .servers import check_server
from .stages import admit_checked

__all__: list[str] = []  # the command line's run-server; nothing public


def verified_server(
    config: HostConfig, label: str, paths: Sequence[str] | None
) -> Callable[[], Any]:
    """Check the server ``label`` of ``config`` again and import its console script's
    function from the verified bytes, with ``sys.argv`` as the script would have it: the
    function to call to serve. Raises :class:`Refused` when it may not start."""
    settings = config.mcp_servers.get(label)
    if settings is None:
        raise Refused("failed", "not-configured", f"the configuration has no server {label!r}")
    index, _, _ = config.trust_index()
    search = list(paths) if paths is not None else list(sys.path)
    check = check_server(config, index, label, settings, search)
    if not check.allowed:
        raise Refused("rejected", check.reason, f"the MCP server {label!r}: {check.message}")
    own, target = check.release, check.entry_point
    if own is None or target is None:
        message = f"the MCP server {label!r} is not an installed distribution's console script"
        raise Refused("failed", "console-script", message)
    policy = TrustPolicy(  # as check_server judged it: the server's own waiver counts
        allow_unverified=config.trust.allow_unverified or settings.allow_unverified,
        allow_extensions=config.trust.allow_extensions,
    )
    refuse = config.trust.refuses_unverified(config.strict, policy.allow_unverified)
    judged = judge_dependencies(check.dependencies, policy, refuse_unverified=refuse)
    pinned = own.status == "pinned"
    gate = verified_importer()
    admitted = (own, *check.dependencies) if pinned else check.dependencies
    allowed = judged.unverified if pinned else (own, *judged.unverified)
    admit_checked(gate, admitted, allowed, own.distribution, own.version)
    gate.install()
    name, _, attributes = target.partition(":")
    module = importlib.import_module(name.strip())
    if pinned and not is_verified_module(module):
        raise Refused(
            "rejected", "integrity", f"{name.strip()} was not imported from verified bytes"
        )
    found: Any = module
    for part in filter(None, attributes.strip().split(".")):
        found = getattr(found, part)
    if not callable(found):
        raise Refused("failed", "console-script", f"{target} is not callable")
    sys.argv = [check.script or label, *settings.args]
    return found  # type: ignore[no-any-return]
