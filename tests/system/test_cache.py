"""The bytecode cache: a second load unmarshals what the first compiled, and nothing else.

Entries live in ``$MCS_HOST_CACHE_DIR``, which is not trusted; each carries an HMAC under the
key in the state directory. The tests write the entries an attacker with that directory
could (code that leaves a marker) and assert the marker never appears.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import marshal
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from distbuild import Venv, build_wheel, uv_pip
from hostrun import driver_project, entry, pin, run_host, write_registry
from scenes import MarkedScene

pytestmark = pytest.mark.venv

DRIVER_ID = "7c1f0000-0000-4000-8000-0000000000f2"
HEAD = len(b"mcs-host-bytecode/1\n") + 4 + 1 + 32
"""An entry's format line, magic number, optimisation level and source sha256; its HMAC
follows, then the marshalled code."""

# Load in one process and say what the cache did.
APP = """
import json, sys
args = json.loads(sys.argv[1])
exec(args["before"])
from mcs_host import load_drivers
from mcs_host.trust._bytecode import bytecode_cache

driver, report = load_drivers(registries=[args["registry"]])
response = driver.process_llm_response(json.dumps({"tool": "ping", "arguments": {}}))
cache = bytecode_cache()
print(json.dumps({
    "records": {r.label: [r.status, r.reason, r.message] for r in report.records},
    "result": response.tool_call_result,
    "cache": None if cache is None else
        {k: getattr(cache, k) for k in ("hits", "misses", "rejected", "writes")},
}))
"""


@dataclass(frozen=True)
class CacheScene(MarkedScene):
    """The venv with ``cached-driver`` installed, the registry that pins it, and the
    installed source of its package."""

    registry: Path
    source: Path


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path) -> CacheScene:
    root = tmp_path_factory.mktemp("cache")
    marker = root / "ran.txt"
    project = driver_project("cached-driver", marker, DRIVER_ID)
    wheel = build_wheel(project.write(root / "src"), root / "wheels")
    venv = Venv.create(root / "venv")
    venv.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    uv_pip("install", "--no-index", "--no-deps", str(wheel), python=venv.python)
    registry = write_registry(
        root / "registry.json",
        {DRIVER_ID: entry("cached-driver", "cached_driver", "cached_driver:Driver",
                          releases={"1.0.0": pin(wheel)})},
    )  # fmt: skip
    source = venv.site_packages / "cached_driver" / "__init__.py"
    return CacheScene(root=root, venv=venv, marker=marker, registry=registry, source=source)


def load(
    scene: CacheScene, cache: Path, state: Path, before: str = "", write: bool = True
) -> dict[str, Any]:
    args = {"registry": str(scene.registry), "before": before}
    env = {
        "MCS_HOST_CACHE_DIR": str(cache),
        "MCS_HOST_STATE_DIR": str(state),
        "PYTHONDONTWRITEBYTECODE": "" if write else "1",
    }
    done = scene.venv.run("python", "-c", APP, json.dumps(args), env=env)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def entry_of(cache: Path, source: Path) -> Path:
    """The cache entry of the code compiled from ``source``."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    (found,) = cache.glob(f"bytecode/*/{digest[:2]}/{digest[2:]}")
    return found


def test_a_second_load_unmarshals_what_the_first_compiled(
    scene: CacheScene, tmp_path: Path
) -> None:
    cache, state = tmp_path / "cache", tmp_path / "state"
    first = load(scene, cache, state)
    assert first["records"]["cached_driver"][0] == "mounted"
    assert first["cache"]["hits"] == 0
    assert first["cache"]["writes"] >= 1
    stored = entry_of(cache, scene.source)
    key = state / "bytecode.key"
    assert (key.stat().st_mode & 0o777, key.stat().st_size) == (0o600, 32)
    second = load(scene, cache, state)
    assert second["result"] == "pong"
    assert second["cache"]["hits"] == first["cache"]["writes"]
    assert second["cache"]["writes"] == 0
    assert entry_of(cache, scene.source) == stored


def test_a_tampered_cache_entry_never_runs_and_is_compiled_again(
    scene: CacheScene, tmp_path: Path
) -> None:
    cache, state, marker = tmp_path / "cache", tmp_path / "state", scene.marker
    load(scene, cache, state)
    scene.ran()
    stored = entry_of(cache, scene.source)
    genuine = stored.read_bytes()
    evil = compile(f"open({str(marker)!r}, 'a').write('EVIL ran\\n')", "x", "exec")
    payload = marshal.dumps(evil)
    head, mac = genuine[:HEAD], genuine[HEAD : HEAD + 32]
    # the attacker keeps the entry's header and HMAC and swaps the code; or writes it whole
    # under a key of their own; or truncates it
    for tampered in (
        head + mac + payload,
        head + hmac.digest(b"attacker" * 4, head + payload, "sha256") + payload,
        genuine[:-10],
    ):
        stored.write_bytes(tampered)
        result = load(scene, cache, state)
        assert result["records"]["cached_driver"][0] == "mounted"
        assert result["result"] == "pong"
        assert result["cache"]["rejected"] == 1
        assert scene.ran() == ["cached-driver ran"]
        assert stored.read_bytes() == genuine  # compiled again from the verified source


def test_entries_written_under_another_key_are_not_used(scene: CacheScene, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    written = load(scene, cache, tmp_path / "theirs")
    other = load(scene, cache, tmp_path / "ours")
    assert other["cache"]["hits"] == 0
    assert other["cache"]["rejected"] == written["cache"]["writes"]


def test_a_source_swapped_after_verification_finds_no_cache_entry(
    scene: CacheScene, tmp_path: Path
) -> None:
    cache, state, source = tmp_path / "cache", tmp_path / "state", scene.source
    load(scene, cache, state)
    genuine = source.read_bytes()
    swap = f"open({str(source)!r}, 'a').write('\\nEVIL = 1\\n')"
    try:
        result = run_host(
            scene.venv,
            [scene.registry],
            state=state,
            before_import=[swap],
            env={"MCS_HOST_CACHE_DIR": str(cache), "PYTHONDONTWRITEBYTECODE": ""},
        )
        row = result["drivers"]["cached_driver"]
        assert row["imported"] is False
        assert "changed after verification" in row["import_error"]
    finally:
        source.write_bytes(genuine)


def test_under_dont_write_bytecode_nothing_is_written(scene: CacheScene, tmp_path: Path) -> None:
    cache, state = tmp_path / "cache", tmp_path / "state"
    result = load(scene, cache, state, write=False)
    assert result["records"]["cached_driver"][0] == "mounted"
    assert result["cache"] is None  # no key is made only to read
    assert not cache.exists()
    load(scene, cache, state)
    assert load(scene, cache, state, write=False)["cache"]["hits"] >= 1  # entries are read


def test_a_key_others_can_read_authenticates_nothing(scene: CacheScene, tmp_path: Path) -> None:
    cache, state = tmp_path / "cache", tmp_path / "state"
    load(scene, cache, state)
    os.chmod(state / "bytecode.key", 0o644)
    result = load(scene, cache, state)
    assert result["cache"] is None
    assert result["records"]["cached_driver"][0] == "mounted"
