"""Objects of the published reference SDK (mcs-driver-core) convert into the host's types."""

from __future__ import annotations

import pytest
from mcs.driver import core
from pydantic import ValidationError

from mcs_host import Binding, DriverMeta, DriverResponse, Tool, ToolParameter


def test_reference_meta_converts_with_supported_llms_as_target_llms() -> None:
    reference = core.DriverMeta(
        id="8f3c7a2e-9d4b-4f1a-b5e6-1c8a9f2d3e7b",
        name="CSV ToolDriver",
        version="0.1.0",
        bindings=(core.DriverBinding(capability="csv", adapter="*", spec_format="Custom"),),
        supported_llms=None,
        capabilities=("orchestratable",),
    )
    meta = DriverMeta.coerce(reference)
    assert meta == DriverMeta(
        id="8f3c7a2e-9d4b-4f1a-b5e6-1c8a9f2d3e7b",
        name="CSV ToolDriver",
        version="0.1.0",
        bindings=(Binding(capability="csv", adapter="*", spec_format="Custom"),),
        target_llms=None,
        capabilities=("orchestratable",),
    )
    standalone = DriverMeta.coerce(
        core.DriverMeta(
            id="x", name="x", version="1.0.0", bindings=(), supported_llms=("*",), capabilities=()
        )
    )
    assert standalone.target_llms == ("*",)
    assert standalone.trust is None


def test_reference_meta_that_breaks_the_contract_is_refused_by_field() -> None:
    reference = core.DriverMeta(
        id="x", name="x", version="1.0", bindings=(), supported_llms=None, capabilities=()
    )
    with pytest.raises(ValidationError, match=r"version\n.*'1\.0' is not a semantic version"):
        DriverMeta.coerce(reference)


def test_reference_tools_and_parameters_convert() -> None:
    reference = core.Tool(
        name="read_csv_head",
        title="Head",
        parameters=[
            core.ToolParameter("path", "Relative path", required=True, schema={"type": "string"}),
            core.ToolParameter("limit", "Rows", schema={"type": "integer", "default": 5}),
        ],
    )
    tool = Tool.coerce(reference)
    assert tool == Tool(
        name="read_csv_head",
        title="Head",
        description="Head",
        parameters=(
            ToolParameter(
                name="path", description="Relative path", required=True, schema={"type": "string"}
            ),
            ToolParameter(
                name="limit", description="Rows", schema={"type": "integer", "default": 5}
            ),
        ),
    )


def test_reference_response_converts() -> None:
    reference = core.DriverResponse(
        tool_call_result='{"ok": true}',
        call_executed=True,
        messages=[{"role": "assistant", "content": "x"}],
    )
    response = DriverResponse.coerce(reference)
    assert response.tool_call_result == '{"ok": true}'
    assert response.call_executed
    assert response.messages == [{"role": "assistant", "content": "x"}]
    assert DriverResponse.coerce(core.DriverResponse()).is_empty
