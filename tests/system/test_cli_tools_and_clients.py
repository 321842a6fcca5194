"""The command line as a person uses it, through the installed console script: ``tools``
lists what a load mounts as signatures (and schemas with ``--json``); ``call TOOL
KEY=VALUE...`` types each value by the tool's schema; ``--label`` loads only the drivers named;
``version`` says what runs where; each command imports what it uses (``--version`` nothing of
typer or the import gate, an option not given no converter); ``-h`` is ``--help``; ``install
CLIENT`` merges a server entry into an MCP client's file, which the ``mcp`` SDK's client then
starts from another directory with a fresh HOME."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from distbuild import ROOT, Venv
from scenes import Scene

from mcs_host.cli.clients import client_file

pytestmark = pytest.mark.venv


@dataclass(frozen=True)
class CommandsScene(Scene):
    """The venv with mcs-host and the bundled drivers, and ``config``, which mounts both."""

    config: Path


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> CommandsScene:
    """A venv with mcs-host and the bundled drivers, a configuration mounting both over a
    directory with one CSV file."""
    root = tmp_path_factory.mktemp("commands")
    venv = Venv.create(root / "venv")
    venv.uv_install(
        "mcs-host[mcp]", "mcs-host-csv", "mcs-host-files", wheelhouse=wheelhouse, cache=uv_cache
    )
    data = root / "data"
    data.mkdir()
    (data / "sales.csv").write_text("month,units\nJan,61\nFeb,90\nMar,143\n")
    config = root / "mcs-host.toml"
    config.write_text(
        f'registries = ["{ROOT / "registry.json"}"]\n\n'
        f'[drivers.csv]\nsettings = {{ root = "{data}" }}\n\n'
        f'[drivers.files]\nsettings = {{ root = "{data}" }}\n'
    )
    return CommandsScene(root=root, venv=venv, config=config)


def test_tools_lists_each_tool_as_a_signature_under_its_mount(scene: CommandsScene) -> None:
    done = scene.host("tools", "--config", scene.config, home=scene.root)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "csv:"
    assert "  stat(path: str)" in lines
    summarize = next(line for line in lines if line.startswith("  summarize_column("))
    assert summarize.startswith("  summarize_column(file: str, column: str")
    assert "files:" in lines
    assert lines.index("files:") > lines.index(summarize)


def test_tools_json_gives_each_tool_its_schema_and_labels_limit_it(
    scene: CommandsScene,
) -> None:
    done = scene.host("tools", "csv", "--json", "--config", scene.config, home=scene.root)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["schema"] == "urn:mcs-host:cli:tools:1"
    assert document["ok"] is True
    assert {t["label"] for t in document["tools"]} == {"csv"}
    (summarize,) = [t for t in document["tools"] if t["name"] == "summarize_column"]
    assert summarize["input_schema"]["required"][:2] == ["file", "column"]
    assert summarize["signature"].startswith("summarize_column(file: str, column: str")
    assert summarize["annotations"]["readOnlyHint"] is True  # as the driver declares
    missing = scene.host("tools", "nope", "--config", scene.config, home=scene.root)
    assert missing.returncode == 1
    assert "nope" in missing.stderr


def test_call_types_key_value_words_by_the_tool_s_schema(scene: CommandsScene) -> None:
    done = scene.host(
        "call", "read_csv_head", "file=sales.csv", "rows=2", "--json",
        "--config", scene.config, home=scene.root,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)["response"]["tool_call_result"]
    assert [row["month"] for row in result["rows"]] == ["Jan", "Feb"]  # rows=2 is a number
    # a string property takes the text as it is, even when it reads as JSON
    text = scene.host(
        "call", "stat", "path=123", "--json", "--config", scene.config, home=scene.root
    )
    detail = json.loads(text.stdout)["response"]["call_detail"]
    assert "123" in detail  # no such file 123, not a type error about the number 123
    assert "string" not in detail


def test_call_refuses_a_word_that_is_no_key_value_or_a_value_of_the_wrong_type(
    scene: CommandsScene,
) -> None:
    bare = scene.host(
        "call", "read_csv_head", "sales.csv", "--config", scene.config, home=scene.root
    )
    assert bare.returncode == 2
    assert "'sales.csv': give KEY=VALUE" in bare.stderr
    typed = scene.host(
        "call", "read_csv_head", "file=sales.csv", "rows=many", "--config", scene.config,
        home=scene.root,
    )  # fmt: skip
    assert typed.returncode == 2
    assert "'rows=many': rows takes int, not 'many'" in typed.stderr


def test_call_with_label_loads_only_that_driver(scene: CommandsScene) -> None:
    done = scene.host(
        "call", "read_csv_head", "file=sales.csv", "--label", "csv", "--json",
        "--config", scene.config, home=scene.root,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    statuses = {d["label"]: d["status"] for d in document["load"]["drivers"]}
    assert statuses["csv"] == "mounted"
    assert statuses["files"] == "skipped"
    assert [t["label"] for t in document["load"]["tools"]] == ["csv"] * len(
        document["load"]["tools"]
    )


def test_version_says_what_runs_where_and_dash_h_is_help(scene: CommandsScene) -> None:
    venv = scene.venv
    done = scene.host("version", home=scene.root)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("mcs-host 0.")
    assert lines[1].startswith("Python 3.")
    assert str(venv.path) in lines[1]
    assert lines[3].startswith("installed at ")
    assert str(venv.path) in lines[3]
    short, long = (
        scene.host("call", "-h", home=scene.root),
        scene.host("call", "--help", home=scene.root),
    )
    assert short.returncode == long.returncode == 0
    assert short.stdout == long.stdout
    assert "KEY=VALUE" in short.stdout


IMPORTED = """\
import json, sys
from mcs_host.cli._launch import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""
"""Run the command line on the arguments given, then name every module imported."""


def test_each_command_imports_what_it_uses(scene: CommandsScene) -> None:
    """``--version`` imports neither typer nor the import gate, ``version`` no typer, and the
    options a command is not given get no converter: typer 0.2x builds each with pydantic."""
    venv = scene.venv

    def imported(*args: str) -> set[str]:
        done = venv.run("python", "-c", IMPORTED, *args, env={"HOME": str(scene.root)})
        assert "Traceback" not in done.stderr, done.stderr
        return set(json.loads(done.stderr.splitlines()[-1]))

    version = imported("--version")
    assert not {"typer", "mcs_host.trust._gate", "platform"} & version
    full = imported("version")
    assert "typer" not in full
    assert {"mcs_host.trust._gate", "platform"} <= full
    verified = imported("verify")
    assert {"typer", "mcs_host.loading.verify"} <= verified
    assert "typer._adapters" not in verified  # no option given, none converted


@pytest.mark.parametrize(
    ("client", "platform", "expected"),
    [
        ("claude-desktop", "linux", "home/.config/Claude/claude_desktop_config.json"),
        (
            "claude-desktop",
            "darwin",
            "home/Library/Application Support/Claude/claude_desktop_config.json",
        ),
        ("claude-desktop", "win32", "appdata/Claude/claude_desktop_config.json"),
        ("claude-code", "linux", "home/.claude.json"),
        ("claude-code", "win32", "home/.claude.json"),
        ("cursor", "darwin", "home/.cursor/mcp.json"),
        ("vscode", "linux", "home/.config/Code/User/mcp.json"),
        ("vscode", "darwin", "home/Library/Application Support/Code/User/mcp.json"),
        ("vscode", "win32", "appdata/Code/User/mcp.json"),
    ],
)
def test_each_client_s_file_is_where_that_client_reads_it(
    client: str, platform: str, expected: str, tmp_path: Path
) -> None:
    found = client_file(client, platform, tmp_path / "home", str(tmp_path / "appdata"))
    assert found == tmp_path / expected


def test_install_merges_an_entry_a_client_starts_from_anywhere(
    scene: CommandsScene, tmp_path: Path
) -> None:
    venv = scene.venv
    home = tmp_path / "home"
    target = home / ".config" / "Claude" / "claude_desktop_config.json"
    target.parent.mkdir(parents=True)
    mine = {"theme": "dark", "mcpServers": {"other": {"command": "other-server"}}}
    target.write_text(json.dumps(mine))
    done = scene.host("install", "claude-desktop", "--config", scene.config, home=home)
    assert done.returncode == 0, done.stderr
    written = json.loads(target.read_text())
    assert written["theme"] == "dark"
    assert written["mcpServers"]["other"] == {"command": "other-server"}
    entry = written["mcpServers"]["mcs-host"]
    assert entry == {
        "command": str(venv.bin / "mcs-host"),
        "args": ["serve", "--config", str(scene.config.resolve())],
    }
    (backup,) = target.parent.glob("claude_desktop_config.json.*.bak")
    assert json.loads(backup.read_text()) == mine
    # a client starts it from another directory, with a fresh HOME
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    server = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={"HOME": str(tmp_path / "fresh"), "PATH": "/usr/bin:/bin"},
        cwd=str(elsewhere),
    )

    async def main() -> Any:
        with (tmp_path / "stderr.txt").open("w") as errlog:
            async with Client(stdio_client(server, errlog=errlog), read_timeout_seconds=60) as c:
                return await c.call_tool("read_csv_head", {"file": "sales.csv", "rows": 1})

    result = anyio.run(main)
    assert not result.is_error, result
    assert result.structured_content["rows"] == [{"month": "Jan", "units": "61"}]


def test_install_refuses_to_clobber_and_dry_run_writes_nothing(
    scene: CommandsScene, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    target = home / ".cursor" / "mcp.json"
    target.parent.mkdir(parents=True)
    target.write_text('{"mcpServers": {"mcs-host": {"command": "an-older-one"}}}')
    before = target.read_text()
    refused = scene.host("install", "cursor", "--config", scene.config, home=home)
    assert refused.returncode == 2
    assert "a server named 'mcs-host' is there already, and differs; give --replace" in (
        refused.stderr
    )
    dry = scene.host(
        "install", "cursor", "--config", scene.config, "--replace", "--dry-run", home=home
    )
    assert dry.returncode == 0, dry.stderr
    assert '-{"mcpServers": {"mcs-host": {"command": "an-older-one"}}}' in dry.stdout
    assert '"serve",' in dry.stdout
    assert target.read_text() == before
    assert list(target.parent.glob("*.bak")) == []
    replaced = scene.host("install", "cursor", "--config", scene.config, "--replace", home=home)
    assert replaced.returncode == 0, replaced.stderr
    assert json.loads(target.read_text())["mcpServers"]["mcs-host"]["args"][0] == "serve"
    target.write_text("{not json")
    broken = scene.host("install", "cursor", "--replace", home=home)
    assert broken.returncode == 2
    assert "nothing was written" in broken.stderr
    assert target.read_text() == "{not json"


def test_install_writes_vscode_s_servers_and_prints_the_standard_entry(
    scene: CommandsScene, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / ".config" / "Code" / "User").mkdir(parents=True)  # VS Code has run here
    done = scene.host("install", "vscode", "csv", "--name", "tables", home=home)
    assert done.returncode == 0, done.stderr
    assert "config.toml does not exist" in done.stderr  # and what makes it
    assert "`mcs-host init` creates it" in done.stderr
    written = json.loads((home / ".config" / "Code" / "User" / "mcp.json").read_text())
    assert written["servers"]["tables"]["type"] == "stdio"
    assert written["servers"]["tables"]["args"] == ["serve", "csv"]
    printed = scene.host("install", "mcp-json", home=home)
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout)["mcpServers"]["mcs-host"]["args"] == ["serve"]
    unknown = scene.host("install", "emacs", home=home)
    assert unknown.returncode == 2
    assert "'emacs': give one of claude-desktop, claude-code, cursor, vscode, mcp-json" in (
        unknown.stderr
    )


def test_serve_on_a_terminal_says_whom_it_serves_and_how_to_stop(scene: CommandsScene) -> None:
    import os
    import pty
    import select
    import subprocess

    venv = scene.venv
    terminal, stdin = pty.openpty()
    process = subprocess.Popen(
        [str(venv.bin / "mcs-host"), "serve", "--config", str(scene.config)],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"HOME": str(scene.root), "PATH": "/usr/bin:/bin"},
    )
    os.close(stdin)
    said = b""
    try:
        assert process.stderr is not None
        fd = process.stderr.fileno()
        while b"\nserving " not in b"\n" + said:  # read as it comes: no buffer hides a line
            ready, _, _ = select.select([fd], [], [], 60)
            assert ready, said
            chunk = os.read(fd, 65536)
            assert chunk, said  # it ended
            said += chunk
        os.write(terminal, b"\x04")  # Ctrl-D: the end of its input, as it says
        process.communicate(timeout=30)
    finally:
        process.kill()
        os.close(terminal)
    assert process.returncode == 0
    (line,) = [x for x in said.decode().splitlines() if x.startswith("serving ")]
    assert line.startswith("serving 8 tools over stdio MCP: an MCP client starts this command")
    assert "Ctrl-C" in line


def test_load_of_one_label_counts_the_others_instead_of_listing_them(
    scene: CommandsScene,
) -> None:
    done = scene.host("load", "csv", "--config", scene.config, home=scene.root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 other installed drivers not requested (--json lists them)" in done.stdout
    assert "not-requested" not in done.stdout
    assert not any(line.startswith("files ") for line in done.stdout.splitlines())
    listed = json.loads(
        scene.host("load", "csv", "--json", "--config", scene.config, home=scene.root).stdout
    )
    assert {d["label"]: d["reason"] for d in listed["drivers"]}["files"] == "not-requested"


def test_help_groups_every_command_for_users_and_for_driver_authors(
    scene: CommandsScene,
) -> None:
    from mcs_host.cli.app import COMMANDS, GROUPS, HIDDEN

    grouped = [name for _, names in GROUPS for name in names]
    assert sorted(grouped) == sorted(name for name, _, _ in COMMANDS if name not in HIDDEN)
    assert len(grouped) == len(set(grouped))  # each in one group
    shown = " ".join(scene.host("-h", home=scene.root).stdout.split())
    for who, names in GROUPS:
        assert f"{who}: {', '.join(names)}." in shown


def test_init_makes_the_setup_lock_writes_and_a_call_from_any_directory_reads(
    scene: CommandsScene, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    made = scene.host("init", home=home)
    assert made.returncode == 0, made.stderr
    place = home / ".config" / "mcs-host"
    config, registry = place / "config.toml", place / "registry.json"
    assert f"created {registry}" in made.stdout
    assert f"created {config}" in made.stdout
    assert place.stat().st_mode & 0o777 == 0o700
    text = config.read_text()
    assert "# [drivers.csv]" in text  # each installed driver, commented, none imported
    again = scene.host("init", home=home)
    assert again.returncode == 0
    assert f"kept {config} (it exists" in again.stdout
    assert config.read_text() == text
    # the user names csv, its root relative to the configuration file
    (place / "data").mkdir()
    (place / "data" / "sales.csv").write_text("month,units\nJan,61\n")
    config.write_text(text + '\n[drivers.csv]\nsettings = { root = "data" }\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    unlocked = scene.host("call", "list_csv_files", home=home, cwd=elsewhere)
    assert unlocked.returncode == 1
    assert "csv: not-in-registry" in unlocked.stderr
    locked = scene.host("lock", "csv", home=home)
    assert locked.returncode == 0, locked.stderr
    assert f"wrote {registry}" in locked.stdout
    for isolation in ([], ["--isolate"]):
        done = scene.host("call", "list_csv_files", *isolation, home=home, cwd=elsewhere)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["files"] == [{"file": "sales.csv", "size": 19}]
        assert "files" not in done.stderr.split()  # only the driver the user named mounted
    # a root given with --set is the user's word on the command line: from the working directory
    (elsewhere / "here").mkdir()
    (elsewhere / "here" / "other.csv").write_text("a\n1\n")
    here = scene.host("call", "list_csv_files", "--set", "csv.root=here", home=home, cwd=elsewhere)
    assert here.returncode == 0, here.stderr
    assert [f["file"] for f in json.loads(here.stdout)["files"]] == ["other.csv"]
    _a_client_started_elsewhere_serves_the_same_setup(scene, home, tmp_path)


def _a_client_started_elsewhere_serves_the_same_setup(
    scene: CommandsScene, home: Path, tmp_path: Path
) -> None:
    """The user's path to an MCP client: install with no --config; the client starts the
    server in a directory of its own, and it reads the user's setup."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "mcs-host.toml").write_text("strict = true\n")
    installed = scene.host("install", "mcp-json", home=home, cwd=elsewhere)
    assert installed.returncode == 0, installed.stderr
    entry = json.loads(installed.stdout)["mcpServers"]["mcs-host"]
    assert entry["args"] == ["serve"]
    (home / ".cursor").mkdir()  # Cursor has run here
    cursor = scene.host("install", "cursor", home=home, cwd=elsewhere)
    assert "the server will not read mcs-host.toml here" in cursor.stderr
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    client_dir = tmp_path / "client"
    client_dir.mkdir()
    server = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        cwd=str(client_dir),
    )

    async def main() -> Any:
        with (tmp_path / "stderr.txt").open("w") as errlog:
            async with Client(stdio_client(server, errlog=errlog), read_timeout_seconds=60) as c:
                listed = await c.list_tools()
                called = await c.call_tool("list_csv_files", {})
                return [t.name for t in listed.tools], called

    names, result = anyio.run(main)
    assert "list_csv_files" in names
    assert "read_file" not in names  # files is installed, not named: not served
    assert not result.is_error, result
    assert result.structured_content["files"] == [{"file": "sales.csv", "size": 19}]


def test_serve_says_how_its_tools_differ_from_its_last_start(
    scene: CommandsScene, tmp_path: Path
) -> None:
    data = scene.root / "data"
    config = tmp_path / "mcs-host.toml"
    head = f'registries = ["{ROOT / "registry.json"}"]\n'
    csv = f'[drivers.csv]\nsettings = {{ root = "{data}" }}\n'
    files = f'[drivers.files]\nsettings = {{ root = "{data}" }}\n'

    def serve(text: str) -> list[str]:
        config.write_text(text)
        # stdin is empty: it ends at once
        done = scene.host("serve", "--config", config, home=scene.root)
        assert done.returncode == 0, done.stderr
        return [line for line in done.stderr.splitlines() if line.startswith("note: ")]

    assert serve(head + csv) == []  # a first start has nothing to compare with
    assert serve(head + csv) == []
    (added,) = serve(head + csv + files)
    assert added.startswith("note: the tools differ from this server's last start: added ")
    assert "list_directory, read_file, search_files, stat (files)" in added
    (renamed,) = serve('namespace = "always"\n' + head + csv)
    assert "removed list_directory, read_file, search_files, stat (files)" in renamed
    assert "renamed filter_csv_rows -> csv__filter_csv_rows, " in renamed
    assert "added" not in renamed
    # another selection of labels is another server, with a record of its own
    config.write_text(head + csv + files)
    only = scene.host("serve", "files", "--config", config, home=scene.root)
    assert only.returncode == 0, only.stderr
    assert "note: the tools differ" not in only.stderr


def test_call_when_nothing_mounted_says_why_and_calls_nothing(
    scene: CommandsScene, tmp_path: Path
) -> None:
    config = tmp_path / "mcs-host.toml"
    config.write_text(
        f'registries = ["{ROOT / "registry.json"}"]\n'
        '[drivers.csv]\nsettings = { root = "no-such-directory" }\n'
    )
    done = scene.host("call", "list_csv_files", "--config", config)
    assert done.returncode == 1
    assert "constructor-error" in done.stderr
    assert "nothing mounted" in done.stderr
    assert "unknown tool" not in done.stderr + done.stdout  # no call was made to fail
