"""Discovery and ``mcs-host list`` against real distributions installed with pip."""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from distbuild import Project, Venv, build_wheel, install_target

from mcs_host import ENTRY_POINT_GROUP, discover, requires_dist

pytestmark = pytest.mark.venv

GOOD_DRIVER = """
from mcs_host import DriverMeta, MCSToolDriver, Tool

class Driver(MCSToolDriver):
    meta = DriverMeta(id="{id}", name="{name}", version="{version}")

    def list_tools(self):
        return [Tool(name="ping", description="Answer pong.")]

    def execute_tool(self, tool_name, arguments):
        return "pong"
"""


def driver_project(name: str, version: str = "1.0.0", labels: tuple[str, ...] = ()) -> Project:
    """A well-formed driver distribution declaring ``labels`` (default: its module name)."""
    module = name.replace("-", "_")
    source = GOOD_DRIVER.format(id=f"{name}-id", name=name, version=version)
    return Project(
        name,
        version,
        files={f"{module}/__init__.py": source},
        entry_points={ENTRY_POINT_GROUP: dict.fromkeys(labels or (module,), f"{module}:Driver")},
    )


def marker_project(marker: Path) -> Project:
    """A driver whose package and module write ``marker`` when imported."""
    return Project(
        "marker-driver",
        files={
            "marker_driver/__init__.py": f"open({str(marker)!r}, 'a').write('package\\n')\n",
            "marker_driver/driver.py": (
                f"open({str(marker)!r}, 'a').write('module\\n')\nclass MarkerDriver: pass\n"
            ),
        },
        entry_points={ENTRY_POINT_GROUP: {"marker": "marker_driver.driver:MarkerDriver"}},
    )


BROKEN = Project(
    "broken-driver",
    files={"broken_driver/__init__.py": "raise RuntimeError('broken-driver fails at import')\n"},
    entry_points={ENTRY_POINT_GROUP: {"broken": "broken_driver:Driver"}},
)


@pytest.fixture(scope="module")
def marker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("marker") / "imported.txt"


@pytest.fixture(scope="module")
def scenario(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, fixture_wheels: Path, marker: Path
) -> Venv:
    """A venv with mcs-host, both bundled drivers, a marker-writing and a broken driver."""
    venv = Venv.create(tmp_path_factory.mktemp("scenario") / "venv")
    work = tmp_path_factory.mktemp("scenario-src")
    wheels = [
        build_wheel(project.write(work), fixture_wheels)
        for project in (marker_project(marker), BROKEN, driver_project("dup-driver", "1.0.0"))
    ]
    venv.install("mcs-host", "mcs-host-files", "mcs-host-csv", *wheels, wheelhouse=wheelhouse)
    return venv


def list_json(venv: Venv, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = venv.run("mcs-host", "list", "--json", *args, env=env)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def by_label(listing: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {driver["label"]: driver for driver in listing["drivers"]}


def test_list_shows_the_bundled_drivers(scenario: Venv) -> None:
    drivers = by_label(list_json(scenario))
    assert drivers["files"]["distribution"] == "mcs-host-files"
    assert drivers["files"]["entry_point"] == "mcs_host_files:FilesToolDriver"
    assert drivers["csv"]["distribution"] == "mcs-host-csv"
    assert drivers["csv"]["entry_point"] == "mcs_host_csv:CsvToolDriver"
    for label, version in (("files", "0.1.1"), ("csv", "0.1.2")):
        assert drivers[label]["version"] == version
        assert drivers[label]["problems"] == []
        assert Path(drivers[label]["location"]) == scenario.site_packages.resolve()
        assert drivers[label]["metadata_path"].endswith(f"-{version}.dist-info")


def test_list_never_imports_a_driver(
    scenario: Venv,
    marker: Path,
    tmp_path: Path,
    fixture_wheels: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # in this process, with the driver importable from sys.path
    wheel = build_wheel(marker_project(marker).write(tmp_path), fixture_wheels)
    site = install_target(tmp_path / "site", [wheel])
    monkeypatch.syspath_prepend(site)
    found = discover()
    assert [c.value for c in found.get("marker")] == ["marker_driver.driver:MarkerDriver"]
    assert "marker_driver" not in sys.modules
    # in the venv, through the command line
    table = scenario.run("mcs-host", "list")
    assert table.returncode == 0, table.stderr
    assert "marker-driver" in table.stdout
    assert by_label(list_json(scenario))["marker"]["problems"] == []
    assert not marker.exists(), f"listing imported the driver: {marker.read_text()}"
    # the control: importing the driver does write the marker
    imported = scenario.run("python", "-c", "import marker_driver.driver")
    assert imported.returncode == 0, imported.stderr
    assert marker.read_text() == "package\nmodule\n"
    marker.unlink()


def test_list_shows_a_broken_driver_next_to_good_ones(scenario: Venv) -> None:
    table = scenario.run("mcs-host", "list")
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line.split() for line in table.stdout.splitlines() if line}
    assert rows["broken"][1:5] == ["driver", "broken-driver", "1.0.0", "broken_driver:Driver"]
    assert rows["files"][2] == "mcs-host-files"
    assert rows["csv"][2] == "mcs-host-csv"
    # no registry names any of them: verified from what is on disk, none is trusted
    assert {tuple(rows[label][6:]) for label in ("broken", "files", "csv")} == {("unverified", "-")}
    # the control: the broken driver really cannot be imported
    imported = scenario.run("python", "-c", "import broken_driver")
    assert imported.returncode == 1
    assert "broken-driver fails at import" in imported.stderr


def test_same_distribution_twice_on_sys_path_names_both(
    scenario: Venv, tmp_path: Path, fixture_wheels: Path
) -> None:
    newer = build_wheel(driver_project("dup-driver", "1.1.0").write(tmp_path), fixture_wheels)
    shadow = install_target(tmp_path / "shadow", [newer])
    listing = list_json(scenario, env={"PYTHONPATH": str(shadow)})
    (problem,) = [p for p in listing["problems"] if p["code"] == "duplicate-distribution"]
    assert problem["distributions"] == ["dup-driver"]
    used = shadow.resolve() / "dup_driver-1.1.0.dist-info"
    assert f"1.1.0 at {used} (used)" in problem["message"]
    site_copy = scenario.site_packages.resolve() / "dup_driver-1.0.0.dist-info"
    assert f"1.0.0 at {site_copy}" in problem["message"]
    # the copy first on sys.path is the candidate, as import would pick it
    assert by_label(listing)["dup_driver"]["version"] == "1.1.0"
    assert by_label(listing)["dup_driver"]["problems"] == ["duplicate-distribution"]
    assert by_label(listing)["files"]["problems"] == []
    table = scenario.run("mcs-host", "list", env={"PYTHONPATH": str(shadow)})
    assert "duplicate-distribution: dup-driver is installed 2 times" in table.stdout


def test_one_directory_reached_twice_is_not_a_duplicate(
    tmp_path: Path, fixture_wheels: Path
) -> None:
    wheel = build_wheel(driver_project("solo-driver").write(tmp_path), fixture_wheels)
    target = install_target(tmp_path / "site", [wheel])
    alias = tmp_path / "alias"
    alias.symlink_to(target, target_is_directory=True)
    found = discover([target, alias])
    assert found.problems == ()
    assert [c.label for c in found.candidates] == ["solo_driver"]


def test_two_distributions_claiming_one_label_are_both_named(
    tmp_path: Path, fixture_wheels: Path, scenario: Venv
) -> None:
    wheels = [
        build_wheel(driver_project(name, labels=("shared",)).write(tmp_path), fixture_wheels)
        for name in ("alpha-driver", "beta-driver")
    ]
    target = install_target(tmp_path / "site", wheels)
    found = discover([target])
    assert [(c.label, c.distribution) for c in found.candidates] == [
        ("shared", "alpha-driver"),
        ("shared", "beta-driver"),
    ]
    (problem,) = found.problems
    assert problem.code == "label-conflict"
    assert problem.distributions == ("alpha-driver", "beta-driver")
    assert "alpha-driver 1.0.0 (alpha_driver:Driver)" in problem.message
    assert "beta-driver 1.0.0 (beta_driver:Driver)" in problem.message
    assert all(found.problems_for(c) == (problem,) for c in found.candidates)
    table = scenario.run("mcs-host", "list", "--path", target)
    assert table.returncode == 0, table.stderr
    assert table.stdout.count("label-conflict") == 3  # two rows and the problem line


def test_order_does_not_depend_on_install_or_path_order(
    tmp_path: Path, fixture_wheels: Path
) -> None:
    first = install_target(
        tmp_path / "a",
        [
            build_wheel(
                driver_project("zeta-driver", labels=("zeta", "alpha")).write(tmp_path),
                fixture_wheels,
            )
        ],
    )
    second = install_target(
        tmp_path / "b",
        [
            build_wheel(
                driver_project("mid-driver", labels=("mid",)).write(tmp_path), fixture_wheels
            )
        ],
    )
    forward = discover([first, second])
    backward = discover([second, first])
    assert [c.label for c in forward.candidates] == ["alpha", "mid", "zeta"]
    assert forward.candidates == backward.candidates


def test_entry_points_that_name_no_object_are_reported(
    tmp_path: Path, fixture_wheels: Path
) -> None:
    project = Project(
        "odd-driver",
        files={"odd_driver/__init__.py": "class Driver: pass\n"},
        entry_points={
            ENTRY_POINT_GROUP: {
                "module-only": "odd_driver",
                "bad label": "odd_driver:Driver",
                "bad-path": "odd_driver:Driver-1",
                "fine": "odd_driver:Driver",
            }
        },
    )
    target = install_target(
        tmp_path / "site", [build_wheel(project.write(tmp_path), fixture_wheels)]
    )
    found = discover([target])
    problems = {(p.code, p.labels) for p in found.problems}
    assert problems == {
        ("invalid-entry-point", ("module-only",)),
        ("invalid-entry-point", ("bad-path",)),
        ("invalid-label", ("bad label",)),
    }
    (fine,) = found.get("fine")
    assert found.problems_for(fine) == ()
    messages = " ".join(p.message for p in found.problems)
    assert (
        "'module-only' of odd-driver 1.0.0: entry point 'odd_driver' does not name an object"
        in messages
    )


def test_a_malformed_entry_points_file_names_file_and_line(tmp_path: Path) -> None:
    # what an interrupted or hand-edited install leaves behind
    dist_info = tmp_path / "site" / "mangled_driver-2.0.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: mangled-driver\nVersion: 2.0.0\n"
    )
    (dist_info / "entry_points.txt").write_text(
        "[console_scripts]\nx = y:z\n\n[mcs.drivers]\nok = mangled:Driver\nno equals sign here\n"
    )
    found = discover([tmp_path / "site"])
    assert [c.label for c in found.candidates] == ["ok"]
    (problem,) = found.problems
    assert problem.code == "invalid-entry-point"
    assert f"{dist_info}/entry_points.txt line 6" in problem.message
    assert "'no equals sign here'" in problem.message


def test_metadata_that_is_not_utf8_names_the_file_and_the_rest_is_found(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _dist(site, "fine-1.0.dist-info", "Metadata-Version: 2.1\nName: fine\nVersion: 1.0\n")
    _dist(site, "latin-1.0.dist-info", "Metadata-Version: 2.1\nName: latin\nVersion: 1.0\n")
    _dist(site, "badmeta-1.0.dist-info", "Metadata-Version: 2.1\nName: badmeta\nVersion: 1.0\n")
    latin = site / "latin-1.0.dist-info"
    (latin / "entry_points.txt").write_bytes(b"[mcs.drivers]\ncaf\xe9 = m:Driver\n")
    (site / "badmeta-1.0.dist-info" / "METADATA").write_bytes(b"Name: bad\xff\nVersion: 1.0\n")
    found = discover([site])
    assert {c.label: c.version for c in found.candidates} == {"badmeta": "?", "fine": "1.0"}
    problems = {p.distributions: p for p in found.problems}
    assert problems[("latin",)].code == "unreadable-metadata"
    assert f"{latin}: cannot read entry_points.txt: " in problems[("latin",)].message
    assert problems[("badmeta",)].code == "unreadable-metadata"
    assert "badmeta-1.0.dist-info: cannot read METADATA: " in problems[("badmeta",)].message


def test_list_reports_no_drivers_plainly(scenario: Venv, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    table = scenario.run("mcs-host", "list", "--path", empty)
    assert table.returncode == 0
    assert table.stdout.splitlines() == [
        "No drivers in entry point group 'mcs.drivers' and no host plugins in "
        "'mcs.host_plugins' (1 search path entries).",
        "0 drivers, 0 host plugins, 0 problems. Registries: none.",
    ]
    assert list_json(scenario, "--path", str(empty))["drivers"] == []


def test_default_search_path_is_sys_path(scenario: Venv) -> None:
    done = scenario.run(
        "python",
        "-c",
        "import json, sys; from mcs_host import discover; "
        "print(json.dumps([list(discover().path), sys.path]))",
    )
    assert done.returncode == 0, done.stderr
    searched, sys_path = json.loads(done.stdout)
    assert searched == sys_path
    assert os.fspath(scenario.site_packages) in searched


# both run as python -c, so both search the same sys.path
FAST_CLI = (
    "import sys; from mcs_host.cli._launch import main; main(sys.argv[1:]); "
    "assert 'typer' not in sys.modules, 'the fast path handed the command line to typer'"
)
FULL_CLI = (
    "import sys; from mcs_host.cli._launch import _isolate; _isolate(); "  # as the console script
    "from mcs_host.cli.app import main; main(sys.argv[1:])"
)
HEAVY = ("typer", "click", "pydantic", "rich", "typing_extensions")


@pytest.mark.parametrize(
    "args",
    [(), ("--json",), ("--path", "SITE"), ("--json", "--path=SITE"), ("--path", "EMPTY", "--json")],
)
def test_the_fast_list_prints_what_the_full_command_line_prints(
    scenario: Venv, tmp_path: Path, args: tuple[str, ...]
) -> None:
    (tmp_path / "empty").mkdir()
    where = {"SITE": str(scenario.site_packages), "EMPTY": str(tmp_path / "empty")}
    argv = [arg.replace("SITE", where["SITE"]).replace("EMPTY", where["EMPTY"]) for arg in args]
    fast = scenario.run("python", "-c", FAST_CLI, "list", "--no-verify", *argv)
    full = scenario.run("python", "-c", FULL_CLI, "list", *argv, "--no-verify")
    assert (fast.returncode, fast.stderr) == (0, "")
    assert fast.stdout == full.stdout
    assert ("EMPTY" in args) == ("mcs_host_files" not in fast.stdout)


def test_the_fast_list_imports_neither_typer_nor_pydantic(scenario: Venv) -> None:
    code = (
        "import sys; from mcs_host.cli._launch import main; "
        "main(['list', '--no-verify', '--json']); "
        f"heavy = [m for m in sys.modules if m.partition('.')[0] in {HEAVY!r} "
        "or m == 'importlib.metadata']; "
        "print(sorted(heavy), file=sys.stderr)"
    )
    done = scenario.run("python", "-c", code)
    assert json.loads(done.stdout)["drivers"]
    assert done.stderr.strip() == "[]"


def test_list_arguments_the_fast_path_does_not_know_go_to_the_full_command_line(
    scenario: Venv, tmp_path: Path
) -> None:
    helped = scenario.run("mcs-host", "list", "--help")
    assert helped.returncode == 0
    assert helped.stdout.startswith("Usage: mcs-host list [OPTIONS]")
    a_file = tmp_path / "site.txt"
    a_file.write_text("not a directory")
    refused = scenario.run("mcs-host", "list", "--path", a_file)
    assert refused.returncode == 2
    assert "site.txt" in refused.stderr
    assert "is a file" in refused.stderr
    unknown = scenario.run("mcs-host", "list", "--jsn")
    assert unknown.returncode == 2
    assert "--jsn" in unknown.stderr


def _dist(site: Path, directory: str, header: str, body: str = "", pkg_info: bool = False) -> None:
    info = site / directory
    info.mkdir(parents=True)
    (info / ("PKG-INFO" if pkg_info else "METADATA")).write_bytes(
        (header + ("\n" + body if body else "")).encode()
    )
    label = directory.partition("-")[0].partition(".")[0].replace("_", "-")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{label} = m:Driver\n")


def test_names_and_versions_are_what_importlib_reads_from_the_metadata(tmp_path: Path) -> None:
    site = tmp_path / "site"
    classifiers = "".join(f"Classifier: Topic :: Item {n}\n" for n in range(400))
    _dist(site, "plain-1.0.dist-info", "Metadata-Version: 2.1\nName: plain\nVersion: 1.0\n")
    _dist(site, "crlf-2.0.dist-info", "Metadata-Version: 2.1\r\nName: crlf\r\nVersion: 2.0\r\n")
    # Version past the first 4 KiB read, after a long header
    _dist(
        site,
        "late-3.0.dist-info",
        f"Metadata-Version: 2.1\nName: late\n{classifiers}Version: 3.0\n",
    )
    # the body is not the header, even where it looks like one
    _dist(site, "nover-1.dist-info", "Name: nover\n", body="Version: 9.9\n")
    _dist(site, "odd_name-4.0.dist-info", "Name: Odd.Name_Here\nVersion: 4.0\n")
    _dist(site, "legacy.egg-info", "Name: legacy\nVersion: 0.5\n", pkg_info=True)
    _dist(site, "uni-1.0.dist-info", "Name: uni\nVersion: 1.0\nSummary: caf\u00e9 \u2615\n")
    found = discover([site])
    ours = {c.label: (c.distribution, c.version) for c in found.candidates}
    expected = {}
    for dist in importlib.metadata.distributions(path=[str(site)]):
        (entry,) = dist.entry_points
        meta = dist.metadata
        expected[entry.name] = (meta["Name"], meta["Version"] if "Version" in meta else "?")  # noqa: SIM401
    assert ours == expected
    assert ours["late"] == ("late", "3.0")
    assert ours["nover"] == ("nover", "?")
    assert ours["odd-name"] == ("Odd.Name_Here", "4.0")


def test_a_zip_file_on_the_path_is_searched_as_importlib_searches_it(tmp_path: Path) -> None:
    archive = tmp_path / "drivers.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped-1.2.dist-info/METADATA", "Name: zipped\nVersion: 1.2\n")
        z.writestr("zipped-1.2.dist-info/entry_points.txt", "[mcs.drivers]\nzipped = z:Driver\n")
    (candidate,) = discover([archive]).candidates
    assert (candidate.label, candidate.distribution, candidate.version) == (
        "zipped",
        "zipped",
        "1.2",
    )


def test_requirements_are_read_past_a_header_line_that_is_not_utf8(tmp_path: Path) -> None:
    from mcs_host import requires_dist

    info = tmp_path / "odd-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_bytes(
        b"Name: odd\nVersion: 1.0\nSummary: caf\xe9\nRequires-Dist: mcs-host>=0.1\n\nbody\n"
    )
    assert requires_dist(str(info)) == ["mcs-host>=0.1"]


def test_requirements_are_read_past_a_field_continued_by_a_line_of_blanks(
    tmp_path: Path,
) -> None:
    """scipy's METADATA continues its License field with lines of spaces before its
    Requires-Dist: only an empty line ends the header, as the email parser reads it."""
    info = tmp_path / "scipy-1.17.1.dist-info"
    info.mkdir()
    text = (
        "Metadata-Version: 2.1\nName: scipy\nVersion: 1.17.1\n"
        "License: Copyright (c) SciPy Developers.\n         All rights reserved.\n         \n"
        "         Redistribution and use ...\n"
        'Requires-Dist: numpy<2.7,>=1.26.4\nRequires-Dist: pytest; extra == "test"\n\nbody\n'
    )
    (info / "METADATA").write_text(text)
    dist = importlib.metadata.PathDistribution(info)
    assert (
        requires_dist(str(info))
        == dist.requires
        == [
            "numpy<2.7,>=1.26.4",
            'pytest; extra == "test"',
        ]
    )


def test_requirements_are_what_importlib_reads_for_every_installed_distribution() -> None:
    from mcs_host import installed_projects, requires_dist

    installed = installed_projects(sys.path)
    assert "pydantic" in installed
    assert "mcs-host" in installed
    for project, metadata_path in installed.items():
        dist = importlib.metadata.PathDistribution(Path(metadata_path))
        assert requires_dist(metadata_path) == (dist.requires or []), project
