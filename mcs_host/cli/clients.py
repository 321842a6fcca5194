"""``mcs-host install CLIENT``: an MCP client's configuration made to start ``mcs-host serve``
from this environment, merged into the client's own file.

Each client keeps its servers in a JSON file of its own (:func:`client_file`): Claude
Desktop's ``claude_desktop_config.json``, Claude Code's ``~/.claude.json`` (user scope),
Cursor's ``~/.cursor/mcp.json`` and VS Code's user ``mcp.json``, under ``mcpServers``
(``servers`` for VS Code). The entry names this environment's ``mcs-host`` by its absolute
path and the configuration by its absolute path, so the client may start it from any
directory. The file is merged, never replaced: every other key and server is kept, an entry
of the same name that differs is replaced only with ``--replace``, a file that is no JSON
object is refused as it is, and the file as it was is kept beside it first. A client that
has never run here (the directory it makes at its first start is missing) is refused: no
file is made for a client that is not there (``--file`` names one to make).

The file may sit in a directory others write (a cloned repository's ``.mcp.json``): a
symbolic link there is never written through. A link at the file itself is refused (what it
leads to is neither read nor copied), the backup is a new private file (0600) made where no
file or link was (a link named like the next backup is passed over), and the new file is put
in place whole (:func:`mcs_host._files.replacing`).
``mcp-json`` prints the standard ``mcpServers`` object instead (or merges it into
``--file``).
"""

from __future__ import annotations

import difflib
import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from .options import ConfigOption, LabelsArgument, fail

__all__ = ["CLIENTS", "client_directory", "client_file", "install_command", "server_entry"]

CLIENTS = ("claude-desktop", "claude-code", "cursor", "vscode", "mcp-json")
"""The clients ``install`` knows."""
_LIMIT = 64 * 2**20
"""The largest client file read (Claude Code's holds its history too)."""
_BACKUPS = 1000
"""The most backups of one file made in one second (each name is tried in turn)."""


def client_file(client: str, platform: str, home: Path, appdata: str | None = None) -> Path | None:
    """Where ``client`` keeps its servers for a user whose home is ``home`` on ``platform``
    (``sys.platform``; ``appdata`` is ``%APPDATA%`` on Windows); None for ``mcp-json``."""
    windows = platform.startswith("win")
    mac = platform == "darwin"
    roaming = Path(appdata) if appdata else home / "AppData" / "Roaming"
    if client == "claude-desktop":
        if windows:
            return roaming / "Claude" / "claude_desktop_config.json"
        if mac:
            return (
                home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
            )
        return home / ".config" / "Claude" / "claude_desktop_config.json"
    if client == "claude-code":
        return home / ".claude.json"
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if client == "vscode":
        if windows:
            return roaming / "Code" / "User" / "mcp.json"
        if mac:
            return home / "Library" / "Application Support" / "Code" / "User" / "mcp.json"
        return home / ".config" / "Code" / "User" / "mcp.json"
    return None


_NAMES = {
    "claude-desktop": "Claude Desktop",
    "claude-code": "Claude Code",
    "cursor": "Cursor",
    "vscode": "VS Code",
}
"""Each client as its users call it."""


def client_directory(client: str, target: Path, home: Path) -> Path:
    """The directory ``client`` makes when it first runs, which holds (or will hold) its
    file ``target``: the file's own directory, or ``~/.claude`` for Claude Code (whose
    ``~/.claude.json`` lies in the home directory, which always exists)."""
    return home / ".claude" if client == "claude-code" else target.parent


def _require_client(client: str, target: Path, home: Path) -> None:
    """End the command (exit 1, nothing written) when ``client`` has never run here: its
    file ``target`` and the directory it makes when it first runs are both missing. A file
    made for a client that is not installed (or keeps its files elsewhere) would be read by
    nothing, and install would have said it succeeded."""
    directory = client_directory(client, target, home)
    if target.exists() or directory.is_dir():
        return
    name = _NAMES.get(client, client)
    typer.echo(
        f"error: {name} has not run here as this user: {directory} does not exist (it makes "
        f"it when it first starts), so nothing would read {target}; nothing was written",
        err=True,
    )
    typer.echo(
        f"  fix: start {name} once, then run this again; or give --file PATH to merge the "
        "entry into a file of your choice",
        err=True,
    )
    raise typer.Exit(1)


def server_entry(client: str, command: str, args: list[str]) -> dict[str, Any]:
    """The server entry ``client`` reads: ``command`` and ``args``, with ``type`` where the
    client's format has one."""
    entry: dict[str, Any] = {"command": command, "args": args}
    if client in ("vscode", "claude-code"):
        entry = {"type": "stdio", **entry}
    return entry


def install_command(
    client: Annotated[
        str,
        typer.Argument(
            help="The client: claude-desktop, claude-code, cursor, vscode, or mcp-json (print "
            "the standard mcpServers entry).",
            metavar="CLIENT",
        ),
    ],
    labels: LabelsArgument = None,
    config: ConfigOption = None,
    name: Annotated[
        str, typer.Option("--name", help="The server's name in the client.", metavar="NAME")
    ] = "mcs-host",
    file: Annotated[
        Path | None,
        typer.Option(
            "--file",
            help="Merge into this file instead of the client's own (a project's .mcp.json, "
            ".vscode/mcp.json).",
            dir_okay=False,
            metavar="FILE",
        ),
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Replace an entry of the same name that differs.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the change as a diff; write nothing.")
    ] = False,
) -> None:
    """Write an MCP client's configuration to start mcs-host serve from this environment
    (absolute paths: the client may start it from any directory), merged into the client's
    file: other servers and keys are kept, the old file is backed up beside it.

    LABEL... and --config are what serve is given. Exits 1, writing nothing, when the
    client has not run here yet (its directory does not exist), unless --file names the
    file.
    """
    if client not in CLIENTS:
        raise typer.BadParameter(
            f"{client!r}: give one of {', '.join(CLIENTS)}", param_hint="CLIENT"
        )
    args = ["serve", *(labels or ())]
    if config is not None:
        if not config.is_file():
            raise typer.BadParameter(f"{config}: no such file", param_hint="--config")
        args += ["--config", str(config.resolve())]
    command, prefix = _mcs_host()
    entry = server_entry(client, command, [*prefix, *args])
    target = file or client_file(client, sys.platform, Path.home(), os.environ.get("APPDATA"))
    if target is None:  # mcp-json, printed
        typer.echo(json.dumps({"mcpServers": {name: entry}}, indent=2))
        return
    if file is None:
        _require_client(client, target, Path.home())
    key = "servers" if client == "vscode" else "mcpServers"
    before, document = _read(target)
    servers = document.setdefault(key, {})
    if not isinstance(servers, dict):
        fail(f"{target}: {key} is not a JSON object; fix it by hand, nothing was written")
    if name in servers and servers[name] != entry and not replace:
        fail(
            f"{target}: a server named {name!r} is there already, and differs; give --replace "
            "to replace it, or --name another"
        )
    servers[name] = entry
    after = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if dry_run:
        diff = difflib.unified_diff(
            (before or "").splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"{target} (now)",
            f"{target} (after install)",
        )
        typer.echo("".join(diff) or f"{target}: nothing would change", nl=False)
        return
    if after == before:
        typer.echo(f"{target}: {name} is there already, as it would be written")
        return
    from mcs_host._files import write_atomic

    try:
        backup = _back_up(target, before)
        write_atomic(target, after, "the client's file")
    except OSError as exc:
        fail(f"{exc}; {target} is as it was")
    typer.echo(
        f"wrote {name} into {target}" + (f" (the file as it was: {backup})" if backup else "")
    )
    typer.echo(f"  {entry['command']} {' '.join(entry['args'])}")
    if config is None:
        _say_what_serve_reads()


def _say_what_serve_reads() -> None:
    """Without --config the client's server reads the user's file alone (it starts in a
    directory of the client's choosing): say so when that surprises."""
    from mcs_host.loading.config import user_config_path

    here = [
        name
        for name, mark in (("mcs-host.toml", ""), ("pyproject.toml", "[tool.mcs-host]"))
        if os.path.isfile(name) and mark in Path(name).read_text("utf-8", errors="replace")
    ]
    if here:
        typer.echo(
            f"note: the server will not read {here[0]} here (the client starts it in a "
            f"directory of its own); install with --config {here[0]} to serve with it",
            err=True,
        )
    if not os.path.isfile(user_config_path()):
        typer.echo(
            f"note: {user_config_path()} does not exist: the server will mount every trusted "
            "installed driver with its defaults; `mcs-host init` creates it",
            err=True,
        )


def _mcs_host() -> tuple[str, list[str]]:
    """This environment's mcs-host as a command: its console script by absolute path, or
    this interpreter with ``-m mcs_host`` where there is none."""
    scripts = Path(sys.executable).parent
    for candidate in (scripts / "mcs-host", scripts / "mcs-host.exe"):
        if candidate.is_file():
            return str(candidate), []
    return sys.executable, ["-m", "mcs_host"]


def _read(target: Path) -> tuple[str | None, dict[str, Any]]:
    """The client file's text (None when there is no file) and its JSON object (empty then);
    a file that cannot be read as a JSON object ends the command, and nothing is written. A
    symbolic link is not followed: it ends the command too, saying where it leads."""
    from mcs_host._files import InputError, loads_json, read_text

    try:
        text = read_text(target, "the client's file", _LIMIT, follow=False)
    except FileNotFoundError:
        return None, {}
    except (InputError, OSError) as exc:
        if target.is_symlink():
            fail(
                f"{target}: the client's file is a symbolic link (to {os.readlink(target)}); "
                "install writes no file through a link: give --file with the file it leads "
                "to, or remove the link; nothing was written"
            )
        fail(f"{exc}; nothing was written")
    if not text.strip():
        return text, {}
    try:
        document = loads_json(text, str(target))
    except InputError as exc:
        fail(f"{exc}; fix it by hand, nothing was written")
    if not isinstance(document, Mapping):
        fail(f"{target}: not a JSON object; fix it by hand, nothing was written")
    return text, dict(document)


def _back_up(target: Path, text: str | None) -> Path | None:
    """``text``, the file as it was read, kept beside ``target`` in a new private file
    stamped with the time (None: there was no file). Each name is tried by making the file
    (:func:`mcs_host._files.create_new`): one taken, by a file or by a link that leads
    anywhere or nowhere, is passed over, never written through."""
    from mcs_host._files import create_new

    if text is None:
        return None
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for count in range(1, _BACKUPS + 1):
        suffix = stamp if count == 1 else f"{stamp}-{count}"
        backup = target.with_name(f"{target.name}.{suffix}.bak")
        try:
            create_new(backup, text, "the backup")
        except FileExistsError:
            continue
        return backup
    raise FileExistsError(
        f"{target}: {_BACKUPS} backups of this second exist; remove some, nothing was written"
    )
