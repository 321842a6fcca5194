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

# Searched in this order for a public name; discovery first, as it needs no pydantic.
_SUBMODULES = ("discovery", "contract", "kit", "sandbox")

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
    if name in __all__:
        for submodule in _SUBMODULES:
            module = importlib.import_module(f"{__name__}.{submodule}")
            if name in module.__all__:
                value = getattr(module, name)
                globals()[name] = value
                return value
    raise AttributeError(f"module 'mcs_host' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
