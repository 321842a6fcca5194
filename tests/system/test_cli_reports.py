"""The command line as a user meets it, through the installed console script in a real venv.

Every command's ``--json`` document is checked against the schema published in the installed
package; ``list``, ``verify`` and ``load`` say the same thing about verification and trust,
host plugins included; progress and colour appear on a terminal and nowhere else; and the CSV
driver summarises a large file through ``mcs-host call`` in memory that does not grow with the
file. Fixture drivers and the plugin write a marker file when their code runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from distbuild import ROOT, Project, Venv, build_wheel, uv_pip
from hostrun import driver_project, entry, pin, write_registry
from jsonschema import Draft202012Validator
from pypi_index import LocalIndex, pip_env
from scenes import MarkedScene

from mcs_host.cli.documents import DOCUMENTS
from mcs_host.trust.registry import REGISTRY_FORMAT

pytestmark = pytest.mark.venv

PINNED_ID = "7c1f0000-0000-4000-8000-0000000000c1"
LOOSE_ID = "7c1f0000-0000-4000-8000-0000000000c2"
PLUGIN_ID = "7c1f0000-0000-4000-8000-0000000000c3"

DRIVER = """\
open({marker!r}, "a").write("{name} ran\\n")
import time

from mcs_host import MCSToolDriver, Tool, ToolParameter
from mcs_host.kit import manifest_meta


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        seconds = ToolParameter(
            name="seconds", description="How long.", required=True, schema={{"type": "number"}}
        )
        return [
            Tool(name="{tool}", description="Answer pong."),
            Tool(name="{tool}_slowly", description="Wait, then answer.", parameters=[seconds]),
        ]

    def execute_tool(self, tool_name, arguments):
        if tool_name.endswith("_slowly"):
            time.sleep(arguments["seconds"])
        return "pong"
"""
PLUGIN = """\
open({marker!r}, "a").write("audit-plugin ran\\n")
from mcs_host.loading.hooks import hookimpl


@hookimpl
def mcs_host_after_tool_call(call, result, error):
    pass
"""


def driver(name: str, label: str, tool: str, marker: Path, driver_id: str) -> Project:
    """A pinned-style fixture driver with the tools ``tool`` and ``tool_slowly``."""
    source = DRIVER.format(marker=str(marker), name=name, tool=tool)
    package = name.replace("-", "_")
    return driver_project(
        name, marker, driver_id, label=label, files={f"{package}/__init__.py": source}
    )


@dataclass(frozen=True)
class ReportScene(MarkedScene):
    """The venv with the fixture drivers and plugin; ``full`` pins the pinned driver and the
    plugin, ``bare`` only the driver; ``wheel`` is the pinned driver's."""

    full: Path
    bare: Path
    wheel: Path


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> ReportScene:
    """A venv with mcs-host, the bundled CSV driver, a driver the registry pins (``pinned``,
    trust ``verified``), one no registry knows (``loose``) and a host plugin (``audit``);
    ``full`` pins the driver and the plugin, ``bare`` only the driver."""
    root = tmp_path_factory.mktemp("cli")
    marker = root / "ran.txt"
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host", "mcs-host-csv", "pip", wheelhouse=wheelhouse, cache=uv_cache)
    projects = [
        driver("pinned-driver", "pinned", "ping", marker, PINNED_ID),
        driver("loose-driver", "loose", "pong", marker, LOOSE_ID),
        Project(
            "audit-plugin",
            files={"audit_plugin/__init__.py": PLUGIN.format(marker=str(marker))},
            entry_points={"mcs.host_plugins": {"audit": "audit_plugin"}},
            dependencies=["mcs-host"],
        ),
    ]
    wheels = [build_wheel(p.write(root / "src"), root / "wheels") for p in projects]
    uv_pip("install", "--no-index", "--no-deps", *map(str, wheels), python=venv.python)
    pinned = entry(
        "pinned-driver",
        "pinned",
        "pinned_driver:Driver",
        trust="verified",
        releases={"1.0.0": pin(wheels[0])},
    )
    plugin = entry(
        "audit-plugin",
        "audit",
        "audit_plugin",
        group="mcs.host_plugins",
        releases={"1.0.0": pin(wheels[2])},
    )
    full = write_registry(root / "full.json", {PINNED_ID: pinned, PLUGIN_ID: plugin})
    bare = write_registry(root / "bare.json", {PINNED_ID: pinned})
    return ReportScene(root=root, venv=venv, marker=marker, full=full, bare=bare, wheel=wheels[0])


# -- --json: one document per command, as its published schema says ---------------------------


def test_every_command_prints_one_document_its_published_schema_accepts(
    scene: ReportScene, tmp_path: Path
) -> None:
    venv = scene.venv
    state, full = tmp_path / "state", str(scene.full)
    key, project, added = tmp_path / "keys" / "k.pem", tmp_path / "approved", tmp_path / "add"
    project.mkdir()
    (project / "mcs-host.toml").write_text("healthcheck = true\n")
    (tmp_path / "index.json").write_text(
        json.dumps({"format": REGISTRY_FORMAT, "name": "t", "expires": "2099-01-01T00:00:00Z"})
    )
    commands: list[tuple[str, list[str | Path], int]] = [
        ("list", ["--registry", full], 0),
        ("verify", ["--registry", full], 1),  # loose is unverified: verify says so with exit 1
        ("load", ["--registry", full], 0),
        ("call", ["ping", "--registry", full], 0),
        ("run", ['{"tool": "ping", "arguments": {}}', "--registry", full], 0),
        ("tools", ["--registry", full], 0),
        ("lock", ["--wheel", scene.wheel, "--registry", tmp_path / "locked.json"], 0),
        # installed already, from these very files: pinned, and a table written
        ("add", ["pinned-driver", "--registry", added / "r.json", "--config", added / "c.toml"], 0),
        ("keygen", [key], 0),
        ("public-key", [key], 0),
        ("sign", [scene.wheel, "--key", key, "--output", tmp_path / "signed.whl"], 0),
        ("sign-registry", [tmp_path / "index.json", "--key", key, "--output", tmp_path / "e"], 0),
        ("allow", [project], 0),
        ("new", ["acme-json", "--dir", tmp_path], 0),
        ("bump", ["0.2.0", "--dir", tmp_path / "acme-json"], 0),
        ("check", [tmp_path / "acme-json"], 0),
    ]
    assert {name for name, _, _ in commands} == set(DOCUMENTS)
    schemas = venv.site_packages / "mcs_host" / "schemas"  # as installed, not this checkout
    served = added / "served"
    served.mkdir(parents=True)
    shutil.copy2(scene.wheel, served / scene.wheel.name)
    for name, args, code in commands:
        with LocalIndex(served) if name == "add" else contextlib.nullcontext() as index:
            env = {}
            if index is not None:  # add's pip asks this index, and nothing else
                env = {k: v for k, v in pip_env(index.url).items() if k.startswith("PIP_")}
                env.update(PIP_FIND_LINKS="", HOME=str(added))
            done = scene.host(name, *args, "--json", state=state, env=env)
        assert done.returncode == code, f"{name}: {done.stdout}{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        document = json.loads(done.stdout)  # stdout holds the document and nothing else
        schema = json.loads((schemas / f"cli-{name}.schema.json").read_text())
        errors = [e.message for e in Draft202012Validator(schema).iter_errors(document)]
        assert errors == [], f"{name}: {errors}"
        assert document["schema"] == schema["$id"] == f"urn:mcs-host:cli:{name}:1"
    scene.ran()


def test_a_document_with_a_key_its_schema_does_not_declare_is_refused() -> None:
    """The control: the published schemas are closed, so the test above would notice a key a
    command added without a new schema."""
    schema = json.loads((ROOT / "mcs_host" / "schemas" / "cli-bump.schema.json").read_text())
    good = {"schema": "urn:mcs-host:cli:bump:1", "version": "0.2.0", "changed": []}
    assert list(Draft202012Validator(schema).iter_errors(good)) == []
    assert list(Draft202012Validator(schema).iter_errors({**good, "surprise": 1}))
    assert list(Draft202012Validator(schema).iter_errors({**good, "schema": "urn:x"}))


# -- one vocabulary: VERIFICATION and TRUST ------------------------------------------------------


def _columns(text: str, *wanted: str) -> dict[str, tuple[str, ...]]:
    """``label -> cells`` of the ``wanted`` columns of the table that starts ``text``."""
    table = text[text.index("LABEL ") :].split("\n\n", 1)[0]
    lines = table.splitlines()
    header = lines[0].replace("ENTRY POINT", "ENTRY_POINT").split()
    index = [header.index(w) for w in wanted]
    return {row.split()[0]: tuple(row.split()[i] for i in index) for row in lines[1:]}


def test_verification_and_trust_mean_the_same_in_list_verify_and_load(
    scene: ReportScene, tmp_path: Path
) -> None:
    state, full = tmp_path / "state", str(scene.full)
    expected = {
        ("driver", "pinned"): ("pinned", "verified"),
        ("driver", "loose"): ("unverified", None),
        ("driver", "csv"): ("unverified", None),
        ("plugin", "audit"): ("pinned", "community"),
    }

    def decided(document: dict[str, Any]) -> dict[tuple[str, str], tuple[str, str | None]]:
        rows = [*document["drivers"], *document["plugins"]]
        return {(r["kind"], r["label"]): (r["verification"], r["trust"]) for r in rows}

    listed = scene.host("list", "--json", "--registry", full, state=state)
    verified = scene.host("verify", "--json", "--registry", full, state=state)
    loaded = scene.host("load", "--json", "--registry", full, state=state)
    assert decided(json.loads(listed.stdout)) == expected
    assert decided(json.loads(verified.stdout)) == expected
    mounts = json.loads(loaded.stdout)
    assert decided(mounts) == expected
    status = {r["label"]: r["status"] for r in [*mounts["drivers"], *mounts["plugins"]]}
    assert status == {
        "pinned": "mounted",
        "loose": "rejected",
        "csv": "rejected",
        "audit": "mounted",
    }
    # the tables print the same words under the same headers
    text = {
        name: scene.host(name, "--registry", full, state=state).stdout
        for name in ("list", "verify", "load")
    }
    tables = {name: _columns(out, "VERIFICATION", "TRUST") for name, out in text.items()}
    assert (
        tables["list"]
        == tables["verify"]
        == tables["load"]
        == {
            label: (verification, trust or "-")
            for (_, label), (verification, trust) in expected.items()
        }
    )
    assert _columns(text["list"], "KIND")["audit"] == ("plugin",)
    assert scene.ran() == ["audit-plugin ran", "pinned-driver ran"] * 2  # the two loads


def test_a_host_plugin_no_registry_pins_is_shown_named_when_skipped_and_fatal_when_strict(
    scene: ReportScene, tmp_path: Path
) -> None:
    state, bare = tmp_path / "state", str(scene.bare)
    scene.ran()
    listed = scene.host("list", "--registry", bare, state=state)
    assert _columns(listed.stdout, "KIND", "VERIFICATION", "TRUST")["audit"] == (
        "plugin",
        "unverified",
        "-",
    )
    verified = scene.host("verify", "audit", "--registry", bare, state=state)
    assert verified.returncode == 1
    assert "audit: not-in-registry:" in verified.stdout
    loaded = scene.host("load", "--registry", bare, state=state)
    assert loaded.returncode == 0, loaded.stderr
    assert "audit: not-in-registry:" in loaded.stdout
    called = scene.host("call", "ping", "--registry", bare, state=state)
    assert called.returncode == 0, called.stderr
    assert "not mounted host plugin audit: not-in-registry:" in called.stderr
    for command in (["call", "ping"], ["run", '{"tool": "ping", "arguments": {}}']):
        strict = scene.host(*command, "--registry", bare, "--strict", state=state)
        assert (strict.returncode, strict.stdout) == (1, "")
        assert "error: host plugin audit: not-in-registry:" in strict.stderr
    assert "audit-plugin ran" not in scene.ran()


# -- every refusal says what to do -------------------------------------------------------------


def _after(lines: list[str], start: str) -> str:
    """The line after the first one that starts with ``start``."""
    return lines[next(i for i, line in enumerate(lines) if line.startswith(start)) + 1]


def test_another_build_under_a_pinned_version_says_bump_or_replace_and_replace_works(
    scene: ReportScene, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    scene.ran()
    another = {**pin(scene.wheel), "digest": "sha256:" + "0" * 64}  # another build's pin
    pinned = entry("pinned-driver", "pinned", "pinned_driver:Driver", releases={"1.0.0": another})
    registry = write_registry(tmp_path / "registry.json", {PINNED_ID: pinned})
    verified = scene.host("verify", "pinned", "--registry", registry, state=state)
    assert verified.returncode == 1
    lines = verified.stdout.splitlines()
    fix = _after(lines, "pinned: digest-mismatch: pinned-driver 1.0.0: tree digest ")
    assert fix.startswith(  # as printed, it pins into the registry that was read
        "  fix: if you changed it and trust what is installed now, pin it again: "
        f"`mcs-host lock pinned --replace --registry {registry}`; "
    )
    document = json.loads(
        scene.host("verify", "pinned", "--json", "--registry", registry, state=state).stdout
    )
    (row,) = document["drivers"]
    assert row["reason"] == "digest-mismatch"
    assert row["fix"] == fix.removeprefix("  fix: ")
    # the fix does what it says: lock refuses to re-pin the version without --replace
    refused = scene.host("lock", "pinned", "--registry", registry, state=state)
    assert refused.returncode == 2
    assert "pinned-driver 1.0.0 is already pinned as sha256:000" in refused.stderr
    command = shlex.split(fix.split("`")[1])  # the fix's one command, run as printed
    assert command[:2] == ["mcs-host", "lock"]
    replaced = scene.host(*command[1:], state=state)
    assert replaced.returncode == 0, replaced.stderr
    again = scene.host("verify", "pinned", "--registry", registry, state=state)
    assert again.returncode == 0, again.stdout
    assert "pinned: pinned: matches the pin for 1.0.0" in again.stdout.splitlines()
    assert "fix:" not in again.stdout
    assert scene.ran() == []  # verify and lock import nothing


def test_a_driver_no_registry_knows_says_lock_it_by_label_in_load_and_call(
    scene: ReportScene, tmp_path: Path
) -> None:
    state, registry = tmp_path / "state", tmp_path / "registry.json"
    registry.write_text(scene.bare.read_text())
    loaded = scene.host("load", "loose", "--registry", registry, state=state)
    assert loaded.returncode == 1
    fix = _after(loaded.stdout.splitlines(), "loose: not-in-registry: no registry knows ")
    assert fix == (
        "  fix: check where it came from, then pin it and what it needs as installed: "
        f"`mcs-host lock loose --registry {registry}`; `--allow-unverified` (a driver alone: "
        "`allow_unverified = true` in its table) runs it unpinned, for development only"
    )
    document = json.loads(scene.host("load", "--json", "--registry", registry, state=state).stdout)
    fixes = {d["label"]: d["fix"] for d in [*document["drivers"], *document["plugins"]]}
    assert fixes["loose"] == fix.removeprefix("  fix: ")
    assert fixes["pinned"] is None  # mounted: nothing to do
    # a host plugin: only by name
    assert f"`mcs-host lock --plugin audit --registry {registry}`" in fixes["audit"]
    called = scene.host("call", "ping", "--registry", registry, state=state)
    assert called.returncode == 0, called.stderr
    assert _after(called.stderr.splitlines(), "not mounted loose: not-in-registry: ") == fix
    # doing what it says, as printed, mounts it
    command = shlex.split(fix.split("`")[1])
    assert command[:2] == ["mcs-host", "lock"]
    locked = scene.host(*command[1:], state=state)
    assert locked.returncode == 0, locked.stderr
    loaded = scene.host("load", "loose", "--registry", registry, state=state)
    assert loaded.returncode == 0, loaded.stdout
    assert _columns(loaded.stdout, "STATUS", "VERIFICATION")["loose"] == ("mounted", "pinned")
    assert "mcs-host lock loose" not in loaded.stdout
    # a host plugin's label alone pins nothing: lock names the option that does, which works
    refused = scene.host("lock", "audit", "--registry", registry, state=state)
    assert refused.returncode == 2
    printed = f"mcs-host lock --plugin audit --registry {registry}"
    assert f"`{printed}`" in refused.stderr
    # the plugin ships no mcs-driver.json: lock keys its entry by distribution and label
    locked = scene.host(*shlex.split(printed)[1:], state=state)
    assert locked.returncode == 0, locked.stderr
    entry = json.loads(Path(registry).read_text())["drivers"]["audit-plugin:plugin:audit"]
    assert (entry["distribution"], entry["label"]) == ("audit-plugin", "audit")
    again = scene.host(*shlex.split(printed)[1:], state=state)  # the same entry, not another
    assert again.returncode == 0, again.stderr
    keys = json.loads(Path(registry).read_text())["drivers"]
    assert [k for k, e in keys.items() if e["label"] == "audit"] == ["audit-plugin:plugin:audit"]
    document = json.loads(scene.host("load", "--json", "--registry", registry, state=state).stdout)
    assert [(p["label"], p["status"]) for p in document["plugins"]] == [("audit", "mounted")]
    scene.ran()


def test_lock_of_a_driver_its_manifest_does_not_name_says_so_and_what_to_add(
    scene: ReportScene, tmp_path: Path
) -> None:
    """A class added to a distribution whose mcs-driver.json names only the old one: lock
    names the manifest and what it lacks, not a manifest that is not shipped."""
    project = driver_project(
        "grown-driver", scene.marker, "7c1f0000-0000-4000-8000-0000000000c4",
        label="newer", entry_point="grown_driver:NewDriver",
    )  # fmt: skip
    wheel = build_wheel(project.write(tmp_path / "src"), tmp_path / "wheels")
    done = scene.host(
        "lock", "--wheel", wheel, "--registry", tmp_path / "r.json", state=tmp_path / "state"
    )
    assert done.returncode == 2
    assert "ships no" not in done.stderr
    assert (
        "grown-driver 1.0.0: driver 'newer' (grown_driver:NewDriver): grown_driver/"
        "mcs-driver.json names Driver, not 'NewDriver': add the meta of NewDriver to its "
        '"drivers" and release again, or give its id with --id newer=ID'
    ) in " ".join(done.stderr.split())
    assert not (tmp_path / "r.json").exists()


# -- progress and colour: on a terminal, and only there ------------------------------------------


def on_terminal(scene: ReportScene, state: Path, *args: str | Path, **env: str) -> tuple[int, str]:
    """Run the console script with stdout and stderr on a pseudo-terminal; its exit code and
    everything it wrote there."""
    venv = scene.venv
    leader, follower = pty.openpty()
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("MCS_HOST_", "PYTHON"))}
    environment.pop("NO_COLOR", None)
    environment.pop("FORCE_COLOR", None)
    environment.update({"TERM": "xterm", "MCS_HOST_STATE_DIR": str(state), **env})
    child = subprocess.Popen(
        [str(venv.bin / "mcs-host"), *map(str, args)],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env=environment,
        cwd=venv.path,
    )
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            child.kill()
            raise AssertionError(f"mcs-host {args} wrote nothing for 60 s")
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return child.wait(timeout=60), b"".join(chunks).decode()


GREEN_PINNED = "\x1b[32mpinned\x1b[0m"
PROGRESS = re.compile(r"\r\x1b\[K\[(\d+)/(\d+)\] (verifying|loading|hashing) ")


def test_progress_and_colour_show_on_a_terminal_only(scene: ReportScene, tmp_path: Path) -> None:
    state, full = tmp_path / "state", str(scene.full)
    code, screen = on_terminal(scene, state, "verify", "--registry", full)
    assert code == 1
    steps = PROGRESS.findall(screen)
    assert [(n, of, what) for n, of, what in steps] == [
        (str(i), "4", "verifying") for i in range(1, 5)
    ]
    assert GREEN_PINNED in screen
    code, screen = on_terminal(scene, state, "load", "--registry", full)
    assert ("loading" in {w for _, _, w in PROGRESS.findall(screen)}, code) == (True, 0)
    assert "\x1b[32mmounted\x1b[0m" in screen
    # a tool call that runs for a while says so, then the line is erased
    code, screen = on_terminal(
        scene, state, "call", "ping_slowly", "--args", '{"seconds": 2.2}', "--registry", full
    )
    assert code == 0, screen
    assert re.search(r"tool ping_slowly running: \d\.\d s", screen), screen
    # its result, on a line of its own once the ticker erased its line
    assert re.search(r"(^|\n|\x1b\[K)pong\r?\n", screen), screen
    # NO_COLOR: progress still, colour never
    code, screen = on_terminal(scene, state, "verify", "--registry", full, NO_COLOR="1")
    assert PROGRESS.search(screen)
    assert "\x1b[3" not in screen
    # --json on a terminal: the document alone
    code, screen = on_terminal(scene, state, "verify", "--json", "--registry", full)
    assert "\x1b" not in screen
    assert json.loads(screen)["schema"] == "urn:mcs-host:cli:verify:1"
    # piped: neither; FORCE_COLOR colours piped output
    piped = scene.host("verify", "--registry", full, state=state)
    assert "\x1b" not in piped.stdout + piped.stderr
    assert "\r" not in piped.stdout + piped.stderr
    forced = scene.host("verify", "--registry", full, state=state, env={"FORCE_COLOR": "1"})
    assert GREEN_PINNED in forced.stdout
    assert not PROGRESS.search(forced.stderr)  # progress needs a terminal, whatever the colour
    # lock counts the releases it hashes
    code, screen = on_terminal(
        scene, state, "lock", "pinned", "loose", "--registry", tmp_path / "r.json"
    )
    assert code == 0, screen
    assert [(n, of, w) for n, of, w in PROGRESS.findall(screen)] == [
        ("1", "2", "hashing"),
        ("2", "2", "hashing"),
    ]
    scene.ran()


def test_an_error_on_a_terminal_is_one_red_line(scene: ReportScene, tmp_path: Path) -> None:
    code, screen = on_terminal(scene, tmp_path, "verify", "--registry", tmp_path / "missing.json")
    assert code == 2
    assert (
        screen.strip()
        == f"\x1b[31merror:\x1b[0m --registry {tmp_path / 'missing.json'}: no such file"
    )


# -- the CSV driver scales, through the console script -------------------------------------------

PEAK = """\
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(done.returncode, peak, done.stdout, sep="\\n", end="")
"""


def test_summarize_column_of_a_60_mb_csv_runs_in_memory_that_does_not_grow_with_the_file(
    scene: ReportScene, tmp_path: Path
) -> None:
    venv = scene.venv
    data = tmp_path / "data"
    data.mkdir()
    block = "".join(f"{i},region-{i % 7},{i % 1000}.25,note number {i}\n" for i in range(20000))
    small, large = data / "small.csv", data / "large.csv"
    for path, target in ((small, 6_000_000), (large, 60_000_000)):
        with path.open("w") as f:
            f.write("id,region,amount,note\n")
            written = 0
            while written < target:
                written += f.write(block)

    def summarize(path: Path) -> tuple[dict[str, Any], int]:
        args = json.dumps({"file": path.name, "column": "amount"})
        done = venv.run(
            "python", "-c", PEAK, venv.bin / "mcs-host", "call", "summarize_column",
            "--args", args, "--registry", ROOT / "registry.json", "--set", f"csv.root={data}",
            env={"MCS_HOST_STATE_DIR": str(tmp_path / "state")},
        )  # fmt: skip
        code, peak, out = done.stdout.split("\n", 2)
        assert code == "0", done.stdout + done.stderr
        return json.loads(out), int(peak)  # call prints the tool's result

    small_result, small_peak = summarize(small)
    large_result, large_peak = summarize(large)
    assert large.stat().st_size > 60_000_000
    rows = large_result["count"]
    assert rows == (large.read_bytes().count(b"\n") - 1)
    assert large_result["max"] == 999.25
    assert small_result["count"] < rows / 9
    # ten times the file, the same memory: within 16 MiB, far below the 60 MB read
    assert large_peak - small_peak < 16 * 1024, (small_peak, large_peak)
    scene.ran()


# -- the shared options: each command takes its own, and each reaches the configuration ---------

LOADING = (
    *("--config", "--registry", "--registry-key", "--threshold", "--allow-unverified"),
    *("--allow-extensions", "--strict", "--healthcheck", "--set", "--path", "--isolate"),
)
SHARED = {  # each command that reads a configuration: its shared options (docs/reference/cli.md)
    "list": ("--path", "--config", "--registry", "--registry-key", "--threshold"),
    "verify": (
        *("--path", "--config", "--registry", "--registry-key", "--threshold"),
        *("--allow-unverified", "--allow-extensions", "--set"),
    ),
    "load": LOADING,
    "serve": LOADING,
    "call": LOADING,
    "run": LOADING,
    "tools": LOADING,
    "lock": ("--config", "--path"),
}
COMMAND_LINE = {  # what each needs besides, to reach its configuration
    "call": ["call", "ping"],
    "run": ["run", "an answer"],
    "lock": ["lock", "--server", "remote"],  # the MCP server to pin, as a configuration names it
}


class _Read(Exception):  # noqa: N818 - a signal, not an error
    """The command built its configuration (``config``): it goes no further."""

    def __init__(self, config: Any) -> None:
        self.config = config


@pytest.mark.parametrize("command", sorted(SHARED))
def test_each_command_takes_exactly_its_shared_options_and_each_reaches_the_configuration(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each shared option a command documents changes the configuration it builds (the real
    one, read from a real file) in the field it names and nowhere else; any other is a usage
    error. In process: the command
    stops once its configuration is built."""
    from typer.testing import CliRunner

    from mcs_host.cli.app import build
    from mcs_host.cli.options import HostOptions

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for name in [n for n in os.environ if n.startswith("MCS_HOST_")]:
        monkeypatch.delenv(name)
    registry, missing, config = (
        tmp_path / "registry.json",
        tmp_path / "missing",
        tmp_path / "c.toml",
    )
    registry.write_text("{}")
    config.write_text('namespace = "always"\n[drivers.a.settings]\n')
    key = "ed25519:" + "A" * 43 + "="  # 32 zero bytes
    words = {
        "--config": ["--config", str(config)],
        "--registry": ["--registry", str(registry)],
        "--registry-key": ["--registry-key", key],
        "--threshold": ["--threshold", "2"],
        "--allow-unverified": ["--allow-unverified"],
        "--allow-extensions": ["--no-allow-extensions"],  # allowed is the default
        "--strict": ["--strict"],
        "--healthcheck": ["--healthcheck"],
        "--set": ["--config", str(config), "--set", "a.key=1"],
        "--path": ["--path", str(missing)],
        "--isolate": ["--isolate"],
    }
    changes: dict[str, dict[str, Any]] = {  # what each changes in the configuration read
        # a file that names drivers loads only those (autoload off)
        "--config": {"namespace": "always", "drivers": {"a": {}}, "autoload": False},
        "--registry": {"registries": (str(registry),)},
        "--registry-key": {"registry_keys": (key,)},
        "--threshold": {"registry_threshold": 2},
        "--allow-unverified": {"trust.allow_unverified": True},
        "--allow-extensions": {"trust.allow_extensions": False},
        "--strict": {"strict": True},
        "--healthcheck": {"healthcheck": True},
        "--set": {"namespace": "always", "drivers": {"a": {"key": 1}}, "autoload": False},
        "--isolate": {"isolation": "process"},
    }
    assert set(words) == set(LOADING)
    built = HostOptions.host_config

    def stop_when_built(options: HostOptions) -> Any:
        raise _Read(built(options))

    monkeypatch.setattr(HostOptions, "host_config", stop_when_built)
    start = COMMAND_LINE.get(command, [command])
    if command == "lock":
        start = [*start, "--registry", str(tmp_path / "pins.json")]  # its own: what it writes

    def read(*args: str) -> Any:
        done = CliRunner().invoke(build(command), [*start, *args])
        return done.exception.config if isinstance(done.exception, _Read) else done

    def fields(config: Any) -> dict[str, Any]:
        dumped = config.model_dump()
        trust = {f"trust.{k}": v for k, v in dumped.pop("trust").items()}
        drivers = {label: d["settings"] for label, d in dumped.pop("drivers").items()}
        return {**dumped, **trust, "drivers": drivers}

    baseline = fields(read())
    for option in LOADING:
        if command == "lock" and option == "--registry":
            continue  # its own: the file it writes
        done = read(*words[option])
        if option not in SHARED[command] or option == "--path":
            given = "--no-allow-extensions" if option == "--allow-extensions" else option
            why = f"No such option: {given}"
            if option == "--path" and option in SHARED[command]:
                why = f"--path {missing}: no such directory"
            assert done.exit_code == 2, (option, done.output)
            assert why in done.output, (option, done.output)
            continue
        changed = {k: v for k, v in fields(done).items() if baseline.get(k) != v}
        changed.pop("source", None)  # the file read, with --config
        changed.pop("notes", None)
        assert changed == changes[option], option
