"""The host writes no file through a symbolic link a directory planted. In a cloned repository
(a directory whoever made it controls), ``mcs-host install --file`` passes over a link named
like its next backup and makes the backup a new private file, refuses a client file that is a
link (neither reading what it leads to nor copying it there), and ``bump`` and
``sign-registry`` refuse a link where they write. Each link leads to a file the user can write
(the approvals in the state directory, another project, a marker); the test asserts it was
neither made nor changed, and that an approval the link would have planted runs nothing."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from distbuild import Venv
from scenes import Scene

pytestmark = [
    pytest.mark.venv,
    pytest.mark.skipif(os.name != "posix", reason="symbolic links and modes as POSIX has them"),
]

APPROVALS = "approved-directories.json"
"""The approvals' file name in the state directory (``mcs_host.loading.config_project``)."""


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path) -> Scene:
    """A venv with ``mcs-host[mcp]`` (a configured MCP server is what an approval runs)."""
    root = tmp_path_factory.mktemp("planted")
    made = Venv.create(root / "venv")
    made.uv_install("mcs-host[mcp]", wheelhouse=wheelhouse, cache=uv_cache)
    return Scene(root, made)


def host(
    scene: Scene, tmp_path: Path, *args: str | Path, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``mcs-host ARGS`` as the user whose home and state are under ``tmp_path`` (local time
    is UTC, so the test knows the backups' stamps)."""
    home, state = tmp_path / "home", tmp_path / "state"
    return scene.host(*args, home=home, state=state, cwd=cwd, env={"TZ": "UTC"})


def links(path: Path) -> dict[str, str]:
    """Each symbolic link in ``path``: where it leads."""
    return {p.name: os.readlink(p) for p in path.iterdir() if p.is_symlink()}


def test_install_makes_its_backup_where_no_link_was_and_writes_nothing_through_one(
    scene: Scene, tmp_path: Path
) -> None:
    state, repo, marker = tmp_path / "state", tmp_path / "repo", tmp_path / "marker.txt"
    state.mkdir()
    repo.mkdir()
    # the repository's project file runs a command once its directory is approved
    (repo / "mcs-host.toml").write_text(
        '[mcp_servers.evil]\ncommand = "/bin/sh"\n'
        f'args = ["-c", "echo ran > {marker}"]\nallow_unverified = true\n'
    )
    approval = hashlib.sha256((repo / "mcs-host.toml").read_bytes()).hexdigest()
    # its .mcp.json is an approvals document too, and every name its backup may take in the
    # next ten minutes is a link to the approvals file, which does not exist yet
    planted = {"directories": {str(repo.resolve()): {"mcs-host.toml": approval}}}
    original = json.dumps({**planted, "mcpServers": {}}).encode()
    (repo / ".mcp.json").write_bytes(original)
    now = int(time.time())
    for second in range(now - 5, now + 600):
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(second))
        (repo / f".mcp.json.{stamp}.bak").symlink_to(state / APPROVALS)
    planted_links = links(repo)

    done = host(scene, tmp_path, "install", "claude-code", "--file", repo / ".mcp.json")
    assert done.returncode == 0, done.stderr

    assert not (state / APPROVALS).exists()  # the links' target was not made
    assert links(repo) == planted_links  # and no link was changed
    (backup,) = [p for p in repo.glob(".mcp.json.*.bak") if not p.is_symlink()]
    assert backup.stat().st_mode & 0o777 == 0o600
    assert backup.read_bytes() == original
    assert f"(the file as it was: {backup})" in done.stdout
    written = json.loads((repo / ".mcp.json").read_text())
    assert written["directories"] == planted["directories"]  # merged: kept as it was
    assert written["mcpServers"]["mcs-host"]["args"] == ["serve"]
    assert {p.name for p in repo.iterdir()} == {
        *planted_links,
        ".mcp.json",
        backup.name,
        "mcs-host.toml",
    }
    # the repository is not approved: its server is ignored, and never runs
    loaded = host(scene, tmp_path, "load", cwd=repo)
    assert "ignored mcp_servers.evil" in loaded.stderr
    assert not marker.exists()


def test_install_refuses_a_client_file_that_is_a_link_and_copies_nothing_from_it(
    scene: Scene, tmp_path: Path
) -> None:
    home, state, repo = tmp_path / "home", tmp_path / "state", tmp_path / "repo"
    home.mkdir()
    state.mkdir()
    repo.mkdir()
    mine = home / ".claude.json"  # the user's own, with what only they may read
    mine.write_text('{"oauthAccount": "secret-3f9a1c7e", "mcpServers": {}}')
    mine.chmod(0o600)
    before = mine.read_bytes()
    for target in (mine, state / APPROVALS):  # a file that exists, and one that does not
        (repo / ".mcp.json").symlink_to(target)
        done = host(scene, tmp_path, "install", "claude-code", "--file", repo / ".mcp.json")
        assert done.returncode == 2
        assert done.stderr.endswith(
            f"error: {repo / '.mcp.json'}: the client's file is a symbolic link (to {target}); "
            "install writes no file through a link: give --file with the file it leads to, "
            "or remove the link; nothing was written\n"
        )
        assert links(repo) == {".mcp.json": str(target)}
        assert [p.name for p in repo.iterdir()] == [".mcp.json"]  # no backup, no copy
        (repo / ".mcp.json").unlink()
    assert mine.read_bytes() == before
    assert not (state / APPROVALS).exists()


def test_bump_writes_no_version_through_a_link(scene: Scene, tmp_path: Path) -> None:
    made = host(scene, tmp_path, "new", "acme-json", "--dir", tmp_path)
    assert made.returncode == 0, made.stderr
    project = tmp_path / "acme-json"
    other = tmp_path / "other"  # another project of the user's, which the link leads to
    other.mkdir()
    (other / "pyproject.toml").write_bytes((project / "pyproject.toml").read_bytes())
    theirs = (other / "pyproject.toml").read_bytes()
    (project / "pyproject.toml").unlink()
    (project / "pyproject.toml").symlink_to(other / "pyproject.toml")
    manifest = project / "acme_json" / "mcs-driver.json"
    ours = manifest.read_bytes()
    done = host(scene, tmp_path, "bump", "0.2.0", "--dir", project)
    assert done.returncode == 2
    assert done.stderr == (
        f"error: {project / 'pyproject.toml'}: a symbolic link (to {other / 'pyproject.toml'}); "
        "bump writes no file through a link: bump the project it leads to, or put the file "
        "itself there\n"
    )
    assert (other / "pyproject.toml").read_bytes() == theirs
    assert manifest.read_bytes() == ours


def test_sign_registry_writes_no_envelope_through_a_link(scene: Scene, tmp_path: Path) -> None:
    key, index, marker = tmp_path / "k.pem", tmp_path / "index.json", tmp_path / "marker.txt"
    assert host(scene, tmp_path, "keygen", key).returncode == 0
    index.write_text(
        json.dumps(
            {"format": "mcs-host-registry/2", "name": "t", "expires": "2099-01-01T00:00:00Z"}
        )
    )
    output = tmp_path / "repo" / "signed.json"
    output.parent.mkdir()
    output.symlink_to(marker)
    done = host(scene, tmp_path, "sign-registry", index, "--key", key, "--output", output)
    assert done.returncode == 2
    assert done.stderr == (
        f"error: {output}: the envelope is a symbolic link (to {marker}); mcs-host writes no "
        "file through a link: name the file it leads to, or remove the link\n"
    )
    assert not marker.exists()
    assert output.is_symlink()
