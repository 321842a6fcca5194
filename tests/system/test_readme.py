"""The README: one screen, every link leads somewhere, every command it shows exists with the
options it gives; and the command line's help, whose reference pages docs/reference/ holds."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from distbuild import ROOT

README = (ROOT / "README.md").read_text("utf-8")
REFERENCE = ROOT / "docs" / "reference"
MCS_HOST = Path(sys.executable).parent / "mcs-host"


def test_the_readme_is_one_screen_with_the_two_commands() -> None:
    assert len(README.splitlines()) <= 150
    assert "python3.11 scripts/demo.py" in README
    assert "python3.11 scripts/test.py" in README
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("exec python3.11 scripts/test.py")


def test_every_relative_link_of_the_readme_leads_to_a_file() -> None:
    links = re.findall(r"\]\(([^)#]+?)(?:#[^)]*)?\)", README)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert local
    for link in local:
        assert (ROOT / link).exists(), link


def test_every_command_the_readme_shows_exists_with_the_options_it_gives() -> None:
    from mcs_host.cli.app import COMMANDS

    names = {name for name, _, _ in COMMANDS}
    blocks = re.findall(r"```(?:sh|console)\n(.*?)```", README, flags=re.DOTALL)
    lines = [line.split(" #")[0] for block in blocks for line in block.splitlines()]
    lines += re.findall(r"`(mcs-host [^`\n]*)`", README)
    shown = 0
    for line in lines:
        for match in re.finditer(r"(?:^|[\s(])mcs-host ([a-z-]+)([^;|]*)", line):
            name = match.group(1)
            assert name in names, f"the README shows mcs-host {name}, which is no command"
            helped = subprocess.run(
                [str(MCS_HOST), name, "--help"], capture_output=True, text=True, check=True
            ).stdout
            for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", match.group(2)):
                assert option in helped, f"mcs-host {name} has no {option}"
            shown += 1
    assert shown >= 8


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


def test_the_generated_reference_pages_are_what_help_the_schemas_and_the_reasons_say() -> None:
    """docs/reference/cli.md, reason-codes.md and python-api.md are generated
    (scripts/gen_cli_docs.py): a command, option, help text, reason or public name changed
    and not regenerated fails."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_cli_docs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_command_and_each_of_its_options_is_in_the_cli_reference() -> None:
    from mcs_host.cli.app import COMMANDS, HIDDEN

    page = (REFERENCE / "cli.md").read_text("utf-8")
    table = page.split("| command | what it does |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `mcs-host ([a-z-]+)(.*?)` \| ", table, flags=re.MULTILINE)
    assert [name for name, _ in rows] == [name for name, _, _ in COMMANDS if name not in HIDDEN]
    for name, synopsis in rows:
        helped = subprocess.run(
            [str(MCS_HOST), name, "--help"], capture_output=True, text=True, check=True
        ).stdout
        options = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", synopsis))
        listed = helped.partition("\nOptions:\n")[2]
        shown = set(
            re.findall(r"^  (?:-[a-zA-Z], )?(--[a-z][a-z-]*)", listed, flags=re.MULTILINE)
        ) - {"--help"}
        assert options == shown, f"{name}: cli.md {sorted(options)}, --help {sorted(shown)}"
        for placeholder in re.findall(r"\b[A-Z][A-Z.=_]*[A-Z]\b", synopsis):
            assert placeholder in helped, f"{name}: {placeholder} is not in its --help"


def test_the_exit_codes_are_the_same_in_the_reference_and_in_help() -> None:
    from mcs_host.cli.app import EXIT_CODES

    for page in ("exit-codes.md", "cli.md"):
        text = (REFERENCE / page).read_text("utf-8")
        table = text.partition("| exit | meaning |\n|---|---|\n")[2].partition("\n\n")[0]
        rows = re.findall(r"^\| ([0-2]) \| (.+) \|$", table, flags=re.MULTILINE)
        assert rows == [(code, meaning) for code, meaning in EXIT_CODES], page
    done = subprocess.run([str(MCS_HOST), "--help"], capture_output=True, text=True, check=True)
    text = " ".join(done.stdout.split())
    for code, meaning in EXIT_CODES:
        assert f"{code} {meaning}" in text


def test_the_reason_codes_page_is_the_table_the_command_line_prints_fixes_from() -> None:
    from mcs_host._reasons import REASONS

    page = (REFERENCE / "reason-codes.md").read_text("utf-8")
    table = page.split("\n| code | meaning | fix |", 1)[1]
    rows = table.strip().splitlines()[1:]
    assert [row.split(" | ", 1)[0] for row in rows] == [f"| `{code}`" for code in REASONS]
    for row, reason in zip(rows, REASONS.values(), strict=True):
        assert f" | {reason.meaning} | {reason.fix or '-'}" in row.replace("\\|", "|")


def test_the_readmes_command_to_build_the_docs_installs_the_docs_extra() -> None:
    import tomllib

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"][
        "optional-dependencies"
    ]["docs"]
    (command,) = [line for line in README.splitlines() if "pip install 'sphinx" in line]
    assert re.findall(r"'([^']+)'", command) == extra
    assert "-m sphinx -b html docs docs/_build/html" in README
