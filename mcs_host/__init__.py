"""mcs-host: discover, verify, load and orchestrate MCS drivers.

The public names are imported lazily, so ``import mcs_host`` stays cheap and paths that
need no pydantic (discovery, ``mcs-host list``) do not load it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .contract import (
        CAPABILITY_MIXINS,
        CONTRACT_VERSION,
        Binding,
        ContractError,
        DriverContext,
        DriverMeta,
        DriverResponse,
        MCSDriver,
        MCSToolDriver,
        SupportsAutostart,
        SupportsDriverContext,
        SupportsHealthcheck,
        Tool,
        ToolArgumentError,
        ToolCallSignaling,
        ToolError,
        ToolParameter,
        TrustManifest,
        UnknownToolError,
        contract_schemas,
        implemented_capabilities,
        is_semver,
    )
    from .discovery import (
        ENTRY_POINT_GROUP,
        Candidate,
        Discovery,
        Problem,
        discover,
        normalize_name,
    )
    from .kit import parse_arguments, tool_from_model
    from .sandbox import PathEscapeError, Root

_EXPORTS = {
    "contract": (
        "CAPABILITY_MIXINS",
        "CONTRACT_VERSION",
        "Binding",
        "ContractError",
        "DriverContext",
        "DriverMeta",
        "DriverResponse",
        "MCSDriver",
        "MCSToolDriver",
        "SupportsAutostart",
        "SupportsDriverContext",
        "SupportsHealthcheck",
        "Tool",
        "ToolArgumentError",
        "ToolCallSignaling",
        "ToolError",
        "ToolParameter",
        "TrustManifest",
        "UnknownToolError",
        "contract_schemas",
        "implemented_capabilities",
        "is_semver",
    ),
    "discovery": (
        "ENTRY_POINT_GROUP",
        "Candidate",
        "Discovery",
        "Problem",
        "discover",
        "normalize_name",
    ),
    "kit": ("parse_arguments", "tool_from_model"),
    "sandbox": ("PathEscapeError", "Root"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "CAPABILITY_MIXINS",
    "CONTRACT_VERSION",
    "ENTRY_POINT_GROUP",
    "Binding",
    "Candidate",
    "ContractError",
    "Discovery",
    "DriverContext",
    "DriverMeta",
    "DriverResponse",
    "MCSDriver",
    "MCSToolDriver",
    "PathEscapeError",
    "Problem",
    "Root",
    "SupportsAutostart",
    "SupportsDriverContext",
    "SupportsHealthcheck",
    "Tool",
    "ToolArgumentError",
    "ToolCallSignaling",
    "ToolError",
    "ToolParameter",
    "TrustManifest",
    "UnknownToolError",
    "__version__",
    "contract_schemas",
    "discover",
    "implemented_capabilities",
    "is_semver",
    "normalize_name",
    "parse_arguments",
    "tool_from_model",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'mcs_host' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULE_OF))
