"""The MCS driver contract's data types, version 0.6: frozen pydantic models.

They validate on construction, round-trip through JSON and export JSON Schema (see
:func:`contract_schemas`). The driver classes, mixins and errors that use them are in
:mod:`mcs_host.interfaces`, which imports no pydantic. Objects of the published reference
SDK (``mcs.driver.core``) convert into these types by duck typing through each model's
``coerce``. A model's validator is built when it is first used (``defer_build``), not when
this module is imported.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mcs_host.interfaces import CONTRACT_VERSION, SEMVER_PATTERN, ContractError, is_semver

__all__ = [
    "Binding",
    "DriverContext",
    "DriverManifest",
    "DriverMeta",
    "DriverResponse",
    "Tool",
    "ToolAnnotations",
    "ToolParameter",
    "TrustManifest",
    "contract_schemas",
]

_IDENTIFIER = re.compile(r"^[^\s]{1,128}$")
_URL = re.compile(r"^(https?|ssh|git)://[^\s/]+[^\s]*$")


def _as_tuple(value: Sequence[Any] | None) -> tuple[Any, ...] | None:
    """Store a validated sequence as a tuple, so a frozen model holds no mutable list."""
    return None if value is None else tuple(value)


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", str_strip_whitespace=False, defer_build=True
    )

    @classmethod
    def coerce(cls, obj: object) -> Self:
        """Convert ``obj`` into this type.

        Accepts an instance, a mapping of field values, or any object with attributes of
        the field names (such as the reference SDK's dataclasses).
        """
        if isinstance(obj, cls):
            return obj
        if isinstance(obj, Mapping):
            return cls.model_validate(dict(obj))
        return cls.model_validate(cls._fields_of(obj))

    @classmethod
    def _fields_of(cls, obj: object) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            key = field.alias or name
            if hasattr(obj, key):
                values[key] = getattr(obj, key)
            elif field.is_required():
                raise ContractError(
                    f"cannot convert {type(obj).__qualname__} to {cls.__name__}: "
                    f"it has no attribute {key!r}"
                )
        return values


class Binding(_Model):
    """A capability and adapter combination a driver serves."""

    capability: str = Field(min_length=1, description='What the driver does: "csv", "rest".')
    adapter: str = Field(min_length=1, description='Which backend: "localfs", "http"; "*" = any.')
    spec_format: str = Field(
        min_length=1, description='How tools are described: "OpenAPI", "JSON-Schema", "Custom".'
    )


class TrustManifest(_Model):
    """Who publishes a driver, where its source lives, and which key signs its releases."""

    publisher: str = Field(min_length=1, description="Author or organisation releasing it.")
    source_repository: str | None = Field(
        default=None, description="URL of the source repository (https, ssh or git scheme)."
    )
    signing_key_id: str | None = Field(
        default=None, description="Identifier of the key that signs releases of this driver."
    )

    @field_validator("source_repository")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and not _URL.match(value):
            raise ValueError(f"not an absolute https, ssh or git URL: {value!r}")
        return value


class DriverMeta(_Model):
    """Static metadata describing a driver: identity, bindings, target models, capabilities."""

    id: str = Field(
        description="Globally unique identifier; a UUID is recommended.",
        json_schema_extra={"pattern": _IDENTIFIER.pattern},
    )
    name: str = Field(min_length=1, description="Human-readable name.")
    version: str = Field(
        description='Semantic version of the driver, e.g. "1.0.0".',
        json_schema_extra={"pattern": SEMVER_PATTERN},
    )
    bindings: Sequence[Binding] = Field(default=(), description="What it does and over what.")
    target_llms: Sequence[str] | None = Field(
        default=None, description='Models it prompts for ("*" = any); None for ToolDrivers.'
    )
    capabilities: Sequence[str] = Field(
        default=(), description='Runtime features it implements, e.g. "healthcheck", "tcs".'
    )
    trust: TrustManifest | None = Field(
        default=None, description="Publisher, source repository and signing key reference."
    )

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not _IDENTIFIER.match(value):
            raise ValueError("must be 1 to 128 characters without whitespace")
        return value

    @field_validator("version")
    @classmethod
    def _check_version(cls, value: str) -> str:
        if not is_semver(value):
            raise ValueError(f"{value!r} is not a semantic version (MAJOR.MINOR.PATCH)")
        return value

    _tuples = field_validator("bindings", "target_llms", "capabilities")(_as_tuple)

    @field_validator("capabilities")
    @classmethod
    def _check_capabilities(cls, value: Sequence[str]) -> Sequence[str]:
        if any(not flag for flag in value):
            raise ValueError("capability names must be non-empty")
        return value

    @classmethod
    def _fields_of(cls, obj: object) -> dict[str, Any]:
        # The reference SDK names target_llms "supported_llms" and has no trust manifest.
        if not hasattr(obj, "target_llms") and hasattr(obj, "supported_llms"):
            values = super()._fields_of(_Renamed(obj, target_llms="supported_llms"))
        else:
            values = super()._fields_of(obj)
        values["bindings"] = tuple(Binding.coerce(b) for b in values.get("bindings") or ())
        if values.get("trust") is not None:
            values["trust"] = TrustManifest.coerce(values["trust"])
        return values

    def has_capability(self, name: str) -> bool:
        """Return whether the capability ``name`` is declared."""
        return name in self.capabilities


class DriverManifest(_Model):
    """The ``mcs-driver.json`` a driver package ships: each driver's meta, readable unimported.

    Keys of ``drivers`` are the entry point objects (``FilesToolDriver`` for
    ``mcs_host_files:FilesToolDriver``). The file is covered by the installed-tree digest, and
    after import the driver's runtime ``meta`` must equal the manifest's.
    """

    format: Literal["mcs-driver-manifest/1"] = Field(
        default="mcs-driver-manifest/1", description="Format identifier."
    )
    drivers: dict[str, DriverMeta] = Field(description="Entry point object -> its DriverMeta.")


class _Renamed:
    """Read attribute ``new`` of an object from its attribute ``old``."""

    __slots__ = ("_names", "_obj")

    def __init__(self, obj: object, **names: str) -> None:
        self._obj = obj
        self._names = names

    def __getattr__(self, name: str) -> Any:
        return getattr(self._obj, self._names.get(name, name))


with warnings.catch_warnings():
    # "schema" is the spec's field name; it shadows BaseModel.schema, pydantic v1's
    # deprecated spelling of model_json_schema.
    warnings.filterwarnings("ignore", message='Field name "schema"', category=UserWarning)

    class ToolParameter(_Model):
        """One named input of a tool, with an optional JSON Schema for its value."""

        name: str = Field(min_length=1, description="Argument name.")
        description: str = Field(description="What the argument means.")
        required: bool = Field(default=False, description="Whether a call must give it.")
        schema: dict[str, Any] | None = Field(  # type: ignore[assignment]
            default=None, description='JSON Schema of the value, e.g. {"type": "string"}.'
        )

        def json_schema(self) -> dict[str, Any]:
            """The value's JSON Schema with the description filled in."""
            schema = dict(self.schema or {})
            if self.description and "description" not in schema:
                schema["description"] = self.description
            return schema


class ToolAnnotations(_Model):
    """What a driver declares about a tool's effects: MCP's tool annotations, each a hint.

    A hint left ``None`` claims nothing (an MCP client then assumes MCP's default). Each is
    given by its name (``read_only_hint``) or as MCP spells it (``readOnlyHint``), which is
    also its JSON key, and must be a boolean.
    """

    model_config = ConfigDict(populate_by_name=True)

    read_only_hint: bool | None = Field(
        None, alias="readOnlyHint", strict=True, description="It does not modify anything."
    )
    destructive_hint: bool | None = Field(
        None, alias="destructiveHint", strict=True, description="It may delete or overwrite."
    )
    idempotent_hint: bool | None = Field(
        None, alias="idempotentHint", strict=True, description="Repeating a call does no more."
    )
    open_world_hint: bool | None = Field(
        None, alias="openWorldHint", strict=True, description="It reaches the web or other systems."
    )

    @property
    def claimed(self) -> dict[str, bool]:
        """The hints declared, by MCP's names: ``{"readOnlyHint": True}``."""
        return self.model_dump(by_alias=True, exclude_none=True)

    @classmethod
    def _fields_of(cls, obj: object) -> dict[str, Any]:
        # an object spells them as Python does (the mcp SDK's ToolAnnotations) or as MCP does
        values: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            for key in (name, field.alias or name):
                if hasattr(obj, key):
                    values[name] = getattr(obj, key)
                    break
        return values


class Tool(_Model):
    """A callable tool.

    At least one of ``title`` and ``description`` must be non-empty; when only ``title``
    is given, ``description`` is filled from it. ``annotations`` is optional: a driver that
    declares none claims nothing about the tool's effects.
    """

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": [key], "properties": {key: {"type": "string", "minLength": 1}}}
                for key in ("title", "description")
            ]
        }
    )

    name: str = Field(min_length=1, description="Machine identifier (operationId, MCP name).")
    title: str | None = Field(default=None, description="Short human-readable label.")
    description: str | None = Field(default=None, description="Text forwarded to the LLM.")
    parameters: Sequence[ToolParameter] = Field(default=(), description="The tool's inputs.")
    annotations: ToolAnnotations | None = Field(
        default=None, description="Hints about its effects (MCP's); none: nothing is claimed."
    )

    _tuples = field_validator("parameters")(_as_tuple)

    @model_validator(mode="before")
    @classmethod
    def _fill_description(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            title, description = data.get("title"), data.get("description")
            if not description and not title:
                raise ValueError(
                    f"tool {data.get('name')!r}: at least one of title or description "
                    "must be non-empty"
                )
            if not description:
                data = {**data, "description": title}
        return data

    @field_validator("parameters")
    @classmethod
    def _unique_parameters(cls, value: Sequence[ToolParameter]) -> Sequence[ToolParameter]:
        seen: set[str] = set()
        for parameter in value:
            if parameter.name in seen:
                raise ValueError(f"parameter {parameter.name!r} is declared twice")
            seen.add(parameter.name)
        return value

    @classmethod
    def _fields_of(cls, obj: object) -> dict[str, Any]:
        values = super()._fields_of(obj)
        values["parameters"] = tuple(
            ToolParameter.coerce(p) for p in values.get("parameters") or ()
        )
        if values.get("annotations") is not None:
            values["annotations"] = ToolAnnotations.coerce(values["annotations"])
        return values

    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of the tool's arguments object."""
        return {
            "type": "object",
            "properties": {p.name: p.json_schema() for p in self.parameters},
            "required": [p.name for p in self.parameters if p.required],
            "additionalProperties": False,
        }


class DriverResponse(_Model):
    """The self-contained outcome of one ``process_llm_response`` call.

    An empty response (no flags, no messages) means no call for this driver was found:
    the client treats the LLM output as a final answer, or passes it to the next driver.
    """

    tool_call_result: Any = Field(default=None, description="Raw tool output, if executed.")
    call_executed: bool = Field(default=False, description="A tool call ran successfully.")
    call_failed: bool = Field(
        default=False, description="A call was found but could not be parsed or executed."
    )
    call_detail: str | None = Field(default=None, description="Why the call failed.")
    retry_prompt: str | None = Field(default=None, description="Hint for the model's retry.")
    messages: list[dict[str, Any]] | None = Field(
        default=None, description="Conversation entries the client appends to its history."
    )

    @property
    def is_empty(self) -> bool:
        """Whether this is the pass-through response: no call detected for this driver."""
        return not (self.call_executed or self.call_failed) and self.messages is None


class DriverContext(_Model):
    """A system message without inlined tools, plus the tools in a provider's native format."""

    system_message: str = Field(description="Behavioural prompt, tools not inlined.")
    tools: Sequence[dict[str, Any]] = Field(
        default=(), description="Tools in native provider format (e.g. OpenAI function schema)."
    )

    _tuples = field_validator("tools")(_as_tuple)


_SCHEMA_MODELS: tuple[type[BaseModel], ...] = (
    Binding,
    TrustManifest,
    DriverMeta,
    DriverManifest,
    ToolParameter,
    ToolAnnotations,
    Tool,
    DriverResponse,
    DriverContext,
)


def contract_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of every contract type, keyed by file name (``DriverMeta.schema.json``)."""
    schemas: dict[str, dict[str, Any]] = {}
    for model in _SCHEMA_MODELS:
        name = f"{model.__name__}.schema.json"
        schema = model.model_json_schema()
        schemas[name] = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"urn:mcs:contract:{CONTRACT_VERSION}:{model.__name__}",
            **schema,
        }
    return schemas
