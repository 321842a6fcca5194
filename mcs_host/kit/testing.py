"""Test instances: a host that mounts exactly the drivers a test gives it.

``make_test_host`` is to mcs-host what stevedore's ``make_test_instance`` is to stevedore:
no installed driver, no entry point plugin and no registry is looked at, so a test sees only
what it passed in, mounted and checked by the same code as a real load. Every driver given
was asked for, so one that does not mount (its constructor raised, it listed no tools...) is
an error of the report: ``report.ok`` is false (``strict=True`` raises ``LoadError``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from mcs_host.loading.config_schema import DriverSettings, HostConfig
from mcs_host.loading.host import Host
from mcs_host.loading.records import Loaded

__all__ = ["make_test_host"]


def make_test_host(
    drivers: Mapping[str, object],
    *,
    plugins: Sequence[object] = (),
    settings: Mapping[str, Mapping[str, Any] | DriverSettings] | None = None,
    **config: Any,
) -> Loaded:
    """Load ``drivers`` (label -> instance, class or factory) with autoload, entry point
    plugins and registries off. ``settings`` gives per label the constructor keywords or a
    :class:`DriverSettings`; ``plugins`` are host plugin objects; ``config`` sets other
    :class:`HostConfig` fields (``strict``, ``healthcheck``...).
    """
    host_config = HostConfig(autoload=False, plugins=False, registries=(), **config)
    host = Host(host_config, search_path=[])
    for label, driver in drivers.items():
        host.add_driver(label, driver, (settings or {}).get(label))
    for plugin in plugins:
        host.add_plugin(plugin)
    loaded = host.load()
    report = loaded.report
    failed = [
        f"{r.label}: {r.reason}: {r.message}"
        for r in report.records
        if r.status in ("rejected", "failed") and r.label in drivers
    ]
    if not failed:
        return loaded
    errors = tuple(dict.fromkeys((*report.errors, *failed)))
    return Loaded(loaded.driver, replace(report, errors=errors))
