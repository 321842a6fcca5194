"""Write the README's command table, --json table and reason codes table from the command
line itself, or check they are current.

The synopsis of each command comes from the same click parameters ``mcs-host COMMAND --help``
prints, its description from the command's help text, the --json table from the published
document schemas, and the reason codes from the table in ``mcs_host/_reasons.py``, so the
README cannot drift from ``--help`` or from the fixes the command line prints.

python scripts/gen_cli_docs.py                    # rewrite the three tables in README.md
python scripts/gen_cli_docs.py --check            # exit 1 if README.md differs
python scripts/gen_cli_docs.py --only "reason codes"  # rewrite (or --check) one table
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import typer

from mcs_host._reasons import REASONS
from mcs_host.cli.app import app
from mcs_host.cli.documents import DOCUMENTS, schema_urn

README = Path(__file__).resolve().parent.parent / "README.md"
BEGIN, END = "<!-- begin: {} (scripts/gen_cli_docs.py) -->", "<!-- end: {} -->"


def synopsis(name: str, command: Any) -> str:
    """``mcs-host NAME ARGS [OPTIONS]`` as the command's parameters (typer's click objects)
    say."""
    parts = [f"mcs-host {name}"]
    for param in command.params:
        if param.name == "help" or getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            metavar = param.metavar or param.name.upper()
            if param.nargs == -1 and not metavar.endswith("..."):
                metavar += "..."
            parts.append(metavar if param.required else f"[{metavar}]")
            continue
        flag = max(param.opts, key=len)
        text = flag if param.is_flag else f"{flag} {param.metavar or param.name}"
        text = text if param.required else f"[{text}]"
        parts.append(text + ("..." if param.multiple else ""))
    return " ".join(parts)


def description(command: Any) -> str:
    """The command's help text on one line, as a table cell."""
    text = " ".join((command.help or "").split())
    return text.replace("|", "\\|")


def command_table() -> str:
    group: Any = typer.main.get_command(app)
    rows = ["| command | what it does |", "|---|---|"]
    for name, command in group.commands.items():
        if command.hidden:
            continue
        cell = synopsis(name, command).replace("|", "\\|")
        rows.append(f"| `{cell}` | {description(command)} |")
    return "\n".join(rows)


def json_table() -> str:
    rows = ['| command | schema (`"schema"`) | top-level keys |', "|---|---|---|"]
    for name, document in DOCUMENTS.items():
        keys = ", ".join(f"`{key}`" for key in document.__annotations__)
        file = f"mcs_host/schemas/cli-{name}.schema.json"
        rows.append(f"| `{name}` | [`{schema_urn(name)}`]({file}) | {keys} |")
    return "\n".join(rows)


def reasons_table() -> str:
    """Every reason code with its meaning and its fix, in the table's order."""
    rows = ["| code | meaning | fix |", "|---|---|---|"]
    for reason in REASONS.values():
        fix = reason.fix or "-"
        if reason.server_fix:
            fix += f"; an MCP server given by URL or command: {reason.server_fix}"
        cells = (f"`{reason.code}`", reason.meaning, fix)
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows)


TABLES = {"command table": command_table, "json table": json_table, "reason codes": reasons_table}
"""Each generated table by the name its markers give it."""


def render(readme: str, only: str | None = None) -> str:
    """``readme`` with the generated tables (or the table ``only``) replaced."""
    for key, made in TABLES.items():
        if only is not None and key != only:
            continue
        table = made()
        begin, end = BEGIN.format(key), END.format(key)
        pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.DOTALL)
        found = pattern.search(readme)
        if found is None:
            raise SystemExit(f"{README}: no {begin} ... {end} block")
        start, stop = found.span()
        readme = f"{readme[:start]}{begin}\n{table}\n{end}{readme[stop:]}"
    return readme


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check, write nothing")
    parser.add_argument("--only", choices=sorted(TABLES), help="only this table")
    args = parser.parse_args()
    current = README.read_text("utf-8")
    wanted = render(current, args.only)
    if args.check:
        if wanted != current:
            print(f"{README}: the CLI tables are out of date; run python scripts/gen_cli_docs.py")
            return 1
        return 0
    README.write_text(wanted, "utf-8")
    print(f"wrote {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
