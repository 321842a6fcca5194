"""The path a user takes through the tutorials, with one wrong turn each, through the installed
console script from another directory with a fresh HOME: a label that is installed is never
called not installed (the configuration that leaves it out is named, and the refusal a load
would give it too); ``serve`` serves what mounted and tells the MCP client, through the
``mcp`` SDK's own client, what did not (``--strict`` refuses); a refusal is printed once per
command; tool names two mounts share are said to be renamed, and an unknown tool or label
suggests the names there are; ``install`` refuses a client that has never run here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import pytest
from distbuild import ROOT, Venv, build_wheel, pip, uv_pip
from hostrun import driver_project, entry, pin, write_registry

pytest.importorskip("mcp")  # the mcs-host[mcp] extra

from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.venv

UNITS_ID = "5e1f0000-0000-4000-8000-0000000000a1"
NATIVE_ID = "5e1f0000-0000-4000-8000-0000000000a2"
KERNELS = 40
"""Extension modules the native driver ships: its refusal names each, a long message."""


class Scene(NamedTuple):
    venv: Venv
    root: Path
    home: Path
    elsewhere: Path
    registry: Path
    data: Path

    def host(self, *args: str | Path, home: Path | None = None) -> Any:
        """``mcs-host ARGS`` from another directory, with the scene's HOME (or ``home``)."""
        env = {"HOME": str(home or self.home)}
        return self.venv.run("mcs-host", *args, env=env, cwd=self.elsewhere)

    def configure(self, text: str) -> Path:
        """The user's configuration, ``~/.config/mcs-host/config.toml``: the registry and the
        csv driver's table, then ``text``."""
        config = self.home / ".config" / "mcs-host" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(
            f'registries = ["{self.registry}"]\n\n'
            f'[drivers.csv]\nsettings = {{ root = "{self.data}" }}\n\n' + text
        )
        return config


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path) -> Scene:
    """A venv with mcs-host[mcp] and the bundled drivers; the tutorial's units driver
    installed editable from its project; a pinned driver that ships extension modules; a
    registry pinning the bundled drivers and that one."""
    root = tmp_path_factory.mktemp("user-path")
    venv = Venv.create(root / "venv")
    venv.uv_install(
        "mcs-host[mcp]", "mcs-host-csv", "mcs-host-files", wheelhouse=wheelhouse, cache=uv_cache
    )
    units = driver_project("acme-units", root / "units-ran.txt", UNITS_ID, label="units")
    project = units.write(root / "projects")
    pip(
        "install", "--no-index", "--find-links", str(wheelhouse), "--no-deps",
        "--editable", str(project), python=venv.python,
    )  # fmt: skip
    kernels = {
        f"acme_native/_kernel_{n:02d}_with_a_long_name.abi3.so": "not really native code\n"
        for n in range(KERNELS)
    }
    native = driver_project(
        "acme-native", root / "native-ran.txt", NATIVE_ID, label="native", files=kernels
    )
    wheel = build_wheel(native.write(root / "src"), root / "wheels")
    uv_pip("install", "--no-index", "--no-deps", str(wheel), python=venv.python)
    bundled = json.loads((ROOT / "registry.json").read_text())
    drivers = {
        **bundled["drivers"],
        NATIVE_ID: entry(
            "acme-native", "native", "acme_native:Driver", releases={"1.0.0": pin(wheel)}
        ),
    }
    registry = write_registry(root / "registry.json", drivers, libraries=bundled["libraries"])
    data = root / "data"
    data.mkdir()
    (data / "sales.csv").write_text("month,units\nJan,61\nFeb,90\n")
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    return Scene(venv, root, root / "home", elsewhere, registry, data)


def test_an_installed_label_the_configuration_does_not_name_is_never_called_not_installed(
    scene: Scene,
) -> None:
    config = scene.configure("")  # names csv: autoload is off
    listed = scene.host("list", "--no-verify")
    assert "acme-units" in listed.stdout  # installed, as list shows
    done = scene.host("call", "ping", "--label", "units")
    assert done.returncode == 1
    assert "no driver has this label" not in done.stderr
    said = done.stderr
    assert (
        f"error: units: installed (acme-units 1.0.0), but not mounted: {config} names the "
        "drivers it mounts (so autoload is off), and not units; add a [drivers.units] table"
    ) in said
    # and what a load would decide once it is named: the refusal the tutorial promises
    assert "  named there, it would still be refused: editable-install: acme-units 1.0.0 " in said
    assert "\n  fix: " in said  # the refusal's own fix
    assert "`--allow-unverified` runs it unpinned" in said
    assert not (scene.root / "units-ran.txt").exists()  # verified from files: nothing ran
    # named, the same call gives that refusal as the load's own
    scene.configure("[drivers.units]\n")
    named = scene.host("call", "ping", "--label", "units")
    assert named.returncode == 1
    assert "not mounted units: editable-install: acme-units 1.0.0 is an editable install" in (
        named.stderr
    )
    # a label nothing has names the labels there are, and the closest
    typo = scene.host("call", "ping", "--label", "unit")
    assert typo.returncode == 1
    assert (
        "error: unit: no driver or MCP server has this label (installed or configured); the "
        "labels are csv, files, native, units; did you mean units?"
    ) in typo.stderr


def test_serve_serves_what_mounted_and_tells_the_client_what_did_not(scene: Scene) -> None:
    scene.configure("[drivers.units]\n")  # the tutorial's next step: it is refused
    venv = scene.venv
    server = StdioServerParameters(
        command=str(venv.bin / "mcs-host"),
        args=["serve"],
        env={"HOME": str(scene.home), "PATH": "/usr/bin:/bin"},
        cwd=str(scene.elsewhere),
    )

    def session(**how: Any) -> tuple[set[str], Any, list[Any]]:
        logged: list[Any] = []
        told = anyio.Event()

        async def log(params: Any) -> None:
            logged.append(params)
            told.set()

        async def main() -> tuple[set[str], Any]:
            async with Client(
                server, read_timeout_seconds=60, logging_callback=log, **how
            ) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                called = await client.call_tool("read_csv_head", {"file": "sales.csv"})
                with anyio.fail_after(60):  # a wait for the message, not a measure of time
                    await told.wait()
                return names, called

        names, called = anyio.run(main)
        return names, called, logged

    # a client that initializes (as Claude Desktop does), then one of 2026-07-28 that asks
    # for log messages with its requests
    for how in ({"mode": "legacy"}, {"log_level": "warning"}):
        names, called, logged = session(**how)
        assert "read_csv_head" in names  # the driver that mounted is served
        assert not called.is_error, called
        assert called.structured_content["rows"][0] == {"month": "Jan", "units": "61"}
        (message,) = logged
        assert message.level == "error"
        assert message.data.startswith(
            "mcs-host: units is not served: editable-install: acme-units 1.0.0 is an editable "
            "install"
        ), message.data
    # the load report says the same on stderr, and --strict refuses to serve
    strict = scene.host("serve", "--strict")
    assert strict.returncode == 1
    assert strict.stdout == ""
    assert "error: units: editable-install: as said above" in strict.stderr
    # load and call keep their exit codes: 1 when a configured driver did not mount
    assert scene.host("load").returncode == 1
    called = scene.host("call", "read_csv_head", "file=sales.csv")
    assert called.returncode == 1
    assert json.loads(called.stdout)["rows"][0]["month"] == "Jan"  # the call was made


def test_a_refusal_is_printed_once_per_command(scene: Scene) -> None:
    scene.configure("[drivers.native]\n")
    kernel = "_kernel_07_with_a_long_name.abi3.so"  # in the refusal's long message only
    called = scene.host("call", "read_csv_head", "file=sales.csv", "--no-allow-extensions")
    assert called.returncode == 1
    assert "not mounted native: extension-module: acme-native 1.0.0 ships extension " in (
        called.stderr
    )
    assert called.stderr.count(kernel) == 1, called.stderr
    assert "error: native: extension-module: as said above" in called.stderr
    assert json.loads(called.stdout)["rows"][0]["month"] == "Jan"
    loaded = scene.host("load", "--no-allow-extensions")
    assert loaded.returncode == 1
    assert (loaded.stdout + loaded.stderr).count(kernel) == 1, loaded.stdout
    strict = scene.host("call", "read_csv_head", "--strict", "--no-allow-extensions")
    assert strict.returncode == 1
    assert strict.stderr.count(kernel) == 1, strict.stderr
    # --json keeps every error whole: a document is read, not scanned by eye
    document = json.loads(scene.host("load", "--json", "--no-allow-extensions").stdout)
    assert any(kernel in error for error in document["errors"])


def test_renamed_tools_are_said_and_an_unknown_tool_suggests_the_names_there_are(
    scene: Scene,
) -> None:
    scene.configure(f'[drivers.sheets]\ndriver = "csv"\nsettings = {{ root = "{scene.data}" }}\n')
    clash = (
        "note: the tool name list_csv_files is offered by csv and sheets, so each is renamed: "
        "csv__list_csv_files, sheets__list_csv_files"
    )
    tools = scene.host("tools")
    assert tools.returncode == 0, tools.stderr
    assert clash in tools.stderr.splitlines()
    loaded = scene.host("load")
    assert clash in loaded.stderr.splitlines()
    # the name the first tutorial called is gone: the call says what it is now
    called = scene.host("call", "list_csv_files")
    assert called.returncode == 1
    assert clash in called.stderr.splitlines()
    assert (
        "error: unknown tool 'list_csv_files'; did you mean csv__list_csv_files or "
        "sheets__list_csv_files? (renamed: two mounts offer a tool of that name)"
    ) in called.stderr
    assert called.stdout == ""  # no call was made
    typo = scene.host("call", "csv__list_csv_file")
    assert typo.returncode == 1
    assert "error: unknown tool 'csv__list_csv_file'; did you mean csv__list_csv_files" in (
        typo.stderr
    )
    renamed = scene.host("call", "csv__list_csv_files")
    assert renamed.returncode == 0, renamed.stderr
    assert json.loads(renamed.stdout)["files"][0]["file"] == "sales.csv"


def test_install_refuses_a_client_that_has_never_run_here(scene: Scene, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    done = scene.host("install", "claude-desktop", home=home)
    assert done.returncode == 1
    directory = home / ".config" / "Claude"
    assert (
        f"error: Claude Desktop has not run here as this user: {directory} does not exist"
    ) in done.stderr
    assert "fix: start Claude Desktop once, then run this again; or give --file PATH" in (
        done.stderr
    )
    assert not (home / ".config").exists()  # nothing was made
    code = scene.host("install", "claude-code", "--dry-run", home=home)
    assert code.returncode == 1
    assert f"{home / '.claude'} does not exist" in code.stderr
    assert not (home / ".claude.json").exists()
    # once the client has run (its directory is there), or with --file, it writes
    directory.mkdir(parents=True)
    written = scene.host("install", "claude-desktop", home=home)
    assert written.returncode == 0, written.stderr
    assert (
        "mcs-host"
        in json.loads((directory / "claude_desktop_config.json").read_text())["mcpServers"]
    )
    chosen = tmp_path / "mcp.json"
    named = scene.host("install", "cursor", "--file", chosen, home=home)
    assert named.returncode == 0, named.stderr
    assert "mcs-host" in json.loads(chosen.read_text())["mcpServers"]
