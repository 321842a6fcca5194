"""check_driver, the mcs_conformance fixture and ``mcs-host check``: what they find in drivers."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from sample_drivers import (
    BrokenConstructor,
    BrokenTools,
    Calculator,
    Echo,
    FalseClaim,
    Greeter,
    Healthy,
    InvalidTools,
    Speaker,
)

from mcs_host import (
    DriverMeta,
    DriverResponse,
    MCSToolDriver,
    Tool,
    ToolParameter,
    check_driver,
)

pytest_plugins = ["pytester"]


def codes(results: tuple[Any, ...], level: str = "error") -> list[str]:
    return [r.code for r in results if r.level == level]


@pytest.mark.parametrize("driver", [Calculator, Echo, Speaker, Healthy, Greeter])
def test_well_made_drivers_have_no_errors(driver: type) -> None:
    results = check_driver(driver)
    assert codes(results) == [], results
    # they live in a test module, not a package with a manifest, and say nothing of trust
    assert {"no-manifest", "no-trust-manifest"} <= set(codes(results, "warning"))


class Rooted(Calculator):
    """A driver that cannot be made without its settings."""

    def __init__(self, root: str) -> None:
        super().__init__()
        self.root = root


def test_an_instance_is_checked_as_it_is() -> None:
    # the class alone cannot be made; an instance is used as it is, never made again
    assert codes(check_driver(Rooted)) == ["constructor"]
    driver = Rooted("/srv")
    assert codes(check_driver(driver)) == []
    assert driver.calls  # the checks ran against this very instance


def test_settings_reach_the_constructor() -> None:
    assert codes(check_driver(Healthy, {"status": "OK"})) == []
    (result,) = check_driver(Healthy, {"colour": "red"})
    assert result.code == "constructor"
    assert "colour" in result.message


def test_a_constructor_that_raises() -> None:
    (result,) = check_driver(BrokenConstructor)
    assert (result.level, result.code) == ("error", "constructor")
    assert "RuntimeError: cannot reach the backend" in result.message


def test_list_tools_that_raises() -> None:
    assert "list-tools" in codes(check_driver(BrokenTools))


def test_an_invalid_tool() -> None:
    results = check_driver(InvalidTools)
    assert codes(results) == ["invalid-tool"]
    assert results[0].message.startswith("tool 0:")


def test_a_false_capability_claim() -> None:
    results = check_driver(FalseClaim)
    assert codes(results) == ["false-capability"]
    assert "healthcheck" in results[0].message


class _Loose(MCSToolDriver):
    """Everything a host has to work around."""

    meta = DriverMeta(id="loose-0001", name="Loose", version="1.0.0", trust={"publisher": "Us"})

    def list_tools(self) -> list[Tool]:
        return [
            Tool(
                name="look up",
                description="Look a thing up.",
                parameters=(
                    ToolParameter(name="thing", description="", required=True),
                    ToolParameter(name="depth", description="How deep.", schema={"minimum": 1}),
                ),
            ),
            Tool(name="dup", description="First."),
            Tool(name="dup", description="Second."),
        ]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        if tool_name == "look up":
            return {"found": object()}
        if tool_name == "dup":
            raise KeyError("dup is broken")
        return None  # an unknown tool "succeeds"


def test_what_a_host_would_have_to_work_around() -> None:
    results = check_driver(_Loose)
    by_code = {r.code: r for r in results}
    assert codes(results) == [
        "duplicate-tool",
        "no-schema",
        "untyped-schema",
        "unknown-tool-result",
        "missing-argument-result",
        "result-not-json",
    ]
    assert "'thing'" in by_code["no-schema"].message
    assert "'depth'" in by_code["untyped-schema"].message
    assert {"tool-name", "undescribed-parameter", "sample-raised"} <= set(codes(results, "warning"))
    assert "KeyError" in by_code["sample-raised"].message
    # errors come first
    assert [r.level for r in results] == sorted(
        (r.level for r in results), key=["error", "warning", "info"].index
    )


class _ChattyStandalone(Greeter):
    def process_llm_response(
        self, llm_response: str | dict[str, Any], streaming: bool = False
    ) -> DriverResponse:
        return DriverResponse(messages=[{"role": "assistant", "content": "I saw that."}])


def test_a_standalone_driver_must_pass_a_plain_answer_through() -> None:
    assert codes(check_driver(_ChattyStandalone)) == ["pass-through"]


def test_not_a_driver() -> None:
    assert codes(check_driver(object())) == ["not-a-driver"]


def _driver_package(root: Path, name: str, manifest_version: str) -> None:
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent(
            """
            from mcs_host import DriverMeta, MCSToolDriver, Tool

            class Driver(MCSToolDriver):
                meta = DriverMeta(
                    id="pkg-0001", name="Pkg", version="1.0.0", trust={"publisher": "Us"}
                )

                def list_tools(self):
                    return [Tool(name="ping", description="Answer pong.")]

                def execute_tool(self, tool_name, arguments):
                    from mcs_host import UnknownToolError
                    if tool_name != "ping":
                        raise UnknownToolError(tool_name, ["ping"])
                    return "pong"
            """
        )
    )
    manifest = {
        "format": "mcs-driver-manifest/1",
        "drivers": {
            "Driver": {
                "id": "pkg-0001",
                "name": "Pkg",
                "version": manifest_version,
                "trust": {"publisher": "Us"},
            }
        },
    }
    (package / "mcs-driver.json").write_text(json.dumps(manifest))


def test_the_manifest_must_say_what_the_class_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _driver_package(tmp_path, "agreeing_pkg", "1.0.0")
    _driver_package(tmp_path, "drifting_pkg", "0.9.0")
    monkeypatch.syspath_prepend(str(tmp_path))
    agreeing = importlib.import_module("agreeing_pkg").Driver
    drifting = importlib.import_module("drifting_pkg").Driver

    assert check_driver(agreeing) == ()
    (result,) = check_driver(drifting)
    assert (result.level, result.code) == ("error", "manifest-mismatch")
    assert "mcs-driver.json" in result.message


def test_a_manifest_that_is_not_valid_is_an_error_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _driver_package(tmp_path, "garbled_pkg", "1.0.0")
    (tmp_path / "garbled_pkg" / "mcs-driver.json").write_text('{"format": "nope"}')
    monkeypatch.syspath_prepend(str(tmp_path))
    (result,) = check_driver(importlib.import_module("garbled_pkg").Driver)
    assert (result.level, result.code) == ("error", "manifest")
    assert result.message.startswith("garbled_pkg/mcs-driver.json is not a valid manifest")


class _ExitingConstructor(Calculator):
    def __init__(self) -> None:
        raise SystemExit(0)


class _RaisingMeta(Calculator):
    @property
    def meta(self) -> DriverMeta:  # type: ignore[override]
        raise SystemExit("no meta today")


def test_a_driver_that_exits_is_an_error_not_a_pass() -> None:
    (made,) = check_driver(_ExitingConstructor)
    assert (made.code, made.message) == ("constructor", "raised SystemExit: 0")
    assert "invalid-meta" in codes(check_driver(_RaisingMeta))


def test_the_pytest_fixture_fails_a_driver_that_breaks_the_contract(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a fresh pytest process: mcs-host's plugin comes from its pytest11 entry point
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[1]))  # tests/: sample_drivers
    pytester.makepyfile(
        test_drivers="""
        from sample_drivers import Calculator, FalseClaim

        def test_good(mcs_conformance):
            results = mcs_conformance(Calculator)
            assert "no-manifest" in [r.code for r in results]

        def test_bad(mcs_conformance):
            mcs_conformance(FalseClaim)
        """
    )
    done = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    done.assert_outcomes(passed=1, failed=1)
    done.stdout.fnmatch_lines(["*the driver breaks the MCS contract:*", "*false-capability*"])


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcs_host", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        timeout=120,
    )


def test_check_an_installed_driver_by_label() -> None:
    # --set takes load's form, LABEL.KEY=VALUE; a bare KEY=VALUE is for every driver checked
    for setting in ("files.root=.", "root=."):
        done = _cli("check", "files", "--set", setting)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.startswith("files: passes")
    bad = _cli("check", "files", "--set", "root")
    assert bad.returncode == 2
    assert "'root' is not LABEL.KEY=VALUE" in bad.stderr
    other = _cli("check", "files", "--set", "csv.root=.")
    assert other.returncode == 2
    assert "--set csv.root: no driver checked here has the label 'csv'" in other.stderr


def test_load_settings_must_name_a_driver() -> None:
    done = _cli("load", "--set", "nodot=1")
    assert done.returncode == 2
    assert "'nodot' names no driver setting: use LABEL.KEY=VALUE" in done.stderr


def test_check_reports_a_driver_that_exits_at_import_and_checks_the_rest(
    tmp_path: Path,
) -> None:
    _driver_package(tmp_path, "fine_cli_pkg", "1.0.0")
    (tmp_path / "quitter.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "two"\nversion = "1.0.0"\n'
        '[project.entry-points."mcs.drivers"]\n'
        'fine = "fine_cli_pkg:Driver"\nquit = "quitter:Driver"\n'
    )
    done = _cli("check", str(tmp_path))
    assert done.returncode == 1
    assert "fine: passes" in done.stdout
    assert "quit: breaks the contract\n  ERROR import: quitter:Driver: SystemExit(0)" in done.stdout


def test_check_reports_errors_and_exits_1(tmp_path: Path) -> None:
    _driver_package(tmp_path, "drifting_cli_pkg", "0.9.0")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "drifting"\nversion = "1.0.0"\n'
        '[project.entry-points."mcs.drivers"]\ndrift = "drifting_cli_pkg:Driver"\n'
    )
    done = _cli("check", str(tmp_path))
    assert done.returncode == 1
    assert "drift: breaks the contract" in done.stdout
    assert "ERROR manifest-mismatch" in done.stdout


def test_check_names_what_it_cannot_find(tmp_path: Path) -> None:
    done = _cli("check", "no-such-driver")
    assert done.returncode == 2
    assert "no-such-driver" in done.stderr
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    done = _cli("check", str(tmp_path))
    assert done.returncode == 2
    assert "mcs.drivers" in done.stderr
