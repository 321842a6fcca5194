"""The files ToolDriver against real directory trees."""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from mcs_host_files import FilesToolDriver

from mcs_host import PathEscapeError, ToolArgumentError, UnknownToolError, is_semver


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "root"
    (base / "docs" / "deep").mkdir(parents=True)
    (base / "docs" / "guide.md").write_text("# Guide\nInstall it.\nThen RUN it.\n")
    (base / "docs" / "deep" / "notes.txt").write_text("run fast\n")
    (base / "readme.txt").write_text("hello\n")
    (base / ".hidden").write_text("run hidden\n")
    (base / "blob.bin").write_bytes(b"\x00\xffrun\x00")
    (base / "docs-link").symlink_to("docs")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("run secret\n")
    (base / "out").symlink_to(outside)
    return base


@pytest.fixture
def driver(root: Path) -> FilesToolDriver:
    return FilesToolDriver(root)


def call(driver: FilesToolDriver, tool: str, **arguments: Any) -> dict[str, Any]:
    result = driver.execute_tool(tool, arguments)
    json.dumps(result)  # results go to a model: they must be JSON
    return result


def test_meta_matches_the_distribution() -> None:
    meta = FilesToolDriver.meta
    assert is_semver(meta.version)
    assert meta.version == metadata.version("mcs-host-files")
    assert meta.target_llms is None
    assert meta.trust is not None
    assert meta.trust.publisher == "mcs-host developers"
    assert [(b.capability, b.adapter) for b in meta.bindings] == [("filesystem", "localfs")]


def test_entry_point_loads_the_driver_class() -> None:
    (entry,) = [e for e in metadata.entry_points(group="mcs.drivers") if e.name == "files"]
    assert entry.load() is FilesToolDriver


def test_every_parameter_has_a_json_schema(driver: FilesToolDriver) -> None:
    tools = {tool.name: tool for tool in driver.list_tools()}
    assert sorted(tools) == ["list_directory", "read_file", "search_files", "stat"]
    for tool in tools.values():
        assert tool.description
        for parameter in tool.parameters:
            assert parameter.description, (tool.name, parameter.name)
            assert parameter.schema is not None, (tool.name, parameter.name)
            assert "type" in parameter.schema, (tool.name, parameter.name)
    read = tools["read_file"].input_schema()
    assert read["required"] == ["path"]
    assert read["properties"]["encoding"]["enum"] == ["utf-8", "latin-1", "base64"]
    assert read["properties"]["offset"] == {
        "type": "integer",
        "minimum": 0,
        "default": 0,
        "description": "Byte offset to start reading at.",
    }


def test_list_directory(driver: FilesToolDriver) -> None:
    listing = call(driver, "list_directory")
    assert listing["path"] == "."
    assert listing["entries"] == [
        {"path": "blob.bin", "type": "file", "size": 6},
        {"path": "docs", "type": "directory"},
        {"path": "docs-link", "type": "symlink", "target": "docs"},
        {"path": "out", "type": "symlink", "target": None},
        {"path": "readme.txt", "type": "file", "size": 6},
    ]
    deep = call(driver, "list_directory", path="docs", recursive=True)
    assert [e["path"] for e in deep["entries"]] == [
        "docs/deep",
        "docs/deep/notes.txt",
        "docs/guide.md",
    ]
    hidden = call(driver, "list_directory", include_hidden=True, pattern=".*")
    assert [e["path"] for e in hidden["entries"]] == [".hidden"]
    limited = call(driver, "list_directory", recursive=True, limit=2)
    assert len(limited["entries"]) == 2
    assert limited["truncated"] is True
    via_link = call(driver, "list_directory", path="docs-link")
    assert via_link["path"] == "docs"


def test_read_file_whole_in_part_and_capped(root: Path, driver: FilesToolDriver) -> None:
    whole = call(driver, "read_file", path="docs/guide.md")
    assert whole["content"] == "# Guide\nInstall it.\nThen RUN it.\n"
    assert (whole["size"], whole["bytes_read"], whole["truncated"]) == (33, 33, False)
    part = call(driver, "read_file", path="docs/guide.md", offset=2, max_bytes=5)
    assert (part["content"], part["truncated"]) == ("Guide", True)
    capped = FilesToolDriver(root, max_read_bytes=4)
    assert call(capped, "read_file", path="readme.txt", max_bytes=1000)["content"] == "hell"


def test_read_file_text_and_binary(root: Path, driver: FilesToolDriver) -> None:
    (root / "utf8.txt").write_text("ab\u00e9", encoding="utf-8")  # é is two bytes
    cut = call(driver, "read_file", path="utf8.txt", max_bytes=3)
    assert (cut["content"], cut["bytes_read"], cut["truncated"]) == ("ab", 3, True)
    (root / "latin.txt").write_bytes("caf\u00e9 ok".encode("latin-1"))
    with pytest.raises(ToolArgumentError, match=r"not UTF-8 text .*'base64' or 'latin-1'"):
        call(driver, "read_file", path="latin.txt")
    assert (
        call(driver, "read_file", path="latin.txt", encoding="latin-1")["content"] == "caf\u00e9 ok"
    )
    blob = call(driver, "read_file", path="blob.bin", encoding="base64")
    assert base64.b64decode(blob["content"]) == b"\x00\xffrun\x00"


@pytest.mark.parametrize("path", ["../outside/secret.txt", "out/secret.txt", "/etc/passwd"])
def test_reads_outside_the_root_are_refused(driver: FilesToolDriver, path: str) -> None:
    with pytest.raises(PathEscapeError, match=f"path {path!r} is outside the root"):
        call(driver, "read_file", path=path)


def test_missing_files_and_directories_name_the_path(driver: FilesToolDriver) -> None:
    with pytest.raises(
        ToolArgumentError, match="tool 'read_file', argument 'path': 'nope' does not exist"
    ):
        call(driver, "read_file", path="nope")
    with pytest.raises(ToolArgumentError, match="'docs' is not a file"):
        call(driver, "read_file", path="docs")
    with pytest.raises(ToolArgumentError, match=r"'readme\.txt' is not a directory"):
        call(driver, "list_directory", path="readme.txt")


def test_search_by_name_and_by_content(root: Path, driver: FilesToolDriver) -> None:
    by_name = call(driver, "search_files", pattern="*.md")
    assert by_name["matches"] == [{"path": "docs/guide.md"}]
    by_text = call(driver, "search_files", contains="run")
    # case-insensitive; not the hidden file, not the binary, not through the link out
    assert by_text["matches"] == [
        {"path": "docs/deep/notes.txt", "line": 1, "text": "run fast"},
        {"path": "docs/guide.md", "line": 3, "text": "Then RUN it."},
    ]
    exact = call(driver, "search_files", contains="RUN", case_sensitive=True)
    assert [m["path"] for m in exact["matches"]] == ["docs/guide.md"]
    with_hidden = call(driver, "search_files", contains="run", include_hidden=True, limit=1)
    assert with_hidden["matches"] == [{"path": ".hidden", "line": 1, "text": "run hidden"}]
    assert with_hidden["truncated"] is True
    small = FilesToolDriver(root, max_search_bytes=10)
    assert call(small, "search_files", contains="run")["skipped_too_large"] == ["docs/guide.md"]


def test_stat_describes_files_directories_and_symlinks(root: Path, driver: FilesToolDriver) -> None:
    info = call(driver, "stat", path="readme.txt")
    assert (info["path"], info["type"], info["size"], info["mode"]) == (
        "readme.txt",
        "file",
        6,
        stat.filemode((root / "readme.txt").stat().st_mode),
    )
    assert info["modified"].endswith("+00:00")
    assert call(driver, "stat", path="docs/")["type"] == "directory"
    link = call(driver, "stat", path="docs-link")
    assert (link["type"], link["target"]) == ("symlink", "docs")
    assert call(driver, "stat", path=".")["path"] == "."
    with pytest.raises(PathEscapeError, match="symlink 'out' points to"):
        call(driver, "stat", path="out")


def test_bad_calls_name_the_tool_and_the_argument(driver: FilesToolDriver) -> None:
    with pytest.raises(
        UnknownToolError, match="unknown tool 'write_file'; known tools: list_directory"
    ):
        call(driver, "write_file", path="x")
    with pytest.raises(ToolArgumentError, match="argument 'path': required argument is missing"):
        call(driver, "read_file")
    with pytest.raises(ToolArgumentError, match="argument 'mode': unexpected argument"):
        call(driver, "read_file", path="readme.txt", mode="w")
    with pytest.raises(ToolArgumentError, match="argument 'limit': Input should be greater than"):
        call(driver, "list_directory", limit=0)
    assert call(driver, "read_file", path="readme.txt", max_bytes="2")["content"] == "he"


def test_healthcheck_reports_the_root(root: Path, driver: FilesToolDriver) -> None:
    assert driver.healthcheck() == {"status": "OK", "root": os.path.realpath(root)}
    shutil.rmtree(root)
    assert driver.healthcheck() == {"status": "ERROR", "root": os.path.realpath(root)}


def test_constructor_refuses_a_missing_root(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError, match="is not an existing directory"):
        FilesToolDriver(tmp_path / "missing")
