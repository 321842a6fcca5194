"""The README's examples run as written."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from distbuild import ROOT

from mcs_host import MCSToolDriver, ToolArgumentError

README = (ROOT / "README.md").read_text("utf-8")


def blocks(section: str, language: str) -> list[str]:
    body = README.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", body, flags=re.DOTALL)


def test_the_driver_example_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (manifest,) = blocks("Writing a driver", "json")
    (source,) = [b for b in blocks("Writing a driver", "python") if "WeatherToolDriver" in b]
    package = tmp_path / "acme_weather"
    package.mkdir()
    (package / "mcs-driver.json").write_text(manifest)
    (package / "__init__.py").write_text(source)
    monkeypatch.syspath_prepend(tmp_path)
    module = importlib.import_module("acme_weather")
    try:
        driver: Any = module.WeatherToolDriver()
        assert isinstance(driver, MCSToolDriver)
        assert driver.meta.trust is not None
        assert driver.meta.trust.publisher == "ACME"
        (tool,) = driver.list_tools()
        assert tool.input_schema()["required"] == ["city"]
        assert driver.execute_tool("forecast", {"city": "Oslo", "days": 2})["days"] == 2
        with pytest.raises(ToolArgumentError, match="argument 'days'"):
            driver.execute_tool("forecast", {"city": "Oslo", "days": 9})
    finally:
        sys.modules.pop("acme_weather", None)


def test_the_python_api_examples_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("MCS_HOST_STATE_DIR", str(tmp_path))
    examples = blocks("Python API", "python")
    assert len(examples) == 5
    # load_drivers needs verified installs: tests/test_loading.py runs it in a venv; the
    # native loop needs a model: tests/test_runner.py runs it against a scripted server
    for source in (e for e in examples if "load_drivers(" not in e and "OpenAI()" not in e):
        exec(compile(source, "README.md", "exec"), {})  # noqa: S102
    out = capsys.readouterr().out
    # in this environment the plugins are editable installs: verified, and refused
    assert "csv rejected editable-install" in out
    assert "['list_directory', 'read_file', 'search_files', 'stat']" in out


def test_the_orchestrator_examples_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    consent_example, async_example, runner_example = blocks("The orchestrator", "python")
    exec(compile(consent_example, "README.md", "exec"), {})  # noqa: S102
    exec(compile(async_example, "README.md", "exec"), {})  # noqa: S102
    exec(compile(runner_example, "README.md", "exec"), {})  # noqa: S102
    assert capsys.readouterr().out.splitlines() == [
        "the model wants read_csv_head {'file': 'sales.csv', 'rows': 2}",
        "['date', 'region', 'product', 'units', 'unit_price']",
        "12:00",
        "final It is sunny.",
    ]


def test_every_command_is_in_the_command_table() -> None:
    from mcs_host.cli.app import app

    table = README.split("\n## Command line\n", 1)[1].split("\n### ", 1)[0]
    listed = set(re.findall(r"^\| `mcs-host ([a-z-]+)", table, flags=re.MULTILINE))
    commands = {command.name for command in app.registered_commands if not command.hidden}
    assert listed == commands


def test_every_command_help_names_its_arguments_with_placeholders() -> None:
    """``--help`` shows ``TOOL``, ``LABEL...``, ``KEYFILE``, never a parameter's Python name,
    and no default that is not the host's (``./registry.json`` is used only when named)."""
    from mcs_host.cli.app import app

    script = Path(sys.executable).parent / "mcs-host"
    for command in app.registered_commands:
        done = subprocess.run(
            [str(script), str(command.name), "--help"], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        usage = done.stdout.splitlines()[0]
        placeholders = re.findall(r"[\[ ]([A-Za-z_.]+)(?:\]|\.\.\.|$)", usage.split("[OPTIONS]")[1])
        assert all(p.isupper() for p in placeholders), f"{command.name}: {usage}"
        arguments = done.stdout.partition("Arguments:\n")[2].partition("\n\n")[0]
        for line in arguments.splitlines():
            if not line.startswith("  ") or line.startswith("   "):
                continue  # a wrapped help text, not an argument
            assert line.split()[0].rstrip(".").isupper(), f"{command.name}: {line}"
        assert "else ./registry.json, else" not in done.stdout


def test_the_exit_codes_are_the_same_in_the_readme_and_in_help() -> None:
    from mcs_host.cli.app import EXIT_CODES

    table = README.partition("| exit | meaning |\n|---|---|\n")[2].partition("\n\n")[0]
    rows = re.findall(r"^\| ([0-2]) \| (.+) \|$", table, flags=re.MULTILINE)
    assert rows == [(code, meaning) for code, meaning in EXIT_CODES]
    script = Path(sys.executable).parent / "mcs-host"
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=True)
    text = " ".join(done.stdout.split())
    for code, meaning in EXIT_CODES:
        assert f"{code} {meaning}" in text


def test_the_readme_command_line_tables_are_what_help_and_the_schemas_say() -> None:
    """The command and --json tables are generated (scripts/gen_cli_docs.py); each command's
    synopsis names exactly the options and placeholders its ``--help`` shows."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_cli_docs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    script = Path(sys.executable).parent / "mcs-host"
    block = README.split("<!-- begin: command table", 1)[1].split("<!-- end: command table")[0]
    rows = re.findall(r"^\| `mcs-host ([a-z-]+)(.*?)` \| ", block, flags=re.MULTILINE)
    from mcs_host.cli.app import COMMANDS, HIDDEN

    assert len(rows) == len([name for name, _, _ in COMMANDS if name not in HIDDEN])
    for name, synopsis in rows:
        helped = subprocess.run(
            [str(script), name, "--help"], capture_output=True, text=True, check=True
        ).stdout
        options = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", synopsis))
        listed = helped.partition("\nOptions:\n")[2]
        shown = set(
            re.findall(r"^  (?:-[a-zA-Z], )?(--[a-z][a-z-]*)", listed, flags=re.MULTILINE)
        ) - {"--help"}
        assert options == shown, f"{name}: README {sorted(options)}, --help {sorted(shown)}"
        for placeholder in re.findall(r"\b[A-Z][A-Z.=_]*[A-Z]\b", synopsis):
            assert placeholder in helped, f"{name}: {placeholder} is not in its --help"


def test_the_reason_codes_table_is_the_table_the_command_line_prints_fixes_from() -> None:
    """Generated from ``mcs_host/_reasons.py`` (``scripts/gen_cli_docs.py --only "reason
    codes"``): a code, meaning or fix changed there and not here fails."""
    from mcs_host._reasons import REASONS

    spec = importlib.util.spec_from_file_location(
        "gen_cli_docs", ROOT / "scripts" / "gen_cli_docs.py"
    )
    assert spec is not None
    assert spec.loader is not None
    gen_cli_docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_cli_docs)
    section = README.split("\n### Reason codes\n", 1)[1].split("\n### ", 1)[0]
    block = section.split("<!-- begin: reason codes (scripts/gen_cli_docs.py) -->\n", 1)[1]
    table = block.split("\n<!-- end: reason codes -->", 1)[0]
    assert table == gen_cli_docs.reasons_table()
    rows = table.splitlines()[2:]
    assert [row.split(" | ", 1)[0] for row in rows] == [f"| `{code}`" for code in REASONS]
    for row, reason in zip(rows, REASONS.values(), strict=True):
        assert f" | {reason.meaning} | {reason.fix or '-'}" in row.replace("\\|", "|")
