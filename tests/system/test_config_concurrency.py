"""Approvals and registry states written by several processes at once: none is lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import os, sys, time
ready, go = sys.argv[1], sys.argv[2]
open(ready, "w").close()
while not os.path.exists(go):  # the barrier: every child starts its update together
    time.sleep(0.001)
{body}
"""


APPROVE = (
    "from mcs_host.loading.config_project import approve_directory\napprove_directory(sys.argv[3])"
)


ACCEPT = (
    "from mcs_host.trust.registry import RegistryState\n"
    "RegistryState(sys.argv[3]).accept(sys.argv[4], 1, 'ab' * 32, sys.argv[4] + '.json')"
)


def together(tmp_path: Path, body: str, args: list[list[str]], env: dict[str, str]) -> None:
    """Run one child per ``args`` with ``body``, each starting its update once all are
    ready; every child must succeed."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    go = barrier / "go"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD.format(body=body), str(barrier / f"{n}"), str(go), *a],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, a in enumerate(args)
    ]
    while len(list(barrier.iterdir())) < len(children):
        assert all(c.poll() is None for c in children), [c.communicate() for c in children]
        time.sleep(0.01)
    go.touch()
    for child in children:
        out, err = child.communicate()
        assert child.returncode == 0, out + err


WRITERS = 12


def test_approvals_made_at_once_are_all_recorded(tmp_path: Path) -> None:
    directories = [tmp_path / f"project-{n}" for n in range(WRITERS)]
    for directory in directories:
        directory.mkdir()
        (directory / "mcs-host.toml").write_text(f"# {directory.name}\n")
    state = tmp_path / "state"
    together(tmp_path, APPROVE, [[str(d)] for d in directories], {"MCS_HOST_STATE_DIR": str(state)})
    recorded = json.loads((state / "approved-directories.json").read_text())["approvals"]
    assert sorted(recorded) == sorted(os.path.realpath(d) for d in directories)


def test_registry_states_recorded_at_once_are_all_kept(tmp_path: Path) -> None:
    state = tmp_path / "state" / "registry-state.json"
    lineages = [f"{tmp_path}/lineage-{n}" for n in range(WRITERS)]
    together(tmp_path, ACCEPT, [[str(state), lineage] for lineage in lineages], {})
    document = json.loads(state.read_text())
    assert sorted(k for k in document if k != "signed-paths") == sorted(lineages)
    assert sorted(document["signed-paths"].values()) == sorted(lineages)
