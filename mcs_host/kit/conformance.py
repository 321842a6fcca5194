"""Conformance: does a driver keep the MCS contract the way a host relies on?

:func:`check_driver` instantiates a driver and checks its meta (a valid ``DriverMeta`` with a
SemVer version and a trust manifest, equal to its ``mcs-driver.json``), its tools (valid,
uniquely named as provider APIs accept, every parameter described and typed by a JSON Schema,
annotations that are booleans and do not contradict themselves), its capability claims, how
``execute_tool`` fails (an unknown tool or a missing argument must raise, preferably a
:class:`~mcs_host.interfaces.ToolError`), and that results are JSON as a host sends it (no
NaN or Infinity). It runs
the driver's code: use it on your own driver, in its tests (the ``mcs_conformance`` pytest
fixture) or with ``mcs-host check``.
"""

from __future__ import annotations

import importlib.resources
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from mcs_host.contract import DriverManifest, DriverMeta, DriverResponse, Tool
from mcs_host.interfaces import (
    MANIFEST_FILE,
    StandaloneDriverLike,
    ToolDriverLike,
    ToolError,
    UnknownToolError,
    is_standalone_driver,
    is_tool_driver,
)
from mcs_host.loading.compat import capability_problems

__all__ = ["ConformanceResult", "check_driver"]

_PROVIDER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SAMPLES: Mapping[str, Any] = {
    "string": "example",
    "integer": 1,
    "number": 1.0,
    "boolean": True,
    "array": [],
    "object": {},
}


@dataclass(frozen=True, slots=True)
class ConformanceResult:
    """One finding: ``error`` breaks the contract, ``warning`` weakens it, ``info`` informs."""

    level: Literal["error", "warning", "info"]
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.level.upper()} {self.code}: {self.message}"


def check_driver(
    driver: object, settings: Mapping[str, Any] | None = None
) -> tuple[ConformanceResult, ...]:
    """Check ``driver`` (an instance, a class or a factory; ``settings`` are its constructor's
    keywords). Errors first."""
    out: list[ConformanceResult] = []
    instance = driver
    if isinstance(driver, type) or (callable(driver) and not _is_driver(driver)):
        try:
            instance = driver(**dict(settings or {}))
        except (Exception, SystemExit) as exc:  # sys.exit() in a constructor is its failure
            return (ConformanceResult("error", "constructor", f"raised {_named(exc)}"),)
    if not _is_driver(instance):
        message = f"{type(instance).__name__} has neither list_tools/execute_tool nor "
        return (ConformanceResult("error", "not-a-driver", message + "process_llm_response"),)
    meta = _meta(instance, driver, out)
    if is_tool_driver(instance):
        _tools(instance, out)
    elif is_standalone_driver(instance):
        _standalone(instance, out)
    if meta is not None:
        for problem in capability_problems(instance, meta, ()):
            out.append(ConformanceResult("error", problem.code, problem.message))
    order = {"error": 0, "warning": 1, "info": 2}
    return tuple(sorted(out, key=lambda r: order[r.level]))


def _is_driver(obj: object) -> bool:
    return is_tool_driver(obj) or is_standalone_driver(obj)


def _meta(instance: object, declared: object, out: list[ConformanceResult]) -> DriverMeta | None:
    try:
        meta = DriverMeta.coerce(getattr(instance, "meta", None) or {})
    except (ValueError, ValidationError) as exc:
        out.append(ConformanceResult("error", "invalid-meta", str(exc)))
        return None
    except (Exception, SystemExit) as exc:  # a meta property that raises
        out.append(ConformanceResult("error", "invalid-meta", f"raised {_named(exc)}"))
        return None
    if meta.trust is None:
        out.append(
            ConformanceResult(
                "warning",
                "no-trust-manifest",
                "meta.trust is empty: say who publishes it and where its source lives",
            )
        )
    cls = declared if isinstance(declared, type) else type(instance)
    package = (cls.__module__ or "").rpartition(".")[0] or cls.__module__
    try:
        manifest = _manifest(cls.__module__, package)
    except ValueError as exc:
        out.append(ConformanceResult("error", "manifest", str(exc)))
        return meta
    if manifest is None:
        out.append(
            ConformanceResult(
                "warning",
                "no-manifest",
                f"{package} ships no {MANIFEST_FILE}: the host cannot read this driver's meta "
                "and trust manifest before importing it",
            )
        )
    elif cls.__name__ not in manifest.drivers:
        out.append(
            ConformanceResult("error", "manifest", f"{MANIFEST_FILE} has no entry {cls.__name__!r}")
        )
    elif manifest.drivers[cls.__name__] != meta:
        out.append(
            ConformanceResult(
                "error",
                "manifest-mismatch",
                f"meta differs from the {cls.__name__!r} entry of {MANIFEST_FILE}",
            )
        )
    return meta


def _manifest(module: str, package: str) -> DriverManifest | None:
    for owner in dict.fromkeys((module, package)):
        try:
            data = importlib.resources.files(owner).joinpath(MANIFEST_FILE).read_bytes()
        except (FileNotFoundError, ModuleNotFoundError, TypeError, NotADirectoryError):
            continue
        try:
            return DriverManifest.model_validate_json(data)
        except ValidationError as exc:
            raise ValueError(f"{owner}/{MANIFEST_FILE} is not a valid manifest: {exc}") from None
    return None


def _named(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _tools(driver: ToolDriverLike, out: list[ConformanceResult]) -> None:
    try:
        listed = list(driver.list_tools())
    except (Exception, SystemExit) as exc:
        out.append(
            ConformanceResult(
                "error", "list-tools", f"list_tools raised {type(exc).__name__}: {exc}"
            )
        )
        return
    if not listed:
        out.append(ConformanceResult("warning", "no-tools", "list_tools returned no tools"))
    tools: list[Tool] = []
    for index, item in enumerate(listed):
        try:
            tools.append(Tool.coerce(item))
        except (ValueError, ValidationError) as exc:
            out.append(ConformanceResult("error", "invalid-tool", f"tool {index}: {exc}"))
    names = [t.name for t in tools]
    for name in sorted({n for n in names if names.count(n) > 1}):
        out.append(ConformanceResult("error", "duplicate-tool", f"{name!r} is listed twice"))
    for tool in tools:
        _tool(tool, out)
    _errors(driver, tools, out)
    for tool in tools:
        _sample_call(driver, tool, out)


def _tool(tool: Tool, out: list[ConformanceResult]) -> None:
    hints = tool.annotations
    if hints is not None and hints.read_only_hint and hints.destructive_hint:
        out.append(
            ConformanceResult(
                "warning",
                "contradictory-annotations",
                f"tool {tool.name!r} declares readOnlyHint and destructiveHint both true: a "
                "read-only tool destroys nothing; set destructiveHint false or drop readOnlyHint",
            )
        )
    if not _PROVIDER_NAME.match(tool.name):
        out.append(
            ConformanceResult(
                "warning",
                "tool-name",
                f"{tool.name!r} is not [A-Za-z0-9_-]{{1,64}}: hosts must rename it for "
                "provider APIs",
            )
        )
    for parameter in tool.parameters:
        where = f"tool {tool.name!r}, parameter {parameter.name!r}"
        if not parameter.description:
            out.append(
                ConformanceResult("warning", "undescribed-parameter", f"{where} has no description")
            )
        schema = parameter.schema
        if not schema or not isinstance(schema, Mapping):
            out.append(ConformanceResult("error", "no-schema", f"{where} has no JSON Schema"))
        elif not ({"type", "enum", "const", "anyOf", "oneOf", "$ref"} & set(schema)):
            out.append(
                ConformanceResult("error", "untyped-schema", f"{where}: its schema gives no type")
            )
        try:
            json.dumps(schema, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            out.append(
                ConformanceResult("error", "schema-not-json", f"{where}: its schema is not JSON")
            )


def _errors(driver: ToolDriverLike, tools: list[Tool], out: list[ConformanceResult]) -> None:
    """An unknown tool and a missing required argument must raise."""
    unknown = "no-such-tool-" + "x" * 8
    try:
        result = driver.execute_tool(unknown, {})
    except UnknownToolError:
        pass
    except (Exception, SystemExit) as exc:
        out.append(
            ConformanceResult(
                "warning",
                "unknown-tool-error",
                f"an unknown tool raised {type(exc).__name__}; raise UnknownToolError, so hosts "
                "can tell the model which tools exist",
            )
        )
    else:
        out.append(
            ConformanceResult(
                "error",
                "unknown-tool-result",
                f"execute_tool returned {result!r} for a tool it does not have",
            )
        )
    for tool in tools:
        required = [p.name for p in tool.parameters if p.required]
        if not required:
            continue
        try:
            result = driver.execute_tool(tool.name, {})
        except ToolError:
            continue
        except (Exception, SystemExit) as exc:
            out.append(
                ConformanceResult(
                    "warning",
                    "argument-error",
                    f"tool {tool.name!r} without its required {required[0]!r} raised "
                    f"{type(exc).__name__}; raise ToolArgumentError naming the argument",
                )
            )
            continue
        out.append(
            ConformanceResult(
                "error",
                "missing-argument-result",
                f"tool {tool.name!r} returned {result!r} without its required {required[0]!r}",
            )
        )


def _sample_call(driver: ToolDriverLike, tool: Tool, out: list[ConformanceResult]) -> None:
    """Call the tool with arguments made from its schema; a result must be JSON."""
    arguments = {}
    for parameter in tool.parameters:
        schema = parameter.schema or {}
        if "default" in schema:
            continue
        if schema.get("enum"):
            arguments[parameter.name] = schema["enum"][0]
        elif parameter.required:
            kind = schema.get("type")
            arguments[parameter.name] = _SAMPLES.get(
                kind if isinstance(kind, str) else "string", "example"
            )
    try:
        result = driver.execute_tool(tool.name, arguments)
    except ToolError as exc:
        out.append(
            ConformanceResult(
                "info",
                "sample-refused",
                f"tool {tool.name!r} refused sample arguments {arguments}: {exc}",
            )
        )
        return
    except (Exception, SystemExit) as exc:
        out.append(
            ConformanceResult(
                "warning",
                "sample-raised",
                f"tool {tool.name!r} with sample arguments {arguments} raised "
                f"{type(exc).__name__}: {exc}; raise ToolError for calls it cannot carry out",
            )
        )
        return
    try:
        json.dumps(result, allow_nan=False)  # as JSON is sent: no NaN, no Infinity
    except (TypeError, ValueError, RecursionError) as exc:
        out.append(
            ConformanceResult(
                "error",
                "result-not-json",
                f"tool {tool.name!r} returned a result that is not JSON: {_not_json(exc, result)}",
            )
        )


def _not_json(exc: BaseException, value: object) -> str:
    """Why ``value`` is not JSON, from what encoding it raised."""
    text = str(exc)
    if text.startswith("Out of range float values"):
        found = _non_finite(value)
        number = "a NaN or an infinity" if found is None else f"the number {found}"
        return f"it holds {number}, which JSON has none of (return null or a string)"
    return text or type(exc).__name__


def _non_finite(value: object) -> float | None:
    """The first NaN or infinity in ``value`` (lists, tuples, dicts' values), depth first."""
    stack, seen = [value], set()
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return item
        if id(item) in seen:  # a container that holds itself
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
    return None


def _standalone(driver: StandaloneDriverLike, out: list[ConformanceResult]) -> None:
    for method in ("get_function_description", "get_driver_system_message"):
        try:
            if not isinstance(getattr(driver, method)(None), str):
                out.append(ConformanceResult("error", method, f"{method} did not return text"))
        except (Exception, SystemExit) as exc:
            out.append(
                ConformanceResult("error", method, f"{method} raised {type(exc).__name__}: {exc}")
            )
    try:
        response = DriverResponse.coerce(driver.process_llm_response("Just an answer, no call."))
    except (Exception, SystemExit) as exc:
        out.append(
            ConformanceResult(
                "error", "process", f"process_llm_response raised {type(exc).__name__}: {exc}"
            )
        )
        return
    if not response.is_empty:
        out.append(
            ConformanceResult(
                "error", "pass-through", "a plain answer must give the empty DriverResponse"
            )
        )
