"""The public API of mcs-host, declared once.

Every name imported here is importable from ``mcs_host``;
``mcs_host/__init__.py`` reads this file and imports each name's module on first use, so
``import mcs_host`` stays cheap. Type checkers read it as the package's interface.
"""

from ._version import __version__ as __version__
from .contract import (
    CAPABILITY_MIXINS as CAPABILITY_MIXINS,
)
from .contract import (
    CONTRACT_VERSION as CONTRACT_VERSION,
)
from .contract import (
    MANIFEST_FILE as MANIFEST_FILE,
)

# The MCS contract
from .contract import (
    Binding as Binding,
)
from .contract import (
    ContractError as ContractError,
)
from .contract import (
    DriverContext as DriverContext,
)
from .contract import (
    DriverManifest as DriverManifest,
)
from .contract import (
    DriverMeta as DriverMeta,
)
from .contract import (
    DriverResponse as DriverResponse,
)
from .contract import (
    MCSDriver as MCSDriver,
)
from .contract import (
    MCSToolDriver as MCSToolDriver,
)
from .contract import (
    SupportsAutostart as SupportsAutostart,
)
from .contract import (
    SupportsDriverContext as SupportsDriverContext,
)
from .contract import (
    SupportsHealthcheck as SupportsHealthcheck,
)
from .contract import (
    Tool as Tool,
)
from .contract import (
    ToolArgumentError as ToolArgumentError,
)
from .contract import (
    ToolCallSignaling as ToolCallSignaling,
)
from .contract import (
    ToolError as ToolError,
)
from .contract import (
    ToolParameter as ToolParameter,
)
from .contract import (
    TrustManifest as TrustManifest,
)
from .contract import (
    UnknownToolError as UnknownToolError,
)
from .contract import (
    contract_schemas as contract_schemas,
)
from .contract import (
    implemented_capabilities as implemented_capabilities,
)
from .contract import (
    is_semver as is_semver,
)
from .discovery import (
    ENTRY_POINT_GROUP as ENTRY_POINT_GROUP,
)
from .discovery import (
    LABEL_RULE as LABEL_RULE,
)
from .discovery import (
    PLUGIN_GROUP as PLUGIN_GROUP,
)

# Discovery
from .discovery import (
    Candidate as Candidate,
)
from .discovery import (
    Discovery as Discovery,
)
from .discovery import (
    Problem as Problem,
)
from .discovery import (
    declare as declare,
)
from .discovery import (
    discover as discover,
)
from .discovery import (
    installed_copies as installed_copies,
)
from .discovery import (
    installed_distribution as installed_distribution,
)
from .discovery import (
    installed_projects as installed_projects,
)
from .discovery import (
    is_valid_label as is_valid_label,
)
from .discovery import (
    normalize_name as normalize_name,
)
from .discovery import (
    parse_entry_points as parse_entry_points,
)
from .discovery import (
    requires_dist as requires_dist,
)

# The driver author's kit
from .kit.authoring import (
    manifest_meta as manifest_meta,
)
from .kit.authoring import (
    parse_arguments as parse_arguments,
)
from .kit.authoring import (
    tool_from_model as tool_from_model,
)
from .kit.conformance import (
    ConformanceResult as ConformanceResult,
)
from .kit.conformance import (
    check_driver as check_driver,
)
from .kit.sandbox import (
    PathEscapeError as PathEscapeError,
)
from .kit.sandbox import (
    Root as Root,
)
from .kit.scaffold import (
    new_driver as new_driver,
)
from .kit.testing import (
    make_test_host as make_test_host,
)

# Loading
from .loading.compat import (
    Incompatibility as Incompatibility,
)
from .loading.compat import (
    capability_problems as capability_problems,
)
from .loading.compat import (
    host_requirement_problem as host_requirement_problem,
)
from .loading.compat import (
    meta_of as meta_of,
)
from .loading.compat import (
    version_problem as version_problem,
)
from .loading.config import (
    PROJECT_FILES as PROJECT_FILES,
)
from .loading.config import (
    ConfigError as ConfigError,
)
from .loading.config import (
    DriverSettings as DriverSettings,
)
from .loading.config import (
    HostConfig as HostConfig,
)
from .loading.config import (
    TrustSettings as TrustSettings,
)
from .loading.config import (
    approve_directory as approve_directory,
)
from .loading.config import (
    load_config as load_config,
)
from .loading.config import (
    override_config as override_config,
)
from .loading.config import (
    revoke_directory as revoke_directory,
)
from .loading.hooks import (
    HostHooks as HostHooks,
)
from .loading.hooks import (
    PluginError as PluginError,
)
from .loading.hooks import (
    hookimpl as hookimpl,
)
from .loading.hooks import (
    hookspec as hookspec,
)
from .loading.hooks import (
    plugin_manager as plugin_manager,
)
from .loading.hooks import (
    register_plugin as register_plugin,
)
from .loading.host import Host as Host
from .loading.host import load_drivers as load_drivers
from .loading.planning import settle_conflicts as settle_conflicts
from .loading.records import (
    Loaded as Loaded,
)
from .loading.records import (
    LoadError as LoadError,
)
from .loading.records import (
    LoadRecord as LoadRecord,
)
from .loading.records import (
    LoadReport as LoadReport,
)
from .loading.records import (
    VerifyRecord as VerifyRecord,
)
from .loading.records import (
    VerifyReport as VerifyReport,
)
from .loading.reference import (
    ReferenceToolDriver as ReferenceToolDriver,
)
from .loading.reference import (
    is_reference_driver as is_reference_driver,
)

# Orchestration
from .orchestration.calls import (
    Detection as Detection,
)
from .orchestration.calls import (
    ToolCall as ToolCall,
)
from .orchestration.calls import (
    detect as detect,
)
from .orchestration.calls import (
    messages_for as messages_for,
)
from .orchestration.formats import (
    FAMILIES as FAMILIES,
)
from .orchestration.formats import (
    NativeCall as NativeCall,
)
from .orchestration.formats import (
    NativeDetection as NativeDetection,
)
from .orchestration.formats import (
    as_mapping as as_mapping,
)
from .orchestration.formats import (
    detect_native as detect_native,
)
from .orchestration.formats import (
    native_messages as native_messages,
)
from .orchestration.formats import (
    native_tools as native_tools,
)
from .orchestration.healing import (
    MISSING_BRACE as MISSING_BRACE,
)
from .orchestration.healing import (
    Unhealable as Unhealable,
)
from .orchestration.healing import (
    heal as heal,
)
from .orchestration.orchestrator import (
    Orchestrator as Orchestrator,
)
from .orchestration.orchestrator import (
    is_standalone_driver as is_standalone_driver,
)
from .orchestration.orchestrator import (
    is_tool_driver as is_tool_driver,
)
from .orchestration.orchestrator import (
    tool_name as tool_name,
)
from .orchestration.parsing import (
    TextCall as TextCall,
)
from .orchestration.parsing import (
    TextDetection as TextDetection,
)
from .orchestration.parsing import (
    detect_text as detect_text,
)
from .orchestration.prompting import (
    Prompts as Prompts,
)
from .orchestration.prompting import (
    render_tools as render_tools,
)
from .orchestration.runner import (
    Runner as Runner,
)
from .orchestration.runner import (
    RunResult as RunResult,
)
from .orchestration.streaming import (
    AnthropicStream as AnthropicStream,
)
from .orchestration.streaming import (
    OpenAIChatStream as OpenAIChatStream,
)
from .orchestration.streaming import (
    ResponsesStream as ResponsesStream,
)
from .orchestration.streaming import (
    is_complete as is_complete,
)
from .orchestration.streaming import (
    is_complete_tool_call as is_complete_tool_call,
)
from .orchestration.streaming import (
    might_be_tool_call as might_be_tool_call,
)
from .orchestration.validation import (
    ArgumentProblem as ArgumentProblem,
)
from .orchestration.validation import (
    ArgumentValidator as ArgumentValidator,
)
from .orchestration.validation import (
    Validation as Validation,
)
from .orchestration.validation import (
    compile_schema as compile_schema,
)
from .orchestration.validation import (
    validate_arguments as validate_arguments,
)
from .trust.dependencies import (
    DependencyCheck as DependencyCheck,
)
from .trust.dependencies import (
    DependencyJudgment as DependencyJudgment,
)
from .trust.dependencies import (
    check_dependencies as check_dependencies,
)
from .trust.dependencies import (
    host_environment as host_environment,
)
from .trust.dependencies import (
    judge_dependencies as judge_dependencies,
)
from .trust.dependencies import (
    unverified_imports as unverified_imports,
)

# Trust
from .trust.digest import (
    DIGEST_FORMAT as DIGEST_FORMAT,
)
from .trust.digest import (
    SIGNATURE_FILE as SIGNATURE_FILE,
)
from .trust.digest import (
    FileEntry as FileEntry,
)
from .trust.digest import (
    Finding as Finding,
)
from .trust.digest import (
    ModuleFile as ModuleFile,
)
from .trust.digest import (
    TreeDigest as TreeDigest,
)
from .trust.digest import (
    TreeScan as TreeScan,
)
from .trust.digest import (
    editable_source as editable_source,
)
from .trust.digest import (
    module_files as module_files,
)
from .trust.digest import (
    record_hash as record_hash,
)
from .trust.digest import (
    resolve_module as resolve_module,
)
from .trust.digest import (
    scan_installed as scan_installed,
)
from .trust.digest import (
    scan_wheel as scan_wheel,
)
from .trust.importer import (
    ImportRefusedError as ImportRefusedError,
)
from .trust.importer import (
    IntegrityError as IntegrityError,
)
from .trust.importer import (
    VerifiedImporter as VerifiedImporter,
)
from .trust.importer import (
    check_runtime_meta as check_runtime_meta,
)
from .trust.importer import (
    extension_module_files as extension_module_files,
)
from .trust.importer import (
    import_driver as import_driver,
)
from .trust.importer import (
    is_verified_module as is_verified_module,
)
from .trust.importer import (
    verified_importer as verified_importer,
)
from .trust.registry import (
    REGISTRY_FORMAT as REGISTRY_FORMAT,
)
from .trust.registry import (
    REGISTRY_PAYLOAD_TYPE as REGISTRY_PAYLOAD_TYPE,
)
from .trust.registry import (
    DriverEntry as DriverEntry,
)
from .trust.registry import (
    LibraryEntry as LibraryEntry,
)
from .trust.registry import (
    Pin as Pin,
)
from .trust.registry import (
    PublisherKey as PublisherKey,
)
from .trust.registry import (
    Registry as Registry,
)
from .trust.registry import (
    RegistryError as RegistryError,
)
from .trust.registry import (
    RegistrySource as RegistrySource,
)
from .trust.registry import (
    RegistryState as RegistryState,
)
from .trust.registry import (
    ReleaseEntry as ReleaseEntry,
)
from .trust.registry import (
    TrustIndex as TrustIndex,
)
from .trust.registry import (
    default_registry_paths as default_registry_paths,
)
from .trust.registry import (
    is_envelope as is_envelope,
)
from .trust.registry import (
    load_index as load_index,
)
from .trust.registry import (
    load_registry as load_registry,
)
from .trust.registry import (
    state_directory as state_directory,
)
from .trust.registry import (
    write_atomic as write_atomic,
)
from .trust.release import (
    RELEASE_PAYLOAD_TYPE as RELEASE_PAYLOAD_TYPE,
)
from .trust.release import (
    Release as Release,
)
from .trust.release import (
    ReleaseDriver as ReleaseDriver,
)
from .trust.release import (
    ReleaseStatement as ReleaseStatement,
)
from .trust.release import (
    lock as lock,
)
from .trust.release import (
    release_from_candidates as release_from_candidates,
)
from .trust.release import (
    release_from_installed as release_from_installed,
)
from .trust.release import (
    release_from_wheel as release_from_wheel,
)
from .trust.release import (
    sign_wheel as sign_wheel,
)
from .trust.signatures import (
    Envelope as Envelope,
)
from .trust.signatures import (
    PrivateKey as PrivateKey,
)
from .trust.signatures import (
    PublicKey as PublicKey,
)
from .trust.signatures import (
    SignatureError as SignatureError,
)
from .trust.signatures import (
    pae as pae,
)
from .trust.verification import (
    Status as Status,
)
from .trust.verification import (
    TrustPolicy as TrustPolicy,
)
from .trust.verification import (
    Verification as Verification,
)
from .trust.verification import (
    release_decision as release_decision,
)
from .trust.verification import (
    verify as verify,
)
from .trust.verification import (
    verify_candidate as verify_candidate,
)
