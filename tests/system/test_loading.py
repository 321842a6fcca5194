"""``mcs-host load``, ``call`` and ``run`` on real installed fixture drivers, pinned with lock.

One venv holds a good driver and one driver per way of failing; each writes a marker file named
after itself when its module is imported, so a test can see which driver code ran.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from distbuild import Project, Venv, build_wheel, pip
from scenes import Scene

pytestmark = pytest.mark.venv

PREAMBLE = """\
import pathlib, time
pathlib.Path({markers!r}, {name!r}).write_text("imported")
from mcs_host import DriverMeta, MCSToolDriver, SupportsHealthcheck, Tool
from mcs_host.kit import manifest_meta
"""

GOOD = """
class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def __init__(self, greeting="hello"):
        self.greeting = greeting

    def list_tools(self):
        return [Tool(name="greet", description="Greet someone.", parameters=[
            {"name": "who", "description": "Whom to greet.", "required": True,
             "schema": {"type": "string"}}])]

    def execute_tool(self, tool_name, arguments):
        return f"{self.greeting} {arguments['who']}"
"""

BODIES = {
    "good": GOOD,
    "oldhost": GOOD,
    "skew": GOOD,
    "liar": GOOD,
    "importboom": "raise ImportError('the backend library is missing')\n",
    "initboom": GOOD.replace("self.greeting = greeting", 'raise OSError("no database")'),
    "toolsboom": GOOD.replace(
        "return [Tool(", "raise RuntimeError('spec unreachable')\n        return [Tool("
    ),
    "hang": GOOD.replace("return [Tool(", "time.sleep(30)\n        return [Tool("),
    "badtools": GOOD.replace("return [Tool(", "return [{'name': 'greet'}]\n        return [Tool("),
    "sick": GOOD.replace(
        "class Driver(MCSToolDriver):", "class Driver(MCSToolDriver, SupportsHealthcheck):"
    )
    + "\n    def healthcheck(self):\n"
    + "        return {'status': 'ERROR', 'reason': 'database down'}\n",
    "badmeta": GOOD.replace(
        'meta = manifest_meta(__package__, "Driver")',
        'meta = {"id": "badmeta-id", "name": "badmeta", "version": "1.0"}',
    ),
}
META_CHANGES: dict[str, dict[str, Any]] = {
    "skew": {"version": "1.0.1"},
    "liar": {"capabilities": ["healthcheck"]},
    "sick": {"capabilities": ["healthcheck"]},
}
REQUIRES = {"oldhost": ["mcs-host<0.1"]}


def project(name: str, markers: Path) -> Project:
    package = f"{name}_driver"
    files = {
        f"{package}/__init__.py": PREAMBLE.format(markers=str(markers), name=name) + BODIES[name]
    }
    if name != "badmeta":
        meta = {"id": f"{name}-id", "name": name, "version": "1.0.0", **META_CHANGES.get(name, {})}
        files[f"{package}/mcs-driver.json"] = json.dumps(
            {"format": "mcs-driver-manifest/1", "drivers": {"Driver": meta}}
        )
    return Project(
        f"{name}-driver",
        files=files,
        entry_points={"mcs.drivers": {name: f"{package}:Driver"}},
        dependencies=REQUIRES.get(name, ["mcs-host"]),
    )


AUDIT_PLUGIN = """\
import json, pathlib
from mcs_host import hookimpl

LOG = pathlib.Path({log!r})

@hookimpl
def mcs_host_after_tool_call(call, result, error):
    with LOG.open("a") as f:
        entry = {{"tool": call.name, "result": result, "error": repr(error) if error else None}}
        f.write(json.dumps(entry) + "\\n")
"""

FORMAT_PLUGIN = """\
import json, re
from mcs_host import TextCall, TextDetection, TextFormat, hookimpl

LINE = re.compile(r"^ACME>> (\\w+) (\\{.*\\})$", re.MULTILINE)


def acme(text, known):
    calls = [TextCall(name, json.loads(body)) for name, body in LINE.findall(text)]
    return TextDetection(tuple(calls), "acme") if calls else None


@hookimpl
def mcs_host_codecs():
    return [TextFormat("acme", acme, markers=("ACME>>",), order=150)]
"""

CLASHING_PLUGIN = """\
from mcs_host import TextFormat, hookimpl

@hookimpl
def mcs_host_codecs():
    return [TextFormat("mistral", lambda text, known: None), "not a format"]
"""

ROGUE_PLUGIN = """\
from mcs_host import hookimpl

@hookimpl
def mcs_host_before_everything():
    pass
"""


@dataclass(frozen=True)
class LoadingScene(Scene):
    """The venv with every fixture driver and host plugin, pinned by ``registry``; each
    driver writes a file named after itself in ``markers`` when its module is imported."""

    markers: Path
    registry: Path


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> LoadingScene:
    root = tmp_path_factory.mktemp("loading")
    markers = root / "markers"
    markers.mkdir()
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    wheels = {
        name: build_wheel(project(name, markers).write(root / "src"), root / "wheels")
        for name in BODIES
    }
    plugins = [
        Project(
            "audit-plugin",
            files={"audit_plugin/__init__.py": AUDIT_PLUGIN.format(log=str(root / "audit.log"))},
            entry_points={"mcs.host_plugins": {"audit": "audit_plugin"}},
        ),
        Project(
            "rogue-plugin",
            files={"rogue_plugin/__init__.py": ROGUE_PLUGIN},
            entry_points={"mcs.host_plugins": {"rogue": "rogue_plugin"}},
        ),
        Project(
            "acme-format",
            files={"acme_format/__init__.py": FORMAT_PLUGIN},
            entry_points={"mcs.host_plugins": {"acme": "acme_format"}},
        ),
        Project(
            "clashing-format",
            files={"clashing_format/__init__.py": CLASHING_PLUGIN},
            entry_points={"mcs.host_plugins": {"clash": "clashing_format"}},
        ),
    ]
    plugin_wheels = [build_wheel(p.write(root / "src"), root / "wheels") for p in plugins]
    pip(
        "install",
        "--no-index",
        "--no-deps",
        *map(str, [*wheels.values(), *plugin_wheels]),
        python=venv.python,
    )
    scene = LoadingScene(root, venv, markers, root / "registry.json")
    registry = scene.registry
    locked = scene.host("lock", "--registry", registry, "--id", "badmeta=badmeta-id")
    assert locked.returncode == 0, locked.stderr
    # a host plugin is pinned only by name
    ids = {
        "audit": "audit-plugin-id",
        "rogue": "rogue-plugin-id",
        "acme": "acme-format-id",
        "clash": "clashing-format-id",
    }
    named = [w for label, i in ids.items() for w in ("--plugin", label, "--id", f"{label}={i}")]
    locked = scene.host("lock", "--registry", registry, *named)
    assert locked.returncode == 0, locked.stderr
    assert not list(markers.iterdir()), "lock imported a driver"
    return scene


Loader = Callable[..., tuple[int, dict[str, Any]]]


@pytest.fixture
def load(scene: LoadingScene, tmp_path: Path) -> Loader:
    """Run ``mcs-host load --json`` in the venv with a config file; markers start empty."""

    def run(*args: str, config: str = "") -> tuple[int, dict[str, Any]]:
        for marker in scene.markers.iterdir():
            marker.unlink()
        config_file = tmp_path / "mcs-host.toml"
        config_file.write_text(
            f"registries = [{str(scene.registry)!r}]\nautoload = true\n{config}\n"
            "[drivers.hang]\ntimeout = 1\n"
        )  # only the driver that hangs gets a short timeout: a per-driver setting must reach it;
        # the file names it, so it says autoload = true to mount every installed driver too
        done = scene.host("load", "--json", "--config", config_file, *args)
        assert done.stdout, done.stderr
        return done.returncode, json.loads(done.stdout)

    return run


def statuses(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {d["label"]: (d["status"], d["reason"]) for d in report["drivers"]}


def imported(scene: LoadingScene) -> set[str]:
    return {p.name for p in scene.markers.iterdir()}


def test_each_failure_is_isolated_while_the_other_drivers_mount(
    load: Loader, scene: LoadingScene
) -> None:
    code, report = load("--healthcheck")
    # the configuration names only hang (for its timeout): its failure fails the command,
    # the others were found by autoload and are reported
    assert code == 1
    assert report["errors"] == ["hang: timeout: list_tools did not return within 1 s"]
    assert statuses(report) == {
        "badmeta": ("rejected", "invalid-meta"),
        "badtools": ("failed", "invalid-tools"),
        "good": ("mounted", "mounted"),
        "hang": ("failed", "timeout"),
        "importboom": ("failed", "import-error"),
        "initboom": ("failed", "constructor-error"),
        "liar": ("rejected", "false-capability"),
        "oldhost": ("rejected", "incompatible-host"),
        "sick": ("failed", "unhealthy"),
        "skew": ("mounted", "mounted"),
        "toolsboom": ("failed", "list-tools-error"),
    }
    by_label = {d["label"]: d for d in report["drivers"]}
    assert by_label["hang"]["message"] == "list_tools did not return within 1 s"
    assert by_label["oldhost"]["message"] == "requires mcs-host<0.1; this host is 0.1.0"
    assert (
        "meta.version 1.0.1 differs from the distribution's 1.0.0"
        in by_label["skew"]["warnings"][0]
    )
    assert (
        "ImportError: the backend library is missing (at __init__.py:5 in <module>)"
        in by_label["importboom"]["message"]
    )
    assert "'reason': 'database down'" in by_label["sick"]["message"]
    assert (by_label["good"]["verification"], by_label["good"]["trust"]) == (
        "pinned",
        "community",
    )
    assert set(by_label["good"]["timings_ms"]) >= {
        "verify",
        "compatibility",
        "dependencies",
        "import",
        "instantiate",
        "meta",
        "list_tools",
    }
    # the incompatible driver was refused from metadata, before its code could run
    assert "oldhost" not in imported(scene)
    assert "good" in imported(scene)


def test_strict_mode_makes_every_failure_an_error(load: Loader) -> None:
    code, report = load("--strict", "good", "skew", "liar")
    assert code == 1
    assert statuses(report)["skew"] == ("rejected", "version-mismatch")
    assert report["errors"] == [
        "liar: false-capability: declares the capability 'healthcheck' but does not implement "
        "SupportsHealthcheck (healthcheck)",
        "skew: version-mismatch: meta.version 1.0.1 differs from the distribution's 1.0.0",
        "host plugin rogue: invalid-plugin: host plugin 'rogue' implements unknown hook "
        "'mcs_host_before_everything'; known hooks: mcs_host_after_tool_call, mcs_host_codecs, "
        "mcs_host_consent, mcs_host_loaded, mcs_host_verify",
        "host plugin clash: mcs_host_codecs returned 'not a format', not a TextFormat",
    ]


def test_a_client_asking_for_one_driver_imports_only_that_one(
    load: Loader, scene: LoadingScene
) -> None:
    code, report = load("good")
    assert code == 0
    assert statuses(report)["good"] == ("mounted", "mounted")
    assert {s for s, _ in statuses(report).values()} == {"mounted", "skipped"}
    assert imported(scene) == {"good"}


def test_deny_beats_allow_for_labels_and_distributions(load: Loader, scene: LoadingScene) -> None:
    code, report = load(
        config='allow = ["good", "liar-driver", "skew"]\ndeny = ["good", "skew-driver"]\n'
    )
    assert code == 1  # nothing mounted: the one driver allowed and not denied was rejected
    assert [e.split(":")[0] for e in report["errors"]] == ["nothing mounted"]
    found = statuses(report)
    assert found["good"] == ("skipped", "denied")
    assert found["skew"] == ("skipped", "denied")
    assert found["liar"] == ("rejected", "false-capability")
    assert found["hang"] == ("skipped", "not-allowed")
    assert imported(scene) == {"liar"}


def test_required_drivers_missing_or_too_old_are_errors(load: Loader, scene: LoadingScene) -> None:
    code, report = load("good", config='require = { ghost = "", good = ">=1" }\n')
    assert code == 1
    assert report["errors"] == ["required driver ghost is not installed"]
    code, report = load("good", config='require = { good = ">=2" }\n')
    assert code == 1
    assert report["errors"] == [
        "required driver good >=2 did not mount: required-version: good 1.0.0 does not satisfy "
        "the required version >=2"
    ]
    assert imported(scene) == set()  # refused from metadata, before import


def test_one_driver_mounted_twice_with_different_settings(
    scene: LoadingScene, tmp_path: Path
) -> None:
    config = tmp_path / "mcs-host.toml"
    config.write_text(
        f"registries = [{str(scene.registry)!r}]\nautoload = false\n"
        '[drivers.formal]\ndriver = "good"\nsettings = { greeting = "good day" }\n'
        '[drivers.casual]\ndriver = "good"\nsettings = { greeting = "hi" }\n'
    )
    done = scene.host("load", "--config", config)
    assert done.returncode == 0, done.stdout
    assert "  casual__greet  (casual: greet)\n  formal__greet  (formal: greet)" in done.stdout
    called = scene.host("call", "formal__greet", "--args", '{"who": "Ann"}', "--config", config)
    assert called.returncode == 0, called.stderr
    assert called.stdout == "good day Ann\n"
    ran = scene.host(
        "run",
        '{"tool": "casual__greet", "arguments": {"who": "Bo"}}',
        "--config",
        config,
    )
    response = json.loads(ran.stdout)
    assert (response["call_executed"], response["tool_call_result"]) == (True, "hi Bo")
    failed = scene.host("run", '{"tool": "greet", "arguments": {}}', "--config", config)
    assert failed.returncode == 1
    assert json.loads(failed.stdout)["call_detail"] == "unknown tool 'greet'"


def test_host_plugins_are_verified_audit_calls_and_unknown_hooks_are_refused(
    scene: LoadingScene, tmp_path: Path
) -> None:
    config = tmp_path / "mcs-host.toml"
    config.write_text(f"registries = [{str(scene.registry)!r}]\nautoload = false\n[drivers.good]\n")
    done = scene.host("load", "--json", "--config", config)
    plugins = {p["label"]: p for p in json.loads(done.stdout)["plugins"]}
    assert (plugins["audit"]["status"], plugins["audit"]["verification"]) == (
        "mounted",
        "pinned",
    )
    assert (plugins["rogue"]["status"], plugins["rogue"]["reason"]) == ("failed", "invalid-plugin")
    assert "implements unknown hook 'mcs_host_before_everything'" in plugins["rogue"]["message"]
    log = scene.root / "audit.log"
    log.unlink(missing_ok=True)
    ran = scene.host("run", '{"tool": "greet", "arguments": {"who": "Cy"}}', "--config", config)
    assert ran.returncode == 0, ran.stderr
    (line,) = log.read_text().splitlines()
    assert json.loads(line) == {"tool": "greet", "result": "hello Cy", "error": None}


def test_a_host_plugin_adds_a_text_format_and_a_broken_one_is_named(
    scene: LoadingScene, tmp_path: Path
) -> None:
    """The example of a pluggable format: an installed, pinned plugin teaches the host a
    line format through the mcs_host_codecs hook; a plugin whose formats clash is named."""
    config = tmp_path / "mcs-host.toml"
    config.write_text(f"registries = [{str(scene.registry)!r}]\nautoload = false\n[drivers.good]\n")
    ran = scene.host("run", 'Sure.\nACME>> greet {"who": "Di"}', "--config", config)
    assert ran.returncode == 0, ran.stderr
    response = json.loads(ran.stdout)
    assert (response["call_executed"], response["tool_call_result"]) == (True, "hello Di")
    done = scene.host("load", "--json", "--config", config)
    plugins = {p["label"]: p for p in json.loads(done.stdout)["plugins"]}
    assert plugins["acme"]["warnings"] == []
    (warning,) = plugins["clash"]["warnings"]
    assert warning == "mcs_host_codecs returned 'not a format', not a TextFormat"
    strict = scene.host("load", "--json", "--strict", "--config", config)
    assert strict.returncode == 1
    errors = json.loads(strict.stdout)["errors"]
    assert f"host plugin clash: {warning}" in errors


def test_the_prompt_shows_the_final_tool_names(load: Loader) -> None:
    code, report = load("good", "skew", "--prompt")
    assert code == 0
    assert [t["name"] for t in report["tools"]] == ["good__greet", "skew__greet"]
    assert '"name": "good__greet"' in report["system_prompt"]


def test_the_demo_loads_the_bundled_drivers_and_runs_its_sample(
    tmp_path: Path, wheelhouse: Path, uv_cache: Path
) -> None:
    import importlib.util

    from distbuild import ROOT

    spec = importlib.util.spec_from_file_location("demo", ROOT / "scripts" / "demo.py")
    assert spec is not None
    assert spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    venv = Venv.create(tmp_path / "venv")
    venv.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    venv.install("mcs-host-files", "mcs-host-csv", wheelhouse=wheelhouse)
    env = {"MCS_HOST_STATE_DIR": str(tmp_path / "state")}
    config = ROOT / demo.CONFIG
    loaded = venv.run(
        "sh", "-c", f'cd "{ROOT}" && mcs-host load --json --config "{config}"', env=env
    )
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert statuses(json.loads(loaded.stdout)) == {
        "csv": ("mounted", "mounted"),
        "files": ("mounted", "mounted"),
    }
    ran = venv.run(
        "sh",
        "-c",
        f'cd "{ROOT}" && mcs-host run --config "{config}" "$SAMPLE"',
        env={**env, "SAMPLE": demo.SAMPLE_OUTPUT},
    )
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)["tool_call_result"]
    assert (result["count"], result["sum"], result["max"]) == (8, 773.0, 210.0)
