"""Benchmark ``mcs-host add`` of a driver that needs numpy and pandas against ``pip install`` of
it, and ``mcs-host lock`` of what it installed against ``mcs-host verify`` of it.

    python scripts/bench_add.py [--repeat 5]

Builds the driver ``acme-stats`` (it needs mcs-host, numpy and pandas; its tool solves a linear
system with numpy and describes the answer with pandas) into a directory given to pip as
``find-links`` beside the user's pip settings, so numpy, pandas and what they need come from
the index pip is configured for. Makes a venv of its own with this checkout's mcs-host and its
``attest`` extra. Then, taking turns in that venv, each run a whole process timed by its wall
clock: ``mcs-host add acme-stats`` (a new configuration and registry each time) and ``python
-m pip install acme-stats``, the venv put back between runs (what either installed
uninstalled, after checking that both installed the same distributions). Both run without
pip's cache (``PIP_NO_CACHE_DIR``), so each run of either downloads every file it needs from
the index once, as on a machine that never installed them: the same downloads for both (an
index that sends no caching headers, such as this machine's, leaves pip's cache empty anyway,
so a "warm" cache could not be had). A first add, not timed, finds what the driver needs, for
the runs to uninstall. Then, with the driver added (its tool called, its numbers checked),
``mcs-host lock acme_stats`` of the driver and its whole closure into a new registry (which
must pin the very digests add pinned) against ``mcs-host verify`` of the same, after a round
not counted. Reports the min and the median of ``--repeat`` runs, and the ratios of the
medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _bench import SCIENCE_DRIVER, emit

from mcs_host.trust.downloading import pip_config

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = {
    "format": "mcs-driver-manifest/1",
    "drivers": {
        "Driver": {"id": "5c1e0000-0000-4000-8000-0000000000ad", "name": "acme-stats",
                   "version": "1.0.0"}
    },
}  # fmt: skip
PYPROJECT = """\
[build-system]
requires = ["flit_core>=3.9,<5"]
build-backend = "flit_core.buildapi"

[project]
name = "acme-stats"
version = "1.0.0"
description = "A driver that needs numpy and pandas (mcs-host's add benchmark)"
dependencies = ["mcs-host", "numpy", "pandas"]

[project.entry-points."mcs.drivers"]
acme_stats = "acme_stats:Driver"
"""
CALL = '{"matrix": [[2, 1], [1, 3]], "vector": [3, 5]}'


def build_driver(work: Path) -> Path:
    """The driver's wheel, built with flit_core into ``work/links``."""
    source = work / "src"
    (source / "acme_stats").mkdir(parents=True)
    (source / "pyproject.toml").write_text(PYPROJECT)
    (source / "acme_stats" / "__init__.py").write_text(SCIENCE_DRIVER)
    (source / "acme_stats" / "mcs-driver.json").write_text(json.dumps(MANIFEST))
    hook = "import sys, flit_core.buildapi as b; print(b.build_wheel(sys.argv[1]))"
    links = work / "links"
    links.mkdir()
    built = subprocess.run(
        [sys.executable, "-c", hook, str(links)],
        cwd=source,
        check=True,
        capture_output=True,
        text=True,
    )
    return links / built.stdout.strip().splitlines()[-1]


def make_venv(path: Path, env: dict[str, str]) -> Path:
    """A venv at ``path`` with pip and this checkout's mcs-host[attest]: its bin directory."""
    venv.create(path, with_pip=True)
    run([str(path / "bin" / "python"), "-m", "pip", "install", f"{ROOT}[attest]"], env, path)
    return path / "bin"


def run(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``command``; exit with its output when it fails."""
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return done


def turns(
    commands: dict[str, tuple[Callable[[], list[str]], Callable[[], None]]],
    rounds: int,
    env: dict[str, str],
    cwd: Path,
) -> dict[str, list[float]]:
    """Seconds of each command (made by its first callable, after its second put things
    back), the commands taking turns for ``rounds`` rounds."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, (command, reset) in commands.items():
            reset()
            argv = command()
            started = time.perf_counter()
            run(argv, env, cwd)
            times[name].append(time.perf_counter() - started)
    return times


def row(what: str, times: list[float], base: list[float]) -> str:
    ratio = statistics.median(times) / statistics.median(base)
    return f"| {what} | {min(times):.2f} s | {statistics.median(times):.2f} s | {ratio:.2f}x |"


@dataclass(frozen=True)
class Scene:
    """The venv, the environment both commands run in, and the files add writes."""

    work: Path
    bin: Path
    env: dict[str, str]

    @property
    def config(self) -> Path:
        return self.work / "config" / "config.toml"

    @property
    def registry(self) -> Path:
        return self.work / "config" / "registry.json"

    def command(self, name: str, *args: str) -> list[str]:
        return [str(self.bin / name), *args]

    def run(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        return run(self.command(name, *args), self.env, self.work)


def setup(work: Path) -> Scene:
    """The driver's wheel built, the venv made, and the environment: the user's pip settings
    with the driver's directory as one more place to look, and no pip cache."""
    wheel = build_driver(work)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCS_HOST_", "PYTHON"))}
    env.pop("VIRTUAL_ENV", None)
    bin_ = make_venv(work / "venv", env)
    links = [*pip_config(bin_ / "python", env).find_links, str(wheel.parent)]
    env.update(
        PIP_FIND_LINKS=" ".join(links),
        PIP_NO_CACHE_DIR="1",
        MCS_HOST_STATE_DIR=str(work / "state"),
        PATH=f"{bin_}{os.pathsep}{env.get('PATH', '')}",
    )
    return Scene(work, bin_, env)


def add_against_pip(scene: Scene, repeat: int) -> tuple[dict[str, list[float]], list[str]]:
    """The seconds of ``add`` and of ``pip install``, taking turns, add last (so the driver
    is added when it returns), and what they install: ``NAME==VERSION`` each."""
    listed = ("-m", "pip", "list", "--format=freeze", "--exclude-editable")
    made = set(scene.run("python", *listed).stdout.split())
    added: list[str] = []

    def put_back() -> None:
        """The venv as made (what an add or an install brought, which must be the same,
        uninstalled), and a configuration naming the registry add writes, nothing else."""
        if added:
            brought = sorted(set(scene.run("python", *listed).stdout.split()) - made)
            if brought != sorted(added):
                raise SystemExit(f"installed {brought}, where add installs {sorted(added)}")
            scene.run("python", "-m", "pip", "uninstall", "-y", *added)
        shutil.rmtree(scene.config.parent, ignore_errors=True)
        scene.config.parent.mkdir()
        scene.config.write_text('registries = ["registry.json"]\n')

    add = scene.command(
        "mcs-host", "add", "acme-stats", "--config", str(scene.config), "--registry",
        str(scene.registry),
    )  # fmt: skip
    put_back()
    document = json.loads(run([*add, "--json"], scene.env, scene.work).stdout)
    installed = [d for d in document["distributions"] if d["installed"]]
    added += [f"{d['distribution']}=={d['version']}" for d in installed]
    pip = scene.command("python", "-m", "pip", "install", "acme-stats")
    timed = turns(
        {"pip": (lambda: pip, put_back), "add": (lambda: add, put_back)},
        repeat,
        scene.env,
        scene.work,
    )
    return timed, added


def lock_against_verify(scene: Scene, repeat: int) -> dict[str, list[float]]:
    """The seconds of ``verify`` of the added driver and of ``lock`` of it into a new registry
    each time, taking turns, after a round not counted."""
    fresh = (str(scene.work / f"lock-{n}.json") for n in range(1_000_000))
    config = ("--config", str(scene.config))
    timed = turns(
        {
            "verify": (lambda: scene.command("mcs-host", "verify", *config), lambda: None),
            "lock": (
                lambda: scene.command("mcs-host", "lock", "acme_stats", *config, "--registry",
                                      next(fresh)),
                lambda: None,
            ),
        },
        repeat + 1,
        scene.env,
        scene.work,
    )  # fmt: skip
    return {name: times[1:] for name, times in timed.items()}


def _digests(libraries: dict[str, Any]) -> dict[tuple[str, str], str]:
    """(name, version) -> digest of each pin of a registry's libraries."""
    return {
        (name, version): pin["digest"]
        for name, library in libraries.items()
        for version, pin in library["releases"].items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mcs-host-add-"))
    try:
        scene = setup(work)
        timed, added = add_against_pip(scene, args.repeat)
        answer = scene.run("mcs-host", "call", "solve", "--args", CALL, "--config",
                           str(scene.config))  # fmt: skip
        if json.loads(answer.stdout) != {"x": [0.8, 1.4], "mean": 1.1}:
            raise SystemExit(f"the tool answered {answer.stdout}")
        checked = lock_against_verify(scene, args.repeat)
        pinned = json.loads(scene.registry.read_text())["libraries"]
        locked = json.loads((work / "lock-0.json").read_text())["libraries"]
        if _digests(locked) != _digests(pinned):
            raise SystemExit(f"lock pinned {_digests(locked)}, add {_digests(pinned)}")
        pins = [pin for library in pinned.values() for pin in library["releases"].values()]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    files, size = sum(p["files"] for p in pins), sum(p["bytes"] for p in pins)
    lines = [
        "| command | min | median | / baseline (medians) |",
        "|---|---|---|---|",
        row("`pip install acme-stats`", timed["pip"], timed["pip"]),
        row("`mcs-host add acme-stats`: each verified, pinned, installed", timed["add"],
            timed["pip"]),
        row(f"`mcs-host verify` of the driver and its closure ({files} files, "
            f"{size / 2**20:.0f} MiB)", checked["verify"], checked["verify"]),
        row("`mcs-host lock acme_stats` of the same, into a new registry", checked["lock"],
            checked["verify"]),
        "",
        f"acme-stats needs (beyond mcs-host): {', '.join(added[1:]).replace('==', ' ')}. Whole "
        f"processes taking turns, {args.repeat} runs each; `add` and `pip install` into the "
        "same venv, put back between runs, both without pip's cache (each run downloads what "
        "it installs from the index: the same files for both). The baseline of `add` is `pip "
        "install`, that of `lock` is `verify`.",
    ]  # fmt: skip
    emit("Adding a numpy and pandas driver", lines, [], args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
