"""Small working drivers for in-process tests, built the way a driver author builds one."""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mcs_host import (
    DriverMeta,
    DriverResponse,
    MCSDriver,
    MCSToolDriver,
    SupportsHealthcheck,
    Tool,
    UnknownToolError,
)
from mcs_host.kit import parse_arguments, tool_from_model


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AddArgs(_Args):
    a: float = Field(description="First addend.")
    b: float = Field(description="Second addend.")


class EchoArgs(_Args):
    text: str = Field(description="What to echo.")


class Calculator(MCSToolDriver):
    """Adds numbers; counts its calls so tests can see what ran."""

    meta = DriverMeta(id="calc-0001", name="Calculator", version="1.0.0")

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def list_tools(self) -> list[Tool]:
        return [tool_from_model("add", AddArgs, description="Add two numbers.")]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        self.calls.append((tool_name, arguments))
        if tool_name != "add":
            raise UnknownToolError(tool_name, ["add"])
        args = parse_arguments(tool_name, AddArgs, arguments)
        return args.a + args.b


class Echo(MCSToolDriver):
    """Echoes text; its tool is called ``echo``, and it also has an ``add`` to collide with."""

    meta = DriverMeta(id="echo-0001", name="Echo", version="2.1.0")

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix

    def list_tools(self) -> list[Tool]:
        return [
            tool_from_model("echo", EchoArgs, description="Echo a text."),
            tool_from_model("add", AddArgs, description="Concatenate two numbers as text."),
        ]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        if tool_name == "echo":
            return self.prefix + parse_arguments(tool_name, EchoArgs, arguments).text
        if tool_name == "add":
            args = parse_arguments(tool_name, AddArgs, arguments)
            return f"{args.a}{args.b}"
        raise UnknownToolError(tool_name, ["echo", "add"])


class Greeter(MCSDriver):
    """A standalone MCSDriver (no tools): answers ``greet:<name>`` lines itself."""

    meta = DriverMeta(id="greet-0001", name="Greeter", version="1.0.0", target_llms=("*",))

    def get_function_description(self, model_name: str | None = None) -> str:
        return "greet:<name> greets someone"

    def get_driver_system_message(self, model_name: str | None = None) -> str:
        return "To greet, answer greet:<name>."

    def process_llm_response(
        self, llm_response: str | dict[str, Any], streaming: bool = False
    ) -> DriverResponse:
        if isinstance(llm_response, str) and llm_response.startswith("greet:"):
            name = llm_response.removeprefix("greet:")
            return DriverResponse(
                tool_call_result=f"hello {name}",
                call_executed=True,
                messages=[{"role": "assistant", "content": llm_response}],
            )
        return DriverResponse()


class Healthy(Calculator, SupportsHealthcheck):
    meta = DriverMeta(
        id="healthy-0001", name="Healthy", version="1.0.0", capabilities=("healthcheck",)
    )

    def __init__(self, status: str = "OK") -> None:
        super().__init__()
        self.status = status

    def healthcheck(self) -> dict[str, Any]:
        return {"status": self.status, "detail": "checked"}


class FalseClaim(Calculator):
    """Declares ``healthcheck`` but has no healthcheck()."""

    meta = DriverMeta(id="liar-0001", name="Liar", version="1.0.0", capabilities=("healthcheck",))


class BrokenConstructor(Calculator):
    def __init__(self) -> None:
        raise RuntimeError("cannot reach the backend")


class BrokenTools(Calculator):
    def list_tools(self) -> list[Tool]:
        raise ConnectionError("spec server is down")


class HangingTools(Calculator):
    """list_tools waits until ``release`` is set (the test sets it when done)."""

    release = threading.Event()

    def list_tools(self) -> list[Tool]:
        self.release.wait(60)
        return super().list_tools()


class InvalidTools(Calculator):
    def list_tools(self) -> list[Any]:
        return [{"name": "nameless-description"}]


class SpeakArgs(_Args):
    text: str = Field(description="What to say.")
    loud: bool = Field(False, description="Say it in capitals.")
    to: str | None = Field(None, description="Whom to say it to.")


class Speaker(MCSToolDriver):
    """Has one tool, ``echo``, with optional arguments of several types."""

    meta = DriverMeta(id="speak-0001", name="Speaker", version="1.0.0")

    def list_tools(self) -> list[Tool]:
        return [tool_from_model("echo", SpeakArgs, description="Say a text back.")]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        if tool_name != "echo":
            raise UnknownToolError(tool_name, ["echo"])
        args = parse_arguments(tool_name, SpeakArgs, arguments)
        text = args.text.upper() if args.loud else args.text
        return f"{args.to}: {text}" if args.to else text


GATED_SERVER = """\
import sys

from mcp.server.mcpserver import MCPServer

app = MCPServer("gated")


@app.tool()
def wipe(path: str) -> str:
    \"\"\"Wipe a path.\"\"\"
    with open(sys.argv[1], "a") as marker:
        marker.write(f"wiped {path}\\n")
    return "wiped"


if __name__ == "__main__":
    app.run()
"""
"""An MCP server script (the SDK's ``MCPServer``) whose tool ``wipe`` appends to the marker
file named by its first argument: what a consent-gated call must not reach unapproved."""
