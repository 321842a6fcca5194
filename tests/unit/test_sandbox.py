"""Root confinement: ``..``, absolute paths and symlinks out of the root are refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcs_host import PathEscapeError, Root, ToolError


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Root, Path]:
    """A root with a file, a subdirectory, an inner symlink and a symlink to a secret outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    base = tmp_path / "root"
    (base / "sub").mkdir(parents=True)
    (base / "sub" / "note.txt").write_text("note")
    (base / "inner").symlink_to("sub")
    (base / "escape").symlink_to(outside)
    (base / "secret-link").symlink_to(outside / "secret.txt")
    return Root(base), outside


def test_paths_inside_resolve_to_real_paths(tree: tuple[Root, Path]) -> None:
    root, _ = tree
    assert root.resolve(".") == root.path
    assert root.resolve("sub/note.txt") == os.path.join(root.path, "sub", "note.txt")
    assert root.resolve("inner/note.txt") == os.path.join(root.path, "sub", "note.txt")
    assert root.resolve(os.path.join(root.path, "sub")) == os.path.join(root.path, "sub")
    assert root.resolve("sub/../sub/new.txt").endswith("sub/new.txt")  # need not exist
    assert root.relative(root.resolve("sub/note.txt")) == "sub/note.txt"
    assert root.relative(root.path) == "."


@pytest.mark.parametrize(
    ("path", "how"),
    [
        ("../outside/secret.txt", "it resolves to "),
        ("sub/../../outside", "it resolves to "),
        ("/etc/passwd", "it resolves to /etc/passwd"),
        ("escape/secret.txt", "symlink 'escape' points to "),
        ("secret-link", "symlink 'secret-link' points to "),
        ("sub/../escape", "symlink 'escape' points to "),
        ("sub/\0", "NUL character"),
    ],
)
def test_paths_leaving_the_root_are_refused_naming_the_way_out(
    tree: tuple[Root, Path], path: str, how: str
) -> None:
    root, _ = tree
    with pytest.raises(PathEscapeError) as caught:
        root.resolve(path)
    assert str(caught.value).startswith(f"path {path!r} is outside the root {root.path}: ")
    assert how in str(caught.value)
    assert isinstance(caught.value, ToolError)


def test_a_root_that_is_a_prefix_of_a_sibling_does_not_admit_it(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data-private").mkdir()
    with pytest.raises(PathEscapeError):
        Root(tmp_path / "data").resolve("../data-private")


def test_open_file_reads_files_and_refuses_other_kinds(tree: tuple[Root, Path]) -> None:
    root, _ = tree
    with root.open_file("inner/note.txt") as f:
        assert f.read() == b"note"
    with pytest.raises(IsADirectoryError):
        root.open_file("sub")
    with pytest.raises(FileNotFoundError):
        root.open_file("sub/missing.txt")
    with pytest.raises(PathEscapeError):
        root.open_file("escape/secret.txt")
    fifo = Path(root.path) / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(IsADirectoryError, match="not a regular file"):
        root.open_file("pipe")  # refused at once: a FIFO would block the read


def test_open_dir_gives_a_descriptor_to_scan(tree: tuple[Root, Path]) -> None:
    root, _ = tree
    with root.open_dir("inner") as fd, os.scandir(fd) as entries:
        assert [e.name for e in entries] == ["note.txt"]


class _SwappingRoot(Root):
    """A root whose directory ``sub`` is replaced by a symlink out right after each check.

    This is what an attacker racing the driver does between resolving and opening.
    """

    __slots__ = ("outside",)
    outside: Path

    def resolve(self, path: str) -> str:
        real = super().resolve(path)
        sub = Path(self.path) / "sub"
        if not sub.is_symlink():
            sub.rename(Path(self.path) / "sub-moved")
            sub.symlink_to(self.outside)
        return real


def test_a_symlink_swapped_in_after_the_check_is_not_followed(tree: tuple[Root, Path]) -> None:
    root, outside = tree
    (outside / "note.txt").write_text("outside")
    swapping = _SwappingRoot(root.path)
    swapping.outside = outside
    with pytest.raises(PathEscapeError, match="'sub' became a symlink while it was opened"):
        swapping.open_file("sub/note.txt")
    assert (Path(root.path) / "sub").is_symlink()  # the swap did happen


def test_root_must_be_an_existing_directory(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError, match="is not an existing directory"):
        Root(tmp_path / "missing")
