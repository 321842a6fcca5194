"""What sits in the working directory is not trust, and every input is bounded and typed.

A configuration or registry in the current directory cannot choose registries or relax the
policy unless the user names it or approves the directory; deny and allow settle a label
conflict; metadata files, manifests, signatures, configuration files and command-line JSON
that are FIFOs, devices, symlinks to them, too big or nested too deep end in one clear line
naming the file or option, never a traceback or a hang. Every fixture driver writes a marker
file when its code runs.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from distbuild import Project, Venv, build_wheel, uv_pip
from hostrun import driver_project, entry, pin, write_registry
from scenes import MarkedScene, Scene

pytestmark = pytest.mark.venv

PINNED_ID = "7c1f0000-0000-4000-8000-0000000000f1"
LOOSE_ID = "7c1f0000-0000-4000-8000-0000000000f2"
DEEP = "[" * 5000 + "]" * 5000


@dataclass(frozen=True)
class InputsScene(MarkedScene):
    """The venv of :func:`scene`: ``registry`` pins its driver ``pinned``; commands run in
    ``project``."""

    registry: Path
    project: Path


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> InputsScene:
    """A venv with a pinned driver (``pinned``) and one no registry knows (``loose``), a
    registry pinning the first, and a project directory to run commands in."""
    root = tmp_path_factory.mktemp("inputs")
    marker = root / "ran.txt"
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    projects = [
        driver_project("pinned-driver", marker, PINNED_ID, label="pinned"),
        driver_project("loose-driver", marker, LOOSE_ID, label="loose"),
    ]
    wheels = [build_wheel(p.write(root / "src"), root / "wheels") for p in projects]
    uv_pip("install", "--no-index", "--no-deps", *map(str, wheels), python=venv.python)
    registry = write_registry(
        root / "registry.json",
        {
            PINNED_ID: entry(
                "pinned-driver",
                "pinned",
                "pinned_driver:Driver",
                releases={"1.0.0": pin(wheels[0])},
            )
        },
    )
    project = root / "project"
    project.mkdir()
    return InputsScene(root, venv, marker, registry, project)


def run(
    scene: InputsScene, tmp_path: Path, *args: str | Path, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``mcs-host ARGS`` in the scene's project directory (or ``cwd``), with the test's own
    state directory."""
    return scene.host(*args, state=tmp_path / "state", cwd=cwd or scene.project)


def statuses(done: subprocess.CompletedProcess[str]) -> dict[str, tuple[str, str]]:
    assert done.stdout, done.stderr
    report = json.loads(done.stdout)
    return {d["label"]: (d["status"], d["reason"]) for d in report["drivers"]}


# -- the working directory is not trust ------------------------------------------------------

RELAXING = """
registries = ["{registry}"]
[trust]
allow_unverified = true
"""


@pytest.mark.parametrize("file", ["mcs-host.toml", "pyproject.toml"])
def test_a_project_configuration_cannot_relax_trust_until_its_directory_is_approved(
    scene: InputsScene, tmp_path: Path, file: str
) -> None:
    project = scene.project
    text = RELAXING.format(registry=scene.registry)
    if file == "pyproject.toml":
        text = "[tool.mcs-host]\n" + text.replace("[trust]", "[tool.mcs-host.trust]")
    config = project / file
    config.write_text(text)
    scene.ran()
    try:
        done = run(scene, tmp_path, "load", "--json")
        # its registry and its policy are ignored: loose is unverified, and refused
        assert statuses(done)["loose"] == ("rejected", "not-in-registry")
        assert statuses(done)["pinned"] == ("rejected", "not-in-registry")
        note = (
            f"note: {config}: ignored registries, trust.allow_unverified: a configuration "
            "found in the working directory may not set what could make the host run, reach "
            "or tell the model more than your own settings would (the directory is not "
            f"approved); to use it, run `mcs-host allow {project}` or pass --config {config}"
        )
        assert note in done.stderr
        assert json.loads(done.stdout)["config_notes"] == [note.removeprefix("note: ")]
        assert scene.ran() == []
        # the user's consent: the directory, as it is now
        allowed = run(scene, tmp_path, "allow", project)
        assert allowed.returncode == 0, allowed.stderr
        assert allowed.stdout.startswith(f"approved {project}:\n  {file} (sha256 ")
        done = run(scene, tmp_path, "load", "--json")
        assert statuses(done) == {"loose": ("mounted", "mounted"), "pinned": ("mounted", "mounted")}
        assert "note:" not in done.stderr
        assert sorted(scene.ran()) == ["loose-driver ran", "pinned-driver ran"]
        # a change lapses the approval
        config.write_text(text + "\n# edited\n")
        done = run(scene, tmp_path, "load", "--json")
        assert statuses(done)["loose"] == ("rejected", "not-in-registry")
        assert "its files changed since the directory was approved" in done.stderr
        assert scene.ran() == []
        # naming the file is consent too
        named = run(scene, tmp_path, "load", "--json", "--config", config)
        assert statuses(named)["loose"] == ("mounted", "mounted")
        assert run(scene, tmp_path, "allow", "--revoke", project).stdout == f"revoked {project}\n"
    finally:
        config.unlink()
        scene.ran()


CONSENT_ID = "7c1f0000-0000-4000-8000-0000000000f3"
MARKING_ID = "7c1f0000-0000-4000-8000-0000000000f4"
DENYING = """
from mcs_host.loading.hooks import hookimpl


@hookimpl
def mcs_host_consent(call):
    return "the consent plugin says no"
"""
MARKING = """
from mcs_host import MCSToolDriver, Tool
from mcs_host.kit import manifest_meta


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [Tool(name="mark", description="Write the marker.")]

    def execute_tool(self, tool_name, arguments):
        open({marker!r}, "a").write("the tool ran\\n")
        return "marked"
"""


def test_a_project_file_cannot_turn_off_the_plugin_that_denies_a_call(
    wheelhouse: Path, uv_cache: Path, tmp_path: Path
) -> None:
    """A real pinned host plugin denies every call; a project file in the working directory
    says ``plugins = false``: until the directory is approved the plugin is still asked, and
    the tool it denies (which writes a marker) never runs."""
    marker = tmp_path / "ran.txt"
    venv = Venv.create(tmp_path / "venv")
    venv.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    base = driver_project("marking-driver", marker, MARKING_ID, label="marking")
    driver = Project(
        base.name,
        files={**base.files, "marking_driver/__init__.py": MARKING.format(marker=str(marker))},
        entry_points=base.entry_points,
        dependencies=["mcs-host"],
    )
    plugin = Project(
        "denying-plugin",
        files={"denying_plugin/__init__.py": DENYING},
        entry_points={"mcs.host_plugins": {"denying": "denying_plugin"}},
        dependencies=["mcs-host"],
    )
    wheels = [build_wheel(p.write(tmp_path / "src"), tmp_path / "wheels") for p in (driver, plugin)]
    uv_pip("install", "--no-index", "--no-deps", *map(str, wheels), python=venv.python)
    registry = write_registry(
        tmp_path / "registry.json",
        {
            MARKING_ID: entry(
                "marking-driver",
                "marking",
                "marking_driver:Driver",
                releases={"1.0.0": pin(wheels[0])},
            ),
            CONSENT_ID: entry(
                "denying-plugin",
                "denying",
                "denying_plugin",
                group="mcs.host_plugins",
                releases={"1.0.0": pin(wheels[1])},
            ),
        },
    )
    project = tmp_path / "project"
    project.mkdir()
    config = project / "mcs-host.toml"
    config.write_text("plugins = false\n")
    scene, state = Scene(tmp_path, venv), tmp_path / "state"

    def call() -> subprocess.CompletedProcess[str]:
        return scene.host(
            "call", "mark", "--json", "--registry", registry, state=state, cwd=project
        )

    done = call()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the consent plugin says no" in done.stdout
    assert f"note: {config}: ignored plugins: " in done.stderr
    assert not marker.exists()
    loaded = scene.host("load", "--json", "--registry", registry, state=state, cwd=project)
    plugins = json.loads(loaded.stdout)["plugins"]
    assert [(p["label"], p["status"]) for p in plugins] == [("denying", "mounted")]
    assert not marker.exists()
    # approved, the directory's plugins = false is the user's: the plugin is not loaded
    allowed = scene.host("allow", project, state=state)
    assert allowed.returncode == 0, allowed.stderr
    done = call()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "note:" not in done.stderr
    assert marker.read_text() == "the tool ran\n"


def test_a_registry_in_the_working_directory_is_never_used_unless_named(
    scene: InputsScene, tmp_path: Path
) -> None:
    project = scene.project
    planted = project / "registry.json"
    planted.write_text(scene.registry.read_text())
    scene.ran()
    try:
        done = run(scene, tmp_path, "verify", "--json")
        assert done.returncode == 1
        drivers = {d["label"]: d["verification"] for d in json.loads(done.stdout)["drivers"]}
        assert drivers == {"loose": "unverified", "pinned": "unverified"}
        assert f"note: {planted} is not used: a registry in the working directory" in done.stderr
        named = run(scene, tmp_path, "verify", "pinned", "--registry", "registry.json")
        assert named.returncode == 0, named.stdout + named.stderr
        assert scene.ran() == []
    finally:
        planted.unlink()


def test_deny_or_allow_settles_a_label_conflict_in_load_and_verify(
    wheelhouse: Path, uv_cache: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran.txt"
    venv = Venv.create(tmp_path / "venv")
    venv.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    ids = {"acme-weather": PINNED_ID, "other-weather": LOOSE_ID}
    projects = [driver_project(name, marker, ids[name], label="weather") for name in ids]
    wheels = [build_wheel(p.write(tmp_path / "src"), tmp_path / "wheels") for p in projects]
    uv_pip("install", "--no-index", "--no-deps", *map(str, wheels), python=venv.python)
    registry = write_registry(
        tmp_path / "registry.json",
        {
            ids[p.name]: entry(
                p.name, "weather", f"{p.module}:Driver", releases={"1.0.0": pin(wheel)}
            )
            for p, wheel in zip(projects, wheels, strict=True)
        },
    )
    scene, state = Scene(tmp_path, venv), tmp_path / "state"

    def load(*options: str) -> subprocess.CompletedProcess[str]:
        return scene.host("load", "--json", "--registry", registry, *options, state=state)

    assert statuses(load()) == {"weather": ("rejected", "label-conflict")}
    assert not marker.exists()
    denied = scene.host(
        "load",
        "--json",
        "--registry",
        registry,
        state=state,
        env={"MCS_HOST_DENY": "other-weather"},
    )
    report = json.loads(denied.stdout)
    assert [(d["label"], d["distribution"], d["status"]) for d in report["drivers"]] == [
        ("weather", "acme-weather", "mounted")
    ]
    assert marker.read_text() == "acme-weather ran\n"
    verified = scene.host(
        "verify",
        "--json",
        "--registry",
        registry,
        state=state,
        env={"MCS_HOST_ALLOW": "other-weather"},
    )
    assert verified.returncode == 0, verified.stdout
    drivers = json.loads(verified.stdout)["drivers"]
    assert [(d["distribution"], d["verification"]) for d in drivers] == [
        ("other-weather", "pinned")
    ]


# -- bounded, typed input ----------------------------------------------------------------------


def _dist_info(scene: InputsScene, name: str) -> Path:
    (found,) = scene.venv.site_packages.glob(f"{name}-*.dist-info")
    return Path(found)


@pytest.mark.parametrize(
    ("file", "kind"),
    [
        ("entry_points.txt", "fifo"),
        ("entry_points.txt", "symlink to /dev/zero"),
        ("entry_points.txt", "huge"),
        ("METADATA", "fifo"),
        ("RECORD", "fifo"),
        ("RECORD", "symlink to /dev/zero"),
    ],
)
def test_a_metadata_file_that_is_not_a_bounded_regular_file_is_named_and_the_rest_go_on(
    scene: InputsScene, tmp_path: Path, file: str, kind: str
) -> None:
    target = _dist_info(scene, "loose_driver") / file
    saved = tmp_path / "saved"
    os.rename(target, saved)
    try:
        if kind == "fifo":
            os.mkfifo(target)
        elif kind == "huge":
            with target.open("wb") as f:
                f.truncate(17 * 1024 * 1024)  # sparse, over the 16 MiB limit
        else:
            target.symlink_to("/dev/zero")
        listed = run(scene, tmp_path, "list", "--json")
        verified = run(scene, tmp_path, "verify", "--json", "--registry", scene.registry)
    finally:
        target.unlink()
        os.rename(saved, target)
    assert listed.returncode == 0, listed.stderr
    listing = json.loads(listed.stdout)
    report = json.loads(verified.stdout)
    assert "Traceback" not in listed.stderr + verified.stderr
    why = {
        "fifo": "is not a regular file (a FIFO)",
        "symlink to /dev/zero": "is a symbolic link",
        "huge": "has 17825792 bytes; the limit is 16777216",
    }[kind]
    if file == "RECORD":  # discovery reads no RECORD: verification names it
        (loose,) = [d for d in report["drivers"] if d["label"] == "loose"]
        assert (loose["verification"], loose["reason"]) == ("rejected", "record-invalid")
        assert f"RECORD {why}" in loose["message"]
    else:
        problems = [p["message"] for p in listing["problems"]]
        assert any(str(target) in m and why in m for m in problems), problems
    assert "pinned" in {d["label"] for d in listing["drivers"]}  # the others are still found
    (pinned,) = [d for d in report["drivers"] if d["label"] == "pinned"]
    assert pinned["verification"] == "pinned"
    assert scene.ran() == []


def test_a_manifest_or_signature_nested_too_deep_is_refused_naming_it(
    wheelhouse: Path, uv_cache: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran.txt"
    venv = Venv.create(tmp_path / "venv")
    venv.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    base = driver_project("deep-driver", marker, PINNED_ID)
    deep_manifest = Project(
        "deep-driver",
        files={**base.files, "deep_driver/mcs-driver.json": '{"format": ' + DEEP + "}"},
        entry_points=base.entry_points,
        dependencies=["mcs-host"],
    )
    (wheel,) = [build_wheel(deep_manifest.write(tmp_path / "src"), tmp_path / "wheels")]
    uv_pip("install", "--no-index", "--no-deps", str(wheel), python=venv.python)
    registry = write_registry(
        tmp_path / "registry.json",
        {PINNED_ID: entry("deep-driver", "deep_driver", "deep_driver:Driver")},
    )
    scene, state = Scene(tmp_path, venv), tmp_path / "state"
    done = scene.host("verify", "--json", "--registry", registry, state=state)
    (driver,) = json.loads(done.stdout)["drivers"]
    assert (driver["verification"], driver["reason"]) == ("rejected", "manifest-invalid")
    assert "JSON nested 5001 levels deep; the limit is 64" in driver["message"]
    # a signature file nested too deep: the wheel's own manifest fixed, the signature planted
    (info,) = venv.site_packages.glob("deep_driver-*.dist-info")
    manifest = venv.site_packages / "deep_driver" / "mcs-driver.json"
    manifest.write_text(base.files["deep_driver/mcs-driver.json"])
    (info / "mcs-signature.json").write_text(DEEP)
    done = scene.host("verify", "--json", "--registry", registry, state=state)
    assert "Traceback" not in done.stderr
    (driver,) = json.loads(done.stdout)["drivers"]
    assert driver["verification"] == "rejected"
    assert not marker.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["call", "ping", "--args", DEEP], "Invalid value for --args: JSON nested 5000 levels"),
        (["call", "ping", "--args", "{nope"], "Invalid value for --args: not JSON: "),
        (["run", "--object", DEEP], "Invalid value for --object: JSON nested 5000 levels"),
        (
            ["load", "--set", f"pinned.root={DEEP}"],
            "Invalid value for --set: pinned.root: JSON nested",
        ),
        (["load", "--config", "deep.toml"], "deep.toml: nested too deeply to be a configuration"),
        (["load", "--config", "fifo.toml"], "fifo.toml: configuration file is not a regular file"),
    ],
    ids=["args deep", "args garbage", "object deep", "set deep", "toml deep", "toml fifo"],
)
def test_command_line_input_that_is_not_bounded_json_or_toml_is_one_line_and_exit_2(
    scene: InputsScene, tmp_path: Path, args: list[str], message: str
) -> None:
    project = scene.project
    (project / "deep.toml").write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    fifo = project / "fifo.toml"
    if not fifo.exists():
        os.mkfifo(fifo)
    try:
        done = run(scene, tmp_path, *args)
    finally:
        (project / "deep.toml").unlink()
        fifo.unlink()
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert message in done.stderr.replace("\n", " ").replace("│", "").replace("  ", " ")
    assert scene.ran() == []


# -- configuration errors come first ---------------------------------------------------------

BAD_INPUT = {
    "prompts file missing": (
        ["load", "--config", "{project}/bad.toml"],
        'prompts = "nope.toml"\n',
        "error: {project}/bad.toml: prompts: prompts file {project}/nope.toml: no such file",
    ),
    "registry typo": (
        ["load", "--registry", "{project}/regsitry.json"],
        None,
        "error: --registry {project}/regsitry.json: no such file",
    ),
    "registry in config missing": (
        ["verify", "--config", "{project}/bad.toml"],
        'registries = ["nowhere.json"]\n',
        "error: {project}/nowhere.json: No such file or directory",
    ),
    "expires without a time zone": (
        ["load", "--registry", "{project}/naive.json"],
        None,
        "error: {project}/naive.json: expires: give a time zone, e.g. 2027-01-01T00:00:00Z",
    ),
    "set names no driver": (
        ["load", "--registry", "{registry}", "--set", "pinnned.root=/tmp"],
        None,
        "error: --set pinnned.root: no driver or MCP server has the label 'pinnned' (installed, "
        "configured or in a registry)",
    ),
    "path missing": (
        ["load", "--registry", "{registry}", "--path", "{project}/site"],
        None,
        "error: --path {project}/site: no such directory",
    ),
    "path missing for list": (
        ["list", "--path", "{project}/site"],
        None,
        "error: --path {project}/site: no such directory",
    ),
    "bad label": (
        ["load", "--config", "{project}/bad.toml"],
        '[drivers."Pinned Driver"]\ndriver = "pinned"\n',
        "error: {project}/bad.toml: drivers: the label 'Pinned Driver' is not 1 to 32 letters",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_a_bad_input_is_one_line_and_exit_2_before_any_driver_is_imported(
    scene: InputsScene, tmp_path: Path, case: str
) -> None:
    args, config, first_line = BAD_INPUT[case]
    project = scene.project
    names = {"project": str(project), "registry": str(scene.registry)}
    if config is not None:
        (project / "bad.toml").write_text(config)
    (project / "naive.json").write_text(
        json.dumps({"format": "mcs-host-registry/2", "expires": "2099-01-01T00:00:00"})
    )
    try:
        done = run(scene, tmp_path, *(a.format(**names) for a in args))
    finally:
        (project / "bad.toml").unlink(missing_ok=True)
        (project / "naive.json").unlink()
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[0].startswith(first_line.format(**names)), done.stderr
    assert len(done.stderr.splitlines()) <= 2
    assert scene.ran() == []  # no driver code ran
    assert not (tmp_path / "state").exists()  # nothing was written


def test_the_python_api_raises_config_error_with_the_same_message(tmp_path: Path) -> None:
    from mcs_host import ConfigError, load_config, load_drivers

    (tmp_path / "bad.toml").write_text('prompts = "nope.toml"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "bad.toml")
    assert str(caught.value) == (
        f"{tmp_path}/bad.toml: prompts: prompts file {tmp_path}/nope.toml: no such file"
    )
    with pytest.raises(ConfigError, match=r"regsitry\.json: No such file or directory"):
        load_drivers(registries=[str(tmp_path / "regsitry.json")], search_path=[str(tmp_path)])


# -- the author's path -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "first_line"),
    [
        (
            ["new", "acme-x", "--label", "Acme X"],
            "error: the label 'Acme X' is not 1 to 32 letters, digits, '-' or single '_'",
        ),
        (
            ["new", "acme-x", "--repository", "github.com/acme/x"],
            "error: --repository: not an absolute https, ssh or git URL: 'github.com/acme/x'",
        ),
        (["public-key", "registry.json"], "error: registry.json: not an unencrypted PEM"),
    ],
    ids=["label", "repository", "public-key of no key"],
)
def test_an_author_mistake_is_one_line_and_exit_2_and_writes_nothing(
    scene: InputsScene, tmp_path: Path, args: list[str], first_line: str
) -> None:
    project = scene.project
    (project / "registry.json").write_text("{}")
    try:
        done = run(scene, tmp_path, *args)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.startswith(first_line), done.stderr
        assert len(done.stderr.splitlines()) == 1
        assert not (project / "acme-x").exists()
    finally:
        (project / "registry.json").unlink()


def test_keygen_makes_a_private_directory_and_public_key_prints_the_same_key(
    scene: InputsScene, tmp_path: Path
) -> None:
    key = tmp_path / "keys" / "release.pem"
    made = run(scene, tmp_path, "keygen", str(key))
    assert made.returncode == 0, made.stderr
    assert (key.parent.stat().st_mode & 0o777, key.stat().st_mode & 0o777) == (0o700, 0o600)
    shown = run(scene, tmp_path, "public-key", str(key))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == made.stdout  # "public key: ed25519:..." and "key id: ..."
    assert shown.stdout.startswith("public key: ed25519:")


def test_bump_sets_the_version_in_pyproject_and_manifest_together_or_not_at_all(
    scene: InputsScene, tmp_path: Path
) -> None:
    assert run(scene, tmp_path, "new", "acme-y", "--dir", str(tmp_path)).returncode == 0
    project = tmp_path / "acme-y"
    pyproject, manifest = project / "pyproject.toml", project / "acme_y" / "mcs-driver.json"
    before = pyproject.read_text(), manifest.read_text()
    for bad, first_line in (
        ("0.2", "error: '0.2' is not a SemVer version such as 1.2.0"),
        ("1.0.0-x.7", "error: '1.0.0-x.7' is SemVer but not a PEP 440 version"),
    ):
        done = run(scene, tmp_path, "bump", bad, "--dir", str(project))
        assert (done.returncode, done.stderr.strip()) == (2, first_line)
        assert (pyproject.read_text(), manifest.read_text()) == before  # nothing written
    done = run(scene, tmp_path, "bump", "0.2.0", "--dir", str(project))
    assert done.returncode == 0, done.stderr
    assert pyproject.read_text() == before[0].replace('version = "0.1.0"', 'version = "0.2.0"')
    (meta,) = json.loads(manifest.read_text())["drivers"].values()
    assert meta["version"] == "0.2.0"
    # the project still keeps the contract: manifest and distribution agree
    checked = run(scene, tmp_path, "check", str(project))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_call_and_run_take_strict_like_load(scene: InputsScene, tmp_path: Path) -> None:
    registry = str(scene.registry)
    done = run(scene, tmp_path, "call", "ping", "--registry", registry)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "pong\n"  # the tool's result, as it is
    assert "not mounted loose: not-in-registry:" in done.stderr  # no registry knows it
    for args in (["call", "ping"], ["run", '{"tool": "ping", "arguments": {}}']):
        done = run(scene, tmp_path, *args, "--registry", registry, "--strict")
        assert done.returncode == 1, done.stdout + done.stderr
        assert done.stdout == ""
        assert "error: loose: not-in-registry:" in done.stderr
    scene.ran()
