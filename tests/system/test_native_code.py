"""Native code from verified bytes: extension modules and the vendored libraries they link.

A fixture driver is built as auditwheel repairs a binary wheel: two extension modules,
``_one`` and ``_two``, link ``libmid`` through ``RPATH=$ORIGIN/../nativedrv.libs``, which links
``libleaf`` (``$ORIGIN``), which links ``libroot`` with no search path of its own; the
libraries are in ``nativedrv.libs/`` with hashed sonames, as in numpy's ``numpy.libs/``.
Every object's constructor appends who it is to a marker file, so a test sees which bytes the
dynamic linker ran. ``_three`` names a library the wheel does not ship. The driver imports
each extension module at call time.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sysconfig
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

import pytest
from distbuild import Project, Venv, build_wheel, uv_pip, vendor_into_wheel
from hostrun import entry, pin, write_registry
from scenes import MarkedScene

pytestmark = [
    pytest.mark.venv,
    pytest.mark.skipif(shutil.which("gcc") is None, reason="needs a C compiler"),
]

DRIVER_ID = "7c1f0000-0000-4000-8000-0000000000f1"
LEAF, MID, ABSENT = "libleaf-0a1b2c3d.so", "libmid-4e5f6a7b.so", "libabsent-9c8d7e6f.so"
ROOT = "libroot-1f2e3d4c.so"
GENUINE = ["genuine root ran", "genuine leaf ran", "genuine mid ran"]
"""What the genuine libraries announce when linked, leaves first."""
SUFFIX = EXTENSION_SUFFIXES[0]

DRIVER = """\
from mcs_host import MCSToolDriver, Tool
from mcs_host.kit import manifest_meta


class Driver(MCSToolDriver):
    meta = manifest_meta(__package__, "Driver")

    def list_tools(self):
        return [Tool(name=n, description=f"Call extension {n}.") for n in ("one", "two", "three")]

    def execute_tool(self, tool_name, arguments):
        import importlib

        return importlib.import_module(f"nativedrv._{tool_name}").ANSWER
"""

MANIFEST = {
    "format": "mcs-driver-manifest/1",
    "drivers": {
        "Driver": {
            "id": DRIVER_ID,
            "name": "nativedrv",
            "version": "1.0.0",
            "trust": {"publisher": "Fixture Co"},
        }
    },
}


def _constructor(marker: Path, who: str) -> str:
    return textwrap.dedent(
        f"""
        #include <stdio.h>
        __attribute__((constructor)) static void announce(void) {{
            FILE *f = fopen("{marker}", "a");
            if (f) {{ fputs("{who} ran\\n", f); fclose(f); }}
        }}
        """
    )


def _gcc(out: Path, source: str, *flags: str) -> Path:
    c = out.with_suffix(".c")
    c.write_text(source)
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O0", "-o", str(out), str(c), *flags],
        check=True,
        capture_output=True,
    )
    return out


def build_libraries(directory: Path, marker: Path, who: str) -> dict[str, Path]:
    """``libmid``, which links ``libleaf`` through its own ``RPATH``, which links ``libroot``
    with no search path of its own (the linker takes its loaders' ``RPATH``, as for scipy's
    libgfortran); and ``libabsent``. Each announces ``<who> <name>``."""
    directory.mkdir(parents=True, exist_ok=True)
    root = _gcc(
        directory / ROOT,
        _constructor(marker, f"{who} root")
        + f"int root_value(void) {{ return {38 if who == 'genuine' else 600}; }}\n",
        f"-Wl,-soname,{ROOT}",
    )
    leaf = _gcc(
        directory / LEAF,
        _constructor(marker, f"{who} leaf")
        + "int root_value(void);\nint leaf_value(void) { return root_value() + 2; }\n",
        f"-Wl,-soname,{LEAF}",
        f"-L{directory}",
        f"-l:{ROOT}",
    )
    mid = _gcc(
        directory / MID,
        _constructor(marker, f"{who} mid")
        + "int leaf_value(void);\nint mid_value(void) { return leaf_value() + 2; }\n",
        f"-Wl,-soname,{MID}",
        f"-L{directory}",
        f"-l:{LEAF}",
        "-Wl,--disable-new-dtags,-rpath,$ORIGIN",
    )
    absent = _gcc(
        directory / ABSENT,
        _constructor(marker, f"{who} absent") + "int absent_value(void) { return 7; }\n",
        f"-Wl,-soname,{ABSENT}",
    )
    return {ROOT: root, LEAF: leaf, MID: mid, ABSENT: absent}


def build_extension(directory: Path, name: str, value: str, needs: str, libs: Path) -> Path:
    """The extension module ``nativedrv.<name>`` whose ``ANSWER`` is the C expression
    ``value``, linking ``needs`` through ``$ORIGIN/../nativedrv.libs``."""
    source = textwrap.dedent(
        f"""
        #include <Python.h>
        int mid_value(void);
        int absent_value(void);
        static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, NULL}};
        PyMODINIT_FUNC PyInit_{name}(void) {{
            PyObject *m = PyModule_Create(&def);
            if (m) PyModule_AddIntConstant(m, "ANSWER", {value});
            return m;
        }}
        """
    )
    return _gcc(
        directory / f"{name}{SUFFIX}",
        source,
        f"-I{sysconfig.get_paths()['include']}",
        f"-L{libs}",
        f"-l:{needs}",
        "-Wl,--disable-new-dtags,-rpath,$ORIGIN/../nativedrv.libs",
    )


@dataclass(frozen=True)
class NativeScene(MarkedScene):
    """The repaired wheel installed and pinned in ``registry``; ``evil`` the attacker's
    libraries by name."""

    registry: Path
    evil: dict[str, Path]

    def call(self, tool: str, **env: str) -> tuple[int, dict[str, Any]]:
        """``mcs-host call TOOL --json`` with extensions allowed."""
        done = self.host(
            "call", tool, "--json", "--allow-extensions", "--registry", self.registry,
            state=self.root / "state", env=env,
        )  # fmt: skip
        assert done.stdout, done.stderr
        document: dict[str, Any] = json.loads(done.stdout)
        return done.returncode, document


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> NativeScene:
    """The repaired wheel installed and pinned; an attacker's libraries of the same names."""
    root = tmp_path_factory.mktemp("native")
    marker = root / "ran.txt"
    genuine = build_libraries(root / "genuine", marker, "genuine")
    evil = build_libraries(root / "evil", marker, "EVIL")
    project = Project(
        "nativedrv",
        files={
            "nativedrv/__init__.py": DRIVER,
            "nativedrv/mcs-driver.json": json.dumps(MANIFEST),
        },
        entry_points={"mcs.drivers": {"nativedrv": "nativedrv:Driver"}},
        dependencies=["mcs-host"],
    )
    source = project.write(root / "src")
    built = root / "built"
    built.mkdir()
    build_extension(built, "_one", "mid_value()", MID, root / "genuine")
    build_extension(built, "_two", "2 * mid_value()", MID, root / "genuine")
    build_extension(built, "_three", "absent_value()", ABSENT, root / "genuine")
    for each in built.glob(f"*{SUFFIX}"):
        shutil.copy(each, source / "nativedrv" / each.name)
    wheel = vendor_into_wheel(
        build_wheel(source, root / "wheels"),
        {f"nativedrv.libs/{name}": genuine[name] for name in (ROOT, LEAF, MID)},
    )
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    uv_pip("install", "--no-index", "--no-deps", str(wheel), python=venv.python)
    registry = write_registry(
        root / "registry.json",
        {
            DRIVER_ID: entry(
                "nativedrv", "nativedrv", "nativedrv:Driver", releases={"1.0.0": pin(wheel)}
            )
        },
    )
    return NativeScene(root=root, venv=venv, marker=marker, registry=registry, evil=evil)


# One process: load, then call the tools, with code run before each call (a swap).
APP = """
import json, sys
args = json.loads(sys.argv[1])
exec(args["before"])
from mcs_host import load_drivers

driver, report = load_drivers(registries=[args["registry"]], trust={"allow_extensions": True})
out = {"records": {r.label: [r.status, r.reason, r.message] for r in report.records}, "calls": []}
for tool, hook in args["calls"]:
    exec(hook)
    response = driver.process_llm_response(json.dumps({"tool": tool, "arguments": {}}))
    out["calls"].append([response.call_failed, response.call_detail, response.tool_call_result])
print(json.dumps(out))
"""


def app(
    scene: NativeScene,
    calls: list[tuple[str, str]],
    before: str = "",
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    args = {"registry": str(scene.registry), "calls": calls, "before": before}
    done = scene.venv.run(
        "python",
        "-c",
        APP,
        json.dumps(args),
        env={"MCS_HOST_STATE_DIR": str(scene.root / "state"), **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_two_extension_modules_link_their_vendored_libraries_from_verified_bytes(
    scene: NativeScene,
) -> None:
    scene.ran()
    result = app(scene, [("one", ""), ("two", ""), ("one", "")])
    assert result["records"]["nativedrv"][0] == "mounted"
    assert result["calls"] == [[False, None, 42], [False, None, 84], [False, None, 42]]
    # each library ran once, leaves first, from the verified copy; nothing else
    assert scene.ran() == GENUINE
    code, document = scene.call("two")
    assert (code, document["response"]["tool_call_result"]) == (0, 84)
    assert scene.ran() == GENUINE


def test_no_library_on_a_search_path_can_stand_in_for_a_vendored_one(
    scene: NativeScene, tmp_path: Path
) -> None:
    venv, evil = scene.venv, scene.evil
    scene.ran()
    libs = venv.site_packages / "nativedrv.libs"
    planted = libs / ABSENT  # unlisted: the wheel does not ship it
    shutil.copy(evil[ABSENT], planted)
    try:
        # the control: a plain import runs the planted library through $ORIGIN
        plain = venv.run("python", "-c", "import nativedrv._three as t; print(t.ANSWER)")
        assert plain.stdout.strip() == "7"
        assert scene.ran() == ["EVIL absent ran"]
        # the attacker's libleaf and libmid come first on the linker's search path too
        for name in (ROOT, LEAF, MID):
            shutil.copy(evil[name], tmp_path / name)
        env = {"LD_LIBRARY_PATH": str(tmp_path)}
        result = app(scene, [("one", ""), ("two", ""), ("three", "")], env=env)
        (one, two, three) = result["calls"]
        assert (one, two) == ([False, None, 42], [False, None, 84])
        assert three[0] is True
        assert ABSENT in three[1]
        assert scene.ran() == GENUINE
    finally:
        planted.unlink()


@contextmanager
def vendored_leaf(scene: NativeScene) -> Iterator[Path]:
    """The installed ``nativedrv.libs/libleaf``, put back as it was afterwards."""
    scene.ran()
    target = scene.venv.site_packages / "nativedrv.libs" / LEAF
    genuine = target.read_bytes()
    try:
        yield target
    finally:
        target.write_bytes(genuine)


def test_a_tampered_vendored_library_is_refused_before_anything_is_linked(
    scene: NativeScene,
) -> None:
    with vendored_leaf(scene) as target:
        shutil.copy(scene.evil[LEAF], target)
        code, document = scene.call("one")
        (record,) = document["load"]["drivers"]
        assert code == 1
        assert (record["status"], record["verification"]) == ("rejected", "rejected")
        assert f"nativedrv.libs/{LEAF}" in record["message"]
        assert scene.ran() == []


def test_a_library_swapped_after_verification_is_refused_when_first_linked(
    scene: NativeScene,
) -> None:
    with vendored_leaf(scene) as target:
        swap = f"import shutil; shutil.copy({str(scene.evil[LEAF])!r}, {str(target)!r})"
        result = app(scene, [("one", swap), ("two", "")])
        assert result["records"]["nativedrv"][0] == "mounted"
        for failed, detail, value in result["calls"]:
            assert (failed, value) == (True, None)
            assert f"{LEAF} changed after verification" in detail
        assert scene.ran() == []


def test_without_memory_files_verified_copies_keep_the_wheels_layout_and_are_removed(
    scene: NativeScene, tmp_path: Path
) -> None:
    """Where the system has no anonymous memory files (macOS), the verified copies go to a
    private directory in the distribution's layout; it is gone when the process ends."""
    private, seen = tmp_path / "tmp", tmp_path / "seen.json"
    private.mkdir()
    scene.ran()
    before = "import os; del os.memfd_create"
    # what the private directory holds while the process runs, after the first extension
    look = (
        "import json, pathlib; root = pathlib.Path(os.environ['TMPDIR']); "
        f"open({str(seen)!r}, 'w').write(json.dumps(sorted("
        "'/'.join(p.relative_to(root).parts[2:]) for p in root.rglob('*') if p.is_file())))"
    )
    env = {"TMPDIR": str(private)}
    result = app(scene, [("one", ""), ("two", look)], before=before, env=env)
    assert result["calls"] == [[False, None, 42], [False, None, 84]]
    assert scene.ran() == GENUINE
    held = json.loads(seen.read_text())
    assert {f"nativedrv/_one{SUFFIX}", f"nativedrv.libs/{MID}", f"nativedrv.libs/{ROOT}"} <= set(
        held
    )
    assert list(private.iterdir()) == []  # removed when the process ended
