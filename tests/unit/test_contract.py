"""The MCS v0.6 contract types: validation, JSON round trips, the ABCs and mixins."""

from __future__ import annotations

import ast
import importlib
import json
from typing import Any

import pytest
from distbuild import ROOT
from pydantic import ValidationError

import mcs_host
from mcs_host import (
    CAPABILITY_MIXINS,
    CONTRACT_VERSION,
    Binding,
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
    ToolParameter,
    TrustManifest,
    UnknownToolError,
    implemented_capabilities,
    is_semver,
    supports_autostart,
    supports_healthcheck,
)

META = DriverMeta(
    id="0f7c1a52-7d7e-4a53-9a55-1b8f2d1d6a10",
    name="Example",
    version="1.2.3-rc.1+build.5",
    bindings=(Binding(capability="rest", adapter="http", spec_format="OpenAPI"),),
    target_llms=("*",),
    capabilities=("healthcheck", "tcs"),
    trust=TrustManifest(
        publisher="Example Org",
        source_repository="https://example.org/example/driver",
        signing_key_id="ed25519:3f2a",
    ),
)
TOOL = Tool(
    name="get_weather",
    title="Weather",
    parameters=(
        ToolParameter(
            name="city", description="City name", required=True, schema={"type": "string"}
        ),
        ToolParameter(
            name="unit", description="Unit", schema={"type": "string", "enum": ["C", "F"]}
        ),
    ),
)


def test_contract_version_is_the_spec_version() -> None:
    assert CONTRACT_VERSION == "0.6"


def test_tool_needs_a_title_or_a_description() -> None:
    with pytest.raises(
        ValidationError, match="tool 'nameless': at least one of title or description"
    ):
        Tool(name="nameless")
    with pytest.raises(ValidationError, match="at least one of title or description"):
        Tool(name="blank", title="", description="")


def test_tool_description_is_filled_from_title() -> None:
    assert TOOL.description == "Weather"
    assert Tool(name="t", title="Short", description="Long text").description == "Long text"
    assert Tool(name="t", description="Only this").title is None


def test_tool_parameters_are_unique_and_have_a_schema_of_their_own() -> None:
    with pytest.raises(ValidationError, match="parameter 'a' is declared twice"):
        Tool(
            name="t",
            title="T",
            parameters=[
                ToolParameter(name="a", description=""),
                ToolParameter(name="a", description=""),
            ],
        )
    assert TOOL.parameters[0].schema == {"type": "string"}
    assert TOOL.input_schema() == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["C", "F"], "description": "Unit"},
        },
        "required": ["city"],
        "additionalProperties": False,
    }


def test_meta_version_must_be_semver() -> None:
    with pytest.raises(ValidationError, match=r"'1\.0' is not a semantic version"):
        DriverMeta(id="x", name="x", version="1.0")
    for good in ("0.0.0", "1.2.3", "1.0.0-alpha.1", "2.0.0+sha.abc"):
        assert is_semver(good)
    for bad in ("01.0.0", "1.0", "v1.0.0", "1.0.0-", "1.0.0.post1"):
        assert not is_semver(bad)


def test_meta_rejects_bad_ids_urls_and_unknown_fields() -> None:
    with pytest.raises(ValidationError, match=r"id\n.*without whitespace"):
        DriverMeta(id="has space", name="x", version="1.0.0")
    with pytest.raises(ValidationError, match="not an absolute https, ssh or git URL"):
        TrustManifest(publisher="p", source_repository="example.org/repo")
    with pytest.raises(ValidationError, match=r"supported_llm\n.*Extra inputs are not permitted"):
        DriverMeta.model_validate({"id": "x", "name": "x", "version": "1.0.0", "supported_llm": []})


def test_models_are_frozen() -> None:
    with pytest.raises(ValidationError, match="frozen"):
        META.version = "9.9.9"  # type: ignore[misc]


@pytest.mark.parametrize(
    "value",
    [
        META,
        DriverMeta(id="minimal", name="Minimal", version="0.1.0"),
        TOOL,
        Binding(capability="csv", adapter="*", spec_format="Custom"),
        DriverResponse(
            tool_call_result={"rows": [1, 2.5, None, "x"]},
            call_executed=True,
            messages=[{"role": "tool", "content": "ok", "tool_call_id": "call_1"}],
        ),
        DriverResponse(call_failed=True, call_detail="bad", retry_prompt="try again"),
        DriverContext(system_message="Be brief.", tools=({"type": "function", "function": {}},)),
    ],
    ids=lambda v: type(v).__name__,
)
def test_models_round_trip_through_json(value: Any) -> None:
    text = value.model_dump_json()
    assert type(value).model_validate_json(text) == value
    assert type(value).model_validate(json.loads(text)) == value


def test_driver_response_default_is_the_empty_pass_through() -> None:
    empty = DriverResponse()
    assert empty.is_empty
    assert (empty.tool_call_result, empty.call_executed, empty.call_failed) == (None, False, False)
    assert (empty.call_detail, empty.retry_prompt, empty.messages) == (None, None, None)
    assert not DriverResponse(call_failed=True).is_empty


def test_abstract_classes_refuse_incomplete_drivers() -> None:
    class Half(MCSToolDriver):
        meta = META

        def list_tools(self) -> list[Tool]:
            return [TOOL]

    with pytest.raises(TypeError, match="execute_tool"):
        Half()  # type: ignore[abstract]

    class Whole(Half):
        def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
            return {"tool": tool_name, **arguments}

    assert Whole().execute_tool("get_weather", {"city": "Oslo"}) == {
        "tool": "get_weather",
        "city": "Oslo",
    }
    with pytest.raises(TypeError, match="process_llm_response"):
        type(
            "NoProcess",
            (MCSDriver,),
            {
                "get_function_description": lambda self, model_name=None: "",
                "get_driver_system_message": lambda self, model_name=None: "",
            },
        )()


def test_mixins_name_their_capability() -> None:
    assert dict(CAPABILITY_MIXINS) == {
        "healthcheck": SupportsHealthcheck,
        "autostart": SupportsAutostart,
        "driver_context": SupportsDriverContext,
        "tcs": ToolCallSignaling,
    }


def test_implemented_capabilities_by_subclass_and_by_methods() -> None:
    class Healthy(SupportsHealthcheck):
        def healthcheck(self) -> dict[str, Any]:
            return {"status": "OK"}

    class Signals:  # no subclassing, the methods are enough
        def might_be_tool_call(self, partial: str) -> bool:
            return partial.startswith("{")

        def is_complete_tool_call(self, text: str) -> bool:
            return text.endswith("}")

    assert implemented_capabilities(Healthy()) == {"healthcheck"}
    assert implemented_capabilities(Signals()) == {"tcs"}
    assert implemented_capabilities(object()) == frozenset()


class _Healthy(SupportsHealthcheck):
    def healthcheck(self) -> dict[str, Any]:
        return {"status": "OK"}


def test_capability_guards_answer_as_implemented_capabilities() -> None:
    class Starts:  # no subclassing: the method is enough
        def autostart(self, kwargs: dict[str, Any]) -> None:
            self.started = kwargs

    class NotCallable:
        autostart = "yes"
        healthcheck = None

    starts = Starts()
    if supports_autostart(starts):  # what the guard promises may be called
        starts.autostart({"port": 1})
    assert starts.started == {"port": 1}
    assert not supports_healthcheck(starts)
    assert not supports_autostart(NotCallable())
    assert not supports_healthcheck(NotCallable())
    assert supports_healthcheck(_Healthy())


def test_tool_errors_name_tool_and_argument() -> None:
    error = ToolArgumentError("read_file", "path", "does not exist")
    assert str(error) == "tool 'read_file', argument 'path': does not exist"
    assert isinstance(error, ValueError)
    unknown = UnknownToolError("nope", ["b", "a"])
    assert str(unknown) == "unknown tool 'nope'; known tools: a, b"
    assert isinstance(unknown, LookupError)


def test_coerce_accepts_instances_mappings_and_objects() -> None:
    assert DriverMeta.coerce(META) is META
    assert DriverMeta.coerce(META.model_dump()) == META

    class Plain:
        name = "plain"
        title = None
        description = "A plain object"
        parameters = ({"name": "q", "description": "query", "required": True},)

    assert Tool.coerce(Plain()) == Tool(
        name="plain",
        description="A plain object",
        parameters=(ToolParameter(name="q", description="query", required=True),),
    )
    with pytest.raises(
        ValueError, match="cannot convert object to DriverMeta: it has no attribute 'id'"
    ):
        DriverMeta.coerce(object())


def test_schema_check_notices_edited_missing_and_stray_files(tmp_path: Any) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "gen_schemas", ROOT / "scripts" / "gen_schemas.py"
    )
    assert spec is not None
    assert spec.loader is not None
    gen_schemas = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_schemas)
    for source in (ROOT / "mcs_host" / "schemas").glob("*.json"):
        (tmp_path / source.name).write_text(source.read_text())
    assert gen_schemas.stale(tmp_path) == []
    tool = tmp_path / "Tool.schema.json"
    tool.write_text(tool.read_text().replace('"minLength": 1', '"minLength": 2', 1))
    (tmp_path / "Binding.schema.json").unlink()
    (tmp_path / "Old.schema.json").write_text("{}")
    assert gen_schemas.stale(tmp_path) == [
        "Binding.schema.json",
        "Old.schema.json",
        "Tool.schema.json",
    ]


# the command line and the pytest plugin export nothing
_EXPORT_NOTHING = {"cli", "kit.pytest_plugin"}


def _stub_exports() -> list[tuple[str, str]]:
    """``(name, module)`` for every name the stub ``mcs_host/__init__.pyi`` re-exports."""
    tree = ast.parse((ROOT / "mcs_host" / "__init__.pyi").read_text(encoding="utf-8"))
    found = []
    for node in tree.body:
        assert isinstance(node, ast.ImportFrom | ast.Expr), ast.dump(node)
        if isinstance(node, ast.ImportFrom):
            assert node.level == 1, "the stub imports from its own submodules only"
            assert node.module
            for alias in node.names:
                assert alias.asname == alias.name, f"{alias.name} is not re-exported as itself"
                found.append((alias.name, node.module))
    return found


def test_the_export_map_is_the_stub_and_each_name_is_its_module_s() -> None:
    declared = _stub_exports()
    names = [name for name, _ in declared]
    assert len(names) == len(set(names)), "a name is declared twice in __init__.pyi"
    runtime = vars(mcs_host)["_EXPORTS"]
    assert runtime == dict(declared)
    assert vars(mcs_host)["__all__"] == names
    for name, module in declared:
        if name != "__version__":
            listed = importlib.import_module(f"mcs_host.{module}").__all__
            assert name in listed, f"{name} is exported but not in mcs_host.{module}.__all__"
    # a public module says what it exports (``__all__ = []`` for a pipeline stage used
    # internally), and all of it is exported: a new public name cannot be forgotten
    for path in sorted((ROOT / "mcs_host").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        module = ".".join(parts[1:])
        if any(part.startswith("_") for part in parts[1:]) or {parts[1], module} & _EXPORT_NOTHING:
            continue
        public = vars(importlib.import_module(".".join(parts))).get("__all__")
        assert public is not None, f"mcs_host.{module} has no __all__"
        for name in public:
            assert (name, module) in declared, f"mcs_host.{module}.{name} is not in __init__.pyi"
