"""The installed-tree digest and scan findings, on wheels and on pip --target installs."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import warnings
import zipfile
from pathlib import Path
from threading import Thread
from typing import Any

import pytest
from distbuild import Project, build_wheel, install_target

from mcs_host.trust import digest
from mcs_host.trust.digest import (
    FileEntry,
    TreeDigest,
    scan_installed,
    scan_wheel,
)
from mcs_host.trust.modules import module_files, resolve_module

pytestmark = pytest.mark.venv

PROJECT = Project(
    "tree-driver",
    files={
        "tree_driver/__init__.py": "X = 1\n",
        "tree_driver/sub/__init__.py": "",
        "tree_driver/sub/mod.py": "Y = 2\n",
        "tree_driver/data.json": "{}\n",
    },
)


@pytest.fixture
def wheel(tmp_path: Path, fixture_wheels: Path) -> Path:
    return build_wheel(PROJECT.write(tmp_path / "src"), tmp_path / "wheels")


@pytest.fixture
def site(tmp_path: Path, wheel: Path) -> Path:
    return install_target(tmp_path / "site", [wheel])


def dist_info(site: Path) -> Path:
    return site / "tree_driver-1.0.0.dist-info"


def codes(site: Path) -> list[tuple[str, str]]:
    return [(f.code, f.path) for f in scan_installed(dist_info(site)).findings]


def test_a_clean_install_matches_its_wheel(site: Path, wheel: Path) -> None:
    installed, packed = scan_installed(dist_info(site)), scan_wheel(wheel)
    assert installed.findings == packed.findings == ()
    assert installed.digest is not None
    assert packed.digest is not None
    assert installed.digest == packed.digest
    assert [e.path for e in installed.digest.entries] == [
        "tree_driver-1.0.0.dist-info/METADATA",
        "tree_driver-1.0.0.dist-info/WHEEL",
        "tree_driver/__init__.py",
        "tree_driver/data.json",
        "tree_driver/sub/__init__.py",
        "tree_driver/sub/mod.py",
    ]
    listing = installed.digest.listing.splitlines()
    assert listing[0] == "installed-tree-v2"
    path, size, sha256 = json.loads(listing[3])
    assert (path, size) == ("tree_driver/__init__.py", 6)
    assert len(sha256) == 64
    assert [m.name for m in module_files(installed.digest)] == [
        "tree_driver",
        "tree_driver.sub",
        "tree_driver.sub.mod",
    ]


def test_missing_resized_and_unhashed_files_are_named(site: Path) -> None:
    (site / "tree_driver" / "sub" / "mod.py").unlink()
    (site / "tree_driver" / "data.json").write_text('{"grown": true}\n')
    record = dist_info(site) / "RECORD"
    record.write_text(
        record.read_text().replace(
            next(
                line
                for line in record.read_text().splitlines()
                if line.startswith("tree_driver/__init__.py")
            ),
            "tree_driver/__init__.py,,",
        )
    )
    scan = scan_installed(dist_info(site))
    assert scan.digest is None
    assert [(f.code, f.message) for f in scan.findings] == [
        ("record-invalid", "tree_driver/__init__.py has no hash in RECORD"),
        ("file-modified", "tree_driver/data.json has 16 bytes, RECORD says 3"),
        ("file-missing", "tree_driver/sub/mod.py is in RECORD but missing"),
    ]


def test_symlinks_are_not_followed(site: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (site / "tree_driver" / "sub").rename(elsewhere)
    (site / "tree_driver" / "sub").symlink_to(elsewhere, target_is_directory=True)
    data = site / "tree_driver" / "data.json"
    data.unlink()
    data.symlink_to(tmp_path / "outside.json")
    (tmp_path / "outside.json").write_text("{}\n")
    assert codes(site) == [
        ("not-a-regular-file", "tree_driver/data.json"),
        ("path-escapes", "tree_driver/sub/__init__.py"),
        ("path-escapes", "tree_driver/sub/mod.py"),
    ]


def test_unlisted_files_and_directories_in_a_package_are_found(site: Path) -> None:
    (site / "tree_driver" / "plugin").mkdir()
    (site / "tree_driver" / "plugin" / "evil.py").write_text("")
    (site / "tree_driver" / "sub" / "mod.cpython-311-x86_64-linux-gnu.so").write_text("")
    (site / "tree_driver" / "__pycache__").mkdir(exist_ok=True)  # pip compiled; never a finding
    (site / "tree_driver" / "__pycache__" / "x.pyc").write_text("")
    assert codes(site) == [
        ("file-unlisted", "tree_driver/plugin"),
        ("file-unlisted", "tree_driver/sub/mod.cpython-311-x86_64-linux-gnu.so"),
    ]


def test_namespace_packages_shared_by_two_distributions_scan_clean(
    tmp_path: Path, fixture_wheels: Path
) -> None:
    wheels = [
        build_wheel(_namespace_project(name, part, tmp_path), fixture_wheels)
        for name, part in (("ns-alpha", "alpha"), ("ns-beta", "beta"))
    ]
    site = install_target(tmp_path / "site", wheels)
    for name in ("ns_alpha", "ns_beta"):
        scan = scan_installed(site / f"{name}-1.0.0.dist-info")
        assert scan.findings == (), name
    (site / "nsroot" / "__init__.py").write_text("print('now a regular package')\n")
    assert [f.path for f in scan_installed(site / "ns_alpha-1.0.0.dist-info").findings] == [
        "nsroot/__init__.py"
    ]


def _namespace_project(name: str, part: str, tmp_path: Path) -> Path:
    """A flit project for the namespace portion ``nsroot.<part>``."""
    src = tmp_path / f"{name}-src"
    (src / "nsroot" / part).mkdir(parents=True)
    (src / "nsroot" / part / "__init__.py").write_text("")
    (src / "pyproject.toml").write_text(
        "[build-system]\nrequires = ['flit_core>=3.9,<5']\nbuild-backend = 'flit_core.buildapi'\n"
        f"[project]\nname = '{name}'\nversion = '1.0.0'\ndescription = 'x'\n"
        f"[tool.flit.module]\nname = 'nsroot.{part}'\n"
    )
    return src


def test_a_wheel_with_tampered_unlisted_or_missing_members_is_named(
    wheel: Path, tmp_path: Path
) -> None:
    altered = tmp_path / "altered.whl"
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(altered, "w") as out:
        for info in source.infolist():
            if info.filename == "tree_driver/sub/mod.py":
                continue  # listed in RECORD, now missing
            data = source.read(info.filename)
            if info.filename == "tree_driver/__init__.py":
                data = b"X = 2\n"
            out.writestr(info, data)
        out.writestr("tree_driver/extra.py", b"")
    scan = scan_wheel(altered)
    assert scan.digest is None
    assert [(f.code, f.path) for f in scan.findings] == [
        ("file-modified", "tree_driver/__init__.py"),
        ("file-unlisted", "tree_driver/extra.py"),
        ("file-missing", "tree_driver/sub/mod.py"),
    ]


def test_resolving_a_module_never_imports_and_names_what_is_missing() -> None:
    paths = {"a/__init__.py", "a/b/c.py", "ns/pkg/__init__.py", "top.py"}
    assert resolve_module("a.b.c", paths) == (["a/__init__.py", "a/b/c.py"], None)
    assert resolve_module("ns.pkg", paths) == (["ns/pkg/__init__.py"], None)
    assert resolve_module("top", paths) == (["top.py"], None)
    assert resolve_module("a.x", paths) == (
        ["a/__init__.py"],
        "module 'a.x' is not part of the distribution",
    )
    assert resolve_module("other.mod", paths) == (
        [],
        "package 'other' is not part of the distribution",
    )


def test_scripts_outside_the_site_directory_are_left_out(site: Path) -> None:
    record = dist_info(site) / "RECORD"
    clean = scan_installed(dist_info(site)).digest
    record.write_text(record.read_text() + "../../bin/tree-tool,sha256=abc,10\n")
    scan = scan_installed(dist_info(site))
    assert scan.findings == ()  # the bad hash of a script is not a finding: scripts are not read
    assert scan.digest is not None
    assert clean is not None
    assert scan.digest.digest == clean.digest
    assert not any("tree-tool" in e.path for e in scan.digest.entries)


def _uv_target(site: Path, wheel: Path, cache: Path) -> Path:
    """``uv pip install --target``: a plain directory of installed distributions."""
    command = [sys.executable, "-m", "uv", "pip", "install", "--no-deps", "--offline"]
    done = subprocess.run(
        [*command, "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
        env={**os.environ, "UV_CACHE_DIR": str(cache)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return site


def _tool(tmp_path: Path, script: str) -> Path:
    """The wheel of ``tool-driver``, with the console script ``script``."""
    project = Project(
        "tool-driver",
        files={"tool_driver/__init__.py": "def main():\n    return 0\n"},
        entry_points={"console_scripts": {script: "tool_driver:main"}},
    )
    return build_wheel(project.write(tmp_path / "src"), tmp_path / "wheels")


TOOL = "tool_driver-1.0.0.dist-info"


def test_a_tree_uv_installs_with_its_script_launchers_inside_has_the_digest_of_its_wheel(
    tmp_path: Path, uv_cache: Path
) -> None:
    # uv pip install --target lists the launcher of a console script inside the tree
    # (bin/NAME) where pip lists it outside (../../bin/NAME): either way it is no part of it
    wheel = _tool(tmp_path, "tool-driver")
    pip_site = install_target(tmp_path / "pip", [wheel])
    uv_site = _uv_target(tmp_path / "uv", wheel, uv_cache)
    assert "bin/tool-driver," in (uv_site / TOOL / "RECORD").read_text()
    expected = scan_wheel(wheel).digest
    assert expected is not None
    for site in (pip_site, uv_site):
        scan = scan_installed(site / TOOL)
        assert scan.findings == ()
        assert scan.digest is not None
        assert scan.digest.digest == expected.digest, site


def test_a_launcher_import_could_reach_stays_in_the_digest(tmp_path: Path, uv_cache: Path) -> None:
    wheel = _tool(tmp_path, "tool.py")  # bin/tool.py: the module tool of the namespace bin
    uv_site = _uv_target(tmp_path / "uv", wheel, uv_cache)
    expected, scan = scan_wheel(wheel).digest, scan_installed(uv_site / TOOL)
    assert expected is not None
    assert scan.digest is not None
    assert "bin/tool.py" in [entry.path for entry in scan.digest.entries]
    assert scan.digest.digest != expected.digest  # so it cannot pass for its wheel's pin
    launcher = uv_site / "bin" / "tool.py"
    launcher.write_text(launcher.read_text() + "open('MARKER', 'w')\n")
    assert ("file-modified", "bin/tool.py") in [
        (f.code, f.path) for f in scan_installed(uv_site / TOOL).findings
    ]


def test_record_is_read_as_csv_whatever_its_line_endings_and_quoting(site: Path) -> None:
    record = dist_info(site) / "RECORD"
    clean = scan_installed(dist_info(site)).digest
    lines = record.read_text().splitlines()
    # CRLF line endings, and a quoted row (what csv writes for a path with a comma)
    (site / "tree_driver" / "a,b.json").write_text("{}\n")
    quoted = '"tree_driver/a,b.json",sha256=yj0WO6sFU4GCciYUBWjzvvfqrBh869doeOC2Pp5EI1Y,3'
    record.write_bytes(("\r\n".join([*lines, quoted]) + "\r\n").encode())
    scan = scan_installed(dist_info(site))
    assert scan.findings == ()
    assert scan.digest is not None
    assert clean is not None
    assert [e.path for e in scan.digest.entries] == sorted(
        [*(e.path for e in clean.entries), "tree_driver/a,b.json"]
    )


@pytest.mark.parametrize(
    ("row", "finding"),
    [
        ("tree_driver/__init__.py,shake_128=AAAA,6", "has the hash 'shake_128'"),
        ("tree_driver/__init__.py,md5=AAAA,6", "has the hash 'md5'"),
        ("tree_driver/__init__.py,sha256=AAAA,\u00b2", "does not match its RECORD hash"),
    ],
    ids=["shake", "md5", "superscript size"],
)
def test_a_malformed_record_row_is_a_finding_not_a_crash(
    site: Path, row: str, finding: str
) -> None:
    record = dist_info(site) / "RECORD"
    lines = [
        line for line in record.read_text().splitlines() if not line.startswith("tree_driver/__i")
    ]
    record.write_text("\n".join([*lines, row]) + "\n")
    scan = scan_installed(dist_info(site))
    assert [f.path for f in scan.findings] == ["tree_driver/__init__.py"]
    assert finding in scan.findings[0].message


def test_a_record_that_is_not_utf8_is_a_finding(site: Path) -> None:
    (dist_info(site) / "RECORD").write_bytes(b"tree_driver/\xff.py,sha256=AAAA,1\n")
    (finding,) = scan_installed(dist_info(site)).findings
    assert finding.code == "record-invalid"
    assert "cannot read RECORD" in finding.message


def test_a_file_that_is_not_a_zip_is_refused_naming_it(tmp_path: Path) -> None:
    junk = tmp_path / "tree_driver-1.0.0-py3-none-any.whl"
    junk.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(junk))} is not a wheel: "):
        scan_wheel(junk)


# -- the listing is injective: no two trees share one ----------------------------------------


def _row(path: str, data: bytes) -> str:
    """A RECORD row for ``data`` at ``path``, quoted as csv writes it."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow([path, f"sha256={digest}", len(data)])
    return out.getvalue()


def _tree(site: Path, files: dict[str, bytes]) -> Path:
    """An installed distribution ``t`` whose RECORD lists exactly ``files``."""
    info = site / "t-1.0.dist-info"
    info.mkdir(parents=True)
    rows = []
    for relative, data in files.items():
        target = site / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        rows.append(_row(relative, data))
    (info / "RECORD").write_text("".join(rows) + "t-1.0.dist-info/RECORD,,\n")
    return info


def test_a_tree_hashed_on_every_core_scans_as_on_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # large files for the threads that take them from the largest down, small ones for the
    # caller that takes them from the smallest up, and one of each kind of finding
    files = {f"pkg/big{n}.bin": bytes([n]) * (3 * 1024 * 1024 + n) for n in range(4)}
    files |= {f"pkg/m{n}.py": f"N = {n}\n".encode() for n in range(300)}
    info = _tree(tmp_path / "site", {"pkg/__init__.py": b"", **files})
    site = tmp_path / "site" / "pkg"
    (site / "big1.bin").unlink()
    (site / "big2.bin").write_bytes(b"\0" * (3 * 1024 * 1024 + 2))  # same size, other bytes
    (site / "m7.py").write_text("N = 8\n")
    (site / "m9.py").unlink()
    (site / "m9.py").symlink_to(site / "m8.py")
    monkeypatch.setattr(digest, "_PARALLEL_BYTES", 1 << 60)
    alone = scan_installed(info)
    monkeypatch.setattr(digest, "_PARALLEL_BYTES", 8 * 1024 * 1024)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    started: list[threading.Thread] = []

    def thread(**kwargs: Any) -> threading.Thread:
        started.append(Thread(**kwargs))
        return started[-1]

    monkeypatch.setattr(threading, "Thread", thread)
    shared = scan_installed(info)
    assert len(started) == 3  # three threads beside the caller's
    assert shared == alone
    assert [(f.code, f.path) for f in shared.findings] == [
        ("file-missing", "pkg/big1.bin"),
        ("file-modified", "pkg/big2.bin"),
        ("file-modified", "pkg/m7.py"),
        ("not-a-regular-file", "pkg/m9.py"),
    ]
    (site / "big1.bin").write_bytes(files["pkg/big1.bin"])
    (site / "big2.bin").write_bytes(files["pkg/big2.bin"])
    (site / "m7.py").write_bytes(files["pkg/m7.py"])
    (site / "m9.py").unlink()
    (site / "m9.py").write_bytes(files["pkg/m9.py"])
    clean = scan_installed(info)
    assert clean.findings == ()
    assert clean.digest is not None
    assert clean.digest.files == len(files) + 1
    monkeypatch.setattr(digest, "_PARALLEL_BYTES", 1 << 60)
    assert scan_installed(info) == clean


def _v1_listing(entries: list[FileEntry]) -> str:
    """The installed-tree-v1 listing, as it was: ``<sha256> <size> <path>`` lines."""
    return "".join(f"{e.sha256} {e.size} {e.path}\n" for e in sorted(entries, key=lambda e: e.path))


def test_a_path_with_a_newline_cannot_pass_for_another_tree(tmp_path: Path) -> None:
    init, mod = b"X = 1\n", b"Y = 2\n"
    pinned = {"pkg/__init__.py": init, "pkg/mod.py": mod}
    released = scan_installed(_tree(tmp_path / "released", pinned)).digest
    assert released is not None
    # one file, whose path spells the second line of the released listing
    line = f"{hashlib.sha256(mod).hexdigest()} {len(mod)} pkg/mod.py"
    forged_path = f"pkg/__init__.py\n{line}"
    forged = FileEntry(forged_path, hashlib.sha256(init).hexdigest(), len(init))
    assert _v1_listing([forged]) == _v1_listing(list(released.entries))  # v1 collided
    assert TreeDigest.of([forged]).digest != released.digest  # v2 does not
    scan = scan_installed(_tree(tmp_path / "forged", {forged_path: init}))
    assert scan.digest is None
    (refused,) = [f for f in scan.findings if f.code == "record-invalid"]
    assert refused.path == forged_path
    assert refused.message == (f"RECORD line 1: the path {forged_path!r} holds the character '\\n'")


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("tree_driver/a\tb.py", "holds the character '\\t'"),
        ("tree_driver/\x1b.py", "holds the character '\\x1b'"),
        ("tree_driver/a\u2028b.py", "holds the character '\\u2028'"),
        ("tree_driver/\u202egp.py", "holds the character '\\u202e'"),
        ("/etc/passwd", "is absolute"),
        ("C:/x.py", "is absolute"),
        ("tree_driver\\x.py", "holds a backslash"),
        ("tree_driver//x.py", "has an empty, '.' or '..' component"),
        ("tree_driver/./x.py", "has an empty, '.' or '..' component"),
        ("tree_driver/../x.py", "has an empty, '.' or '..' component"),
        ("../site/tree_driver/x.py", "leaves the site directory and comes back into it"),
        ("tree_driver/__init__.py", "is listed twice"),
        (
            "tree_driver/__INIT__.py",
            "is the same file as 'tree_driver/__init__.py' where names are case-folded",
        ),
        (
            "tree_driver/sub/mo\u0301d.py",
            "is the same file as 'tree_driver/sub/m\u00f3d.py' where names are case-folded",
        ),
    ],
    ids=[
        "tab", "escape", "line separator", "right-to-left override", "absolute", "drive",
        "backslash", "empty component", "dot", "dot-dot inside", "leaves and comes back",
        "twice", "case", "unicode normalization",
    ],
)  # fmt: skip
def test_a_record_path_that_is_not_a_plain_relative_path_is_refused_naming_the_row(
    site: Path, path: str, problem: str
) -> None:
    record = dist_info(site) / "RECORD"
    rows = record.read_text()
    if "mo\u0301d" in path:  # the same name spelled composed (NFC), then decomposed (NFD)
        rows += _row(path.replace("mo\u0301d", "m\u00f3d"), b"")
    number = rows.count("\n") + 1
    record.write_text(rows + _row(path, b""))
    scan = scan_installed(dist_info(site))
    assert scan.digest is None
    messages = [f.message for f in scan.findings if f.code == "record-invalid"]
    assert messages == [f"RECORD line {number}: the path {path!r} {problem}"]


def test_rows_leading_out_of_the_site_directory_stay_out_of_the_digest(site: Path) -> None:
    record = dist_info(site) / "RECORD"
    clean = scan_installed(dist_info(site)).digest
    record.write_text(record.read_text() + _row("../../../bin/tree-driver", b"#!python\n"))
    scan = scan_installed(dist_info(site))
    assert scan.findings == ()
    assert scan.digest == clean


def test_a_wheel_member_twice_leading_out_or_case_folded_is_refused(
    wheel: Path, tmp_path: Path
) -> None:
    forged = tmp_path / wheel.name
    shutil.copy(wheel, forged)
    with warnings.catch_warnings(), zipfile.ZipFile(forged, "a") as archive:
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate it is told to write
        archive.writestr("tree_driver/__init__.py", "print('second copy')\n")
        archive.writestr("../evil.py", "")
        archive.writestr("tree_driver/__INIT__.py", "")
    scan = scan_wheel(forged)
    assert scan.digest is None
    assert sorted((f.code, f.message) for f in scan.findings) == [
        ("member-invalid", "the wheel member '../evil.py' leads out of the wheel"),
        (
            "member-invalid",
            "the wheel member 'tree_driver/__INIT__.py' is the same file as "
            "'tree_driver/__init__.py' where names are case-folded",
        ),
        ("member-invalid", "the wheel member 'tree_driver/__init__.py' is in the wheel twice"),
    ]
