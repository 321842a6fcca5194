"""mcs-host: discover, verify, load and orchestrate MCS drivers.

The public names are imported lazily, so ``import mcs_host`` stays cheap and paths that
need no pydantic (discovery, ``mcs-host list``) do not load it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .calls import (
        Detection,
        ToolCall,
        detect,
        messages_for,
    )
    from .compat import (
        Incompatibility,
        capability_problems,
        host_requirement_problem,
        meta_of,
        version_problem,
    )
    from .config import (
        ConfigError,
        DriverSettings,
        HostConfig,
        TrustSettings,
        load_config,
    )
    from .conformance import (
        ConformanceResult,
        check_driver,
    )
    from .contract import (
        CAPABILITY_MIXINS,
        CONTRACT_VERSION,
        MANIFEST_FILE,
        Binding,
        ContractError,
        DriverContext,
        DriverManifest,
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
    from .dependencies import (
        DependencyCheck,
        check_dependencies,
        host_environment,
        unverified_imports,
    )
    from .discovery import (
        ENTRY_POINT_GROUP,
        PLUGIN_GROUP,
        Candidate,
        Discovery,
        Problem,
        declare,
        discover,
        installed_distribution,
        normalize_name,
        parse_entry_points,
    )
    from .formats import (
        FAMILIES,
        NativeCall,
        NativeDetection,
        as_mapping,
        detect_native,
        native_messages,
        native_tools,
    )
    from .healing import (
        MISSING_BRACE,
        Unhealable,
        heal,
    )
    from .hooks import (
        HostHooks,
        PluginError,
        hookimpl,
        hookspec,
        plugin_manager,
        register_plugin,
    )
    from .host import (
        Host,
        Loaded,
        LoadError,
        LoadRecord,
        LoadReport,
        load_drivers,
    )
    from .importer import (
        IntegrityError,
        VerifiedImporter,
        check_runtime_meta,
        import_driver,
        is_verified_module,
        verified_importer,
    )
    from .integrity import (
        DIGEST_FORMAT,
        SIGNATURE_FILE,
        FileEntry,
        Finding,
        ModuleFile,
        TreeDigest,
        TreeScan,
        editable_source,
        module_files,
        resolve_module,
        scan_installed,
        scan_wheel,
    )
    from .kit import (
        manifest_meta,
        parse_arguments,
        tool_from_model,
    )
    from .orchestrator import (
        Orchestrator,
        is_standalone_driver,
        is_tool_driver,
        tool_name,
    )
    from .parsing import (
        TextCall,
        TextDetection,
        detect_text,
    )
    from .prompting import (
        Prompts,
        render_tools,
    )
    from .reference import (
        ReferenceToolDriver,
        is_reference_driver,
    )
    from .registry import (
        REGISTRY_FORMAT,
        REGISTRY_PAYLOAD_TYPE,
        DriverEntry,
        LibraryEntry,
        Pin,
        PublisherKey,
        Registry,
        RegistryError,
        RegistrySource,
        RegistryState,
        ReleaseEntry,
        TrustIndex,
        default_registry_paths,
        load_index,
        load_registry,
    )
    from .release import (
        RELEASE_PAYLOAD_TYPE,
        Release,
        ReleaseDriver,
        ReleaseStatement,
        lock,
        release_from_candidates,
        release_from_installed,
        release_from_wheel,
        sign_wheel,
    )
    from .runner import (
        Runner,
        RunResult,
    )
    from .sandbox import (
        PathEscapeError,
        Root,
    )
    from .scaffold import (
        new_driver,
    )
    from .signing import (
        Envelope,
        PrivateKey,
        PublicKey,
        SignatureError,
        pae,
    )
    from .streaming import (
        AnthropicStream,
        OpenAIChatStream,
        ResponsesStream,
        is_complete,
        is_complete_tool_call,
        might_be_tool_call,
    )
    from .testing import (
        make_test_host,
    )
    from .validation import (
        ArgumentProblem,
        Validation,
        validate_arguments,
    )
    from .verification import (
        Status,
        TrustPolicy,
        Verification,
        release_decision,
        verify,
        verify_candidate,
    )

# Searched in this order for a public name; discovery first, as it needs no pydantic.
_SUBMODULES = (
    "discovery",
    "contract",
    "kit",
    "sandbox",
    "integrity",
    "signing",
    "registry",
    "release",
    "verification",
    "importer",
    "dependencies",
    "reference",
    "conformance",
    "scaffold",
    "healing",
    "parsing",
    "formats",
    "validation",
    "prompting",
    "calls",
    "streaming",
    "orchestrator",
    "runner",
    "config",
    "compat",
    "hooks",
    "host",
    "testing",
)

__all__ = [
    "CAPABILITY_MIXINS",
    "CONTRACT_VERSION",
    "DIGEST_FORMAT",
    "ENTRY_POINT_GROUP",
    "FAMILIES",
    "MANIFEST_FILE",
    "MISSING_BRACE",
    "PLUGIN_GROUP",
    "REGISTRY_FORMAT",
    "REGISTRY_PAYLOAD_TYPE",
    "RELEASE_PAYLOAD_TYPE",
    "SIGNATURE_FILE",
    "AnthropicStream",
    "ArgumentProblem",
    "Binding",
    "Candidate",
    "ConfigError",
    "ConformanceResult",
    "ContractError",
    "DependencyCheck",
    "Detection",
    "Discovery",
    "DriverContext",
    "DriverEntry",
    "DriverManifest",
    "DriverMeta",
    "DriverResponse",
    "DriverSettings",
    "Envelope",
    "FileEntry",
    "Finding",
    "Host",
    "HostConfig",
    "HostHooks",
    "Incompatibility",
    "IntegrityError",
    "LibraryEntry",
    "LoadError",
    "LoadRecord",
    "LoadReport",
    "Loaded",
    "MCSDriver",
    "MCSToolDriver",
    "ModuleFile",
    "NativeCall",
    "NativeDetection",
    "OpenAIChatStream",
    "Orchestrator",
    "PathEscapeError",
    "Pin",
    "PluginError",
    "PrivateKey",
    "Problem",
    "Prompts",
    "PublicKey",
    "PublisherKey",
    "ReferenceToolDriver",
    "Registry",
    "RegistryError",
    "RegistrySource",
    "RegistryState",
    "Release",
    "ReleaseDriver",
    "ReleaseEntry",
    "ReleaseStatement",
    "ResponsesStream",
    "Root",
    "RunResult",
    "Runner",
    "SignatureError",
    "Status",
    "SupportsAutostart",
    "SupportsDriverContext",
    "SupportsHealthcheck",
    "TextCall",
    "TextDetection",
    "Tool",
    "ToolArgumentError",
    "ToolCall",
    "ToolCallSignaling",
    "ToolError",
    "ToolParameter",
    "TreeDigest",
    "TreeScan",
    "TrustIndex",
    "TrustManifest",
    "TrustPolicy",
    "TrustSettings",
    "Unhealable",
    "UnknownToolError",
    "Validation",
    "Verification",
    "VerifiedImporter",
    "__version__",
    "as_mapping",
    "capability_problems",
    "check_dependencies",
    "check_driver",
    "check_runtime_meta",
    "contract_schemas",
    "declare",
    "default_registry_paths",
    "detect",
    "detect_native",
    "detect_text",
    "discover",
    "editable_source",
    "heal",
    "hookimpl",
    "hookspec",
    "host_environment",
    "host_requirement_problem",
    "implemented_capabilities",
    "import_driver",
    "installed_distribution",
    "is_complete",
    "is_complete_tool_call",
    "is_reference_driver",
    "is_semver",
    "is_standalone_driver",
    "is_tool_driver",
    "is_verified_module",
    "load_config",
    "load_drivers",
    "load_index",
    "load_registry",
    "lock",
    "make_test_host",
    "manifest_meta",
    "messages_for",
    "meta_of",
    "might_be_tool_call",
    "module_files",
    "native_messages",
    "native_tools",
    "new_driver",
    "normalize_name",
    "pae",
    "parse_arguments",
    "parse_entry_points",
    "plugin_manager",
    "register_plugin",
    "release_decision",
    "release_from_candidates",
    "release_from_installed",
    "release_from_wheel",
    "render_tools",
    "resolve_module",
    "scan_installed",
    "scan_wheel",
    "sign_wheel",
    "tool_from_model",
    "tool_name",
    "unverified_imports",
    "validate_arguments",
    "verified_importer",
    "verify",
    "verify_candidate",
    "version_problem",
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
