"""MCP's shapes as the contract's: a listed tool as a ``Tool`` (the hints its annotations
declare kept), a call's result as the value the orchestrator hands on (structured content
when there is some: a parent host asks its isolated child for that alone), an error as a
message says it; and the keys of the ``_meta`` entries a server writes and a client (a
parent host) reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcs_host.contract import Tool, ToolAnnotations, ToolParameter
from mcs_host.interfaces import ToolError

__all__ = ["LINK_KEY", "META_KEY", "RESULT_KEY"]  # and the client's helpers

META_KEY = "io.mcs-host/driver"
"""The key of a tool's ``_meta`` entry that says which driver it comes from and how that
driver was verified."""
RESULT_KEY = "io.mcs-host/result"
"""The key of a call result's ``_meta`` entry; ``"wrapped"``: the tool's result (a number, a
list, a boolean or null) is the ``result`` of the structured content."""
LINK_KEY = "io.mcs-host/link"
"""The key of a call's ``_meta`` entry by which a parent host asks for its result once and
bounded: ``{"max_result_mb": 16, "label": "csv"}`` (the driver's label, as the host mounts
it)."""


def megabytes(size: int | float) -> str:
    """``size`` bytes in MiB for a message: ``50``, ``16.5``, ``0.016``."""
    value = size / 2**20
    return (f"{value:.1f}" if value >= 1 else f"{value:.2g}").removesuffix(".0")


def as_tool(tool: Any) -> Tool:
    """An MCP tool as the contract's ``Tool``: each property a parameter with its schema
    (local ``$ref``s written out)."""
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    definitions = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    required = set(schema.get("required") or ())
    parameters = [
        ToolParameter(
            name=key,
            description=str(value.get("description") or key) if isinstance(value, dict) else key,
            required=key in required,
            schema=inlined(value, definitions) if isinstance(value, dict) else None,
        )
        for key, value in (schema.get("properties") or {}).items()
    ]
    hints = getattr(tool, "annotations", None)
    return Tool(
        name=tool.name,
        title=getattr(tool, "title", None) or getattr(hints, "title", None) or None,
        description=tool.description or tool.name,
        parameters=parameters,
        annotations=declared_hints(hints),
    )


def declared_hints(hints: Any) -> ToolAnnotations | None:
    """The hints an MCP tool's annotations declare, as the contract's; ``None`` when they
    declare none (its ``title`` is the tool's, not a hint). A hint that is not a boolean is
    not claimed."""
    if hints is None:
        return None
    declared = {
        name: value
        for name in ToolAnnotations.model_fields
        if isinstance(value := getattr(hints, name, None), bool)
    }
    return ToolAnnotations(**declared) if declared else None


def inlined(schema: Any, definitions: Mapping[str, Any], depth: int = 0) -> Any:
    """``schema`` with ``{"$ref": "#/$defs/X"}`` replaced by ``X`` (not past depth 32)."""
    if depth > 32:
        return {}
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
            target = definitions.get(ref.rsplit("/", 1)[1], {})
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return inlined({**target, **rest}, definitions, depth + 1)
        return {k: inlined(v, definitions, depth + 1) for k, v in schema.items()}
    if isinstance(schema, list):
        return [inlined(item, definitions, depth + 1) for item in schema]
    return schema


def wraps(schema: Any) -> bool:
    """Whether an output schema is the SDK's wrapping of a value that is not an object: an
    object whose one property, required, is ``result``."""
    return (
        isinstance(schema, dict)
        and schema.get("type") == "object"
        and list(schema.get("properties") or {}) == ["result"]
        and schema.get("required") == ["result"]
    )


def as_result(tool_name: str, result: Any, wrapped: bool = False) -> Any:
    """A tool result as the orchestrator hands it on: structured content when there is
    some (unwrapped when the server wrapped a value, as the SDK's servers and ours do),
    else the text; a result the server marks as an error raises."""
    texts = [getattr(block, "text", None) for block in result.content]
    text = "\n".join(t for t in texts if isinstance(t, str))
    if result.is_error:  # an mcs-host server says "<tool> failed: ...", as the caller will
        text = text.removeprefix(f"{tool_name} failed: ")
        raise ToolError(text or f"the MCP server reported an error for {tool_name!r}")
    structured = result.structured_content
    if structured is not None:
        ours = (result.meta or {}).get(RESULT_KEY) == "wrapped"
        if (ours or wrapped) and isinstance(structured, dict) and list(structured) == ["result"]:
            return structured["result"]  # a number, a list... as the tool returned it
        return structured
    if all(isinstance(t, str) for t in texts):
        return text
    return [
        block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content
    ]


def summary(exc: BaseException) -> str:
    """``Type: message`` of ``exc``, or of the first error inside an exception group (the
    SDK's task groups wrap what went wrong)."""
    depth = 0
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions and depth < 8:
        exc, depth = exc.exceptions[0], depth + 1
    return f"{type(exc).__name__}: {exc}"
