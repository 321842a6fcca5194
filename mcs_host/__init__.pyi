"""The public API of mcs-host, declared once.

Every name imported here is importable from ``mcs_host``: ``mcs_host/__init__.py`` reads this
file and imports a name's module on its first use, so ``import mcs_host`` stays cheap. Type
checkers read this file as the package's interface. To export a name, list it here and in its
module's ``__all__`` (tests/unit/test_contract.py checks that both agree).
"""

from ._version import __version__ as __version__

# The MCS contract: the driver interfaces, then the data types
from .interfaces import (
    CAPABILITY_MIXINS as CAPABILITY_MIXINS,
    CONTRACT_VERSION as CONTRACT_VERSION,
    ContractError as ContractError,
    implemented_capabilities as implemented_capabilities,
    is_semver as is_semver,
    is_standalone_driver as is_standalone_driver,
    is_tool_driver as is_tool_driver,
    progress_to as progress_to,
    report_progress as report_progress,
    supports_autostart as supports_autostart,
    supports_healthcheck as supports_healthcheck,
    MANIFEST_FILE as MANIFEST_FILE,
    MCSDriver as MCSDriver,
    MCSToolDriver as MCSToolDriver,
    SEMVER_PATTERN as SEMVER_PATTERN,
    StandaloneDriverLike as StandaloneDriverLike,
    SupportsAutostart as SupportsAutostart,
    SupportsDriverContext as SupportsDriverContext,
    SupportsHealthcheck as SupportsHealthcheck,
    ToolArgumentError as ToolArgumentError,
    ToolCallSignaling as ToolCallSignaling,
    ToolDriverLike as ToolDriverLike,
    ToolError as ToolError,
    UnknownToolError as UnknownToolError,
)
from .contract import (
    Binding as Binding,
    contract_schemas as contract_schemas,
    DriverContext as DriverContext,
    DriverManifest as DriverManifest,
    DriverMeta as DriverMeta,
    DriverResponse as DriverResponse,
    Tool as Tool,
    ToolAnnotations as ToolAnnotations,
    ToolParameter as ToolParameter,
    TrustManifest as TrustManifest,
)

# Discovery: installed metadata -> driver candidates, importing nothing
from .discovery import (
    Candidate as Candidate,
    declare as declare,
    discover as discover,
    Discovery as Discovery,
    ENTRY_POINT_GROUP as ENTRY_POINT_GROUP,
    installed_copies as installed_copies,
    installed_distribution as installed_distribution,
    installed_projects as installed_projects,
    is_valid_label as is_valid_label,
    LABEL_RULE as LABEL_RULE,
    normalize_name as normalize_name,
    parse_entry_points as parse_entry_points,
    PLUGIN_GROUP as PLUGIN_GROUP,
    Problem as Problem,
    requires_dist as requires_dist,
    shadowing as shadowing,
)

# Trust: digests, signatures, registries, releases, verification, verified import
from .trust.digest import (
    DIGEST_FORMAT as DIGEST_FORMAT,
    editable_source as editable_source,
    FileEntry as FileEntry,
    Finding as Finding,
    record_hash as record_hash,
    scan_installed as scan_installed,
    scan_wheel as scan_wheel,
    SIGNATURE_FILE as SIGNATURE_FILE,
    TreeDigest as TreeDigest,
    TreeScan as TreeScan,
)
from .trust.signatures import (
    Envelope as Envelope,
    pae as pae,
    PrivateKey as PrivateKey,
    PublicKey as PublicKey,
    SignatureError as SignatureError,
)
from .trust.registry_format import (
    DriverEntry as DriverEntry,
    FormerPublisher as FormerPublisher,
    LibraryEntry as LibraryEntry,
    MCPServerEntry as MCPServerEntry,
    Pin as Pin,
    ProvenanceSummary as ProvenanceSummary,
    Publisher as Publisher,
    PublisherKey as PublisherKey,
    Registry as Registry,
    REGISTRY_FORMAT as REGISTRY_FORMAT,
    REGISTRY_PAYLOAD_TYPE as REGISTRY_PAYLOAD_TYPE,
    ReleaseEntry as ReleaseEntry,
)
from .trust.registry import (
    default_registry_paths as default_registry_paths,
    is_envelope as is_envelope,
    load_index as load_index,
    load_registry as load_registry,
    RegistryError as RegistryError,
    RegistrySource as RegistrySource,
    RegistryState as RegistryState,
    state_directory as state_directory,
    TrustIndex as TrustIndex,
    user_registry_path as user_registry_path,
)
from ._files import write_atomic as write_atomic
from .trust.release import (
    lock as lock,
    publisher_signers as publisher_signers,
    Release as Release,
    release_from_candidates as release_from_candidates,
    release_from_installed as release_from_installed,
    release_from_wheel as release_from_wheel,
    RELEASE_PAYLOAD_TYPE as RELEASE_PAYLOAD_TYPE,
    ReleaseDriver as ReleaseDriver,
    ReleaseStatement as ReleaseStatement,
    sign_wheel as sign_wheel,
    UnsignedReleaseError as UnsignedReleaseError,
)
from .trust.verification import (
    release_decision as release_decision,
    Status as Status,
    TrustPolicy as TrustPolicy,
    Verification as Verification,
    verify as verify,
    verify_candidate as verify_candidate,
)
from ._reasons import (
    REASONS as REASONS,
    Reason as Reason,
)
from .trust.modules import (
    extension_module_files as extension_module_files,
    module_files as module_files,
    ModuleFile as ModuleFile,
    resolve_module as resolve_module,
)
from .trust.importer import (
    check_runtime_meta as check_runtime_meta,
    shared_library_files as shared_library_files,
    import_driver as import_driver,
    ImportRefusedError as ImportRefusedError,
    IntegrityError as IntegrityError,
    is_verified_module as is_verified_module,
    verified_importer as verified_importer,
    VerifiedImporter as VerifiedImporter,
)
from .trust.dependencies import (
    check_dependencies as check_dependencies,
    check_distribution as check_distribution,
    DependencyCheck as DependencyCheck,
    DependencyJudgment as DependencyJudgment,
    dependency_closure as dependency_closure,
    host_environment as host_environment,
    judge_dependencies as judge_dependencies,
    Needed as Needed,
    unverified_imports as unverified_imports,
)

# Orchestration: a response -> native or text calls -> healed -> validated -> run -> messages
from .orchestration.calls import (
    Detection as Detection,
    TextCall as TextCall,
    TextDetection as TextDetection,
    TextFormat as TextFormat,
    ToolCall as ToolCall,
)
from .orchestration.native import (
    as_mapping as as_mapping,
    detect_native as detect_native,
    FAMILIES as FAMILIES,
    NativeCall as NativeCall,
    NativeDetection as NativeDetection,
)
from .orchestration.text import (
    detect_text as detect_text,
    TextFormats as TextFormats,
)
from .orchestration.healing import (
    heal as heal,
    MISSING_BRACE as MISSING_BRACE,
    Unhealable as Unhealable,
)
from .orchestration.detection import detect as detect
from .orchestration.validation import (
    ArgumentProblem as ArgumentProblem,
    ArgumentValidator as ArgumentValidator,
    compile_schema as compile_schema,
    validate_arguments as validate_arguments,
    Validation as Validation,
)
from .orchestration.messages import (
    messages_for as messages_for,
    native_messages as native_messages,
    native_tools as native_tools,
    Provider as Provider,
)
from .orchestration.prompting import (
    Prompts as Prompts,
    render_tools as render_tools,
)
from .orchestration.response_schema import (
    response_schema as response_schema,
    ResponseSchema as ResponseSchema,
)
from .orchestration.streaming import (
    is_complete as is_complete,
    is_complete_tool_call as is_complete_tool_call,
    might_be_tool_call as might_be_tool_call,
    TextStream as TextStream,
)
from .orchestration.native_streams import (
    AnthropicStream as AnthropicStream,
    OpenAIChatStream as OpenAIChatStream,
    ResponsesStream as ResponsesStream,
)
from .orchestration.routing import tool_name as tool_name
from .orchestration.orchestrator import Orchestrator as Orchestrator
from .orchestration.runner import (
    Runner as Runner,
    RunResult as RunResult,
)

# The bridge to MCP (the mcs-host[mcp] extra)
from .bridge.client import (
    MCPToolDriver as MCPToolDriver,
)
from .bridge.isolation import (
    IsolatedDriver as IsolatedDriver,
)
from .bridge.oauth import Grants as Grants
from .bridge.server import (
    mcp_server as mcp_server,
)
from .bridge._shapes import (
    META_KEY as META_KEY,
    RESULT_KEY as RESULT_KEY,
)

# Loading: configuration, compatibility, host plugins, the load pipeline and its records
from .loading.config import (
    load_config as load_config,
    override_config as override_config,
    user_config_path as user_config_path,
)
from .loading.config_schema import (
    ConfigError as ConfigError,
    DriverSettings as DriverSettings,
    HostConfig as HostConfig,
    MCPServerSettings as MCPServerSettings,
    OAuthSettings as OAuthSettings,
    ProcessLimits as ProcessLimits,
    ServeSettings as ServeSettings,
    TrustSettings as TrustSettings,
)
from .loading.config_project import (
    approve_directory as approve_directory,
    PROJECT_FILES as PROJECT_FILES,
    revoke_directory as revoke_directory,
)
from .loading.compat import (
    capability_problems as capability_problems,
    host_requirement_problem as host_requirement_problem,
    Incompatibility as Incompatibility,
    meta_of as meta_of,
    version_problem as version_problem,
)
from .loading.hooks import (
    hookimpl as hookimpl,
    hookspec as hookspec,
    HostHooks as HostHooks,
    plugin_manager as plugin_manager,
    PluginError as PluginError,
    register_plugin as register_plugin,
)
from .loading.reference import (
    is_reference_driver as is_reference_driver,
    ReferenceToolDriver as ReferenceToolDriver,
)
from .loading.records import (
    LiveCheck as LiveCheck,
    Loaded as Loaded,
    LoadError as LoadError,
    LoadRecord as LoadRecord,
    LoadReport as LoadReport,
    Progress as Progress,
    ServerCheck as ServerCheck,
    VerifyRecord as VerifyRecord,
    VerifyReport as VerifyReport,
)
from .loading.planning import settle_conflicts as settle_conflicts
from .loading.arguments import LoadOptions as LoadOptions
from .loading.host import (
    Host as Host,
    load_drivers as load_drivers,
)

# Agent frameworks: a load's tools as theirs (each extra's framework imported when used)
from .frameworks.pydantic_ai import pydantic_ai_toolset as pydantic_ai_toolset
from .frameworks.openai_agents import openai_agents_tools as openai_agents_tools
from .frameworks.langchain import langchain_tools as langchain_tools
from .frameworks.llm import llm_tools as llm_tools

# The driver author's kit
from .kit.authoring import (
    manifest_meta as manifest_meta,
    parse_arguments as parse_arguments,
    tool_from_model as tool_from_model,
)
from .kit.sandbox import (
    PathEscapeError as PathEscapeError,
    Root as Root,
)
from .kit.scaffold import PLACEHOLDER_PUBLISHER as PLACEHOLDER_PUBLISHER, new_driver as new_driver
from .kit.versioning import bump_version as bump_version
from .kit.conformance import (
    check_driver as check_driver,
    ConformanceResult as ConformanceResult,
)
from .kit.testing import make_test_host as make_test_host
