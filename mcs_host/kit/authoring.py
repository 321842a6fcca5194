"""Helpers for driver authors: one pydantic model per tool gives its schema and its checks.

Declare a tool's arguments once as a pydantic model; :func:`tool_from_model` turns it into a
:class:`~mcs_host.contract.Tool` whose parameters carry the fields' JSON Schemas, and
:func:`parse_arguments` validates a call's arguments against the same model, raising
:class:`~mcs_host.interfaces.ToolArgumentError` that names the tool and the argument.
"""

from __future__ import annotations

import copy
import importlib.resources
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from mcs_host.contract import DriverManifest, DriverMeta, Tool, ToolAnnotations, ToolParameter
from mcs_host.interfaces import MANIFEST_FILE, ContractError, ToolArgumentError

__all__ = ["manifest_meta", "parse_arguments", "tool_from_model"]

_M = TypeVar("_M", bound=BaseModel)
_MESSAGES = {"extra_forbidden": "unexpected argument", "missing": "required argument is missing"}


def tool_from_model(
    name: str,
    model: type[BaseModel],
    *,
    title: str | None = None,
    description: str | None = None,
    annotations: ToolAnnotations | Mapping[str, bool] | None = None,
) -> Tool:
    """A :class:`Tool` named ``name`` whose parameters are the fields of ``model``.

    Each field's description becomes the parameter's description; the rest of its JSON
    Schema (type, bounds, enum, default) becomes the parameter's ``schema``. ``annotations``
    are the hints the driver declares about the tool's effects
    (:class:`~mcs_host.contract.ToolAnnotations`, or a mapping such as
    ``{"readOnlyHint": True}``); without them nothing is claimed.
    """
    schema = model.model_json_schema()
    definitions = schema.get("$defs", {})
    required = set(schema.get("required", ()))
    parameters = []
    for field_name, field_schema in schema.get("properties", {}).items():
        resolved = _inline(field_schema, definitions)
        resolved.pop("title", None)
        parameters.append(
            ToolParameter(
                name=field_name,
                description=resolved.pop("description", ""),
                required=field_name in required,
                schema=resolved,
            )
        )
    hints = None if annotations is None else ToolAnnotations.coerce(annotations)
    return Tool(
        name=name,
        title=title,
        description=description,
        parameters=tuple(parameters),
        annotations=hints,
    )


def parse_arguments(tool_name: str, model: type[_M], arguments: Mapping[str, Any]) -> _M:
    """Validate ``arguments`` of a call to ``tool_name`` against ``model``.

    Raises :class:`ToolArgumentError` naming the first argument at fault.
    """
    if not isinstance(arguments, Mapping):
        raise ToolArgumentError(tool_name, "*", f"arguments must be an object, not {arguments!r}")
    try:
        return model.model_validate(dict(arguments))
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "*"
        message = _MESSAGES.get(error["type"], error["msg"])
        extra = len(exc.errors()) - 1
        if extra:
            message += f" (and {extra} more problem{'s' if extra > 1 else ''})"
        raise ToolArgumentError(tool_name, where, message) from None


def manifest_meta(package: str | None, name: str) -> DriverMeta:
    """The meta of driver ``name`` in the ``mcs-driver.json`` that ``package`` ships.

    A driver that takes its ``meta`` from here always agrees with the manifest the host
    reads before importing it.
    """
    if not package:
        raise ContractError("manifest_meta needs the driver's package, e.g. __package__")
    data = importlib.resources.files(package).joinpath(MANIFEST_FILE).read_bytes()
    manifest = DriverManifest.model_validate_json(data)
    try:
        return manifest.drivers[name]
    except KeyError:
        raise ContractError(f"{package}/{MANIFEST_FILE} declares no driver {name!r}") from None


def _inline(schema: Any, definitions: Mapping[str, Any]) -> Any:
    """``schema`` with every local ``$ref`` replaced by a copy of its definition."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = copy.deepcopy(definitions[ref.removeprefix("#/$defs/")])
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return _inline({**target, **rest}, definitions)
        return {key: _inline(value, definitions) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_inline(item, definitions) for item in schema]
    return schema
