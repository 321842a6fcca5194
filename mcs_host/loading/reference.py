"""The reference SDK's drivers (``mcs.driver.core``) mounted without depending on that SDK.

The published ``mcs-driver-*`` ToolDrivers speak the same contract with their own dataclasses:
``DriverMeta`` with ``supported_llms``, ``Tool`` and ``ToolParameter``, and results as JSON
strings, errors included (``{"error": "Not a file: ..."}``). :class:`ReferenceToolDriver`
converts their meta and tools by duck typing, returns results as data, and turns a reported
error into a :class:`~mcs_host.interfaces.ToolError`, so a failed operation is a failed call
rather than a result that looks like success.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from mcs_host.contract import DriverMeta, Tool
from mcs_host.interfaces import MCSToolDriver, SupportsHealthcheck, ToolError

__all__ = ["ReferenceToolDriver", "is_reference_driver"]

_CORE = "mcs.driver.core"


def is_reference_driver(driver: object) -> bool:
    """Whether ``driver`` is built on the reference SDK's classes."""
    return any(cls.__module__.startswith(_CORE) for cls in type(driver).__mro__)


class ReferenceToolDriver(MCSToolDriver, SupportsHealthcheck):
    """A reference-SDK ToolDriver as an mcs-host one."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.meta = DriverMeta.coerce(inner.meta)

    def list_tools(self) -> list[Tool]:
        return [Tool.coerce(tool) for tool in self.inner.list_tools()]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        result = self.inner.execute_tool(tool_name, arguments)
        if not isinstance(result, str):
            return result
        try:
            data = json.loads(result)
        except ValueError:
            return result  # plain text stays text
        if isinstance(data, Mapping) and "error" in data and len(data) <= 2:
            raise ToolError(f"{tool_name}: {data['error']}")
        return data

    def healthcheck(self) -> dict[str, Any]:
        layer = _layer(self.inner, "SupportsHealthcheck")
        check = getattr(layer, "healthcheck", None)
        if not callable(check):
            return {"status": "UNKNOWN", "detail": "the driver has no healthcheck"}
        result = dict(check())
        status = result.get("status")
        result["status"] = str(getattr(status, "value", status))
        return result


def _layer(driver: Any, contract: str) -> Any:
    """The layer of a (possibly wrapped) reference driver that implements ``contract``,
    found through the SDK's own capability resolution when it offers one."""
    core = sys.modules.get(_CORE)
    wanted = getattr(core, contract, None)
    resolve = getattr(getattr(core, "DriverMeta", None), "resolve_capability", None)
    if wanted is not None and callable(resolve):
        found = resolve(driver, wanted)
        if found is not None:
            return found
    return driver
