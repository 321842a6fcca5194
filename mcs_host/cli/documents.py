"""What every command prints with ``--json``: one typed document per command.

Each document names its schema in ``"schema"`` (``urn:mcs-host:cli:<command>:<version>``);
the version goes up when a key is removed or changes meaning, not when one is added.
``scripts/gen_schemas.py`` publishes them as ``mcs_host/schemas/cli-<command>.schema.json``
beside the contract's schemas. Plain :class:`~typing.TypedDict` classes, so the commands
that print them import no pydantic.

One module: the documents share their parts (a mount, a server, a reason code), and the
published schemas are made from this one place.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, Literal, NotRequired

if sys.version_info >= (3, 12):
    from typing import TypedDict
else:  # pydantic, which writes the published schemas, needs this one before 3.12
    from typing_extensions import TypedDict

from mcs_host._reasons import REASONS

from ._schema import schema_urn

__all__ = ["DOCUMENTS", "schema_urn"]


class _OneOf:
    """Annotation metadata: the published schema of a string lists the values it may take.
    Read only by pydantic, which writes the schemas (this module does not import it)."""

    def __init__(self, values: tuple[str, ...], description: str) -> None:
        self.values = values
        self.description = description

    def __get_pydantic_json_schema__(self, core: Any, handler: Any) -> Any:
        schema = handler(core)
        schema.update(enum=list(self.values), description=self.description)
        return schema


ReasonCode = Annotated[
    str,
    _OneOf(tuple(REASONS), "A reason code; docs/reference/reason-codes.md says each."),
]
"""A code of :data:`mcs_host._reasons.REASONS`."""


class Problem(TypedDict):
    """A problem discovery found, naming the labels and distributions involved."""

    code: ReasonCode
    message: str
    fix: str | None
    """What to do about it; null when nothing is to be done."""
    labels: list[str]
    distributions: list[str]


class ListedDriver(TypedDict):
    """One installed driver or host plugin, from its metadata."""

    label: str
    kind: Literal["driver", "plugin"]
    distribution: str
    version: str
    entry_point: str
    declared: bool
    """True for a driver a registry declares (its distribution ships no entry point)."""
    location: str
    metadata_path: str
    problems: list[ReasonCode]
    verification: str | None
    """``pinned``, ``signed``, ``unverified``, ``revoked`` or ``rejected``; null with
    ``--no-verify`` or when a discovery problem keeps it from being verified."""
    trust: str | None
    """The registry's trust label (``verified``, ``reference``, ``community``), once verified."""


class Server(TypedDict):
    """A configured MCP server, checked before it starts."""

    label: str
    transport: Literal["stdio", "http"]
    target: str
    verification: Literal["pinned", "registered", "unverified", "rejected", "missing"]
    trust: str | None
    allowed: bool
    consent: bool
    reason: ReasonCode
    message: str
    fix: str | None
    """What to do about ``reason``; null when nothing is to be done."""
    distribution: str | None
    version: str | None
    unverified: list[str]


class ListDocument(TypedDict):
    """``mcs-host list --json``."""

    schema: str
    group: str
    path: list[str]
    verified: bool
    """False with ``--no-verify``: metadata only."""
    registries: list[str]
    drivers: list[ListedDriver]
    problems: list[Problem]
    plugins: list[ListedDriver]
    plugin_problems: list[Problem]
    servers: list[Server]
    """The configured MCP servers (empty with ``--no-verify``)."""


class Finding(TypedDict):
    code: ReasonCode
    path: str
    message: str


class Dependency(TypedDict):
    distribution: str
    version: str | None
    required_by: str
    declared: bool
    status: str
    reason: ReasonCode
    message: str
    fix: str | None
    """What to do about ``reason``; null when nothing is to be done."""
    provenance: str | None
    """The publisher whose provenance its pin carries (``github:OWNER/REPO:WORKFLOW``); null
    when it carries none."""


class ReasonMessage(TypedDict):
    reason: ReasonCode
    message: str
    fix: str | None
    """What to do about ``reason``; null when nothing is to be done."""


class Live(TypedDict):
    """The driver started in a child process of its own (``verify --live``)."""

    ok: bool
    message: str
    tools: list[str]
    seconds: float
    health: dict[str, Any] | None


class VerifiedDriver(TypedDict):
    """The trust decision for one installed driver or host plugin."""

    label: str
    kind: Literal["driver", "plugin"]
    distribution: str
    version: str
    verification: str
    trust: str | None
    allowed: bool
    loadable: bool
    verified: bool
    reason: ReasonCode
    message: str
    fix: str | None
    """What to do about ``reason``; null when nothing is to be done."""
    refusal: ReasonMessage | None
    unverified: list[str]
    driver_id: str | None
    digest: str | None
    files: int | None
    bytes: int | None
    signers: list[str]
    findings: list[Finding]
    extensions: list[str]
    dependencies: list[Dependency]
    warnings: list[str]
    live: Live | None
    provenance: str | None
    """The publisher whose provenance its pin carries (``github:OWNER/REPO:WORKFLOW``); null
    when it carries none (or nothing pins it)."""


class RecheckedProvenance(TypedDict):
    """One provenance a registry stores, verified again offline (``verify --provenance``)."""

    distribution: str
    version: str
    filename: str
    """The distribution file it attests."""
    publisher: str
    """The publisher its pin records."""
    path: str | None
    """The stored provenance read; null when none is stored."""
    ok: bool
    problem: str | None
    """Null when it verified again; else ``stored-missing``, ``stored-changed``,
    ``stored-unreadable``, ``summary-mismatch`` (the pin was edited), ``publisher-changed``,
    or what Sigstore refused (``signature-invalid``, ``sha256-mismatch``, ``extra-missing``,
    ...: docs/reference/json-output.md lists them)."""
    message: str
    fix: str | None


class StartupCode(TypedDict):
    path: str
    what: str


class VerifyDocument(TypedDict):
    """``mcs-host verify --json``."""

    schema: str
    ok: bool
    registries: list[str]
    registry_errors: list[ReasonMessage]
    missing: list[str]
    drivers: list[VerifiedDriver]
    plugins: list[VerifiedDriver]
    environment: list[str]
    startup: list[StartupCode]
    servers: list[Server]
    config_notes: list[str]
    problems: list[Problem]
    """What makes a label mean two things: a host plugin with an installed driver's label
    (``plugin-shadows-driver``); a note, which ``ok`` does not read."""
    provenance: NotRequired[list[RecheckedProvenance]]
    """With ``--provenance``: every provenance the registries store, verified again."""


class Mount(TypedDict):
    """What happened to one mount or host plugin."""

    label: str
    kind: Literal["driver", "plugin", "mcp"]
    driver: str | None
    distribution: str | None
    version: str | None
    status: Literal["mounted", "skipped", "rejected", "failed"]
    reason: ReasonCode
    message: str
    fix: str | None
    """What to do about ``reason``; null when nothing is to be done."""
    verification: str | None
    trust: str | None
    tools: list[str]
    timings_ms: dict[str, float]
    warnings: list[str]
    traceback: str | None
    health: dict[str, Any] | None
    isolation: Literal["process", "remote"] | None
    """``process``: it runs in a child process of its own, served over MCP; ``remote``: an
    MCP server reached over HTTP."""


class MountedTool(TypedDict):
    name: str
    label: str
    tool: str


class ResponseSchemaDocument(TypedDict):
    """The stack's response schema, for constrained decoding: OpenAI's ``json_schema``
    object (``name``, ``schema``, ``strict``) and why it is not strict."""

    name: str
    schema: dict[str, Any]
    """Every answer the JSON protocol reads: a call of one tool, several, or the final one."""
    strict: bool
    """It meets OpenAI's strict rules."""
    problems: list[str]
    """Why it is not strict, and each tool it leaves out."""


class LoadDocument(TypedDict):
    """``mcs-host load --json``."""

    schema: str
    ok: bool
    errors: list[str]
    registry_errors: list[str]
    drivers: list[Mount]
    plugins: list[Mount]
    tools: list[MountedTool]
    timings_ms: dict[str, float]
    environment: list[str]
    config_notes: list[str]
    system_prompt: NotRequired[str]
    response_schema: NotRequired[ResponseSchemaDocument]
    """With ``--prompt``."""


class CallDocument(TypedDict):
    """``mcs-host call --json`` and ``mcs-host run --json``: the load, then the answer."""

    schema: str
    ok: bool
    """False when the load had errors or the call failed."""
    load: LoadDocument
    response: dict[str, Any] | None
    """The DriverResponse (``DriverResponse.schema.json``); null when the load had errors."""


class ListedTool(TypedDict):
    """One tool of the loaded stack."""

    name: str
    """Its name as ``call`` and ``serve`` give it."""
    label: str
    """The mount it comes from."""
    tool: str
    """Its name in its driver."""
    description: str | None
    signature: str
    """``name(a: str, b: int = 5)``: the required parameters first."""
    input_schema: dict[str, Any]
    """The JSON Schema of its arguments."""
    annotations: dict[str, bool]
    """The hints its driver declared about its effects, by MCP's names (``readOnlyHint``);
    empty when it declared none."""


class ToolsDocument(TypedDict):
    """``mcs-host tools --json``: the tools the load mounted."""

    schema: str
    ok: bool
    """False when anything asked for did not mount (as ``load``)."""
    tools: list[ListedTool]


class PinnedRelease(TypedDict):
    distribution: str
    version: str
    digest: str
    files: int
    bytes: int
    provenance: NotRequired[str | None]
    """The publisher whose provenance its pin carries; null when it carries none."""
    needed_by: str | None
    """The distribution whose dependencies brought it in (``lock`` pins what a driver
    needs with it); null for what the command line named."""
    signed_by: list[str]
    """The ids of the publisher keys (``--publisher-key``) that signed it: the registry
    trusts it by their signature, and no pin is written; empty when it is pinned."""


class PinnedServer(TypedDict):
    label: str
    target: str
    """Its URL, its command line, or ``distribution:script`` (its files are in ``pinned``)."""
    consent: bool
    """Whether each call to it needs a consent plugin's approval."""
    trust: str


class LockDocument(TypedDict):
    """``mcs-host lock --json``."""

    schema: str
    registry: str
    pinned: list[PinnedRelease]
    servers: list[PinnedServer]
    """The MCP servers pinned with ``--server``."""


class AddedRelease(TypedDict):
    """One distribution of what ``add`` added, and how it was verified."""

    distribution: str
    version: str
    verified: Literal["attested", "no-provenance", "installed", "host"]
    """``attested``: by its publisher's PEP 740 provenance; ``no-provenance``: pinned from the
    downloaded wheel's bytes; ``installed``: installed already, pinned as installed;
    ``host``: part of mcs-host's own installation, not pinned."""
    publisher: str | None
    """The publisher its provenance proved (``attested``), else null."""
    log_index: int | None
    """Its publish attestation's Rekor log index (``attested``), else null."""
    needed_by: str | None
    """The distribution that needs it; null for the one added."""
    digest: str | None
    """Its pin; null for mcs-host's own."""
    installed: bool
    """Whether ``add`` installed it (else it was installed already)."""
    replaced: str | None
    """The version it replaced, when another one was installed."""
    shipped: Literal["verified", "reference", "community"] | None
    """The trust label of the pin mcs-host ships (its catalog) that its files match; null
    when the catalog pins no release of its version."""


class AddedTable(TypedDict):
    table: str
    """``drivers.LABEL`` or ``mcp_servers.LABEL``."""
    names: str
    """The driver it mounts, or the MCP server's distribution."""
    written: bool
    """False when the configuration had it already (it is kept as it is)."""


class AddDocument(TypedDict):
    """``mcs-host add --json``."""

    schema: str
    registry: str
    provenance: list[str]
    """The provenance files stored beside the registry."""
    config: str
    distributions: list[AddedRelease]
    """The one added first, then what it needs."""
    tables: list[AddedTable]
    notes: list[str]


class KeyDocument(TypedDict):
    """``mcs-host keygen --json`` and ``mcs-host public-key --json``."""

    schema: str
    key_file: str
    public_key: str
    key_id: str


class SignedDriver(TypedDict):
    label: str
    object: str
    id: str


class SignDocument(TypedDict):
    """``mcs-host sign --json``."""

    schema: str
    wheel: str
    distribution: str
    version: str
    digest: str
    drivers: list[SignedDriver]
    key_id: str


class SignRegistryDocument(TypedDict):
    """``mcs-host sign-registry --json``."""

    schema: str
    output: str
    version: int
    key_ids: list[str]


class AllowDocument(TypedDict):
    """``mcs-host allow --json``."""

    schema: str
    directory: str
    approved: bool
    """Whether the directory is approved now."""
    changed: bool
    """False when ``--revoke`` found no approval to withdraw."""
    files: dict[str, str]
    """Every file the approval covers, by its name in the directory: the project files and
    each file their settings name there, with its sha256, or what the name leads to:
    ``absent``, ``directory``, ``special``, ``unreadable``, ``outside:PATH``."""


class NewDocument(TypedDict):
    """``mcs-host new --json``."""

    schema: str
    root: str
    created: list[str]
    next: str


class BumpDocument(TypedDict):
    """``mcs-host bump --json``."""

    schema: str
    version: str
    changed: list[str]


class CheckResult(TypedDict):
    level: Literal["error", "warning", "info"]
    code: str
    message: str


class CheckedDriver(TypedDict):
    label: str
    passes: bool
    results: list[CheckResult]


class CheckDocument(TypedDict):
    """``mcs-host check --json``."""

    schema: str
    ok: bool
    drivers: list[CheckedDriver]


DOCUMENTS: dict[str, type] = {
    "list": ListDocument,
    "verify": VerifyDocument,
    "load": LoadDocument,
    "call": CallDocument,
    "run": CallDocument,
    "tools": ToolsDocument,
    "lock": LockDocument,
    "add": AddDocument,
    "keygen": KeyDocument,
    "public-key": KeyDocument,
    "sign": SignDocument,
    "sign-registry": SignRegistryDocument,
    "allow": AllowDocument,
    "new": NewDocument,
    "bump": BumpDocument,
    "check": CheckDocument,
}
"""Each command's ``--json`` document."""
