"""Tools rendered for each model family, from prompt texts a project can override."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sample_drivers import Calculator, Speaker

from mcs_host import Orchestrator, Prompts, Tool


def stack(**options: object) -> Orchestrator:
    return Orchestrator({"calc": Calculator(), "speaker": Speaker()}, **options)  # type: ignore[arg-type]


def test_json_by_default() -> None:
    described = json.loads(stack().get_function_description())
    assert [t["name"] for t in described] == ["add", "echo"]
    assert described[1]["parameters"]["properties"]["loud"] == {
        "type": "boolean",
        "default": False,
        "description": "Say it in capitals.",
    }


def test_xml_for_claude() -> None:
    text = stack().get_function_description("claude-sonnet-4-5")
    assert '<tool name="add">' in text
    assert '<parameter name="a" type="number" required="true">First addend.</parameter>' in text
    assert '<parameter name="loud" type="boolean" required="false" default="false">' in text
    system = stack().get_driver_system_message("claude-sonnet-4-5")
    assert system.count("<tools>") == 1


def test_compact_text_for_small_models() -> None:
    text = stack().get_function_description("llama3.2:1b")
    assert text.splitlines() == [
        "add(a: number, b: number) - Add two numbers.",
        "echo(text: string, loud?: boolean, to?: string|null) - Say a text back.",
    ]


def test_a_blank_description_renders_without_a_summary() -> None:
    class Blank(Calculator):
        def list_tools(self) -> list[Tool]:
            return [Tool(name="ping", description="   ")]

    text = Orchestrator({"blank": Blank()}).get_function_description("llama3.2:1b")
    assert text.splitlines() == ["ping()"]


def test_a_project_overrides_the_prompt_texts(tmp_path: Path) -> None:
    override = tmp_path / "prompts.toml"
    override.write_text(
        '[formats]\nxml = ["my-model*"]\n\n[system]\njson = "TOOLS:\\n{tools}\\nEND"\n'
    )
    orchestrator = stack(prompts=str(override))
    assert orchestrator.get_driver_system_message("gpt-4.1").startswith("TOOLS:\n[")
    assert orchestrator.get_driver_system_message("gpt-4.1").endswith("END")
    assert "<tool name=" in orchestrator.get_function_description("my-model-7b")
    assert "<tool name=" not in orchestrator.get_function_description("claude-3")  # replaced
    assert Prompts.load(override).source == str(override)
    (tmp_path / "bad.toml").write_text("[nonsense]\nx = 1\n")
    with pytest.raises(ValueError, match=r"bad\.toml: unknown table \[nonsense\]"):
        Prompts.load(tmp_path / "bad.toml")
